"""Chapter 12 (GPU kernels): reference solutions, and typical mistakes with the hint they get."""

from __future__ import annotations

from typing import Any

from tinyedu.codegen import gpu
from tinyedu.codegen.kernel import Kernel
from tinyedu.codegen.opts import Opt, OptOps
from tinyedu.core.uops import UOp, UOpBuilder, UOps
from tinyedu.exercises.hooks import plug
from tinyedu.exercises.registry import Mistake

# --8<-- [start:combine_groups]
combine_groups = gpu.combine_groups
# --8<-- [end:combine_groups]


# --8<-- [start:place_barriers]
def place_barriers(uops: list[UOp]) -> list[UOp]:
    def is_shared(u: UOp, op: UOps) -> bool:
        return u.op is op and u.src[0].op is UOps.DEFINE_SHARED

    placed: list[UOp] = []
    written, read = False, False   # shared memory written / read since the last barrier
    after_write = 0                # where the last shared write ended: a barrier for it goes there
    loops: list[list[Any]] = []    # the open loops, each [RANGE, does its body write shared memory?]
    for u in uops:
        if (is_shared(u, UOps.LOAD) and written) or (is_shared(u, UOps.STORE) and read):
            # a read after another thread's write (or a write after its read): wait in between, right
            # after the write, outside any IF or inner loop opened since (every thread must reach it)
            at = after_write if is_shared(u, UOps.LOAD) else len(placed)
            placed.insert(at, UOp(UOps.BARRIER, None, ()))
            written, read = False, False
        if u.op is UOps.ENDRANGE and loops.pop()[1] and read:
            # the next iteration writes what this one read: everyone finishes reading first
            placed.append(UOp(UOps.BARRIER, None, ()))
            written, read = False, False
        placed.append(u)
        if u.op is UOps.RANGE:
            loops.append([u, False])
        if is_shared(u, UOps.STORE):
            written, after_write = True, len(placed)
            for loop in loops:
                loop[1] = True
        read = read or is_shared(u, UOps.LOAD)
    return placed
# --8<-- [end:place_barriers]


# --8<-- [start:gpu_opts]
def gpu_opts(kernel: Kernel) -> list[Opt]:
    rows, cols = kernel.full_shape
    # lid0 along the columns (the output's contiguous axis): up to a warp of neighbours, coalesced
    across = max(d for d in range(1, min(cols, 32) + 1) if cols % d == 0)
    # then enough rows that the workgroup is whole warps (a multiple of 32 threads)
    down = next((d for d in range(1, rows + 1) if rows % d == 0 and across * d % 32 == 0), rows)
    opts = [Opt(OptOps.GLOBAL, 0, 0), Opt(OptOps.GLOBAL, 1, 0)]
    if down > 1:
        opts.append(Opt(OptOps.LOCAL, 0, down))   # LOCAL'd first, so it is lid1
    return opts + [Opt(OptOps.LOCAL, 1, across)]  # LOCAL'd last: the innermost thread axis, lid0
# --8<-- [end:gpu_opts]


def _combine_without_barrier(k: Kernel, b: UOpBuilder, loops: dict, dtype: Any, partials: dict) -> dict:
    with plug(UOpBuilder, "barrier", lambda self: None):
        return combine_groups(k, b, loops, dtype, partials)


def _combine_closing_the_if(k: Kernel, b: UOpBuilder, loops: dict, dtype: Any, partials: dict) -> dict:
    combined = combine_groups(k, b, loops, dtype, partials)
    b.close_if()
    return combined


def _combine_max_from_zero(k: Kernel, b: UOpBuilder, loops: dict, dtype: Any, partials: dict) -> dict:
    with plug(gpu, "lowest_value", lambda dtype: 0):
        return combine_groups(k, b, loops, dtype, partials)


def _barrier_everywhere(uops: list[UOp]) -> list[UOp]:
    placed = []
    for u in uops:
        placed.append(u)
        if u.op is UOps.STORE and u.src[0].op is UOps.DEFINE_SHARED:
            placed.append(UOp(UOps.BARRIER, None, ()))
    return place_barriers(placed)


def _combine_one_partial(k: Kernel, b: UOpBuilder, loops: dict, dtype: Any, partials: dict) -> dict:
    """The combine's loop over the GROUP threads' slots cut to one slot: thread 0's partial only."""
    open_range = UOpBuilder.open_range

    def first_only(self: UOpBuilder, name: str, size: int, threads: int = 1) -> UOp:
        return open_range(self, name, 1 if name.startswith("group") else size, threads)

    with plug(UOpBuilder, "open_range", first_only):
        return combine_groups(k, b, loops, dtype, partials)


def _barrier_in_the_k_loop(uops: list[UOp]) -> list[UOp]:
    """The right barriers, except the one after the tile's use, moved into the loop that reads the
    tiles: as many BARRIER UOps, no race, but one wait per step of the loop instead of one per tile."""
    placed = place_barriers(uops)
    for i, u in enumerate(placed):
        if u.op is UOps.BARRIER and i > 0 and placed[i - 1].op is UOps.ENDRANGE:
            return placed[:i - 1] + [u, placed[i - 1]] + placed[i + 1:]
    return placed


MISTAKES = [
    Mistake("12.group_combine", _combine_without_barrier, "race on shared0", "no barrier after the writes"),
    Mistake("12.group_combine", _combine_closing_the_if, "Leave exactly one IF open", "closed the IF"),
    Mistake("12.group_combine", _combine_max_from_zero, "lowest value", "a max starting from 0"),
    Mistake("12.group_combine", _combine_one_partial, "read one partial", "only thread 0's partial"),
    Mistake("12.group_combine", "combine", "expected a function"),
    Mistake("12.barriers", lambda uops: uops, "race on shared0", "no barrier at all"),
    Mistake("12.barriers", _barrier_everywhere, "suffice", "a barrier after every shared write"),
    Mistake("12.barriers", _barrier_in_the_k_loop, "executed", "the end-of-tile barrier inside the k loop"),
    Mistake("12.barriers", lambda uops: uops[1:], "the same UOps in the same order", "dropped a UOp"),
    Mistake("12.barriers", lambda uops: "BARRIER", "must return a list of UOps"),
    Mistake("12.local_sizes", lambda k: [Opt(OptOps.GLOBAL, 0, 0), Opt(OptOps.GLOBAL, 1, 0)],
            "not a multiple of 32", "GLOBAL only: one thread per workgroup"),
    Mistake("12.local_sizes", lambda k: [], "still a loop", "no opts"),
    Mistake("12.local_sizes", lambda k: [Opt(OptOps.GLOBAL, 0, 0), Opt(OptOps.GLOBAL, 1, 0),
                                         Opt(OptOps.LOCAL, 0, 32)], "coalesced", "lid0 down the rows"),
    Mistake("12.local_sizes", lambda k: [Opt(OptOps.GLOBAL, 0, 0), Opt(OptOps.GLOBAL, 1, 0),
                                         Opt(OptOps.LOCAL, 0, 8), Opt(OptOps.LOCAL, 1, 256)],
            "at most 1024", "2048 threads"),
    Mistake("12.local_sizes", lambda k: "LOCAL", "must return a list of Opt"),
]
