"""Elementwise math: the primitive-backed ops, Python's operators, rounding and powers.

Semantics follow PyTorch, including the corners: comparisons with NaN are False (so `x <= y` is
`(x < y) | (x == y)`, never `not (y < x)`), and `&`, `|`, `^`, `~` are bitwise on integers and
logical on bools. Rounding, `//`, `%` and powers are in rounding.py, activations in activations.py.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

import tinyedu.function as F
import tinyedu.function_composite as FC
import tinyedu.function_math as FM
from tinyedu.dtype import dtypes, from_storage, to_storage
from tinyedu.errors import ArgumentError, DeviceError, DTypeError

if TYPE_CHECKING:
    from tinyedu.tensor import Tensor

Operand = Any  # a Tensor or a Python number


class ElementwiseMixin:
    # ---- casts ----
    def cast(self, dtype: Any) -> "Tensor":
        dtype = dtypes.from_any(dtype)
        return self if dtype == self.dtype else self._apply(F.Cast, dtype=dtype)

    def float(self) -> "Tensor":
        return self.cast(dtypes.float32)

    def int(self) -> "Tensor":
        return self.cast(dtypes.int32)

    def bitcast(self, dtype: Any) -> "Tensor":
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

    def double(self) -> "Tensor":
        return self.cast(dtypes.float64)

    def half(self) -> "Tensor":
        return self.cast(dtypes.float16)

    def long(self) -> "Tensor":
        return self.cast(dtypes.int64)

    def bool(self) -> "Tensor":
        return self.cast(dtypes.bool)

    def _float(self) -> "Tensor":
        """Math like exp or sqrt works on floats; ints are promoted first, as PyTorch does."""
        return self if self.dtype.is_float else self.cast(dtypes.default_float)

    def is_floating_point(self) -> bool:
        return self.dtype.is_float

    # ---- unary primitives ----
    def neg(self) -> "Tensor":
        if self.dtype == dtypes.bool:
            raise DTypeError("neg: negation of a bool tensor is not defined; use logical_not() (or ~)")
        return self._apply(F.Neg)

    def reciprocal(self) -> "Tensor":
        return self._float()._apply(F.Reciprocal)

    def sin(self) -> "Tensor":
        return self._float()._apply(F.Sin)

    def cos(self) -> "Tensor":
        return self._float()._apply(F.Cos)

    def exp2(self) -> "Tensor":
        return self._float()._apply(F.Exp2)

    def log2(self) -> "Tensor":
        return self._float()._apply(F.Log2)

    def sqrt(self) -> "Tensor":
        return self._float()._apply(F.Sqrt)

    # ---- unary, composed ----
    def exp(self) -> "Tensor":
        """e^x to under an ulp over the whole float32 range (see tinyedu/expr.py, exp)."""
        return self._float()._apply(FC.Exp)

    def log(self) -> "Tensor":
        return self._float().log2() * math.log(2)

    def log10(self) -> "Tensor":
        return self._float().log2() * math.log10(2)

    def expm1(self) -> "Tensor":
        """exp(x) - 1, accurate where exp(x) is close to 1 (expm1(1e-10) is 1e-10, not 0)."""
        return self._float()._apply(FC.Expm1)

    def log1p(self) -> "Tensor":
        """log(1 + x), accurate for tiny x (log1p(1e-10) is 1e-10, not 0)."""
        return self._float()._apply(FC.Log1p)

    def rsqrt(self) -> "Tensor":
        return self.sqrt().reciprocal()

    def tan(self) -> "Tensor":
        return self._float()._apply(FC.Tan)

    def square(self) -> "Tensor":
        return self * self

    def lerp(self, end: Operand, weight: Operand) -> "Tensor":
        """self + weight * (end - self): linear interpolation (torch.lerp)."""
        return self + (end - self) * weight

    def isnan(self) -> "Tensor":
        return self != self

    def isinf(self) -> "Tensor":
        return self.abs() == float("inf") if self.dtype.is_float else self.zeros_like(dtype="bool")

    def isfinite(self) -> "Tensor":
        return (self.abs() < float("inf")) if self.dtype.is_float else self.ones_like(dtype="bool")

    def logical_not(self) -> "Tensor":
        false = self._to_tensor(False, dtypes.bool)._broadcast_to(self.shape)
        return self.cast(dtypes.bool)._apply(F.Eq, false)

    # ---- binary primitives, with broadcasting and dtype promotion ----
    def add(self, other: Operand, reverse: bool = False) -> "Tensor":
        x, y = self._broadcasted(other, "add", reverse)
        return x._apply(F.Add, y)

    def sub(self, other: Operand, reverse: bool = False) -> "Tensor":
        x, y = self._broadcasted(other, "sub", reverse)
        if x.dtype == dtypes.bool:
            raise DTypeError("sub: subtraction of bool tensors is not defined; use logical ops or cast to "
                             "int")
        return x._apply(F.Sub, y)

    def mul(self, other: Operand, reverse: bool = False) -> "Tensor":
        x, y = self._broadcasted(other, "mul", reverse)
        return x._apply(F.Mul, y)

    def div(self, other: Operand, reverse: bool = False, rounding_mode: str | None = None) -> "Tensor":
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

    def true_divide(self, other: Operand) -> "Tensor":
        return self.div(other)

    def maximum(self, other: Operand) -> "Tensor":
        x, y = self._broadcasted(other, "maximum")
        return x._apply(F.Maximum, y)

    def copysign(self, other: Operand) -> "Tensor":
        """|self| with the sign of other (-0.0 is negative; a NaN counts as positive). Always float."""
        x, y = self._broadcasted(other, "copysign")
        return x._float()._apply(FM.Copysign, y._float())

    def atan2(self, other: Operand) -> "Tensor":
        """The angle of the point (other, self) in (-pi, pi] (torch.atan2(input=y, other=x))."""
        y, x = self._broadcasted(other, "atan2")
        return y._float()._apply(FM.Atan2, x._float())

    arctan2 = atan2

    def minimum(self, other: Operand) -> "Tensor":
        x, y = self._broadcasted(other, "minimum")
        if x.dtype.is_float:
            return -((-x).maximum(-y))
        return (x < y).where(x, y)

    # ---- comparisons: False whenever a NaN is involved (except !=) ----
    def lt(self, other: Operand, reverse: bool = False) -> "Tensor":
        x, y = self._broadcasted(other, "lt", reverse)
        return x._apply(F.Less, y)

    # --8<-- [start:le]
    def le(self, other: Operand, reverse: bool = False) -> "Tensor":
        """x <= y is (x < y) | (x == y). `not (y < x)` would say NaN <= 0."""
        x, y = self._broadcasted(other, "le", reverse)
        return x._apply(F.Less, y)._apply(F.BitwiseOr, x._apply(F.Eq, y))

    # --8<-- [end:le]
    def eq(self, other: Operand) -> "Tensor":
        x, y = self._broadcasted(other, "eq")
        return x._apply(F.Eq, y)

    def ne(self, other: Operand) -> "Tensor":
        return self.eq(other).logical_not()  # NaN != NaN is True, as it should be

    def gt(self, other: Operand) -> "Tensor":
        return self.lt(other, reverse=True)

    def ge(self, other: Operand) -> "Tensor":
        return self.le(other, reverse=True)

    def where(self, x: Operand, y: Operand) -> "Tensor":
        """`cond.where(x, y)`: x where cond is true, else y (cond, x and y broadcast together)."""
        from tinyedu.tensor import Tensor, broadcast_shape

        for name, value in (("x", x), ("y", y)):
            if isinstance(value, Tensor) and value.device != self.device:
                raise DeviceError(f"where: tensors are on different devices: the condition is on "
                                  f"{self.device}, {name} on {value.device}; move it with "
                                  f".to({self.device!r})")
            if not isinstance(value, (Tensor, bool, int, float)):
                raise TypeError(f"where: {name} must be a Tensor or a Python number, not "
                                f"{type(value).__name__}")
        cond = self.cast(dtypes.bool)
        if not isinstance(x, Tensor) and not isinstance(y, Tensor):
            x = Tensor(x, device=self.device)
        if isinstance(x, Tensor):
            x, y = x._broadcasted(y, "where")
        else:
            y, x = y._broadcasted(x, "where")
        shape = broadcast_shape(cond.shape, x.shape, op="where")
        return cond._broadcast_to(shape)._apply(F.Where, x._broadcast_to(shape), y._broadcast_to(shape))

    # ---- logical and bitwise ----
    def logical_and(self, other: Operand) -> "Tensor":
        x, y = self._broadcasted(other, "logical_and")
        return x.cast(dtypes.bool)._apply(F.BitwiseAnd, y.cast(dtypes.bool))

    def logical_or(self, other: Operand) -> "Tensor":
        x, y = self._broadcasted(other, "logical_or")
        return x.cast(dtypes.bool)._apply(F.BitwiseOr, y.cast(dtypes.bool))

    def logical_xor(self, other: Operand) -> "Tensor":
        x, y = self._broadcasted(other, "logical_xor")
        return x.cast(dtypes.bool)._apply(F.BitwiseXor, y.cast(dtypes.bool))

    def _integer_ops(self, op: str) -> "Tensor":
        if self.dtype.is_float:
            raise DTypeError(f"{op}: only integer and bool tensors have bits, this one is {self.dtype.name}; "
                             "use logical_and/or/xor/not for truth values, or cast with .int()")
        return self

    def bitwise_and(self, other: Operand, reverse: bool = False) -> "Tensor":
        x, y = self._broadcasted(other, "bitwise_and", reverse)
        return x._integer_ops("bitwise_and")._apply(F.BitwiseAnd, y)

    def bitwise_or(self, other: Operand, reverse: bool = False) -> "Tensor":
        x, y = self._broadcasted(other, "bitwise_or", reverse)
        return x._integer_ops("bitwise_or")._apply(F.BitwiseOr, y)

    def bitwise_xor(self, other: Operand, reverse: bool = False) -> "Tensor":
        x, y = self._broadcasted(other, "bitwise_xor", reverse)
        return x._integer_ops("bitwise_xor")._apply(F.BitwiseXor, y)

    xor = bitwise_xor  # tinygrad's name

    def bitwise_not(self) -> "Tensor":
        """~x: flips every bit of an integer (~x == -x - 1), negates a bool."""
        if self._integer_ops("bitwise_not").dtype == dtypes.bool:
            return self.logical_not()
        return self.bitwise_xor(-1)  # all ones (in uint8, -1 wraps to 255)

    def lshift(self, bits: int) -> "Tensor":
        """x << bits for integers: x * 2**bits, wrapping around like C."""
        return self._integer_ops("lshift") * (2 ** self._shift_amount(bits, "lshift"))

    def rshift(self, bits: int) -> "Tensor":
        """x >> bits for integers: an arithmetic shift, x // 2**bits (rounds toward -inf, like C on
        two's complement and like PyTorch)."""
        bits = self._integer_ops("rshift")._shift_amount(bits, "rshift")
        if self.dtype == dtypes.int32 and bits == 31:  # 2**31 is no int32: only the sign bit is left
            return (self < 0).where(-1, 0)
        return self.floor_divide(2**bits)

    def _shift_amount(self, bits: Any, op: str) -> int:
        width = 8 * self.dtype.itemsize
        if not isinstance(bits, int) or isinstance(bits, bool) or not 0 <= bits < width:
            raise ValueError(f"{op}: the shift must be a Python int in 0..{width - 1} for {self.dtype.name}, "
                             f"got {bits!r}")
        return bits

    # ---- Python operators ----
    def __neg__(self) -> "Tensor": return self.neg()  # noqa: E704
    def __add__(self, o: Operand) -> "Tensor": return self.add(o)  # noqa: E704
    def __radd__(self, o: Operand) -> "Tensor": return self.add(o, reverse=True)  # noqa: E704
    def __sub__(self, o: Operand) -> "Tensor": return self.sub(o)  # noqa: E704
    def __rsub__(self, o: Operand) -> "Tensor": return self.sub(o, reverse=True)  # noqa: E704
    def __mul__(self, o: Operand) -> "Tensor": return self.mul(o)  # noqa: E704
    def __rmul__(self, o: Operand) -> "Tensor": return self.mul(o, reverse=True)  # noqa: E704
    def __truediv__(self, o: Operand) -> "Tensor": return self.div(o)  # noqa: E704
    def __rtruediv__(self, o: Operand) -> "Tensor": return self.div(o, reverse=True)  # noqa: E704
    def __floordiv__(self, o: Operand) -> "Tensor": return self.floor_divide(o)  # noqa: E704
    def __rfloordiv__(self, o: Operand) -> "Tensor": return self.floor_divide(o, reverse=True)  # noqa: E704
    def __pow__(self, o: Operand) -> "Tensor": return self.pow(o)  # noqa: E704
    def __rpow__(self, o: Operand) -> "Tensor": return self.pow(o, reverse=True)  # noqa: E704
    def __mod__(self, o: Operand) -> "Tensor": return self.mod(o)  # noqa: E704
    def __rmod__(self, o: Operand) -> "Tensor": return self.mod(o, reverse=True)  # noqa: E704
    def __lt__(self, o: Operand) -> "Tensor": return self.lt(o)  # noqa: E704
    def __gt__(self, o: Operand) -> "Tensor": return self.gt(o)  # noqa: E704
    def __le__(self, o: Operand) -> "Tensor": return self.le(o)  # noqa: E704
    def __ge__(self, o: Operand) -> "Tensor": return self.ge(o)  # noqa: E704
    def __eq__(self, o: Operand) -> "Tensor": return self.eq(o)  # type: ignore[override]  # noqa: E704
    def __ne__(self, o: Operand) -> "Tensor": return self.ne(o)  # type: ignore[override]  # noqa: E704
    def __and__(self, o: Operand) -> "Tensor": return self.bitwise_and(o)  # noqa: E704
    def __rand__(self, o: Operand) -> "Tensor": return self.bitwise_and(o, reverse=True)  # noqa: E704
    def __or__(self, o: Operand) -> "Tensor": return self.bitwise_or(o)  # noqa: E704
    def __ror__(self, o: Operand) -> "Tensor": return self.bitwise_or(o, reverse=True)  # noqa: E704
    def __xor__(self, o: Operand) -> "Tensor": return self.bitwise_xor(o)  # noqa: E704
    def __rxor__(self, o: Operand) -> "Tensor": return self.bitwise_xor(o, reverse=True)  # noqa: E704
    def __invert__(self) -> "Tensor": return self.bitwise_not()  # noqa: E704
    def __lshift__(self, o: int) -> "Tensor": return self.lshift(o)  # noqa: E704
    def __rshift__(self, o: int) -> "Tensor": return self.rshift(o)  # noqa: E704
    def __matmul__(self, o: "Tensor") -> "Tensor": return self.matmul(o)  # noqa: E704
    def __rmatmul__(self, o: "Tensor") -> "Tensor": return o.matmul(self)  # noqa: E704
