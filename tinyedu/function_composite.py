"""Composite Functions: a forward made of several primitives, with a backward written by hand.

Most Tensor methods are compositions of primitive Functions and get their gradient from the chain
rule. That fails at the edges for a few: sigmoid(-100) is 1 / (1 + exp(100)) = 1 / inf, and the
chain rule multiplies the derivative of 1/u (which is -1/u^2 = 0) by that of exp (inf): 0 * inf is
NaN, where the true gradient is 0. The cure is the textbook one: write the derivative in terms of
the *result* (sigmoid' = s (1 - s)), which has no inf in it. Each Function here says which edge
forced it. The forward still runs on primitives, so it fuses and compiles like everything else.

This file holds the activations; function_math.py the hyperbolic functions, powers and softmax's
gradient. The formulas are written with `Expr` (tinyedu/expr.py), so they read like the math.
"""

from __future__ import annotations

import math
from decimal import Context, Decimal
from fractions import Fraction
from typing import Any

from tinyedu.core.dtype import dtypes
from tinyedu.core.function import Function
from tinyedu.expr import Expr, erfc, exp, exp_minus_square, split, tanh
from tinyedu.function_template import templated
from tinyedu.lazy import LazyBuffer

__all__ = ["Expr", "UnaryFunction"]  # Expr is re-exported: exercises write `from here import Expr`


# ---- the Functions ----
# --8<-- [start:unary-function]
class UnaryFunction(Function):
    """A unary Function given as formulas: the value, the derivative (from x and the value), and
    maybe `passes`, where the gradient gets through at all. PyTorch's piecewise functions (relu,
    clamp, hardswish...) *select* the gradient rather than multiply it by 0, so an infinite incoming
    gradient becomes 0 where they are flat, not 0 * inf = NaN.

    float16 and bfloat16 inputs are computed in float32 and the result rounded once to their dtype,
    forward and backward (as PyTorch does). The formulas need it: their constants (1.5 * 2^23 to
    round to an integer, 4097 to split a number in halves) and intermediate values (x * x, e^x
    before a division) overflow float16, whose largest number is 65504, and bfloat16's 8 bits of
    precision would lose what the formulas' error terms carry.
    """

    #: Whether `value` may be replayed from a template (tinyedu/function_template.py): True for a
    #: formula of x and the parameters alone, that keeps nothing on `self` for backward.
    template = False

    def value(self, x: Expr) -> Expr:
        raise NotImplementedError

    def derivative(self, x: Expr, ret: Expr) -> Expr:
        raise NotImplementedError

    def passes(self, x: Expr, ret: Expr) -> Expr | None:
        return None

    def forward(self, x: LazyBuffer, **params: Any) -> LazyBuffer:
        self.params, self.dtype = params, x.dtype
        self.x = Expr(x.cast(dtypes.float32) if x.dtype.is_half else x)
        if self.template:  # the same graph as value(x), replayed when this formula ran on such an x before
            self.ret = Expr(templated(type(self), params, self.x.lazydata,
                                      lambda lb: (self.value(Expr(lb)).lazydata,))[0])
        else:
            self.ret = self.value(self.x)
        return self.ret.lazydata.cast(x.dtype)

    def backward(self, grad: LazyBuffer) -> LazyBuffer:
        local = self.derivative(self.x, self.ret) * Expr(grad.cast(self.x.lazydata.dtype))
        passes = self.passes(self.x, self.ret)
        return (local if passes is None else passes.where(local, 0.0)).lazydata.cast(self.dtype)


# --8<-- [end:unary-function]
class Relu(UnaryFunction):
    """max(x, 0) as PyTorch defines it: NaN stays NaN (where(0 < x, x, 0) would give 0), -0.0 stays
    -0.0, and the gradient at exactly 0 is 0. A composite could not say "0 at 0" and "1 at NaN"."""

    def value(self, x: Expr) -> Expr:
        return (x < 0).where(0.0, x)

    def derivative(self, x: Expr, ret: Expr) -> Expr:
        return Expr(x.lazydata.const(1.0))

    def passes(self, x: Expr, ret: Expr) -> Expr:
        return ~(x <= 0)


class Abs(UnaryFunction):
    """|x| with PyTorch's gradient sign(x), which is 0 at 0 (and at NaN). where(x < 0, -x, x) would
    send 1 at 0, and would keep -0.0 negative."""

    def value(self, x: Expr) -> Expr:
        return x.abs()

    def derivative(self, x: Expr, ret: Expr) -> Expr:
        sign = (x > 0).float() - (x < 0).float()
        return sign if not x.double() else Expr(sign.lazydata.cast(x.lazydata.dtype))  # float64 stays so


class Clamp(UnaryFunction):
    """clamp(x, low, high) (either bound may be None), with one of PyTorch's two gradient rules at the
    bounds: clamp lets the gradient through at x == low or high and blocks it at NaN; hardtanh (and
    relu6) blocks it at the bounds and lets it through at NaN. NaN stays NaN in the value."""

    def value(self, x: Expr) -> Expr:
        low, high = self.params["low"], self.params["high"]
        out = x if low is None else (x < low).where(low, x)
        return out if high is None else (out > high).where(high, out)  # min(max(x, low), high)

    def derivative(self, x: Expr, ret: Expr) -> Expr:
        return Expr(x.lazydata.const(1.0))

    def passes(self, x: Expr, ret: Expr) -> Expr:
        low, high = self.params["low"], self.params["high"]
        low, high = -math.inf if low is None else low, math.inf if high is None else high
        if self.params["inclusive"]:  # clamp: inside [low, high]; NaN is not inside
            return (x >= low) & (x <= high)
        return ~((x <= low) | (x >= high))  # hardtanh: NaN is not outside either


class ClampTensors(Function):
    """clamp(x, low, high) with tensor bounds (of x's shape; either may be missing, `sides` names the
    given ones): min(max(x, low), high), and NaN in x or a bound gives NaN, as in PyTorch. Written by
    hand for PyTorch's gradient rule, which the chain rule through two wheres does not give: x gets
    the gradient where low <= x <= high, low where x < low < high, high where x > high or high < low
    (so with low == high and x outside, no input gets it)."""

    def forward(self, x: LazyBuffer, *bounds: LazyBuffer, sides: tuple[str, ...]) -> LazyBuffer:
        given = dict(zip(sides, (Expr(b) for b in bounds), strict=True))
        self.x, self.low, self.high, self.sides = Expr(x), given.get("low"), given.get("high"), sides
        out = self.x
        if self.low is not None:
            out = self.low.ne(self.low).where(self.low, (out < self.low).where(self.low, out))
        if self.high is not None:
            out = self.high.ne(self.high).where(self.high, (out > self.high).where(self.high, out))
        return out.lazydata

    def backward(self, grad: LazyBuffer) -> tuple[LazyBuffer | None, ...]:
        x, low, high = self.x, self.low, self.high
        inside = [m for m in (None if low is None else x >= low, None if high is None else x <= high) if m]
        masks = {"x": inside[0] if len(inside) == 1 else inside[0] & inside[1]}
        if low is not None:
            masks["low"] = (x < low) if high is None else (x < low) & (low < high)
        if high is not None:
            masks["high"] = (x > high) if low is None else (x > high) | (high < low)
        g = Expr(grad)
        return tuple(masks[side].where(g, 0.0).lazydata if need else None
                     for side, need in zip(("x", *self.sides), self.needs_input_grad, strict=True))


class Hardswish(UnaryFunction):
    """x * relu6(x + 3) / 6 with PyTorch's gradient: 0 up to -3, x/3 + 1/2 up to 3 (exclusive), 1
    after (and at NaN). The flat part selects 0 (see UnaryFunction), which a composite cannot."""

    def value(self, x: Expr) -> Expr:
        return x * _relu6(x + 3) / 6

    def derivative(self, x: Expr, ret: Expr) -> Expr:
        return (x < 3).where(x / 3 + 0.5, 1.0)

    def passes(self, x: Expr, ret: Expr) -> Expr:
        return ~(x <= -3)


class Hardsigmoid(UnaryFunction):
    """relu6(x + 3) / 6; gradient 1/6 strictly between -3 and 3, else 0 (NaN too), as PyTorch."""

    def value(self, x: Expr) -> Expr:
        return _relu6(x + 3) / 6

    def derivative(self, x: Expr, ret: Expr) -> Expr:
        return Expr(x.lazydata.const(1 / 6))

    def passes(self, x: Expr, ret: Expr) -> Expr:
        return (x > -3) & (x < 3)


def _relu6(x: Expr) -> Expr:
    """min(max(x, 0), 6), NaN kept."""
    return (x < 0).where(0.0, (x > 6).where(6.0, x))


# --8<-- [start:sigmoid]
class Sigmoid(UnaryFunction):
    """sigmoid(x) (see Expr.sigmoid: no overflow, subnormal for x < -87). The chain rule through it
    would multiply 0 by inf at x = -100; the derivative written by hand has no inf in it. PyTorch's
    s (1 - s) rounds to 0 from x = 17 (s is 1 in float32); e / (1 + e)^2 with e = e^-|x| is the same
    number to 1 ulp, and keeps 4.1e-8 at 17 (and 3.7e-44 at 100)."""

    def value(self, x: Expr) -> Expr:
        return x.sigmoid()

    def derivative(self, x: Expr, ret: Expr) -> Expr:
        e = (-x.abs()).exp()
        return _bell(e, e)


# --8<-- [end:sigmoid]
# --8<-- [start:tanh]
class Tanh(UnaryFunction):
    """tanh(|x|) is 1 - 2 / (e^(2|x|) + 1) from |x| = 0.55 (where tanh is 0.5: the subtraction
    cancels less than a bit) and a polynomial below (its Taylor series in float64, 5 fitted terms in
    float32: see tinyedu/expr.py), sign restored (-0.0 kept). 2 sigmoid(2x) - 1
    would cancel to 0 for tiny x (tanh(1e-8) is 1e-8), and m / (m + 2) with m = expm1(2x) passes
    expm1's rounding on in full; both are about 1 ulp here. Nothing overflows: e^(2|x|) = inf gives 1.

    Derivative: 1 - tanh^2 rounds to 0 from |x| = 9 (tanh is 1 in float32) and loses digits well
    before; sech^2 x = 4 e / (1 + e)^2 with e = e^(-2|x|) keeps them (4.2e-8 at 9, not 0).
    """

    def value(self, x: Expr) -> Expr:
        return _tanh(x)

    def derivative(self, x: Expr, ret: Expr) -> Expr:
        four_e = exp(-2 * x.abs(), times_pow2=2)  # 4 e^-2|x| rounded once (subnormal from |x| = 51)
        return _bell(four_e * 0.25, four_e)


# --8<-- [end:tanh]
class Silu(UnaryFunction):
    """x * sigmoid(x), with PyTorch's derivative s (1 + x (1 - s)) as one factor. Through the product
    the chain rule computes x * s'(x) = x * 0 where the sigmoid saturates, and an infinite incoming
    gradient (silu(300) then exp) turns that 0 into NaN; PyTorch's formula gives inf."""

    def value(self, x: Expr) -> Expr:
        return x * x.sigmoid()

    def derivative(self, x: Expr, ret: Expr) -> Expr:
        s = x.sigmoid()
        return s * (1 + x * (1 - s))


class Mish(UnaryFunction):
    """x * tanh(softplus(x)), with PyTorch's one-factor derivative t + x s (1 - t^2), t the tanh and
    s the sigmoid (for the same reason as Silu)."""

    def value(self, x: Expr) -> Expr:
        return x * _tanh(_softplus(x))

    def derivative(self, x: Expr, ret: Expr) -> Expr:
        t = _tanh(_softplus(x))
        return t + x * x.sigmoid() * (1 - t * t)


class GeluTanh(UnaryFunction):
    """gelu's tanh approximation 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3), computed as
    x sigmoid(2u) (no 1 + (-1 + tiny) cancellation), with PyTorch's one-factor derivative
    0.5 (1 + t) + 0.5 x (1 - t^2) u'(x), t = tanh(u)."""

    def value(self, x: Expr) -> Expr:
        return x * (2 * self._u(x)).sigmoid()

    def derivative(self, x: Expr, ret: Expr) -> Expr:
        t = _tanh(self._u(x))
        du = math.sqrt(2 / math.pi) * (1 + 3 * 0.044715 * x * x)
        return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * du

    @staticmethod
    def _u(x: Expr) -> Expr:
        return math.sqrt(2 / math.pi) * (x + 0.044715 * x * x * x)


class Tan(UnaryFunction):
    """sin(x) / cos(x), with PyTorch's derivative 1 + tan^2 (as one factor)."""

    def value(self, x: Expr) -> Expr:
        return x.sin() / x.cos()

    def derivative(self, x: Expr, ret: Expr) -> Expr:
        return 1 + ret * ret


def _bell(e: Expr, numerator: Expr) -> Expr:
    """numerator / (1 + e)^2 for 0 <= e <= 1 (sigmoid' = e / (1 + e)^2 with e = e^-|x|, tanh' =
    4e / (1 + e)^2 with e = e^-2|x|), with the rounding of 1 + e put back: d + lost = 1 + e exactly,
    and 1 / (d + lost)^2 = (1 - 2 lost / d) / d^2 to first order."""
    d = 1 + e
    lost = e - (d - 1)  # exact (Sterbenz)
    f = numerator / d / d
    return f - f * (2 * lost / d)


def _bernoulli(n: int) -> Fraction:
    """The Bernoulli number B_n (Akiyama-Tanigawa), exactly."""
    a = [Fraction(1, m + 1) for m in range(n + 1)]
    for m in range(n + 1):
        for j in range(m, 0, -1):
            a[j - 1] = j * (a[j - 1] - a[j])
    return a[0]


# tanh's Taylor series x + x^3 (c3 + c5 x^2 + ...): the coefficients 2^2n (2^2n - 1) B_2n / (2n)!, to
# x^41 for float64 (at |x| = 0.55 each term is 0.12 times the last; float32 has a fitted polynomial)
TANH_SERIES_64 = tuple(float(4**n * (4**n - 1) * _bernoulli(2 * n) / math.factorial(2 * n))
                       for n in range(2, 22))


def _tanh(x: Expr) -> Expr:
    """tanh, as the Tanh Function computes it (see there)."""
    if not x.double():
        return tanh(x)  # float32: a shorter polynomial (tinyedu/expr.py)
    a = x.abs()
    z = a * a
    series = TANH_SERIES_64[-1]
    for c in TANH_SERIES_64[-2::-1]:
        series = series * z + c
    near_zero = a + a * z * series
    far = 1 - 2 / ((2 * a).exp() + 1)  # e^(2|x|) is inf past |x| = 44, where tanh is 1
    t = (a < 0.55).where(near_zero, far)  # tanh(|x|)
    return x.eq(0).where(x, (x < 0).where(-t, t))


def _softplus(x: Expr) -> Expr:
    return (x > 20).where(x, x.exp().log1p())


class Exp(UnaryFunction):
    """e^x (see Expr.exp), a Function so that its derivative is the value itself, exactly; the chain
    rule through the formula's exp2s would multiply a rounded log 2 by a rounded 1/log 2."""

    def value(self, x: Expr) -> Expr:
        return x.exp()

    def derivative(self, x: Expr, ret: Expr) -> Expr:
        return ret


class Expm1(UnaryFunction):
    """exp(x) - 1 (see Expr.expm1). Its formula divides by log(u), which is 0 where u = 1: the chain
    rule through it would be 0/0. The derivative is exp(x), computed from x: value + 1 (PyTorch's
    expm1 formula) cancels to 0 for x < -17, where the value rounds to -1, and elu, built on expm1,
    needs exp(x) there (as PyTorch's elu computes it)."""

    def value(self, x: Expr) -> Expr:
        return x.expm1()

    def derivative(self, x: Expr, ret: Expr) -> Expr:
        return x.exp()


class Log1p(UnaryFunction):
    """log(1 + x) (see Expr.log1p); derivative 1 / (1 + x). Hand-written for the same reason as Expm1."""

    def value(self, x: Expr) -> Expr:
        return x.log1p()

    def derivative(self, x: Expr, ret: Expr) -> Expr:
        return 1 / (1 + x)


# --8<-- [start:softplus]
class Softplus(UnaryFunction):
    """log(1 + exp(beta x)) / beta, and x itself where beta x > threshold, as PyTorch. log1p keeps
    softplus(-17) = 4.1e-8 (log(1 + 4.1e-8) rounds to 0). Derivative: sigmoid(beta x) (1 where the
    value is x), which is 0.5 at 0: the old relu(z) + log(1 + exp(-|z|)) composite got -0.5 there,
    from the kinks of relu and abs."""

    def value(self, x: Expr) -> Expr:
        beta, threshold = self.params["beta"], self.params["threshold"]
        z = x * beta
        return (z > threshold).where(x, z.exp().log1p() * (1 / beta))

    def derivative(self, x: Expr, ret: Expr) -> Expr:
        beta, threshold = self.params["beta"], self.params["threshold"]
        z = x * beta
        return (z > threshold).where(1.0, z.sigmoid())


# --8<-- [end:softplus]
class Gelu(UnaryFunction):
    """x * Phi(x), Phi the normal CDF: PyTorch's gelu (approximate='none'). Phi(x) = erfc(-x/sqrt2)/2
    rather than (1 + erf(x/sqrt2))/2, which cancels to 0 for x < -4. Derivative Phi(x) + x phi(x).
    In float64 the rounding of -x/sqrt2 is put back (see _normal_cdf64)."""

    def value(self, x: Expr) -> Expr:
        if x.double():
            return x * _normal_cdf64(x)[0]
        return x * 0.5 * erfc(x * -math.sqrt(0.5))

    def derivative(self, x: Expr, ret: Expr) -> Expr:
        if x.double():
            cdf, density = _normal_cdf64(x)
            return cdf + x * density
        density = (x * x * -0.5).exp() * (1 / math.sqrt(2 * math.pi))
        return 0.5 * erfc(x * -math.sqrt(0.5)) + x * density


MINUS_SQRT_HALF_HI = -math.ldexp(round(math.ldexp(math.sqrt(0.5), 26)), -26)  # 26 bits
MINUS_SQRT_HALF_LO = float(-Decimal("0.5").sqrt(Context(prec=50)) - Decimal(MINUS_SQRT_HALF_HI))  # the rest


def _normal_cdf64(x: Expr) -> tuple[Expr, Expr]:
    """Phi(x) = erfc(z) / 2 and phi(x) = e^(-z^2) / sqrt(2 pi), z = -x/sqrt(2), in float64.

    z rounded is off by up to half an ulp, and erfc's relative slope is about 2z: at x = -6 that
    alone is 40 ulp. So z is kept exactly as z + z_lo (Dekker, as in exp) and both are corrected to
    first order: erfc(z + z_lo) = erfc(z) - (2/sqrt(pi)) e^(-z^2) z_lo, e^(-(z + z_lo)^2) =
    e^(-z^2) (1 - 2 z z_lo). Past |x| = 40 the corrections are 0 (e^(-z^2) is), so x is clamped there
    for them (split(inf) would be NaN)."""
    z = x * -math.sqrt(0.5)
    near = (-((-x).max(-40.0))).max(-40.0)  # x clamped to [-40, 40], NaN kept
    near_z = near * -math.sqrt(0.5)
    x_hi, x_lo = split(near)
    z_lo = ((x_hi * MINUS_SQRT_HALF_HI - near_z) + x_hi * MINUS_SQRT_HALF_LO + x_lo * MINUS_SQRT_HALF_HI) \
        + x_lo * MINUS_SQRT_HALF_LO
    bell = exp_minus_square(near_z.abs())  # e^(-z^2)
    cdf = erfc(z) * 0.5 - bell * z_lo * (1 / math.sqrt(math.pi))
    return cdf, bell * (1 - 2 * near_z * z_lo) * (1 / math.sqrt(2 * math.pi))


# Formulas of x and their parameters alone, keeping nothing on `self` for backward: their graphs are
# replayed from templates (tinyedu/function_template.py).
for _function in (Relu, Abs, Clamp, Hardswish, Hardsigmoid, Sigmoid, Tanh, Silu, Mish, GeluTanh, Tan, Exp,
                  Expm1, Log1p, Softplus, Gelu):
    _function.template = True
del _function
