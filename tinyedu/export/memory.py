"""The memory plan: where each intermediate buffer of an exported program lives.

Run one buffer per kernel output and a forward pass needs the sum of all their sizes. But a buffer
is only needed from the kernel that writes it to the last kernel that reads it; after that its
memory can hold a later buffer. Planning is packing intervals: each buffer is a rectangle, its
lifetime (first call, last call) along one axis and its bytes along the other, to be placed at an
offset in one arena so that no two rectangles overlap. Finding the smallest arena is NP-hard in
general; the greedy rule here (the largest buffer first, each at the lowest offset where it does
not overlap a buffer alive at the same time) is the one inference runtimes such as TensorFlow Lite
use, and it usually reaches the lower bound, the most memory alive during any one call, or comes
close to it (`MemoryPlan.peak` computes that bound; the tests compare the two).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

ALIGNMENT = 64  # bytes: every buffer starts on a cache line (and on any vector's boundary)


@dataclass(frozen=True)
class Allocation:
    offset: int  # bytes from the start of the arena
    nbytes: int
    first: int   # the call that writes the buffer
    last: int    # the last call that reads it

    def overlaps_in_time(self, other: "Allocation") -> bool:
        return self.first <= other.last and other.first <= self.last

    def overlaps_in_memory(self, other: "Allocation") -> bool:
        return self.offset < other.offset + other.nbytes and other.offset < self.offset + self.nbytes


@dataclass
class MemoryPlan:
    allocations: dict[Any, Allocation]
    size: int                          # bytes of the arena

    @property
    def unplanned(self) -> int:
        """Bytes with one buffer per kernel output, nothing shared."""
        return sum(a.nbytes for a in self.allocations.values())

    def peak(self) -> int:
        """The lower bound: the most bytes alive during any one call."""
        calls = {c for a in self.allocations.values() for c in (a.first, a.last)}
        alive = self.allocations.values()
        return max((sum(a.nbytes for a in alive if a.first <= c <= a.last) for c in calls), default=0)


def _aligned(n: int) -> int:
    return -(-n // ALIGNMENT) * ALIGNMENT


# --8<-- [start:plan]
def place_buffers(buffers: dict[Any, tuple[tuple[int, int], int]]) -> dict[Any, int]:
    """An offset in the arena for each buffer, given as key -> ((first call, last call), bytes).

    Two buffers may share bytes only if their lifetimes do not overlap: a buffer is alive from the
    call that writes it to the last call that reads it, both included. (Chapter 11's exercise plugs
    a learner's version in here: plan_memory looks this name up.)
    """
    # the largest first: small buffers then fill the gaps the large ones leave
    order = sorted(buffers, key=lambda key: (-buffers[key][1], buffers[key][0][0]))
    placed: dict[Any, Allocation] = {}
    for key in order:
        (first, last), nbytes = buffers[key]
        me = Allocation(0, nbytes, first, last)
        # only the buffers alive at the same time as this one are in its way
        in_the_way = sorted((a for a in placed.values() if a.overlaps_in_time(me)), key=lambda a: a.offset)
        offset = 0
        for other in in_the_way:  # the lowest gap that is big enough
            if offset + nbytes <= other.offset:
                break
            offset = max(offset, _aligned(other.offset + other.nbytes))
        placed[key] = Allocation(offset, nbytes, first, last)
    return {key: a.offset for key, a in placed.items()}
# --8<-- [end:plan]


def plan_memory(buffers: dict[Any, tuple[tuple[int, int], int]]) -> MemoryPlan:
    """The plan: place_buffers' offsets, and the arena size they need."""
    offsets = place_buffers(buffers)
    allocations = {key: Allocation(offsets[key], nbytes, first, last)
                   for key, ((first, last), nbytes) in buffers.items()}
    size = max((_aligned(a.offset + a.nbytes) for a in allocations.values()), default=0)
    return MemoryPlan(allocations, size)


def check_plan(plan: MemoryPlan) -> None:
    """Raise if two buffers alive at the same time share a byte (what the tests assert)."""
    items = list(plan.allocations.items())
    for i, (ka, a) in enumerate(items):
        if a.offset % ALIGNMENT or a.offset + a.nbytes > plan.size:
            raise AssertionError(f"buffer {ka} at {a.offset} (+{a.nbytes}) is misaligned or outside the "
                                 "arena")
        for kb, b in items[i + 1:]:
            if a.overlaps_in_time(b) and a.overlaps_in_memory(b):
                raise AssertionError(f"buffers {ka} and {kb} are alive together and overlap: {a} {b}")
