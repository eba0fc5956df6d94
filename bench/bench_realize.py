"""From "the graph is built" to "numbers are back": the eager MLP step and matmuls read back with numpy().

Run: THREADS=1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 .venv/bin/python bench/bench_realize.py

Rows: the eager MLP 784-256-10 batch-128 SGD step of bench_eager.py (schedule cache on), and
`(a @ b).numpy()` for 256x256 and 1024x1024 inputs already in memory, next to numpy's `a @ b`.
Each figure is the CPU time of this thread per call, the *fastest* of several blocks: on a busy
machine the other blocks also count other processes' cache and frequency effects. To compare two
versions of tinyedu, run this file alternately with each on PYTHONPATH, several times (the machine
may be shared: compare ratios measured side by side, and say what the load was).
"""

from __future__ import annotations

import gc
import time
from typing import Callable

import numpy as np
from bench_eager import tinyedu_mlp_step
from timing import load

from tinyedu import Tensor


def fastest_block(run: Callable[[], object], blocks: int, calls: int) -> float:
    """Seconds of this thread's CPU time per call: the fastest of `blocks` blocks of `calls` calls."""
    for _ in range(3):
        run()
    best = float("inf")
    for _ in range(blocks):
        start = time.thread_time()
        for _ in range(calls):
            run()
        best = min(best, (time.thread_time() - start) / calls)
    return best


if __name__ == "__main__":
    gc.collect()
    gc.freeze()  # (the collector's rare full passes would land on a random block)
    print(f"[{load()}]")
    step = tinyedu_mlp_step()
    print(f"eager MLP step (schedule cache on)       {fastest_block(step, 15, 20) * 1e3:8.3f} ms")
    rng = np.random.default_rng(0)
    for n, calls in ((256, 40), (1024, 3)):
        a_np, b_np = (rng.standard_normal((n, n)).astype(np.float32) for _ in range(2))
        a, b = Tensor(a_np).realize(), Tensor(b_np).realize()
        reference = fastest_block(lambda a_np=a_np, b_np=b_np: a_np @ b_np, 9, calls)
        ours = fastest_block(lambda a=a, b=b: (a @ b).numpy(), 9, calls)
        print(f"matmul {n}x{n} end to end: numpy {reference * 1e3:8.3f} ms, tinyedu {ours * 1e3:8.3f} ms "
              f"= {ours / reference:4.2f}x numpy")
