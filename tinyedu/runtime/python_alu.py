"""What one scalar operation means on the PYTHON device: the value kinds, rounding and integer rules.

The scalar interpreter (ops_python.PythonProgram) applies these to one value at a time; the lockstep
GPU interpreter (lockstep.py) applies the same rules to numpy arrays over a workgroup's threads and
falls back to these functions, lane by lane, wherever an array form would not be bit-identical.

How values are kept, so that results match the NUMPY device bit for bit:
- float32 and float64 values are numpy float32/float64 scalars, so every operation rounds as numpy
  does; float16 and bfloat16 values are float32 scalars (their ops compute in float32);
- integer values are Python ints, wrapped to their width (8 to 64 bits) after every operation;
- bools are Python bools.
MULACC (a*b + c, rounded once) is computed exactly, with rational arithmetic where floats would round.
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import partial
from typing import Any, Callable

import numpy as np

from tinyedu.core.dtype import DType, cast_array, dtypes
from tinyedu.core.ops import BinaryOps, TernaryOps, UnaryOps
from tinyedu.core.uops import FusedOps, const_value
from tinyedu.runtime.ops_numpy import TRANSCENDENTAL, correctly_rounded


def to_dtype(value: Any, dtype: DType) -> Any:
    """A result as the value kind of `dtype` (float32 or float64 scalar, wrapped int, or bool). A
    float16 or bfloat16 value is a float32 scalar (their ops compute in float32, see tinyedu.core.dtype)."""
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
    """tinyedu's one casting rule (tinyedu.core.dtype.cast_array), on one value."""
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
