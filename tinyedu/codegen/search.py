"""BEAM search over opts: try candidate opt lists, time each on the device, keep the fastest.

The heuristics (tinyedu/codegen/heuristics.py) guess; the search measures. Starting from the
kernel as written (and the heuristics' choice, so the search never does worse than it), each round
extends each of the `width` best opt lists by every opt that applies (`candidate_opts`), times
every new kernel, and keeps the `width` fastest. It stops when a round finds nothing faster.

Timing needs a device, which sits below this stage: the engine passes `time_opts(opts)` (seconds,
or inf when the kernel fails to build or run), see tinyedu/engine/beam.py, which also caches the
winner on disk.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable

from tinyedu.codegen.kernel import AxisKind, Kernel
from tinyedu.codegen.opts import Opt, OptError, OptOps, apply_opt

UPCAST_AMOUNTS = (2, 3, 4, 8, 16)
TILE_AMOUNTS = (8, 16, 32, 64)
THREAD_AMOUNTS = (4, 8, 16, 32, 64, 128, 256)   # GPU: LOCAL and GROUP sizes
MAX_ROUNDS = 8


def candidate_opts(kernel: Kernel, threads: int) -> list[Opt]:
    """Every opt that applies to `kernel` as it is now (checked by applying it to a copy)."""
    k, actions = kernel, []
    loads = [p for p in range(1, len(k.bufs)) if k.bufs[p].__class__.__name__ == "MemBuffer"]
    for axis, kind in enumerate(k.kinds):
        if kind is AxisKind.LOOP:
            actions += [Opt(OptOps.UPCAST, axis, n) for n in UPCAST_AMOUNTS]
            actions += [Opt(OptOps.TILE, axis, n) for n in TILE_AMOUNTS]
            actions += [Opt(OptOps.SWAP, axis, other) for other in range(axis + 1, len(k.kinds))
                        if k.kinds[other] is AxisKind.LOOP]
        if kind is AxisKind.REDUCE:
            actions += [Opt(OptOps.UNROLL, axis, n) for n in UPCAST_AMOUNTS]
            actions += [Opt(OptOps.SWAP, axis, other) for other in range(axis + 1, len(k.kinds))
                        if k.kinds[other] is AxisKind.REDUCE]
        if kind in (AxisKind.LOOP, AxisKind.REDUCE, AxisKind.BLOCK) and threads > 1:
            actions.append(Opt(OptOps.THREAD, axis, threads))  # a long sum: on its outermost level
        if kind in (AxisKind.LOOP, AxisKind.REDUCE):
            actions += [Opt(OptOps.PACK, axis, p) for p in loads]
        if k.gpu is not None:  # GPU kernels: onto the grid, onto a workgroup's threads
            if kind is AxisKind.LOOP:
                actions.append(Opt(OptOps.GLOBAL, axis, 0))
            if kind is AxisKind.REDUCE:  # tiles of the reduce, to stage in shared memory (PACK)
                actions += [Opt(OptOps.TILE, axis, n) for n in (8, 16, 32)]
            if kind in (AxisKind.GLOBAL, AxisKind.REDUCE):
                op = OptOps.LOCAL if kind is AxisKind.GLOBAL else OptOps.GROUP
                actions += [Opt(op, axis, n) for n in THREAD_AMOUNTS]
    valid = []
    for opt in actions:
        try:
            apply_opt(k.copy(), opt)
            valid.append(opt)
        except OptError:
            pass
    return valid


@dataclass
class SearchResult:
    opts: list[Opt]
    seconds: float                    # the kernel's time with these opts
    baseline: float                   # the kernel's time as written
    search_seconds: float             # how long the search took
    tried: int                        # kernels timed
    cached: bool = False              # read from the disk cache (no search ran)
    history: list[tuple[list[Opt], float]] = field(default_factory=list)  # best per round


# --8<-- [start:beam]
def beam_search(kernel: Kernel, time_opts: Callable[[list[Opt]], float], width: int, threads: int,
                start: list[list[Opt]] | None = None, budget: float = math.inf) -> SearchResult:
    """The fastest opt list found, keeping the `width` best candidates each round (and stopping
    after the round that passes `budget` seconds)."""
    began = time.perf_counter()
    timed: dict[tuple[Opt, ...], float] = {}

    def measure(opts: list[Opt]) -> float:
        if tuple(opts) not in timed:
            timed[tuple(opts)] = time_opts(opts)
        return timed[tuple(opts)]

    baseline = measure([])
    beam = sorted(([], *(s for s in (start or []) if s)), key=measure)[:width]
    best = beam[0]
    history = [(best, measure(best))]
    for _ in range(MAX_ROUNDS):
        if time.perf_counter() - began > budget:
            break
        children = []
        for opts in beam:
            k = kernel.copy()
            for opt in opts:
                apply_opt(k, opt)
            children += [opts + [opt] for opt in candidate_opts(k, threads)]
        if not children:
            break
        ranked = sorted((c for c in children if math.isfinite(measure(c))), key=measure)
        if not ranked or measure(ranked[0]) >= measure(best):
            break
        beam, best = ranked[:width], ranked[0]
        history.append((best, measure(best)))
    seconds = time.perf_counter() - began
    return SearchResult(best, measure(best), baseline, seconds, len(timed), history=history)
# --8<-- [end:beam]
