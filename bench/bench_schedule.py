"""Stage 2 benchmark: how scheduling time grows with graph size, and what fusion saves in memory traffic.

Run: .venv/bin/python bench/bench_schedule.py   (not a test; prints a table)

1. Scheduling overhead: time `create_schedule` on graphs of 10 ... 10,000 lazy nodes (a chain of
   mixed elementwise ops and views over a few inputs). It should grow about linearly: the per-node
   cost (last column) should stay roughly flat.
2. Memory traffic: bytes read + written by the kernels (GlobalCounters.global_mem) for the
   notebook's examples, with fusion and with FUSION=0 (one kernel per op, like an eager framework).
"""

from __future__ import annotations

import statistics
import time

import numpy as np

from tinyedu import Tensor
from tinyedu.core.helpers import GlobalCounters
from tinyedu.engine.realize import run_schedule
from tinyedu.engine.schedule import create_schedule


def chain(n_nodes: int) -> Tensor:
    """A graph of about n_nodes lazy nodes: elementwise ops with a view every few steps."""
    rng = np.random.default_rng(0)
    xs = [Tensor(rng.standard_normal((16, 16)).astype(np.float32)).realize() for _ in range(4)]
    t = xs[0]
    for i in range(n_nodes // 2):
        t = t * xs[i % 4] if i % 3 else (t + xs[i % 4]).T
    return t


def bench_scheduling() -> None:
    print(f"{'nodes':>8} {'schedule ms':>12} {'kernels':>8} {'us/node':>8}")
    for n in (10, 100, 1_000, 10_000):
        t = chain(n)
        times = []
        for _ in range(5):
            start = time.perf_counter()
            schedule = create_schedule([t.lazydata])
            times.append(time.perf_counter() - start)
        ms = statistics.median(times) * 1e3
        kernels = len(schedule)
        print(f"{n:8d} {ms:12.2f} {kernels:8d} {ms * 1e3 / n:8.2f}")


def examples() -> dict[str, callable]:
    rng = np.random.default_rng(0)
    a, b, c = (Tensor(rng.standard_normal((256, 256)).astype(np.float32)).realize() for _ in range(3))

    def softmax() -> Tensor:
        e = (a - a.max(1, keepdim=True)).exp()
        return e / e.sum(1, keepdim=True)

    return {
        "((a*b)+c).relu().sum()": lambda: ((a * b) + c).relu().sum(),
        "softmax(a, axis=1)": softmax,
        "a @ b": lambda: a @ b,
        "mlp layer relu(a@b + c)": lambda: (a @ b + c.shrink(((0, 1), None))).relu(),
    }


def bench_traffic() -> None:
    print(f"\n{'example':28} {'kernels':>8} {'MB moved':>9} | {'FUSION=0':>8} {'MB moved':>9} | {'saved':>6}")
    for name, make in examples().items():
        row = []
        for fuse in (True, False):
            t = make()
            GlobalCounters.reset()
            run_schedule(create_schedule([t.lazydata], fuse=fuse))
            row.append((GlobalCounters.kernel_count, GlobalCounters.global_mem / 1e6))
        (k1, m1), (k0, m0) = row
        print(f"{name:28} {k1:8d} {m1:9.2f} | {k0:8d} {m0:9.2f} | {m0 / m1:5.1f}x")


if __name__ == "__main__":
    bench_scheduling()
    bench_traffic()
