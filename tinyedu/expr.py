"""Expr: a LazyBuffer with operators, for writing formulas of primitives that read like the math.

`Expr(x) * 2 + 1` builds a MUL and an ADD node of the lazy graph, exactly what a Tensor would
build, but without recording anything for autograd. The composite Functions
(tinyedu/function_composite.py, function_math.py) write their forwards and their hand-made
derivatives with it, and so do the step functions of tinyedu/tensor_api/rounding.py. It also holds
the few recurring numerical recipes: expm1 and log1p without cancellation, trunc without int32.
"""

from __future__ import annotations

import math
from typing import Any

from tinyedu.dtype import dtypes
from tinyedu.lazy import LazyBuffer
from tinyedu.ops import BinaryOps, ReduceOps, TernaryOps, UnaryOps


class Expr:
    """A LazyBuffer with operators: `Expr(x) * 2 + 1` builds MUL and ADD nodes. Python numbers
    become constants of the buffer's dtype and shape; every operand has the same shape."""

    def __init__(self, lazydata: LazyBuffer):
        self.lazydata = lazydata

    def _other(self, other: Any) -> LazyBuffer:
        return other.lazydata if isinstance(other, Expr) else self.lazydata.const(other)

    def _binary(self, op: BinaryOps, other: Any, reverse: bool = False) -> "Expr":
        a, b = self.lazydata, self._other(other)
        return Expr(b.e(op, a) if reverse else a.e(op, b))

    def _unary(self, op: UnaryOps) -> "Expr":
        return Expr(self.lazydata.e(op))

    def __add__(self, o: Any) -> "Expr": return self._binary(BinaryOps.ADD, o)  # noqa: E704
    def __radd__(self, o: Any) -> "Expr": return self._binary(BinaryOps.ADD, o, True)  # noqa: E704
    def __sub__(self, o: Any) -> "Expr": return self._binary(BinaryOps.SUB, o)  # noqa: E704
    def __rsub__(self, o: Any) -> "Expr": return self._binary(BinaryOps.SUB, o, True)  # noqa: E704
    def __mul__(self, o: Any) -> "Expr": return self._binary(BinaryOps.MUL, o)  # noqa: E704
    def __rmul__(self, o: Any) -> "Expr": return self._binary(BinaryOps.MUL, o, True)  # noqa: E704
    def __truediv__(self, o: Any) -> "Expr": return self._binary(BinaryOps.DIV, o)  # noqa: E704
    def __rtruediv__(self, o: Any) -> "Expr": return self._binary(BinaryOps.DIV, o, True)  # noqa: E704
    def __neg__(self) -> "Expr": return self._unary(UnaryOps.NEG)  # noqa: E704
    def __lt__(self, o: Any) -> "Expr": return self._binary(BinaryOps.CMPLT, o)  # noqa: E704
    def __gt__(self, o: Any) -> "Expr": return self._binary(BinaryOps.CMPLT, o, True)  # noqa: E704
    def __le__(self, o: Any) -> "Expr": return (self < o) | self.eq(o)  # noqa: E704 - NaN <= x is False
    def __ge__(self, o: Any) -> "Expr": return (self > o) | self.eq(o)  # noqa: E704
    def __and__(self, o: "Expr") -> "Expr": return self._binary(BinaryOps.AND, o)  # noqa: E704
    def __or__(self, o: "Expr") -> "Expr": return self._binary(BinaryOps.OR, o)  # noqa: E704
    def __invert__(self) -> "Expr": return self.eq(False)  # noqa: E704 - logical not, for bools

    def eq(self, o: Any) -> "Expr":
        return self._binary(BinaryOps.CMPEQ, o)

    def ne(self, o: Any) -> "Expr":
        return ~self.eq(o)

    def where(self, a: Any, b: Any) -> "Expr":
        """self ? a : b, for a bool self; a number takes the other side's dtype (float32 if both are)."""
        like = next((v.lazydata for v in (a, b) if isinstance(v, Expr)), None)
        dtype = like.dtype if like is not None else dtypes.float32
        a, b = (v.lazydata if isinstance(v, Expr) else
                LazyBuffer.full(v, self.lazydata.shape, dtype, self.lazydata.device) for v in (a, b))
        return Expr(self.lazydata.e(TernaryOps.WHERE, a, b))

    def fmod(self, o: Any) -> "Expr":
        """The remainder of x / o with the sign of x (C's fmodf: exact)."""
        return self._binary(BinaryOps.MOD, o)

    def sum(self, axes: tuple[int, ...]) -> "Expr":
        """The sum over `axes`, expanded back to this shape (the axes keep size 1, then broadcast)."""
        return Expr(self.lazydata.r(ReduceOps.SUM, axes).expand(self.lazydata.shape))

    def float(self) -> "Expr":
        return Expr(self.lazydata.cast(dtypes.float32))

    def exp2(self) -> "Expr": return self._unary(UnaryOps.EXP2)  # noqa: E704
    def log2(self) -> "Expr": return self._unary(UnaryOps.LOG2)  # noqa: E704
    def sqrt(self) -> "Expr": return self._unary(UnaryOps.SQRT)  # noqa: E704
    def sin(self) -> "Expr": return self._unary(UnaryOps.SIN)  # noqa: E704
    def cos(self) -> "Expr": return self._unary(UnaryOps.COS)  # noqa: E704
    def reciprocal(self) -> "Expr": return self._unary(UnaryOps.RECIP)  # noqa: E704

    def exp(self) -> "Expr":
        return (self * (1 / math.log(2))).exp2()

    def log(self) -> "Expr":
        return self.log2() * math.log(2)

    def abs(self) -> "Expr":
        """|x|, +0.0 for both zeros (0 - (-0.0) is +0.0, and so is 0 - 0.0)."""
        return (self <= 0).where(0.0 - self, self)

    # --8<-- [start:expm1]
    def expm1(self) -> "Expr":
        """exp(x) - 1, accurate for tiny x, where exp(x) rounds to 1 and the difference to 0.

        Kahan's trick, for |x| < 1: with u = exp(x) as rounded, (u - 1) * x / log(u) is accurate to
        a few ulps, because the rounding error of u cancels between the numerator and log(u) (and
        where u is 1 exactly, x itself is the answer). For |x| >= 1, u - 1 has no cancellation; the
        trick would even hurt there, for x < -87 where u is subnormal and log(u) inexact.
        """
        u = self.exp()
        kahan = u.eq(1).where(self, (u - 1) * self / u.log())
        return (self.abs() < 1).where(kahan, u - 1)

    def log1p(self) -> "Expr":
        """log(1 + x), accurate for tiny x, where 1 + x rounds to 1 (Goldberg's trick, like expm1:
        log(u) * x / (u - 1) with u = 1 + x as rounded). Only for |x| < 1: beyond, log(u) has no
        cancellation, and log(u) * x would overflow for x near float32's largest value."""
        u = 1 + self
        goldberg = u.eq(1).where(self, u.log() * self / (u - 1))
        return (self.abs() < 1).where(goldberg, u.log())

    # --8<-- [end:expm1]
    def sigmoid(self) -> "Expr":
        return (1 + (-self).exp()).reciprocal()

    def trunc(self) -> "Expr":
        """Round toward zero. |x| >= 2^23 is already an integer in float32 (so is inf), NaN stays NaN;
        below that the int32 cast truncates exactly. x * 0 gives the zero the sign of x (trunc(-0.5)
        is -0.0)."""
        whole = Expr(self.lazydata.cast(dtypes.int32).cast(self.lazydata.dtype))
        return (self.abs() < 2.0**23).where(whole.eq(0).where(self * 0, whole), self)


def erfc(x: Expr) -> Expr:
    """erfc(x) to a relative error of about 1e-7 for every x (Numerical Recipes' erfcc, a Chebyshev
    fit of exp(-x^2) times a polynomial in t = 1 / (1 + |x|/2)). Relative, not absolute: erfc(5) is
    1.5e-12, and a formula 1 - erf(x) would round it to 0."""
    z = x.abs()
    t = 1 / (1 + 0.5 * z)
    poly = 0.17087277
    for c in (-0.82215223, 1.48851587, -1.13520398, 0.27886807, -0.18628806, 0.09678418, 0.37409196,
              1.00002368, -1.26551223):
        poly = poly * t + c
    tail = t * (poly - z * z).exp()
    return (x < 0).where(2 - tail, tail)
