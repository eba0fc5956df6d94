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
def linearize(k: Kernel) -> list[UOp]:
    sizes = [prod(v.shape) for st in k.sts for v in st.views] + [prod(k.full_shape)]
    if max(sizes) >= 2**31:
        raise ValueError(f"kernel {k.name}: {max(sizes)} elements need 64-bit indices; the core's "
                         "kernels index with int32 (the full library, tinyedu.Tensor, switches to int64)")
    b = UOpBuilder()
    bufs = {n.arg.idx: n.arg.dtype for n in k.ast.walk() if isinstance(n.arg, MemBuffer)}
    data = {i: b.emit(UOps.DEFINE_GLOBAL, bufs[i], (), i) for i in sorted(bufs)}
    if 0 in k.full_shape[:k.first_reduce]:
        return b.uops  # nothing to compute
    idxs = [_open(b, f"gidx{a}", s) for a, s in enumerate(k.full_shape[:k.first_reduce])]
    values: dict[int, UOp] = {}
    if k.reduceop is not None:
        values[id(k.reduceop)] = _reduce(b, k, data, idxs)
    idxs = idxs + [b.const(0, dtypes.int32)] * (len(k.full_shape) - k.first_reduce)
    value = _lower(b, k, k.ast.src[0], data, idxs, values)
    index, _ = k.sts[0].index(idxs, IndexOps(b))
    b.emit(UOps.STORE, None, (data[0], index, value), hoist=False)
    for s in k.full_shape[:k.first_reduce]:
        if s != 1:
            b.close_range()
    return b.uops


def _reduce(b: UOpBuilder, k: Kernel, data: dict[int, UOp], idxs: list[UOp]) -> UOp:
    """acc = identity; for ridx...: acc = acc op x; the ASSIGN after the loops is the result."""
    reduce = k.reduceop
    dtype = ast_dtype(reduce.src[0])
    identity = 0 if reduce.op is ReduceOps.SUM else lowest_value(dtype)
    sizes = k.full_shape[k.first_reduce:]
    if 0 in sizes:
        return b.const(identity, dtype)  # a sum of nothing is 0 (and a max of nothing -inf)
    acc = b.define_acc(identity, dtype)
    ridxs = [_open(b, f"ridx{a}", s) for a, s in enumerate(sizes)]
    x = _lower(b, k, reduce.src[0], data, idxs + ridxs, {})
    result = b.assign(acc, b.alu(BinaryOps.ADD if reduce.op is ReduceOps.SUM else BinaryOps.MAX, acc, x))
    for s in sizes:
        if s != 1:
            b.close_range()
    return result
# --8<-- [end:linearize]


def _open(b: UOpBuilder, name: str, size: int) -> UOp:
    """The index of one axis: a loop, or the constant 0 for an axis of size 1."""
    return b.const(0, dtypes.int32) if size == 1 else b.open_range(name, size)


# --8<-- [start:lower]
def _lower(b: UOpBuilder, k: Kernel, root: LazyOp, data: dict[int, UOp], idxs: list[UOp],
           values: dict[int, UOp]) -> UOp:
    """The value of an AST node at loop indices `idxs`, sources first (a shared node once)."""
    for node in postorder([root], lambda n: () if id(n) in values else n.src):  # (not below the reduce)
        if id(node) in values:
            continue
        if node.op in (BufferOps.LOAD, BufferOps.CONST):
            index, valid = k.sts[k.bufs.index(node.arg)].index(idxs, IndexOps(b))
            padding = valid.op is not UOps.CONST  # some positions are padding, and read 0
            if valid.op is UOps.CONST and not valid.arg:
                value = b.const(0, node.arg.dtype)  # every position is padding
            elif node.op is BufferOps.CONST:
                value = b.const(node.arg.val, node.arg.dtype)
                if padding:
                    value = b.alu(TernaryOps.WHERE, valid, value, b.const(0, node.arg.dtype))
            else:  # the validity is the LOAD's gate: memory is not touched where it is false
                gate = (valid,) if padding else ()
                value = b.emit(UOps.LOAD, node.arg.dtype, (data[node.arg.idx], index, *gate))
        elif node.op is UnaryOps.CAST:
            value = b.emit(UOps.CAST, node.arg, (values[id(node.src[0])],))
        else:
            value = b.alu(node.op, *[values[id(s)] for s in node.src])
        values[id(node)] = value
    return values[id(root)]
# --8<-- [end:lower]


def ast_dtype(node: LazyOp) -> DType:
    """The dtype of an AST node's value."""
    while True:
        if isinstance(node.arg, (MemBuffer, ConstBuffer)):
            return node.arg.dtype
        if node.op is UnaryOps.CAST:
            return node.arg
        if node.op in (BinaryOps.CMPLT, BinaryOps.CMPEQ):
            return dtypes.bool
        node = node.src[-1]  # (WHERE's value is its last operand's type)
