"""Devices, and the buffers that live on them.

A device is registered by name (NUMPY, PYTHON, C, NEON, LLVM, the GPU devices GPU (OpenCL; alias
CL), CUDA and WEBGPU, and WASM). All devices keep their memory in host numpy arrays (which the
compiled backends pass
to kernels as pointers; a GPU device keeps a second copy in its own memory), aligned to 64 bytes, a
cache line, so that vector loads do not straddle two lines. The memory of buffers that die
is kept in a pool and handed to the next buffer of the same byte size (see MemoryPool). Each device
supplies what the engine's lowering (tinyedu/engine/lower.py) needs to turn a kernel AST into a
program:

- `renderer(name, uops)`: the program's source (C: C source; PYTHON: the UOps themselves), or
  None for a device that interprets the AST as it is (NUMPY, the oracle);
- `compiler`: `compiler.build(source)` turns the source into something loadable (C: a checked
  cache entry of a shared library), or None;
- `runtime(name, binary, launch)`: the program, called as `program([out, *inputs])` (`launch`: a GPU
  kernel's launch dimensions, None for a CPU kernel);
- `vector_width` and `threads()`: what the optimizer may use on this device.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any, Callable, Protocol

import numpy as np

from tinyedu.core.device import Registry
from tinyedu.core.dtype import DType
from tinyedu.core.helpers import GlobalCounters, getenv
from tinyedu.launch import GPULimits, LaunchDims

ALIGNMENT = 64  # bytes: one cache line, and one AVX-512 register


class Memory:
    """A buffer's host memory: `array`, aligned, carved out of `raw` (the bytes numpy allocated),
    and the address where `array` starts (for a CPU kernel's pointer argument, looked up once: the
    lookup costs about a microsecond, paid for every argument of every kernel a step runs)."""

    __slots__ = ("raw", "array", "address")

    def __init__(self, nbytes: int):
        self.raw = np.empty(nbytes + ALIGNMENT, dtype=np.uint8)
        address = self.raw.ctypes.data
        start = -address % ALIGNMENT
        self.array, self.address = self.raw[start:start + nbytes], address + start


class MemoryPool:
    """Memory of freed buffers, kept to be handed out again to a new buffer of the same byte size.

    Why: a new buffer's memory costs twice. Fresh memory from the operating system is mapped page
    by page on first touch, so a kernel writing a new 64 MB output spends about as long in page
    faults as in its own work; and carving an aligned array out of new bytes takes a handful of
    numpy calls (a few microseconds), which for the dozen small intermediates of an eager step is
    most of what a Buffer costs. An eager step needs the same buffers as the step before it, so
    handing the memory of the last step's dead buffers to this step's new ones skips both.

    The reuse rule: memory comes back here only when its Buffer dies *and* nothing else can still
    see it: no numpy array made from `as_numpy()` survives the buffer (Buffer.__del__ checks the
    reference counts), and the buffer's memory was not replaced by other memory. So memory handed
    out again is never still read or written by anyone. At most LIMIT bytes and MAX_ARRAYS arrays
    are kept, the oldest dropped first.
    """

    LIMIT = 1 << 29      # bytes kept at most (512 MB)
    MAX_ARRAYS = 4096    # arrays kept at most (many small ones cost the lookups nothing, but memory)

    def __init__(self) -> None:
        self.free: dict[int, list[Memory]] = {}  # by byte size, the newest last
        self.order: dict[int, Memory] = {}        # every kept one by id, the oldest first (for dropping)
        self.bytes = 0

    def take(self, nbytes: int) -> Memory:
        """Memory for `nbytes`: kept memory of that size, else new."""
        kept = self.free.get(nbytes)
        if not kept:
            return Memory(nbytes)
        memory = kept.pop()
        del self.order[id(memory)]
        self.bytes -= nbytes
        return memory

    def give(self, memory: Memory) -> None:
        """Keep `memory` (which nobody else can see any more) for a later buffer of its size."""
        nbytes = memory.array.nbytes
        if nbytes > self.LIMIT:
            return
        while self.order and (self.bytes + nbytes > self.LIMIT or len(self.order) >= self.MAX_ARRAYS):
            oldest = self.order.pop(next(iter(self.order)))
            same_size = self.free[oldest.array.nbytes]
            same_size.pop(next(k for k, m in enumerate(same_size) if m is oldest))
            self.bytes -= oldest.array.nbytes
        self.free.setdefault(nbytes, []).append(memory)
        self.order[id(memory)] = memory
        self.bytes += nbytes

    def clear(self) -> None:
        self.free.clear()
        self.order.clear()
        self.bytes = 0


POOL = MemoryPool()


CORES = os.cpu_count() or 1


def thread_count() -> int:
    """THREADS=n, default the number of cores: how many threads a kernel may use. With ASYNC=1 the
    default is one core fewer, which the Python thread keeps (tinyedu/runtime/launch_queue.py)."""
    threads = int(getenv("THREADS", max(1, CORES - 1) if getenv("ASYNC", 0) else CORES))
    if threads < 1:
        raise ValueError(f"THREADS={threads}: expected a number of threads >= 1 (1 runs every kernel "
                         "on one thread)")
    return threads




class DeviceMemory(Protocol):
    """A buffer's copy in a GPU's own memory, as its runtime allocates it."""

    def upload(self, host: np.ndarray) -> None: ...      # host array -> device memory

    def download(self, host: np.ndarray) -> None: ...    # device memory -> host array


class InFlight:
    """Kernels that may still be running while Python goes on (ASYNC=1: tinyedu/runtime/launch_queue.py).

    Launches are numbered 1, 2, ...; `finished` is the last one known to have finished, and a
    buffer's `pending` the last one that uses its memory. Before the host reads or writes a buffer's
    memory, it waits for that launch (`wait`, installed by the queue). Without ASYNC nothing is ever
    pending, and the check is one comparison."""

    finished = 0
    wait: Callable[[int], None] = staticmethod(lambda number: None)


class Buffer:
    """`size` elements of `dtype` in a device's memory.

    `version` counts in-place writes (`Tensor.assign`), so that a computation planned before a
    write cannot silently read the values after it; `serial` numbers buffers in order of creation
    (TinyJit uses it to tell the buffers a step made from the ones that existed before).
    """

    live: int = 0  # buffers alive right now (a leak shows up as a number that keeps growing)
    _serial: int = 0
    pending: int = 0        # the last queued launch that uses this memory (see InFlight); 0: none
    pending_write: int = 0  # the last one that writes it

    def __init__(self, device: str, size: int, dtype: DType):
        self.device, self.size, self.dtype = device, size, dtype
        self.nbytes = size * dtype.itemsize
        self._held = memory = POOL.take(self.nbytes)  # (given back to the pool when this buffer dies)
        if memory.array.dtype.type is not dtype.np:  # memory kept from a buffer of another dtype
            memory.array = memory.array.view(dtype.np)
        self._memory = memory.array
        self.version = 0
        self.readers: Any = None  # the computations planned on this memory (kept by tinyedu/lazy.py)
        # A GPU device keeps a second copy in its own memory (`device_memory`, made by its runtime). The
        # two copies take turns being current: a kernel writes the device copy, `as_numpy()` reads the
        # host copy, and each side is copied over only when the other wrote since (see device_copy).
        self.device_memory: DeviceMemory | None = None
        self.host_current, self.device_current = True, False
        self.serial = Buffer._serial
        Buffer._serial += 1
        GlobalCounters.mem_used += self.nbytes
        Buffer.live += 1

    @staticmethod
    def next_serial() -> int:
        """The serial number the next buffer will get."""
        return Buffer._serial

    def __del__(self) -> None:
        GlobalCounters.mem_used -= self.nbytes
        Buffer.live -= 1
        held, array = self.__dict__.pop("_held", None), self.__dict__.pop("_memory", None)
        # Back to the pool only if nothing else can see this memory (MemoryPool's rule). The references
        # to `array` here are the local name, getrefcount's argument and the pool's record; those to
        # the raw bytes are the record's, getrefcount's argument and the array's base. A numpy array
        # from as_numpy() still alive, or a view of it, holds one more, and then the memory is not
        # handed out again. Nor is memory that replaced the buffer's own (the array is not the record's).
        if held is not None and held.array is array and sys.getrefcount(array) == 3 and \
                sys.getrefcount(held.raw) == 3:
            POOL.give(held)

    def copyin(self, data: np.ndarray) -> "Buffer":
        if self.pending > InFlight.finished:
            InFlight.wait(self.pending)
        flat = np.ascontiguousarray(data, dtype=self.dtype.np).reshape(-1)
        if flat.size != self.size:
            raise ValueError(f"copyin: {flat.size} elements into a buffer of {self.size}")
        self._memory[:] = flat
        self.host_current, self.device_current = True, False
        return self

    def as_numpy(self, write: bool = True) -> np.ndarray:
        """The memory itself, as a flat numpy array (no copy: do not keep it around). On a GPU device
        the device copy is fetched first if a kernel wrote it, and counts as stale afterwards (the
        caller may write into the array). `write=False` promises only to read it: then queued kernels
        that only read it too are not waited for (ASYNC=1)."""
        waits = self.pending if write else self.pending_write
        if waits > InFlight.finished:  # a queued kernel still uses it (ASYNC=1)
            InFlight.wait(waits)
        if not self.host_current:
            self.device_memory.download(self._memory)
            self.host_current = True
        self.device_current = False
        return self._memory

    def host_address(self, queued: bool = False) -> int:
        """The address of the host memory (what as_numpy() returns), for a CPU kernel's pointer
        argument: the one the memory was made with (see Memory), unless the memory was replaced since,
        or a GPU's copy has to be fetched first. A kernel called now waits for the queued kernels that
        use this memory; one `queued` behind them (ASYNC=1) runs after them anyway."""
        if self.device_memory is None and self._held.array is self._memory:
            if self.pending > InFlight.finished and not queued:
                InFlight.wait(self.pending)
            return self._held.address
        return (self._memory if queued else self.as_numpy()).ctypes.data

    def device_copy(self, allocate: Callable[[int], DeviceMemory]) -> DeviceMemory:
        """This buffer in a GPU's memory, for a kernel to use: allocated on first use with
        `allocate(nbytes)`, and uploaded when the host copy changed since."""
        if self.device_memory is None:
            self.device_memory = allocate(max(self.nbytes, 1))
        if not self.device_current:
            self.device_memory.upload(self._memory)
            self.device_current = True
        return self.device_memory

    def written_on_device(self) -> None:
        """A kernel wrote the device copy: the host copy is stale until the next as_numpy()."""
        self.host_current, self.device_current = False, True

    def __repr__(self) -> str:
        return f"<Buffer {self.device} {self.size} {self.dtype.name}>"


Runner = Callable[[list[Buffer]], None]


def cpu_only(device: str, name: str, launch: LaunchDims | None) -> None:
    """A CPU device's runtime gets no launch dimensions: those belong to GPU kernels."""
    if launch is not None:
        raise ValueError(f"{device}: kernel {name} asks for a GPU launch ({launch}); {device} runs CPU "
                         "kernels only (lower it for GPU or CUDA)")


class DeviceUnavailable(RuntimeError):
    """This machine cannot run the device (a compiler, emulator or library is missing); the message
    says what to install."""


class DeviceBackend(Protocol):
    name: str
    renderer: Callable | None
    compiler: Any
    runtime: Callable[..., Runner]
    vector_width: int

    def threads(self) -> int: ...


class Backend:
    """What every device shares: `programs`, where the engine's lowering caches what it built, and
    `limits`: a GPU's (workgroup size, shared memory, ...), None on a CPU."""

    name = ""
    limits: GPULimits | None = None

    def __init__(self) -> None:
        self.programs: dict = {}

    def check_runnable(self) -> None:
        """Raise DeviceUnavailable, saying what is missing, if this machine cannot run the device's
        kernels. A device that exists can run them, except CUDA without a GPU (it still compiles)."""


class _DeviceRegistry(Registry):
    """`Device["C"]` gives the C backend; `Device.DEFAULT` is $DEVICE or the default device.

    The core's Registry (tinyedu/core/device.py): devices plug in with `register` and are found with
    `Device[name]`. This one adds aliases ("CL" is GPU), numbered devices ("C:1" shares C's backend)
    and a default, and fills in the core's `find`: the first time a device is asked for, it imports
    tinyedu/runtime/ops_<name>.py and registers what that module's `create_device()` makes. So
    importing tinyedu loads no GPU library, and a device of your own plugs in with
    `Device.register(backend)` (a backend with a `name`, as the ones in ops_*.py).
    """

    known = ("NUMPY", "PYTHON", "C", "NEON", "LLVM", "GPU", "CUDA", "WEBGPU", "WASM")
    aliases = {"CL": "GPU"}  # OpenCL's usual name
    fallback = "C"  # the default device: kernels compiled from generated C (set DEVICE= to change)

    def canonicalize(self, name: str | None) -> str:
        if name is None:
            return self.DEFAULT
        if not isinstance(name, str):
            raise TypeError(f"device: expected a device name string, got {type(name).__name__}; "
                            f"valid devices are {', '.join(self.known)}")
        kind, colon, index = name.partition(":")
        upper = self.aliases.get(kind.upper(), kind.upper())
        if upper not in self.known and upper not in self.devices:
            raise ValueError(f"device: unknown device {name!r}; valid devices are {', '.join(self.known)}")
        # Several devices of one kind are numbered: "C:1" is a second C device (its own buffers; a copy
        # between C and C:1 is an explicit item). Number 0 is the plain name: "C" and "C:0" are the same.
        if colon and not (index.isdigit() and index.isascii() and (index == "0" or index[0] != "0")):
            raise ValueError(f"device: {name!r} is not a valid device string; write {upper!r} or "
                             f"'{upper}:n' with a device number n (0, 1, 2, ...)")
        return upper if not colon or index == "0" else f"{upper}:{index}"

    @staticmethod
    def kind(name: str) -> str:
        """The kind of a canonical device name: "C:1" -> "C" (its backend is the kind's)."""
        return name.partition(":")[0]

    @property
    def DEFAULT(self) -> str:  # noqa: N802 - reads like a constant
        return self.canonicalize(os.environ.get("DEVICE") or self.fallback)

    def find(self, name: str) -> None:
        """Import the device's module, tinyedu/runtime/ops_<name>.py, and register its device."""
        module_name = f"tinyedu.runtime.ops_{name.lower()}"
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as missing:  # this tinyedu has no module for the device
            if missing.name != module_name:
                raise
            raise DeviceUnavailable(f"{name} device: this tinyedu has no {module_name}") from None
        self.register(module.create_device())

    def __getitem__(self, name: str) -> DeviceBackend:
        # (a registered kind's own name, as the engine passes it: found at once, nothing to canonicalize)
        backend = self.devices.get(name) if type(name) is str else None
        if backend is not None:
            return backend
        name = self.kind(self.canonicalize(name))  # (every numbered device of a kind shares its backend)
        return self.devices[name] if name in self.devices else super().__getitem__(name)


Device = _DeviceRegistry()
