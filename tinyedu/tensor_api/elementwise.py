"""Elementwise math: the primitive-backed ops, Python's operators, and functions composed from them."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import tinyedu.function as F
from tinyedu.dtype import dtypes

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

    def bool(self) -> "Tensor":
        return self.cast(dtypes.bool)

    def _float(self) -> "Tensor":
        """Math like exp or sqrt works on floats; ints are promoted first, as PyTorch does."""
        return self if self.dtype.is_float else self.cast(dtypes.default_float)

    # ---- unary primitives ----
    def neg(self) -> "Tensor":
        if self.dtype == dtypes.bool:
            raise TypeError("neg: negation of a bool tensor is not defined; use logical_not()")
        return self._apply(F.Neg)

    def reciprocal(self) -> "Tensor":
        return self._float()._apply(F.Reciprocal)

    def sin(self) -> "Tensor":
        return self._float()._apply(F.Sin)

    def exp2(self) -> "Tensor":
        return self._float()._apply(F.Exp2)

    def log2(self) -> "Tensor":
        return self._float()._apply(F.Log2)

    def sqrt(self) -> "Tensor":
        return self._float()._apply(F.Sqrt)

    # ---- unary, composed ----
    def exp(self) -> "Tensor":
        return (self._float() * (1 / math.log(2))).exp2()

    def log(self) -> "Tensor":
        return self._float().log2() * math.log(2)

    def rsqrt(self) -> "Tensor":
        return self.sqrt().reciprocal()

    def cos(self) -> "Tensor":
        return ((math.pi / 2) - self._float()).sin()

    def square(self) -> "Tensor":
        return self * self

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
            raise TypeError("sub: subtraction of bool tensors is not defined; use logical ops or cast to int")
        return x._apply(F.Sub, y)

    def mul(self, other: Operand, reverse: bool = False) -> "Tensor":
        x, y = self._broadcasted(other, "mul", reverse)
        return x._apply(F.Mul, y)

    def div(self, other: Operand, reverse: bool = False) -> "Tensor":
        """True division: integers are promoted to float first, as in PyTorch."""
        x, y = self._broadcasted(other, "div", reverse)
        return x._float()._apply(F.Div, y._float())

    def maximum(self, other: Operand) -> "Tensor":
        x, y = self._broadcasted(other, "maximum")
        return x._apply(F.Maximum, y)

    def minimum(self, other: Operand) -> "Tensor":
        x, y = self._broadcasted(other, "minimum")
        if x.dtype.is_float:
            return -((-x).maximum(-y))
        return (x < y).where(x, y)

    def lt(self, other: Operand, reverse: bool = False) -> "Tensor":
        x, y = self._broadcasted(other, "lt", reverse)
        return x._apply(F.Less, y)

    def eq(self, other: Operand) -> "Tensor":
        x, y = self._broadcasted(other, "eq")
        return x._apply(F.Eq, y)

    def ne(self, other: Operand) -> "Tensor":
        return self.eq(other).logical_not()

    def gt(self, other: Operand) -> "Tensor":
        return self.lt(other, reverse=True)

    def le(self, other: Operand) -> "Tensor":
        return self.gt(other).logical_not()

    def ge(self, other: Operand) -> "Tensor":
        return self.lt(other).logical_not()

    def where(self, x: Operand, y: Operand) -> "Tensor":
        """`cond.where(x, y)`: x where cond is true, else y (cond, x and y broadcast together)."""
        from tinyedu.tensor import Tensor, broadcast_shape

        for name, value in (("x", x), ("y", y)):
            if isinstance(value, Tensor) and value.device != self.device:
                raise ValueError(f"where: tensors are on different devices: the condition is on "
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

    def pow(self, exponent: Operand, reverse: bool = False) -> "Tensor":
        """x ** y. Small integer powers multiply (exact, and right for negative x); the rest use
        2^(y*log2|x|) with the sign fixed for odd integer exponents and NaN for a negative base with
        a fractional exponent, as in PyTorch."""
        if not reverse and isinstance(exponent, (int, float)) and not isinstance(exponent, bool):
            if exponent == 0:
                return self.ones_like() if self.dtype.is_float else self.full_like(1)
            if exponent == 0.5:
                return self.sqrt()
            if float(exponent).is_integer() and abs(exponent) <= 8:
                result = self
                for _ in range(int(abs(exponent)) - 1):
                    result = result * self
                return result.reciprocal() if exponent < 0 else result
        base, power = self._broadcasted(exponent, "pow", reverse)
        base, power = base._float(), power._float()
        magnitude = (power * base.abs().log2()).exp2()
        power_is_int = power == power.trunc()
        power_is_odd = power_is_int & ((power.abs() % 2) == 1)
        signed = (base < 0).where(power_is_int.where(power_is_odd.where(-magnitude, magnitude), math.nan),
                                  magnitude)
        return (power == 0).where(1.0, signed)

    def trunc(self) -> "Tensor":
        return self if not self.dtype.is_float else self.cast(dtypes.int32).cast(self.dtype)

    def mod(self, other: Operand) -> "Tensor":
        """x % y with Python's sign rule (the result takes the sign of y), like torch.remainder."""
        x, y = self._broadcasted(other, "mod")
        r = x._apply(F.Mod, y)
        return ((r != 0) & ((r < 0) != (y < 0))).where(r + y, r)

    def logical_and(self, other: Operand) -> "Tensor":
        x, y = self._broadcasted(other, "logical_and")
        return x.cast(dtypes.bool)._apply(F.Mul, y.cast(dtypes.bool))

    def logical_or(self, other: Operand) -> "Tensor":
        x, y = self._broadcasted(other, "logical_or")
        return x.cast(dtypes.bool)._apply(F.Add, y.cast(dtypes.bool))

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
    def __pow__(self, o: Operand) -> "Tensor": return self.pow(o)  # noqa: E704
    def __rpow__(self, o: Operand) -> "Tensor": return self.pow(o, reverse=True)  # noqa: E704
    def __mod__(self, o: Operand) -> "Tensor": return self.mod(o)  # noqa: E704
    def __lt__(self, o: Operand) -> "Tensor": return self.lt(o)  # noqa: E704
    def __gt__(self, o: Operand) -> "Tensor": return self.gt(o)  # noqa: E704
    def __le__(self, o: Operand) -> "Tensor": return self.le(o)  # noqa: E704
    def __ge__(self, o: Operand) -> "Tensor": return self.ge(o)  # noqa: E704
    def __eq__(self, o: Operand) -> "Tensor": return self.eq(o)  # type: ignore[override]  # noqa: E704
    def __ne__(self, o: Operand) -> "Tensor": return self.ne(o)  # type: ignore[override]  # noqa: E704
    def __and__(self, o: Operand) -> "Tensor": return self.logical_and(o)  # noqa: E704
    def __or__(self, o: Operand) -> "Tensor": return self.logical_or(o)  # noqa: E704
    def __invert__(self) -> "Tensor": return self.logical_not()  # noqa: E704
    def __matmul__(self, o: "Tensor") -> "Tensor": return self.matmul(o)  # noqa: E704
    def __rmatmul__(self, o: "Tensor") -> "Tensor": return o.matmul(self)  # noqa: E704

    # ---- activations and friends, all composed ----
    def relu(self) -> "Tensor":
        return (self > 0).where(self, 0)

    def abs(self) -> "Tensor":
        return self if self.dtype in (dtypes.bool, dtypes.uint8) else (self < 0).where(-self, self)

    def sign(self) -> "Tensor":
        return (self > 0).where(1, (self < 0).where(-1, 0)).cast(self.dtype)

    def sigmoid(self) -> "Tensor":
        return (1 + (-self._float()).exp()).reciprocal()

    def tanh(self) -> "Tensor":
        return 2.0 * (2.0 * self._float()).sigmoid() - 1.0

    def gelu(self) -> "Tensor":
        """The tanh approximation (PyTorch's approximate='tanh')."""
        x = self._float()
        return 0.5 * x * (1 + (math.sqrt(2 / math.pi) * (x + 0.044715 * x * x * x)).tanh())

    def silu(self) -> "Tensor":
        return self * self.sigmoid()

    def leaky_relu(self, negative_slope: float = 0.01) -> "Tensor":
        return (self > 0).where(self, self * negative_slope)

    def softplus(self, beta: float = 1.0) -> "Tensor":
        """log(1 + exp(beta x)) / beta, computed without overflow: max(z, 0) + log(1 + exp(-|z|))."""
        z = self._float() * beta
        return (z.relu() + (1 + (-z.abs()).exp()).log()) * (1 / beta)

    def clamp(self, min: float | None = None, max: float | None = None) -> "Tensor":  # noqa: A002
        if min is None and max is None:
            raise ValueError("clamp: give at least one of min and max")
        out = self
        if min is not None:
            out = (out < min).where(min, out)
        if max is not None:
            out = (out > max).where(max, out)
        return out

    clip = clamp
