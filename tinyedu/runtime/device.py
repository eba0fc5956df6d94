"""Devices, and the buffers that live on them.

A device is registered by name (NUMPY, PYTHON, C). All devices keep their memory in host numpy
arrays (which the C backend passes to kernels as pointers), aligned to 64 bytes, a cache line, so
that vector loads do not straddle two lines. Each device supplies what the engine's lowering
(tinyedu/engine/lower.py) needs to turn a kernel AST into a program:

- `renderer(name, uops)`: the program's source (C: C source; PYTHON: the UOps themselves), or
  None for a device that interprets the AST as it is (NUMPY, the oracle);
- `compiler`: turns the source into something loadable (C: a shared library), or None;
- `runtime(name, binary)`: the program, called as `program([out, *inputs])`;
- `vector_width` and `threads()`: what the optimizer may use on this device.

`Device["C"].get_runner(ast)` is a shortcut to that lowering, for notebooks and tests.
"""

from __future__ import annotations

import importlib
import os
from typing import Any, Callable, Protocol

import numpy as np

from tinyedu.dtype import DType
from tinyedu.helpers import GlobalCounters, getenv
from tinyedu.ops import LazyOp

ALIGNMENT = 64  # bytes: one cache line, and one AVX-512 register


def aligned_empty(size: int, dtype: DType) -> np.ndarray:
    """An uninitialised array of `size` elements whose memory starts on a 64-byte boundary."""
    raw = np.empty(size * dtype.itemsize + ALIGNMENT, dtype=np.uint8)
    start = -raw.ctypes.data % ALIGNMENT
    return raw[start:start + size * dtype.itemsize].view(dtype.np)


def thread_count() -> int:
    """THREADS=n, default the number of cores: how many threads a kernel may use."""
    threads = int(getenv("THREADS", os.cpu_count() or 1))
    if threads < 1:
        raise ValueError(f"THREADS={threads}: expected a number of threads >= 1 (1 runs every kernel "
                         "on one thread)")
    return threads


class Buffer:
    """`size` elements of `dtype` in a device's memory."""

    def __init__(self, device: str, size: int, dtype: DType):
        self.device, self.size, self.dtype = device, size, dtype
        self._memory = aligned_empty(size, dtype)
        GlobalCounters.mem_used += self.nbytes

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def __del__(self) -> None:
        GlobalCounters.mem_used -= self.nbytes

    def copyin(self, data: np.ndarray) -> "Buffer":
        flat = np.ascontiguousarray(data, dtype=self.dtype.np).reshape(-1)
        if flat.size != self.size:
            raise ValueError(f"copyin: {flat.size} elements into a buffer of {self.size}")
        self._memory[:] = flat
        return self

    def as_numpy(self) -> np.ndarray:
        """The memory itself, as a flat numpy array (no copy: do not keep it around)."""
        return self._memory

    def __repr__(self) -> str:
        return f"<Buffer {self.device} {self.size} {self.dtype.name}>"


Runner = Callable[[list[Buffer]], None]


class DeviceBackend(Protocol):
    name: str
    renderer: Callable | None
    compiler: Any
    runtime: Callable[..., Runner]
    vector_width: int

    def threads(self) -> int: ...


# The engine installs its lowering here (as lazy.py gets its engine): a device can hand out programs
# without importing the engine, which sits above it.
_lowering: Callable[[str, LazyOp], Any] | None = None


def install_lowering(lowering: Callable[[str, LazyOp], Any]) -> None:
    global _lowering
    _lowering = lowering


class Backend:
    """What every device shares: `get_runner(ast)`, the program the engine's lowering builds, and
    `programs`, where the lowering caches them."""

    name = ""

    def __init__(self) -> None:
        self.programs: dict = {}

    def get_runner(self, ast: LazyOp) -> Runner:
        """The program that runs `ast` on this device (Kernel -> opts -> ... -> program, cached)."""
        if _lowering is None:
            raise RuntimeError("no lowering installed: import tinyedu (which installs tinyedu.engine)")
        return _lowering(self.name, ast).runner


class _DeviceRegistry:
    """`Device["C"]` gives the C backend; `Device.DEFAULT` is $DEVICE or the default device."""

    known = ("NUMPY", "PYTHON", "C")  # NEON joins when its backend lands
    fallback = "C"  # the default device: kernels compiled from generated C (set DEVICE= to change)

    def __init__(self) -> None:
        self._backends: dict[str, DeviceBackend] = {}

    def canonicalize(self, name: str | None) -> str:
        if name is None:
            return self.DEFAULT
        if not isinstance(name, str):
            raise TypeError(f"device: expected a device name string, got {type(name).__name__}; "
                            f"valid devices are {', '.join(self.known)}")
        upper = name.split(":")[0].upper()
        if upper not in self.known:
            raise ValueError(f"device: unknown device {name!r}; valid devices are {', '.join(self.known)}")
        return upper

    @property
    def DEFAULT(self) -> str:  # noqa: N802 - reads like a constant
        return self.canonicalize(os.environ.get("DEVICE") or self.fallback)

    def __getitem__(self, name: str) -> DeviceBackend:
        name = self.canonicalize(name)
        if name not in self._backends:
            module = importlib.import_module(f"tinyedu.runtime.ops_{name.lower()}")
            self._backends[name] = module.create_device()
        return self._backends[name]


Device = _DeviceRegistry()
