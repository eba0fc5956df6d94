"""The PYTHON device: runs a kernel's UOps one at a time, in plain Python.

It is slow on purpose. It executes exactly the list the linearizer emitted (`DEBUG=4` prints it),
so it shows what each UOp means, and it checks the linearizer without a C compiler in the way:
when C and NUMPY disagree, PYTHON says whether the UOps or the C renderer is wrong.

Values follow the rules of tinyedu/runtime/python_alu.py (float32 and float64 numpy scalars, float16
and bfloat16 as float32, wrapped Python ints, bools), so results match the NUMPY device bit for bit;
a bfloat16 buffer holds bit patterns that LOAD and STORE convert, and a vector is a list of such
values, one per lane: a vector op is the scalar op on every lane.
The loop that runs the list is the core's (tinyedu/core/interpreter.py): each UOp's value goes into
`values[position]`, a loop is a jump back from ENDRANGE to its RANGE; this file adds its rules. A
loop that threads share on C runs here one iteration after another: the result is the same.

A GPU-style list (one with SPECIALs: thread and workgroup indices) runs in tinyedu/runtime/lockstep.py
instead: every thread of a workgroup at once, numpy over the threads, with shared memory, barriers,
and a check for races on shared memory and for barriers that only some threads reach. With
`PYTHON_GPU=1` the PYTHON device has a GPU's limits (`GPULimits()`, a typical GPU's), so the engine
lowers every kernel for it as for a GPU: the whole op suite then runs GPU-style, race-checked.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tinyedu.codegen.launch import launch_dims
from tinyedu.core.dtype import dtypes, from_storage, to_storage
from tinyedu.core.helpers import getenv
from tinyedu.core.interpreter import RULES, Interpreter
from tinyedu.core.uops import UOp, UOps, is_vector, scalar_of
from tinyedu.launch import GPULimits, LaunchDims
from tinyedu.runtime.device import Backend, Buffer, thread_count
from tinyedu.runtime.lockstep import LockstepProgram
from tinyedu.runtime.python_alu import BOOL_ALU, FLOAT_ALU, INT_ALU, cast, fused_multiply_add, to_dtype
from tinyedu.runtime.toolchain import native_vector_width

# fused_multiply_add stays importable from here (tests compare it with C's fmaf)
__all__ = ["PythonProgram", "PythonDevice", "fused_multiply_add", "create_device"]


class PythonProgram(Interpreter):
    """The core's interpreter (tinyedu/core/interpreter.py) with the full library's rules: vectors,
    local arrays, bfloat16 storage, every dtype's rounding (python_alu.py), and a bounds check on
    every LOAD and STORE. `program([out, *inputs])` runs it on the buffers.

    A GPU-style list (with SPECIALs) runs as a LockstepProgram: all threads of a workgroup at once.
    `launch`, when given, must be the list's own launch dimensions (`launch_dims(uops)`)."""

    def __init__(self, uops: list[UOp], launch: LaunchDims | None = None):
        super().__init__(uops)
        own = launch_dims(uops)
        if launch is not None and launch != (own or LaunchDims()):
            raise ValueError(f"PYTHON: launch {launch} does not match the kernel's SPECIALs "
                             f"({own or 'none: a CPU-style kernel'}); pass launch_dims(uops)")
        self.lockstep = LockstepProgram(uops, own) if own is not None else None

    @property
    def traffic(self):
        """A GPU-style list's memory counts from its last run (runtime/gpu_counts.py), else None."""
        return self.lockstep.traffic if self.lockstep is not None else None

    def __call__(self, buffers: list[Buffer]) -> None:  # type: ignore[override]
        if self.lockstep is not None:  # a GPU-style list
            return self.lockstep(buffers)
        return super().__call__(*buffers)

    def memory(self, buffers: tuple[Buffer, ...]) -> list[np.ndarray]:
        return [b.as_numpy() for b in buffers]


def constant(u: UOp, args: list[Any]) -> Any:
    value = to_dtype(u.arg, scalar_of(u.dtype))
    return [value] * u.dtype.count if is_vector(u.dtype) else value


def load(u: UOp, args: list[Any]) -> Any:
    """buffer[index] (a vector: `count` elements from index on); 0 where the gate is false."""
    lanes = u.dtype.count if is_vector(u.dtype) else 1
    dtype = scalar_of(u.dtype)
    if len(args) == 3 and not args[2]:  # the gate: padding reads 0
        values = [to_dtype(0, dtype)] * lanes
    else:
        start = check(u, args, lanes)
        stored = from_storage(args[0][start:start + lanes], dtype)  # bfloat16: bits to float32
        values = [to_dtype(v, dtype) for v in stored]
    return values if is_vector(u.dtype) else values[0]


def store(u: UOp, args: list[Any]) -> None:
    value = args[2]
    lanes = value if isinstance(value, list) else [value]
    start = check(u, args, len(lanes))
    dtype = scalar_of(u.src[2].dtype)
    if dtype == dtypes.bfloat16:
        lanes = list(to_storage(np.array(lanes, dtype=np.float32), dtype))
    for lane, v in enumerate(lanes):
        args[0][start + lane] = v


def check(u: UOp, args: list[Any], lanes: int = 1) -> int:
    """The index of a LOAD/STORE, after checking it is inside the buffer (numpy would wrap -1)."""
    buffer, index = args[0], args[1]
    if not (0 <= index and index + lanes <= buffer.size):
        what = f"data{u.src[0].arg}" if u.src[0].op is UOps.DEFINE_GLOBAL else "a local array"
        raise IndexError(f"PYTHON device: {u.op.name} of {lanes} element(s) at index {index} of {what}, "
                         f"which has {buffer.size} elements: the linearizer computed a wrong index")
    return index


def alu(u: UOp, args: list[Any]) -> Any:
    operand = scalar_of(u.src[-1].dtype)
    table = FLOAT_ALU if operand.is_float else BOOL_ALU if operand == dtypes.bool else INT_ALU
    dtype = scalar_of(u.dtype)
    if is_vector(u.dtype):  # lane by lane
        return [to_dtype(table[u.arg](*lanes), dtype) for lanes in zip(*args, strict=True)]
    return to_dtype(table[u.arg](*args), dtype)


# The core's rules, with the full library's versions and the UOps only opts make (vectors, local arrays)
PythonProgram.rules = {
    **RULES, UOps.CONST: constant, UOps.DEFINE_ACC: constant, UOps.LOAD: load, UOps.STORE: store,
    UOps.ALU: alu,
    UOps.CAST: lambda u, args: cast(args[0], u.src[0].dtype, u.dtype),
    UOps.DEFINE_LOCAL: lambda u, args: np.zeros(u.arg, dtype=u.dtype.np),
    UOps.VECTORIZE: lambda u, args: list(args), UOps.BROADCAST: lambda u, args: [args[0]] * u.dtype.count,
    UOps.GEP: lambda u, args: args[0][u.arg],
}


class PythonDevice(Backend):
    """Runs UOps: the engine linearizes (with the same opts as for C), and this device executes the
    list itself; the UOps are its 'source', and there is nothing to compile."""

    name = "PYTHON"

    def __init__(self) -> None:
        super().__init__()
        self.renderer = render_uops
        self.compiler = None
        self.runtime = lambda name, uops, launch=None: PythonProgram(uops, launch)

    @property
    def vector_width(self) -> int:
        """Mirror the C device's vectors (when there is a C compiler), so both run the same UOps."""
        try:
            return native_vector_width()
        except RuntimeError:
            return 4

    def threads(self) -> int:
        return thread_count()

    @property
    def limits(self) -> GPULimits | None:
        """A GPU's limits with PYTHON_GPU=1 (kernels are lowered GPU-style and run in lockstep), else None."""
        return GPULimits() if getenv("PYTHON_GPU", 0) else None


def render_uops(name: str, uops: list[UOp]) -> list[UOp]:
    """The PYTHON device's 'renderer': the UOps are the program."""
    return uops


def create_device() -> PythonDevice:
    return PythonDevice()
