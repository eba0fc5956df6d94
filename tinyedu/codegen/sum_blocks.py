"""Why a long float sum is split into blocks, and how the blocks are chosen.

A float32 holds 24 bits of mantissa. One accumulator that adds n values loses up to n/2 units in
the last place of the total, and once the total is 2^24 times larger than a value, adding that
value changes nothing: a single running total of 10^8 ones stops at 16777216 = 2^24. Summing in
*blocks* fixes both: each block of at most SUM_BLOCK elements gets a fresh accumulator, and its
total is added to the level above, which adds at most SUM_FAN block totals before its own total
moves up again. A sum of n values then runs through about log_SUM_FAN(n / SUM_BLOCK) + 1 levels,
each adding few values of similar size, so its error bound is

    |computed - exact| <= (b + log2(lanes) + f_1 + ... + f_L + log2(f_0)) * 2^-24 * sum(|x|)

where b is the longest run one accumulator adds (SUM_BLOCK, divided by the lanes of an optimized
kernel, whose lanes are then added pairwise), f_k the number of totals level k adds (at most
SUM_FAN), and f_0 the outermost level's, added pairwise. For 2^27 values on C (64 lanes, levels
of 64, 64 and 8) that is 64 + 6 + 64 + 8 + 6 = 148 instead of 2^27; in practice the roundings
cancel and the total is within a few units in the last place of the exact sum (torch, which sums
in a cascade of its own, is within about one).

The blocks depend only on the reduce's sizes, never on the device's threads: threads share the
outermost level's blocks (tinyedu/codegen/local_arrays.py), and the totals are combined in the
same order however many threads ran, so a sum is bit-identical with THREADS=1, 2, 4 or 8.

`plan(sizes)` gives, for the reduce axes of a kernel, each axis's pieces; the Kernel splits its
axes into them (tinyedu/codegen/kernel.py) and the linearizer gives each level its accumulator.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tinyedu.core.helpers import prod

SUM_BLOCK = 4096   # elements one accumulator adds before its total moves up a level
SUM_FAN = 64       # block totals one level adds (a prime factor up to SUM_BLOCK may stand alone)
VECTOR_UNIT = 64   # the vector width times the accumulators an optimized kernel likes to split off


@dataclass(frozen=True)
class AxisPlan:
    """One reduce axis: `size` (the axis padded with zeros to it, if larger than it was) split
    into `pieces` (outermost first); the first `levels` pieces are block loops (levels)."""

    size: int
    pieces: tuple[int, ...]
    levels: int


def plan(sizes: tuple[int, ...]) -> list[AxisPlan] | None:
    """The blocks of a sum over axes of these sizes (innermost last); None when it is short.

    The innermost axes whose product fits in SUM_BLOCK are the block; the axis that crosses
    SUM_BLOCK is split into (levels..., the part inside the block); the axes outside it are levels.
    """
    if prod(sizes) <= SUM_BLOCK:
        return None
    inside, crossing = 1, len(sizes) - 1
    while inside * sizes[crossing] <= SUM_BLOCK:
        inside *= sizes[crossing]
        crossing -= 1
    plans = []
    for axis, size in enumerate(sizes):
        if axis > crossing:
            plans.append(AxisPlan(size, (size,), 0))
            continue
        limit = SUM_BLOCK // inside if axis == crossing else 1  # an outer axis is all levels
        unit = math.gcd(size, VECTOR_UNIT) if axis == len(sizes) - 1 else 1
        padded, part = _block_part(size, limit, unit)
        fans = _fans(padded // part, SUM_BLOCK)
        plans.append(AxisPlan(padded, tuple(fans) + ((part,) if part > 1 else ()), len(fans)))
    return plans


def _block_part(size: int, limit: int, unit: int) -> tuple[int, int]:
    """(padded size, the part of it inside the block, up to `limit` elements and a multiple of the
    vector unit). Preferred: a large divisor of `size` whose quotient splits into levels of at most
    SUM_FAN. Else, when that adds little work, `size` padded with zeros to a multiple of `limit` that
    does. Else levels may be prime factors up to SUM_BLOCK; padding is the last resort."""
    good = _part(size, limit, unit, SUM_FAN)
    if good is not None and good >= limit // 16:
        return size, good
    padded = _padded(size, limit, SUM_FAN)
    if padded - size <= size // 16:
        return padded, limit
    fair = _part(size, limit, unit, SUM_BLOCK)
    return (size, fair) if fair is not None else (_padded(size, limit, SUM_BLOCK), limit)


def _part(size: int, limit: int, unit: int, most: int) -> int | None:
    """The largest divisor of `size` up to `limit`, a multiple of `unit`, that leaves a quotient
    `_fans` splits with levels of at most `most`."""
    return next((part for part in range(min(limit, size), 0, -1) if size % part == 0 and part % unit == 0
                 and _fans(size // part, most) is not None), None)


def _padded(size: int, limit: int, most: int) -> int:
    """The smallest multiple of `limit` from `size` on whose quotient `_fans` splits."""
    padded = -(-size // limit) * limit
    while _fans(padded // limit, most) is None:
        padded += limit
    return padded


def _fans(count: int, most: int) -> list[int] | None:
    """`count` block totals as levels of at most SUM_FAN each, largest first (the outermost level
    is the one threads share); a prime factor above SUM_FAN may be a level of its own if it is at
    most `most`. None when `count` has a larger prime factor."""
    fans = []
    while count > 1:
        fan = next((d for d in range(min(SUM_FAN, count), 1, -1) if count % d == 0), None)
        if fan is None:
            fan = _smallest_factor(count)
            if fan > most:
                return None
        fans.append(fan)
        count //= fan
    return fans


def _smallest_factor(n: int) -> int:
    for d in range(2, math.isqrt(n) + 1):
        if n % d == 0:
            return d
    return n
