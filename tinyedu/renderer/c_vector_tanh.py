"""tanh as one SIMD helper for the C device: expr.py's float32 tanh formula, recognized in a kernel's
UOps, becomes one call of `tanh_simd_float32` (the way c_vector_math.py's `exp_parts` turns expr.py's
exp into one `exp_simd_float32`).

Why: rendered op by op (with expr.py's exp as one helper), tanh's vector loop was 69 instructions per
16 floats on AVX-512, one of them a division, and the loop is bound by how many instructions it
issues. Most of them went to the exp: its clamps to [-110, 110], the two halves of 2^k, and the sums
that make e^x correct to 0.66 ulp. tanh needs less: from |x| = 0.55 it is 1 - 2 / (e^(2|x|) + 1), and
there the quotient 2 / (e + 1) is at most 0.5 of the result, so the error of e counts at most once and
less the larger |x| is. The helper therefore takes |x| by clearing the sign bit (one instruction, not
a compare and two selects), clamps it once (tanh rounds to 1 from |x| = 9.02: from 9.5 on, e^19 is
used), computes e^(2|x|) = 2^k e^r plainly (k = round(2|x| log2 e) <= 28, r by Cody and Waite's two
parts of ln 2, e^r = 1 + r + r^2 g(r) with exp_simd_float32's g, 2^k written into the exponent bits
once: no overflow or subnormal is possible), and below 0.55 evaluates expr.py's polynomial
x + x^3 P(x^2) with fused multiply-adds. The sign is put back at the end, so -0.0 stays -0.0 and a
NaN stays a NaN. Measured once over every float32 from 2^-20 to 12 against libm's double tanh
(outside the suite; below 2^-20 the answer is x itself, above 12 it is 1): 1.46 ulp at most, just
above the switch at 0.55 (where 2 / (e + 1) is half the result, so e's error is not damped yet),
0.75 below it; 1.46 and 0.81 without fused multiply-adds. tests/test_vector_math.py checks a sample
of both branches in both builds (<= 1.5), and tests/test_accuracy.py holds the op to 2.

The helper is `always_inline`: a fused kernel may call it twice (tanh(x) + tanh(y), an LSTM cell),
and gcc -O2 then kept it out of line and called it once per element, and the loop ran scalar.
"""

from __future__ import annotations

import struct

from tinyedu.core.dtype import dtypes
from tinyedu.core.ops import BinaryOps, TernaryOps, UnaryOps
from tinyedu.core.uops import UOp, UOps

# --8<-- [start:tanh]
TANH_FLOAT32 = """static inline __attribute__((always_inline)) float tanh_simd_float32(float x) {
  unsigned int bits, sign;
  __builtin_memcpy(&bits, &x, 4);
  sign = bits & 0x80000000u;  /* tanh is odd: computed for |x|, the sign put back (-0.0 kept) */
  bits ^= sign;
  float a;
  __builtin_memcpy(&a, &bits, 4);
  float z = a * a;  /* below 0.55: a + a^3 P(a^2), P expr.py's TANH_NEAR_ZERO */
  float p = mul_add_float32(-0.006264368f, z, 0.021064136f);
  p = mul_add_float32(p, z, -0.053850297f);
  p = mul_add_float32(p, z, 0.13332565f);
  p = mul_add_float32(p, z, -0.33333316f);
  float near = mul_add_float32(a * z, p, a);
  float t = a > 9.5f ? 19.0f : a + a;  /* from 0.55: 1 - 2 / (e^t + 1), t = 2a (a NaN stays) */
  float s = mul_add_float32(t, 1.442695f, 12582912.0f);  /* 1.5 * 2^23 + k, k = round(t log2 e) <= 28 */
  float k = s - 12582912.0f;
  float r = mul_add_float32(k, -0.693145751953125f, t);  /* exact: k has 5 bits, ln2's first part 16 */
  r = mul_add_float32(k, -1.4286068e-06f, r);  /* the rest of ln2: e^t = 2^k e^r, |r| < 0.35 */
  float g = exp_g_float32(r);  /* e^r = 1 + r + r^2 g(r), g as exp_simd_float32's */
  float e = 1.0f + mul_add_float32(r * r, g, r);
  unsigned int k_bits;
  __builtin_memcpy(&k_bits, &s, 4);  /* s's low bits hold k */
  float far = 1.0f - 2.0f / (e * pow2_whole_float32((int)(k_bits - 0x4B400000u)) + 1.0f);
  float y = a < 0.55f ? near : far;
  __builtin_memcpy(&bits, &y, 4);
  bits |= sign;
  __builtin_memcpy(&y, &bits, 4);
  return y;
}"""
# --8<-- [end:tanh]


def _f32(v: float) -> float:
    return struct.unpack("f", struct.pack("f", v))[0]


# expr.py's TANH_NEAR_ZERO (repeated here: the renderer does not import the library above it), as the
# float32 constants of the rendered polynomial, highest power first
TANH_NEAR_ZERO = tuple(map(_f32, (-0.006264368072152138, 0.021064136177301407, -0.05385029688477516,
                                  0.13332565128803253, -0.33333316445350647)))
TANH_SWITCH = 0.55  # |x| from which expr.py's tanh takes 1 - 2 / (e^(2|x|) + 1)


def _alu(u: UOp, op) -> bool:
    return u.op is UOps.ALU and u.arg is op


def _const(u: UOp, value: float) -> bool:
    return u.op is UOps.CONST and _f32(float(u.arg)) == _f32(value)


def _operands(u: UOp, op, const: float) -> UOp | None:
    """v where u is `op(v, const)` or `op(const, v)`, else None."""
    if _alu(u, op) and len(u.src) == 2:
        for c, v in (u.src, u.src[::-1]):
            if _const(c, const):
                return v
    return None


def _is_polynomial(p: UOp, z: UOp) -> bool:
    """Whether p is Horner's TANH_NEAR_ZERO in z, as expr.py builds it: ((c4 z + c3) z + c2) ..."""
    for c in TANH_NEAR_ZERO[:0:-1]:
        if not (_alu(p, BinaryOps.ADD) and _const(p.src[1], c)):
            return False
        product = p.src[0]
        if not (_alu(product, BinaryOps.MUL) and z in product.src):
            return False
        p = product.src[0] if product.src[1] is z else product.src[1]
    return _const(p, TANH_NEAR_ZERO[0])


def tanh_input(u: UOp, exp_parts) -> UOp | None:
    """x where the float32 UOp `u` is the end of expr.py's tanh(x), else None. `exp_parts` is
    c_vector_math.py's recognizer of expr.py's exp (passed in: that module imports this one).

    The shape checked, as expr.py writes it: where(x == 0, x, where(a < 0.55, x + (x z) P(z),
    where(x < 0, -far, far))), z = x x, a = where(x < 0, -x, x), far = 1 - 2 / (exp(2 a) + 1)."""
    if not (_alu(u, TernaryOps.WHERE) and u.dtype == dtypes.float32):
        return None
    is_zero, x, t = u.src
    if not (_alu(is_zero, BinaryOps.CMPEQ) and is_zero.src[0] is x and _const(is_zero.src[1], 0.0)):
        return None
    if not _alu(t, TernaryOps.WHERE):
        return None
    small, near, signed = t.src
    if not (_alu(small, BinaryOps.CMPLT) and _const(small.src[1], TANH_SWITCH)
            and _alu(signed, TernaryOps.WHERE)):
        return None
    a, (negative, minus_far, far) = small.src[0], signed.src
    if not (_alu(negative, BinaryOps.CMPLT) and negative.src[0] is x and _const(negative.src[1], 0.0)):
        return None
    if not (_alu(a, TernaryOps.WHERE) and a.src[0] is negative and a.src[2] is x
            and _alu(a.src[1], UnaryOps.NEG) and a.src[1].src[0] is x
            and _alu(minus_far, UnaryOps.NEG) and minus_far.src[0] is far):
        return None
    quotient = _operands(far, BinaryOps.SUB, 1.0) if far.src and _const(far.src[0], 1.0) else None
    denominator = quotient.src[1] if quotient is not None and _alu(quotient, BinaryOps.DIV) \
        and _const(quotient.src[0], 2.0) else None
    e = _operands(denominator, BinaryOps.ADD, 1.0) if denominator is not None else None
    parts = exp_parts(e) if e is not None else None
    if parts is None or parts[1] != 0.0 or _operands(parts[0], BinaryOps.MUL, 2.0) is not a:
        return None
    if not (_alu(near, BinaryOps.ADD) and near.src[0] is x and _alu(near.src[1], BinaryOps.MUL)):
        return None
    xz, p = near.src[1].src
    if not (_alu(xz, BinaryOps.MUL) and xz.src[0] is x and _alu(xz.src[1], BinaryOps.MUL)):
        return None
    z = xz.src[1]
    if not (z.src[0] is x and z.src[1] is x and _is_polynomial(p, z)):
        return None
    return x
