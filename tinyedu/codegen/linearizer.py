"""The linearizer: a Kernel becomes a flat list of UOps (loops, loads, arithmetic, stores).

The shape of every program it writes is the same:

    DEFINE_GLOBAL data0, data1, ...          one per buffer
    for gidx0, gidx1, ...:                   one iteration per output element
        acc = identity                       (only with a REDUCE)
        for ridx0, ...:                      the reduced axes
            acc = acc (+ or max) <the AST below the REDUCE, at (gidx..., ridx...)>
        data0[<store index>] = <the AST above the REDUCE, with the REDUCE replaced by acc>

Where a buffer is read, its ShapeTracker says at which index (and whether the position is valid at
all, for padding): `st.expr_idxs(loop variables)` gives two symbolic expressions, which become
integer ALU UOps through `Node.render_with` with the handler table `INDEX_OPS` below. A position
that is not valid reads 0: the LOAD carries the validity as a gate.
"""

from __future__ import annotations

from tinyedu.codegen.kernel import Kernel
from tinyedu.codegen.uops import UOp, UOpBuilder, UOps, lowest_value
from tinyedu.dtype import DType, dtypes
from tinyedu.ops import BinaryOps, BufferOps, LazyOp, MemBuffer, ReduceOps, TernaryOps, UnaryOps
from tinyedu.shape import AndNode, DivNode, LtNode, ModNode, MulNode, Node, NumNode, SumNode, Variable

# ---- symbolic index expressions -> integer UOps ----
# ctx is (builder, {loop name: RANGE uop}); every handler returns a UOp.


# --8<-- [start:index-ops]
def _variable(n: Variable, ops: dict, ctx: tuple) -> UOp:
    return ctx[1][n.name]


def _binary(op: BinaryOps):
    return lambda n, ops, ctx: ctx[0].alu(op, n.a.render_with(ops, ctx), ctx[0].const(n.b, dtypes.int32))


def _sum(n: SumNode, ops: dict, ctx: tuple) -> UOp:
    """a + b*3 - c - 2: positive terms are added, negative ones subtracted (so a flip reads `3-gidx0`)."""
    b = ctx[0]
    plus = [t for t in n.nodes if not isinstance(t, NumNode) and not (isinstance(t, MulNode) and t.b < 0)]
    minus = [MulNode(t.a, -t.b) if t.b != -1 else t.a for t in n.nodes if isinstance(t, MulNode) and t.b < 0]
    constant = sum(t.b for t in n.nodes if isinstance(t, NumNode))
    total = b.const(0, dtypes.int32)
    for term in plus:
        total = b.alu(BinaryOps.ADD, total, term.render_with(ops, ctx))
    if constant > 0 or not plus:
        total = b.alu(BinaryOps.ADD, total, b.const(constant, dtypes.int32))
    for term in minus:
        total = b.alu(BinaryOps.SUB, total, term.render_with(ops, ctx))
    if constant < 0 and plus:
        total = b.alu(BinaryOps.SUB, total, b.const(-constant, dtypes.int32))
    return total


def _less_than(n: LtNode, ops: dict, ctx: tuple) -> UOp:
    b = ctx[0]
    if isinstance(n.a, MulNode) and n.a.b == -1:  # -x < c  is  -c < x: no negation needed
        return b.alu(BinaryOps.CMPLT, b.const(-n.b, dtypes.int32), n.a.a.render_with(ops, ctx))
    return b.alu(BinaryOps.CMPLT, n.a.render_with(ops, ctx), b.const(n.b, dtypes.int32))


def _and(n: AndNode, ops: dict, ctx: tuple) -> UOp:
    result = n.nodes[0].render_with(ops, ctx)
    for child in n.nodes[1:]:
        result = ctx[0].alu(BinaryOps.MUL, result, child.render_with(ops, ctx))  # bool MUL is AND
    return result


INDEX_OPS = {
    NumNode: lambda n, ops, ctx: ctx[0].const(n.b, dtypes.int32),
    Variable: _variable,
    MulNode: _binary(BinaryOps.MUL),
    DivNode: _binary(BinaryOps.DIV),
    ModNode: _binary(BinaryOps.MOD),
    SumNode: _sum,
    LtNode: _less_than,
    AndNode: _and,
}
# --8<-- [end:index-ops]


def ast_dtype(node: LazyOp, known: dict[int, DType]) -> DType:
    """The dtype an AST node computes (ASTs carry dtypes on leaves and casts only)."""
    if node.op in (BufferOps.LOAD, BufferOps.CONST):
        return node.arg.dtype
    if node.op is UnaryOps.CAST:
        return node.arg
    if node.op in (BinaryOps.CMPLT, BinaryOps.CMPEQ):
        return dtypes.bool
    return known[id(node.src[-1])]


class Linearizer:
    """Lowers one Kernel to UOps. `Linearizer(kernel).linearize()` returns the list."""

    def __init__(self, kernel: Kernel):
        self.kernel = kernel
        self.b = UOpBuilder()
        self.loops: dict[str, UOp] = {}
        self.memo: dict[int, UOp] = {}       # id(AST node) -> its value (the AST repeats objects)
        self.dtypes: dict[int, DType] = {}
        self.reduce_result: UOp | None = None

    def index(self, node: Node) -> UOp:
        return node.render_with(INDEX_OPS, (self.b, self.loops))

    # --8<-- [start:linearize]
    def linearize(self) -> list[UOp]:
        k, b = self.kernel, self.b
        buffers = {buf.idx: buf.dtype for buf in k.bufs if isinstance(buf, MemBuffer)}
        self.globals = {idx: b.emit(UOps.DEFINE_GLOBAL, buffers[idx], (), idx) for idx in sorted(buffers)}
        if 0 in k.full_shape[:k.first_reduce]:
            return b.uops  # an empty output: there is nothing to compute
        names = k.loop_names
        for name, size in zip(names[:k.first_reduce], k.full_shape[:k.first_reduce], strict=True):
            self.loops[name] = b.open_range(name, size)
        if k.reduceop is not None:
            self.reduce_result = self.lower_reduce(k.reduceop)
        store = k.bufs[0]
        value = self.lower(k.ast.src[0])
        if value.dtype != store.dtype:
            value = b.emit(UOps.CAST, store.dtype, (value,))
        index, valid = k.sts[0].expr_idxs(self.idxs_for(k.sts[0].shape))
        if not (isinstance(valid, NumNode) and valid.b == 1):
            raise NotImplementedError(f"Kernel {k.name}: STORE through a masked view {k.sts[0]}")
        b.emit(UOps.STORE, None, (self.globals[store.idx], self.index(index), value), hoist=False)
        for _ in range(k.first_reduce):
            b.close_range()
        return b.uops
    # --8<-- [end:linearize]

    # --8<-- [start:reduce]
    def lower_reduce(self, reduce: LazyOp) -> UOp:
        """acc = identity; for ridx...: acc = acc op x; the value after the loops is the result.

        Values that do not depend on a loop are computed before it (see UOpBuilder), which is only
        safe if the loop runs at least once: so an empty reduce (or output) emits no loops at all.
        """
        k, b = self.kernel, self.b
        dtype = self._dtype(reduce.src[0])
        identity = 0 if reduce.op is ReduceOps.SUM else lowest_value(dtype)
        if 0 in k.full_shape[k.first_reduce:]:
            return b.const(identity, dtype)  # reducing no elements gives the identity (NUMPY does too)
        acc = b.define_acc(identity, dtype)
        names = k.loop_names
        for name, size in zip(names[k.first_reduce:], k.full_shape[k.first_reduce:], strict=True):
            self.loops[name] = b.open_range(name, size)
        x = self.lower(reduce.src[0])
        result = b.assign(acc, b.alu(BinaryOps.ADD if reduce.op is ReduceOps.SUM else BinaryOps.MAX, acc, x))
        for _ in names[k.first_reduce:]:
            b.close_range()
        return result
    # --8<-- [end:reduce]

    def idxs_for(self, shape: tuple[int, ...]) -> list[Node]:
        """Loop variables to index a buffer of `shape`; an axis it does not span (size 1) reads at 0."""
        k = self.kernel
        return [NumNode(0) if size == 1 else Variable(name, 0, max(full - 1, 0))
                for name, size, full in zip(k.loop_names, shape, k.full_shape, strict=True)]

    def _dtype(self, node: LazyOp) -> DType:
        if id(node) not in self.dtypes:
            for n in _postorder(node, into_reduce=True, known=self.dtypes):
                self.dtypes.setdefault(id(n), ast_dtype(n, self.dtypes))
        return self.dtypes[id(node)]

    def lower(self, root: LazyOp) -> UOp:
        """The UOp computing an AST node, sources first (iteratively: ASTs can be deep)."""
        for node in _postorder(root):
            if id(node) not in self.memo:
                self.memo[id(node)] = self._lower_one(node)
        return self.memo[id(root)]

    # --8<-- [start:lower-one]
    def _lower_one(self, node: LazyOp) -> UOp:
        b, dtype = self.b, self._dtype(node)
        if isinstance(node.op, ReduceOps):
            assert self.reduce_result is not None, "the REDUCE is lowered before the ops above it"
            return self.reduce_result
        if node.op in (BufferOps.LOAD, BufferOps.CONST):
            st = self.kernel.st_of(node.arg)
            index, valid = st.expr_idxs(self.idxs_for(st.shape))
            if isinstance(valid, NumNode) and valid.b == 0:
                return b.const(0, dtype)  # every position is padding
            gate = () if isinstance(valid, NumNode) else (self.index(valid),)
            if node.op is BufferOps.CONST:
                value = b.const(node.arg.val, dtype)
                return b.alu(TernaryOps.WHERE, *gate, value, b.const(0, dtype)) if gate else value
            return b.emit(UOps.LOAD, dtype, (self.globals[node.arg.idx], self.index(index), *gate))
        srcs = [self.memo[id(s)] for s in node.src]
        if node.op is UnaryOps.CAST:
            return srcs[0] if srcs[0].dtype == dtype else b.emit(UOps.CAST, dtype, (srcs[0],))
        return b.alu(node.op, *srcs, dtype=dtype)
    # --8<-- [end:lower-one]


def _postorder(root: LazyOp, into_reduce: bool = False, known: dict | None = None) -> list[LazyOp]:
    """Distinct nodes of the AST under `root`, every node after its sources.

    The walk stops at a REDUCE below `root` (its loops are lowered separately) unless `into_reduce`,
    and at nodes whose id is in `known` (already handled).
    """
    order: list[LazyOp] = []
    done: set[int] = set()
    known = known or {}
    stack: list[tuple[LazyOp, bool]] = [(root, False)]
    while stack:
        node, sources_done = stack.pop()
        if id(node) in done or id(node) in known:
            continue
        if sources_done:
            done.add(id(node))
            order.append(node)
            continue
        stack.append((node, True))
        if into_reduce or not isinstance(node.op, ReduceOps):
            stack.extend((s, False) for s in reversed(node.src) if id(s) not in done and id(s) not in known)
    return order


def linearize(kernel: Kernel) -> list[UOp]:
    """The UOps of a kernel."""
    return Linearizer(kernel).linearize()
