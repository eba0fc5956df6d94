"""gelu as one SIMD helper for the C device: expr.py's float32 gelu formula (x * 0.5 * erfc(-x / sqrt2),
erfc Numerical Recipes' t e^(P(t) - z^2) with t = 1 / (1 + |z|/2)), recognized in a kernel's UOps,
becomes one call of `gelu_simd_float32` (as c_vector_tanh.py does for tanh).

Why: rendered op by op (erfc's exp as exp_simd_float32), gelu's vector loop was 74 instructions per
16 floats on AVX-512; the helper's is 63. It keeps erfc's fit (the same t, the same polynomial P in pairs) and
its one division, and saves the rest: |x| by clearing the sign bit rather than a compare and two
selects, t straight from |x| (1 + |x| sqrt(1/2)/2 in one fused multiply-add), one clamp (|x| <= 14.85:
from there gelu(-|x|) rounds to -0 and gelu(|x|) to |x|), and exp's range reduction done once on
P - a^2 with 2^k written into the exponent bits once, shifted by 2^64 so that it is always a normal
number, the 2^-64 put back by the last multiplication (a subnormal result rounds once), and
e^r = 1 + (r + r^2 g(r)) without exp's exact 1 + r, which moved no maximum below (erfc's fit decides them).

It is also closer than the formula op by op: z = x sqrt(1/2) and z^2 are kept as a float plus its
rounding error (fused multiply-adds, Dekker's halves without them), because e^(-z^2)'s relative
error is the absolute error of z^2, which for |x| = 13 is 20 ulps of a float32. Measured once (outside
the suite) against x Phi(x) from libm's double erfc, on every 16th float32 of |x| in [2^-30, 15], both
signs, and on tests/test_accuracy.py's points: 7.02 ulp at most with fused multiply-adds and 7.73
without, where the formula op by op is 18.7 ulp off within |x| < 3 and 309 ulp at x = -13 (erfc's fit
itself is 1.2e-7 relative, and P's cancelling terms near t = 1 lose about 2^-22 more).
tests/test_vector_math.py holds the helper to 8 ulp on a sample of the same points in both builds.

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
GELU_FLOAT32 = """static inline __attribute__((always_inline)) float gelu_simd_float32(float x) {
  unsigned int bits;
  __builtin_memcpy(&bits, &x, 4);
  bits &= 0x7FFFFFFFu;
  float b;
  __builtin_memcpy(&b, &bits, 4);  /* |x|, by clearing the sign bit */
  float t = 1.0f / mul_add_float32(b, 0.35355338f, 1.0f);  /* t = 1 / (1 + a/2), a = |x| sqrt(1/2) */
  float t2 = t * t, t4 = t2 * t2;  /* erfc(a) = t e^(P(t) - a^2), P expr.py's, in pairs (Estrin) */
  float p = mul_add_float32(mul_add_float32(0.09678418f, t, 0.37409195f), t2,
                            mul_add_float32(1.0000237f, t, -1.2655122f));
  float q = mul_add_float32(mul_add_float32(1.4885159f, t, -1.135204f), t2,
                            mul_add_float32(0.27886808f, t, -0.18628806f));
  p = mul_add_float32(q, t4, p);
  p = mul_add_float32(mul_add_float32(0.17087276f, t, -0.82215226f), t4 * t4, p);
  unsigned int c_bits = bits < 0x416D999Au ? bits : 0x416D999Au;  /* |x| clamped to 14.85 (an integer min: */
  float c;  /* from there gelu(-|x|) rounds to -0 and gelu(|x|) is |x|; a NaN goes on in t) */
  __builtin_memcpy(&c, &c_bits, 4);
  float a = c * 0.70710677f;  /* c sqrt(1/2) = a + a_lo, a^2 = a2 + a2_lo */
  float a_lo = mul_add_float32(c, 1.2101617e-08f, product_error_float32(c, 0.70710677f, a));
  float a2 = a * a;
  float a2_lo = mul_add_float32(a + a, a_lo, product_error_float32(a, a, a2));
  float s = mul_add_float32(p - a2, 1.442695f, 12582912.0f);  /* 1.5 * 2^23 + round((P - a^2) log2 e) */
  float k = s - 12582912.0f;
  float r = mul_add_float32(k, -0.693145751953125f, -a2) + p;  /* P - a^2 - k ln2 = r, |r| < 0.35 */
  r = r + mul_add_float32(k, -1.4286068e-06f, -a2_lo);
  float g = exp_g_float32(r);  /* e^r = 1 + r + r^2 g(r), g as exp_simd_float32's */
  float e = 1.0f + mul_add_float32(r * r, g, r);  /* (exp's exact 1 + r moved no maximum: erfc's fit rules) */
  unsigned int k_bits;
  __builtin_memcpy(&k_bits, &s, 4);  /* s's low bits hold k, -161 <= k <= 1 */
  float m = (0.5f * t) * e * pow2_whole_float32((int)(k_bits - 0x4B400000u) + 64);  /* 2^64 erfc(a) / 2 */
  return x > 0.0f ? x * mul_add_float32(m, -0x1p-64f, 1.0f) : (x * m) * 0x1p-64f;
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
