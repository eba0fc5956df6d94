"""Elementwise math: casts, the primitive-backed ops, exp, log, trigonometry, powers, comparisons,
logic and bits, and Python's operators.

Semantics follow PyTorch, including the corners: comparisons with NaN are False (so `x <= y` is
`(x < y) | (x == y)`, never `not (y < x)`), and `&`, `|`, `^`, `~` are bitwise on integers and
logical on bools. Rounding, `//` and `%` are in rounding.py; activations and hyperbolic functions
in activations.py.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

import tinyedu.core.function as F
import tinyedu.function_composite as FC
import tinyedu.function_math as FM
from tinyedu.core.dtype import dtypes, from_storage, promote_with_scalar, to_storage
from tinyedu.core.errors import ArgumentError, DeviceError, DTypeError
from tinyedu.expr import Expr
from tinyedu.tensor_api.base import Operand, TensorLike, broadcast_shape


class ElementwiseMixin:
    # ---- casts ----
    def cast(self: TensorLike, dtype: Any) -> TensorLike:
        dtype = dtype if dtype is self.lazydata.dtype else dtypes.from_any(dtype)  # (often: no cast at all)
        return self if dtype == self.dtype else self._apply(F.Cast, dtype=dtype)

    def int(self: TensorLike) -> TensorLike:
        return self.cast(dtypes.int32)

    def bitcast(self: TensorLike, dtype: Any) -> TensorLike:
        """The same bytes read as another dtype (PyTorch's `x.view(dtype)`): `Tensor([1.0]).bitcast(
        'int32')` is 1065353216. With a different itemsize the last dimension changes size (8 int8 per
        int64, 2 float16 per float32), as in PyTorch. Reinterpreting memory is a host operation here:
        it realizes the tensor, and the result has no gradient."""
        dtype = dtypes.from_any(dtype)
        row_bytes = self.shape[-1] * self.dtype.itemsize if self.ndim else 0
        if dtype.itemsize != self.dtype.itemsize and (self.ndim == 0 or row_bytes % dtype.itemsize):
            raise ValueError(f"view({dtype.name}): a {self.dtype.name} tensor of shape {self.shape} cannot "
                             f"be read as {dtype.name}: with a different itemsize ({self.dtype.itemsize} -> "
                             f"{dtype.itemsize} bytes) the last dimension's bytes must divide evenly; dtypes "
                             f"of the same itemsize always work")
        bits = np.ascontiguousarray(to_storage(self.numpy(), self.dtype))
        read = bits.view(np.dtype(dtype.np))
        return type(self)(from_storage(read, dtype), device=self.device, dtype=dtype)

    def double(self: TensorLike) -> TensorLike:
        return self.cast(dtypes.float64)

    def half(self: TensorLike) -> TensorLike:
        return self.cast(dtypes.float16)

    def long(self: TensorLike) -> TensorLike:
        return self.cast(dtypes.int64)

    def bool(self: TensorLike) -> TensorLike:
        return self.cast(dtypes.bool)

    def is_floating_point(self: TensorLike) -> bool:
        return self.dtype.is_float

    # ---- unary primitives (neg, reciprocal and sqrt are the core's: tinyedu/core/tensor.py) ----
    def sin(self: TensorLike) -> TensorLike:
        return self._float()._apply(F.Sin)

    def cos(self: TensorLike) -> TensorLike:
        return self._float()._apply(F.Cos)

    def exp2(self: TensorLike) -> TensorLike:
        return self._float()._apply(F.Exp2)

    def log2(self: TensorLike) -> TensorLike:
        return self._float()._apply(F.Log2)

    # ---- unary, composed ----
    def exp(self: TensorLike) -> TensorLike:
        """e^x to under an ulp over the whole float32 range (see tinyedu/expr.py, exp)."""
        return self._float()._apply(FC.Exp)

    def log(self: TensorLike) -> TensorLike:
        return self._float().log2() * math.log(2)

    def log10(self: TensorLike) -> TensorLike:
        return self._float().log2() * math.log10(2)

    def expm1(self: TensorLike) -> TensorLike:
        """exp(x) - 1, accurate where exp(x) is close to 1 (expm1(1e-10) is 1e-10, not 0)."""
        return self._float()._apply(FC.Expm1)

    def log1p(self: TensorLike) -> TensorLike:
        """log(1 + x), accurate for tiny x (log1p(1e-10) is 1e-10, not 0)."""
        return self._float()._apply(FC.Log1p)

    def rsqrt(self: TensorLike) -> TensorLike:
        return self.sqrt().reciprocal()

    def tan(self: TensorLike) -> TensorLike:
        return self._float()._apply(FC.Tan)

    # ---- inverse trigonometric, erf ----
    def asin(self: TensorLike) -> TensorLike:
        """arcsin, NaN outside [-1, 1]; the gradient is inf at +-1, as in PyTorch."""
        return self._float()._apply(FM.Asin)

    def acos(self: TensorLike) -> TensorLike:
        """arccos, NaN outside [-1, 1]; the gradient is -inf at +-1, as in PyTorch."""
        return self._float()._apply(FM.Acos)

    def atan(self: TensorLike) -> TensorLike:
        return self._float()._apply(FM.Atan)

    arcsin, arccos, arctan = asin, acos, atan  # numpy's (and PyTorch's aliases) names

    def erf(self: TensorLike) -> TensorLike:
        """The error function 2/sqrt(pi) * integral of e^(-t^2) from 0 to x."""
        return self._float()._apply(FM.Erf)

    def lerp(self: TensorLike, end: Operand, weight: Operand) -> TensorLike:
        """self + weight * (end - self): linear interpolation (torch.lerp)."""
        return self + (end - self) * weight

    def isnan(self: TensorLike) -> TensorLike:
        return self != self

    def isinf(self: TensorLike) -> TensorLike:
        return self.abs() == float("inf") if self.dtype.is_float else self.zeros_like(dtype="bool")

    def isfinite(self: TensorLike) -> TensorLike:
        return (self.abs() < float("inf")) if self.dtype.is_float else self.ones_like(dtype="bool")

    def logical_not(self: TensorLike) -> TensorLike:
        false = self._to_tensor(False, dtypes.bool)._expanded_to(self.shape)  # (the same primitives)
        return self.cast(dtypes.bool)._apply(F.Eq, false)

    # ---- binary primitives, with broadcasting and dtype promotion (add, sub, mul and maximum are the
    # core's; true division adds rounding modes here) ----
    def div(self: TensorLike, other: Operand, reverse: bool = False,
            rounding_mode: str | None = None) -> TensorLike:
        """True division (integers are promoted to float first, as in PyTorch); rounding_mode='trunc'
        rounds the quotient toward zero, 'floor' toward -inf (the same as //)."""
        if rounding_mode == "floor":
            return self.floor_divide(other, reverse)
        if rounding_mode not in (None, "trunc"):
            raise ArgumentError(f"div: rounding_mode must be None, 'trunc' or 'floor', got {rounding_mode!r}")
        x, y = self._broadcasted(other, "div", reverse)
        if rounding_mode == "trunc":
            if not x.dtype.is_float:
                return x._integer_ops("div")._apply(F.Div, y)
            return x._apply(F.Div, y).trunc()
        return x._float()._apply(F.Div, y._float())

    def true_divide(self: TensorLike, other: Operand) -> TensorLike:
        return self.div(other)

    def copysign(self: TensorLike, other: Operand) -> TensorLike:
        """|self| with the sign of other (-0.0 is negative; a NaN counts as positive). Always float."""
        x, y = self._broadcasted(other, "copysign")
        return x._float()._apply(FM.Copysign, y._float())

    def atan2(self: TensorLike, other: Operand) -> TensorLike:
        """The angle of the point (other, self) in (-pi, pi] (torch.atan2(input=y, other=x))."""
        y, x = self._broadcasted(other, "atan2")
        return y._float()._apply(FM.Atan2, x._float())

    arctan2 = atan2

    def minimum(self: TensorLike, other: Operand) -> TensorLike:
        x, y = self._broadcasted(other, "minimum")
        if x.dtype.is_float:
            return -((-x).maximum(-y))
        return (x < y).where(x, y)

    # ---- powers ----
    def pow(self: TensorLike, exponent: Operand, reverse: bool = False) -> TensorLike:
        """x ** y with PyTorch's types and corner cases.

        int ** int stays an integer (exact, wrapping like C); anything with a float is float
        (`Tensor([2, 3]) ** 2.0` is float32). A Python-number exponent: sqrt for 0.5, repeated
        multiplication for small integers (exact, and right for negative x), as PyTorch special-cases
        them (function_math.PowScalar). A tensor exponent: 2^(y log2|x|) with C's special cases
        (function_math.Pow). Gradients are PyTorch's, which are 0 rather than NaN at x = 0.
        """
        if not reverse and isinstance(exponent, (int, float)) and not isinstance(exponent, bool):
            x = self.cast(promote_with_scalar(self.dtype, exponent))
            if not x.dtype.is_float:
                if exponent < 0:
                    raise ArgumentError(f"pow: integers to negative integer powers are not allowed "
                                        f"({exponent}), as in PyTorch; use a float tensor: x.float() ** n")
                return x._int_power(exponent)
            if exponent == 0:  # 1 everywhere, even at NaN; gradient 0
                return x._step(lambda a: Expr(a.lazydata.const(1.0)))
            return x._apply(FM.PowScalar, exponent=exponent)
        base, power = self._broadcasted(exponent, "pow", reverse)
        if base.dtype.is_float:
            return base._apply(FM.Pow, power)
        return base._int_power_tensor(power)

    def _int_power(self: TensorLike, n: int) -> TensorLike:
        """self ** n for a Python int n >= 0 by squaring: about 2 log2(n) multiplies."""
        result, square = None, self
        while True:
            if n & 1:
                result = square if result is None else result * square
            n >>= 1
            if not n:
                return result if result is not None else self._step(lambda a: Expr(a.lazydata.const(1)))
            square = square * square

    def _int_power_tensor(self: TensorLike, power: TensorLike) -> TensorLike:
        """Integer base ** integer exponent tensor: square-and-multiply over the exponent's 31 bits.

        A negative exponent gives 1 // x^|n| truncated (1, -1 or 0; PyTorch raises instead)."""
        magnitude = power.abs()
        result, square = self.ones_like(), self
        for bit in range(31):
            result = (magnitude.bitwise_and(1 << bit) != 0).where(result * square, result)
            square = square * square
        return (power < 0).where(self.ones_like().div(result, rounding_mode="trunc"), result)

    # ---- comparisons: False whenever a NaN is involved (except !=); lt, gt and eq are the core's ----
    # --8<-- [start:le]
    def le(self: TensorLike, other: Operand, reverse: bool = False) -> TensorLike:
        """x <= y is (x < y) | (x == y). `not (y < x)` would say NaN <= 0."""
        x, y = self._broadcasted(other, "le", reverse)
        return x._apply(F.Less, y)._apply(F.BitwiseOr, x._apply(F.Eq, y))

    # --8<-- [end:le]
    def ne(self: TensorLike, other: Operand) -> TensorLike:
        return self.eq(other).logical_not()  # NaN != NaN is True, as it should be

    def ge(self: TensorLike, other: Operand) -> TensorLike:
        return self.le(other, reverse=True)

    def where(self: TensorLike, x: Operand, y: Operand) -> TensorLike:
        """`cond.where(x, y)`: x where cond is true, else y (cond, x and y broadcast together)."""
        tensor = type(self)
        for name, value in (("x", x), ("y", y)):
            if isinstance(value, tensor) and value.device != self.device:
                raise DeviceError(f"where: tensors are on different devices: the condition is on "
                                  f"{self.device}, {name} on {value.device}; move it with "
                                  f".to({self.device!r})")
            if not isinstance(value, (tensor, bool, int, float)):
                raise TypeError(f"where: {name} must be a Tensor or a Python number, not "
                                f"{type(value).__name__}")
        cond = self.cast(dtypes.bool)
        if not isinstance(x, tensor) and not isinstance(y, tensor):
            x = tensor(x, device=self.device)
        if isinstance(x, tensor):
            x, y = x._broadcasted(y, "where")
        else:
            y, x = y._broadcasted(x, "where")
        shape = broadcast_shape(cond.shape, x.shape, op="where")
        return cond._expanded_to(shape)._apply(F.Where, x._expanded_to(shape), y._expanded_to(shape))

    # ---- logical and bitwise ----
    def logical_and(self: TensorLike, other: Operand) -> TensorLike:
        x, y = self._broadcasted(other, "logical_and")
        return x.cast(dtypes.bool)._apply(F.BitwiseAnd, y.cast(dtypes.bool))

    def logical_or(self: TensorLike, other: Operand) -> TensorLike:
        x, y = self._broadcasted(other, "logical_or")
        return x.cast(dtypes.bool)._apply(F.BitwiseOr, y.cast(dtypes.bool))

    def logical_xor(self: TensorLike, other: Operand) -> TensorLike:
        x, y = self._broadcasted(other, "logical_xor")
        return x.cast(dtypes.bool)._apply(F.BitwiseXor, y.cast(dtypes.bool))

    def _integer_ops(self: TensorLike, op: str) -> TensorLike:
        if self.dtype.is_float:
            raise DTypeError(f"{op}: only integer and bool tensors have bits, this one is {self.dtype.name}; "
                             "use logical_and/or/xor/not for truth values, or cast with .int()")
        return self

    def bitwise_and(self: TensorLike, other: Operand, reverse: bool = False) -> TensorLike:
        x, y = self._broadcasted(other, "bitwise_and", reverse)
        return x._integer_ops("bitwise_and")._apply(F.BitwiseAnd, y)

    def bitwise_or(self: TensorLike, other: Operand, reverse: bool = False) -> TensorLike:
        x, y = self._broadcasted(other, "bitwise_or", reverse)
        return x._integer_ops("bitwise_or")._apply(F.BitwiseOr, y)

    def bitwise_xor(self: TensorLike, other: Operand, reverse: bool = False) -> TensorLike:
        x, y = self._broadcasted(other, "bitwise_xor", reverse)
        return x._integer_ops("bitwise_xor")._apply(F.BitwiseXor, y)

    xor = bitwise_xor  # tinygrad's name

    def bitwise_not(self: TensorLike) -> TensorLike:
        """~x: flips every bit of an integer (~x == -x - 1), negates a bool."""
        if self._integer_ops("bitwise_not").dtype == dtypes.bool:
            return self.logical_not()
        return self.bitwise_xor(-1)  # all ones (in uint8, -1 wraps to 255)

    def lshift(self: TensorLike, bits: int) -> TensorLike:
        """x << bits for integers: x * 2**bits, wrapping around like C."""
        return self._integer_ops("lshift") * (2 ** self._shift_amount(bits, "lshift"))

    def rshift(self: TensorLike, bits: int) -> TensorLike:
        """x >> bits for integers: an arithmetic shift, x // 2**bits (rounds toward -inf, like C on
        two's complement and like PyTorch)."""
        bits = self._integer_ops("rshift")._shift_amount(bits, "rshift")
        if self.dtype == dtypes.int32 and bits == 31:  # 2**31 is no int32: only the sign bit is left
            return (self < 0).where(-1, 0)
        return self.floor_divide(2**bits)

    def _shift_amount(self: TensorLike, bits: Any, op: str) -> int:
        width = 8 * self.dtype.itemsize
        if not isinstance(bits, int) or isinstance(bits, bool) or not 0 <= bits < width:
            raise ValueError(f"{op}: the shift must be a Python int in 0..{width - 1} for {self.dtype.name}, "
                             f"got {bits!r}")
        return bits

    # ---- Python operators (+, -, *, /, unary -, @, <, > and == are the core's) ----
    def __floordiv__(self: TensorLike, o: Operand) -> TensorLike: return self.floor_divide(o)  # noqa: E704
    def __rfloordiv__(self: TensorLike, o: Operand) -> TensorLike: return self.floor_divide(o, reverse=True)  # noqa: E704
    def __pow__(self: TensorLike, o: Operand) -> TensorLike: return self.pow(o)  # noqa: E704
    def __rpow__(self: TensorLike, o: Operand) -> TensorLike: return self.pow(o, reverse=True)  # noqa: E704
    def __mod__(self: TensorLike, o: Operand) -> TensorLike: return self.mod(o)  # noqa: E704
    def __rmod__(self: TensorLike, o: Operand) -> TensorLike: return self.mod(o, reverse=True)  # noqa: E704
    def __le__(self: TensorLike, o: Operand) -> TensorLike: return self.le(o)  # noqa: E704
    def __ge__(self: TensorLike, o: Operand) -> TensorLike: return self.ge(o)  # noqa: E704
    def __ne__(self: TensorLike, o: Operand) -> TensorLike: return self.ne(o)  # type: ignore[override]  # noqa: E704
    def __and__(self: TensorLike, o: Operand) -> TensorLike: return self.bitwise_and(o)  # noqa: E704
    def __rand__(self: TensorLike, o: Operand) -> TensorLike: return self.bitwise_and(o, reverse=True)  # noqa: E704
    def __or__(self: TensorLike, o: Operand) -> TensorLike: return self.bitwise_or(o)  # noqa: E704
    def __ror__(self: TensorLike, o: Operand) -> TensorLike: return self.bitwise_or(o, reverse=True)  # noqa: E704
    def __xor__(self: TensorLike, o: Operand) -> TensorLike: return self.bitwise_xor(o)  # noqa: E704
    def __rxor__(self: TensorLike, o: Operand) -> TensorLike: return self.bitwise_xor(o, reverse=True)  # noqa: E704
    def __invert__(self: TensorLike) -> TensorLike: return self.bitwise_not()  # noqa: E704
    def __lshift__(self: TensorLike, o: int) -> TensorLike: return self.lshift(o)  # noqa: E704
    def __rshift__(self: TensorLike, o: int) -> TensorLike: return self.rshift(o)  # noqa: E704
    def __rmatmul__(self: TensorLike, o: TensorLike) -> TensorLike: return o.matmul(self)  # noqa: E704
