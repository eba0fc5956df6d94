"""Stage 4 benchmark: tinyedu's C backend next to numpy, PyTorch and tinygrad (CPU), in one run.

Run: .venv/bin/python bench/bench_c.py [--quick]      (not a test; prints tables)

Workloads: a fused elementwise chain on 2^24 floats, a full and an axis reduction, matmul at
256/512/1024. For tinyedu two times are shown: end to end (build the lazy graph, schedule, run:
what a user waits for) and the kernels alone (GlobalCounters). Ratios are other / tinyedu end to
end, so > 1 means tinyedu is faster. Then: the time to compile one kernel, and a cache hit.

Threads are reported, not forced: numpy's matmul calls a multithreaded BLAS and PyTorch uses all
cores, and so do tinyedu's optimized kernels (THREADS, see bench/bench_kernels.py for stage 5).
PyTorch and tinygrad columns appear when they are installed (tinygrad's CPU backend needs clang).
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from typing import Callable

import numpy as np
from timing import QUICK, load, median_time, peer_note, tinygrad, torch

from tinyedu import Tensor
from tinyedu.core.helpers import GlobalCounters

REPEAT = 3 if QUICK else 5





def tinyedu_times(build: Callable[[], Tensor]) -> tuple[float, float]:
    """(end to end, kernels only) for realizing a freshly built graph each time."""
    def run() -> None:
        build().realize()  # the result is dropped, so the next build is new work, not a cache hit

    total = median_time(run, REPEAT, warmup=1)
    kernel_times = []
    for _ in range(REPEAT):
        GlobalCounters.reset()
        run()
        kernel_times.append(GlobalCounters.time_sum_s)
    return total, statistics.median(kernel_times)


def row(name: str, tinyedu_build: Callable[[], Tensor], others: dict[str, Callable[[], object]]) -> None:
    total, kernels = tinyedu_times(tinyedu_build)
    cells = [f"{name:28s} {total * 1e3:9.2f} {kernels * 1e3:9.2f}"]
    for label in ("numpy", "torch", "tinygrad"):
        if label in others:
            t = median_time(others[label], REPEAT, warmup=1)
            cells.append(f"{t * 1e3:9.2f} {t / total:6.2f}x")
        else:
            cells.append(f"{'-':>9} {'-':>7}")
    print(" ".join(cells))


def header() -> None:
    columns = ["tinyedu", "kernels", "numpy", "ratio", "torch", "ratio", "tinygrad", "ratio"]
    print(f"{'workload':28s} " + " ".join(f"{c:>{7 if c == 'ratio' else 9}}" for c in columns))
    print(f"{'(times in ms)':28s} {'e2e':>9} {'only':>9}")


def main() -> None:
    rng = np.random.default_rng(0)
    print(f"tinyedu device: C; numpy {np.__version__}"
          + (f"; torch {torch.__version__} ({torch.get_num_threads()} threads)" if torch else "; no torch")
          + ("; tinygrad installed" if tinygrad else "; no tinygrad") + f"; {os.cpu_count()} cores\n"
          + f"{peer_note()} [{load()}]")
    header()

    # ---- a fused elementwise chain: one pass over memory instead of one per op ----
    n = 1 << (20 if QUICK else 24)
    A, B, C = (rng.standard_normal(n).astype(np.float32) for _ in range(3))
    a, b, c = (Tensor(x).realize() for x in (A, B, C))
    others: dict[str, Callable[[], object]] = {
        "numpy": lambda: np.maximum(A * B + C, 0) * 0.5 - A}
    if torch:
        ta, tb, tc = (torch.from_numpy(x) for x in (A, B, C))
        others["torch"] = lambda: (ta * tb + tc).relu() * 0.5 - ta
    if tinygrad:
        ga, gb, gc = (tinygrad.Tensor(x).realize() for x in (A, B, C))
        others["tinygrad"] = lambda: ((ga * gb + gc).relu() * 0.5 - ga).realize()
    row(f"relu(a*b+c)*0.5-a  2^{n.bit_length() - 1}", lambda: (a * b + c).relu() * 0.5 - a, others)

    # ---- reductions ----
    others = {"numpy": lambda: A.sum()}
    if torch:
        others["torch"] = lambda: ta.sum()
    if tinygrad:
        others["tinygrad"] = lambda: ga.sum().realize()
    row(f"sum (full)         2^{n.bit_length() - 1}", lambda: a.sum(), others)

    side = 1 << (10 if QUICK else 12)
    M = rng.standard_normal((side, side)).astype(np.float32)
    m = Tensor(M).realize()
    others = {"numpy": lambda: M.sum(1)}
    if torch:
        tm = torch.from_numpy(M)
        others["torch"] = lambda: tm.sum(1)
    if tinygrad:
        gm = tinygrad.Tensor(M).realize()
        others["tinygrad"] = lambda: gm.sum(1).realize()
    row(f"sum(axis=1)        {side}x{side}", lambda: m.sum(1), others)

    # ---- matmul ----
    for size in ((256, 512) if QUICK else (256, 512, 1024)):
        X, W = (rng.standard_normal((size, size)).astype(np.float32) for _ in range(2))
        x, w = Tensor(X).realize(), Tensor(W).realize()
        others = {"numpy": lambda X=X, W=W: X @ W}
        if torch:
            tx, tw = torch.from_numpy(X), torch.from_numpy(W)
            others["torch"] = lambda tx=tx, tw=tw: tx @ tw
        if tinygrad:
            gx, gw = tinygrad.Tensor(X).realize(), tinygrad.Tensor(W).realize()
            others["tinygrad"] = lambda gx=gx, gw=gw: (gx @ gw).realize()
        row(f"matmul             {size}", lambda x=x, w=w: x @ w, others)

    compile_times()


def compile_times() -> None:
    """Compile one new kernel (cache miss) and load it again (cache hit), in a fresh cache folder."""
    from tinyedu.codegen.kernel import Kernel
    from tinyedu.codegen.linearizer import linearize
    from tinyedu.engine.schedule import create_schedule
    from tinyedu.renderer.cstyle import render_c
    from tinyedu.runtime.ops_c import Compiler

    x = Tensor(np.ones((64, 64), np.float32)).realize()
    misses, hits, codegen = [], [], []
    with tempfile.TemporaryDirectory() as folder:
        os.environ["TINYEDU_CACHE"] = folder
        for k in range(REPEAT):
            ast = create_schedule([((x * (k + 2.5)).exp2() + x.T).sum(1).lazydata])[-1].ast
            start = time.perf_counter()
            kernel = Kernel(ast)
            source = render_c(kernel.name, linearize(kernel))
            codegen.append(time.perf_counter() - start)
            start = time.perf_counter()
            Compiler().load(source)
            misses.append(time.perf_counter() - start)
            start = time.perf_counter()
            Compiler().load(source)
            hits.append(time.perf_counter() - start)
        del os.environ["TINYEDU_CACHE"]
    print(f"\nper kernel: AST -> UOps -> C {statistics.median(codegen) * 1e3:.2f} ms, "
          f"compile (cache miss) {statistics.median(misses) * 1e3:.1f} ms, "
          f"cache hit {statistics.median(hits) * 1e3:.3f} ms")


if __name__ == "__main__":
    main()
