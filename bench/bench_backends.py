"""Stage 6 benchmark: the same kernels on C, LLVM and NEON, next to numpy, in one run.

Run: .venv/bin/python bench/bench_backends.py [--quick]      (not a test; prints a table)

Each row is one kernel (an elementwise chain, a row sum, a full sum, a matmul), run through the
engine on each device with the device's own heuristics, timed as the kernels alone (GlobalCounters,
after a warm-up call that compiles). Every device runs on one thread (THREADS=1: LLVM IR has no
OpenMP, and on a shared machine waiting threads distort the rest); C with every core is shown
beside it. Ratios are device / C on one thread, so > 1 means slower than C. Then the time to
compile one new kernel on each device.

Read the NEON column for what it is on an x86-64 machine: aarch64 code emulated by qemu-user,
typically tens of times slower than native, so it measures the emulator. On an arm64 machine it
is native and comparable.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from typing import Callable

import numpy as np

from tinyedu import Device, Tensor
from tinyedu.core.helpers import GlobalCounters
from tinyedu.runtime.device import DeviceUnavailable

QUICK = "--quick" in sys.argv
REPEAT = 3 if QUICK else 5
N = 1 << (20 if QUICK else 22)
M = 256 if QUICK else 512


def available(device: str) -> bool:
    try:
        Device[device]
        return True
    except DeviceUnavailable as missing:
        print(f"({device} skipped: {missing})")
        return False


def kernel_seconds(build: Callable[[str], Tensor], device: str) -> float:
    build(device).realize()  # compile
    times = []
    for _ in range(REPEAT):
        GlobalCounters.reset()
        build(device).realize()
        times.append(GlobalCounters.time_sum_s)
    return statistics.median(times)


def main() -> None:
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal(N).astype(np.float32), rng.standard_normal(N).astype(np.float32)
    a, b = rng.standard_normal((M, M)).astype(np.float32), rng.standard_normal((M, M)).astype(np.float32)
    rows = x.reshape(-1, 1024)
    workloads: dict[str, tuple[Callable[[str], Tensor], Callable[[], object]]] = {
        f"x*y+1 relu  ({N:,})": (lambda d: ((Tensor(x, device=d) * Tensor(y, device=d)) + 1).relu(),
                                 lambda: np.maximum(x * y + 1, 0)),
        f"row sums    ({rows.shape[0]}x1024)": (lambda d: Tensor(rows, device=d).sum(1), lambda: rows.sum(1)),
        f"full sum    ({N:,})": (lambda d: Tensor(x, device=d).sum(), lambda: x.sum()),
        f"matmul      ({M}x{M})": (lambda d: Tensor(a, device=d) @ Tensor(b, device=d), lambda: a @ b),
    }
    devices = [d for d in ("C", "LLVM", "NEON") if available(d)]
    print(f"kernel time in ms (median of {REPEAT}), one thread; ratio = device / C. The machine may be "
          "loaded: read the ratios.")
    names = " ".join(f"{d:>8s} {'/C':>6s}" for d in devices[1:])
    print(f"{'kernel':34s} {'numpy':>8s} {'C all':>8s} {'C':>8s} {names}")
    for name, (build, numpy_run) in workloads.items():
        start = time.perf_counter()
        for _ in range(REPEAT):
            numpy_run()
        numpy_ms = (time.perf_counter() - start) / REPEAT * 1e3
        c_all = kernel_seconds(build, "C")
        os.environ["THREADS"] = "1"
        c = kernel_seconds(build, "C")
        cells = [f"{name:34s} {numpy_ms:8.2f} {c_all * 1e3:8.2f} {c * 1e3:8.2f}"]
        for device in devices[1:]:
            t = kernel_seconds(build, device)
            cells.append(f"{t * 1e3:8.2f} {t / c:6.1f}")
        del os.environ["THREADS"]
        print(" ".join(cells))
    print("\ncompile one new kernel (ms):")
    for device in devices:
        value = (time.time_ns() % 10**9) / 7  # a constant no cache (in memory or on disk) has seen
        start = time.perf_counter()
        (Tensor(x[:1024], device=device) * value).realize()
        print(f"  {device:5s} {(time.perf_counter() - start) * 1e3:8.1f}")


if __name__ == "__main__":
    main()
