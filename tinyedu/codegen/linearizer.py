"""The linearizer: a Kernel becomes a flat list of UOps (loops, loads, arithmetic, stores).

The shape of every program it writes is the same:

    DEFINE_GLOBAL data0, data1, ...          one per buffer
    for gidx0, gidx1, ...:                   one iteration per output element
        acc = identity                       (only with a REDUCE)
        for ridx0, ...:                      the reduced axes
            acc = acc (+ or max) <the AST below the REDUCE, at (gidx..., ridx...)>
        data0[<store index>] = <the AST above the REDUCE, with the REDUCE replaced by acc>

That program is the core's `Linearizer.linearize` (tinyedu/core/linearizer.py), one step per
method; the Linearizer here subclasses it and overrides the steps below that do more.

A long float sum is written in blocks (the Kernel splits its reduce axes into BLOCK loops `bidx`
around the reduce loops, tinyedu/codegen/sum_blocks.py says why): one float32 accumulator that adds
10^8 ones stops at 2^24, so every BLOCK loop sums each of its blocks into fresh accumulators and
adds their totals to its own (`sum_levels`). The outermost level writes each block's total into a
small local array, combined after the loop in a fixed order: the same program, whether threads
share that loop or not (see local_arrays.py). A sum of 2^22 values, as written:

    for bidx0 < 64:                          the outermost level: one total per block
        acc0 = 0
        for bidx1 < 16:                      a level: acc0 adds 16 block totals
            acc1 = 0
            for ridx0 < 4096:                a block: acc1 adds 4096 values
                acc1 = acc1 + x
            acc0 = acc0 + acc1
        partial[bidx0] = acc0
    total = (partial[0] + partial[1]) + ...  pairwise, in a fixed order

Where a buffer is read, its ShapeTracker says at which index (and whether the position is valid at
all, for padding): `st.expr_idxs(loop variables)` gives two symbolic expressions, which become
integer ALU UOps through `Node.render_with` with the handler table `INDEX_OPS` (in index.py). A
position that is not valid reads 0: the LOAD carries the validity as a gate, and its index is
simplified for the valid positions only (`given_valid`), which is all it is read at.

With opts (stage 5, tinyedu/codegen/opts.py) the same program gets four more features:
- UPCAST and UNROLL axes are not loops: the loop body is written out once per position of them
  (a *combo*), with that position as a constant in the index expressions. Each UNROLL position has
  its own accumulator; they are combined after the reduce loops.
- The innermost of them is a *vector axis* when a buffer is contiguous along it (or PACKed into a
  tile whose innermost axis it is): every value is
  then W lanes wide (see tinyedu/codegen/vectorize.py), loads and stores along it are vector
  LOAD/STORE, and a sum over an UNROLL vector axis ends with a horizontal sum of the lanes.
- A THREAD loop is a RANGE whose iterations threads share; over a reduce axis (or the outermost
  level of a long sum), each iteration writes its partial result into a local array, and the
  partials are combined after the loop, in order.
- A PACK copies a buffer's tile into a local array before a loop, and the loads inside read that.
  (These two, the opts that need a local array, are in local_arrays.py.)
In an optimized kernel a SUM of products accumulates with MULACC (a fused multiply-add); THREAD alone
does not count: it changes which thread runs an iteration, not what the iteration computes.
"""

from __future__ import annotations

import itertools
from typing import Any

from tinyedu.codegen import gpu, gpu_vectors, local_arrays
from tinyedu.codegen.index import INDEX_OPS, index_dtype  # noqa: F401 - INDEX_OPS: also imported from here by notebook 04
from tinyedu.codegen.kernel import AxisKind, Kernel
from tinyedu.codegen.local_arrays import Combo  # a position of the expanded axes: ((axis, index), ...)
from tinyedu.codegen.opt import OptOps
from tinyedu.codegen.opts import pack_tile
from tinyedu.codegen.vectorize import (
    LANE,
    Value,
    alu,
    as_lanes,
    as_vector,
    dtype_of,
    horizontal,
    is_uniform,
    lane_stride,
    mask_conditions,
    tree,
    vectorizable,
)
from tinyedu.core import linearizer as core_linearizer
from tinyedu.core.dtype import DType, dtypes
from tinyedu.core.helpers import postorder
from tinyedu.core.linearizer import ast_dtype
from tinyedu.core.ops import BinaryOps, BufferOps, LazyOp, MemBuffer, ReduceOps, TernaryOps, UnaryOps
from tinyedu.core.uops import FusedOps, UOp, UOps, VectorDType, lowest_value
from tinyedu.shape import Node, NumNode, Variable, given_valid


class Linearizer(core_linearizer.Linearizer):
    """Lowers one Kernel to UOps. `Linearizer(kernel).linearize()` returns the list.

    A subclass of the core's Linearizer (tinyedu/core/linearizer.py): the skeleton `linearize` (globals,
    output loops, the REDUCE, the store, closing the loops; this one only marks the kernel linearized
    first), `nothing_to_compute` and the plain reduce `lower_plain_reduce` are the core's. This one
    overrides the steps it does differently: `index_dtype` (int64 past 2^31), `define_globals` (also
    where each leaf reads from: a PACK swaps in a local copy), `open_output_loops`/`close_output_loops`
    (a GPU kernel's thread indices and workgroup IF), `open_loop`/`close_loop` (loop names, THREAD
    loops, packed tiles), `reduce` (opts, long sums in blocks, partial sums of threads and GPU groups),
    `store` and `lower` (symbolic index expressions rendered with INDEX_OPS, UPCAST/UNROLL positions and
    vectors) and `finish` (float4 moves on a GPU).

    `max_vector` is the widest vector the target has (lanes of float32): a vector axis wider than
    that is written out lane by lane instead.
    """

    def __init__(self, kernel: Kernel, max_vector: int = 16):
        super().__init__(kernel)  # the builder (with `index_dtype`), loops, the reduce's value
        self.max_vector = 1 if kernel.gpu is not None else max_vector  # GPU: scalars
        self.memo: dict[tuple, Value] = {}   # (id(AST node), combo, width) -> its value
        self.dtypes: dict[int, DType] = {}
        self.reduced: dict[Combo, Value] = {}
        # fused multiply-add is an optimization, like the opts; THREAD alone is not one: it only shares
        # the iterations among threads, so a kernel computes the same bits with THREADS=1 and 2
        self.mulacc = any(opt.op is not OptOps.THREAD for opt in kernel.applied_opts)
        self.vector_axis = self._vector_axis()
        self.width = kernel.full_shape[self.vector_axis] if self.vector_axis is not None else 1
        self.masks = mask_conditions(kernel.ast, self._dtype)
        self.grouped = kernel.reduceop is not None and bool(kernel.axes_of(AxisKind.GROUP))

    def index_dtype(self) -> DType:
        return index_dtype(self.kernel)  # int32 indices, or int64 past 2^31 elements

    def index(self, node: Node) -> UOp:
        return node.render_with(INDEX_OPS, (self.b, self.loops))

    # --8<-- [start:linearize]
    def linearize(self) -> list[UOp]:
        self.kernel.linearized = True  # (printing the kernel says so)
        return super().linearize()

    def define_globals(self) -> None:
        super().define_globals()
        k = self.kernel
        # where each LOAD leaf reads from: its buffer through its view (a PACK swaps in a local copy)
        self.sources = {pos: (self.globals[buf.idx], k.sts[pos]) for pos, buf in enumerate(k.bufs)
                        if pos > 0 and isinstance(buf, MemBuffer)}
        self.positions = {buf: pos for pos, buf in enumerate(k.bufs) if pos > 0}

    def open_output_loops(self) -> list[int]:
        self.loops.update(gpu.thread_indices(self.kernel, self.b))  # a GPU kernel's thread indices
        return super().open_output_loops()  # (the kernel's `loop_axes`: no GPU or expanded axes)

    def reduce(self, reduce: LazyOp) -> dict[Combo, Value]:
        k = self.kernel
        if k.kinds and k.kinds[0] in (AxisKind.THREAD, AxisKind.BLOCK) and k.is_reduce_axis(0):
            results = local_arrays.lower_thread_reduce(self, reduce)  # threads over a reduce, or the
        else:                                                          # blocks of a long sum: partials
            results = self.lower_reduce(reduce)
        if self.grouped:  # GPU: the threads of a workgroup each reduced a part
            results = gpu.combine_groups(k, self.b, self.loops, self._dtype(reduce.src[0]), results)
        return results

    def close_output_loops(self, axes: list[int]) -> None:
        if self.grouped:
            gpu.finish_groups(self.b, inside_loops=bool(axes))
        for _ in axes:
            self.b.close_range()  # (no barrier after an output loop: only `close_loop` puts one)

    def finish(self, uops: list[UOp]) -> list[UOp]:
        # float4 moves for a GPU's threads; a CPU's SIMD lanes gather them, so those keep scalars
        vectors = self.kernel.gpu is not None and not self.kernel.gpu.threads_are_simd_lanes
        return gpu_vectors.combine_vector_accesses(uops) if vectors else uops
    # --8<-- [end:linearize]

    def open_loop(self, axis: int) -> UOp:
        """Open the loop of `axis` (after copying the tiles that are packed before it)."""
        k = self.kernel
        for position, pack_axis in k.packs:
            if pack_axis == axis and k.gpu is not None:  # GPU: the workgroup's tile in shared memory
                self.sources[position] = gpu.stage_tile(k, self.b, self.loops, position, axis,
                                                         self.globals[k.bufs[position].idx], self.load)
            elif pack_axis == axis:
                self.sources[position] = local_arrays.pack(self, position, axis)
        name = k.loop_names[axis]
        threads = k.threads if k.kinds[axis] is AxisKind.THREAD else 1
        self.loops[name] = self.b.open_range(name, k.full_shape[axis], threads)
        return self.loops[name]

    def close_loop(self, axis: int) -> None:
        """Close the loop of `axis`; on a GPU, after a loop that read a staged tile, a barrier: every
        thread is done with the tile before the next iteration around copies the next one over it."""
        self.b.close_range()
        if self.kernel.gpu is not None and any(pack_axis == axis for _, pack_axis in self.kernel.packs):
            self.b.barrier()

    # ---- positions of the expanded axes ----
    def combos(self, reduce: bool) -> list[Combo]:
        """Every position of the expanded axes other than the vector axis (UNROLL ones only if
        `reduce`, i.e. below the REDUCE), first axis slowest."""
        k = self.kernel
        axes = [a for a in k.expanded_axes
                if a != self.vector_axis and (reduce or k.kinds[a] is AxisKind.UPCAST)]
        return [tuple(zip(axes, position, strict=True))
                for position in itertools.product(*(range(k.full_shape[a]) for a in axes))]

    def width_above(self) -> int:
        """Lanes of the values above the REDUCE: the vector axis counts only if it is an output axis."""
        k = self.kernel
        upcast = self.vector_axis is not None and k.kinds[self.vector_axis] is AxisKind.UPCAST
        return self.width if upcast else 1

    # --8<-- [start:reduce]
    def lower_reduce(self, reduce: LazyOp) -> dict[Combo, Value]:
        """The REDUCE's value at each position of the output's expanded axes (the key `()` when
        there are none). The kernel as written has one accumulator (`lower_plain_reduce`), unless it
        is a long sum in blocks: then each level has its own (`sum_levels`)."""
        if not self.kernel.applied_opts and not self.kernel.blocked:
            return {(): self.lower_plain_reduce(reduce)}  # the core's
        return self.lower_expanded_reduce(reduce)

    # --8<-- [end:reduce]

    # --8<-- [start:reduce-expanded]
    def lower_expanded_reduce(self, reduce: LazyOp) -> dict[Combo, Value]:
        """`lower_plain_reduce` with opts: one accumulator per position of the UPCAST and UNROLL
        axes (a vector one along the vector axis); after the loops, the UNROLL accumulators of each
        output are combined, and a vector axis that was reduced is summed across its lanes. As
        there, an empty reduce (or output) emits no loops at all. A long sum gets a set of
        accumulators per level (`sum_levels`).
        """
        k, b, width = self.kernel, self.b, self.width
        dtype = self._dtype(reduce.src[0])
        identity = 0 if reduce.op is ReduceOps.SUM else lowest_value(dtype)
        op = BinaryOps.ADD if reduce.op is ReduceOps.SUM else BinaryOps.MAX
        # the reduce loops not opened yet (a THREAD loop over the reduce is open around this)
        reduce_loops = [a for a in k.loop_axes if k.is_reduce_axis(a) and k.loop_names[a] not in self.loops]
        if any(k.full_shape[a] == 0 for a in reduce_loops + k.expanded_axes):
            return {combo: b.const(identity, dtype) for combo in self.combos(reduce=False)}
        accs = self.sum_levels(reduce, op, reduce_loops, identity, dtype)
        combos = self.combos(reduce=True)
        results = {}
        for out_combo in self.combos(reduce=False):
            parts = [accs[c] for c in combos if _restrict(c, out_combo)]
            total = tree(b, op, parts, dtype, width)
            if self.width_above() == 1 and width > 1:  # the vector axis was reduced: sum its lanes
                total = horizontal(b, op, total, width)
            results[out_combo] = total
        return results
    # --8<-- [end:reduce-expanded]

    # --8<-- [start:sum-levels]
    def sum_levels(self, reduce: LazyOp, op: BinaryOps, loops: list[int], identity: Any,
                   dtype: DType) -> dict[Combo, Value]:
        """Open `loops` and accumulate into fresh accumulators (one per position of the expanded
        axes); returns them after the loops.

        A BLOCK loop (a level of a long sum, see tinyedu/codegen/sum_blocks.py) gets accumulators
        of its own: each iteration sums its block into new ones (the levels inside, recursively)
        and adds their totals to its own, lane by lane. So no accumulator adds more than a block.
        """
        k, b, combos = self.kernel, self.b, self.combos(reduce=True)
        accs = {combo: self.define_acc(identity, dtype, self.width) for combo in combos}
        if loops and k.kinds[loops[0]] is AxisKind.BLOCK:
            self.open_loop(loops[0])
            block = self.sum_levels(reduce, op, loops[1:], identity, dtype)
            for combo in combos:  # the level's total += the block's total, lane by lane
                total = alu(b, op, [accs[combo], block[combo]], dtype, self.width)
                accs[combo] = self.update(accs[combo], total)
            self.close_loop(loops[0])
            return accs
        for axis in loops:
            self.open_loop(axis)
        for combo in combos:
            accs[combo] = self.accumulate(reduce, op, accs[combo], combo)
        for axis in reversed(loops):
            self.close_loop(axis)
        return accs
    # --8<-- [end:sum-levels]

    def define_acc(self, identity: Any, dtype: DType, width: int) -> Value:
        if width == 1:
            return self.b.define_acc(identity, dtype)
        if vectorizable(dtype):
            return self.b.define_acc(identity, VectorDType(dtype, width))
        return tuple(self.b.define_acc(identity, dtype) for _ in range(width))

    def accumulate(self, reduce: LazyOp, op: BinaryOps, acc: Value, combo: Combo) -> Value:
        """acc = acc op x (or acc = MULACC(a, b, acc) for a sum of products a*b) at this position."""
        b, width, src = self.b, self.width, reduce.src[0]
        dtype = self._dtype(src)
        if self.mulacc and op is BinaryOps.ADD and src.op is BinaryOps.MUL and dtype == dtypes.float32:
            factors = [self.lower(s, combo, width) for s in src.src]
            new = alu(b, FusedOps.MULACC, [*factors, acc], dtype, width)
        else:
            new = alu(b, op, [acc, self.lower(src, combo, width)], dtype, width)
        return self.update(acc, new)

    def update(self, acc: Value, new: Value) -> Value:
        """acc = new (lane by lane for an accumulator made of scalars)."""
        b, width = self.b, self.width
        if isinstance(acc, tuple):
            return tuple(b.assign(a, v) for a, v in zip(acc, as_lanes(b, new, width), strict=True))
        return b.assign(acc, as_vector(b, new, width) if width > 1 else new)

    # ---- the STORE ----
    def store(self) -> None:
        k = self.kernel
        out, width = k.bufs[0], self.width_above()
        for combo in self.combos(reduce=False):
            value = self.lower(k.ast.src[0], combo, width)
            if dtype_of(value) != out.dtype:
                value = self.cast(value, out.dtype, width)
            index, valid = k.sts[0].expr_idxs(self.idxs(k.sts[0].shape, combo, width))
            if not (isinstance(valid, NumNode) and valid.b == 1):
                raise NotImplementedError(f"Kernel {k.name}: STORE through a masked view {k.sts[0]}")
            self.store_at(self.globals[out.idx], index, value, out.dtype, width)

    def store_at(self, buffer: UOp, index: Node, value: Value, dtype: DType, width: int) -> None:
        """buffer[index] = value: one vector STORE where the index moves by 1 per lane, else per lane."""
        b = self.b
        lane = Variable(LANE, 0, width - 1)
        if width > 1 and lane_stride(index, lane) == 1 and vectorizable(dtype):
            first = self.index(index.substitute({LANE: 0}))
            b.emit(UOps.STORE, None, (buffer, first, as_vector(b, value, width)), hoist=False)
            return
        lanes = as_lanes(b, value, width) if width > 1 else (value,)
        for n, v in enumerate(lanes):
            where = index.substitute({LANE: n}) if width > 1 else index
            b.emit(UOps.STORE, None, (buffer, self.index(where), v), hoist=False)

    # ---- values of AST nodes ----
    def idx(self, axis: int, size: int) -> Node:
        """The index of a loop axis in a buffer of this size there (a size-1 axis reads at 0)."""
        return NumNode(0) if size == 1 else Variable(self.kernel.loop_names[axis], 0, max(size - 1, 0))

    def idxs_for(self, shape: tuple[int, ...]) -> list[Node]:
        """Loop variables to index a buffer of `shape`; an axis it does not span (size 1) reads at 0."""
        return [self.idx(a, size) for a, size in enumerate(shape)]

    def idxs(self, shape: tuple[int, ...], combo: Combo, width: int) -> list[Node]:
        """Index variables at one position of the expanded axes (`lane` for the vector axis)."""
        fixed = dict(combo)
        idxs: list[Node] = []
        for a, size in enumerate(shape):
            if size == 1:
                idxs.append(NumNode(0))
            elif a == self.vector_axis and width > 1:
                idxs.append(Variable(LANE, 0, width - 1))
            elif a in fixed:
                idxs.append(NumNode(fixed[a]))
            else:
                idxs.append(self.idx(a, size))
        return idxs

    def _dtype(self, node: LazyOp) -> DType:
        if id(node) not in self.dtypes:
            for n in _postorder(node, into_reduce=True, known=self.dtypes):
                self.dtypes.setdefault(id(n), ast_dtype(n, self.dtypes))
        return self.dtypes[id(node)]

    def lower(self, root: LazyOp, combo: Combo = (), width: int = 1) -> Value:
        """The value of an AST node at one position of the expanded axes, sources first
        (iteratively: ASTs can be deep)."""
        for node in _postorder(root):
            key = (id(node), combo, width)
            if key not in self.memo:
                self.memo[key] = self._lower_one(node, combo, width)
        return self.memo[(id(root), combo, width)]

    # --8<-- [start:lower-one]
    def _lower_one(self, node: LazyOp, combo: Combo, width: int) -> Value:
        b, dtype = self.b, self._dtype(node)
        if isinstance(node.op, ReduceOps):
            return self.reduced[combo]  # above the REDUCE, combos are positions of the outputs
        if node.op in (BufferOps.LOAD, BufferOps.CONST):
            if node.op is BufferOps.CONST:
                st = self.kernel.sts[self.positions[node.arg]]
                index, valid = st.expr_idxs(self.idxs(st.shape, combo, width))
                return self.const(node.arg.val, dtype, valid, width)
            buffer, st = self.sources[self.positions[node.arg]]
            index, valid = st.expr_idxs(self.idxs(st.shape, combo, width))
            return self.load(buffer, index, valid, dtype, width)
        srcs = [self.memo[(id(s), combo, width)] for s in node.src]
        if node.op is UnaryOps.CAST:
            return srcs[0] if dtype_of(srcs[0]) == dtype else self.cast(srcs[0], dtype, width)
        return alu(b, node.op, srcs, dtype, width, mask_ok=id(node) in self.masks)
    # --8<-- [end:lower-one]

    # --8<-- [start:vector-load]
    def load(self, buffer: UOp, index: Node, valid: Node, dtype: DType, width: int) -> Value:
        """buffer[index] where valid (else 0): a scalar load if no lane moves it, a vector load if it
        moves by 1 per lane, else one (gated) scalar load per lane."""
        b = self.b
        if isinstance(valid, NumNode) and valid.b == 0:
            return b.const(0, dtype)  # every position is padding
        lane = Variable(LANE, 0, max(width - 1, 0))
        gate_moves = width > 1 and any(v.name == LANE for v in valid.vars())
        if not gate_moves:  # (the index counts only where valid is true: simpler there)
            index = given_valid(index, valid)
        stride = lane_stride(index, lane) if width > 1 else 0
        if not gate_moves and stride in (0, 1) and (stride == 0 or vectorizable(dtype)):
            gate = () if isinstance(valid, NumNode) else (self.index(valid),)
            if stride == 0:
                return b.emit(UOps.LOAD, dtype, (buffer, self.index(index), *gate))
            return b.emit(UOps.LOAD, VectorDType(dtype, width),
                          (buffer, self.index(index.substitute({LANE: 0})), *gate))
        lanes = []
        for n in range(width):
            lane_valid = valid.substitute({LANE: n})
            if isinstance(lane_valid, NumNode) and lane_valid.b == 0:
                lanes.append(b.const(0, dtype))
                continue
            gate = () if isinstance(lane_valid, NumNode) else (self.index(lane_valid),)
            where = given_valid(index.substitute({LANE: n}), lane_valid)
            lanes.append(b.emit(UOps.LOAD, dtype, (buffer, self.index(where), *gate)))
        return tuple(lanes)
    # --8<-- [end:vector-load]

    def const(self, value: Any, dtype: DType, valid: Node, width: int) -> Value:
        """A constant seen through a (maybe padded) view: 0 where the view is padding."""
        b = self.b
        if isinstance(valid, NumNode):
            return b.const(value if valid.b else 0, dtype)
        if width > 1 and any(v.name == LANE for v in valid.vars()):
            return tuple(self.const(value, dtype, valid.substitute({LANE: n}), 1) for n in range(width))
        return b.alu(TernaryOps.WHERE, self.index(valid), b.const(value, dtype), b.const(0, dtype))

    def cast(self, value: Value, dtype: DType, width: int) -> Value:
        """A CAST, lane by lane (casts have no vector form: their edge cases are per element)."""
        b = self.b
        if width == 1 or is_uniform(value):
            return b.emit(UOps.CAST, dtype, (value,))
        return tuple(b.emit(UOps.CAST, dtype, (v,)) for v in as_lanes(b, value, width))

    def _vector_axis(self) -> int | None:
        """The innermost expanded axis, if its size is a vector width and a 4-byte buffer is
        contiguous along it (stride 1), or is packed (PACK) into a tile whose innermost axis it
        is: then values are vectors along it."""
        k = self.kernel
        if not k.expanded_axes:
            return None
        axis = k.expanded_axes[-1]
        size = k.full_shape[axis]
        if size not in (2, 4, 8, 16) or size > self.max_vector:
            return None
        for buf, st in zip(k.bufs, k.sts, strict=True):
            if isinstance(buf, MemBuffer) and vectorizable(buf.dtype) and st.shape[axis] == size and \
                    st.real_strides()[axis] == 1:
                return axis
        for position, pack_axis in k.packs:
            tile = pack_tile(k, position, pack_axis)
            if k.gpu is None and vectorizable(k.bufs[position].dtype) and tile and tile[-1] == axis:
                return axis
        return None


def _restrict(combo: Combo, out_combo: Combo) -> bool:
    """Whether a position of all expanded axes lies at this position of the output ones."""
    fixed = dict(combo)
    return all(fixed[a] == i for a, i in out_combo)


def _postorder(root: LazyOp, into_reduce: bool = False, known: dict | None = None) -> list[LazyOp]:
    """Distinct nodes of the AST under `root`, every node after its sources.

    The walk stops at a REDUCE below `root` (its loops are lowered separately) unless `into_reduce`,
    and at nodes whose id is in `known` (already handled).
    """
    known = known or {}
    if id(root) in known:
        return []

    def sources(node: LazyOp) -> list[LazyOp]:
        if not into_reduce and isinstance(node.op, ReduceOps):
            return []
        return [s for s in node.src if id(s) not in known]
    return postorder([root], sources)


def linearize(kernel: Kernel, max_vector: int = 16) -> list[UOp]:
    """The UOps of a kernel."""
    return Linearizer(kernel, max_vector).linearize()
