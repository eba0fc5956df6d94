"""Small shared helpers: environment flags, products, global counters.

Everything here is dependency-free so that every stage can import it without pulling in another.
"""

from __future__ import annotations

import math
import os
import threading
from typing import Any, Callable, Iterable, Sequence, TypeVar

T = TypeVar("T")


def getenv(key: str, default: int | str = 0) -> int | str:
    """An environment flag, typed like its default (`DEBUG=2` gives the int 2).

    Read from os.environ on every call, except while a realize runs (see `Settings`), so a notebook or
    a test can change a flag while running: it takes effect at the next realize.
    """
    value = SETTINGS.read(key) if SETTINGS.depth else os.environ.get(key, "")
    if value == "":
        return default
    try:
        return type(default)(value)
    except ValueError:
        raise ValueError(f"environment variable {key}={value!r}: expected {type(default).__name__} "
                         f"(for example {key}={default})") from None


class Settings(threading.local):
    """The environment's values, read once per key while a realize runs (`with SETTINGS:`).

    A realize asks for about fifteen flags (DEBUG, FUSION, NOOPT, CC, ...), and os.environ.get costs
    about a microsecond for a flag that is not set. So while a realize runs, each value read is kept;
    on entering the next realize they are kept still only if os.environ is unchanged since (checked
    by comparing its values with a copy of them: one dictionary comparison, done in C, of os.environ's
    own dict `_data`). A flag changed between two realizes is seen by the second one; outside a
    realize every call reads os.environ, as before. Each thread has its own (a thread that is not
    realizing reads os.environ, whatever other threads do)."""

    def __init__(self) -> None:
        self.depth = 0                       # realizes running (one inside another: assign's)
        self.values: dict[str, str] = {}     # key -> value ("" when not set), read this realize
        self.environ: dict | None = None     # a copy of os.environ's dict when `values` were read

    def __enter__(self) -> None:
        if self.depth == 0:
            current = getattr(os.environ, "_data", None)  # (CPython's, and PyPy's: None elsewhere)
            if current is None or current != self.environ:
                self.values.clear()
                self.environ = None if current is None else dict(current)
        self.depth += 1

    def __exit__(self, *exc: object) -> None:
        self.depth -= 1

    def read(self, key: str) -> str:
        value = self.values.get(key)
        if value is None:
            value = os.environ.get(key, "")
            if self.environ is not None:  # (without a copy to compare with, nothing is kept)
                self.values[key] = value
        return value


SETTINGS = Settings()


def debug_level() -> int:
    """DEBUG=n prints more as n grows (see the README)."""
    return int(getenv("DEBUG", 0))


def graph_enabled() -> bool:
    """True when GRAPH=1 asks every realized schedule to be drawn."""
    return getenv("GRAPH", 0) != 0


def postorder(roots: Sequence[T], children: Callable[[T], Iterable[T]]) -> list[T]:
    """Every node reachable from `roots` once, each after all the nodes `children` leads to.

    This is the one graph walk of the library: the lazy graph is computed in this order (sources
    before users), a kernel AST is rebuilt and linearized in it, and backward walks it reversed.
    Nodes are told apart by identity, so a node shared by two users is listed once. Children are
    visited left to right as `children` gives them. It keeps its own stack (the path from a root, each
    node with an iterator over the children it has still to visit) instead of recursing,
    because Python's recursion limit (about 1000) is far below the depth of a long training graph.
    """
    order: list[T] = []
    seen: set[int] = set()
    for root in roots:
        if id(root) in seen:
            continue
        seen.add(id(root))
        stack = [(root, iter(children(root)))]  # each node on the path, with its children still to go
        while stack:
            node, todo = stack[-1]
            for child in todo:
                if id(child) not in seen:  # go down into the first child not yet walked
                    seen.add(id(child))
                    stack.append((child, iter(children(child))))
                    break
            else:  # every child is in `order` already: the node comes next
                stack.pop()
                order.append(node)
    return order


def prod(xs: Iterable[int]) -> int:
    """Product of integers; 1 for an empty shape, like numpy's size of a scalar."""
    return math.prod(xs)


def dedup(xs: Iterable) -> list:
    """Keep the first occurrence of each item, in order."""
    return list(dict.fromkeys(xs))


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


def cached_hash(self: Any) -> int:
    """__hash__ for a frozen dataclass, computed once and kept on the instance."""
    value = self.__dict__.get("_hash")
    if value is None:
        value = hash(tuple(getattr(self, name) for name in self.__dataclass_fields__))
        object.__setattr__(self, "_hash", value)
    return value
