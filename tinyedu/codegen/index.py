"""Symbolic index expressions -> integer UOps: the table the linearizer renders indexes with.

`st.expr_idxs(loop variables)` gives a buffer's index (and validity) as a symbolic expression
(tinyedu/shape/symbolic.py); `node.render_with(INDEX_OPS, (builder, loops))` turns it into integer ALU
UOps, one handler per node type. ctx is (builder, {loop name: RANGE uop}); every handler returns a UOp.

The integers are int32, the C `int`, unless a value might not fit: a kernel over a buffer of more
than 2^31 - 1 elements computes indices past 2^31, which wrap around to negative numbers in 32
bits (and read or write outside the buffer). `index_dtype` looks at the bounds every index
expression and every partial result can reach, and picks int64 for such a kernel only: 32-bit
indices read better and run as fast everywhere else.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tinyedu.core.dtype import DType, dtypes
from tinyedu.core.ops import BinaryOps
from tinyedu.core.uops import UOp
from tinyedu.shape import AndNode, DivNode, LtNode, ModNode, MulNode, Node, NumNode, SumNode, Variable

if TYPE_CHECKING:
    from tinyedu.codegen.kernel import Kernel

INT32_LIMIT = 2**31 - 1


def index_dtype(kernel: "Kernel") -> DType:
    """int64 if an index of this kernel (or a partial sum on the way to one, or a loop bound) may
    pass 2^31 - 1 in magnitude, else int32."""
    if any(size > INT32_LIMIT for size in kernel.full_shape):
        return dtypes.int64
    for st in kernel.sts:
        loops = [NumNode(0) if size <= 1 else Variable(f"i{a}", 0, size - 1)
                 for a, size in enumerate(st.shape)]
        if any(largest_value(node) > INT32_LIMIT for node in st.expr_idxs(loops)):
            return dtypes.int64
    return dtypes.int32


def largest_value(node: Node) -> int:
    """The largest magnitude `node` or any part of it can take while it is computed: its own bounds,
    its children's, and for a sum every partial sum (bounded by the sum of its terms' magnitudes)."""
    magnitude = max(abs(node.min), abs(node.max))
    children = list(getattr(node, "nodes", ()))
    if isinstance(getattr(node, "a", None), Node):
        children.append(node.a)
    if isinstance(node, SumNode):
        magnitude = max(magnitude, sum(max(abs(t.min), abs(t.max)) for t in node.nodes))
    return max([magnitude, *(largest_value(child) for child in children)])


# --8<-- [start:index-ops]
def _variable(n: Variable, ops: dict, ctx: tuple) -> UOp:
    return ctx[1][n.name]


def _binary(op: BinaryOps):
    def render(n: Node, ops: dict, ctx: tuple) -> UOp:
        b = ctx[0]
        return b.alu(op, n.a.render_with(ops, ctx), b.const(n.b, b.index_dtype))
    return render


def _sum(n: SumNode, ops: dict, ctx: tuple) -> UOp:
    """a + b*3 - c - 2: positive terms are added, negative ones subtracted (so a flip reads `3-gidx0`)."""
    b = ctx[0]
    plus = [t for t in n.nodes if not isinstance(t, NumNode) and not (isinstance(t, MulNode) and t.b < 0)]
    minus = [MulNode(t.a, -t.b) if t.b != -1 else t.a for t in n.nodes if isinstance(t, MulNode) and t.b < 0]
    constant = sum(t.b for t in n.nodes if isinstance(t, NumNode))
    total = b.const(0, b.index_dtype)
    for term in plus:
        total = b.alu(BinaryOps.ADD, total, term.render_with(ops, ctx))
    if constant > 0 or not plus:
        total = b.alu(BinaryOps.ADD, total, b.const(constant, b.index_dtype))
    for term in minus:
        total = b.alu(BinaryOps.SUB, total, term.render_with(ops, ctx))
    if constant < 0 and plus:
        total = b.alu(BinaryOps.SUB, total, b.const(-constant, b.index_dtype))
    return total


def _less_than(n: LtNode, ops: dict, ctx: tuple) -> UOp:
    b = ctx[0]
    if isinstance(n.a, MulNode) and n.a.b == -1:  # -x < c  is  -c < x: no negation needed
        return b.alu(BinaryOps.CMPLT, b.const(-n.b, b.index_dtype), n.a.a.render_with(ops, ctx))
    return b.alu(BinaryOps.CMPLT, n.a.render_with(ops, ctx), b.const(n.b, b.index_dtype))


def _and(n: AndNode, ops: dict, ctx: tuple) -> UOp:
    result = n.nodes[0].render_with(ops, ctx)
    for child in n.nodes[1:]:
        result = ctx[0].alu(BinaryOps.MUL, result, child.render_with(ops, ctx))  # bool MUL is AND
    return result


INDEX_OPS = {
    NumNode: lambda n, ops, ctx: ctx[0].const(n.b, ctx[0].index_dtype),
    Variable: _variable,
    MulNode: _binary(BinaryOps.MUL),
    DivNode: _binary(BinaryOps.DIV),
    ModNode: _binary(BinaryOps.MOD),
    SumNode: _sum,
    LtNode: _less_than,
    AndNode: _and,
}
# --8<-- [end:index-ops]
