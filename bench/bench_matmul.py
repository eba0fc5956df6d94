"""float32 matmuls of many shapes on the C device, kernel alone and end to end, next to numpy.

Run: THREADS=1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 .venv/bin/python bench/bench_matmul.py [--quick]
(not a test; prints a table)

For each shape (A is n x k, B is k x m): square sizes that whole vectors divide (256, 512, 1024),
sizes that only small or odd numbers divide (1000, 1023) or nothing does (257, a prime), and
non-square ones (a tall A times a narrow B, a wide B, sizes like 300 x 500 x 700). Columns:
- numpy: `A @ B` (its BLAS, threads and CPU kernel are printed above the table);
- kernel: the heuristics' kernel alone (tinyedu/codegen/heuristics.py), run on scratch buffers (for
  a shape that matmul pads to whole vectors, the padded product's kernel, without the copies);
- end to end: `(a @ b).numpy()` from realized tensors: build the graph, schedule, run, read the
  values back (a temporary: the memory the kernel wrote, no copy);
- GFLOPS of the kernel, and the opts it got;
- % of peak, for numpy and the kernel: their rate against this machine's float32 FMA peak on the
  same number of threads (bench/peak.py), the rate no kernel can pass.
Times are the median of several calls per block, and the least of several blocks, the columns
alternating block by block. With more than one thread on either side, numpy's column is timed
first, in a process of its own: its BLAS threads spin after each call and would share the cores
with tinyedu's (see in_own_process in bench/timing.py). CPU time of this thread when THREADS=1
(waiting for a core on a busy machine does not count then), wall time otherwise. Ratios are time /
numpy's time.
The machine may be shared: read the load average printed with the table.
"""

from __future__ import annotations

import os
import statistics
import time
from typing import Callable

import numpy as np
from peak import peak_gflops
from timing import QUICK, blas_note, blas_threads, in_own_process, load

from tinyedu import Tensor
from tinyedu.engine import beam
from tinyedu.engine.lower import heuristic_opts, lower, new_kernel
from tinyedu.engine.schedule import create_schedule
from tinyedu.runtime.device import Device, thread_count

SHAPES = [(256, 256, 256), (512, 512, 512), (1024, 1024, 1024), (257, 257, 257), (1000, 1000, 1000),
          (1023, 1023, 1023), (1024, 1024, 128), (128, 1024, 1024), (300, 500, 700), (128, 784, 256)]
QUICK_SHAPES = [(256, 256, 256), (1024, 1024, 1024), (257, 257, 257), (1000, 1000, 1000), (1024, 1024, 128)]
BLOCKS = 3 if QUICK else 7
ONE_THREAD = thread_count() == 1
clock = time.thread_time if ONE_THREAD else time.perf_counter


def median_seconds(run: Callable[[], object], seconds: float = 0.05) -> float:
    """The median time of `run()` over enough calls to fill about `seconds` (at least 3)."""
    run()
    start = clock()
    run()
    calls = max(3, min(50, int(seconds / max(clock() - start, 1e-6))))
    times = []
    for _ in range(calls):
        start = clock()
        run()
        times.append(clock() - start)
    return statistics.median(times)


def kernel_runner(n: int, k: int, m: int):
    """The heuristics' kernel of an n x k @ k x m matmul, its scratch buffers, and its opts."""
    ast = [item.ast for item in create_schedule([(Tensor.empty(n, k) @ Tensor.empty(k, m)).lazydata])
           if item.ast.op.name == "STORE"][-1]
    backend = Device["C"]
    opts = heuristic_opts(new_kernel(ast, backend), backend.vector_width, thread_count())
    return lower("C", ast, opts).runner, beam.scratch_buffers(ast, "C"), opts


def inputs(n: int, k: int, m: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(n * 1_000_003 + k * 1009 + m)  # (the same inputs in every process)
    return rng.standard_normal((n, k)).astype(np.float32), rng.standard_normal((k, m)).astype(np.float32)


def numpy_seconds(shapes: list[tuple[int, int, int]]) -> list[float]:
    """numpy's `A @ B` for each shape, the best of BLOCKS medians (run in its own process: see below)."""
    times = []
    for shape in shapes:
        A, B = inputs(*shape)
        times.append(min(median_seconds(lambda A=A, B=B: A @ B) for _ in range(BLOCKS)))
    return times


def one_shape(n: int, k: int, m: int, ref: float | None, peak: float) -> str:
    """The row of one shape; `ref` is numpy's time, or None to time numpy here, block by block with
    tinyedu's columns; `peak` the GFLOPS of bench/peak.py."""
    A, B = inputs(n, k, m)
    a, b = Tensor(A).realize(), Tensor(B).realize()
    runner, buffers, opts = kernel_runner(n, k, m)
    runs = {"kernel": lambda: runner(buffers), "end to end": lambda: (a @ b).numpy()}
    if ref is None:
        runs["numpy"] = lambda: A @ B
    best = {name: float("inf") for name in runs}
    for _ in range(BLOCKS):  # alternating, block by block
        for name, run in runs.items():
            best[name] = min(best[name], median_seconds(run))
    ref = best.get("numpy", ref)
    flops = 2 * n * k * m
    cells = [f"{n}x{k} @ {k}x{m}".ljust(22), f"{ref * 1e3:9.3f}"]
    cells += [f"{best[name] * 1e3:9.3f} ({best[name] / ref:5.2f}x)" for name in ("kernel", "end to end")]
    gflops = flops / best["kernel"] / 1e9
    percent = f"{flops / ref / 1e9 / peak:5.0%} {gflops / peak:5.0%}"
    return " ".join(cells) + f" {gflops:7.1f} {percent}  {opts}"


if __name__ == "__main__":
    print(blas_note())
    print(f"{os.cpu_count()} cores; THREADS={os.environ.get('THREADS', 'unset')} (tinyedu's kernels: "
          f"{thread_count()} threads); {'CPU time of this thread' if ONE_THREAD else 'wall time'}")
    peak = peak_gflops(thread_count())
    print(f"float32 FMA peak on {thread_count()} thread(s): {peak:.1f} GFLOPS (bench/peak.py, {load()})")
    print(f"== matmul, float32 ({load()}); ms, (x) = time / numpy's time")
    print(f"{'shape':22s} {'numpy':>9s} {'kernel':>18s} {'end to end':>18s} {'GFLOPS':>7s} "
          f"{'% of peak':>11s}  opts")
    print(f"{'':22s} {'':>9s} {'':>18s} {'':>18s} {'kernel':>7s} {'numpy':>5s} {'kernel':>5s}")
    shapes = QUICK_SHAPES if QUICK else SHAPES
    if ONE_THREAD and blas_threads() == 1:  # no thread spins on either side: numpy alternates here
        references: list = [None] * len(shapes)
        print("(numpy's column alternates with tinyedu's, block by block, in this process)")
    else:
        references = in_own_process("bench_matmul", "numpy_seconds", shapes)
        print("(numpy's column was timed first, in a process of its own: see timing.in_own_process)")
    for shape, ref in zip(shapes, references, strict=True):
        print(one_shape(*shape, ref, peak), flush=True)
    print(f"done ({load()})")
