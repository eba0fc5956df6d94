"""sigmoid as one SIMD helper for the C device: expr.py's float32 sigmoid formula (2^-64 / (2^-64 + b),
b = e^-x 2^-64, with the rounding of the sum put back), recognized in a kernel's UOps, becomes one call
of `sigmoid_simd_float32` (as c_vector_tanh.py does for tanh).

Why: rendered with expr.py's exp as one helper, sigmoid's vector loop is 48 instructions per 16
floats on AVX-512: two clamps, e^-x to 0.66 ulp with 2^k in two halves, a TwoSum and a division at
the end of the chain. It runs slower than its count says (in cache, 1.96 ms per 2^22 floats where exp's
37 instructions take 1.10: the division, last in a long chain, takes the time of some 18 instructions;
gelu's, early and off its critical path, costs less than the 10 instructions of Newton's method that
would replace it, measured), and it is less accurate than it could be: for x < 0
the answer is about e^x = 1 / e^-x, and a reciprocal turns the error of e^-x just above a power of two
into twice as many ulps of the answer (1.90 ulp, at x = -17.35). The helper takes the other way round:

- e = e^-|x| (|x| by setting the sign bit of -|x|; one clamp, at -110, NaN kept), so that e <= 1:
  sigmoid(x) = 1 / (1 + e) for x > 0 and e / (1 + e) for x <= 0, a numerator n of 1 or e. e's
  range reduction is exp's (k = round(-|x| log2 e) in one fused multiply-add, ln2 in two parts),
  e^r = 1 + p, p = r + r^2 g(r) with g of degree 4 (fitted for the least largest relative error of
  e^r: 2^-27.5 with its coefficients in float32), rounded once as 1 + p;
- e is written as big = e 2^64 (2^(k + 64) in the exponent bits: always normal), and n as 2^64 or
  big, so that a subnormal answer (x < -87.3) is rounded once, by the last multiplication by 2^-64;
- no division: 1 / d, d = 1 + e in [1, 2], starts from the line 24/17 - 8/17 d (within 1/17) and two
  Newton steps y + y (1 - d y) (the second aimed 2^-15 high, so that the estimate is never below
  1/d: n - q below is then exact, by Sterbenz's lemma), within 2^-15;
- q = n / d is n times that, and one Newton step on the quotient finishes it: q + (n - q (1 + e)) / d,
  the residual by a fused multiply-add (Dekker's halves without one), which squares q's error (to
  2^-30) and puts back the rounding of 1 + e.

So the error is the last rounding (0.5 ulp) plus the rounding of 1 + p (at most 2^-24 of e), which the
answer keeps about once for x <= 0 and damps for x > 0. Measured once over every float32 with |x| <= 120
against double sigmoid (outside the suite): 1.52 ulp at most for x <= 0 (at x = -5.849), 0.77 for x > 0,
0.75 where the answer is subnormal (1.50, 0.77 and 0.75 without fused multiply-adds); expr.py's formula
around exp's helper is 1.90 at x = -17.35. The loop is 42 instructions per 16 floats on AVX-512 (gcc 12, as
bench/bench_transcendentals.py counts them), none of them a division. tests/test_accuracy.py holds the
op to 2 ulp, and tests/test_vector_math.py the helper to 1.55 on every 4096th float32 of |x| <= 120, in
both builds. (Keeping 1 + p as a float plus its rounding error and putting that into the residual makes
it 1.00 ulp, for 6 more instructions: measured 15% slower, so not done.)
Specials as expr.py's: sigmoid(NaN) = NaN, sigmoid(inf) = 1, sigmoid(-inf) = 0, sigmoid(+-0) = 0.5.
"""

from __future__ import annotations

from tinyedu.core.dtype import dtypes
from tinyedu.core.ops import BinaryOps, UnaryOps
from tinyedu.core.uops import UOp
from tinyedu.renderer.c_vector_tanh import _alu, _const, _operands

# --8<-- [start:sigmoid]
SIGMOID_FLOAT32 = """static inline __attribute__((always_inline)) float sigmoid_simd_float32(float x) {
  unsigned int bits;
  __builtin_memcpy(&bits, &x, 4);
  bits |= 0x80000000u;
  float t;
  __builtin_memcpy(&t, &bits, 4);  /* -|x|, by setting the sign bit */
  t = -110.0f > t ? -110.0f : t;  /* clamped at -110, where sigmoid is 0 or 1 anyway (a NaN stays) */
  float s = mul_add_float32(t, 1.442695f, 12582912.0f);  /* 1.5 * 2^23 + k, k = round(t log2 e) */
  float k = s - 12582912.0f;
  float r = mul_add_float32(k, -0.693145751953125f, t);  /* exact: k (8 bits) times ln2's first 16 bits */
  r = mul_add_float32(k, -1.4286068e-06f, r);  /* the rest of ln2: e^t = 2^k e^r, |r| < 0.35 */
  float g = mul_add_float32(0.0013879677f, r, 0.008368729f);  /* e^r = 1 + r + r^2 g(r) (2^-27.5) */
  g = mul_add_float32(g, r, 0.041667227f);
  g = mul_add_float32(g, r, 0.16666521f);
  g = mul_add_float32(g, r, 0.49999997f);
  unsigned int k_bits;
  __builtin_memcpy(&k_bits, &s, 4);  /* s's low bits hold k, -159 <= k <= 0 */
  float big = (1.0f + mul_add_float32(r * r, g, r)) * pow2_whole_float32((int)(k_bits - 0x4B400000u) + 64);
  float d = mul_add_float32(big, 0x1p-64f, 1.0f);  /* 1 + e, e = e^-|x| = big 2^-64 */
  float inv = mul_add_float32(d, -0.47058824f, 1.4117647f);  /* 1 / d: 24/17 - 8/17 d, within 1/17; */
  inv = mul_add_float32(inv, mul_add_float32(-d, inv, 1.0f), inv);  /* Newton: within 2^-8.2, */
  inv = mul_add_float32(inv, mul_add_float32(-d, inv, 1.0000305f), inv);  /* then in [1/d, (1 + 2^-15)/d] */
  float n = x > 0.0f ? 0x1p64f : big;  /* 2^64 sigmoid(x) = n / d (a NaN takes big, a NaN) */
  float q = n * inv;
  float w = q * 0x1p-64f;
#if defined(__FMA__) || defined(__ARM_FEATURE_FMA)
  float residual = __builtin_fmaf(-w, big, n - q);  /* n - q (1 + e); n - q is exact (n/2 <= q <= 2n) */
#else
  float wb = w * big;
  float residual = ((n - q) - wb) - product_error_float32(w, big, wb);
#endif
  return mul_add_float32(residual, inv, q) * 0x1p-64f;  /* q + residual / d, rounded once into subnormals */
}"""
# --8<-- [end:sigmoid]
SCALE = 2.0**-64  # expr.py's sigmoid scales numerator and denominator by it


def _factor(u: UOp, other: UOp) -> UOp | None:
    """v where u is v * other or other * v, else None (for a constant `other`: _operands)."""
    if not (_alu(u, BinaryOps.MUL) and len(u.src) == 2):
        return None
    for a, v in (u.src, u.src[::-1]):
        if a is other:
            return v
    return None


def sigmoid_input(u: UOp, exp_parts) -> UOp | None:
    """x where the float32 UOp `u` is the end of expr.py's sigmoid(x) (Expr.sigmoid in tinyedu/expr.py),
    else None. `exp_parts` is c_vector_math.py's recognizer of exp.

    The shape checked: r - r (lost (r 2^64)), r = 2^-64 / d, d = 2^-64 + b, b = exp(-x, times_pow2=-64),
    lost = (2^-64 - (d - b')) + (b - b'), b' = d - 2^-64 (TwoSum's rounding error of d)."""
    if not (_alu(u, BinaryOps.SUB) and u.dtype == dtypes.float32):
        return None
    r, correction = u.src
    if not (_alu(r, BinaryOps.DIV) and _const(r.src[0], SCALE) and _alu(r.src[1], BinaryOps.ADD)):
        return None
    d = r.src[1]
    if not _const(d.src[0], SCALE):
        return None
    b = d.src[1]
    scaled = _factor(correction, r)  # lost (r 2^64)
    if scaled is None or not (_alu(scaled, BinaryOps.MUL) and len(scaled.src) == 2):
        return None
    lost, r_big = scaled.src if _operands(scaled.src[1], BinaryOps.MUL, 2.0**64) is r else scaled.src[::-1]
    if _operands(r_big, BinaryOps.MUL, 2.0**64) is not r or not _is_two_sum_error(lost, d, b):
        return None
    parts = exp_parts(b)
    if parts is None or parts[1] != -64.0 or not _alu(parts[0], UnaryOps.NEG):
        return None
    return parts[0].src[0]


def _is_two_sum_error(lost: UOp, d: UOp, b: UOp) -> bool:
    """Whether lost is (2^-64 - (d - b')) + (b - b') with b' = d - 2^-64, as expr.py's two_sum writes it."""
    if not (_alu(lost, BinaryOps.ADD) and all(_alu(s, BinaryOps.SUB) for s in lost.src)):
        return False
    (c, d_minus), (b2, b_part) = lost.src[0].src, lost.src[1].src
    return (_alu(b_part, BinaryOps.SUB) and b_part.src[0] is d and _const(b_part.src[1], SCALE)
            and _const(c, SCALE) and _alu(d_minus, BinaryOps.SUB) and d_minus.src == (d, b_part) and b2 is b)
