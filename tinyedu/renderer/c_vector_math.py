"""Vector exp2 for the C device: a loop of exp2 calls runs as SIMD lanes (float32 and float64).

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

A threaded loop becomes `parallel for simd` with `schedule(simd:guided)` (chunks of whole vectors).
The kernel is compiled without trapping math (`#pragma GCC optimize`): the compiler may then turn
the clamps into vector selects; it changes no value, only whether a NaN compare may raise a
floating-point flag, which nothing reads.

The exp2: 2^x = 2^n * 2^f with n = round(x) and |f| <= 1/2; 2^f by its Taylor series to degree 8
in double (within 2^-33 of the exact value), 2^n written into a double's exponent bits, and one
rounding to float32 at the end: within 0.503 ulp of the exact answer, as libm's exp2f, for every
float32 (tests/test_vector_math.py checks it against numpy in float64 over the whole range, and
tests/test_accuracy.py the ops built on it). NaN stays NaN, +inf gives inf, -inf gives 0. Where
the CPU has a fused multiply-add, each step of the series is one (`mul_add_float64`): half the
instructions, and the rounding of a double step is 2^-29 of a float32 ulp either way.

exp (tinyedu/expr.py) takes two exp2s: 2^t of the fraction, and 2^k of the whole number k it
rounded x log2(e) to. The second needs no series: `is_whole` recognizes a value that is a whole
number by how it was built (expr.py's rounding, sums and WHEREs of whole numbers), and its exp2 is
`exp2_whole_float32`, k + 1023 written into a double's exponent bits (exact, as the series is there).
"""

from __future__ import annotations

import math

from tinyedu.core.dtype import dtypes
from tinyedu.core.ops import BinaryOps, TernaryOps, UnaryOps
from tinyedu.core.uops import UOp, UOps
from tinyedu.renderer.cstyle import CRenderer, _unwrap

# --8<-- [start:exp2]
EXP2_FLOAT32 = """static inline double mul_add_float64(double a, double b, double c) {
#if defined(__FMA__) || defined(__ARM_FEATURE_FMA)
  return __builtin_fma(a, b, c);  /* one instruction where the CPU has it (and one rounding) */
#else
  return a * b + c;
#endif
}
static inline float exp2_simd_float32(float x) {
  float c = x < -200.0f ? -200.0f : (x > 200.0f ? 200.0f : x);  /* (a NaN stays a NaN) */
  double t = (double)c + 6755399441055744.0;  /* 1.5 * 2^52: n = round(c) is in t's low bits */
  double f = (double)c - (t - 6755399441055744.0);
  unsigned long long bits;
  __builtin_memcpy(&bits, &t, 8);
  bits = (bits + 1023) << 52;  /* 2^n: n + 1023 in a double's exponent bits */
  double scale;
  __builtin_memcpy(&scale, &bits, 8);
  double p = 1.3215486790144305e-06;  /* ln(2)^k / k!, k = 8 down to 0 */
  p = mul_add_float64(p, f, 1.5252733804059838e-05);
  p = mul_add_float64(p, f, 0.00015403530393381606);
  p = mul_add_float64(p, f, 0.0013333558146428441);
  p = mul_add_float64(p, f, 0.009618129107628477);
  p = mul_add_float64(p, f, 0.055504108664821576);
  p = mul_add_float64(p, f, 0.2402265069591007);
  p = mul_add_float64(p, f, 0.6931471805599453);
  p = mul_add_float64(p, f, 1.0);
  return (float)(p * scale);
}"""
# --8<-- [end:exp2]
# 2^n for a whole number n needs no polynomial: n + 1023 in a double's exponent bits is exactly 2^n,
# and the cast to float32 rounds it once (to 0 below 2^-150, to inf from 2^128, a subnormal between)
EXP2_WHOLE_FLOAT32 = """static inline float exp2_whole_float32(float n) {
  float c = n < -200.0f ? -200.0f : (n > 200.0f ? 200.0f : n);  /* (a NaN stays a NaN) */
  unsigned long long bits = (unsigned long long)((long long)c + 1023) << 52;
  double scale;
  __builtin_memcpy(&scale, &bits, 8);
  return c != c ? c : (float)scale;
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
  return (p * pow2_whole_float64(half)) * pow2_whole_float64(m - half);
}"""
EXP2_WHOLE_FLOAT64 = """static inline double exp2_whole_float64(double n) {
  double c = n < -1100.0 ? -1100.0 : (n > 1100.0 ? 1100.0 : n);  /* (a NaN stays a NaN) */
  long long m = c != c ? 0 : (long long)c, half = m >> 1;
  return c != c ? c : pow2_whole_float64(half) * pow2_whole_float64(m - half);
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


def simd_loops(uops: list[UOp]) -> set[UOp]:
    """The RANGE UOps of the loops that may run as SIMD lanes (see the module docstring)."""
    if any(u.op in UNSAFE for u in uops):
        return set()
    chosen, open_loops = set(), []
    for i, u in enumerate(uops):
        if u.op is UOps.RANGE:
            open_loops.append(i)
        elif u.op is UOps.ENDRANGE and open_loops:
            start = open_loops.pop()
            loop, body = uops[start], uops[start + 1:i]
            if any(b.op is UOps.RANGE for b in body):
                continue  # not the innermost loop
            stores = [b for b in body if b.op is UOps.STORE]
            if any(_is_exp2(b) for b in body) and stores and all(_depends_on(s.src[1], loop) for s in stores):
                chosen.add(loop)
    return chosen


HELPERS = {"exp2_simd_float32": EXP2_FLOAT32, "exp2_whole_float32": EXP2_WHOLE_FLOAT32,
           "exp2_simd_float64": EXP2_FLOAT64, "exp2_whole_float64": EXP2_WHOLE_FLOAT64}


class VectorMathCRenderer(CRenderer):
    """The C renderer, with exp2_simd_float32 and `#pragma omp simd` on the loops `simd_loops` chooses."""

    def __init__(self, name: str, uops: list[UOp]):
        super().__init__(name, uops)
        self.simd = simd_loops(uops)

    def open_loop(self, u: UOp, start: str, end: str) -> str:
        if u not in self.simd:
            return super().open_loop(u, start, end)
        if u.arg.threads > 1:  # (as CRenderer's, with simd: chunks of whole vectors)
            self.emit("int omp_get_max_threads(void);")
            self.emit(f"#pragma omp parallel for simd num_threads({u.arg.threads}) schedule(simd:guided) "
                      "if(omp_get_max_threads() > 1)")
        else:
            self.emit("#pragma omp simd")
        name = u.arg.name
        self.emit(f"for ({u.dtype.c_name} {name} = {start}; {name} < {end}; {name}++) {{")
        self.indent += 1
        return name

    def alu(self, u: UOp, *srcs: str) -> str:
        if self.simd and _is_exp2(u) and u.src[0].dtype == u.dtype:
            name = f"exp2_{'whole' if is_whole(u.src[0]) else 'simd'}_{u.dtype.name}"
            if u.dtype == dtypes.float64:
                self.helpers.setdefault("exp2_simd_float64", EXP2_FLOAT64)  # (pow2_whole_float64 too)
            self.helpers.setdefault(name, HELPERS[name])
            return f"{name}({_unwrap(srcs[0])})"
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
