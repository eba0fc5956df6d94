"""Drawings of stage 2: the lazy graph (with kernel boundaries) and kernel ASTs.

Node ids are numbered in a fixed traversal order (never `id()`), so the DOT source of the same
computation is the same on every run and notebooks can compare it.
"""

from __future__ import annotations

import os
import tempfile
from itertools import count
from pathlib import Path
from typing import Sequence

import graphviz

from tinyedu.engine.schedule import ScheduleItem, create_schedule
from tinyedu.lazy import LazyBuffer
from tinyedu.ops import BinaryOps, BufferOps, LazyOp, LoadOps, ReduceOps, TernaryOps, UnaryOps

# One colour per kind of op, the same in every drawing.
COLORS = {LoadOps: "#ffd59e", UnaryOps: "#c6e5ff", BinaryOps: "#c6e5ff", TernaryOps: "#c6e5ff",
          ReduceOps: "#ffb3b3", BufferOps: "#d5f5d5", "view": "#eeeeee"}


def _color(op: object) -> str:
    return COLORS.get(type(op), "#ffffff")


def _shape_text(shape: Sequence[int]) -> str:
    return "(" + ", ".join(map(str, shape)) + ("," if len(shape) == 1 else "") + ")"


def draw_lazy(outs: Sequence[LazyBuffer], schedule: list[ScheduleItem] | None = None) -> graphviz.Digraph:
    """The lazy graph behind `outs`: one box per op, one grey box per view (with its ShapeTracker).

    Buffers the schedule stores (kernel boundaries) get a thick border and the number of the
    kernel that writes them; everything else is fused into the kernel that reads it.
    """
    outs = [o.lazydata if hasattr(o, "lazydata") else o for o in outs]
    schedule = create_schedule(list(outs)) if schedule is None else schedule
    stored = {id(item.out): n for n, item in enumerate(schedule)}
    graph = graphviz.Digraph(graph_attr={"rankdir": "BT", "fontname": "Helvetica"},
                             node_attr={"shape": "box", "style": "filled", "fontname": "Helvetica",
                                        "fontsize": "10"})
    names: dict[int, str] = {}
    ids = count()

    def name_of(buf: LazyBuffer) -> str:
        """Draw `buf` (iteratively, sources first) and return its node id."""
        stack = [(buf, False)]
        while stack:
            node, ready = stack.pop()
            if id(node) in names:
                continue
            parents = ([node.base] if node.is_view else list(node.srcs))
            if not ready:
                stack.append((node, True))
                stack.extend((p, False) for p in reversed(parents) if id(p) not in names)
                continue
            node_id = f"n{next(ids)}"
            names[id(node)] = node_id
            if node.is_view:
                graph.node(node_id, f"view {_shape_text(node.shape)}\n{_views_text(node)}",
                           fillcolor=COLORS["view"], fontsize="9")
            else:
                graph.node(node_id, _base_label(node, stored.get(id(node))), fillcolor=_color(node.op),
                           penwidth="3" if id(node) in stored else "1")
            for parent in parents:
                graph.edge(names[id(parent)], node_id)
        return names[id(buf)]

    for out in outs:
        name_of(out)
    return graph


def _base_label(buf: LazyBuffer, kernel: int | None) -> str:
    op = f"{type(buf.op).__name__}.{buf.op.name}"
    if buf.op is LoadOps.CONST and buf.realized is None:
        op += f" {buf.arg}"
    elif isinstance(buf.op, ReduceOps):
        op += f" axes={buf.arg}"
    elif buf.op is UnaryOps.CAST:
        op += f" {buf.arg.name}"
    label = f"{op}\n{_shape_text(buf.shape)} {buf.dtype.name}"
    if buf.realized is not None:
        label += "\n(in memory)"
    elif kernel is not None:
        label += f"\nstored: schedule item {kernel}"
    return label


def _views_text(buf: LazyBuffer) -> str:
    return "\n".join(f"strides={v.strides} offset={v.offset}" + (f" mask={v.mask}" if v.mask else "")
                     for v in buf.st.views)


def draw_ast(ast: LazyOp) -> graphviz.Digraph:
    """A kernel AST: STORE at the top, LOAD/CONST leaves at the bottom; a shared node is drawn once."""
    graph = graphviz.Digraph(graph_attr={"rankdir": "TB"},
                             node_attr={"shape": "box", "style": "filled", "fontname": "Helvetica",
                                        "fontsize": "10"})
    ids: dict[int, str] = {}
    for number, node in enumerate(ast.walk()):
        ids[id(node)] = f"a{number}"
    for node in ast.walk():
        graph.node(ids[id(node)], _ast_label(node), fillcolor=_color(node.op))
        for child in node.src:
            graph.edge(ids[id(child)], ids[id(node)])
    return graph


def _ast_label(node: LazyOp) -> str:
    text = f"{type(node.op).__name__}.{node.op.name}"
    if node.op in (BufferOps.LOAD, BufferOps.STORE):
        text += f"\nbuf{node.arg.idx} {_shape_text(node.arg.st.shape)}"
        if not node.arg.st.contiguous:
            text += "\n" + "\n".join(f"strides={v.strides}" + (f" mask={v.mask}" if v.mask else "")
                                     for v in node.arg.st.views)
    elif node.op is BufferOps.CONST:
        text += f" {node.arg.val}\n{_shape_text(node.arg.st.shape)}"
    elif node.arg is not None:
        text += f" {node.arg.name if hasattr(node.arg, 'name') else node.arg}"
    return text


_saved = count(1)


def save_schedule_graph(outs: Sequence[LazyBuffer], schedule: list[ScheduleItem]) -> str:
    """Write the lazy graph of one realize() as DOT and SVG under $GRAPHPATH; return the DOT path."""
    folder = Path(os.environ.get("GRAPHPATH") or Path(tempfile.gettempdir()) / "tinyedu_graphs")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"schedule_{os.getpid()}_{next(_saved):04d}.dot"
    graph = draw_lazy(outs, schedule)
    path.write_text(graph.source)
    try:
        path.with_suffix(".svg").write_bytes(graph.pipe(format="svg"))
    except graphviz.ExecutableNotFound:
        return f"{path} (no SVG: graphviz's `dot` is not installed)"
    return f"{path} and {path.with_suffix('.svg')}"
