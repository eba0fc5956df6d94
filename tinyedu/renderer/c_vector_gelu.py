"""gelu as one SIMD helper for the C device: expr.py's float32 gelu formula (x * 0.5 * erfc(-x / sqrt2),
erfc Numerical Recipes' t e^(P(t) - z^2) with t = 1 / (1 + |z|/2)), recognized in a kernel's UOps,
becomes one call of `gelu_simd_float32` (as c_vector_tanh.py does for tanh).

Why: rendered op by op (erfc's exp as exp_simd_float32), gelu's vector loop was 74 instructions per
16 floats on AVX-512, and with the formula's own fit in one helper still 65: ten coefficients, a
division and a full exp. The helper computes the same function a cheaper way. gelu(x) = x Phi(x), and
Phi(-|x|) = erfc(|x| / sqrt2) / 2 = Q(|x|) e^(-x^2 / 2), where Q(b) = e^(b^2 / 2) erfc(b / sqrt2) / 2 is
smooth, 1/2 at 0 and falling like 1 / (b sqrt(2 pi)): Q = N(b) / D(b), N of degree 4 and D of degree 5,
N(0) = 1/2 and D(0) = 1, fitted for the least largest relative error on |x| <= 14.85 (linearized least
squares with Lawson's weights: 6.5e-9; 1.32e-8 with the coefficients rounded to float32 one at a time,
highest first, the others fitted again each time). That is one division, nine fused multiply-adds and
no other instruction; t P(t) with t = 1 / (1 + 0.35 b) and P of degree 8 takes one instruction more
(the product by t), and fits to 6.0e-8. N takes |x| clamped and D |x| itself, so that |x| = inf
gives D = inf and Q = 0, and a NaN goes on. Then gelu(x) is x Q e^(-x^2/2) for x <= 0 and
x (1 - Q e^(-x^2/2)) for x > 0. The rest makes it right to a few ulps:

- e^(-x^2/2)'s relative error is the absolute error of x^2 / 2, 20 ulps of a float32 at |x| = 13, so
  the reduced argument takes x^2 exactly: -x^2 - 2k ln2 (ln2's first 16 bits times k exact) is one fused
  multiply-add, rounded once (without one, x^2's rounding error from Dekker's halves);
- the range reduction is exp's, doubled so that x^2 needs no halving: s = 1.5 * 2^23 + k with
  k = round(-x^2 log2(e) / 2) in one fused multiply-add, then k2 = k times 2 ln2's first 16 bits in
  another, s * hi - (1.5 * 2^23) * hi, exact (both products fit in the fused multiply-add, and so does the
  answer), so that k itself is never formed: the rest of 2 ln2 is k2 times (rest / hi), and
  u = -x^2 - 2k ln2, -x^2/2 = k ln2 + u/2; e^(u/2) = 1 + u S(u), S of degree 5 (exp_half_float32,
  0.93 ulp: a fit of e^r with its coefficients scaled by powers of two, the same values as with the
  halving), times 2^64 (its coefficients scaled exactly);
- 2^k is two integer operations: s's low bits hold k, shifted left by 23 into the exponent field and
  added to e's, so e = 2^(k + 64) e^(u/2), always a normal number (k >= -159); D's coefficients are
  times 2^64 too, so q = N / D = 2^-64 Q and e q = Phi(-|x|);
- the end, for x <= 0, is (x e) q: x e is normal, and the one rounding into a subnormal comes last.
  For x > 0 it is x (1 - e q), with e q inside a fused multiply-add, never rounded on its own. So from
  |x| = 13, where Phi(-|x|) is subnormal, the x > 0 side makes no subnormal, and the x <= 0 side is
  the select's first branch, which gcc computes under the mask x <= 0 with AVX-512: a lane the mask
  leaves out costs no microcode assist (computed on every lane, it makes the loop several times
  slower on x > 13);
- without fused multiply-adds N and D are evaluated with mul_add_once_float32, a * b exact in double
  and rounded once there: float32 steps rounded twice each put them 9 ulp off;
- |x| by clearing the sign bit, and one clamp (an integer min on the bits of |x| at 14.85: from there
  gelu(-|x|) rounds to -0 and gelu(|x|) to |x|).

Measured once (outside the suite) against x Phi(x) from libm's double erfc, on every float32 of |x| in
[2^-30, 15], both signs: 6.22 ulp at most, at x = -5.61, with fused multiply-adds and without (4.07 and
4.38 for x > 0); erfc's formula op by op is 18.7 ulp off within |x| < 3 and 309 ulp at x = -13.
tests/test_vector_math.py holds the helper to 8 ulp on every 1024th float32 of the same range in both
builds. gelu's loop is 39 instructions per 16 floats (AVX-512, as bench/bench_transcendentals.py counts
them; 43 with t P(t) and the 2^-64 put back by a multiplication), one of them the division. Newton's method
from a guess in the exponent bits (ten instructions) in place of a division measured 3 to 6% slower, in the
t P(t) form.

Specials as op by op: gelu(NaN) = NaN, gelu(inf) = inf, gelu(-inf) = NaN (-inf times erfc's 0, as
PyTorch's), gelu(-0.0) = -0.0, and a subnormal x gives x/2 rounded. The helper is `always_inline`
for the reason tanh's is (two calls in one kernel left one out of line, and the loop scalar).
"""

from __future__ import annotations

import math

from tinyedu.core.dtype import dtypes
from tinyedu.core.ops import BinaryOps, TernaryOps
from tinyedu.core.uops import UOp, UOps
from tinyedu.renderer.c_vector_tanh import _alu, _const, _f32

# --8<-- [start:gelu]
GELU_FLOAT32 = """static inline float mul_add_once_float32(float a, float b, float c) {
#if defined(__FMA__) || defined(__ARM_FEATURE_FMA)
  return __builtin_fmaf(a, b, c);  /* a * b + c, rounded once */
#else  /* a * b is exact in double, the sum rounds to double, then to float (twice only in a rare tie) */
  return (float)((double)a * b + c);
#endif
}
static inline __attribute__((always_inline)) float gelu_simd_float32(float x) {
  unsigned int bits;
  __builtin_memcpy(&bits, &x, 4);
  bits &= 0x7FFFFFFFu;
  float b;
  __builtin_memcpy(&b, &bits, 4);  /* |x|, by clearing the sign bit */
  unsigned int c_bits = bits < 0x416D999Au ? bits : 0x416D999Au;  /* |x| clamped to 14.85 (an integer min: */
  float c;  /* from there gelu(-|x|) rounds to -0 and gelu(|x|) is |x|) */
  __builtin_memcpy(&c, &c_bits, 4);
  float n = 0.004111029f;  /* Q(b) = e^(b^2/2) erfc(b / sqrt2) / 2 = N(b) / D(b), N at c, D at b */
  n = mul_add_once_float32(n, c, 0.040613335f);
  n = mul_add_once_float32(n, c, 0.18319908f);
  n = mul_add_once_float32(n, c, 0.4382824f);
  n = mul_add_once_float32(n, c, 0.5f);
  float d = 0.010304705f * 0x1p64f;  /* D's coefficients times 2^64 (exactly), so q = 2^-64 Q */
  d = mul_add_once_float32(d, b, 0.101808876f * 0x1p64f);
  d = mul_add_once_float32(d, b, 0.46936846f * 0x1p64f);
  d = mul_add_once_float32(d, b, 1.2024117f * 0x1p64f);
  d = mul_add_once_float32(d, b, 1.6744497f * 0x1p64f);
  d = mul_add_once_float32(d, b, 0x1p64f);
  float q = n / d;  /* |x| = inf: D = inf, q = 0; NaN: q = NaN */
  float c2 = c * c;
  float s = mul_add_float32(c2, -0.7213475f, 12582912.0f);  /* 1.5 * 2^23 + k, k = round(-c^2 log2e / 2) */
#if defined(__FMA__) || defined(__ARM_FEATURE_FMA)
  float k2 = __builtin_fmaf(s, 1.38629150390625f, -17443584.0f);  /* k times 2 ln2's first 16 bits, exactly */
  float u = __builtin_fmaf(-c, c, -k2);  /* -c^2 - k2, c^2 exact inside the fused multiply-add */
#else
  float k2 = (s - 12582912.0f) * 1.38629150390625f;
  float u = (-c2 - k2) - product_error_float32(c, c, c2);  /* (Sterbenz: -c2 - k2 is exact) */
#endif
  u = mul_add_float32(k2, -2.0610482e-06f, u);  /* minus k times the rest of 2 ln2: -c^2/2 = k ln2 + u/2 */
  float e = exp_half_float32(u, 0x1p64f);  /* 2^64 e^(u/2), |u| < 0.7 */
  unsigned int s_bits, e_bits;
  __builtin_memcpy(&s_bits, &s, 4);  /* s's low bits hold k, -159 <= k <= 0: shifted into the exponent */
  __builtin_memcpy(&e_bits, &e, 4);  /* field (the rest of s's bits shift out), and added to e's, */
  e_bits += s_bits << 23;  /* so e = 2^(k + 64) e^(u/2) = 2^64 e^(-c^2/2), normal, and e q = Phi(-c) */
  __builtin_memcpy(&e, &e_bits, 4);
  return x <= 0.0f ? (x * e) * q : x * mul_add_float32(-e, q, 1.0f);  /* x e first: a subnormal rounds once */
}"""
# --8<-- [end:gelu]

# expr.py's erfc (repeated here: the renderer does not import the library above it), as float32 constants
ERFC_POLYNOMIAL = tuple(map(_f32, (-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806, 0.27886807,
                                   -1.13520398, 1.48851587, -0.82215223, 0.17087277)))
MINUS_SQRT_HALF = _f32(-math.sqrt(0.5))


def _value(u: UOp, t: UOp, at: float, depth: int = 12) -> float | None:
    """u evaluated in float64 with t = `at`, where u is built from t and constants by + and * only."""
    if u is t:
        return at
    if u.op is UOps.CONST:
        return float(u.arg)
    if depth == 0 or not (_alu(u, BinaryOps.ADD) or _alu(u, BinaryOps.MUL)) or len(u.src) != 2:
        return None
    left, right = (_value(s, t, at, depth - 1) for s in u.src)
    if left is None or right is None:
        return None
    return left + right if u.arg is BinaryOps.ADD else left * right


def _is_erfc_polynomial(p: UOp, t: UOp) -> bool:
    """Whether p is expr.py's erfc polynomial in t: its constants are exactly ERFC_POLYNOMIAL's, and it
    has P's values (the same sums of the same products, in whatever order) at a few points."""
    constants, stack, seen = [], [p], set()
    while stack:
        u = stack.pop()
        if u.op is UOps.CONST:
            constants.append(_f32(float(u.arg)))
        elif u is not t and id(u) not in seen:
            seen.add(id(u))
            stack.extend(u.src)
    if sorted(set(constants)) != sorted(ERFC_POLYNOMIAL):
        return False
    for at in (0.25, 0.6, 1.0):
        got = _value(p, t, at)
        if got is None or abs(got - sum(c * at**i for i, c in enumerate(ERFC_POLYNOMIAL))) > 1e-9:
            return False
    return True


def gelu_input(u: UOp, exp_parts) -> UOp | None:
    """x where the float32 UOp `u` is the end of expr.py's gelu(x) (Gelu.value in
    tinyedu/function_composite.py), else None. `exp_parts` is c_vector_math.py's recognizer of exp.

    The shape checked: (x * 0.5) * where(z < 0, 2 - tail, tail), z = x * -sqrt(1/2),
    tail = t * exp(P(t) - a a), t = 1 / (1 + 0.5 a), a = where(z < 0 | z == 0, 0 - z, z)."""
    if not (_alu(u, BinaryOps.MUL) and u.dtype == dtypes.float32):
        return None
    for half, erfc in (u.src, u.src[::-1]):
        if not (_alu(half, BinaryOps.MUL) and _const(half.src[1], 0.5) and _alu(erfc, TernaryOps.WHERE)):
            continue
        x, (negative, two_minus, tail) = half.src[0], erfc.src
        z = negative.src[0] if _alu(negative, BinaryOps.CMPLT) and _const(negative.src[1], 0.0) else None
        if z is None or not (_alu(z, BinaryOps.MUL) and z.src[0] is x and _const(z.src[1], MINUS_SQRT_HALF)):
            continue
        if not (_alu(two_minus, BinaryOps.SUB) and _const(two_minus.src[0], 2.0) and two_minus.src[1] is tail
                and _alu(tail, BinaryOps.MUL)):
            continue
        t, e = tail.src
        parts = exp_parts(e)
        if parts is None or parts[1] != 0.0 or not _alu(parts[0], BinaryOps.SUB):
            continue
        p, square = parts[0].src
        if not (_alu(square, BinaryOps.MUL) and square.src[0] is square.src[1]):
            continue
        a = square.src[0]
        if not (_alu(a, TernaryOps.WHERE) and _alu(a.src[1], BinaryOps.SUB) and _const(a.src[1].src[0], 0.0)
                and a.src[1].src[1] is z and a.src[2] is z and _alu(a.src[0], BinaryOps.OR)
                and a.src[0].src[0] is negative and _alu(a.src[0].src[1], BinaryOps.CMPEQ)
                and a.src[0].src[1].src[0] is z and _const(a.src[0].src[1].src[1], 0.0)):
            continue
        one_plus = t.src[1] if _alu(t, BinaryOps.DIV) and _const(t.src[0], 1.0) else None
        if one_plus is None or not (_alu(one_plus, BinaryOps.ADD) and _const(one_plus.src[0], 1.0)):
            continue
        halved = one_plus.src[1]
        if not (_alu(halved, BinaryOps.MUL) and _const(halved.src[0], 0.5) and halved.src[1] is a):
            continue
        if _is_erfc_polynomial(p, t):
            return x
    return None
