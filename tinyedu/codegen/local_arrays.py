"""The two opts that need a local array: PACK (a copied tile) and THREAD over a reduce (partial sums).

A local array (DEFINE_LOCAL) is a small array of the kernel itself, declared where the linearizer
is when it makes one: inside a thread loop it is private to each thread, outside it is shared.
Both functions are called by a Linearizer (tinyedu/codegen/linearizer.py): they emit UOps through its
builder (naming the loops they open in its loop table, which its index rendering reads) and return
what they made (the packed copy and its view, the combined partial sums); the linearizer keeps it.
"""

from __future__ import annotations

from typing import Protocol

from tinyedu.codegen.kernel import Kernel
from tinyedu.codegen.opts import pack_tile
from tinyedu.codegen.vectorize import LANE, Value, as_lanes, as_vector, tree, vectorizable
from tinyedu.core.dtype import DType
from tinyedu.core.helpers import prod
from tinyedu.core.ops import BinaryOps, LazyOp, ReduceOps
from tinyedu.core.uops import UOp, UOpBuilder, UOps, VectorDType
from tinyedu.shape import Node, NumNode, ShapeTracker, Variable, View, strides_for_shape

Combo = tuple[tuple[int, int], ...]   # a position of the expanded axes: ((axis, index), ...)


class Linearizer(Protocol):
    """What these two functions use of the Linearizer (tinyedu/codegen/linearizer.py), which calls
    them: described here so that this module does not import the one that imports it."""

    kernel: Kernel
    b: UOpBuilder
    globals: dict[int, UOp]
    loops: dict[str, UOp]
    vector_axis: int | None
    width: int

    def _dtype(self, node: LazyOp) -> DType: ...
    def combos(self, reduce: bool) -> list[Combo]: ...
    def idx(self, axis: int, size: int) -> Node: ...
    def load(self, buffer: UOp, index: Node, valid: Node, dtype: DType, width: int) -> Value: ...
    def lower_reduce(self, reduce: LazyOp) -> dict[Combo, Value]: ...
    def open_loop(self, axis: int) -> UOp: ...
    def store_at(self, buffer: UOp, index: Node, value: Value, dtype: DType, width: int) -> None: ...
    def width_above(self) -> int: ...

# --8<-- [start:pack]
def pack(lin: Linearizer, position: int, axis: int) -> tuple[UOp, ShapeTracker]:
    """Copy the tile of buffer `position` that the loops from `axis` on read into a local array.

    The copy runs over the tile's axes (a vector copy along a contiguous innermost one); padded
    positions read 0, so the loads from the local array need no gate. Afterwards the buffer is
    read from the array through a contiguous view over the tile's axes (stride 0 on the rest):
    returns the array and that view, through which the linearizer reads the buffer from then on.
    """
    k, b = lin.kernel, lin.b
    buf, st = k.bufs[position], k.sts[position]
    tile = pack_tile(k, position, axis)
    sizes = [k.full_shape[a] for a in tile]
    local = b.define_local(prod(sizes), buf.dtype)
    local_strides = dict(zip(tile, strides_for_shape(sizes), strict=True))
    width = lin.width if tile[-1] == lin.vector_axis and vectorizable(buf.dtype) else 1
    variables: dict[int, Node] = {}
    for n, a in enumerate(tile):
        if a == tile[-1] and width > 1:
            variables[a] = Variable(LANE, 0, width - 1)
            continue
        name = f"p{position}idx{n}"
        lin.loops[name] = b.open_range(name, k.full_shape[a])
        variables[a] = Variable(name, 0, k.full_shape[a] - 1)
    idxs = [variables.get(a, NumNode(0)) if a >= axis else lin.idx(a, st.shape[a])
            for a in range(len(st.shape))]
    index, valid = st.expr_idxs(idxs)
    value = lin.load(lin.globals[buf.idx], index, valid, buf.dtype, width)
    local_index = Node.sum([variables[a] * local_strides[a] for a in tile])
    lin.store_at(local, local_index, value, buf.dtype, width)
    for a in tile:
        if not (a == tile[-1] and width > 1):
            b.close_range()
    strides = [local_strides.get(a, 0) if a >= axis else 0 for a in range(len(st.shape))]
    return local, ShapeTracker((View.create(k.full_shape, strides),))
# --8<-- [end:pack]


# --8<-- [start:thread-reduce]
def lower_thread_reduce(lin: Linearizer, reduce: LazyOp) -> dict[Combo, Value]:
    """THREAD over a reduce axis, or the outermost BLOCK loop of a long sum (with or without
    threads): iteration t sums part t into partial[t]; then the partials are combined.

    The partials live in a local array made before the loop (so it is shared by the threads,
    each writing its own slots); they are combined after the loop in a fixed order, so the
    result does not depend on how many threads actually ran. For a long sum the parts are its
    blocks, fixed by its size (tinyedu/codegen/sum_blocks.py), and the same code runs on one
    thread: the sum is bit-identical with any number of threads. (THREAD on a plain reduce axis
    splits it in as many parts as threads, so there the order depends on the thread count.)
    """
    k, b = lin.kernel, lin.b
    dtype, width = lin._dtype(reduce.src[0]), lin.width_above()
    op = BinaryOps.ADD if reduce.op is ReduceOps.SUM else BinaryOps.MAX
    out_combos = lin.combos(reduce=False)
    slots = len(out_combos) * width
    partial = b.define_local(k.full_shape[0] * slots, dtype)
    thread = lin.open_loop(0)
    results = lin.lower_reduce(reduce)
    for n, combo in enumerate(out_combos):
        index = b.alu(BinaryOps.ADD, b.alu(BinaryOps.MUL, thread, b.const(slots, b.index_dtype)),
                      b.const(n * width, b.index_dtype))
        _store_slots(lin, partial, index, results[combo], dtype, width)
    b.close_range()
    combined = {}
    vector = VectorDType(dtype, width) if width > 1 and vectorizable(dtype) else None
    for n, combo in enumerate(out_combos):
        parts: list[Value] = []
        for t in range(k.full_shape[0]):
            first = t * slots + n * width
            if vector is not None:
                parts.append(b.emit(UOps.LOAD, vector, (partial, b.const(first, b.index_dtype))))
            else:
                loads = tuple(b.emit(UOps.LOAD, dtype, (partial, b.const(first + lane, b.index_dtype)))
                              for lane in range(width))
                parts.append(loads[0] if width == 1 else loads)
        combined[combo] = tree(b, op, parts, dtype, width)
    return combined
# --8<-- [end:thread-reduce]


def _store_slots(lin: Linearizer, buffer: UOp, index: UOp, value: Value, dtype: DType, width: int) -> None:
    """buffer[index ... index+width-1] = value (a vector store when the lanes are 4-byte values)."""
    b = lin.b
    if width > 1 and vectorizable(dtype):
        b.emit(UOps.STORE, None, (buffer, index, as_vector(b, value, width)), hoist=False)
        return
    for n, v in enumerate(as_lanes(b, value, width) if width > 1 else (value,)):
        where = b.alu(BinaryOps.ADD, index, b.const(n, b.index_dtype))
        b.emit(UOps.STORE, None, (buffer, where, v), hoist=False)
