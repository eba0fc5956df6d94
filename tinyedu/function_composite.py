"""Composite Functions: a forward made of several primitives, with a backward written by hand.

Most Tensor methods are compositions of primitive Functions and get their gradient from the chain
rule. That fails at the edges for a few: sigmoid(-100) is 1 / (1 + exp(100)) = 1 / inf, and the
chain rule multiplies the derivative of 1/u (which is -1/u^2 = 0) by that of exp (inf): 0 * inf is
NaN, where the true gradient is 0. The cure is the textbook one: write the derivative in terms of
the *result* (sigmoid' = s (1 - s)), which has no inf in it. Each Function here says which edge
forced it. The forward still runs on primitives, so it fuses and compiles like everything else.

The formulas are written with `Expr`, a LazyBuffer with operators, so they read like the math.
"""

from __future__ import annotations

import math
from typing import Any

from tinyedu.dtype import dtypes
from tinyedu.function import Function
from tinyedu.lazy import LazyBuffer
from tinyedu.ops import BinaryOps, ReduceOps, TernaryOps, UnaryOps

Operand = "Expr | float | int | bool"


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
        log(u) * x / (u - 1) with u = 1 + x as rounded)."""
        u = 1 + self
        ratio = u.log() * self / (u - 1)
        return u.eq(1).where(self, u.eq(math.inf).where(self, ratio))

    # --8<-- [end:expm1]
    def sigmoid(self) -> "Expr":
        return (1 + (-self).exp()).reciprocal()

    def trunc(self) -> "Expr":
        """Round toward zero. |x| >= 2^23 is already an integer in float32 (so is inf), NaN stays NaN;
        below that the int32 cast truncates exactly. x * 0 gives the zero the sign of x (trunc(-0.5)
        is -0.0)."""
        whole = Expr(self.lazydata.cast(dtypes.int32).cast(self.lazydata.dtype))
        return (self.abs() < 2.0**23).where(whole.eq(0).where(self * 0, whole), self)


def _erfc(x: Expr) -> Expr:
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


# ---- the Functions ----
# --8<-- [start:unary-function]
class UnaryFunction(Function):
    """A unary Function given as formulas: the value, the derivative (from x and the value), and
    maybe `passes`, where the gradient gets through at all. PyTorch's piecewise functions (relu,
    clamp, hardswish...) *select* the gradient rather than multiply it by 0, so an infinite incoming
    gradient becomes 0 where they are flat, not 0 * inf = NaN."""

    def value(self, x: Expr) -> Expr:
        raise NotImplementedError

    def derivative(self, x: Expr, ret: Expr) -> Expr:
        raise NotImplementedError

    def passes(self, x: Expr, ret: Expr) -> Expr | None:
        return None

    def forward(self, x: LazyBuffer, **params: Any) -> LazyBuffer:
        self.params = params
        self.x = Expr(x)
        self.ret = self.value(self.x)
        return self.ret.lazydata

    def backward(self, grad: LazyBuffer) -> LazyBuffer:
        local = self.derivative(self.x, self.ret) * Expr(grad)
        passes = self.passes(self.x, self.ret)
        return (local if passes is None else passes.where(local, 0.0)).lazydata


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
        return (x > 0).float() - (x < 0).float()


class Clamp(UnaryFunction):
    """clamp(x, low, high) (either bound may be None), with one of PyTorch's two gradient rules at the
    bounds: clamp lets the gradient through at x == low or high and blocks it at NaN; hardtanh (and
    relu6) blocks it at the bounds and lets it through at NaN. NaN stays NaN in the value."""

    def value(self, x: Expr) -> Expr:
        low, high = self.params["low"], self.params["high"]
        out = x if low is None else (x < low).where(low, x)
        return out if high is None else (x > high).where(high, out)

    def derivative(self, x: Expr, ret: Expr) -> Expr:
        return Expr(x.lazydata.const(1.0))

    def passes(self, x: Expr, ret: Expr) -> Expr:
        low, high = self.params["low"], self.params["high"]
        low, high = -math.inf if low is None else low, math.inf if high is None else high
        if self.params["inclusive"]:  # clamp: inside [low, high]; NaN is not inside
            return (x >= low) & (x <= high)
        return ~((x <= low) | (x >= high))  # hardtanh: NaN is not outside either


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
    """1 / (1 + exp(-x)). The value is fine as it is (for x < -88 exp overflows and the value is 0,
    as in float32 PyTorch); the chain rule through it is not: at x = -100 it multiplies 0 by inf.
    The derivative s (1 - s) is 0 there, as it should be."""

    def value(self, x: Expr) -> Expr:
        return x.sigmoid()

    def derivative(self, x: Expr, ret: Expr) -> Expr:
        return ret * (1 - ret)


# --8<-- [end:sigmoid]
# --8<-- [start:tanh]
class Tanh(UnaryFunction):
    """tanh(x) = m / (m + 2) with m = expm1(2x), written for x <= 0 (where m is in (-1, 0]) and
    mirrored for x > 0, so nothing overflows. 2 sigmoid(2x) - 1 would cancel to 0 for tiny x
    (tanh(1e-8) is 1e-8) and its chain rule gives NaN for |x| > 44. Below 2^-12 tanh(x) is x to
    float32 precision (x^3/3 is under half an ulp), which also keeps the sign of -0.0.
    Derivative: 1 - tanh^2."""

    def value(self, x: Expr) -> Expr:
        return _tanh(x)

    def derivative(self, x: Expr, ret: Expr) -> Expr:
        return 1 - ret * ret


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
        return t + x * _stable_sigmoid(x) * (1 - t * t)


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


def _tanh(x: Expr) -> Expr:
    """tanh, as the Tanh Function computes it (see there)."""
    m = (-2 * x.abs()).expm1()
    t = m / (m + 2)  # tanh(-|x|)
    return (x.abs() < 2.0**-12).where(x, (x > 0).where(-t, t))


def _softplus(x: Expr) -> Expr:
    return (x > 20).where(x, x.exp().log1p())


class Expm1(UnaryFunction):
    """exp(x) - 1 (see Expr.expm1). Its formula divides by log(u), which is 0 where u = 1: the chain
    rule through it would be 0/0. The derivative is exp(x) = value + 1."""

    def value(self, x: Expr) -> Expr:
        return x.expm1()

    def derivative(self, x: Expr, ret: Expr) -> Expr:
        return ret + 1


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
        return (z > threshold).where(1.0, _stable_sigmoid(z))


# --8<-- [end:softplus]
def _stable_sigmoid(z: Expr) -> Expr:
    """sigmoid, accurate in relative terms for very negative z too: exp(z) / (1 + exp(z)) there."""
    e = (-z.abs()).exp()
    return (z >= 0).where(1 / (1 + e), e / (1 + e))


class Gelu(UnaryFunction):
    """x * Phi(x), Phi the normal CDF: PyTorch's gelu (approximate='none'). Phi(x) = erfc(-x/sqrt2)/2
    rather than (1 + erf(x/sqrt2))/2, which cancels to 0 for x < -4. Derivative Phi(x) + x phi(x)."""

    def value(self, x: Expr) -> Expr:
        return x * 0.5 * _erfc(x * -math.sqrt(0.5))

    def derivative(self, x: Expr, ret: Expr) -> Expr:
        density = (x * x * -0.5).exp() * (1 / math.sqrt(2 * math.pi))
        return 0.5 * _erfc(x * -math.sqrt(0.5)) + x * density


class Sinh(UnaryFunction):
    """(e^x - e^-x)/2 = (m + m/(m + 1))/2 with m = expm1(|x|), sign restored: accurate for tiny x
    (no 1 - 1 cancellation). Past |x| = 88, e^x overflows float32 before sinh does, so there it is
    exp(|x| - ln 2). Derivative cosh(x)."""

    def value(self, x: Expr) -> Expr:
        return _mirror(x, _sinh_abs(x.abs()))

    def derivative(self, x: Expr, ret: Expr) -> Expr:
        return _cosh_abs(x.abs())


class Cosh(UnaryFunction):
    """(e^x + e^-x)/2, as exp(|x| - ln 2) past |x| = 88 (see Sinh). Derivative sinh(x)."""

    def value(self, x: Expr) -> Expr:
        return _cosh_abs(x.abs())

    def derivative(self, x: Expr, ret: Expr) -> Expr:
        return _mirror(x, _sinh_abs(x.abs()))


def _mirror(x: Expr, odd: Expr) -> Expr:
    """An odd function's value at x from its value at |x| (x itself for the zeros keeps -0.0)."""
    return x.eq(0).where(x, (x < 0).where(-odd, odd))


def _sinh_abs(a: Expr) -> Expr:
    m = a.expm1()
    return (a > 88).where((a - math.log(2)).exp(), (m + m / (m + 1)) * 0.5)


def _cosh_abs(a: Expr) -> Expr:
    e = a.exp()
    return (a > 88).where((a - math.log(2)).exp(), (e + 1 / e) * 0.5)


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
    x = 0 for y = 2.5, where the answer is 0); d/dy = x^y log(x), 0 where x == 0 and y >= 0."""

    def forward(self, x: LazyBuffer, y: LazyBuffer) -> LazyBuffer:
        self.x, self.y = Expr(x), Expr(y)
        self.ret = pow_value(self.x, self.y)
        return self.ret.lazydata

    def backward(self, grad: LazyBuffer) -> tuple[LazyBuffer | None, ...]:
        x, y, g = self.x, self.y, Expr(grad)
        dx = dy = None
        if self.needs_input_grad[0]:
            dx = (y.eq(0)).where(0.0, g * y * pow_value(x, y - 1)).lazydata
        if self.needs_input_grad[1]:
            dy = ((x.eq(0) & (y >= 0)).where(0.0, g * self.ret * x.log())).lazydata
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
    passed in, with PyTorch's gradients: s * (g - sum(g * s)) and g - exp(out) * sum(g). Where the
    true gradient is 0 these give 0, while the chain rule through exp(x - m) / sum(...) leaves an
    ulp of noise that a later 1/x can magnify."""

    def forward(self, x: LazyBuffer, value: LazyBuffer, axes: tuple[int, ...], log: bool) -> LazyBuffer:
        self.value, self.axes, self.log = Expr(value), axes, log
        return value

    def backward(self, grad: LazyBuffer) -> LazyBuffer:
        g, out = Expr(grad), self.value
        if self.log:
            return (g - out.exp() * g.sum(self.axes)).lazydata
        return (out * (g - (g * out).sum(self.axes))).lazydata

