"""Activation functions and hyperbolic functions, with PyTorch's (and tinygrad's) names.

Most are a line of composed ops. The delicate ones (relu at 0 and NaN, sigmoid and tanh where exp
overflows, softplus, gelu, expm1-based elu) use the Functions of tinyedu/function_composite.py,
whose hand-written derivatives stay finite where the chain rule would form inf * 0.

One idiom recurs: `where(c, f(x), x)` sends gradient 0 into the branch it did not pick, but 0 times
an infinite local derivative is NaN. So the picked-against branch is fed a harmless input:
`f(where(c, x, 0))` (for elu, f = expm1 would overflow at x = 100 otherwise).
"""

from __future__ import annotations

from typing import Any

import tinyedu.function_composite as FC
import tinyedu.function_math as FM
from tinyedu.core.dtype import dtypes, promote_with_scalar
from tinyedu.core.errors import ArgumentError
from tinyedu.tensor_api.base import TensorLike


def _number(value: Any, name: str, op: str) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise TypeError(f"{op}: {name} must be a number, got {type(value).__name__}")
    return value


class ActivationMixin:
    # ---- piecewise linear ----
    def relu(self: TensorLike) -> TensorLike:
        """max(x, 0); NaN stays NaN and the gradient at 0 is 0, as in PyTorch."""
        return self._apply(FC.Relu) if self.dtype.is_float else (self < 0).where(0, self).cast(self.dtype)

    def abs(self: TensorLike) -> TensorLike:
        """|x|; the gradient is sign(x), 0 at 0 (as in PyTorch)."""
        if self.dtype in (dtypes.bool, dtypes.uint8):
            return self
        return self._apply(FC.Abs) if self.dtype.is_float else (self < 0).where(-self, self)

    def clamp(self: TensorLike, min: Any = None, max: Any = None) -> TensorLike:  # noqa: A002 - torch's
        """Limit to [min, max] (numbers or tensors; either may be None). NaN stays NaN; at a bound
        the gradient goes through, as PyTorch's clamp does."""
        if min is None and max is None:
            raise ArgumentError("clamp: give at least one of min and max")
        if isinstance(min, type(self)) or isinstance(max, type(self)):
            return self._clamp_tensors(min, max)
        low, high = (None if v is None else _number(v, name, "clamp")
                     for v, name in ((min, "min"), (max, "max")))
        x = self
        for bound in (low, high):
            if bound is not None:
                x = x.cast(promote_with_scalar(x.dtype, bound))
        if not x.dtype.is_float:
            out = x if low is None else (x < low).where(low, x)
            return out if high is None else (out > high).where(high, out)
        return x._apply(FC.Clamp, low=low, high=high, inclusive=True)

    clip = clamp

    def _clamp_tensors(self: TensorLike, low: Any, high: Any) -> TensorLike:
        """clamp with a tensor among the bounds: everything broadcast to one shape and dtype; floats
        take PyTorch's gradient rule (FC.ClampTensors), integers min(max(x, low), high)."""
        given = {side: b for side, b in (("low", low), ("high", high)) if b is not None}
        x = self
        for b in given.values():  # x takes the shape and dtype of all three together
            x = x._broadcasted(b, "clamp")[0]
        bounds = [x._broadcasted(b, "clamp")[1] for b in given.values()]
        if not x.dtype.is_float:
            out = x
            for side, b in zip(given, bounds, strict=True):
                out = (out < b).where(b, out) if side == "low" else (out > b).where(b, out)
            return out
        return x._apply(FC.ClampTensors, *bounds, sides=tuple(given))

    def hardtanh(self: TensorLike, min_val: float = -1.0, max_val: float = 1.0) -> TensorLike:
        """clamp(x, min_val, max_val) with PyTorch's hardtanh gradient: 0 at the bounds themselves."""
        low, high = _number(min_val, "min_val", "hardtanh"), _number(max_val, "max_val", "hardtanh")
        if low > high:
            raise ValueError(f"hardtanh: min_val ({low}) must not be greater than max_val ({high})")
        return self._float()._apply(FC.Clamp, low=low, high=high, inclusive=False)

    def relu6(self: TensorLike) -> TensorLike:
        return self.hardtanh(0.0, 6.0)

    def leaky_relu(self: TensorLike, negative_slope: float = 0.01) -> TensorLike:
        _number(negative_slope, "negative_slope", "leaky_relu")
        return (self > 0).where(self, self * negative_slope)

    def leakyrelu(self: TensorLike, neg_slope: float = 0.01) -> TensorLike:  # tinygrad's name
        return self.leaky_relu(neg_slope)

    def hardsigmoid(self: TensorLike) -> TensorLike:
        """relu6(x + 3) / 6; gradient 1/6 strictly between -3 and 3, as in PyTorch."""
        return self._float()._apply(FC.Hardsigmoid)

    def hardswish(self: TensorLike) -> TensorLike:
        """x * relu6(x + 3) / 6, with PyTorch's gradient: x/3 + 1/2 strictly between -3 and 3, 0 at -3
        and below, 1 at 3 and above."""
        return self._float()._apply(FC.Hardswish)

    # ---- smooth ----
    def sigmoid(self: TensorLike) -> TensorLike:
        return self._float()._apply(FC.Sigmoid)

    def logsigmoid(self: TensorLike) -> TensorLike:
        """-softplus(-x). Softplus returns its input past its threshold (20), which is exact only to
        float32's precision (log(1 + e^-20) is 2e-9); float64 takes 40 (4e-18 is below its ulp)."""
        x = self._float()
        return -(-x).softplus(threshold=40.0 if x.dtype == dtypes.float64 else 20.0)

    def tanh(self: TensorLike) -> TensorLike:
        return self._float()._apply(FC.Tanh)

    def softplus(self: TensorLike, beta: float = 1.0, threshold: float = 20.0) -> TensorLike:
        """log(1 + exp(beta x)) / beta, and x where beta x > threshold (PyTorch's defaults)."""
        beta, threshold = _number(beta, "beta", "softplus"), _number(threshold, "threshold", "softplus")
        if beta == 0:
            raise ValueError("softplus: beta must not be 0")
        return self._float()._apply(FC.Softplus, beta=beta, threshold=threshold)

    def softsign(self: TensorLike) -> TensorLike:
        return self / (1 + self.abs())

    def silu(self: TensorLike) -> TensorLike:
        """x * sigmoid(x), also called swish (a Function for PyTorch's gradient, see Silu)."""
        return self._float()._apply(FC.Silu)

    swish = silu

    def gelu(self: TensorLike, approximate: str = "none") -> TensorLike:
        """x * Phi(x) with Phi the normal CDF (PyTorch's default; tinygrad's gelu is the 'tanh' one).

        approximate='tanh' is 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3), computed as
        x * sigmoid(2u), the same number without the 1 + (-1 + tiny) cancellation for negative x.
        """
        x = self._float()
        if approximate == "none":
            return x._apply(FC.Gelu)
        if approximate != "tanh":
            raise ArgumentError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
        return x._apply(FC.GeluTanh)

    def quick_gelu(self: TensorLike) -> TensorLike:
        return self * (1.702 * self).sigmoid()

    def mish(self: TensorLike) -> TensorLike:
        """x * tanh(softplus(x)) (a Function for PyTorch's gradient, see Mish)."""
        return self._float()._apply(FC.Mish)

    def elu(self: TensorLike, alpha: float = 1.0) -> TensorLike:
        """x for x > 0, alpha (exp(x) - 1) below (expm1, accurate near 0)."""
        alpha = _number(alpha, "alpha", "elu")
        x = self._float()
        negative = x <= 0
        return negative.where(alpha * negative.where(x, 0.0).expm1(), x)

    def celu(self: TensorLike, alpha: float = 1.0) -> TensorLike:
        alpha = _number(alpha, "alpha", "celu")
        if alpha == 0:
            raise ArgumentError("celu: alpha must not be 0")
        x = self._float()
        negative = x <= 0
        return negative.where(alpha * (negative.where(x, 0.0) / alpha).expm1(), x)

    def selu(self: TensorLike) -> TensorLike:
        alpha, scale = 1.6732632423543772, 1.0507009873554805
        return scale * self.elu(alpha)

    # ---- hyperbolic ----
    def sinh(self: TensorLike) -> TensorLike:
        return self._float()._apply(FM.Sinh)

    def cosh(self: TensorLike) -> TensorLike:
        return self._float()._apply(FM.Cosh)

    def asinh(self: TensorLike) -> TensorLike:
        return self._float()._apply(FM.Asinh)

    def acosh(self: TensorLike) -> TensorLike:
        return self._float()._apply(FM.Acosh)

    def atanh(self: TensorLike) -> TensorLike:
        return self._float()._apply(FM.Atanh)
