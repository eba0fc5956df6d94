"""What an exported program is: its buffers, its kernel calls, and the program itself (ExportedProgram).

program.py builds an ExportedProgram from a forward pass, cfile.py writes it down as C; both read the
classes here, which import neither. An ExportedProgram can also save, compile and run itself
(`compile_and_run` does all three), which is how the tests check it against tinyedu.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tinyedu.core.dtype import DType
from tinyedu.core.helpers import prod
from tinyedu.export.memory import Allocation
from tinyedu.export.targets import Target, missing_tool_hint
from tinyedu.export.wasm import build_wasm, run_wasm


@dataclass(eq=False)  # compared and hashed by identity: one object per buffer
class BufferInfo:
    """One buffer of the program: what it holds and where its memory lives in the C file."""

    name: str                      # its C name: input0, output0, conv1_weight, ... (arenas: arena_float32)
    role: str                      # "input", "output", "weight" (data known at export time) or "scratch"
    dtype: DType
    size: int                      # elements
    data: np.ndarray | None = None        # a weight's values
    allocation: Allocation | None = None  # a scratch buffer's place in its arena

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize


@dataclass
class KernelCall:
    """One call of the forward pass: which C function runs, on which buffers."""

    function: str                  # the C function (several calls may share one)
    buffers: list[BufferInfo]      # [output, *inputs], in the kernel's data0, data1, ... order


@dataclass
class ExportedProgram:
    """The C program, what it is made of, and helpers to write, compile and run it."""

    name: str
    target: Target
    inputs: list[tuple[tuple[int, ...], DType]]
    outputs: list[tuple[tuple[int, ...], DType]]
    calls: list[KernelCall]
    functions: dict[str, str]      # C function name -> its source
    buffers: list[BufferInfo]
    arena_bytes: dict[str, int]    # dtype name -> bytes of that arena
    embedded: bool                 # weights inside the C file (PORT=1) or in the sidecar file
    source: str = ""
    weights_file: bytes = b""      # the sidecar's contents when not embedded
    stats: dict[str, int] = field(default_factory=dict)

    def save(self, folder: str | os.PathLike) -> Path:
        """Write `<name>.c` (and `<name>.weights` when the weights are not embedded) into `folder`."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{self.name}.c"
        path.write_text(self.source)
        if not self.embedded:
            (folder / f"{self.name}.weights").write_bytes(self.weights_file)
        return path

    def compile(self, folder: str | os.PathLike, extra_flags: tuple[str, ...] = ()) -> Path:
        """Save and compile with the target's plain command line; the executable's path."""
        if self.target.name == "wasm":  # a .wasm module (and its .js), run by a host, not an executable
            return build_wasm(self, Path(folder))
        source = self.save(folder)
        executable = source.with_suffix("")
        command = [*self.target.compiler, *self.target.flags, *extra_flags, str(source), "-o",
                   str(executable), "-lm"]
        try:
            result = subprocess.run(command, capture_output=True, text=True)
        except FileNotFoundError:
            raise RuntimeError(missing_tool_hint(self.target, self.target.compiler[0])) from None
        if result.returncode != 0:
            raise RuntimeError(f"export: `{shlex.join(command)}` failed:\n{result.stderr.strip()}")
        return executable

    def command(self, executable: str | os.PathLike, *args: str) -> list[str]:
        """The command line that runs the compiled program (under an emulator for a foreign target)."""
        return [*self.target.run_prefix, str(executable), *args]

    def run(self, executable: str | os.PathLike, *inputs: np.ndarray) -> list[np.ndarray]:
        """Feed whole batches of `inputs` (each with the exported shape's leading batch axis repeated)
        to the compiled program and read its outputs back. Used to check it against tinyedu."""
        batches = _batches(self, inputs)
        stream = b"".join(b"".join(np.ascontiguousarray(x[k], dtype=dt.np).tobytes()
                                   for x, (_, dt) in zip(inputs, self.inputs, strict=True))
                          for k in range(batches))
        if self.target.name == "wasm":
            return _split_outputs(self, run_wasm(self, executable, stream, batches), batches)
        folder = Path(executable).parent
        command = self.command(executable, "-w", str(folder / f"{self.name}.weights"))
        try:
            result = subprocess.run(command, input=stream, capture_output=True)
        except FileNotFoundError:
            raise RuntimeError(missing_tool_hint(self.target, command[0])) from None
        if result.returncode != 0:
            raise RuntimeError(f"export: the program failed: {result.stderr.decode().strip()}")
        return _split_outputs(self, result.stdout, batches)


def _batches(program: ExportedProgram, inputs: tuple[np.ndarray, ...]) -> int:
    """Inputs come as (batches, *exported shape)."""
    if len(inputs) != len(program.inputs):
        raise ValueError(f"export: the program takes {len(program.inputs)} inputs, got {len(inputs)}")
    counts = set()
    for k, (x, (shape, _)) in enumerate(zip(inputs, program.inputs, strict=True)):
        if tuple(x.shape[1:]) != shape:
            raise ValueError(f"export: input {k} must have shape (batches, *{shape}), got {x.shape}")
        counts.add(x.shape[0])
    if len(counts) != 1:
        raise ValueError(f"export: every input needs the same number of batches, got {sorted(counts)}")
    return counts.pop()


def _split_outputs(program: ExportedProgram, raw: bytes, batches: int) -> list[np.ndarray]:
    per_batch = sum(prod(shape) * dt.itemsize for shape, dt in program.outputs)
    if len(raw) != per_batch * batches:
        raise RuntimeError(f"export: the program wrote {len(raw)} bytes, expected {per_batch * batches}")
    outs: list[list[np.ndarray]] = [[] for _ in program.outputs]
    offset = 0
    for _ in range(batches):
        for k, (shape, dt) in enumerate(program.outputs):
            n = prod(shape) * dt.itemsize
            outs[k].append(np.frombuffer(raw[offset:offset + n], dtype=dt.np).reshape(shape))
            offset += n
    return [np.stack(o) for o in outs]


def compile_and_run(program: ExportedProgram, *inputs: np.ndarray) -> list[np.ndarray]:
    """Compile in a temporary folder, run on `inputs`, return the outputs (the whole round trip)."""
    with tempfile.TemporaryDirectory() as folder:
        return program.run(program.compile(folder), *inputs)


__all__ = ["BufferInfo", "KernelCall", "ExportedProgram", "compile_and_run"]
