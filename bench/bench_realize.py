"""From "the graph is built" to "numbers are back": the eager MLP step and matmuls read back with numpy().

Run: THREADS=1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 .venv/bin/python bench/bench_realize.py

Rows: the eager MLP 784-256-10 batch-128 SGD step of bench_eager.py (schedule cache on), and
`(a @ b).numpy()` for 256x256 and 1024x1024 inputs already in memory, next to numpy's `a @ b`.
Before and after them, a machine check: the same numpy matmul and a pure-Python loop, which tell a
run that the machine slowed down as a whole (see machine_check) from one where tinyedu did.
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


def python_loop() -> int:
    """Pure Python, no tinyedu and no numpy: 20,000 multiply-adds."""
    total = 0
    for i in range(20_000):
        total += i * i
    return total


def machine_check() -> str:
    """The CPU time of work that involves no tinyedu (a numpy 256x256 matmul, a pure-Python loop).

    On this kind of shared VM the whole process sometimes runs ~1.3-1.6x slower for seconds at a
    time, numpy and plain Python alike (a probe pinned to each vCPU sees it with the vCPU to itself:
    no involuntary context switch, no page fault). Printed before and after the rows: a run whose
    figures are all higher, these included, measured the machine, not tinyedu."""
    rng = np.random.default_rng(1)
    a, b = (rng.standard_normal((256, 256)).astype(np.float32) for _ in range(2))
    return (f"numpy 256x256 matmul {fastest_block(lambda: a @ b, 5, 20) * 1e3:.3f} ms, "
            f"pure-Python loop {fastest_block(python_loop, 5, 10) * 1e3:.3f} ms")


if __name__ == "__main__":
    gc.collect()
    gc.freeze()  # (the collector's rare full passes would land on a random block)
    print(f"[{load()}]")
    print(f"machine check before: {machine_check()}")
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
    print(f"machine check after:  {machine_check()}")
