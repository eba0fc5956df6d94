"""Vector exp2 for the C device: a loop of exp2 calls runs as SIMD lanes.

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
- that computes a float32 exp2 (other loops, and other kernels, keep the C renderer's code).

A threaded loop becomes `parallel for simd` with `schedule(simd:guided)` (chunks of whole vectors).
The kernel is compiled without trapping math (`#pragma GCC optimize`): the compiler may then turn
the clamps into vector selects; it changes no value, only whether a NaN compare may raise a
floating-point flag, which nothing reads.

The exp2: 2^x = 2^n * 2^f with n = round(x) and |f| <= 1/2; 2^f by its Taylor series to degree 8
in double (within 2^-33 of the exact value), 2^n written into a double's exponent bits, and one
rounding to float32 at the end: within 0.503 ulp of the exact answer, as libm's exp2f, for every
float32 (tests/test_vector_math.py checks it against numpy in float64 over the whole range, and
tests/test_accuracy.py the ops built on it). NaN stays NaN, +inf gives inf, -inf gives 0.
"""

from __future__ import annotations

from tinyedu.core.dtype import dtypes
from tinyedu.core.ops import UnaryOps
from tinyedu.core.uops import UOp, UOps
from tinyedu.renderer.cstyle import CRenderer, _unwrap

# --8<-- [start:exp2]
EXP2_FLOAT32 = """static inline float exp2_simd_float32(float x) {
  float c = x < -200.0f ? -200.0f : (x > 200.0f ? 200.0f : x);  /* (a NaN stays a NaN) */
  double t = (double)c + 6755399441055744.0;  /* 1.5 * 2^52: n = round(c) is in t's low bits */
  double f = (double)c - (t - 6755399441055744.0);
  unsigned long long bits;
  __builtin_memcpy(&bits, &t, 8);
  bits = (bits + 1023) << 52;  /* 2^n: n + 1023 in a double's exponent bits */
  double scale;
  __builtin_memcpy(&scale, &bits, 8);
  double p = 1.3215486790144305e-06;  /* ln(2)^k / k!, k = 8 down to 0 */
  p = p * f + 1.5252733804059838e-05;
  p = p * f + 0.00015403530393381606;
  p = p * f + 0.0013333558146428441;
  p = p * f + 0.009618129107628477;
  p = p * f + 0.055504108664821576;
  p = p * f + 0.2402265069591007;
  p = p * f + 0.6931471805599453;
  p = p * f + 1.0;
  return (float)(p * scale);
}"""
# --8<-- [end:exp2]
FLOATS = (dtypes.float32, dtypes.float64)
UNSAFE = (UOps.DEFINE_ACC, UOps.ASSIGN, UOps.DEFINE_LOCAL, UOps.DEFINE_SHARED, UOps.BARRIER, UOps.SPECIAL)


def _is_exp2(u: UOp) -> bool:
    return u.op is UOps.ALU and u.arg is UnaryOps.EXP2 and u.dtype == dtypes.float32


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
        if self.simd and _is_exp2(u) and u.src[0].dtype == dtypes.float32:
            self.helpers.setdefault("exp2_simd_float32", EXP2_FLOAT32)
            return f"exp2_simd_float32({_unwrap(srcs[0])})"
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
