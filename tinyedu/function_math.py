"""More composite Functions (see function_composite.py for the idea): the hyperbolic functions,
powers, and the gradients of softmax and log_softmax, each with its derivative written by hand.
"""

from __future__ import annotations

import math

from tinyedu.expr import Expr, exp
from tinyedu.function import Function
from tinyedu.function_composite import UnaryFunction
from tinyedu.lazy import LazyBuffer


class Sinh(UnaryFunction):
    """sinh(|x|), sign restored: below 1 its Taylor series x + x^3/3! + ... + x^11/11! (e^x - e^-x
    would cancel to 0 for tiny x), above h - 1/(4h) with h = e^|x| / 2, computed as one rounding of
    e^|x| * 2^-1 (so sinh(89.4) is finite, though e^89.4 overflows float32). Derivative cosh(x)."""

    def value(self, x: Expr) -> Expr:
        return _mirror(x, _sinh_abs(x.abs()))

    def derivative(self, x: Expr, ret: Expr) -> Expr:
        return _cosh_abs(x.abs())


class Cosh(UnaryFunction):
    """cosh(x) = h + 1/(4h), h = e^|x| / 2 rounded once (see Sinh). Derivative sinh(x)."""

    def value(self, x: Expr) -> Expr:
        return _cosh_abs(x.abs())

    def derivative(self, x: Expr, ret: Expr) -> Expr:
        return _mirror(x, _sinh_abs(x.abs()))


def _mirror(x: Expr, odd: Expr) -> Expr:
    """An odd function's value at x from its value at |x| (x itself for the zeros keeps -0.0)."""
    return x.eq(0).where(x, (x < 0).where(-odd, odd))


def _sinh_abs(a: Expr) -> Expr:
    z = a * a
    series = 1 / math.factorial(11)
    for n in (9, 7, 5, 3):
        series = series * z + 1 / math.factorial(n)
    h = exp(a, times_pow2=-1)
    return (a < 1).where(a + a * z * series, h - 0.25 / h)


def _cosh_abs(a: Expr) -> Expr:
    h = exp(a, times_pow2=-1)
    return h + 0.25 / h


class Asinh(UnaryFunction):
    """asinh(x) = sign(x) log1p(|x| + x^2 / (1 + sqrt(1 + x^2))), accurate for tiny x; past 2^26,
    where x^2 + 1 is x^2 and x^2 soon overflows, log(2|x|). Derivative 1 / sqrt(1 + x^2)."""

    def value(self, x: Expr) -> Expr:
        a = x.abs()
        small = (a + a * a / (1 + (1 + a * a).sqrt())).log1p()
        return _mirror(x, (a > 2.0**26).where(a.log() + math.log(2), small))

    def derivative(self, x: Expr, ret: Expr) -> Expr:
        return 1 / (1 + x * x).sqrt()


class Acosh(UnaryFunction):
    """acosh(x) = log1p(t + sqrt(2t + t^2)) with t = x - 1 (accurate near 1), log(2x) past 2^26;
    NaN below 1. Derivative 1 / sqrt(x^2 - 1), computed as 1 / sqrt((x - 1)(x + 1)), exact near 1
    (and, like PyTorch's formula, finite below -1, where acosh itself is NaN)."""

    def value(self, x: Expr) -> Expr:
        t = x - 1
        near_one = (t + (2 * t + t * t).sqrt()).log1p()
        return (x < 1).where(math.nan, (x > 2.0**26).where(x.log() + math.log(2), near_one))

    def derivative(self, x: Expr, ret: Expr) -> Expr:
        return 1 / ((x - 1) * (x + 1) + 0.0).sqrt()  # + 0.0: at x = -1 the product is -0.0


class Atanh(UnaryFunction):
    """atanh(x) = log1p(2x / (1 - x)) / 2, accurate for tiny x; +-inf at +-1, NaN outside [-1, 1].
    Derivative 1 / (1 - x^2), as 1 / ((1 - x)(1 + x)) (exact near 1)."""

    def value(self, x: Expr) -> Expr:
        a = x.abs()
        return _mirror(x, (2 * a / (1 - a)).log1p() * 0.5)

    def derivative(self, x: Expr, ret: Expr) -> Expr:
        return 1 / ((1 - x) * (1 + x))


# ---- powers ----
def _is_integer(y: Expr) -> Expr:
    return y.eq(y.trunc())  # True for +-inf (they are even), False for NaN


def _signbit(x: Expr) -> Expr:
    """x < 0, counting -0.0 as negative (1 / -0.0 is -inf)."""
    return (x < 0) | (x.eq(0) & (x.reciprocal() < 0))


# --8<-- [start:pow-value]
def pow_value(x: Expr, y: Expr) -> Expr:
    """x ** y for float32 x and y, with C's pow (and PyTorch's) special cases.

    |x| ** y is 2 ** (y log2 |x|); the sign is x's for odd integer y (so (-2) ** 3 = -8 and
    (-0.0) ** 3 = -0.0); a finite negative x with a non-integer y gives NaN. x ** 0 and 1 ** y are
    1 even for NaN, and (-1) ** +-inf is 1 (where y log2|x| would be inf * 0).
    """
    magnitude = (y * x.abs().log2()).exp2()
    y_int = _is_integer(y)
    odd = y_int & y.abs().fmod(2).eq(1)  # fmod is exact
    signed = (_signbit(x) & odd).where(-magnitude, magnitude)
    signed = ((x < 0) & (x > -math.inf) & ~y_int).where(math.nan, signed)
    one = y.eq(0) | x.eq(1) | (x.eq(-1) & y.abs().eq(math.inf))
    return one.where(1.0, signed)


# --8<-- [end:pow-value]

class Pow(Function):
    """x ** y for float tensors (see pow_value), with PyTorch's gradients:
    d/dx = y x^(y-1), 0 where y == 0 (the chain rule through 2^(y log2|x|) gives 0 * inf = NaN at
    x = 0 for y = 2.5, where the answer is 0); d/dy = x^y log(x), 0 where x == 0 and y >= 0.
    The incoming gradient multiplies the local derivative last, as in PyTorch: for x = y = 1e-45,
    y x^(y-1) is inf, and -0.3 * inf is -inf, while (-0.3 * y) rounds to -0.0 and -0.0 * inf is NaN."""

    def forward(self, x: LazyBuffer, y: LazyBuffer) -> LazyBuffer:
        self.x, self.y = Expr(x), Expr(y)
        self.ret = pow_value(self.x, self.y)
        return self.ret.lazydata

    def backward(self, grad: LazyBuffer) -> tuple[LazyBuffer | None, ...]:
        x, y, g = self.x, self.y, Expr(grad)
        dx = dy = None
        if self.needs_input_grad[0]:
            dx = (y.eq(0)).where(0.0, g * (y * pow_value(x, y - 1))).lazydata  # see the docstring
        if self.needs_input_grad[1]:
            dy = ((x.eq(0) & (y >= 0)).where(0.0, g * (self.ret * x.log()))).lazydata
        return dx, dy


def scalar_pow_value(x: Expr, exponent: float) -> Expr:
    """x ** e for a Python number e, as PyTorch computes it: sqrt for 0.5, 1/sqrt for -0.5, repeated
    multiplication for small integers (exact, and right for negative x), else 2^(e log2|x|) with
    C's special cases. Whether e is an odd integer is decided here in Python, in double precision
    (9999999999.0 is odd; as a float32 constant it would round to the even 1e10)."""
    if exponent == 0:
        return Expr(x.lazydata.const(1.0))
    if exponent in (0.5, -0.5):
        return x.sqrt() if exponent > 0 else x.sqrt().reciprocal()
    if float(exponent).is_integer() and abs(exponent) <= 8:
        product = x
        for _ in range(int(abs(exponent)) - 1):
            product = product * x
        return product.reciprocal() if exponent < 0 else product
    infinite = math.isinf(exponent)
    integer = infinite or float(exponent).is_integer()
    magnitude = (x.abs().log2() * exponent).exp2()
    if integer and not infinite and int(exponent) % 2:
        signed = _signbit(x).where(-magnitude, magnitude)
    elif integer:
        signed = magnitude
    else:
        signed = ((x < 0) & (x > -math.inf)).where(math.nan, magnitude)
    one = x.eq(1) | x.eq(-1) if infinite else x.eq(1)
    return one.where(1.0, signed)


class PowScalar(UnaryFunction):
    """x ** e for a Python number e != 0: the value as scalar_pow_value, the gradient as PyTorch's
    pow_backward, e * x ** (e - 1) (so (-0.0) ** -0.5 has gradient -inf, not the +inf that the chain
    rule through 1/sqrt(x) gives, and x ** 2.5 has gradient 0 at 0, not NaN)."""

    def value(self, x: Expr) -> Expr:
        return scalar_pow_value(x, self.params["exponent"])

    def derivative(self, x: Expr, ret: Expr) -> Expr:
        exponent = self.params["exponent"]
        return scalar_pow_value(x, exponent - 1) * exponent


class SoftmaxGrad(Function):
    """softmax and log_softmax, whose value is computed (from primitives) by the Tensor method and
    passed in with the exponentials e = exp(x - max) it was made of, with PyTorch's gradients
    s (g - sum(g s)) and g - s sum(g), s = e / sum(e), the sum(g s) computed as sum(g e) / sum(e).

    Where the true gradient is 0 (g constant along the axis, the gradient of a sum of
    probabilities) this gives exactly 0: g e / sum(e) is the weighted mean of g, exactly g for
    a constant g. sum(g s) instead carries the rounding of every s: for a row of 100 equal
    values, s = 0.01 and sum(s) = 1.0000007, so 5e-9 of noise, which a later op can magnify."""

    def forward(self, x: LazyBuffer, value: LazyBuffer, exps: LazyBuffer, axes: tuple[int, ...],
                log: bool) -> LazyBuffer:
        self.value, self.exps, self.axes, self.log = Expr(value), Expr(exps), axes, log
        return value

    def backward(self, grad: LazyBuffer) -> LazyBuffer:
        g, e = Expr(grad), self.exps
        total = e.sum(self.axes)
        if self.log:
            return (g - e * (g.sum(self.axes) / total)).lazydata
        return (self.value * (g - (g * e).sum(self.axes) / total)).lazydata


class LogsumexpGrad(Function):
    """logsumexp, whose value (keepdim, from primitives) is computed by the Tensor method and passed in,
    with PyTorch's gradient exp(x - out) (at most 1, never an overflowing exp(x) / sum)."""

    def forward(self, x: LazyBuffer, value: LazyBuffer) -> LazyBuffer:
        self.x, self.value = Expr(x), value
        return value

    def backward(self, grad: LazyBuffer) -> LazyBuffer:
        shape = self.x.lazydata.shape
        out, g = Expr(self.value.expand(shape)), Expr(grad.expand(shape))
        return ((self.x - out).exp() * g).lazydata

