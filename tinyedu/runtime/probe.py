"""Two small probes of the machine, to read kernel speeds against: copy bandwidth and peak FMA rate.

A kernel cannot move data faster than the memory copies it (a *memory-bound* kernel such as an
elementwise chain or a sum should reach a good fraction of the copy bandwidth), nor compute faster
than the processor's fused multiply-adds (a *compute-bound* kernel such as a large matmul should
reach a good fraction of that peak). Both are measured here with C compiled like the kernels are:

- `copy_bandwidth(threads)`: GB/s copying 128 MB (bytes read plus bytes written, as STREAM counts);
- `peak_gflops(threads)`: GFLOPS of 12 independent chains of vector fused multiply-adds per thread
  (independent, so no instruction waits for the one before it), 2 FLOPs each per lane.
"""

from __future__ import annotations

import ctypes
import functools
import time

import numpy as np

from tinyedu.runtime.ops_c import Compiler
from tinyedu.runtime.toolchain import native_vector_width

PROBES = r"""
#include <math.h>
typedef float floatxW __attribute__((vector_size(4 * WIDTH), aligned(4)));
static inline floatxW fma_w(floatxW a, floatxW b, floatxW c) {
  floatxW r; for (int i = 0; i < WIDTH; i++) r[i] = fmaf(a[i], b[i], c[i]); return r; }
void copy(float* restrict out, const float* restrict x, int n, int threads) {
  #pragma omp parallel for num_threads(threads) schedule(static)
  for (int i = 0; i < n / WIDTH; i++) *(floatxW*)(out + WIDTH * i) = *(const floatxW*)(x + WIDTH * i);
}
float fma_peak(long iterations, int threads) {
  float total = 0;
  #pragma omp parallel num_threads(threads) reduction(+:total)
  {
    floatxW m = (floatxW){0} + 0.9999f, c = (floatxW){0} + 0.0001f;
    floatxW a0 = m, a1 = m * 2, a2 = m * 3, a3 = m * 4, a4 = m * 5, a5 = m * 6;
    floatxW a6 = m * 7, a7 = m * 8, a8 = m * 9, a9 = m * 10, a10 = m * 11, a11 = m * 12;
    for (long i = 0; i < iterations; i++) {
      a0 = fma_w(a0, m, c); a1 = fma_w(a1, m, c); a2 = fma_w(a2, m, c); a3 = fma_w(a3, m, c);
      a4 = fma_w(a4, m, c); a5 = fma_w(a5, m, c); a6 = fma_w(a6, m, c); a7 = fma_w(a7, m, c);
      a8 = fma_w(a8, m, c); a9 = fma_w(a9, m, c); a10 = fma_w(a10, m, c); a11 = fma_w(a11, m, c);
    }
    floatxW s = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7 + a8 + a9 + a10 + a11;
    total += s[0];
  }
  return total;
}
"""


@functools.cache
def _library() -> ctypes.CDLL:
    library = Compiler().load(PROBES.replace("WIDTH", str(native_vector_width())))
    library.fma_peak.restype = ctypes.c_float
    return library


def _best(run, repeat: int) -> float:
    run()
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


def copy_bandwidth(threads: int = 1, elements: int = 1 << 25, repeat: int = 5) -> float:
    """GB/s of a vector copy of `elements` floats on `threads` threads (read + written bytes)."""
    x, out = np.ones(elements, np.float32), np.zeros(elements, np.float32)
    args = (ctypes.c_void_p(out.ctypes.data), ctypes.c_void_p(x.ctypes.data), ctypes.c_int(elements),
            ctypes.c_int(threads))
    return 8 * elements / _best(lambda: _library().copy(*args), repeat) * 1e-9


def peak_gflops(threads: int = 1, iterations: int = 10_000_000, repeat: int = 3) -> float:
    """GFLOPS of independent vector fused multiply-adds on `threads` threads."""
    seconds = _best(lambda: _library().fma_peak(ctypes.c_long(iterations), ctypes.c_int(threads)), repeat)
    return iterations * 12 * native_vector_width() * 2 * threads / seconds * 1e-9
