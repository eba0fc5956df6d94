"""The math a C kernel calls, written out for wasm32, which has no C library.

A kernel compiled for the C device calls `exp2f`, `log2f`, `sinf`, `cosf`, `fmodf` and `fmaf` from the
system's libm. WebAssembly has instructions for `sqrt`, `floor`, `trunc`, `nearest` (rint), `min` and
`max`, and nothing else; the WASM device links no C library (`clang -nostdlib`), so the header below
gives each function the kernels call, in plain C, and `#define`s the libm names to them. Every
function computes in double precision (a double holds a float's product exactly and has 29 spare bits),
and the float functions round that result once to float:

- `exp2`: 2^x = 2^n * e^(f ln 2) with n = rint(x), |f| <= 1/2: a Taylor polynomial of degree 13 in
  f ln 2 (|f ln 2| <= 0.35, so the first term left out is below 1e-17), scaled by 2^n built from bits;
- `log2`: x = m * 2^e with m in [sqrt(1/2), sqrt(2)); ln m = 2 atanh(s), s = (m-1)/(m+1), |s| <= 0.172,
  summed to s^23 (below 1e-17); log2 x = e + ln m / ln 2;
- `sin`/`cos`: x = k pi/2 + r with k = rint(2x/pi), r taken off in three parts of pi/2 (Cody and Waite;
  each part's 33 bits times k is exact for |k| < 2^20, so r is exact to about 1e-27 for |x| below
  about 1.6 million), then a Taylor polynomial on |r| <= pi/4 and the quadrant k mod 4. Past
  |x| = 2^20 pi/2 the reduction would lose digits (libm uses a 1,200-bit 2/pi for those; this header
  does not), so the result there is NaN: a visible "not computed", never a wrong number;
- `fmod`: exact, by long division of the two significands in integers (fmodf through it: the
  remainder of two floats is a float);
- `fmaf`: a*b is exact in double and a*b + c rounds once; rounding that to float again is right except
  when the double lands exactly halfway between two floats, where it is moved one double-ulp toward the
  exact sum (its error, from the TwoSum of Knuth) before the second rounding.

The tests compare these with numpy (tests/test_wasm.py) over ranges and edge values.
"""

WASM_MATH_HEADER = r"""/* tinyedu_wasm.h: the libm functions tinyedu's kernels call, for wasm32 (no libc). */
#ifndef TINYEDU_WASM_H
#define TINYEDU_WASM_H
#include <stdbool.h>
#define NAN __builtin_nanf("")
#define INFINITY __builtin_inff()
typedef unsigned long long wasm_u64;

static inline double wasm_from_bits(wasm_u64 b) { union { wasm_u64 u; double d; } v = {b}; return v.d; }
static inline wasm_u64 wasm_to_bits(double d) { union { double d; wasm_u64 u; } v = {d}; return v.u; }

static double wasm_exp2(double x) {
  if (x != x) return x;
  if (x >= 1024.0) return __builtin_inf();
  if (x < -1100.0) return 0.0;
  double n = __builtin_rint(x), f = (x - n) * 0.6931471805599453, p = 1.0;
  for (int k = 13; k >= 1; k--) p = 1.0 + p * f / k;  /* e^f = 1 + f(1 + f/2(1 + f/3(...))) */
  int e = (int)n;
  if (e < -1000) { p *= wasm_from_bits((wasm_u64)(1023 - 600) << 52); e += 600; }
  return p * wasm_from_bits((wasm_u64)(e + 1023) << 52);
}

static double wasm_log2(double x) {
  if (x != x || x < 0.0) return __builtin_nan("");
  if (x == 0.0) return -__builtin_inf();
  if (x == __builtin_inf()) return x;
  int e = 0;
  if (x < 2.2250738585072014e-308) { x *= 18446744073709551616.0; e = -64; }  /* subnormal: times 2^64 */
  wasm_u64 b = wasm_to_bits(x);
  e += (int)(b >> 52) - 1023;
  double m = wasm_from_bits((b & 0xFFFFFFFFFFFFFULL) | 0x3FF0000000000000ULL);  /* in [1, 2) */
  if (m > 1.4142135623730951) { m *= 0.5; e += 1; }
  double s = (m - 1.0) / (m + 1.0), s2 = s * s, t = 0.0;
  for (int k = 23; k >= 1; k -= 2) t = t * s2 + 1.0 / k;  /* atanh(s)/s = 1 + s^2/3 + s^4/5 + ... */
  return e + 2.0 * s * t * 1.4426950408889634;
}

static double wasm_sin_poly(double r) {  /* |r| <= pi/4: r - r^3/3! + ... - r^19/19! */
  double r2 = r * r, p = 1.0;
  for (int k = 19; k >= 3; k -= 2) p = 1.0 - p * r2 / (k * (k - 1));
  return r * p;
}

static double wasm_cos_poly(double r) {  /* |r| <= pi/4: 1 - r^2/2! + ... + r^20/20! */
  double r2 = r * r, p = 1.0;
  for (int k = 20; k >= 2; k -= 2) p = 1.0 - p * r2 / (k * (k - 1));
  return p;
}

/* sin (cosine = 0) or cos (cosine = 1) of x: reduce by k pi/2, then the quadrant (k + cosine) mod 4 */
static double wasm_sincos(double x, int cosine) {
  if (!(x > -1647099.3291652855 && x < 1647099.3291652855)) return __builtin_nan("");  /* 2^20 pi/2 */
  double k = __builtin_rint(x * 0.6366197723675814);
  double r = x - k * 1.57079632673412561417;      /* pi/2's first 33 bits */
  r = r - k * 6.07710050630396597660e-11;         /* the next 33 */
  r = r - k * 2.02226624879595063154e-21;         /* the rest */
  double quadrant = k - 4.0 * __builtin_floor(k * 0.25) + cosine;  /* exact: no int conversion */
  int q = (int)quadrant & 3;
  double v = (q & 1) ? wasm_cos_poly(r) : wasm_sin_poly(r);
  return (q & 2) ? -v : v;
}

/* the remainder x - trunc(x/y) y, exactly: long division of the significands */
static double wasm_fmod(double x, double y) {
  wasm_u64 bx = wasm_to_bits(x), by = wasm_to_bits(y), sign = bx & 0x8000000000000000ULL;
  bx &= 0x7FFFFFFFFFFFFFFFULL;
  by &= 0x7FFFFFFFFFFFFFFFULL;
  if (by == 0 || bx >= 0x7FF0000000000000ULL || by > 0x7FF0000000000000ULL) return __builtin_nan("");
  if (bx < by) return x;  /* |x| < |y| (y infinite included) */
  int ex = (int)(bx >> 52), ey = (int)(by >> 52);
  wasm_u64 mx = bx & 0xFFFFFFFFFFFFFULL, my = by & 0xFFFFFFFFFFFFFULL, top = 1ULL << 52;
  if (ex) mx |= top; else for (ex = 1; mx < top; ex--) mx <<= 1;  /* subnormal: normalize */
  if (ey) my |= top; else for (ey = 1; my < top; ey--) my <<= 1;
  for (; ex > ey; ex--) { if (mx >= my) mx -= my; mx <<= 1; }
  if (mx >= my) mx -= my;
  if (mx == 0) return wasm_from_bits(sign);
  for (; mx < top; ey--) mx <<= 1;
  if (ey <= 0) { mx >>= 1 - ey; ey = 0; }  /* a subnormal result (the bits shifted out are zeros) */
  return wasm_from_bits(sign | ((wasm_u64)ey << 52) | (mx & 0xFFFFFFFFFFFFFULL));
}

/* a*b + c rounded once to float: see tinyedu/renderer/wasm_math.py */
static float wasm_fmaf(float a, float b, float c) {
  double p = (double)a * (double)b, r = p + (double)c;
  wasm_u64 bits = wasm_to_bits(r);
  if ((bits & 0x1FFFFFFFULL) == 0x10000000ULL && ((bits >> 52) & 0x7FF) != 0x7FF) {
    double bp = r - p, err = (p - (r - bp)) + ((double)c - bp);  /* (p + c) - r, exactly */
    if (err != 0.0) r = wasm_from_bits((err > 0.0) == (r > 0.0) ? bits + 1 : bits - 1);
  }
  return (float)r;
}

static inline float wasm_exp2f(float x) { return (float)wasm_exp2(x); }
static inline float wasm_log2f(float x) { return (float)wasm_log2(x); }
static inline float wasm_sinf(float x) { return (float)wasm_sincos(x, 0); }
static inline float wasm_cosf(float x) { return (float)wasm_sincos(x, 1); }
static inline float wasm_fmodf(float x, float y) { return (float)wasm_fmod(x, y); }
static inline double wasm_sin(double x) { return wasm_sincos(x, 0); }
static inline double wasm_cos(double x) { return wasm_sincos(x, 1); }

#define exp2f wasm_exp2f
#define log2f wasm_log2f
#define sinf wasm_sinf
#define cosf wasm_cosf
#define fmodf wasm_fmodf
#define fmaf wasm_fmaf
#define sqrtf __builtin_sqrtf
#define exp2 wasm_exp2
#define log2 wasm_log2
#define sin wasm_sin
#define cos wasm_cos
#define fmod wasm_fmod
#define sqrt __builtin_sqrt
#endif
"""
