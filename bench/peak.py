"""This machine's float32 peak: how many GFLOPS its cores can do at all, the ceiling for a matmul.

Run: .venv/bin/python bench/peak.py      (not a test; prints one line per thread count)

A matmul's kernel is a stream of fused multiply-adds (FMAs). A core issues a few FMA instructions
per cycle on its widest vectors, and each one waits some cycles for the previous result it adds
to. The loop below keeps independent chains of vector FMAs in registers, with no memory traffic:
two FMA units of latency 4 need 8 chains to stay busy, and more chains cover a longer wait. On an
AVX-512 core (32 vector registers) it runs 16 chains, on others 12 (AVX2 has 16 registers): on a
2-core AVX-512 virtual machine, 8, 12 and 16 chains gave 138, 142 and 150 GFLOPS on one thread
(one run each).
So its rate is about the peak, and `flops / peak` about the least time any kernel can take: a BLAS
near it cannot be beaten by much, by tinyedu or anyone else (bench/bench_matmul.py prints both as
% of it; a figure a little over 100% says this loop fell a little short of the true peak).

It is compiled with the C device's compiler and `-march=native`, with fused multiply-adds allowed
(the C device itself keeps `-ffp-contract=off` and writes its FMAs out), and run on Python threads:
ctypes lets go of the GIL during the call, so the threads run on separate cores.
"""

from __future__ import annotations

import ctypes
import tempfile
import threading
import time
from pathlib import Path

from tinyedu.runtime.toolchain import compile_library, find_compiler, native_vector_width

SOURCE = """
typedef float vec __attribute__((vector_size({nbytes})));
float fma_chains(long iterations, float x) {{
  vec acc[{chains}], scale, step;
  for (int i = 0; i < {lanes}; i++) {{ scale[i] = 1.0f - 1e-7f * i; step[i] = x * 1e-8f; }}
  for (int c = 0; c < {chains}; c++) acc[c] = scale * (float)c;
  for (long it = 0; it < iterations; it++) {{
    #pragma GCC unroll {chains}
    for (int c = 0; c < {chains}; c++) acc[c] = acc[c] * scale + step;  /* one FMA per lane */
  }}
  float sum = 0.0f;  /* returned, so that the compiler cannot drop the loop */
  for (int c = 0; c < {chains}; c++) for (int i = 0; i < {lanes}; i++) sum += acc[c][i];
  return sum;
}}
"""


def _fma_chains() -> tuple[ctypes._CFuncPtr, int]:
    """The compiled loop, and the float32 FMAs of one iteration (lanes times chains)."""
    compiler = find_compiler()
    lanes = native_vector_width(compiler)
    chains = 16 if lanes >= 16 else 12
    source = SOURCE.format(nbytes=4 * lanes, lanes=lanes, chains=chains)
    path = Path(tempfile.mkdtemp(prefix="tinyedu-peak-")) / "peak.so"
    compile_library("peak", compiler, ["-O2", "-march=native", "-ffp-contract=fast", "-shared", "-fPIC"],
                    source, path)
    function = ctypes.CDLL(str(path)).fma_chains
    function.restype, function.argtypes = ctypes.c_float, [ctypes.c_long, ctypes.c_float]
    return function, lanes * chains


def peak_gflops(threads: int = 1, seconds: float = 0.05, repeat: int = 5) -> float:
    """float32 GFLOPS of `threads` cores running the FMA loop at once: the best of `repeat` runs of
    about `seconds` each (the best, because a busy machine only ever makes it slower)."""
    function, fmas = _fma_chains()
    flops_per_iteration = 2 * fmas  # an FMA is a multiply and an add
    start = time.perf_counter()
    function(100_000, 1.0)
    iterations = max(1000, int(seconds / max(time.perf_counter() - start, 1e-6) * 100_000))
    best = float("inf")
    for _ in range(repeat):
        workers = [threading.Thread(target=function, args=(iterations, 1.0)) for _ in range(threads)]
        start = time.perf_counter()
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        best = min(best, time.perf_counter() - start)
    return threads * iterations * flops_per_iteration / best / 1e9


if __name__ == "__main__":
    import os
    for count in sorted({1, os.cpu_count() or 1}):
        print(f"float32 FMA peak, {count} thread{'s' if count > 1 else ''}: {peak_gflops(count):7.1f} GFLOPS")
