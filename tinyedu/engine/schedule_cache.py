"""The schedule cache: a graph with the same structure gets the same kernels, without scheduling it again.

An eager training step builds a new lazy graph every step, but the same one: the same ops on the same
shapes, dtypes and devices, only other buffers (new data, updated weights). Scheduling it (the fusion
rules, then one AST per kernel) gives the same kernels every time, so it is done once per structure:
the cache keeps, per structure, the kernel ASTs and which node of the graph each kernel writes and
reads, and a later graph of that structure gets its schedule by putting its own nodes in those places.

The key is everything the scheduler reads, and nothing else:

- each unrealized base, numbered in the order a walk of the graph first meets it: its op, its
  argument (reduce axes, a cast's dtype, a constant's value compared by its bits; host data only as
  "host data", as its values are copied at run time and never end up in a kernel), its dtype,
  device and ShapeTracker, and its sources, each as (which node, the view it is read through);
- each buffer already in memory that the graph reads: its device, dtype and tracker, whether it is a
  constant (kernels read those as literals, so their value is in the key), and *which* buffer it is
  up to renaming: a graph that reads one buffer twice is not one that reads two buffers (the fusion
  rules count the memory a kernel reads, and a kernel loads a buffer once);
- the outputs (rule 1), and the settings the rules depend on: FUSION, the kernel size bounds, and
  the rule functions (a chapter 03 exercise plugs its own in).

The nodes' identities, the buffers' contents and the host data are not in the key: the schedule
does not depend on them. Two graphs with equal keys are the same graph up to renaming nodes and
buffers, so they get the same schedule up to the same renaming, which is what a hit returns.
Turn the cache off with SCHEDULE_CACHE=0 (the tests compare both ways).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from tinyedu.core import schedule as core_schedule
from tinyedu.core.helpers import getenv
from tinyedu.core.ops import LazyOp, LoadOps, const_key
from tinyedu.engine import schedule
from tinyedu.engine.schedule import ScheduleItem
from tinyedu.lazy import LazyBuffer

MAX_ENTRIES = 256  # structures kept; a session that makes more starts over (rare, and cheap)


@dataclass(frozen=True)
class _Planned:
    """One kernel of a cached schedule, with graph nodes replaced by their place in the structure.

    A place is an index into the unrealized bases in the key's order (0, 1, ...) or, negative, into
    the buffers already in memory (-1, -2, ...). Loads (COPY, EMPTY, CONST) keep no AST: theirs
    carries the node's own argument (host data), so it is made again from the node."""

    ast: LazyOp | None
    out: int
    inputs: tuple[int, ...]
    reason: str


@dataclass
class _Structure:
    """A graph's key, and its nodes in the places the key numbers them."""

    key: tuple
    bases: list[LazyBuffer]   # the unrealized bases, as the walk first met them
    leaves: list[LazyBuffer]  # the bases already in memory, in the order they were first read


def enabled() -> bool:
    return getenv("SCHEDULE_CACHE", 1) != 0


class ScheduleCache:
    """Schedules by graph structure (see the module docstring), with hit and miss counts."""

    def __init__(self) -> None:
        self.cache: dict[tuple, list[_Planned]] = {}
        self.hits = self.misses = 0
        self.asts: dict[LazyOp, LazyOp] = {}  # one object per distinct kernel AST (see _shared_ast)

    def _shared_ast(self, item: ScheduleItem) -> ScheduleItem:
        """`item` with the AST object an equal kernel of an earlier structure had.

        A training step's first graphs differ from the later ones (no momentum yet, say), yet most
        of their kernels are the same. The realizer finds a kernel's program by its AST; when it is
        the very object the program was made for, the lookup stops at `is`, where an equal copy
        would be compared node by node, every step (a Transformer block step spent ~1 ms on it)."""
        if isinstance(item.ast.op, LoadOps):
            return item
        ast = self.asts.setdefault(item.ast, item.ast)
        return item if ast is item.ast else replace(item, ast=ast)

    def cache_clear(self) -> None:
        """Forget every schedule (tinyedu.exercises.hooks.clear_caches calls this when a piece is plugged)."""
        self.cache.clear()
        self.asts.clear()
        NUMBERS.clear()

    def schedule(self, outs: list[LazyBuffer]) -> list[ScheduleItem]:
        """The schedule of `outs`: create_schedule's, from the cache when the structure was seen."""
        fuse = schedule.fusion_enabled()
        if not enabled():
            return schedule.create_schedule(outs, fuse)
        if len(NUMBERS.by_id) > NUMBERS.LIMIT:  # (the keys of the cached schedules use its numbers)
            self.cache_clear()
        structure = graph_structure(outs, fuse)
        try:
            planned = self.cache.get(structure.key)
        except TypeError:  # an op argument that cannot be hashed: no key, so no cache
            return schedule.create_schedule(outs, fuse)
        if planned is not None:
            self.hits += 1
            nodes = structure.bases + structure.leaves[::-1]  # place k is nodes[k]: leaves count from the end
            return [_instantiate(p, nodes) for p in planned]
        self.misses += 1
        items = [self._shared_ast(item) for item in schedule.create_schedule(outs, fuse)]
        if len(self.cache) >= MAX_ENTRIES:  # (not NUMBERS: this key, about to be stored, uses them)
            self.cache.clear()
            self.asts.clear()
        places = {id(b): k for k, b in enumerate(structure.bases)}
        places.update({id(b): -1 - k for k, b in enumerate(structure.leaves)})
        self.cache[structure.key] = [_plan(item, places) for item in items]
        return items


# --8<-- [start:key]
def graph_structure(outs: list[LazyBuffer], fuse: bool) -> _Structure:
    """The key of the graph that computes `outs` (see the module docstring), with its nodes in order.

    One walk finds the unrealized bases and writes the key as it goes. The walk is the scheduler's
    (`schedule.bases_to_run`: depth first, sources left to right), but a node gets its place when the
    walk first *meets* it, not when its sources are done: so a source's place is known the moment
    the loop reads it, and its part of the key is written then, in the one pass over the sources
    (the scheduler's walk followed by a loop over its nodes, as before, took about 10 % longer).
    A node's own part is written when its sources are done, at its place in `parts`. Each source in
    memory is checked as the loop meets it, as the scheduler's walk checks a node's sources: the memory
    must not have been overwritten (assign) since the node was built. `schedule.check_versions` is
    called only to raise, with its message: called for every node that reads memory (most nodes of a
    training step), it was a good part of the time the key took."""
    bases: list[LazyBuffer] = []   # the unrealized bases, place k = bases[k] (0, 1, ... as first met)
    leaves: list[LazyBuffer] = []  # the bases in memory, place -1 - j = leaves[j]
    parts: list[tuple | None] = []  # parts[k]: node k's part of the key
    places: dict[int, int] = {}
    # A tracker's or dtype's number (see _Numbers): `(number(id(x)) or _number(x))[1]`, the lookup by
    # identity inline (it is done a few times per node), _number only for an object not seen before.
    number = NUMBERS.by_id.get
    for out in outs:
        root = out._base or out  # (out.base, without the property call: this runs for every node)
        if root.realized is not None or id(root) in places:
            continue
        places[id(root)] = len(bases)
        bases.append(root)
        parts.append(None)
        stack = [(root, iter(root.srcs), [], len(bases) - 1)]  # each node on the path, with its sources
        while stack:                                          # still to go, their parts and its place
            node, todo, srcs, place = stack[-1]
            for src in todo:
                base = src._base or src
                found = places.get(id(base))
                view = (number(id(src.st)) or _number(src.st))[1]
                if found is None:
                    if base.realized is None:  # first met: it gets the next place, and the walk goes down
                        found = places[id(base)] = len(bases)
                        bases.append(base)
                        parts.append(None)
                        srcs.append((found, view))
                        stack.append((base, iter(base.srcs), [], found))
                        break
                    leaves.append(base)  # a buffer in memory, first seen here
                    found = places[id(base)] = -len(leaves)
                if found < 0:  # a buffer in memory: did assign overwrite it since the node was built?
                    planned = node.src_versions[len(srcs)]  # (this source's: srcs has the ones before it)
                    if planned is not None and planned != base.realized.version:
                        schedule.check_versions(node)  # (which raises, naming the computation)
                srcs.append((found, view))
            else:  # every source has its place: the node's part of the key
                stack.pop()
                arg = node.arg  # (most: none, or a reduce's axes, which are their own key)
                parts[place] = (node.op, arg if arg is None or type(arg) is tuple else _arg_key(arg),
                                (number(id(node.dtype)) or _number(node.dtype))[1],
                                node.device, (number(id(node.st)) or _number(node.st))[1], tuple(srcs))
    outputs = []
    for out in outs:
        base = out._base or out
        if id(base) not in places:  # (an output already in memory: the realizer passes none)
            leaves.append(base)
            places[id(base)] = -len(leaves)
        outputs.append(places[id(base)])
    memory = tuple([(b.device, (number(id(b.dtype)) or _number(b.dtype))[1],
                     (number(id(b.st)) or _number(b.st))[1], b.op is LoadOps.CONST,
                     const_key(b.arg) if b.op is LoadOps.CONST else None) for b in leaves])
    return _Structure((tuple(parts), memory, tuple(outputs), _rule_settings(fuse)), bases, leaves)
# --8<-- [end:key]


class _Numbers:
    """One small number per distinct ShapeTracker or DType, looked up by identity first.

    The key names each node's tracker and dtype. Hashed as they are, each is a Python call (a
    tracker's hash is computed once and kept, but reading it back is still a call), several per node,
    for every node of every step. Here each gets a number instead: found by identity (a C-level
    lookup of an int), and only an object not seen before is looked up by value, so equal trackers
    still get equal numbers and the key means what it did. The table holds the objects it numbered,
    so an identity is never reused while it is in the table; past LIMIT objects it starts over, with
    the schedules keyed by its old numbers (ScheduleCache.schedule)."""

    LIMIT = 1 << 16

    def __init__(self) -> None:
        self.by_id: dict[int, tuple[Any, int]] = {}   # id(object) -> (the object, its number)
        self.by_value: dict[Any, int] = {}            # object (hashed by value) -> its number

    def clear(self) -> None:
        self.by_id.clear()
        self.by_value.clear()


NUMBERS = _Numbers()


def _number(x: Any) -> tuple[Any, int]:
    """(x, its number), numbering x if it is new (equal values, equal numbers)."""
    found = NUMBERS.by_id.get(id(x))
    if found is None:
        found = NUMBERS.by_id[id(x)] = (x, NUMBERS.by_value.setdefault(x, len(NUMBERS.by_value)))
    return found


def _arg_key(arg: Any) -> Any:
    """An op's argument as the scheduler sees it: host data is just "host data" (copied at run time)."""
    if arg is None or type(arg) is tuple:  # most nodes: no argument, or reduce axes
        return arg
    return "host data" if isinstance(arg, np.ndarray) else const_key(arg)


def _rule_settings(fuse: bool) -> tuple:
    """What, besides the graph, changes the schedule: fusion on or off, the bounds, the rule functions
    (the engine's, and the core's that `pick_realized` calls), so a rule replaced at run time is used."""
    return (fuse, schedule.MAX_KERNEL_DEPTH, schedule.MAX_KERNEL_OPS, schedule.keeps_zero,
            schedule.store_is_cheaper, schedule.pick_realized, core_schedule.rule1_outputs,
            core_schedule.rule2_loads, core_schedule.readers_of)


def _plan(item: ScheduleItem, places: dict[int, int]) -> _Planned:
    """`item` with its nodes replaced by their places (`places`: id -> place), so it keeps no graph alive."""
    ast = None if isinstance(item.ast.op, LoadOps) else item.ast
    return _Planned(ast, places[id(item.out)], tuple(places[id(b)] for b in item.inputs), item.reason)


def _instantiate(planned: _Planned, nodes: list[LazyBuffer]) -> ScheduleItem:
    """The kernel `planned` over this graph's nodes: the unrealized bases, then the buffers in memory
    last seen first, so that a place indexes the list directly (-1 is the first buffer in memory)."""
    out = nodes[planned.out]
    ast = planned.ast if planned.ast is not None else LazyOp(out.op, (), out.arg)
    return ScheduleItem(ast, out, tuple([nodes[k] for k in planned.inputs]), planned.reason)


schedules = ScheduleCache()
