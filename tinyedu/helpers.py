"""Small shared helpers: environment flags, products, timing, global counters.

Everything here is dependency-free so that every stage can import it without pulling in another.
"""

from __future__ import annotations

import functools
import math
import os
import time
from typing import Iterable


@functools.cache
def getenv(key: str, default: int | str = 0) -> int | str:
    """Read an environment flag, typed like its default (so `DEBUG=2` gives the int 2)."""
    value = os.environ.get(key)
    if value is None:
        return default
    return type(default)(value)


def debug_level() -> int:
    """The current DEBUG level (read every call, so tests and notebooks can change it)."""
    return int(os.environ.get("DEBUG", "0") or 0)


def graph_enabled() -> bool:
    """True when GRAPH=1 asks every realized schedule to be drawn."""
    return os.environ.get("GRAPH", "0") not in ("", "0")


def prod(xs: Iterable[int]) -> int:
    """Product of integers; 1 for an empty shape, like numpy's size of a scalar."""
    return math.prod(xs)


def all_int(xs: Iterable[object]) -> bool:
    return all(isinstance(x, int) and not isinstance(x, bool) for x in xs)


def dedup(xs: Iterable) -> list:
    """Keep the first occurrence of each item, in order."""
    return list(dict.fromkeys(xs))


class Timing:
    """`with Timing("schedule "):` prints how long the block took (in ms)."""

    def __init__(self, prefix: str = "", enabled: bool = True):
        self.prefix, self.enabled = prefix, enabled

    def __enter__(self) -> "Timing":
        self.start = time.perf_counter_ns()
        return self

    def __exit__(self, *exc) -> None:
        self.elapsed_ns = time.perf_counter_ns() - self.start
        if self.enabled:
            print(f"{self.prefix}{self.elapsed_ns * 1e-6:.2f} ms")


class GlobalCounters:
    """Counts what the engine did since the last reset: kernels run, FLOPs, bytes moved, memory used."""

    kernel_count: int = 0
    global_ops: int = 0
    global_mem: int = 0
    time_sum_s: float = 0.0
    mem_used: int = 0   # bytes in device buffers right now (not reset: it is a gauge)
    mem_peak: int = 0   # the most mem_used has been since the last reset

    @staticmethod
    def reset() -> None:
        GlobalCounters.kernel_count = GlobalCounters.global_ops = GlobalCounters.global_mem = 0
        GlobalCounters.time_sum_s = 0.0
        GlobalCounters.mem_peak = GlobalCounters.mem_used


def flatten_args(args: tuple) -> tuple:
    """Accept both f(2, 3) and f((2, 3)), as PyTorch's shape arguments do."""
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        return tuple(args[0])
    return tuple(args)
