"""More composite Functions (see function_composite.py for the idea): the hyperbolic and inverse
trigonometric functions, erf, copysign, powers, and the gradients of softmax and log_softmax, each
with its derivative written by hand.
"""

from __future__ import annotations

import math
import struct

from tinyedu.core.dtype import dtypes
from tinyedu.core.function import Function
from tinyedu.expr import Expr, erf64, erfc, exp, exp_minus_square, split
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
    last = 21 if a.double() else 11  # 1/23! is below float64's precision
    series = 1 / math.factorial(last)
    for n in range(last - 2, 2, -2):
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


# ---- inverse trigonometric functions, erf, copysign ----
def _taylor(z: Expr, coefficients: tuple[float, ...]) -> Expr:
    """c0 + c1 z + c2 z^2 + ... by Horner's rule."""
    total = coefficients[-1]
    for c in coefficients[-2::-1]:
        total = total * z + c
    return total


def _hi_lo(value: float) -> tuple[float, float]:
    """A constant as a float32 part and the rest, so that hi + (lo + small) keeps its last bits."""
    hi = float(struct.unpack("f", struct.pack("f", value))[0])
    return hi, value - hi


HALF_PI_HI, HALF_PI_LO = _hi_lo(math.pi / 2)
# atan's Taylor series t + t^3 (-1/3 + t^2/5 - ...), to t^21 (enough for |t| <= 7/16)
ATAN_SERIES = tuple((-1) ** n / (2 * n + 1) for n in range(1, 11))
ATAN_SERIES_64 = tuple((-1) ** n / (2 * n + 1) for n in range(1, 25))  # to t^49: (7/16)^48 is 2^-57
# atan(|x|) = atan(c) + atan((|x| - c) / (1 + c |x|)) on each range (fdlibm's), with |t| <= 7/16;
# from 39/16 on, pi/2 + atan(-1/|x|)
ATAN_RANGES = ((7 / 16, 0.0), (11 / 16, 0.5), (19 / 16, 1.0), (39 / 16, 1.5))


def atan_abs(a: Expr) -> Expr:
    """atan(a) for a >= 0 (or NaN), to about 1 ulp."""
    c, base_hi, base_lo = (Expr(a.lazydata.const(v)) for v in (0.0, HALF_PI_HI, HALF_PI_LO))  # past 39/16
    for bound, point in reversed(ATAN_RANGES):
        hi, lo = _hi_lo(math.atan(point))
        inside = a < bound
        c, base_hi, base_lo = inside.where(point, c), inside.where(hi, base_hi), inside.where(lo, base_lo)
    last = a >= ATAN_RANGES[-1][0]
    t = last.where(-1.0, a - c) / last.where(a, 1 + c * a)
    series = ATAN_SERIES_64 if a.double() else ATAN_SERIES
    return base_hi + (base_lo + (t + t * (t * t) * _taylor(t * t, series)))


class Atan2(Function):
    """atan2(y, x), the angle of the point (x, y), in [-pi, pi], the sign of y's: atan(|y| / |x|)
    for x >= 0, pi/2 + atan(|x| / |y|) for x < 0 (-0.0 included), so pi/2 and pi come out exactly
    for x = -0.0 and x = -inf. C's special cases: both zeros are the ratio 0 (x >= 0) or inf, so
    +-0 or +-pi; both infinities the ratio 1, so +-pi/4 or +-3pi/4. Gradients PyTorch's:
    (x, -y) / (x^2 + y^2), and 0 where x^2 + y^2 underflows to 0 (at (0, 0), and at (1e-30, 1e-30),
    where the true gradient is 5e29) or overflows. float16 and bfloat16 compute in float32 and
    round once, as UnaryFunction does."""

    def forward(self, y: LazyBuffer, x: LazyBuffer) -> LazyBuffer:
        self.dtype = y.dtype
        self.y, self.x = (Expr(v.cast(dtypes.float32) if v.dtype.is_half else v) for v in (y, x))
        ay, ax = self.y.abs(), self.x.abs()
        left = _signbit(self.x)
        ratio = left.where(ax / ay, ay / ax)
        zero, inf = (self.x.const(0.0), self.x.const(math.inf)) if self.x.double() else (0.0, math.inf)
        ratio = (ay.eq(0) & ax.eq(0)).where(left.where(inf, zero), ratio)
        ratio = (ay.eq(math.inf) & ax.eq(math.inf)).where(1.0, ratio)
        hi, lo = HALF_PI_HI, HALF_PI_LO
        if self.x.double():
            hi, lo = self.x.const(hi), self.x.const(lo)
        angle = left.where(hi, zero) + (left.where(lo, zero) + atan_abs(ratio))
        return _signbit(self.y).where(-angle, angle).lazydata.cast(self.dtype)

    def backward(self, grad: LazyBuffer) -> tuple[LazyBuffer | None, ...]:
        g, y, x = Expr(grad.cast(self.y.lazydata.dtype)), self.y, self.x
        recip = 1 / (y * y + x * x)
        recip = recip.eq(math.inf).where(0.0, recip)  # PyTorch's: 0, not 0 * inf, where x^2 + y^2 underflows
        dy = (g * x * recip).lazydata.cast(self.dtype) if self.needs_input_grad[0] else None
        dx = (g * -y * recip).lazydata.cast(self.dtype) if self.needs_input_grad[1] else None
        return dy, dx


# asin's Taylor series x + x^3 (1/6 + 3 x^2/40 + ...): (2n)! / (4^n n!^2 (2n + 1)), to x^27 (|x| <= 1/2)
ASIN_SERIES = tuple(math.comb(2 * n, n) / (4**n * (2 * n + 1)) for n in range(1, 14))
ASIN_SERIES_64 = tuple(math.comb(2 * n, n) / (4**n * (2 * n + 1)) for n in range(1, 29))  # float64: to x^57


def _asin_small(x: Expr) -> Expr:
    """asin(x) for |x| <= 1/2, its Taylor series."""
    z = x * x
    return x + x * z * _taylor(z, ASIN_SERIES_64 if x.double() else ASIN_SERIES)


def asin_abs(a: Expr) -> Expr:
    """asin(a) for 0 <= a <= 1: the series up to 1/2, then pi/2 - 2 asin(s), s = sqrt(t),
    t = (1 - a) / 2 (asin(a) = pi/2 - acos(a), acos(a) = 2 asin(s); 1 - a is exact there).

    Near a = 1/2 the subtraction doubles relative errors (pi/2 - 1.05 = 0.52): so asin(s) is not
    rounded as a whole (s and the series' rest are subtracted apart), and the rounding of s is put
    back: s^2 is kept exactly (Dekker), ds = (t - s^2) / (2s), and asin(s + ds) is asin(s) +
    ds / sqrt(1 - t), 1 / sqrt(1 - t) by its series (t <= 1/4; ds is under an ulp).
    """
    t = (1 - a) * 0.5
    s = t.sqrt()
    hi, lo = split(s)
    ds = s.eq(0).where(0.0, (((t - hi * hi) - 2 * hi * lo) - lo * lo) / (2 * s))  # s = 0 at a = 1
    series = _taylor(t, ASIN_SERIES_64 if a.double() else ASIN_SERIES)
    rest = s * t * series + ds * (1 + t * (0.5 + t * (0.375 + t * 0.3125)))
    upper = (HALF_PI_HI - 2 * s) + (HALF_PI_LO - 2 * rest)  # the first difference is exact
    return (a <= 0.5).where(_asin_small(a), upper)


class Asin(UnaryFunction):
    """asin, NaN outside [-1, 1] (see asin_abs). Derivative 1 / sqrt((1 - x)(1 + x)): inf at +-1, as
    PyTorch (and (1 - x)(1 + x) is exact near 1, where 1 - x^2 would lose digits)."""

    def value(self, x: Expr) -> Expr:
        return _mirror(x, asin_abs(x.abs()))

    def derivative(self, x: Expr, ret: Expr) -> Expr:
        return 1 / ((1 - x) * (1 + x)).sqrt()


class Acos(UnaryFunction):
    """acos(x): pi/2 - asin(x) for |x| <= 1/2 (no cancellation: the result is at least pi/3),
    2 asin(sqrt((1 - x) / 2)) above, pi - 2 asin(sqrt((1 + x) / 2)) below. Derivative
    -1 / sqrt((1 - x)(1 + x))."""

    def value(self, x: Expr) -> Expr:
        middle = HALF_PI_HI + (HALF_PI_LO - _asin_small(x))
        near_one = 2 * _asin_small(((1 - x.abs()) * 0.5).sqrt())
        pi_hi, pi_lo = _hi_lo(math.pi)
        return (x.abs() <= 0.5).where(middle, (x > 0).where(near_one, pi_hi + (pi_lo - near_one)))

    def derivative(self, x: Expr, ret: Expr) -> Expr:
        return -1 / ((1 - x) * (1 + x)).sqrt()


class Atan(UnaryFunction):
    """atan (see atan_abs), sign restored (-0.0 kept); +-pi/2 at +-inf. Derivative 1 / (1 + x^2),
    0 at +-inf and past 1.8e19 (where x^2 overflows to inf)."""

    def value(self, x: Expr) -> Expr:
        return _mirror(x, atan_abs(x.abs()))

    def derivative(self, x: Expr, ret: Expr) -> Expr:
        return 1 / (1 + x * x)


# erf's Taylor series (2/sqrt(pi)) (x - x^3/3 + x^5/10 - ...), to x^23: (-1)^n / (n! (2n + 1)),
# 2/sqrt(pi) as a float32 part and the rest (the float32 constant alone is 0.9 ulp off)
TWO_OVER_SQRT_PI_HI, TWO_OVER_SQRT_PI_LO = _hi_lo(2 / math.sqrt(math.pi))
ERF_SERIES = tuple(2 / math.sqrt(math.pi) * (-1) ** n / (math.factorial(n) * (2 * n + 1))
                   for n in range(1, 12))


class Erf(UnaryFunction):
    """erf(x): below |x| = 0.8 its Taylor series (1 - erfc(x) would cancel: erf(1e-8) is 1.1e-8, not
    0), above 1 - erfc(|x|) (erfc accurate in relative terms, see tinyedu/expr.py), sign restored.
    Derivative (2/sqrt(pi)) e^(-x^2), with x^2 kept exactly as sq + err (Dekker): the rounding of
    x^2 alone (half an ulp of 9 at x = 3) is 8 ulps of e^(-9)."""

    def value(self, x: Expr) -> Expr:
        if x.double():
            return erf64(x)  # float64 has its own method (see tinyedu/expr.py)
        a = x.abs()
        z = a * a
        series = a * TWO_OVER_SQRT_PI_HI + a * (TWO_OVER_SQRT_PI_LO + z * _taylor(z, ERF_SERIES))
        return _mirror(x, (a < 0.8).where(series, 1 - erfc(a)))

    def derivative(self, x: Expr, ret: Expr) -> Expr:
        limit = 27.5 if x.double() else 11.0  # erf' is 0 past 11 in float32, past 27.3 in float64
        a = -((-x.abs()).max(-limit))  # (and split(inf) would be NaN)
        return exp_minus_square(a) * (2 / math.sqrt(math.pi))


class Copysign(Function):
    """|x| with the sign of y (-0.0 counts as negative; NaN as positive: its sign bit is not
    observable without a bitcast). Gradients as PyTorch: d/dx = copysign(x, y) / x, 0 where x is 0;
    d/dy = 0."""

    def forward(self, x: LazyBuffer, y: LazyBuffer) -> LazyBuffer:
        self.x = Expr(x)
        magnitude = self.x.abs()
        self.ret = _signbit(Expr(y)).where(-magnitude, magnitude)
        return self.ret.lazydata

    def backward(self, grad: LazyBuffer) -> tuple[LazyBuffer | None, ...]:
        dx = None
        if self.needs_input_grad[0]:
            dx = self.x.eq(0).where(0.0, Expr(grad) * (self.ret / self.x)).lazydata
        dy = grad.const(0.0) if self.needs_input_grad[1] else None
        return dx, dy


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

    sum(g e) / sum(e) is the mean of g weighted by e, rounded once per sum. sum(g s) carries the
    rounding of every s instead: for the gradient of a sum of probabilities (g = 1), which is 0,
    a row of 100 equal values gives s = 0.01 and sum(s) = 1.0000007, so 5e-9 of noise (which a
    later op can magnify), where sum(e) / sum(e) is exactly 1 and the gradient exactly 0."""

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


# Formulas of x and their parameters alone: replayed from templates (see function_composite.py's end).
for _function in (Sinh, Cosh, Asinh, Acosh, Atanh, Asin, Acos, Atan, Erf, PowScalar):
    _function.template = True
del _function
