"""The linearizer: a kernel AST becomes a flat list of UOps (loops, loads, arithmetic, a store).

Every program it writes has the same shape:

    DEFINE_GLOBAL data0, data1, ...        one pointer per buffer (data0 is the output)
    for gidx0, gidx1, ...:                 one iteration per output element
        acc = identity                     (only with a REDUCE: 0 for SUM, -inf for MAX)
        for ridx0, ...:                    the reduced axes
            acc = acc (+ or max) <the AST below the REDUCE, at (gidx..., ridx...)>
        data0[<output index>] = <the AST above the REDUCE, with acc in its place>

First the kernel's axes are put in that order: `Kernel` permutes every view of the AST so that the
reduced axes come last. Then each LOAD asks its ShapeTracker where position (gidx..., ridx...)
lives, and whether it is padding: the index arithmetic is emitted as UOps too (`IndexOps`), so the
renderer sees one uniform list. UOpBuilder (uops.py) places each value in the outermost loop where
its sources exist: a load that does not depend on ridx is done once per output, not once per step.
"""

from __future__ import annotations

from dataclasses import replace

from .dtype import DType, dtypes
from .helpers import postorder, prod
from .ops import BinaryOps, BufferOps, ConstBuffer, LazyOp, MemBuffer, ReduceOps, TernaryOps, UnaryOps
from .uops import UOp, UOpBuilder, UOps, lowest_value


class Kernel:
    """A kernel AST with its axes ordered as the loops will be: output axes, then reduced axes."""

    def __init__(self, ast: LazyOp):
        out_shape = ast.arg.st.shape
        axes = ast.src[0].arg if isinstance(ast.src[0].op, ReduceOps) else ()
        self.order = tuple(a for a in range(len(out_shape)) if a not in axes) + tuple(axes)
        self.ast = _permuted(ast, self.order)
        self.reduceop = self.ast.src[0] if axes else None
        leaf = next(n for n in self.ast.walk() if n.op in (BufferOps.LOAD, BufferOps.CONST))
        self.full_shape = leaf.arg.st.shape  # (the shape below the reduce: every leaf has it)
        self.first_reduce = len(out_shape) - len(axes)
        sizes = [prod(v.shape) for n in self.ast.walk() if isinstance(n.arg, (MemBuffer, ConstBuffer))
                 for v in n.arg.st.views] + [prod(self.full_shape)]
        if max(sizes) >= 2**31:
            raise ValueError(f"kernel {self.name}: {max(sizes)} elements need 64-bit indices; the core's "
                             "kernels index with int32 (the full library, tinyedu.Tensor, switches to int64)")

    @property
    def name(self) -> str:
        return ("r_" if self.reduceop is not None else "E_") + "_".join(map(str, self.full_shape))


def _permuted(ast: LazyOp, order: tuple[int, ...]) -> LazyOp:
    """The AST with every leaf's (and the store's) view permuted to `order`."""
    memo: dict[int, LazyOp] = {}
    for node in ast.toposort():
        arg = node.arg
        if isinstance(arg, (MemBuffer, ConstBuffer)):
            arg = replace(arg, st=arg.st.permute(order))
        elif isinstance(node.op, ReduceOps):
            arg = tuple(order.index(a) for a in arg)
        memo[id(node)] = LazyOp(node.op, tuple(memo[id(s)] for s in node.src), arg)
    return memo[id(ast)]


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
    b = UOpBuilder()
    bufs = {n.arg.idx: n.arg.dtype for n in k.ast.walk() if isinstance(n.arg, MemBuffer)}
    data = {i: b.emit(UOps.DEFINE_GLOBAL, bufs[i], (), i) for i in sorted(bufs)}
    if 0 in k.full_shape[:k.first_reduce]:
        return b.uops  # nothing to compute
    idxs = [_open(b, f"gidx{a}", s) for a, s in enumerate(k.full_shape[:k.first_reduce])]
    values: dict[int, UOp] = {}
    if k.reduceop is not None:
        values[id(k.reduceop)] = _reduce(b, k, data, idxs)
    out = k.ast.arg
    idxs = idxs + [b.const(0, dtypes.int32)] * (len(k.full_shape) - k.first_reduce)
    value = _lower(b, k.ast.src[0], data, idxs, values)
    index, _ = out.st.index(idxs, IndexOps(b))
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
    x = _lower(b, reduce.src[0], data, idxs + ridxs, {})
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
def _lower(b: UOpBuilder, root: LazyOp, data: dict[int, UOp], idxs: list[UOp], values: dict[int, UOp]) -> UOp:
    """The value of an AST node at loop indices `idxs`, sources first (a shared node once)."""
    for node in postorder([root], lambda n: () if id(n) in values else n.src):  # (not below the reduce)
        if id(node) in values:
            continue
        if node.op in (BufferOps.LOAD, BufferOps.CONST):
            index, valid = node.arg.st.index(idxs, IndexOps(b))
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
