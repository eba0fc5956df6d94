"""Three visitors written with `Node.render_with`: C text, numpy evaluation, substitution.

They are what `Node.render`, `Node.eval` and `Node.substitute` use, and they double as worked
examples of the protocol for other stages: a table maps each node type to a handler
`handler(node, ops, ctx)`, and each handler visits its children with `child.render_with(ops, ctx)`.
A linearizer writes the same kind of table, with handlers that emit integer ALU UOps.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from tinyedu.shape.symbolic import (
    AndNode,
    DivNode,
    Handler,
    IntOrArray,
    LtNode,
    ModNode,
    MulNode,
    Node,
    NumNode,
    SumNode,
    Variable,
)


def _render_join(separator: str) -> Handler:
    return lambda n, ops, ctx: "(" + separator.join(c.render_with(ops, ctx) for c in n.nodes) + ")"


def _render_binary(symbol: str) -> Handler:
    return lambda n, ops, ctx: f"({n.a.render_with(ops, ctx)}{symbol}{n.b})"


def _render_lt(n: LtNode, ops: dict, ctx: Any) -> str:
    # `x >= 3` is stored as `(x*-1) < -2`; print it the way a reader would write it: `x > 2`.
    if isinstance(n.a, MulNode) and n.a.b == -1:
        return f"({n.a.a.render_with(ops, ctx)}>{-n.b})"
    return f"({n.a.render_with(ops, ctx)}<{n.b})"


RENDER_OPS: dict[type, Handler] = {
    NumNode: lambda n, ops, ctx: str(n.b),
    Variable: lambda n, ops, ctx: n.name,
    MulNode: _render_binary("*"),
    DivNode: _render_binary("/"),
    ModNode: _render_binary("%"),
    SumNode: _render_join("+"),
    LtNode: _render_lt,
    AndNode: _render_join("&&"),
}


def _as_01(value: IntOrArray) -> IntOrArray:
    # Comparisons give bools; keep them ints so that sums never turn into logical ORs.
    return value.astype(np.int64) if isinstance(value, np.ndarray) else int(value)


def _eval_variable(node: Variable, ops: dict, env: Mapping[str, IntOrArray]) -> IntOrArray:
    if node.name not in env:
        raise KeyError(f"eval: no value for variable {node.name!r}; pass it as "
                       f"{{'{node.name}': value}} or {{Variable: value}}")
    return env[node.name]


def _eval_product(n: Node, ops: dict, env: Any) -> IntOrArray:
    result: IntOrArray = 1
    for c in n.children:
        result = result * c.render_with(ops, env)  # 0/1 values: the product is the AND
    return result


EVAL_OPS: dict[type, Handler] = {
    NumNode: lambda n, ops, env: n.b,
    Variable: _eval_variable,
    MulNode: lambda n, ops, env: n.a.render_with(ops, env) * n.b,
    DivNode: lambda n, ops, env: n.a.render_with(ops, env) // n.b,
    ModNode: lambda n, ops, env: n.a.render_with(ops, env) % n.b,
    SumNode: lambda n, ops, env: sum((c.render_with(ops, env) for c in n.nodes), 0),
    LtNode: lambda n, ops, env: _as_01(n.a.render_with(ops, env) < n.b),
    AndNode: _eval_product,
}

SUBSTITUTE_OPS: dict[type, Handler] = {
    NumNode: lambda n, ops, mapping: n,
    Variable: lambda n, ops, mapping: mapping.get(n.name, n),
    MulNode: lambda n, ops, mapping: n.a.render_with(ops, mapping) * n.b,
    DivNode: lambda n, ops, mapping: n.a.render_with(ops, mapping) // n.b,
    ModNode: lambda n, ops, mapping: n.a.render_with(ops, mapping) % n.b,
    SumNode: lambda n, ops, mapping: Node.sum([c.render_with(ops, mapping) for c in n.nodes]),
    LtNode: lambda n, ops, mapping: n.a.render_with(ops, mapping) < n.b,
    AndNode: lambda n, ops, mapping: Node.ands([c.render_with(ops, mapping) for c in n.nodes]),
}
