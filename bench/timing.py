"""What the benchmarks share: the --quick flag, the frameworks they compare against, and timing.

Each benchmark is a script (`python bench/bench_x.py`), so this folder is on its import path.
"""

from __future__ import annotations

import importlib
import os
import statistics
import sys
import time
from types import ModuleType
from typing import Callable

QUICK = "--quick" in sys.argv  # fewer repeats and smaller sizes


def optional(name: str) -> ModuleType | None:
    """The module `name`, or None where it is not installed (its column is then left out)."""
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def load() -> str:
    """The load average (1, 5, 15 minutes): printed beside every table, since the machine may be shared."""
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def median_time(run: Callable[[], object], repeat: int, warmup: int = 3) -> float:
    """Median seconds of `run()` over `repeat` calls, after `warmup` calls (which compile, fill the
    caches and record a JIT): the typical call, robust to a few disturbed ones."""
    for _ in range(warmup):
        run()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def best_time(run: Callable[[], object], repeat: int, warmup: int = 1) -> float:
    """Best seconds of `run()` over `repeat` calls after `warmup` calls: the call least disturbed by
    the rest of the machine."""
    for _ in range(warmup):
        run()
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best
