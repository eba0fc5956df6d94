"""Symbolic index expressions -> integer UOps: the table the linearizer renders indexes with.

`st.expr_idxs(loop variables)` gives a buffer's index (and validity) as a symbolic expression
(tinyedu/shape/symbolic.py); `node.render_with(INDEX_OPS, (builder, loops))` turns it into integer ALU
UOps, one handler per node type. ctx is (builder, {loop name: RANGE uop}); every handler returns a UOp.
"""

from __future__ import annotations

from tinyedu.codegen.uops import INDEX_DTYPE, UOp
from tinyedu.ops import BinaryOps
from tinyedu.shape import AndNode, DivNode, LtNode, ModNode, MulNode, NumNode, SumNode, Variable


# --8<-- [start:index-ops]
def _variable(n: Variable, ops: dict, ctx: tuple) -> UOp:
    return ctx[1][n.name]


def _binary(op: BinaryOps):
    return lambda n, ops, ctx: ctx[0].alu(op, n.a.render_with(ops, ctx), ctx[0].const(n.b, INDEX_DTYPE))


def _sum(n: SumNode, ops: dict, ctx: tuple) -> UOp:
    """a + b*3 - c - 2: positive terms are added, negative ones subtracted (so a flip reads `3-gidx0`)."""
    b = ctx[0]
    plus = [t for t in n.nodes if not isinstance(t, NumNode) and not (isinstance(t, MulNode) and t.b < 0)]
    minus = [MulNode(t.a, -t.b) if t.b != -1 else t.a for t in n.nodes if isinstance(t, MulNode) and t.b < 0]
    constant = sum(t.b for t in n.nodes if isinstance(t, NumNode))
    total = b.const(0, INDEX_DTYPE)
    for term in plus:
        total = b.alu(BinaryOps.ADD, total, term.render_with(ops, ctx))
    if constant > 0 or not plus:
        total = b.alu(BinaryOps.ADD, total, b.const(constant, INDEX_DTYPE))
    for term in minus:
        total = b.alu(BinaryOps.SUB, total, term.render_with(ops, ctx))
    if constant < 0 and plus:
        total = b.alu(BinaryOps.SUB, total, b.const(-constant, INDEX_DTYPE))
    return total


def _less_than(n: LtNode, ops: dict, ctx: tuple) -> UOp:
    b = ctx[0]
    if isinstance(n.a, MulNode) and n.a.b == -1:  # -x < c  is  -c < x: no negation needed
        return b.alu(BinaryOps.CMPLT, b.const(-n.b, INDEX_DTYPE), n.a.a.render_with(ops, ctx))
    return b.alu(BinaryOps.CMPLT, n.a.render_with(ops, ctx), b.const(n.b, INDEX_DTYPE))


def _and(n: AndNode, ops: dict, ctx: tuple) -> UOp:
    result = n.nodes[0].render_with(ops, ctx)
    for child in n.nodes[1:]:
        result = ctx[0].alu(BinaryOps.MUL, result, child.render_with(ops, ctx))  # bool MUL is AND
    return result


INDEX_OPS = {
    NumNode: lambda n, ops, ctx: ctx[0].const(n.b, INDEX_DTYPE),
    Variable: _variable,
    MulNode: _binary(BinaryOps.MUL),
    DivNode: _binary(BinaryOps.DIV),
    ModNode: _binary(BinaryOps.MOD),
    SumNode: _sum,
    LtNode: _less_than,
    AndNode: _and,
}
# --8<-- [end:index-ops]
