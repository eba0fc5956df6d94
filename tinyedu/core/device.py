"""Devices: memory, and a way to turn source into something that runs.

A device is four things (`Device`): its memory (`Buffer`), a renderer (UOps to source), a
compiler (source to a binary) and a loader (binary to a function you can call with Buffers).
A `Registry` holds devices by name, and `register` is the seam where a device plugs in. The core's
registry, `DEVICES`, holds two: this file registers `C` (the system C compiler builds a shared
library, and ctypes calls it with the buffers' addresses: `compile_c` and `load_c`, at the end),
and interpreter.py registers `PYTHON`.

The full library's registry, `tinyedu.runtime.Device`, is a subclass of `Registry`, and its devices
(NUMPY, PYTHON, C, NEON, LLVM, GPU, CUDA, WEBGPU, WASM) plug in through the same `register`. It
adds aliases ("CL"), numbered devices ("C:1") and a default, and fills in `find`: the first time a
device is asked for, it imports tinyedu/runtime/ops_<name>.py, so a GPU library loads only when a
GPU device is used. Its devices are richer than the core's (memory pools, vector widths, threads,
GPU limits) and run the full library's kernels, so the two registries are two instances of one
class: "C" names the core's C device in one and the full library's in the other.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import tempfile
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from .cstyle import CRenderer
from .dtype import DType
from .renderer import Renderer


class Buffer:
    """`size` elements of `dtype` on a device. For C the memory is a numpy array: the compiled
    function reads and writes it through its address, and numpy() reads it back without a copy."""

    def __init__(self, device: str, size: int, dtype: DType):
        self.device, self.size, self.dtype = device, size, dtype
        self._array = np.empty(max(size, 1), dtype=dtype.np)  # (never a null pointer)

    def copyin(self, host: np.ndarray) -> "Buffer":
        self._array[:self.size] = host.reshape(-1)
        return self

    def numpy(self) -> np.ndarray:
        return self._array[:self.size]

    @property
    def address(self) -> int:
        return self._array.ctypes.data


@dataclass(frozen=True)
class Device:
    name: str
    renderer: type[Renderer]
    compile: Callable[[str], Any]                       # source -> binary
    load: Callable[[Any, str], Callable[..., None]]     # binary, function name -> fn(*buffers)


class Registry:
    """Devices by name: `register` plugs one in, `registry[name]` finds it."""

    def __init__(self) -> None:
        self.devices: dict[str, Any] = {}

    def register(self, device: Any) -> None:
        """The seam for devices: after this, Tensor(..., device=device.name) runs there."""
        self.devices[device.name] = device

    def find(self, name: str) -> None:
        """Called with a name that no device registered yet, to register it if it can. The core's
        devices register themselves when their files are imported: there is nothing more to find."""

    def __getitem__(self, name: str) -> Any:
        if name not in self.devices:
            self.find(name)
        if name not in self.devices:
            raise ValueError(f"unknown device {name!r}; the registered ones are {sorted(self.devices)}")
        return self.devices[name]


DEVICES = Registry()  # the core's devices: C (below) and PYTHON (interpreter.py)


# --8<-- [start:c]
_build: list[tempfile.TemporaryDirectory] = []  # made at the first compile, removed when Python exits


def compile_c(source: str) -> str:
    """C source -> the path of a shared library, built by the system C compiler ($CC, else cc)."""
    if not _build:
        _build.append(tempfile.TemporaryDirectory(prefix="tinyedu-core-"))
    path = os.path.join(_build[0].name, f"kernel{len(os.listdir(_build[0].name))}.so")
    cmd = [os.environ.get("CC", "cc"), "-O2", "-ffp-contract=off", "-shared", "-fPIC", "-x", "c", "-",
           "-o", path, "-lm"]
    try:
        result = subprocess.run(cmd, input=source.encode(), capture_output=True)
    except FileNotFoundError:
        raise RuntimeError(f"no C compiler {cmd[0]!r}: install one (or set $CC), or use "
                           "device='PYTHON'") from None
    if result.returncode != 0:
        raise RuntimeError(f"C compiler failed:\n{result.stderr.decode()}\n--- source ---\n{source}")
    return path


def load_c(path: str, name: str) -> Callable[..., None]:
    """The compiled function, called with each buffer's address (a `void*` for ctypes)."""
    function = getattr(ctypes.CDLL(path), name)
    return lambda *buffers: function(*[ctypes.c_void_p(b.address) for b in buffers])
# --8<-- [end:c]


DEVICES.register(Device("C", CRenderer, compile_c, load_c))
