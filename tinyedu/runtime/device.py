"""Devices, and the buffers that live on them.

A device is registered by name (NUMPY, PYTHON, C, NEON, LLVM, the GPU devices GPU (OpenCL; alias
CL), CUDA and WEBGPU, and WASM). All devices keep their memory in host numpy arrays (which the
compiled backends pass
to kernels as pointers; a GPU device keeps a second copy in its own memory), aligned to 64 bytes, a
cache line, so that vector loads do not straddle two lines. The memory of large buffers that die
is kept in a pool and handed to the next buffer of the same size (see MemoryPool). Each device
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


def aligned_empty(size: int, dtype: DType, raw: np.ndarray | None = None) -> np.ndarray:
    """An uninitialised array of `size` elements whose memory starts on a 64-byte boundary (carved
    out of `raw`, bytes with room for the alignment, when given)."""
    if raw is None:
        raw = np.empty(size * dtype.itemsize + ALIGNMENT, dtype=np.uint8)
    start = -raw.ctypes.data % ALIGNMENT
    return raw[start:start + size * dtype.itemsize].view(dtype.np)


class MemoryPool:
    """Memory of freed buffers, kept to be handed out again to a buffer of the same size.

    Why: fresh memory from the operating system is mapped page by page on first touch, so a kernel
    writing a new 64 MB output spends about as long in page faults as in its own work, and freeing
    it unmaps it again. Reusing the memory of a buffer that died (a previous output of the same
    kernel, an intermediate of the last step) skips both. Only large buffers are kept (small ones
    are cheap to allocate), at most LIMIT bytes in all, oldest dropped first; and only memory that
    nothing else can still see (no numpy view of it survives the buffer; see Buffer.__del__).
    """

    SMALLEST = 1 << 18   # bytes: below this, allocating is cheap
    LIMIT = 1 << 29      # bytes kept at most (512 MB)

    def __init__(self) -> None:
        self.free: dict[int, list[np.ndarray]] = {}
        self.order: list[np.ndarray] = []  # oldest first, for dropping
        self.bytes = 0

    def take(self, nbytes: int) -> np.ndarray | None:
        arrays = self.free.get(nbytes)
        if not arrays:
            return None
        raw = arrays.pop()
        self.order = [r for r in self.order if r is not raw]
        self.bytes -= raw.nbytes
        return raw

    def give(self, raw: np.ndarray) -> None:
        if raw.nbytes < self.SMALLEST or raw.nbytes > self.LIMIT:
            return
        while self.bytes + raw.nbytes > self.LIMIT and self.order:
            oldest = self.order.pop(0)
            self.free[oldest.nbytes] = [r for r in self.free[oldest.nbytes] if r is not oldest]
            self.bytes -= oldest.nbytes
        self.free.setdefault(raw.nbytes, []).append(raw)
        self.order.append(raw)
        self.bytes += raw.nbytes

    def clear(self) -> None:
        self.free.clear()
        self.order.clear()
        self.bytes = 0


POOL = MemoryPool()


CORES = os.cpu_count() or 1


def thread_count() -> int:
    """THREADS=n, default the number of cores: how many threads a kernel may use."""
    threads = int(getenv("THREADS", CORES))
    if threads < 1:
        raise ValueError(f"THREADS={threads}: expected a number of threads >= 1 (1 runs every kernel "
                         "on one thread)")
    return threads




class DeviceMemory(Protocol):
    """A buffer's copy in a GPU's own memory, as its runtime allocates it."""

    def upload(self, host: np.ndarray) -> None: ...      # host array -> device memory

    def download(self, host: np.ndarray) -> None: ...    # device memory -> host array


class Buffer:
    """`size` elements of `dtype` in a device's memory.

    `version` counts in-place writes (`Tensor.assign`), so that a computation planned before a
    write cannot silently read the values after it; `serial` numbers buffers in order of creation
    (TinyJit uses it to tell the buffers a step made from the ones that existed before).
    """

    live: int = 0  # buffers alive right now (a leak shows up as a number that keeps growing)
    _serial: int = 0

    def __init__(self, device: str, size: int, dtype: DType):
        self.device, self.size, self.dtype = device, size, dtype
        self._raw = POOL.take(size * dtype.itemsize + ALIGNMENT)
        self._memory = aligned_empty(size, dtype, self._raw)
        self._raw = self._memory.base if self._raw is None else self._raw
        self.version = 0
        # A GPU device keeps a second copy in its own memory (`device_memory`, made by its runtime). The
        # two copies take turns being current: a kernel writes the device copy, `as_numpy()` reads the
        # host copy, and each side is copied over only when the other wrote since (see device_copy).
        self.device_memory: DeviceMemory | None = None
        self.host_current, self.device_current = True, False
        self._address: int | None = None  # of the host memory, looked up on first use (host_address)
        self.serial = Buffer._serial
        Buffer._serial += 1
        GlobalCounters.mem_used += self.nbytes
        Buffer.live += 1

    @staticmethod
    def next_serial() -> int:
        """The serial number the next buffer will get."""
        return Buffer._serial

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def __del__(self) -> None:
        GlobalCounters.mem_used -= self.nbytes
        Buffer.live -= 1
        memory, raw = self.__dict__.pop("_memory", None), self.__dict__.pop("_raw", None)
        # Back to the pool only if nothing else refers to this memory: references here are the local
        # names, getrefcount's own argument and (for raw) the view's base. A numpy array made from
        # as_numpy() and still alive holds one more, and its memory must not be handed out again.
        if raw is not None and sys.getrefcount(memory) == 2 and sys.getrefcount(raw) == 3:
            POOL.give(raw)

    def copyin(self, data: np.ndarray) -> "Buffer":
        flat = np.ascontiguousarray(data, dtype=self.dtype.np).reshape(-1)
        if flat.size != self.size:
            raise ValueError(f"copyin: {flat.size} elements into a buffer of {self.size}")
        self._memory[:] = flat
        self.host_current, self.device_current = True, False
        return self

    def as_numpy(self) -> np.ndarray:
        """The memory itself, as a flat numpy array (no copy: do not keep it around). On a GPU device
        the device copy is fetched first if a kernel wrote it, and counts as stale afterwards (the
        caller may write into the array)."""
        if not self.host_current:
            self.device_memory.download(self._memory)
            self.host_current = True
        self.device_current = False
        return self._memory

    def host_address(self) -> int:
        """The address of the host memory (what as_numpy() returns), for a CPU kernel's pointer
        argument. Looked up once: a buffer's memory never moves, and numpy's lookup costs about a
        microsecond, paid for every argument of every kernel an eager step runs."""
        if self._address is None or self.device_memory is not None:  # (a GPU's buffer: fetch it first)
            self._address = self.as_numpy().ctypes.data
        return self._address

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
        name = self.kind(self.canonicalize(name))  # (every numbered device of a kind shares its backend)
        return self.devices[name] if name in self.devices else super().__getitem__(name)


Device = _DeviceRegistry()
