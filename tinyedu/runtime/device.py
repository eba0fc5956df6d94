"""Devices, and the buffers that live on them.

A device is registered by name (NUMPY, PYTHON, C). Each provides an allocator (here, all
devices keep their memory in host numpy arrays, which the C backend passes to kernels as pointers)
and `get_runner(ast)`, which turns a kernel AST into something callable on buffers. How it does
that is the device's business: NUMPY interprets the AST, C compiles generated source.
"""

from __future__ import annotations

import importlib
import os
from typing import Callable, Protocol

import numpy as np

from tinyedu.dtype import DType
from tinyedu.helpers import GlobalCounters
from tinyedu.ops import LazyOp


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
        self._memory = np.empty(size, dtype=dtype.np)
        self.version = 0
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

    def get_runner(self, ast: LazyOp) -> Runner: ...


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
