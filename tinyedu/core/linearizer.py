"""The linearizer: a kernel AST becomes a flat list of UOps (loops, loads, arithmetic, a store).

Every program it writes has the same shape:

    DEFINE_GLOBAL data0, data1, ...        one pointer per buffer (data0 is the output)
    for gidx0, gidx1, ...:                 one iteration per output element
        acc = identity                     (only with a REDUCE: 0 for SUM, -inf for MAX)
        for ridx0, ...:                    the reduced axes
            acc = acc (+ or max) <the AST below the REDUCE, at (gidx..., ridx...)>
        data0[<output index>] = <the AST above the REDUCE, with acc in its place>

First the kernel's axes are put in that order: `Kernel` lists the buffers (`bufs`: the output, then
each distinct leaf) and gives each a view permuted so that the reduced axes come last (`sts`).
Then each LOAD asks its ShapeTracker where position (gidx..., ridx...) lives, and whether it is
padding: the index arithmetic is emitted as UOps too (`IndexOps`), so the
renderer sees one uniform list. UOpBuilder (uops.py) places each value in the outermost loop where
its sources exist: a load that does not depend on ridx is done once per output, not once per step.

`Linearizer.linearize` is that program as a sequence of steps, one method each. The seam: the
full library's Linearizer (tinyedu/codegen/linearizer.py) subclasses it, keeps `linearize`,
`define_globals`, `nothing_to_compute` and `lower_plain_reduce`, and overrides only the steps it
does differently (each step's docstring says how). Its index arithmetic is its own: symbolic
expressions with simplification rules (tinyedu/shape/symbolic.py) instead of `IndexOps`.
"""

from __future__ import annotations

from .dtype import DType, dtypes
from .helpers import dedup, postorder, prod
from .ops import BinaryOps, BufferOps, ConstBuffer, LazyOp, MemBuffer, ReduceOps, TernaryOps, UnaryOps
from .uops import UOp, UOpBuilder, UOps, lowest_value


class Kernel:
    """A kernel AST, and a view of each buffer with the axes in loop order: output axes, then reduced.

    `bufs` are the output (bufs[0]) and each distinct leaf (a buffer read through one view, or a
    constant); `sts[i]` is the view of `bufs[i]`, permuted so that the reduced axes come last. The
    AST stays as the scheduler made it: the linearizer looks each leaf's view up in `sts`. The full
    library's Kernel (tinyedu/codegen/kernel.py) is a subclass: it starts from these and goes on
    (axes of size 1 dropped, long sums in blocks, then opts that reshape and permute `sts`).
    """

    def __init__(self, ast: LazyOp):
        if ast.op is not BufferOps.STORE:
            raise ValueError(f"Kernel: an AST must be rooted at STORE, got {ast.op}; "
                             "pass ScheduleItem.ast of a compute kernel (not a COPY/EMPTY item)")
        self.ast = ast
        reduces = [n for n in ast.walk() if isinstance(n.op, ReduceOps)]
        if any(r != reduces[0] for r in reduces):
            raise ValueError("Kernel: an AST may hold one REDUCE (possibly repeated), found different ones: "
                             + ", ".join(f"{r.op.name} over {r.arg}" for r in dedup(reduces)))
        self.reduceop: LazyOp | None = reduces[0] if reduces else None
        below = dedup(leaf.arg for leaf in self.reduceop.leaves) if self.reduceop else []
        above = dedup(leaf.arg for leaf in leaves_above_reduce(ast))
        self.name, input_shape, output_shape = self._shapes(below, above)
        # --8<-- [start:full-shape]
        axes = tuple(self.reduceop.arg) if self.reduceop else ()
        order = tuple(a for a in range(len(input_shape)) if a not in axes) + tuple(sorted(axes))
        self.full_shape: tuple[int, ...] = tuple(input_shape[a] for a in order)
        self.first_reduce: int = len(input_shape) - len(axes)  # where the reduced axes start
        # bufs[0] is the output (its view reshaped to the output shape: it may have dropped the 1s)
        self.bufs: list[MemBuffer | ConstBuffer] = [ast.arg] + dedup(below + above)
        self.sts = [ast.arg.st.reshape(output_shape).permute(order)] + \
            [b.st.permute(order) for b in self.bufs[1:]]
        # --8<-- [end:full-shape]

    def is_reduce_axis(self, axis: int) -> bool:
        """True for a reduced axis (the output does not span it): here, those from first_reduce on."""
        return axis >= self.first_reduce

    @property
    def loop_axes(self) -> list[int]:
        """The axes that are loops: here every axis (the full library's has axes that are not)."""
        return list(range(len(self.full_shape)))

    def _shapes(self, below: list, above: list) -> tuple[str, tuple, tuple]:
        """The kernel's name, input shape and output shape; errors when the leaves disagree."""
        store_shape = self.ast.arg.st.shape
        if self.reduceop is None:
            input_shape = output_shape = above[0].st.shape if above else store_shape
            name = "E_" + ("_".join(map(str, input_shape)) or "1")
        else:
            input_shape = below[0].st.shape
            output_shape = tuple(1 if a in self.reduceop.arg else s for a, s in enumerate(input_shape))
            name = "r_" + ("_".join(map(str, input_shape)) or "1")
        expected = ((below, input_shape, "below the REDUCE"), (above, output_shape, "output"))
        for leaves, shape, where in expected:
            for leaf in leaves:
                if leaf.st.shape != shape:
                    raise ValueError(f"Kernel {name}: a leaf {where} has shape {leaf.st.shape}, expected "
                                     f"{shape}; the scheduler must reshape every leaf to the kernel's shape")
        if prod(store_shape) != prod(output_shape):
            raise ValueError(f"Kernel {name}: STORE shape {store_shape} has a different size than the "
                             f"output shape {output_shape}")
        return name, input_shape, output_shape


def leaves_above_reduce(ast: LazyOp) -> list[LazyOp]:
    """The LOAD/CONST leaves that are not under the REDUCE (read once per output element), left to
    right; each once, however many parents share it."""
    found, stack, seen = [], [ast], set()
    while stack:
        node = stack.pop()
        if isinstance(node.op, ReduceOps) or id(node) in seen:
            continue
        seen.add(id(node))
        if node.op in (BufferOps.LOAD, BufferOps.CONST):
            found.append(node)
        stack.extend(reversed(node.src))
    return found


class IndexOps:
    """The arithmetic ShapeTracker.index asks for, as integer (and bool) UOps."""

    def __init__(self, b: UOpBuilder):
        self.b = b

    def const(self, x: int | bool) -> UOp:
        return self.b.const(x, dtypes.bool if isinstance(x, bool) else dtypes.int32)

    def add(self, x: UOp, y: UOp) -> UOp:
        return self.b.alu(BinaryOps.ADD, x, y)

    def mul(self, x: UOp, y: UOp) -> UOp:
        return self.b.alu(BinaryOps.MUL, x, y)

    def div(self, x: UOp, y: UOp) -> UOp:
        return self.b.alu(BinaryOps.DIV, x, y)

    def mod(self, x: UOp, y: UOp) -> UOp:
        return self.b.alu(BinaryOps.MOD, x, y)

    def lt(self, x: UOp, y: UOp) -> UOp:
        return self.b.alu(BinaryOps.CMPLT, x, y)

    def and_(self, x: UOp, y: UOp) -> UOp:
        return self.b.alu(BinaryOps.MUL, x, y)  # (bools: * is AND, and the builder folds `x * True`)


# --8<-- [start:linearize]
class Linearizer:
    """Lowers one Kernel to UOps: `Linearizer(kernel).linearize()` returns the list.

    `linearize` is the whole algorithm, and each of its steps is a method: define the buffers, open
    the output loops, lower the REDUCE (its accumulator and loops), lower and store the value above
    it, close the loops. The full library's Linearizer (tinyedu/codegen/linearizer.py) is a subclass
    that keeps this skeleton and `lower_plain_reduce`, and overrides the steps it does differently:
    `index_dtype` (int64 past 2^31 elements), `open_loop`/`close_loop` (THREAD loops, packed tiles),
    `open_output_loops`/`close_output_loops` (GPU thread indices, workgroups), `reduce` (opts,
    long sums in blocks, threads), `store` and `lower` (symbolic index expressions, UPCAST vectors),
    `finish` (GPU float4 moves). Each step's docstring says what the full library does there.
    """

    def __init__(self, kernel: Kernel):
        self.kernel = kernel
        self.b = UOpBuilder(self.index_dtype())
        self.loops: dict = {}    # the index of each open loop (here by axis; the full library's by name)
        self.reduced = None      # the REDUCE's value once its loops are closed (`reduce`)

    def linearize(self) -> list[UOp]:
        k = self.kernel
        self.define_globals()
        if self.nothing_to_compute():
            return self.b.uops
        output_axes = self.open_output_loops()
        if k.reduceop is not None:
            self.reduced = self.reduce(k.reduceop)
        self.store()
        self.close_output_loops(output_axes)
        return self.finish(self.b.uops)

    def define_globals(self) -> None:
        """One DEFINE_GLOBAL per buffer, in order of `idx` (data0 is the output)."""
        buffers = {buf.idx: buf.dtype for buf in self.kernel.bufs if isinstance(buf, MemBuffer)}
        self.globals = {i: self.b.emit(UOps.DEFINE_GLOBAL, buffers[i], (), i) for i in sorted(buffers)}

    def nothing_to_compute(self) -> bool:
        """An output axis of size 0: an empty output."""
        k = self.kernel
        return any(size == 0 for a, size in enumerate(k.full_shape) if not k.is_reduce_axis(a))

    def open_output_loops(self) -> list[int]:
        """Open a loop per output axis; returns their axes. The full library's first makes a GPU
        kernel's thread indices, and opens only the axes that are loops (not UPCAST, not GPU ones)."""
        axes = [a for a in self.kernel.loop_axes if not self.kernel.is_reduce_axis(a)]
        for axis in axes:
            self.open_loop(axis)
        return axes

    def close_output_loops(self, axes: list[int]) -> None:
        """Close them, innermost first. (The full library's closes a GPU workgroup's IF first.)"""
        for axis in reversed(axes):
            self.close_loop(axis)

    def reduce(self, reduce: LazyOp):
        """The REDUCE's value after its loops. The full library's overrides this: with opts, one
        accumulator per UPCAST/UNROLL position; a long sum in blocks; partial sums of threads and of
        a GPU workgroup. Without any of these, it calls this same `lower_plain_reduce`."""
        return self.lower_plain_reduce(reduce)

    def lower_plain_reduce(self, reduce: LazyOp) -> UOp:
        """acc = identity; for ridx...: acc = acc op x; after the loops, the ASSIGN is the result.

        One scalar accumulator, one loop per reduce axis (exercise `04.lower_reduce` of chapter 04
        plugs into this method). Values that do not depend on a loop are computed before it (see
        UOpBuilder), which is only safe if the loop runs at least once: so an empty reduce emits no
        loops at all.
        """
        k, b = self.kernel, self.b
        dtype = self._dtype(reduce.src[0])
        identity = 0 if reduce.op is ReduceOps.SUM else lowest_value(dtype)
        axes = range(k.first_reduce, len(k.full_shape))
        if any(k.full_shape[a] == 0 for a in axes):
            return b.const(identity, dtype)  # a sum of nothing is 0 (and a max of nothing -inf)
        acc = b.define_acc(identity, dtype)  # before the loops: one running total per output element
        for axis in axes:
            self.open_loop(axis)
        x = self.lower(reduce.src[0])  # everything below the REDUCE, inside the reduce loops
        result = b.assign(acc, b.alu(BinaryOps.ADD if reduce.op is ReduceOps.SUM else BinaryOps.MAX, acc, x))
        for axis in reversed(axes):
            self.close_loop(axis)
        return result

    def store(self) -> None:
        """data0[index] = the AST above the REDUCE. (The full library's stores one value per UPCAST
        position, or a vector.)"""
        k = self.kernel
        position = self.position()
        value = self.lower(k.ast.src[0])
        index, _ = k.sts[0].index(position, IndexOps(self.b))
        self.b.emit(UOps.STORE, None, (self.globals[0], index, value), hoist=False)

    def finish(self, uops: list[UOp]) -> list[UOp]:
        """The finished list. (The full library's combines a GPU kernel's scalar moves into float4.)"""
        return uops
# --8<-- [end:linearize]

    def index_dtype(self) -> DType:
        """The integer type of loop counters and indices: int32 here. (The full library's picks
        int64 for a kernel whose indices may pass 2^31.)"""
        k = self.kernel
        sizes = [prod(v.shape) for st in k.sts for v in st.views] + [prod(k.full_shape)]
        if max(sizes) >= 2**31:
            raise ValueError(f"kernel {k.name}: {max(sizes)} elements need 64-bit indices; the core's "
                             "kernels index with int32 (the full library, tinyedu.Tensor, switches to int64)")
        return dtypes.int32

    def open_loop(self, axis: int) -> UOp:
        """The index of one axis: a loop, or the constant 0 for an axis of size 1. (The full library
        names its loops from `kernel.loop_names`, shares THREAD loops among threads and copies
        packed tiles before a loop.)"""
        size, reduced = self.kernel.full_shape[axis], self.kernel.is_reduce_axis(axis)
        name = f"ridx{axis - self.kernel.first_reduce}" if reduced else f"gidx{axis}"
        self.loops[axis] = self.b.const(0, dtypes.int32) if size == 1 else self.b.open_range(name, size)
        return self.loops[axis]

    def close_loop(self, axis: int) -> None:
        if self.kernel.full_shape[axis] != 1:
            self.b.close_range()
        del self.loops[axis]

    def position(self) -> list[UOp]:
        """The loop indices, one per axis of the full shape: 0 for an axis whose loop is not open
        (the reduce axes, above the REDUCE: every buffer read there has size 1 on them)."""
        return [self.loops[a] if a in self.loops else self.b.const(0, dtypes.int32)
                for a in range(len(self.kernel.full_shape))]

    def _dtype(self, node: LazyOp) -> DType:
        """The dtype of an AST node's value. (The full library's remembers the ones it found.)"""
        return ast_dtype(node)

    # --8<-- [start:lower]
    def lower(self, root: LazyOp) -> UOp:
        """The value of an AST node at the open loops' indices, sources first (a shared node once).
        (The full library's renders symbolic index expressions, and values UPCAST lanes wide.)"""
        b, k, values = self.b, self.kernel, {}
        for node in postorder([root], lambda n: () if isinstance(n.op, ReduceOps) else n.src):
            if isinstance(node.op, ReduceOps):
                value = self.reduced  # above the REDUCE: its result, computed by `reduce`
            elif node.op in (BufferOps.LOAD, BufferOps.CONST):
                index, valid = k.sts[k.bufs.index(node.arg)].index(self.position(), IndexOps(b))
                padding = valid.op is not UOps.CONST  # some positions are padding, and read 0
                if valid.op is UOps.CONST and not valid.arg:
                    value = b.const(0, node.arg.dtype)  # every position is padding
                elif node.op is BufferOps.CONST:
                    value = b.const(node.arg.val, node.arg.dtype)
                    if padding:
                        value = b.alu(TernaryOps.WHERE, valid, value, b.const(0, node.arg.dtype))
                else:  # the validity is the LOAD's gate: memory is not touched where it is false
                    gate = (valid,) if padding else ()
                    value = b.emit(UOps.LOAD, node.arg.dtype, (self.globals[node.arg.idx], index, *gate))
            elif node.op is UnaryOps.CAST:
                value = b.emit(UOps.CAST, node.arg, (values[id(node.src[0])],))
            else:
                value = b.alu(node.op, *[values[id(s)] for s in node.src])
            values[id(node)] = value
        return values[id(root)]
    # --8<-- [end:lower]


def linearize(k: Kernel) -> list[UOp]:
    """The UOps of a kernel."""
    return Linearizer(k).linearize()


def ast_dtype(node: LazyOp, known: dict[int, DType] | None = None) -> DType:
    """The dtype an AST node computes (ASTs carry dtypes on leaves and casts only; elsewhere a node
    computes its last source's dtype, which `known` may hold already)."""
    while True:
        if known is not None and id(node) in known:
            return known[id(node)]
        if node.op in (BufferOps.LOAD, BufferOps.CONST):
            return node.arg.dtype
        if node.op is UnaryOps.CAST:
            return node.arg
        if node.op in (BinaryOps.CMPLT, BinaryOps.CMPEQ):
            return dtypes.bool
        node = node.src[-1]  # (WHERE's value is its last operand's type)
