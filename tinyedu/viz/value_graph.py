"""Draw a graph of scalar `Value`s: one box per Value, one small circle per operation.

Reads left to right like the computation: inputs on the left, the result on the right. Each box
shows the Value's label (if any), its data and its grad, so the same drawing taken before and
after `backward()` shows what backpropagation filled in.
"""

from __future__ import annotations

import graphviz

from tinyedu.scalar.value import Value

RANKDIRS = ("LR", "RL", "TB", "BT")
# Jupyter draws a Value automatically; past this many nodes the picture is unreadable and slow
# to lay out, so the notebook shows the text repr instead.
MAX_SVG_NODES = 250


def _fmt(x: float) -> str:
    """4 decimals, and never "-0.0000": a sign on zero would make equal drawings differ."""
    text = f"{x:.4f}"
    return "0.0000" if text == "-0.0000" else text


def _escape_record(text: str) -> str:
    """Backslash the characters that have a meaning inside a graphviz record label."""
    for ch in "\\{}|<>":
        text = text.replace(ch, "\\" + ch)
    return text


def draw_value(root: Value, rankdir: str = "LR") -> graphviz.Digraph:
    """The graph of every Value `root` was computed from, as a `graphviz.Digraph`.

    Node ids are `v0, v1, ...` in the order of `root`'s topological sort (inputs before the ops
    that use them), and the op node of `vN` is `vN_op`; the sort follows each op's operands in
    order, so the same expression gives the same DOT source (`.source`) on every run.
    """
    if not isinstance(root, Value):
        raise TypeError(f"draw_value: expected a Value, got {type(root).__name__}")
    if rankdir not in RANKDIRS:
        raise ValueError(f"draw_value: rankdir must be one of {RANKDIRS}, got {rankdir!r}")
    # --8<-- [start:ids]
    order = root._topological_order()
    ids = {node: f"v{i}" for i, node in enumerate(order)}
    dot = graphviz.Digraph(graph_attr={"rankdir": rankdir}, node_attr={"fontname": "Helvetica"})
    for node in order:
        fields = [_escape_record(node.label)] if node.label else []
        fields += [f"data {_fmt(node.data)}", f"grad {_fmt(node.grad)}"]
        dot.node(ids[node], label="{ " + " | ".join(fields) + " }", shape="record")
        if node._op:
            op_id = ids[node] + "_op"
            dot.node(op_id, label=node._op, shape="circle", width="0.3", fontsize="10")
            for child in node._prev:  # one edge per operand: x*x draws two edges from x
                dot.edge(ids[child], op_id)
            dot.edge(op_id, ids[node])
    return dot
    # --8<-- [end:ids]


def value_svg(root: Value, max_nodes: int = MAX_SVG_NODES) -> str | None:
    """SVG of `draw_value(root)` for Jupyter, or None when it cannot or should not be drawn.

    None (Jupyter then shows the text repr) when the graph has more than `max_nodes` Values or
    the graphviz `dot` program is not installed: displaying a Value must never raise.
    """
    if len(root._topological_order()) > max_nodes:
        return None
    try:
        return draw_value(root).pipe(format="svg", encoding="utf-8")
    except (graphviz.ExecutableNotFound, graphviz.CalledProcessError, OSError):
        return None


Value.svg_drawer = value_svg  # how Jupyter draws a Value (Value._repr_svg_), once this module is imported
