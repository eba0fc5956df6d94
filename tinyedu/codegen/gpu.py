"""The GPU parts of the linearizer (stage 7): thread indices instead of loops, and GROUP's combine.

A GPU runs the kernel's body once per thread. The GLOBAL, LOCAL and GROUP axes of a Kernel are
not loops: each becomes a SPECIAL, the index of this thread's workgroup (`gid`) or of this thread in
its workgroup (`lid`), and the index expressions use it where a CPU kernel uses a loop counter.

A GROUP axis splits a reduce among the threads of a workgroup. Each thread reduces its part with the
usual accumulators; then the partials have to meet:

    shared[local thread, group thread] = my partial     every thread writes its slot
    BARRIER                                             wait until all slots are written
    if group thread == 0:                               one thread per output
        acc = shared[local thread, 0] + ... + [.., G-1] in a fixed order (the same bits every run)
        data0[...] = <the rest of the AST, with acc>    the STORE happens inside the IF
    BARRIER                                             only inside an output loop: the next
                                                        iteration writes the slots again

PACK on a GPU kernel stages a tile in shared memory, for the threads of a workgroup to share (the
classic tiled matmul: each thread of a 16 x 16 workgroup loads one element of a 16 x 16 tile of A
and one of B, and then reads 16 of each from the fast shared copy):

    for ridx0 (one tile of the reduce after another):
        shared0[my element(s)] = A[...]; shared1[my element(s)] = B[...]   every thread a share
        BARRIER                                   the whole tile is there before anyone reads it
        for ridx1 < 16: acc += shared0[..] * shared1[..]
        BARRIER                                   everyone is done before the next tile overwrites it

The linearizer (tinyedu/codegen/linearizer.py) calls these with its Kernel, its UOpBuilder and the
values of its loop variables by name (`loops`); they return what they made.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from tinyedu.codegen.index import INDEX_OPS
from tinyedu.codegen.kernel import GPU_KINDS, AxisKind, Kernel
from tinyedu.codegen.opts import pack_tile
from tinyedu.core.dtype import DType, dtypes
from tinyedu.core.helpers import prod
from tinyedu.core.ops import BinaryOps, ReduceOps
from tinyedu.core.uops import UOp, UOpBuilder, UOps, lowest_value
from tinyedu.shape import Node, NumNode, ShapeTracker, Variable, View, strides_for_shape

WARP, BANKS = 32, 32  # threads that access shared memory together; 4-byte banks of shared memory
SECTOR = 32           # bytes of global memory moved at once
VECTOR_TYPES = (dtypes.float32, dtypes.int32)  # copied 4 at a time (one float4)
Load = Callable[[UOp, Node, Node, DType, int], Any]  # the linearizer's load(buffer, index, valid, ...)


def thread_indices(k: Kernel, b: UOpBuilder) -> dict[str, UOp]:
    """Every GLOBAL, LOCAL and GROUP axis is a SPECIAL, known everywhere in the kernel (by name)."""
    names = k.loop_names
    return {names[axis]: b.special(names[axis], k.full_shape[axis]) for axis in k.axes_of(*GPU_KINDS)}


def _flat_index(k: Kernel, b: UOpBuilder, loops: dict[str, UOp], axes: list[int]) -> UOp:
    """The row-major position of this thread along `axes` (0 when there are none)."""
    index = b.const(0, b.index_dtype)
    for axis in axes:
        index = b.alu(BinaryOps.ADD, b.alu(BinaryOps.MUL, index, b.const(k.full_shape[axis], b.index_dtype)),
                      loops[k.loop_names[axis]])
    return index


# --8<-- [start:group-combine]
def combine_groups(k: Kernel, b: UOpBuilder, loops: dict[str, UOp], dtype: DType,
                   partials: dict[Any, UOp]) -> dict[Any, UOp]:
    """GROUP: every thread's partial (one per output position in `partials`) into shared memory, a
    barrier, then the workgroup's first thread along the GROUP axes combines them, in order. Returns
    the combined values; the IF around them stays open (the STORE goes inside) until `finish_groups`."""
    groups, locals_ = k.axes_of(AxisKind.GROUP), k.axes_of(AxisKind.LOCAL)
    size, slots = prod(k.full_shape[a] for a in groups), len(partials)
    shared = b.define_shared(prod(k.full_shape[a] for a in locals_) * size * slots, dtype)
    mine = _flat_index(k, b, loops, groups)  # this thread's number among the GROUP threads
    first_slot = b.alu(BinaryOps.MUL, _flat_index(k, b, loops, locals_), b.const(size * slots, b.index_dtype))
    for n, partial in enumerate(partials.values()):
        slot = b.alu(BinaryOps.ADD, first_slot, b.const(n, b.index_dtype))
        b.emit(UOps.STORE, None, (shared, _at(b, slot, mine, slots), partial), hoist=False)
    b.barrier()
    b.open_if(b.alu(BinaryOps.CMPEQ, mine, b.const(0, b.index_dtype)))
    op = BinaryOps.ADD if k.reduceop.op is ReduceOps.SUM else BinaryOps.MAX
    combined = {}
    for n, position in enumerate(partials):
        acc = b.define_acc(0 if op is BinaryOps.ADD else lowest_value(dtype), dtype)
        part = b.open_range(f"group{n}", size)
        slot = b.alu(BinaryOps.ADD, first_slot, b.const(n, b.index_dtype))
        value = b.load_shared(shared, _at(b, slot, part, slots), dtype)
        combined[position] = b.assign(acc, b.alu(op, acc, value))
        b.close_range()
    return combined
# --8<-- [end:group-combine]


def _at(b: UOpBuilder, slot: UOp, thread: UOp, slots: int) -> UOp:
    """shared's index of `thread`'s partial in `slot`: slot + thread * slots."""
    return b.alu(BinaryOps.ADD, slot, b.alu(BinaryOps.MUL, thread, b.const(slots, b.index_dtype)))


def finish_groups(b: UOpBuilder, inside_loops: bool) -> None:
    """Close the IF that `combine_groups` opened; inside an output loop, a barrier keeps the next
    iteration's partials from overwriting slots the first thread may still be reading."""
    b.close_if()
    if inside_loops:
        b.barrier()


# --8<-- [start:stage-tile]
def stage_tile(k: Kernel, b: UOpBuilder, loops: dict[str, UOp], position: int, axis: int, source: UOp,
               load: Load) -> tuple[UOp, ShapeTracker]:
    """PACK on a GPU kernel, placed before loop `axis`: the workgroup copies the tile of buffer
    `position` that its threads read from that loop on into shared memory, thread t copying elements
    t, t + threads, ... of the tile taken in the buffer's memory order (neighbouring threads read
    neighbouring memory: coalesced; 4 neighbouring elements per thread where the memory order allows,
    which codegen/gpu_vectors.py makes one float4 load); then a barrier. Returns the shared array and
    the view to read the buffer through from now on (the linearizer's close_loop adds the barrier
    that ends its use)."""
    buf, st = k.bufs[position], k.sts[position]
    tile = pack_tile(k, position, axis)
    threads = k.axes_of(AxisKind.LOCAL, AxisKind.GROUP)
    count = prod(k.full_shape[a] for a in threads)
    memory = st.real_strides(ignore_valid=True)  # walk the tile in memory order: the smallest stride last
    order = sorted(tile, key=lambda a: -abs(memory[a]) if memory[a] is not None else 0)
    placed = layout_order(k, tile)  # the tile's axes as shared memory holds them, slowest first
    walk = copy_walk(order, [k.full_shape[a] for a in order], max(buf.dtype.itemsize, 1),
                     transposed=order[-1] != placed[-1])
    per_thread = 4 if buf.dtype in VECTOR_TYPES and memory[order[-1]] == 1 and walk[-1][1] % 4 == 0 and \
        prod(k.full_shape[a] for a in tile) >= 4 * count else 1  # (every thread has 4 to copy)
    vector = placed[-1] in k.axes_of(AxisKind.UPCAST) and k.full_shape[placed[-1]] % 4 == 0
    pieces = [(placed.index(a), n, scale) for a, n, scale in walk]
    layout = tile_layout([k.full_shape[a] for a in placed], pieces, count, vector,
                         per_thread if order[-1] == placed[-1] else 1)
    shared = b.define_shared(layout[-1], buf.dtype)
    strides = dict(zip(placed, layout[:-1], strict=True))
    element: Node = NumNode(0)
    for a in threads:  # this thread's number in the workgroup, row-major
        element = element * k.full_shape[a] + Variable(k.loop_names[a], 0, k.full_shape[a] - 1)
    copies = prod(k.full_shape[a] for a in tile) // per_thread
    rounds = math.ceil(copies / count)
    if rounds > 1:
        name = f"s{position}idx"
        loops[name] = b.open_range(name, rounds)
        element = element + Variable(name, 0, rounds - 1) * count
    exact = copies % count == 0  # else the last round has more threads than copies left
    if not exact:  # (the gate keeps the load in bounds wherever it is placed; the IF guards the store)
        b.open_if(_uop(b, loops, element < copies))
    for lane in range(per_thread):
        index, valid, where = _tile_element(k, axis, position, walk, element * per_thread, lane, strides)
        valid = valid if exact else Node.ands([valid, element < copies])
        value = load(source, index, valid, buf.dtype, 1)
        b.emit(UOps.STORE, None, (shared, _uop(b, loops, where), value), hoist=False)
    if not exact:
        b.close_if()
    if rounds > 1:
        b.close_range()
    b.barrier()
    view = View.create(k.full_shape, tuple(strides.get(a, 0) for a in range(len(k.full_shape))))
    return shared, ShapeTracker((view,))
# --8<-- [end:stage-tile]


def _tile_element(k: Kernel, axis: int, position: int, walk: list[tuple[int, int, int]], element: Node,
                  lane: int, strides: dict[int, int]) -> tuple[Node, Node, Node]:
    """Element `element + lane` of the copy `walk` of buffer `position`'s tile (`element` a multiple
    of the lanes, which divide the innermost piece: the lane only moves along it): (its index in the
    buffer, whether it is a real element (not padding), its index in the shared tile)."""
    st = k.sts[position]
    coords: dict[int, Node] = {}
    for (a, size, scale), stride in zip(walk, strides_for_shape([n for _, n, _ in walk]), strict=True):
        coords[a] = coords.get(a, NumNode(0)) + (element // stride) % size * scale
    coords[walk[-1][0]] = coords[walk[-1][0]] + lane
    idxs: list[Node] = []
    for a, size in enumerate(st.shape):
        if size > 1 and a in coords:
            idxs.append(coords[a])
        elif size > 1 and a < axis and k.kinds[a] not in (AxisKind.LOCAL, AxisKind.GROUP):
            idxs.append(Variable(k.loop_names[a], 0, size - 1))  # this workgroup's, this iteration's tile
        else:
            idxs.append(NumNode(0))  # an axis the buffer does not depend on
    index, valid = st.expr_idxs(idxs)
    return index, valid, Node.sum([coords[a] * strides[a] for a in coords])


def copy_walk(order: list[int], sizes: list[int], itemsize: int,
              transposed: bool) -> list[tuple[int, int, int]]:
    """The order in which a workgroup's threads copy a tile: (axis, size, scale) pieces, slowest
    first; thread t copies element t of that walk. It is the global buffer's memory order (`order`,
    slowest first: neighbouring threads read neighbouring memory), except in a tile stored the other
    way round (`transposed`), where a contiguous axis longer than a 32-byte sector is walked a sector
    at a time (its sectors outermost): a warp then reads whole sectors of several rows, which is as
    coalesced, and its writes down the tile's columns spread over more banks."""
    run = max(SECTOR // itemsize, 1)
    *outer, last = zip(order, sizes, strict=True)
    if transposed and last[1] > run and last[1] % run == 0:
        return [(last[0], last[1] // run, run), *((a, n, 1) for a, n in outer), (last[0], run, 1)]
    return [(a, n, 1) for a, n in zip(order, sizes, strict=True)]


def layout_order(k: Kernel, tile: list[int]) -> list[int]:
    """The tile's axes in shared memory, slowest first: the loops (the reduce tile), then the thread
    axes, then the UPCAST axes, so that the elements one thread reads together (a register block's
    4 rows or columns) are neighbours: one aligned float4 (codegen/gpu_vectors.py). On a device whose
    work-items are a CPU core's SIMD lanes (GPULimits.threads_are_simd_lanes) the tile keeps its axis
    order: there neighbouring work-items, not one work-item's 4 elements, should be neighbours."""
    if k.gpu is not None and k.gpu.threads_are_simd_lanes:
        return list(tile)
    upcast, threads = k.axes_of(AxisKind.UPCAST), k.axes_of(AxisKind.LOCAL, AxisKind.GROUP)
    return ([a for a in tile if a not in upcast and a not in threads] + [a for a in tile if a in threads]
            + [a for a in tile if a in upcast])


def tile_layout(sizes: list[int], walk: list[tuple[int, int, int]], threads: int, vector: bool,
                lanes: int = 1) -> list[int]:
    """The strides of a shared tile (its axes `sizes`, slowest first) and its size in elements
    (last): its rows (all but the slowest axis) padded by the number of unused elements, from 0 to
    4, that gives the first warp's copy into it the fewest bank conflicts (the least padding among
    equals); with `vector` (rows read 4 at a time) only 0 or 4, which keep rows of float4 aligned.

    Shared memory is 32 banks of 4-byte words. Threads copy the tile in the order `walk` (pieces
    (axis, size, scale) over the layout's axes, see `copy_walk`), which can be down the tile's
    columns: with rows of 16 or 64 floats a column sits in a few banks, and the warp's threads wait
    for each other (the tiled matmul's transposed A tile). A padded row shifts the next one by a few
    banks. With `lanes` 4, each thread copies 4 neighbouring elements as one float4 store, which
    the banks serve a quarter warp (8 threads) at a time."""
    thread = np.arange(min(WARP, threads, prod(sizes) // lanes))
    element = (thread[:, None] * lanes + np.arange(lanes)).reshape(-1)
    coords = np.zeros((len(sizes), element.size), dtype=np.int64)
    for (axis, size, scale), stride in zip(walk, strides_for_shape([n for _, n, _ in walk]), strict=True):
        coords[axis] += element // stride % size * scale
    phase = np.repeat(thread // (WARP // lanes), lanes)  # the threads the banks serve together
    best: tuple[int, list[int]] | None = None
    pads = (0,) if len([n for n in sizes if n > 1]) < 2 else (0, 4) if vector else (0, 1, 2, 3, 4)
    for pad in pads:
        inner = strides_for_shape(sizes[1:]) if len(sizes) > 1 else []
        row = prod(sizes[1:]) + pad
        layout = [row, *inner, row * sizes[0]]
        words = sum(coords[axis] * layout[axis] for axis in range(len(sizes)))
        served = np.unique(np.stack([phase, words]), axis=1)  # (phase, word) once each
        passes = int(np.unique(np.stack([served[0], served[1] % BANKS]), axis=1,
                               return_counts=True)[1].max())  # the busiest bank's distinct words
        if best is None or passes < best[0]:
            best = (passes, layout)
    return best[1]


def _uop(b: UOpBuilder, loops: dict[str, UOp], node: Node) -> UOp:
    return node.render_with(INDEX_OPS, (b, loops))
