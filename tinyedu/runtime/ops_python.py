"""The PYTHON device: runs a kernel's UOps one at a time, in plain Python.

It is slow on purpose. It executes exactly the list the linearizer emitted (`DEBUG=4` prints it),
so it shows what each UOp means, and it checks the linearizer without a C compiler in the way:
when C and NUMPY disagree, PYTHON says whether the UOps or the C renderer is wrong.

How values are kept, so that results match the NUMPY device bit for bit:
- float32 and float64 values are numpy float32/float64 scalars, so every operation rounds as numpy
  does; float16 and bfloat16 values are float32 scalars (their ops compute in float32), and a
  bfloat16 buffer holds bit patterns that LOAD and STORE convert;
- integer values are Python ints, wrapped to their width (8 to 64 bits) after every operation;
- bools are Python bools;
- a vector is a list of such values, one per lane: a vector op is the scalar op on every lane.
MULACC (a*b + c, rounded once) is computed exactly, with rational arithmetic where floats would round.
Each UOp's value goes into `values[position]`; a loop is a jump back from ENDRANGE to its RANGE. A
loop that threads share on C runs here one iteration after another: the result is the same.
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import partial
from typing import Any, Callable

import numpy as np

from tinyedu.codegen.uops import FusedOps, UOp, UOps, const_value, is_vector, scalar_of
from tinyedu.dtype import DType, cast_array, dtypes, from_storage, to_storage
from tinyedu.ops import BinaryOps, TernaryOps, UnaryOps
from tinyedu.runtime.device import Backend, Buffer, thread_count
from tinyedu.runtime.ops_numpy import TRANSCENDENTAL, correctly_rounded
from tinyedu.runtime.toolchain import native_vector_width


def to_dtype(value: Any, dtype: DType) -> Any:
    """A result as the value kind of `dtype` (float32 or float64 scalar, wrapped int, or bool). A
    float16 or bfloat16 value is a float32 scalar (their ops compute in float32, see tinyedu.dtype)."""
    if dtype == dtypes.float64:
        return np.float64(value)
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
        return to_dtype(cast_array(np.array(value, dtype=src.value_np), dst)[()], dst)


def fused_multiply_add(a: np.float32, b: np.float32, c: np.float32) -> np.float32:
    """a*b + c rounded once to float32, like C's fmaf.

    a*b of two float32 is exact in float64 (48 significant bits); adding c may round, so the sum's
    rounding error is measured exactly (two-sum). When it is 0 the float64 sum is exact and one
    rounding to float32 is right; otherwise the exact sum is rounded from its rational value.
    """
    product, addend = float(a) * float(b), float(c)
    total = product + addend
    if not math.isfinite(total):
        return np.float32(total)
    back = total - product
    error = (product - (total - back)) + (addend - back)
    if error == 0:
        return np.float32(total)
    return _round_to_float32(Fraction(product) + Fraction(addend))


def _round_to_float32(exact: Fraction) -> np.float32:
    """The float32 nearest to a rational (ties to even): float64 first, then fix a double rounding."""
    with np.errstate(over="ignore"):
        near = np.float32(float(exact))  # beyond float32's range this is inf, as it should be
    if not math.isfinite(float(near)) or Fraction(float(near)) == exact:
        return near
    # the two float32 around `exact`, and the midpoint between them
    low = near if Fraction(float(near)) < exact else np.nextafter(near, np.float32(-np.inf))
    high = np.nextafter(low, np.float32(np.inf))
    if not math.isfinite(float(high)) or not math.isfinite(float(low)):
        return near
    middle = (Fraction(float(low)) + Fraction(float(high))) / 2
    if exact < middle:
        return low
    if exact > middle:
        return high
    return low if int(low.view(np.uint32)) % 2 == 0 else high


# One function per ALU op, for floats and for ints; bools use BOOL_ALU where they differ.
FLOAT_ALU: dict[Any, Callable[..., Any]] = {
    FusedOps.MULACC: fused_multiply_add,
    UnaryOps.NEG: lambda a: -a, **{op: partial(correctly_rounded, fn) for op, fn in TRANSCENDENTAL.items()},
    UnaryOps.SQRT: np.sqrt, UnaryOps.RECIP: lambda a: np.float32(1) / a,
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
                elif u.op is UOps.DEFINE_LOCAL:
                    values[pc] = np.zeros(u.arg, dtype=u.dtype.np)
                elif u.op in (UOps.CONST, UOps.DEFINE_ACC):
                    value = to_dtype(u.arg, scalar_of(u.dtype))
                    values[pc] = [value] * u.dtype.count if is_vector(u.dtype) else value
                elif u.op is UOps.LOAD:
                    values[pc] = self.load(u, args)
                elif u.op is UOps.ALU:
                    values[pc] = self.alu(u, args)
                elif u.op is UOps.CAST:
                    values[pc] = cast(args[0], u.src[0].dtype, u.dtype)
                elif u.op is UOps.ASSIGN:
                    values[srcs[pc][0]] = args[1]
                elif u.op is UOps.STORE:
                    self.store(u, args)
                elif u.op is UOps.VECTORIZE:
                    values[pc] = list(args)
                elif u.op is UOps.BROADCAST:
                    values[pc] = [args[0]] * u.dtype.count
                elif u.op is UOps.GEP:
                    values[pc] = args[0][u.arg]
                else:
                    raise NotImplementedError(f"PYTHON device: no rule for UOp {u.op.name}")
                pc += 1
    # --8<-- [end:run]

    def load(self, u: UOp, args: list[Any]) -> Any:
        """buffer[index] (a vector: `count` elements from index on); 0 where the gate is false."""
        lanes = u.dtype.count if is_vector(u.dtype) else 1
        dtype = scalar_of(u.dtype)
        if len(args) == 3 and not args[2]:  # the gate: padding reads 0
            values = [to_dtype(0, dtype)] * lanes
        else:
            start = self.check(u, args, lanes)
            stored = from_storage(args[0][start:start + lanes], dtype)  # bfloat16: bits to float32
            values = [to_dtype(v, dtype) for v in stored]
        return values if is_vector(u.dtype) else values[0]

    def store(self, u: UOp, args: list[Any]) -> None:
        value = args[2]
        lanes = value if isinstance(value, list) else [value]
        start = self.check(u, args, len(lanes))
        dtype = scalar_of(u.src[2].dtype)
        if dtype == dtypes.bfloat16:
            lanes = list(to_storage(np.array(lanes, dtype=np.float32), dtype))
        for lane, v in enumerate(lanes):
            args[0][start + lane] = v

    def check(self, u: UOp, args: list[Any], lanes: int = 1) -> int:
        """The index of a LOAD/STORE, after checking it is inside the buffer (numpy would wrap -1)."""
        buffer, index = args[0], args[1]
        if not (0 <= index and index + lanes <= buffer.size):
            what = f"data{u.src[0].arg}" if u.src[0].op is UOps.DEFINE_GLOBAL else "a local array"
            raise IndexError(f"PYTHON device: {u.op.name} of {lanes} element(s) at index {index} of {what}, "
                             f"which has {buffer.size} elements: the linearizer computed a wrong index")
        return index

    @staticmethod
    def alu(u: UOp, args: list[Any]) -> Any:
        operand = scalar_of(u.src[-1].dtype)
        table = FLOAT_ALU if operand.is_float else BOOL_ALU if operand == dtypes.bool else INT_ALU
        dtype = scalar_of(u.dtype)
        if is_vector(u.dtype):  # lane by lane
            return [to_dtype(table[u.arg](*lanes), dtype) for lanes in zip(*args, strict=True)]
        return to_dtype(table[u.arg](*args), dtype)


class PythonDevice(Backend):
    """Runs UOps: the engine linearizes (with the same opts as for C), and this device executes the
    list itself; the UOps are its 'source', and there is nothing to compile."""

    name = "PYTHON"

    def __init__(self) -> None:
        super().__init__()
        self.renderer = render_uops
        self.compiler = None
        self.runtime = lambda name, uops, launch=None: PythonProgram(uops)

    @property
    def vector_width(self) -> int:
        """Mirror the C device's vectors (when there is a C compiler), so both run the same UOps."""
        try:
            return native_vector_width()
        except RuntimeError:
            return 4

    def threads(self) -> int:
        return thread_count()


def render_uops(name: str, uops: list[UOp]) -> list[UOp]:
    """The PYTHON device's 'renderer': the UOps are the program."""
    return uops


def create_device() -> PythonDevice:
    return PythonDevice()
