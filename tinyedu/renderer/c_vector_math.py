"""Vector exp2 and exp for the C device: a loop of exp2s runs as SIMD lanes (float32 and float64).

The C renderer calls the C library's `exp2f` one element at a time: C has no vector form of it, so
the optimizer leaves such kernels unvectorized (`_has_scalar_only_ops` in
tinyedu/codegen/heuristics.py) and every element pays a function call. exp, tanh, sigmoid, gelu,
softplus, pow ... are all built on exp2 (tinyedu/expr.py), so they all paid it. This renderer is the
C renderer with its own exp2 (`exp2_simd_float32`, below), written in plain arithmetic that the
compiler vectorizes, and `#pragma omp simd` on the loops where that is safe:

- the innermost loop, in a kernel with no accumulator, no local or shared memory and no barrier:
  no iteration reads what another one wrote;
- whose every store writes an element that depends on the loop's index (no two iterations write
  the same element);
- that computes a float32 or float64 exp2 (other loops, and other kernels, keep the C renderer's
  code). float64 has its own exp2 (`exp2_simd_float64`, below): the linearizer makes no float64
  vectors, but under `omp simd` the compiler vectorizes the loop, helper inlined, all the same.

And a reduce's innermost loop, on one thread, that computes a float exp2, stores nothing and only
adds to scalar float accumulators that start at 0 (a softmax's or a cross-entropy's sum of exps):
`#pragma omp simd reduction(+: acc0)`, where each lane keeps a partial sum and the lanes are added
up after the loop (`simd_sums`). That sums in another order than one element after the other, as
a reduce that the optimizer vectorizes (UNROLL) does.

A threaded loop becomes `parallel for simd` with `schedule(simd:guided)` (chunks of whole vectors).
The kernel is compiled without trapping math (`#pragma GCC optimize`): the compiler may then turn
the clamps into vector selects; it changes no value, only whether a NaN compare may raise a
floating-point flag, which nothing reads.

The float32 exp2 runs in float32 lanes (16 to an AVX-512 vector, 8 to AVX2, 4 to NEON): 2^x =
2^n * 2^f with n = round(x) and |f| <= 1/2. 2^f = 1 + f ln2 + f^2 (ln2^2/2 + f r(f)), r a minimax
polynomial (within 2^-33); f ln2 and the f^2 terms are kept as a float plus its exact rounding
error (fused multiply-adds where the CPU has them, Dekker's halves of 12 bits where not) and
summed so that one rounding counts; 2^n is two powers of two written into exponent bits, whose
product with 2^f rounds once. Within 0.53 ulp of the exact answer where the result is normal and
0.77 where it is subnormal (rounded to 24 bits, then to the subnormal spacing): 0.521 and 0.752
measured over every float32 from -260 to 260, against libm's double exp2; NaN stays NaN, +inf
gives inf, -inf gives 0 (tests/test_vector_math.py against numpy in float64, tests/test_accuracy.py
for the ops built on it). The float64 exp2 below stays in double lanes.

exp (tinyedu/expr.py) is about 29 primitive ops: x clamped, p = x log2(e) kept exactly as p + err
(Dekker), k = round(p), then 2^((p - k) + err) and 2^k by two exp2s. Rendered one op at a time,
that is two range reductions (the exp2 helper rounds its argument again) and about 60 vector
instructions of the formula around them. `exp_parts` recognizes that formula in a kernel's UOps
(its constants and its shape, down to the clamp) and the renderer writes one call instead,
`exp_simd_float32(x, n)` = e^x * 2^n, which works in natural-log space: k = round(x log2 e) by
one fused multiply-add whose low bits hold k, r = x - k ln2 with ln2 in two parts (Cody and
Waite: ln2's first 16 bits times k is exact, and so is the subtraction) and r's rounding error
kept, e^r = 1 + r + r^2 g(r) with g a degree-5 polynomial, 1 + r kept exactly as a float plus
its rounding error so that the last addition is the one rounding that counts, and 2^(k + n) as
two powers of two written into exponent bits (a subnormal result rounds once; e^x just below
2^128 stays finite). The values of the formula's other ops are left unused, and the compiler
drops them. tanh, sigmoid, gelu, softplus, sinh ... all reach e^x through expr.py's exp, so they
all get it (tanh's whole float32 formula goes one step further: tinyedu/renderer/c_vector_tanh.py
recognizes it and writes one `tanh_simd_float32` call, gelu's likewise one `gelu_simd_float32`
call, tinyedu/renderer/c_vector_gelu.py, and sigmoid's one `sigmoid_simd_float32` call,
tinyedu/renderer/c_vector_sigmoid.py): exp's loop is 37 vector instructions per 16
floats here (AVX-512), where it was 64 with the exp2 series and 120 op by op. float64's exp stays op
by op (its two exp2s are exp2_simd_float64 and exp2_whole_float64). The float32 one is closer than
the formula op by op: over every float32 from -260 to 260 (measured once, against libm's double
exp), 0.660 ulp at most for a normal result and 0.765 for a subnormal one (the formula op by op:
0.74 on tests/test_accuracy.py's points).

A result that rounds to zero is made by multiplying by 0, not by an underflow. Scaling by the second
power of two of 2^n gives the right +0.0 below 2^-150, but an x86 CPU finishes a multiply whose
result is subnormal, or rounds from one to 0, in microcode, on the order of a hundred cycles, and a
vector waits for its slowest lane. A softmax under a causal mask takes exp of -inf for half its
entries: exp(scores - max) of 16 x 4 x 64 x 64 took 0.62 ms on one AVX-512 core where unmasked
scores took 0.12 ms. So where 2^n is below 2^-151 (2^-1076 in float64) the second power of two is
0, and the result is the same +0.0 without the slow path (tests/test_vector_math.py checks that no
underflow is flagged). A result that is truly subnormal still takes it: that is its value.

A whole number's exp2 needs no series: `is_whole` recognizes a value that is a whole number by how
it was built (expr.py's rounding, sums and WHEREs of whole numbers), and its exp2 is
`exp2_whole_float32`, 2^k in two halves written into exponent bits (exact, as the series is there).
And in these loops max(a, c) with a constant c (neither 0 nor NaN) is one compare and select, which
the compiler makes one vector max; it keeps NaN as the C renderer's `max_float32` does.
"""

from __future__ import annotations

import math
import struct
from collections import Counter

from tinyedu.core.dtype import dtypes
from tinyedu.core.ops import BinaryOps, TernaryOps, UnaryOps
from tinyedu.core.uops import UOp, UOps
from tinyedu.renderer.c_vector_gelu import GELU_FLOAT32, gelu_input
from tinyedu.renderer.c_vector_sigmoid import SIGMOID_FLOAT32, sigmoid_input
from tinyedu.renderer.c_vector_tanh import TANH_FLOAT32, tanh_input
from tinyedu.renderer.cstyle import CRenderer, _unwrap

# --8<-- [start:exp2]
EXP2_FLOAT32 = """static inline float mul_add_float32(float a, float b, float c) {
#if defined(__FMA__) || defined(__ARM_FEATURE_FMA)
  return __builtin_fmaf(a, b, c);  /* one instruction where the CPU has it (and one rounding) */
#else
  return a * b + c;
#endif
}
static inline float product_error_float32(float a, float b, float ab) {  /* a * b - ab, exactly */
#if defined(__FMA__) || defined(__ARM_FEATURE_FMA)
  return __builtin_fmaf(a, b, -ab);
#else  /* Dekker: a and b in halves of 12 bits, whose products are exact (|a|, |b| < 2^115) */
  float ca = a * 4097.0f, cb = b * 4097.0f;
  float a_hi = ca - (ca - a), b_hi = cb - (cb - b), a_lo = a - a_hi, b_lo = b - b_hi;
  return ((a_hi * b_hi - ab) + a_hi * b_lo + a_lo * b_hi) + a_lo * b_lo;
#endif
}
static inline float pow2_biased_float32(int e) {  /* 2^(e - 127) for 1 <= e <= 254: e is the exponent field */
  unsigned int bits = (unsigned int)e << 23;
  float scale;
  __builtin_memcpy(&scale, &bits, 4);
  return scale;
}
static inline float pow2_whole_float32(int n) {  /* 2^n for -126 <= n <= 127 */
  return pow2_biased_float32(n + 127);
}
/* 2^(n - half), the second of 2^n's two halves; 0 where 2^n < 2^-151, so that a product that rounds
   to 0 is made by a 0, not by a slow underflow (see the module's docstring) */
static inline float pow2_low_float32(int n, int half) {
  return n < -151 ? 0.0f : pow2_whole_float32(n - half);
}
static inline float exp2_reduced_float32(float f, float m) {  /* 2^f * 2^m: |f| <= 1/2, m whole */
  float a = f * 0.6931472f;  /* f ln2 = a + a_lo, the rest of ln2 added */
  float a_lo = product_error_float32(f, 0.6931472f, a) + f * (-1.9046542e-09f);
  float r = 0.000015173363f;  /* 2^f = 1 + f ln2 + f^2 (ln2^2/2 + f r(f)), r fitted (minimax, 2^-33) */
  r = mul_add_float32(r, f, 0.00015455754f);
  r = mul_add_float32(r, f, 0.0013333951f);
  r = mul_add_float32(r, f, 0.009618079f);
  r = mul_add_float32(r, f, 0.055504106f);
  float hi = 1.0f + a;
  float err = (1.0f - hi) + a;  /* 1 + a = hi + err exactly (|a| < 1) */
  float f2 = f * f, f2_lo = product_error_float32(f, f, f2);  /* f^2 = f2 + f2_lo */
  float h = f2 * 0.2402265f, h_lo = product_error_float32(f2, 0.2402265f, h);  /* f2 ln2^2/2 = h + h_lo */
  float s = hi + h;
  float s_err = (hi - s) + h;  /* hi + h = s + s_err exactly (|h| < |hi|) */
  float rest = (err + s_err) + (a_lo + (h_lo + mul_add_float32(f2_lo, 0.2402265f, (f2 * f) * r)));
  float p = s + rest;  /* the one rounding that counts: what is left is 2^-31 of the result */
  int n = m != m ? 0 : (int)m, half = n >> 1;  /* 2^m in two halves: a subnormal result rounds once */
  return (p * pow2_whole_float32(half)) * pow2_low_float32(n, half);
}
static inline float exp2_simd_float32(float x) {
  float c = -250.0f > x ? -250.0f : x;  /* clamped to [-250, 250] (a NaN stays a NaN) */
  c = c > 250.0f ? 250.0f : c;
  float m = (c + 12582912.0f) - 12582912.0f;  /* round(c), by 1.5 * 2^23 */
  return exp2_reduced_float32(c - m, m);  /* c - m is exact */
}
static inline __attribute__((always_inline)) float exp_g_float32(float r) {
  /* e^r = 1 + r + r^2 g(r) for |r| < 0.35, g fitted (least squares: 2^-29.6 of e^r); exp, tanh */
  float g = 0.00019826136f;
  g = mul_add_float32(g, r, 0.0013947149f);
  g = mul_add_float32(g, r, 0.008333434f);
  g = mul_add_float32(g, r, 0.041666254f);
  g = mul_add_float32(g, r, 0.16666666f);
  g = mul_add_float32(g, r, 0.5f);
  return g;
}
static inline __attribute__((always_inline)) float exp_half_float32(float u, float scale) {
  /* e^(u/2) times `scale`, a power of two, for |u| < 0.7, i.e. e^r = 1 + r S(r) at r = u/2 for |r| < 0.35,
     S fitted (least largest relative error: 2^-28.8), by Horner: within 0.93 ulp (1.23 without fused
     multiply-adds), six of them where exp's 1 + r + r^2 g(r), kept to 0.66, takes nine; for gelu, whose
     result rounds more than once anyway, and whose reduced argument comes doubled (-x^2 - 2k ln2: no
     multiplication by 1/2). S's coefficients (0.0013842722, 0.008374956, 0.041668057, 0.16666421,
     0.49999994, 1) are divided by 2^6 down to 2^1, powers of two, so every step is the step at r scaled
     exactly: the values are e^r's. So is `scale` (gelu's 2^64), folded into the constants by the compiler */
  float s = 2.1629254e-05f * scale;
  s = mul_add_float32(s, u, 0.0002617174f * scale);
  s = mul_add_float32(s, u, 0.0026042536f * scale);
  s = mul_add_float32(s, u, 0.020833027f * scale);
  s = mul_add_float32(s, u, 0.124999985f * scale);
  s = mul_add_float32(s, u, 0.5f * scale);
  return mul_add_float32(s, u, scale);
}
static inline float exp_simd_float32(float x, float n) {  /* e^x * 2^n, n whole (exp in tinyedu/expr.py) */
  float c = -110.0f > x ? -110.0f : x;  /* clamped to [-110, 110] as expr.py does (a NaN stays) */
  c = c > 110.0f ? 110.0f : c;
  float s = mul_add_float32(c, 1.442695f, 12582912.0f);  /* 1.5 * 2^23 + k, k = round(c log2 e) */
  float k = s - 12582912.0f;
  float r_hi = mul_add_float32(k, -0.693145751953125f, c);  /* exact: k (8 bits) times ln2's first 16 bits, */
  float r = mul_add_float32(k, -1.4286068e-06f, r_hi);  /* then Sterbenz; minus k times the rest of ln2 */
  float r_lo = mul_add_float32(k, -1.4286068e-06f, r_hi - r);  /* c - k ln2 = r + r_lo, |r| < 0.35 */
  float g = exp_g_float32(r);  /* e^r - 1 - r = r^2 g(r) */
  float small = mul_add_float32(r * r, g, r_lo);
  float hi = 1.0f + r;  /* 1 + r = hi + ((1 - hi) + r) exactly (|r| < 1): the last addition rounds once */
  float e = hi + (((1.0f - hi) + r) + small);
  unsigned int bits;
  __builtin_memcpy(&bits, &s, 4);  /* s's low bits hold k: 2^(k + n) in two halves, as exp2's, */
  int biased = (int)(bits - 0x4B400000u) + (int)n + 254, half = biased >> 1;  /* their exponent fields */
  int low = biased < 103 ? 0 : biased - half;  /* (k + n + 254 in one add); k + n < -151: 0, no underflow */
  return (e * pow2_biased_float32(half)) * pow2_biased_float32(low);  /* (field 0 is +0.0) */
}"""
# --8<-- [end:exp2]
# 2^n for a whole number n needs no polynomial: 2^n in two halves, each n/2 + 127 in a float's exponent
# bits, their product rounded once (to 0 below 2^-150, to inf from 2^128, a subnormal between)
EXP2_WHOLE_FLOAT32 = """static inline float exp2_whole_float32(float n) {
  float c = -250.0f > n ? -250.0f : n;  /* clamped to [-250, 250] (a NaN stays a NaN) */
  c = c > 250.0f ? 250.0f : c;
  int m = c != c ? 0 : (int)c, half = m >> 1;
  float scale = pow2_whole_float32(half) * pow2_low_float32(m, half);
  return c != c ? c : scale;
}"""
ROUNDER_FLOAT32 = 1.5 * 2.0**23  # (v + ROUNDER) - ROUNDER is v rounded to a whole number (tinyedu/expr.py)
# --8<-- [start:exp2-float64]
# float64: 2^f = 1 + f ln2 + f^2 q(f), |f| <= 1/2, q by its Taylor series to f^12 (the next term is
# below 2^-63). f ln2 is kept exactly as a + a_lo (the fused multiply-add gives the product's
# rounding error, and ln2's own rest is added), f^2 as f2 + f2_lo, and 1 + a as hi + err (exact:
# |a| < 1), so the rounding that counts is the last addition's, plus a few hundredths of an ulp from
# the small terms: within 0.6 ulp (tests/test_vector_math.py; numpy's exp2 is within 0.54, libm's
# float64 exp2 that the C renderer calls is about as close). 2^n is applied in two halves, whose
# product with p rounds once (to inf; into the subnormals, a second rounding: 0.25 ulp more).
EXP2_FLOAT64 = """static inline double pow2_whole_float64(long long n) {  /* 2^n for -1022 <= n <= 1023 */
  unsigned long long bits = (unsigned long long)(n + 1023) << 52;
  double scale;
  __builtin_memcpy(&scale, &bits, 8);
  return scale;
}
static inline double pow2_low_float64(long long n, long long half) {  /* as float32's: 0 below 2^-1076 */
  return n < -1076 ? 0.0 : pow2_whole_float64(n - half);
}
static inline double exp2_simd_float64(double x) {
  double c = x < -1100.0 ? -1100.0 : (x > 1100.0 ? 1100.0 : x);  /* (a NaN stays a NaN) */
  double n = (c + 6755399441055744.0) - 6755399441055744.0;  /* round(c), by 1.5 * 2^52 */
  double f = c - n;  /* exact */
  double a = f * 0.6931471805599453;
  double a_lo = __builtin_fma(f, 0.6931471805599453, -a) + f * 2.3190468138462996e-17;
  double q = 6.778726354822545e-14;  /* ln(2)^k / k!, k = 14 down to 2 */
  q = __builtin_fma(q, f, 1.3691488853904128e-12);
  q = __builtin_fma(q, f, 2.5678435993488206e-11);
  q = __builtin_fma(q, f, 4.4455382718708116e-10);
  q = __builtin_fma(q, f, 7.054911620801123e-09);
  q = __builtin_fma(q, f, 1.01780860092397e-07);
  q = __builtin_fma(q, f, 1.321548679014431e-06);
  q = __builtin_fma(q, f, 1.5252733804059841e-05);
  q = __builtin_fma(q, f, 0.0001540353039338161);
  q = __builtin_fma(q, f, 0.0013333558146428443);
  q = __builtin_fma(q, f, 0.009618129107628477);
  q = __builtin_fma(q, f, 0.05550410866482158);
  q = __builtin_fma(q, f, 0.24022650695910072);
  double hi = 1.0 + a;
  double err = (1.0 - hi) + a;
  double f2 = f * f, f2_lo = __builtin_fma(f, f, -f2);  /* f^2 = f2 + f2_lo exactly */
  double p = hi + (err + (a_lo + __builtin_fma(f2, q, f2_lo * q)));
  long long m = c != c ? 0 : (long long)n, half = m >> 1;
  return (p * pow2_whole_float64(half)) * pow2_low_float64(m, half);
}"""
EXP2_WHOLE_FLOAT64 = """static inline double exp2_whole_float64(double n) {
  double c = n < -1100.0 ? -1100.0 : (n > 1100.0 ? 1100.0 : n);  /* (a NaN stays a NaN) */
  long long m = c != c ? 0 : (long long)c, half = m >> 1;
  return c != c ? c : pow2_whole_float64(half) * pow2_low_float64(m, half);
}"""
# --8<-- [end:exp2-float64]
ROUNDER = {dtypes.float32: ROUNDER_FLOAT32, dtypes.float64: 1.5 * 2.0**52}
FLOATS = (dtypes.float32, dtypes.float64)
UNSAFE = (UOps.DEFINE_ACC, UOps.ASSIGN, UOps.DEFINE_LOCAL, UOps.DEFINE_SHARED, UOps.BARRIER, UOps.SPECIAL)


def _is_exp2(u: UOp) -> bool:
    return u.op is UOps.ALU and u.arg is UnaryOps.EXP2 and u.dtype in FLOATS


def is_whole(u: UOp, depth: int = 8) -> bool:
    """Whether the float32 value `u` is a whole number (or NaN, or +-inf) for every input: a whole
    constant, `(v + 1.5 * 2^23) - 1.5 * 2^23` (how tinyedu/expr.py rounds), a sum, difference or
    WHERE of whole numbers (a sum of whole float32 numbers rounds to a whole number: from 2^23 on
    every float32 is one). exp's 2^k is such a value: its exp2 takes no polynomial."""
    if depth == 0 or u.dtype not in ROUNDER:
        return False
    if u.op is UOps.CONST:
        return float(u.arg) == int(u.arg) if math.isfinite(u.arg) else False
    if u.op is not UOps.ALU:
        return False
    if u.arg is TernaryOps.WHERE:
        return all(is_whole(s, depth - 1) for s in u.src[1:])
    rounder = ROUNDER[u.dtype]
    if u.arg is BinaryOps.SUB and _is_const(u.src[1], rounder):
        a = u.src[0]
        if a.op is UOps.ALU and a.arg is BinaryOps.ADD and _is_const(a.src[1], rounder):
            return True
    if u.arg in (BinaryOps.ADD, BinaryOps.SUB):
        return all(is_whole(s, depth - 1) for s in u.src)
    return False


def _is_const(u: UOp, value: float) -> bool:
    return u.op is UOps.CONST and u.arg == value


def _depends_on(u: UOp, loop: UOp) -> bool:
    """Whether `loop`'s index is among the UOps `u` is computed from."""
    seen: set[int] = set()
    stack = [u]
    while stack:
        x = stack.pop()
        if x is loop:
            return True
        if id(x) not in seen:
            seen.add(id(x))
            stack.extend(x.src)
    return False


def _innermost_loops(uops: list[UOp]):
    """(RANGE UOp, the UOps of its body) of every innermost loop that computes a float exp2."""
    open_loops = []
    for i, u in enumerate(uops):
        if u.op is UOps.RANGE:
            open_loops.append(i)
        elif u.op is UOps.ENDRANGE and open_loops:
            start = open_loops.pop()
            body = uops[start + 1:i]
            if not any(b.op is UOps.RANGE for b in body) and any(_is_exp2(b) for b in body):
                yield uops[start], body


def simd_loops(uops: list[UOp]) -> set[UOp]:
    """The RANGE UOps of the loops that may run as SIMD lanes (see the module docstring)."""
    if any(u.op in UNSAFE for u in uops):
        return set()
    chosen = set()
    for loop, body in _innermost_loops(uops):
        stores = [b for b in body if b.op is UOps.STORE]
        if stores and all(_depends_on(s.src[1], loop) for s in stores):
            chosen.add(loop)
    return chosen


def simd_sums(uops: list[UOp]) -> dict[UOp, list[UOp]]:
    """The RANGE UOps of reduce loops that may run as SIMD lanes, each with the accumulators it sums
    into (`reduction(+: ...)`): an innermost loop, on one thread, that computes a float exp2 and
    stores nothing, whose every ASSIGN adds one value to a scalar float accumulator that starts at 0
    and that nothing else in the loop reads (a softmax's sum of exps, a cross-entropy's). A local
    array (a full sum's blocks, tinyedu/codegen/sum_blocks.py) is written after such a loop, not in it."""
    if any(u.op in (UOps.DEFINE_SHARED, UOps.BARRIER, UOps.SPECIAL) for u in uops):  # (a GPU's)
        return {}
    sums = {}
    for loop, body in _innermost_loops(uops):
        assigns = [b for b in body if b.op is UOps.ASSIGN]
        if loop.arg.threads > 1 or not assigns or any(b.op is UOps.STORE for b in body):
            continue
        accs = [a.src[0] for a in assigns]
        if len(set(accs)) == len(accs) and all(_sum_into(a, body) for a in assigns):
            sums[loop] = accs
    return sums


def _sum_into(assign: UOp, body: list[UOp]) -> bool:
    """Whether `assign` is acc = acc + value, for a scalar float acc that starts at 0 and that nothing
    else in `body` reads."""
    acc, value = assign.src
    return (acc.op is UOps.DEFINE_ACC and acc.dtype in FLOATS and acc.arg == 0 and value.op is UOps.ALU and
            value.arg is BinaryOps.ADD and acc in value.src and
            not any(acc in b.src for b in body if b is not value and b is not assign))


# --8<-- [start:exp-parts]
# expr.py's exp(x, times_pow2=n) in float32, as the linearizer leaves it (its constants, repeated here):
#   x clamped: max(-max(-x, -110), -110);  p = x * LOG2_E;  k = round(p) [+ n]
#   (2^((p - round(p)) + err) * (k > 127 ? 2 : 1)) * 2^(k > 127 ? k - 1 : k)
EXP_CLAMP, EXP_TOP = -110.0, 127.0
EXP_LOG2_E = struct.unpack("f", struct.pack("f", 1 / math.log(2)))[0]  # log2(e) rounded to float32


def _alu(u: UOp, op) -> bool:
    return u.op is UOps.ALU and u.arg is op


def _nonzero_const(u: UOp) -> bool:
    return u.op is UOps.CONST and not math.isnan(u.arg) and u.arg != 0


def _rounded(u: UOp) -> UOp | None:
    """v where u is `(v + 1.5 * 2^23) - 1.5 * 2^23` (v rounded to a whole number), else None."""
    if _alu(u, BinaryOps.SUB) and _is_const(u.src[1], ROUNDER_FLOAT32) and _alu(u.src[0], BinaryOps.ADD) \
            and _is_const(u.src[0].src[1], ROUNDER_FLOAT32):
        return u.src[0].src[0]
    return None


def _unclamped(u: UOp) -> UOp:
    """x where u is x clamped to [-110, 110] as expr.py clamps (max(-max(-x, -110), -110)), else u."""
    def negated_max(v: UOp) -> UOp | None:  # w where v is max(-w, -110), else None
        if _alu(v, BinaryOps.MAX) and _is_const(v.src[1], EXP_CLAMP) and _alu(v.src[0], UnaryOps.NEG):
            return v.src[0].src[0]
        return None

    inner = negated_max(u)
    x = negated_max(inner) if inner is not None else None
    return x if x is not None else u


def exp_parts(u: UOp) -> tuple[UOp, float] | None:
    """(x, n) where the float32 UOp `u` is the end of expr.py's exp(x, times_pow2=n): e^x * 2^n, which
    the C device then computes with one helper (exp_simd_float32), else None."""
    if not (_alu(u, BinaryOps.MUL) and u.dtype == dtypes.float32):
        return None
    for small, power in (u.src, u.src[::-1]):
        if not (_alu(power, UnaryOps.EXP2) and _alu(power.src[0], TernaryOps.WHERE)
                and _alu(small, BinaryOps.MUL)):
            continue
        top, lowered, k = power.src[0].src
        doubled = next((s for s in small.src if _alu(s, TernaryOps.WHERE)), None)
        fraction = next((s for s in small.src if _alu(s, UnaryOps.EXP2)), None)
        if doubled is None or fraction is None or doubled.src[0] is not top or \
                not (_is_const(doubled.src[1], 2.0) and _is_const(doubled.src[2], 1.0)):
            continue
        if not (_alu(top, BinaryOps.CMPLT) and _is_const(top.src[0], EXP_TOP) and top.src[1] is k and
                _alu(lowered, BinaryOps.SUB) and lowered.src[0] is k and _is_const(lowered.src[1], 1.0)):
            continue
        k0, n = k, 0.0
        if _alu(k, BinaryOps.ADD) and k.src[1].op is UOps.CONST and float(k.src[1].arg).is_integer():
            k0, n = k.src[0], float(k.src[1].arg)
        p, t = _rounded(k0), fraction.src[0]
        if p is None or not (_alu(p, BinaryOps.MUL) and _is_const(p.src[1], EXP_LOG2_E)):
            continue
        x = p.src[0]
        if _alu(t, BinaryOps.ADD) and _alu(t.src[0], BinaryOps.SUB) and t.src[0].src == (p, k0) and \
                _depends_on(t.src[1], x):  # t = (p - k) + err, err the rounding error of p
            return _unclamped(x), n
    return None


# --8<-- [end:exp-parts]
HELPERS = {"exp2_simd_float32": EXP2_FLOAT32, "exp2_whole_float32": EXP2_WHOLE_FLOAT32,
           "exp2_simd_float64": EXP2_FLOAT64, "exp2_whole_float64": EXP2_WHOLE_FLOAT64}
# expr.py's whole float32 formulas that become one helper call each: (the helper, its C source, the function
# that finds the formula's input x in a kernel's UOps: tinyedu/renderer/c_vector_tanh.py, c_vector_gelu.py
# and c_vector_sigmoid.py); each helper calls exp2_simd_float32's (mul_add, product_error, pow2_whole ...)
WHOLE_FORMULAS = (("tanh_simd_float32", TANH_FLOAT32, tanh_input),
                  ("gelu_simd_float32", GELU_FLOAT32, gelu_input),
                  ("sigmoid_simd_float32", SIGMOID_FLOAT32, sigmoid_input))


class VectorMathCRenderer(CRenderer):
    """The C renderer, with exp2_simd_float32 and `#pragma omp simd` on the loops `simd_loops` chooses."""

    def __init__(self, name: str, uops: list[UOp]):
        super().__init__(name, uops)
        self.sums = simd_sums(uops)  # reduce loops -> their accumulators
        self.simd = simd_loops(uops) | set(self.sums)
        self.exps = {u: parts for u in uops if self.simd and (parts := exp_parts(u)) is not None}
        # expr.py's whole tanh, gelu or sigmoid (WHOLE_FORMULAS): its last UOp -> (helper, source, x). The
        # formula's own ops are still written out, unused, and the compiler drops them
        self.wholes: dict[UOp, tuple[str, str, UOp]] = {}
        for name, source, input_of in WHOLE_FORMULAS if self.exps else ():
            for u in uops:
                if u not in self.wholes and (x := input_of(u, exp_parts)) is not None:
                    self.wholes[u] = (name, source, x)
        # the exp2s inside such an exp that nothing else uses: left to the C renderer (exp2f, never
        # called: the compiler drops the unused intermediates), so their helpers are not written out
        uses = Counter(s for u in uops for s in u.src)
        self.absorbed = {e for u in self.exps for s in u.src for e in (s, *s.src)
                         if _alu(e, UnaryOps.EXP2) and uses[e] == 1}

    def open_loop(self, u: UOp, start: str, end: str) -> str:
        if u not in self.simd:
            return super().open_loop(u, start, end)
        if u.arg.threads > 1:  # (as CRenderer's, with simd: chunks of whole vectors)
            self.emit("int omp_get_max_threads(void);")
            self.emit(f"#pragma omp parallel for simd num_threads({u.arg.threads}) schedule(simd:guided) "
                      "if(omp_get_max_threads() > 1)")
        elif u in self.sums:  # (the lanes keep partial sums, added together after the loop)
            self.emit(f"#pragma omp simd reduction(+: {', '.join(self.value(acc) for acc in self.sums[u])})")
        else:
            self.emit("#pragma omp simd")
        name = u.arg.name
        self.emit(f"for ({u.dtype.c_name} {name} = {start}; {name} < {end}; {name}++) {{")
        self.indent += 1
        return name

    def alu(self, u: UOp, *srcs: str) -> str:
        if u in self.wholes:  # expr.py's whole tanh, gelu or sigmoid: one helper call
            name, source, x = self.wholes[u]
            self.helpers.setdefault("exp2_simd_float32", EXP2_FLOAT32)  # (the pieces the helper calls)
            self.helpers.setdefault(name, source)
            return f"{name}({_unwrap(self.value(x))})"
        if u in self.exps:  # expr.py's whole exp: one helper, one range reduction
            x, n = self.exps[u]
            self.helpers.setdefault("exp2_simd_float32", EXP2_FLOAT32)
            return f"exp_simd_float32({_unwrap(self.value(x))}, {float(n)!r}f)"
        if self.simd and _is_exp2(u) and u.src[0].dtype == u.dtype and u not in self.absorbed:
            name = f"exp2_{'whole' if is_whole(u.src[0]) else 'simd'}_{u.dtype.name}"
            self.helpers.setdefault(f"exp2_simd_{u.dtype.name}", HELPERS[f"exp2_simd_{u.dtype.name}"])
            self.helpers.setdefault(name, HELPERS[name])  # (after exp2_simd's, whose pow2_whole it calls)
            return f"{name}({_unwrap(srcs[0])})"
        if self.simd and u.arg is BinaryOps.MAX and u.dtype in FLOATS and any(map(_nonzero_const, u.src)):
            # max(a, c) for a constant c other than NaN and +-0: one compare and select (one vector
            # max instruction), NaN kept as the C renderer's max_float32 keeps it (NaN > c is false)
            c, a = srcs if _nonzero_const(u.src[0]) else srcs[::-1]
            return f"({c}>{a}?{c}:{a})"
        return super().alu(u, *srcs)

    def use_helper(self, name: str, dtype) -> str:
        """The C renderer's helpers; a scalar float max written as two selects, which the compiler
        vectorizes (the same values as `(a > b || a != a) ? a : b`, whose `||` it does not)."""
        if self.simd and name in ("max_float32", "max_float64") and dtype in FLOATS:
            t = dtype.c_name
            self.helpers.setdefault(name, f"static inline {t} {name}({t} a, {t} b) {{ {t} m = a > b ? a : b; "
                                          "return a != a ? a : m; }")
            return name
        return super().use_helper(name, dtype)

    def includes(self) -> list[str]:
        no_traps = ['#pragma GCC optimize("no-trapping-math")'] if self.simd else []
        return [*no_traps, *super().includes()]


def render_c_vector_math(name: str, uops: list[UOp]) -> str:
    """The C source of one kernel, its loops of float32 exp2 vectorized (see the module docstring)."""
    return VectorMathCRenderer(name, uops).render()
