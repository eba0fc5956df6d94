"""Two-stage full reductions on GPU devices: many workgroups, then one.

A GPU kernel that reduces a whole buffer to one number has one output, so it runs in ONE workgroup
(the heuristics GROUP its reduce among that workgroup's threads): a GPU of a hundred cores keeps
one of them busy. The realizer splits such a kernel in two before it runs:

    stage 1   partials[g] = reduce(x[g*L : (g+1)*L])    G workgroups, each GROUPs its slice of L
    stage 2   out = <the rest of the AST>(reduce(partials))   one workgroup, over G partials

The input of N elements is seen as a (G, L) grid, L a multiple of the workgroup's threads (so the
GROUP divides it) and G chosen from the device's limits. When G * L > N the last slice runs past
the end: those places read nothing (the padded views gate the loads) and a WHERE puts the reduce's
identity there (0 for SUM, -inf for MAX), since the ops before the reduce may turn the padding's 0
into something else (exp(0) = 1). The order of the additions changes (float32 sums differ from the
one-stage kernel's by rounding only); MAX gives the same value, NaN and inf included.

Only kernels with one output on a device with GPU limits are split; every other kernel, and every
kernel of a CPU device, runs as scheduled. SPLIT_REDUCE=0 turns the split off.

How many workgroups G is a choice, like an opt. The heuristic (`grid`) reads it off the device's
limits. Under BEAM=n the realizer measures instead (`search_split`): each of a few G (`split_choices`,
"no split" among them) is timed the way BEAM times a candidate, on scratch buffers, the fastest of
several runs, the stages' times added, and the fastest is kept (on disk, next to BEAM's results).
The split cannot be one of BEAM's opts: an opt changes how one kernel runs, and BEAM times one
program, while a split turns one kernel into two and adds a buffer between them. So the split is
chosen first, each stage at the heuristics' opts, and then BEAM searches the opts of the kernels
the winner has, as it does any kernel's.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, replace

from tinyedu.codegen.heuristics import WORKGROUP
from tinyedu.core.dtype import dtypes
from tinyedu.core.helpers import debug_level, getenv, postorder, prod
from tinyedu.core.linearizer import ast_dtype
from tinyedu.core.ops import BufferOps, ConstBuffer, LazyOp, LoadOps, MemBuffer, ReduceOps, TernaryOps
from tinyedu.core.schedule import leaf_shape
from tinyedu.core.uops import lowest_value
from tinyedu.engine import beam
from tinyedu.engine.lower import heuristic_opts, lower, new_kernel, optimization_mode
from tinyedu.engine.schedule import ScheduleItem
from tinyedu.launch import GPULimits
from tinyedu.lazy import LazyBuffer
from tinyedu.runtime.device import Device
from tinyedu.shape import ShapeTracker

PER_THREAD = 16  # elements each thread of a stage aims to reduce: a slice is WORKGROUP * PER_THREAD long


def split_full_reduces(schedule: list[ScheduleItem]) -> list[ScheduleItem]:
    """The schedule with every full reduction on a GPU device split into its two stages."""
    # (a load's device too: fewer steps than telling loads apart, for the usual one-device schedule)
    devices = {item.out.device for item in schedule}
    # CPU devices only (most schedules): nothing to split, found before reading the setting (and
    # before building the table below: every realize asks, and the table took as long again)
    if not any([Device[device].limits is not None for device in devices]) or not getenv("SPLIT_REDUCE", 1):
        return schedule
    limits_of: dict[str, GPULimits | None] = {device: Device[device].limits for device in devices}
    out: list[ScheduleItem] = []
    for item in schedule:
        if isinstance(item.ast.op, LoadOps):
            out.append(item)
            continue
        limits = limits_of[item.out.device]
        if limits is None or full_reduce_length(item) is None:
            out.append(item)
        elif optimization_mode() == "beam":
            out.extend(two_stages(item, limits, search_split(item, limits, int(getenv("BEAM", 0))).groups))
        else:
            out.extend(two_stages(item, limits))
    return out


def full_reduce_length(item: ScheduleItem) -> int | None:
    """How many elements `item` reduces to its one output, or None when it is not a full reduce."""
    reduces = [node for node in item.ast.walk() if isinstance(node.op, ReduceOps)]
    if prod(item.out.shape) != 1 or len(reduces) != 1:
        return None
    return prod(leaf_shape(reduces[0].src[0]))


def grid(n: int, limits: GPULimits, groups: int | None = None) -> tuple[int, int] | None:
    """(G, L): G slices of L elements covering n (G * L >= n), or None for no split.

    L is a multiple of the workgroup's threads. Without `groups`, the heuristic: no split when one
    workgroup's worth suffices, else G at most threads * PER_THREAD (stage 2 then does no more per
    thread than stage 1) and within the device's workgroups per grid dimension. With `groups`
    (BEAM's choice, 1 = no split), G is about that many (fewer when L rounds up)."""
    threads = min(WORKGROUP, limits.max_workgroup_size)
    slice_ = threads * PER_THREAD
    if groups is None:
        if n < 2 * slice_:
            return None
        groups = min(math.ceil(n / slice_), slice_, limits.max_groups[0])
    if groups <= 1:
        return None
    length = math.ceil(math.ceil(n / groups) / threads) * threads
    return math.ceil(n / length), length


def split_choices(n: int, limits: GPULimits) -> list[int]:
    """The G that BEAM times for a full reduce of n elements: 1 (no split), the heuristic's G, and a
    quarter and four times as many, each within the limits `grid` keeps (none when n is one
    workgroup's worth: nothing to choose)."""
    heuristic = grid(n, limits)
    if heuristic is None:
        return [1]
    threads = min(WORKGROUP, limits.max_workgroup_size)
    most = min(threads * PER_THREAD, limits.max_groups[0], math.ceil(n / threads))
    tried = {1, heuristic[0]}
    tried |= {grid(n, limits, g)[0] for g in (heuristic[0] // 4, heuristic[0] * 4) if 2 <= g <= most}
    return sorted(tried)


@dataclass
class SplitChoice:
    groups: int                      # the G kept (1: no split)
    seconds: dict[int, float]        # every G tried, with its time (inf: it failed to build or run)
    cached: bool = False             # read from the disk cache (nothing was timed)


def search_split(item: ScheduleItem, limits: GPULimits, width: int) -> SplitChoice:
    """BEAM's choice of G for a full reduce: every G of `split_choices` timed, the fastest kept
    (from the disk cache when this kernel was searched before on this device)."""
    device, n = item.out.device, full_reduce_length(item)
    choices = split_choices(n, limits)
    if choices == [1]:
        return SplitChoice(1, {})
    path = beam.cache_file(beam.cache_key(item.ast, device, width) + "-split")
    try:
        saved = json.loads(path.read_text())
        return SplitChoice(saved["groups"], {int(g): t for g, t in saved["seconds"].items()}, cached=True)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        pass  # never searched, or a damaged entry
    seconds = {g: time_stages(two_stages(item, limits, g)) for g in choices}
    finite = {g: t for g, t in seconds.items() if math.isfinite(t)}
    groups = min(finite, key=finite.get) if finite else grid(n, limits)[0]  # (none ran: the heuristic's)
    temporary = path.with_suffix(f".{time.time_ns()}.tmp")  # written whole or not at all
    temporary.write_text(json.dumps({"kernel": item.name, "groups": groups, "seconds": seconds}))
    temporary.replace(path)
    if debug_level() >= 1:
        tried = ", ".join(f"{g}: {t * 1e3:.3f} ms" for g, t in seconds.items())
        print(f"BEAM {width}: {item.name} split into {groups} workgroups (1 = no split; tried {tried})")
    return SplitChoice(groups, seconds)


def time_stages(items: list[ScheduleItem]) -> float:
    """The kernels' times added, each lowered with the heuristics' opts and timed on scratch buffers
    as BEAM times a candidate (inf when one fails to build or run)."""
    total = 0.0
    for item in items:
        device = item.out.device
        backend = Device[device]
        opts = heuristic_opts(new_kernel(item.ast, backend), backend.vector_width, backend.threads())
        try:
            runner = lower(device, item.ast, opts).runner
            total += beam.time_runner(runner, beam.scratch_buffers(item.ast, device))
        except (ValueError, RuntimeError):  # an opt that does not apply, a kernel the device refuses
            return math.inf
    return total


def two_stages(item: ScheduleItem, limits: GPULimits, groups: int | None = None) -> list[ScheduleItem]:
    """[item] unchanged, or its two stages when it reduces a long input to one output (into about
    `groups` partials when given, 1 meaning no split; else as many as `grid`'s heuristic says)."""
    if full_reduce_length(item) is None:
        return [item]
    reduce = next(node for node in item.ast.walk() if isinstance(node.op, ReduceOps))
    shape = leaf_shape(reduce.src[0])
    split = grid(prod(shape), limits, groups)
    if split is None:
        return [item]
    groups, length = split
    n, dtype = prod(shape), ast_dtype(reduce)
    partials = LazyBuffer(item.out.device, ShapeTracker.from_shape((groups,)), dtype, LoadOps.EMPTY)
    body = _as_grid(reduce.src[0], n, groups, length)
    if groups * length > n:  # the last slice's places past the end hold the identity
        body = _identity_past_end(body, reduce.op, dtype, n, groups, length)
    body, first_inputs = _renumber(body, item.inputs, [])
    first = LazyOp(BufferOps.STORE, (LazyOp(reduce.op, (body,), (1,)),),
                   MemBuffer(0, dtype, ShapeTracker.from_shape((groups, 1))))
    read = LazyOp(BufferOps.LOAD, (), MemBuffer(1, dtype, ShapeTracker.from_shape((groups,)).reshape(
        (groups,) + (1,) * (len(shape) - 1))))
    second = _rebuild(item.ast, lambda node: node, {id(reduce): LazyOp(reduce.op, (read,), (0,))})
    second, second_inputs = _renumber(second, item.inputs, [partials], {id(read)})
    return [ScheduleItem(first, partials, tuple(first_inputs), "stage 1 of a two-stage reduce"),
            ScheduleItem(second, item.out, tuple(second_inputs), item.reason)]


def _as_grid(ast: LazyOp, n: int, groups: int, length: int) -> LazyOp:
    """The reduce's source read as a (groups, length) grid: every leaf's view flattened, padded
    past the end, reshaped (a node used twice stays one node)."""
    def leaf(st: ShapeTracker) -> ShapeTracker:
        flat = st.reshape((n,))
        if groups * length > n:
            flat = flat.pad(((0, groups * length - n),))
        return flat.reshape((groups, length))
    return _rebuild(ast, lambda node: LazyOp(node.op, (), replace(node.arg, st=leaf(node.arg.st))))


def _identity_past_end(body: LazyOp, op: ReduceOps, dtype, n: int, groups: int, length: int) -> LazyOp:
    """WHERE(inside, body, identity): `inside` is a constant True padded with False past n."""
    inside = ShapeTracker.from_shape((n,)).pad(((0, groups * length - n),)).reshape((groups, length))
    identity = 0 if op is ReduceOps.SUM else lowest_value(dtype)
    mask = LazyOp(BufferOps.CONST, (), ConstBuffer(True, dtypes.bool, inside))
    everywhere = ShapeTracker.from_shape((groups, length))
    fill = LazyOp(BufferOps.CONST, (), ConstBuffer(identity, dtype, everywhere))
    return LazyOp(TernaryOps.WHERE, (mask, body, fill))


def _rebuild(ast: LazyOp, leaf, replaced: dict[int, LazyOp] | None = None) -> LazyOp:
    """`ast` with the nodes in `replaced` (by id) swapped for their values, each LOAD/CONST leaf
    for leaf(node), and every node above them rebuilt once (a node used twice stays one node)."""
    replaced = replaced or {}
    new: dict[int, LazyOp] = {}
    for node in postorder([ast], lambda node: () if id(node) in replaced else node.src):
        if id(node) in replaced:
            new[id(node)] = replaced[id(node)]
        elif node.op in (BufferOps.LOAD, BufferOps.CONST):
            new[id(node)] = leaf(node)
        else:
            new[id(node)] = LazyOp(node.op, tuple(new[id(s)] for s in node.src), node.arg)
    return new[id(ast)]


def _renumber(ast: LazyOp, inputs: tuple[LazyBuffer, ...], kept: list[LazyBuffer],
              numbered: set[int] = frozenset()) -> tuple[LazyOp, list[LazyBuffer]]:
    """`ast` reading only the inputs it uses: `kept` are buffers 1, 2, ... already (their LOADs are
    the nodes in `numbered`), then each of the item's `inputs` it reads (LOAD k reads inputs[k - 1])
    in order of appearance. Returns the AST and its inputs."""
    kept = list(kept)

    def leaf(node: LazyOp) -> LazyOp:
        if node.op is not BufferOps.LOAD or id(node) in numbered:
            return node
        source = inputs[node.arg.idx - 1]
        if not any(x is source for x in kept):
            kept.append(source)
        number = next(k for k, x in enumerate(kept) if x is source) + 1
        return LazyOp(node.op, (), MemBuffer(number, node.arg.dtype, node.arg.st))
    return _rebuild(ast, leaf), kept
