"""Rounding, division with rounding and remainders: the integer-valued side of arithmetic.

Step functions (trunc, floor, ceil, round, sign, float //) are flat almost everywhere: their value
is computed with `Expr` formulas and kept in the autograd graph with gradient 0 (Function Flat), as
PyTorch's are. None of them goes through int32: a float32 of magnitude >= 2^23 is already whole.
"""

from __future__ import annotations

from typing import Callable

import tinyedu.core.function as F
import tinyedu.function_extra as FX
from tinyedu.core.dtype import dtypes
from tinyedu.core.errors import DTypeError
from tinyedu.expr import Expr
from tinyedu.tensor_api.base import Operand, TensorLike


class RoundingMixin:
    # ---- division with rounding, remainders ----
    def floor_divide(self: TensorLike, other: Operand, reverse: bool = False) -> TensorLike:
        """x // y, rounding toward -inf as Python and PyTorch do (C's / rounds toward 0).

        Integers: the truncated quotient, minus 1 where the remainder is non-zero and has the
        other sign than y. x // 0 is 0 for integers (a kernel cannot raise; PyTorch raises
        ZeroDivisionError). Floats: PyTorch's recipe, exact where floor(x / y) is not: 1 // 0.1 is 9
        (0.1 is a little more than 1/10). The gradient is 0, as for torch.div(rounding_mode='floor').
        """
        x, y = self._broadcasted(other, "floor_divide", reverse)
        if x.dtype == dtypes.bool:
            raise DTypeError("floor_divide: bool tensors cannot be divided; cast them with .int()")
        if not x.dtype.is_float:
            quotient, remainder = x._apply(F.Div, y), x._apply(F.Mod, y)
            adjust = (remainder != 0) & ((remainder < 0) != (y < 0))
            return quotient - adjust.cast(x.dtype)
        return x._step(lambda a, b: _floor_divide(a, b), y)

    def mod(self: TensorLike, other: Operand, reverse: bool = False) -> TensorLike:
        """x % y with Python's sign rule (the result takes the sign of y), like torch.remainder."""
        x, y = self._broadcasted(other, "mod", reverse)
        r = x._apply(F.Mod, y)
        return ((r != 0) & ((r < 0) != (y < 0))).where(r + y, r)

    remainder = mod

    def fmod(self: TensorLike, other: Operand) -> TensorLike:
        """C's fmod: the remainder of the truncated division, with the sign of x (torch.fmod)."""
        x, y = self._broadcasted(other, "fmod")
        return x._apply(F.Mod, y)

    # ---- rounding: step functions, gradient 0 ----
    # --8<-- [start:step]
    def _step(self: TensorLike, value: Callable[..., Expr], *others: TensorLike) -> TensorLike:
        """A step function of self (and others): `value` computes it on Exprs; the result stays in the
        autograd graph with gradient 0 (Function Flat), as PyTorch's floor, sign, round... do."""
        result = value(*(Expr(t.lazydata) for t in (self, *others)))
        return self._apply(FX.Flat, *others, value=result.lazydata)

    def trunc(self: TensorLike) -> TensorLike:
        """Round toward zero (trunc(-0.5) is -0.0). Integers are already whole."""
        return self if not self.dtype.is_float else self._step(lambda x: x.trunc())

    fix = trunc

    # --8<-- [end:step]
    def floor(self: TensorLike) -> TensorLike:
        return self if not self.dtype.is_float else self._step(lambda x: _floor(x))

    def ceil(self: TensorLike) -> TensorLike:
        def ceil(x: Expr) -> Expr:
            t = x.trunc()
            return (x > t).where(t + 1, t)

        return self if not self.dtype.is_float else self._step(ceil)

    def round(self: TensorLike, decimals: int = 0) -> TensorLike:
        """Round half to even (round(2.5) is 2, round(-0.5) is -0.0), as PyTorch and numpy; with
        decimals, x * 10^decimals is rounded and scaled back."""
        if not isinstance(decimals, int) or isinstance(decimals, bool):
            raise TypeError(f"round: decimals must be an int, got {type(decimals).__name__}")
        if not self.dtype.is_float:
            return self
        if decimals > 0:
            return self._step(lambda x: _round_half_even(x * 10.0**decimals) / 10.0**decimals)
        if decimals < 0:
            return self._step(lambda x: _round_half_even(x / 10.0**-decimals) * 10.0**-decimals)
        return self._step(_round_half_even)

    def sign(self: TensorLike) -> TensorLike:
        """-1, 0 or 1 (0 for NaN, as in PyTorch); gradient 0."""
        def sign(x: Expr) -> Expr:
            return (x > 0).where(x.const(1.0), (x < 0).where(x.const(-1.0), x.const(0.0)))

        if self.dtype == dtypes.bool:
            return self
        if self.dtype.is_float:
            return self._step(sign)
        return ((self > 0).int() - (self < 0).int()).cast(self.dtype)


def _floor(x: Expr) -> Expr:
    t = x.trunc()
    return (x < t).where(t - 1, t)


# --8<-- [start:round]
def _round_half_even(x: Expr) -> Expr:
    """Round to nearest, ties to even, with the float adder itself: for 0 <= a < 2^23, a + 2^23
    has no bits left for a fraction in float32, so the addition rounds a to an integer exactly as
    IEEE rounds (to nearest, ties to even), and subtracting 2^23 again is exact (2^52 in float64).
    The sign is put back after (round(-0.3) is -0.0); from 2^23 (2^52) on, and for inf and NaN, x is
    already its own rounding."""
    big = 2.0**52 if x.double() else 2.0**23
    a = x.abs()
    r = (a + big) - big
    return (a < big).where(x.eq(0).where(x, (x < 0).where(-r, r)), x)


# --8<-- [end:round]
def _floor_divide(a: Expr, b: Expr) -> Expr:
    """PyTorch's float floor division (c10's div_floor_floating), primitive for primitive."""
    mod = a.fmod(b)
    div = (a - mod) / b
    div = (mod.ne(0) & (b < 0).ne(mod < 0)).where(div - 1, div)
    floordiv = _floor(div)
    floordiv = ((div - floordiv) > 0.5).where(floordiv + 1, floordiv)
    result = div.ne(0).where(floordiv, (a / b) * 0.0)  # a zero with the sign of a / b
    return b.eq(0).where(a / b, result)
