"""The PYTHON device: runs a kernel's UOps one at a time, in plain Python.

It is slow on purpose. It executes exactly the list the linearizer emitted (`DEBUG=4` prints it),
so it shows what each UOp means, and it checks the linearizer without a C compiler in the way:
when C and NUMPY disagree, PYTHON says whether the UOps or the C renderer is wrong.

How values are kept, so that results match the NUMPY device bit for bit:
- float32 values are numpy float32 scalars, so every operation rounds to float32 as numpy does;
- int32 and uint8 values are Python ints, wrapped to 32 or 8 bits after every operation;
- bools are Python bools.
Each UOp's value goes into `values[position]`; a loop is a jump back from ENDRANGE to its RANGE.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from tinyedu.codegen.kernel import Kernel
from tinyedu.codegen.linearizer import linearize
from tinyedu.codegen.uops import UOp, UOps, const_value, uops_listing
from tinyedu.dtype import DType, cast_array, dtypes
from tinyedu.helpers import debug_level
from tinyedu.ops import BinaryOps, LazyOp, TernaryOps, UnaryOps
from tinyedu.runtime.device import Buffer


def to_dtype(value: Any, dtype: DType) -> Any:
    """A result as the value kind of `dtype` (float32 scalar, wrapped int, or bool)."""
    if dtype.is_float:
        return np.float32(value)
    if dtype == dtypes.bool:
        return bool(value)
    return const_value(int(value), dtype)  # wraps around, like C and numpy


def trunc_div(a: int, b: int) -> int:
    """Integer division rounding toward zero, as in C; dividing by 0 gives 0 (tinyedu's rule)."""
    if b == 0:
        return 0
    quotient = abs(a) // abs(b)
    return quotient if (a < 0) == (b < 0) else -quotient


def trunc_mod(a: int, b: int) -> int:
    """The remainder that goes with trunc_div: it has the sign of a; modulo 0 gives 0."""
    return 0 if b == 0 else a - trunc_div(a, b) * b


def maximum(a: Any, b: Any) -> Any:
    """np.maximum: NaN wins; when equal, b."""
    return a if (a > b or a != a) else b


def cast(value: Any, src: DType, dst: DType) -> Any:
    """tinyedu's one casting rule (tinyedu.dtype.cast_array), on one value."""
    with np.errstate(all="ignore"):
        return to_dtype(cast_array(np.array(value, dtype=src.np), dst)[()], dst)


# One function per ALU op, for floats and for ints; bools use BOOL_ALU where they differ.
FLOAT_ALU: dict[Any, Callable[..., Any]] = {
    UnaryOps.NEG: lambda a: -a, UnaryOps.EXP2: np.exp2, UnaryOps.LOG2: np.log2, UnaryOps.SIN: np.sin,
    UnaryOps.COS: np.cos, UnaryOps.SQRT: np.sqrt, UnaryOps.RECIP: lambda a: np.float32(1) / a,
    BinaryOps.ADD: lambda a, b: a + b, BinaryOps.SUB: lambda a, b: a - b, BinaryOps.MUL: lambda a, b: a * b,
    BinaryOps.DIV: lambda a, b: a / b, BinaryOps.MOD: np.fmod, BinaryOps.MAX: maximum,
    BinaryOps.CMPLT: lambda a, b: a < b, BinaryOps.CMPEQ: lambda a, b: a == b,
    BinaryOps.AND: lambda a, b: a & b, BinaryOps.OR: lambda a, b: a | b, BinaryOps.XOR: lambda a, b: a ^ b,
    TernaryOps.WHERE: lambda c, a, b: a if c else b,
}
INT_ALU = {**FLOAT_ALU, UnaryOps.RECIP: lambda a: trunc_div(1, a), BinaryOps.DIV: trunc_div,
           BinaryOps.MOD: trunc_mod}
BOOL_ALU = {**INT_ALU, UnaryOps.NEG: lambda a: not a, BinaryOps.ADD: lambda a, b: a or b,
            BinaryOps.MUL: lambda a, b: a and b}


class PythonProgram:
    """A UOp list with its jumps worked out. `program([out, *inputs])` runs it on the buffers."""

    def __init__(self, uops: list[UOp]):
        self.uops = uops
        position = {u: i for i, u in enumerate(uops)}
        # Reading an ASSIGN reads its accumulator's register (in C both are `acc0`): it holds the
        # latest value, and the initial one if the loop never ran.
        register = {u: position[u.src[0]] if u.op is UOps.ASSIGN else position[u] for u in uops}
        self.srcs = [[register[s] for s in u.src] for u in uops]
        # each ENDRANGE jumps back to the UOp after its RANGE; an empty RANGE jumps past its ENDRANGE
        self.loop_end: dict[int, int] = {position[u.src[0]]: i for i, u in enumerate(uops)
                                          if u.op is UOps.ENDRANGE}

    # --8<-- [start:run]
    def __call__(self, buffers: list[Buffer]) -> None:
        memory = [b.as_numpy() for b in buffers]
        uops, srcs = self.uops, self.srcs
        values: list[Any] = [None] * len(uops)
        pc = 0
        with np.errstate(all="ignore"):  # inf and nan are values here, as in C and numpy
            while pc < len(uops):
                u, args = uops[pc], [values[i] for i in srcs[pc]]
                if u.op is UOps.RANGE:
                    values[pc] = args[0]
                    if args[0] >= args[1]:  # a loop of 0 iterations
                        pc = self.loop_end[pc] + 1
                        continue
                elif u.op is UOps.ENDRANGE:
                    start = srcs[pc][0]
                    values[start] += 1
                    if values[start] < values[srcs[start][1]]:
                        pc = start + 1
                        continue
                elif u.op is UOps.DEFINE_GLOBAL:
                    values[pc] = memory[u.arg]
                elif u.op in (UOps.CONST, UOps.DEFINE_ACC):
                    values[pc] = to_dtype(u.arg, u.dtype)
                elif u.op is UOps.LOAD:
                    valid = args[2] if len(args) == 3 else True  # the gate: padding reads 0
                    values[pc] = to_dtype(args[0][self.check(u, args)] if valid else 0, u.dtype)
                elif u.op is UOps.ALU:
                    values[pc] = self.alu(u, args)
                elif u.op is UOps.CAST:
                    values[pc] = cast(args[0], u.src[0].dtype, u.dtype)
                elif u.op is UOps.ASSIGN:
                    values[srcs[pc][0]] = args[1]
                elif u.op is UOps.STORE:
                    args[0][self.check(u, args)] = args[2]
                else:
                    raise NotImplementedError(f"PYTHON device: no rule for UOp {u.op.name}")
                pc += 1
    # --8<-- [end:run]

    def check(self, u: UOp, args: list[Any]) -> int:
        """The index of a LOAD/STORE, after checking it is inside the buffer (numpy would wrap -1)."""
        buffer, index = args[0], args[1]
        if not 0 <= index < buffer.size:
            raise IndexError(f"PYTHON device: {u.op.name} at index {index} of data{u.src[0].arg}, which has "
                             f"{buffer.size} elements: the linearizer computed a wrong index")
        return index

    @staticmethod
    def alu(u: UOp, args: list[Any]) -> Any:
        operand = u.src[-1].dtype
        table = FLOAT_ALU if operand.is_float else BOOL_ALU if operand == dtypes.bool else INT_ALU
        return to_dtype(table[u.arg](*args), u.dtype)


class PythonDevice:
    name = "PYTHON"

    def __init__(self) -> None:
        self.programs: dict[LazyOp, PythonProgram] = {}

    def get_runner(self, ast: LazyOp) -> PythonProgram:
        if ast not in self.programs:
            self.programs[ast] = PythonProgram(linearize(Kernel(ast)))
        program = self.programs[ast]
        if debug_level() >= 4:  # the UOps are this device's source
            print(uops_listing(program.uops))
        return program


def create_device() -> PythonDevice:
    return PythonDevice()

