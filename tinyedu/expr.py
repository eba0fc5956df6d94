"""Expr: a LazyBuffer with operators, for writing formulas of primitives that read like the math.

`Expr(x) * 2 + 1` builds a MUL and an ADD node of the lazy graph, exactly what a Tensor would
build, but without recording anything for autograd. The composite Functions
(tinyedu/function_composite.py, function_math.py) write their forwards and their hand-made
derivatives with it, and so do the step functions of tinyedu/tensor_api/rounding.py. It also holds
the few recurring numerical recipes: expm1 and log1p without cancellation, trunc without int32.
"""

from __future__ import annotations

import math
from decimal import Decimal, localcontext
from typing import Any

from tinyedu.core.dtype import dtypes
from tinyedu.core.ops import BinaryOps, ReduceOps, TernaryOps, UnaryOps
from tinyedu.lazy import LazyBuffer
from tinyedu.multi.lazy import full


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
                full(v, self.lazydata.shape, dtype, self.lazydata.device) for v in (a, b))
        return Expr(self.lazydata.e(TernaryOps.WHERE, a, b))

    def fmod(self, o: Any) -> "Expr":
        """The remainder of x / o with the sign of x (C's fmodf: exact)."""
        return self._binary(BinaryOps.MOD, o)

    def sum(self, axes: tuple[int, ...]) -> "Expr":
        """The sum over `axes`, expanded back to this shape (the axes keep size 1, then broadcast)."""
        return Expr(self.lazydata.r(ReduceOps.SUM, axes).expand(self.lazydata.shape))

    def float(self) -> "Expr":
        return Expr(self.lazydata.cast(dtypes.float32))

    def double(self) -> bool:
        """Whether this is float64, for which a formula takes longer series and float64 constants
        (float16 and bfloat16 compute in float32, so float32 and float64 are the two cases)."""
        return self.lazydata.dtype == dtypes.float64

    def const(self, value: float) -> "Expr":
        """A constant of this dtype and shape (for `where` with two numbers, which would be float32)."""
        return Expr(self.lazydata.const(value))

    def exp2(self) -> "Expr": return self._unary(UnaryOps.EXP2)  # noqa: E704
    def log2(self) -> "Expr": return self._unary(UnaryOps.LOG2)  # noqa: E704
    def sqrt(self) -> "Expr": return self._unary(UnaryOps.SQRT)  # noqa: E704
    def sin(self) -> "Expr": return self._unary(UnaryOps.SIN)  # noqa: E704
    def cos(self) -> "Expr": return self._unary(UnaryOps.COS)  # noqa: E704
    def reciprocal(self) -> "Expr": return self._unary(UnaryOps.RECIP)  # noqa: E704

    def max(self, o: Any) -> "Expr":
        """The larger of the two; NaN in either wins (np.maximum)."""
        return self._binary(BinaryOps.MAX, o)

    def exp(self) -> "Expr":
        """e^x to about 1 ulp over float32's whole range (see exp below)."""
        return exp(self)


    def log(self) -> "Expr":
        return self.log2() * math.log(2)

    def abs(self) -> "Expr":
        """|x|, +0.0 for both zeros (0 - (-0.0) is +0.0, and so is 0 - 0.0)."""
        return (self <= 0).where(0.0 - self, self)

    # --8<-- [start:expm1]
    def expm1(self) -> "Expr":
        """exp(x) - 1, accurate where exp(x) is close to 1 (expm1(1e-10) is 1e-10, not 0).

        e^x - 1 loses to cancellation what e^x gets wrong: near x = 0.4, 1 ulp of e^x (about 1.5)
        is 4 ulps of the difference (0.5). From -0.75 to 1.1 (where the difference is below half of
        e^x, or below 2) it is the Taylor series x + x^2 (1/2! + x/3! + ... + x^10/12!), whose terms
        fall below float32's precision by the 12th (float64's by the 21st: there it runs to x^21/21!);
        beyond, e^x - 1 has no cancellation to fear.
        """
        x = self
        last = 21 if x.double() else 12
        series = 1 / math.factorial(last)
        for n in range(last - 1, 1, -1):
            series = series * x + 1 / math.factorial(n)
        near_zero = x.eq(0).where(x, x + x * x * series)  # keeps -0.0 (x + 0.0 would be +0.0)
        return ((x > -0.75) & (x < 1.1)).where(near_zero, x.exp() - 1)

    def log1p(self) -> "Expr":
        """log(1 + x), accurate for tiny x, where 1 + x rounds to 1 (log1p(1e-10) is 1e-10, not 0).

        From -0.5 to 1 (1 + x within a factor 2 of 1): with s = x / (2 + x), so |s| <= 1/3, log(1 + x) is
        2 atanh(s) = 2s + 2s^3/3 + 2s^5/5 + ..., written x - s (x - R) (as 2s = x - s x), so that the
        rounding of s touches only a term 2 times smaller than the result. Elsewhere log(u) with
        u = 1 + x as rounded, plus (x - (u - 1)) / u, the part of x that the rounding of u lost.
        The series runs to s^19 for float32 and to s^37 for float64 ((1/3)^36 is below 2^-53).
        """
        x = self
        s = x / (2 + x)
        z = s * s
        last = 18 if x.double() else 9
        r = 2 / (2 * last + 1)
        for n in range(last - 1, 0, -1):
            r = r * z + 2 / (2 * n + 1)
        series = x - s * (x - z * r)
        u = 1 + x
        exact_from = 2.0**53 if x.double() else 2.0**24  # from here on 1 + x is exact (or inf)
        lost = ((x > -0.5) & (x < exact_from)).where((x - (u - 1)) / u, 0.0)
        return ((x > -0.5) & (x < 1)).where(series, u.log() + lost)

    # --8<-- [end:expm1]
    def sigmoid(self) -> "Expr":
        """1 / (1 + e^-x), to about 1 ulp everywhere, subnormal results included.

        Both sides scaled by 2^-64: b = e^-x * 2^-64 (rounded once) stays finite down to x = -110
        (sigmoid(-100) is 3.7e-44, not 1 / (1 + inf) = 0); 2^-64 + b is kept exactly as d + lost
        (two_sum), so its rounding costs nothing: 2^-64 / (d + lost) is r (1 - lost / d), r = 2^-64 / d.
        lost / d is at most 2^-24 and only corrects r, so it is lost * (r * 2^64), 1 / d from r: one
        division, not two (a division takes as long as several other ops in a vectorized loop).
        In float64 the same scale keeps b finite down to x = -750, where exp clamps (sigmoid is 0 there).
        """
        b = exp(-self, times_pow2=-64)
        d, lost = two_sum(Expr(self.lazydata.const(2.0**-64)), b)
        r = 2.0**-64 / d
        return r - r * (lost * (r * 2.0**64))

    def trunc(self) -> "Expr":
        """Round toward zero. |x| >= 2^23 is already an integer in float32 (2^52 in float64; so is
        inf), NaN stays NaN; below that the int32 cast (int64 for float64) truncates exactly. x * 0
        gives the zero the sign of x (trunc(-0.5) is -0.0)."""
        integer, whole_from = (dtypes.int64, 2.0**52) if self.double() else (dtypes.int32, 2.0**23)
        whole = Expr(self.lazydata.cast(integer).cast(self.lazydata.dtype))
        return (self.abs() < whole_from).where(whole.eq(0).where(self * 0, whole), self)


# --8<-- [start:exp-exact-product]
LOG2_E = 1 / math.log(2)
LOG2_E_HI = 1.4423828125  # log2(e) to 12 bits: its product with 12 bits of x is exact in float32
LOG2_E_LO = LOG2_E - LOG2_E_HI  # the rest (3.1e-4)
ROUNDER = 1.5 * 2.0**23  # v + ROUNDER - ROUNDER rounds v to an integer in float32, for |v| < 2^22


def _exact_log2_e() -> Decimal:
    with localcontext() as context:
        context.prec = 50
        return 1 / Decimal(2).ln()


# float64: log2(e) to 26 bits (times 26 bits of x: exact in float64) and the rest, from 50 digits
LOG2_E_HI_64 = math.ldexp(round(math.ldexp(LOG2_E, 25)), -25)
LOG2_E_LO_64 = float(_exact_log2_e() - Decimal(LOG2_E_HI_64))
ROUNDER_64 = 1.5 * 2.0**52  # the same rounding to an integer in float64, for |v| < 2^51


def two_sum(a: Expr, b: Expr) -> tuple[Expr, Expr]:
    """a + b exactly, as the rounded sum s and what the rounding lost (Knuth's TwoSum; finite a, b)."""
    s = a + b
    b_part = s - a
    return s, (a - (s - b_part)) + (b - b_part)


def split(x: Expr) -> tuple[Expr, Expr]:
    """x = hi + lo exactly, each with at most 12 significant bits (Veltkamp), for |x| < 2^115; in
    float64 with at most 26 bits each, for |x| < 2^995."""
    c = x * (134217729.0 if x.double() else 4097.0)
    hi = c - (c - x)
    return hi, x - hi


def exp(x: Expr, times_pow2: int = 0) -> Expr:
    """e^x = 2^(x log2 e) = 2^k * 2^t, with k = round(x log2 e), to about half an ulp everywhere.

    exp2(x * log2 e) alone is off by up to 60 ulp near |x| = 88: the product rounded to float32 is
    off by up to 2^-24 * 128 in the exponent, which 2^(...) turns into a relative error of 128 ulp
    * ln 2 / 2. Here the product is kept exactly, as p + err (Dekker: x and log2 e split in halves
    of 12 bits, whose products are exact); k = round(p) goes to an exp2 of its own (exact for an
    integer), and t = (p - k) + err, at most 1/2, to another. 2^128 overflows float32 while e^x,
    just below 2^128, does not: there the 2^t part is doubled and 2^(k-1) used. `times_pow2` = n
    gives e^x * 2^n, rounded once (cosh(89) is e^89 / 2, finite though e^89 is not).
    x is first clamped to [-110, 110] (NaN kept): beyond, e^x is 0 or inf anyway.
    float64 has its own constants and range: see exp64.
    """
    if x.double():
        return exp64(x, times_pow2)
    x = -(-x).max(-110.0)
    x = x.max(-110.0)
    p = x * LOG2_E
    x_hi, x_lo = split(x)
    err = ((x_hi * LOG2_E_HI - p) + x_hi * LOG2_E_LO + x_lo * LOG2_E_HI) + x_lo * LOG2_E_LO
    k = (p + ROUNDER) - ROUNDER
    t = (p - k) + err
    k = k + times_pow2 if times_pow2 else k
    top = k > 127
    return (t.exp2() * top.where(2.0, 1.0)) * top.where(k - 1, k).exp2()


# --8<-- [end:exp-exact-product]
# tanh(x) = x + x^3 P(x^2) for |x| < 0.55, P fitted in float32 (least squares on Chebyshev nodes:
# within 2^-28.5 of tanh there): 5 terms where the Taylor series needs 10
TANH_NEAR_ZERO = (-0.33333316445350647, 0.13332565128803253, -0.05385029688477516, 0.021064136177301407,
                  -0.006264368072152138)


def tanh(x: Expr) -> Expr:
    """tanh(x) in float32: x + x^3 P(x^2) below |x| = 0.55, 1 - 2 / (e^(2|x|) + 1) from there (where
    tanh is 0.5: the subtraction cancels less than a bit), sign restored; -0.0 kept. The polynomial
    is odd, so it takes x itself; only the far side needs |x|, and for it the sign of zero does not
    matter. e^(2|x|) = inf (or exp's clamp at 110) gives 1. float64 keeps the Taylor series
    (tinyedu/function_composite.py)."""
    negative = x < 0
    a = negative.where(-x, x)
    z = x * x
    p = TANH_NEAR_ZERO[-1]
    for c in TANH_NEAR_ZERO[-2::-1]:
        p = p * z + c
    near_zero = x + x * z * p
    far = 1 - 2 / ((2 * a).exp() + 1)
    t = (a < 0.55).where(near_zero, negative.where(-far, far))
    return x.eq(0).where(x, t)  # x + x z p is +0.0 at x = -0.0


def exp64(x: Expr, times_pow2: int = 0) -> Expr:
    """e^x * 2^times_pow2 in float64, as exp above: the product x log2 e kept exactly (x in halves of
    26 bits, log2 e to 26 bits plus a float64 rest), k = round(p) with 1.5 * 2^52, 2^t for the rest.

    float64's range needs both ends split: 2^k overflows from k = 1024 (e^709.78 is finite), so
    there 2^t is doubled and 2^(k-1) used; 2^k is 0 below k = -1074 while e^x is still subnormal
    (e^-745 is 4.9e-324), so below k = -1022 the product is made with 2^(k+64) and then scaled by
    2^-64, which rounds once into the subnormals. x is clamped to [-750, 750] (NaN kept): e^x * 2^-64
    stays finite there (sigmoid relies on it), and beyond e^x is 0 or inf anyway.
    """
    x = -(-x).max(-750.0)
    x = x.max(-750.0)
    p = x * LOG2_E
    x_hi, x_lo = split(x)
    err = ((x_hi * LOG2_E_HI_64 - p) + x_hi * LOG2_E_LO_64 + x_lo * LOG2_E_HI_64) + x_lo * LOG2_E_LO_64
    k = (p + ROUNDER_64) - ROUNDER_64
    t = (p - k) + err
    k = k + times_pow2 if times_pow2 else k
    top, bottom = k > 1023, k < -1022
    one = x.const(1.0)
    power = top.where(k - 1, bottom.where(k + 64, k)).exp2()
    return (t.exp2() * top.where(x.const(2.0), one)) * power * bottom.where(x.const(2.0**-64), one)


def erfc(x: Expr) -> Expr:
    """erfc(x) to a relative error of about 1e-7 for every x (Numerical Recipes' erfcc, a Chebyshev
    fit of exp(-x^2) times a polynomial in t = 1 / (1 + |x|/2)). Relative, not absolute: erfc(5) is
    1.5e-12, and a formula 1 - erf(x) would round it to 0. float64: see erfc64."""
    if x.double():
        return erfc64(x)
    z = x.abs()
    t = 1 / (1 + 0.5 * z)
    poly = estrin(t, (-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806, 0.27886807,
                      -1.13520398, 1.48851587, -0.82215223, 0.17087277))
    tail = t * (poly - z * z).exp()
    return (x < 0).where(2 - tail, tail)


def estrin(t: Expr, coefficients: tuple[float, ...]) -> Expr:
    """c0 + c1 t + c2 t^2 + ... by Estrin's scheme: pairs c0 + c1 t, c2 + c3 t, ... then pairs of pairs
    with t^2, t^4, ... Horner's c0 + t (c1 + t (c2 + ...)) is one chain of dependent operations,
    as long as the polynomial; here the chain is log2 of it. In a vector loop each element's chain
    waits on its own last result: erfc's 10 terms by Horner made gelu's loop wait rather than compute
    (a few more operations, but 12% less time on 2^22 floats)."""
    terms = [c + c_next * t for c, c_next in zip(coefficients[::2], coefficients[1::2], strict=False)]
    if len(coefficients) % 2:
        terms.append(t.const(coefficients[-1]))
    power = t
    while len(terms) > 1:
        power = power * power
        paired = [low + high * power for low, high in zip(terms[::2], terms[1::2], strict=False)]
        terms = paired + ([terms[-1]] if len(terms) % 2 else [])
    return terms[0]


# ---- erf and erfc in float64 (float32's fit above is good to 1e-7 only) ----
ERF_SERIES_TERMS = 30  # enough for 2^-53 up to |x| = 1.5 (the last term is 2e-19 of the sum there)
ERFC_FRACTION_TERMS = 100  # the continued fraction's depth: 2 ulp from |x| = 1.5 on
PI_50_DIGITS = Decimal("3.14159265358979323846264338327950288419716939937510")


def _erfcx_taylor(center: float, terms: int = 24) -> tuple[float, ...]:
    """The Taylor coefficients at `center` of erfcx(x) = e^(x^2) erfc(x), worked out in 50 digits.

    erfcx solves g' = 2x g - 2/sqrt(pi), so with g(c + h) = sum a_n h^n the coefficients follow
    (n + 1) a_(n+1) = 2c a_n + 2 a_(n-1) (minus 2/sqrt(pi) for n = 0), from a_0 = e^(c^2) (1 - erf(c)),
    erf(c) by its Taylor series (alternating, harmless in 50 digits)."""
    with localcontext() as context:
        context.prec = 50
        c, two_over_sqrt_pi = Decimal(center), 2 / PI_50_DIGITS.sqrt()
        erf, term, n = Decimal(0), c, 0
        while abs(term) > Decimal(10) ** -45:
            erf += term / (2 * n + 1)
            n += 1
            term = -term * c * c / n
        a = [(1 - two_over_sqrt_pi * erf) * (c * c).exp()]
        a.append(2 * c * a[0] - two_over_sqrt_pi)
        for n in range(1, terms - 1):
            a.append((2 * c * a[n] + 2 * a[n - 1]) / (n + 1))
        return tuple(float(v) for v in a)


ERFCX_AT_075, ERFCX_AT_125 = _erfcx_taylor(0.75), _erfcx_taylor(1.25)


def exp_minus_square(a: Expr) -> Expr:
    """e^(-a^2) with a^2 kept exactly as sq + err (Dekker): the rounding of a^2 alone (half an ulp of 9
    at a = 3) would be 8 ulps of e^(-9); e^(-sq - err) is e^(-sq) (1 - err) to first order."""
    hi, lo = split(a)
    sq = a * a
    err = ((hi * hi - sq) + 2 * hi * lo) + lo * lo
    e = (-sq).exp()
    return e - e * err


def erf_series(a: Expr) -> Expr:
    """erf(a) for 0 <= a < 1: (2/sqrt(pi)) e^(-a^2) a sum_n (2a^2)^n / (1 * 3 * ... * (2n + 1)).
    All its terms are positive (the plain Taylor series alternates, and loses 4 bits by a = 2)."""
    z = 2 * a * a
    total = 1 / math.prod(range(1, 2 * ERF_SERIES_TERMS + 2, 2))
    for n in range(ERF_SERIES_TERMS - 1, -1, -1):
        total = total * z + 1 / math.prod(range(1, 2 * n + 2, 2))
    return exp_minus_square(a) * a * total * (2 / math.sqrt(math.pi))


def erfc_middle(a: Expr) -> Expr:
    """erfc(a) for 0.5 <= a < 1.5, to its relative precision: e^(-a^2) erfcx(a), erfcx by its Taylor
    polynomial at 0.75 (below 1) or 1.25 (|h| <= 1/4, where 24 terms are far beyond 2^-53)."""
    low = a < 1.0
    h = a - low.where(a.const(0.75), a.const(1.25))
    g = low.where(a.const(ERFCX_AT_075[-1]), a.const(ERFCX_AT_125[-1]))
    for c_low, c_high in zip(ERFCX_AT_075[-2::-1], ERFCX_AT_125[-2::-1], strict=True):
        g = g * h + low.where(a.const(c_low), a.const(c_high))
    return exp_minus_square(a) * g


def erfc_fraction(a: Expr) -> Expr:
    """erfc(a) for a >= 1.5, to its relative precision, by Laplace's continued fraction
    erfc(a) = e^(-a^2) / sqrt(pi) / (a + (1/2) / (a + 1 / (a + (3/2) / (a + ...)))), evaluated from
    the bottom. a is clamped to 30 (erfc is 0 in float64 from 27.3; a = inf would give inf / inf)."""
    a = -((-a).max(-30.0))
    f = a
    for n in range(ERFC_FRACTION_TERMS, 0, -1):
        f = a + (n / 2) / f
    return exp_minus_square(a) * (1 / math.sqrt(math.pi)) / f


def erfc_abs(a: Expr) -> Expr:
    """erfc(a) for a >= 0 (or NaN) in float64, to a few ulp relative: 1 - erf below 0.5 (erfc is at
    least 0.48 there: no cancellation worth a bit), then erfc_middle, then the continued fraction."""
    return (a < 0.5).where(1 - erf_series(a), (a < 1.5).where(erfc_middle(a), erfc_fraction(a)))


def erf64(x: Expr) -> Expr:
    """erf(x) in float64: the series below |x| = 1, 1 - erfc beyond (erfc(1) is 0.16: no digits
    lost), sign restored (-0.0 kept)."""
    a = x.abs()
    odd = (a < 1.0).where(erf_series(a), 1 - erfc_abs(a))
    return x.eq(0).where(x, (x < 0).where(-odd, odd))


def erfc64(x: Expr) -> Expr:
    """erfc(x) in float64 (see erfc_abs), 2 - erfc(|x|) for negative x."""
    tail = erfc_abs(x.abs())
    return (x < 0).where(2 - tail, tail)
