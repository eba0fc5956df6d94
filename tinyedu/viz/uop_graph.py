"""Drawing of stage 3: a UOp list as a graph, each loop a box around the UOps inside it.

ENDRANGE is not drawn: the end of a loop's box is the end of the loop.

An arrow goes from a UOp to each UOp that uses it, so the picture shows the data flow that the
numbered listing (`uops_listing`) only names by number. Node ids are the UOps' positions in the list
(`u0`, `u1`, ...), so the same kernel draws the same DOT source on every run.
"""

from __future__ import annotations

import graphviz

from tinyedu.core.uops import UOp, UOps, arg_text

# One colour per kind of UOp, in the spirit of the AST drawings (tinyedu/viz/lazy_graph.py).
COLORS = {UOps.DEFINE_GLOBAL: "#d5f5d5", UOps.LOAD: "#d5f5d5", UOps.STORE: "#d5f5d5",
          UOps.ALU: "#c6e5ff", UOps.CAST: "#c6e5ff", UOps.CONST: "#ffffff", UOps.RANGE: "#eeeeee",
          UOps.DEFINE_ACC: "#ffb3b3", UOps.ASSIGN: "#ffb3b3"}


def _label(number: int, u: UOp) -> str:
    dtype = "" if u.dtype is None else f" {u.dtype.name}"
    arg = arg_text(u)
    return f"{number} {u.op.name}{dtype}" + (f"\n{arg}" if arg else "")


def draw_uops(uops: list[UOp]) -> graphviz.Digraph:
    """The UOps as a graph: nodes in list order, loops as nested boxes, edges from a value to its users."""
    graph = graphviz.Digraph(graph_attr={"rankdir": "TB", "fontname": "Helvetica"},
                             node_attr={"shape": "box", "style": "filled", "fontname": "Helvetica",
                                        "fontsize": "10"})
    number = {u: i for i, u in enumerate(uops)}
    scopes = [graph]  # the graph, then one cluster per open loop
    for i, u in enumerate(uops):
        if u.op is UOps.RANGE:
            loop = graphviz.Digraph(name=f"cluster_u{i}")
            loop.attr(label=f"loop {u.arg}", style="rounded", color="#888888", fontname="Helvetica")
            scopes.append(loop)
        if u.op is UOps.ENDRANGE:  # the end of the box is the end of the loop
            loop = scopes.pop()
            scopes[-1].subgraph(loop)
            continue
        shape = "plaintext" if u.op is UOps.CONST else "box"
        scopes[-1].node(f"u{i}", _label(i, u), fillcolor=COLORS.get(u.op, "#ffffff"), shape=shape)
    for i, u in enumerate(uops):
        if u.op is not UOps.ENDRANGE:
            for s in u.src:
                graph.edge(f"u{number[s]}", f"u{i}")
    return graph
