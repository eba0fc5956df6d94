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

from tinyedu.core.helpers import postorder
from tinyedu.core.ops import BinaryOps, BufferOps, LazyOp, LoadOps, ReduceOps, TernaryOps, UnaryOps
from tinyedu.engine.schedule import ScheduleItem, create_schedule
from tinyedu.lazy import LazyBuffer

# One colour per kind of op, the same in every drawing.
COLORS = {LoadOps: "#ffd59e", UnaryOps: "#c6e5ff", BinaryOps: "#c6e5ff", TernaryOps: "#c6e5ff",
          ReduceOps: "#ffb3b3", BufferOps: "#d5f5d5", "view": "#eeeeee"}


def _color(op: object) -> str:
    return COLORS.get(type(op), "#ffffff")


def _shape_text(shape: Sequence[int]) -> str:
    return "(" + ", ".join(map(str, shape)) + ("," if len(shape) == 1 else "") + ")"


def draw_lazy(outs: Sequence[LazyBuffer], schedule: list[ScheduleItem] | None = None,
              legend: bool = True) -> graphviz.Digraph:
    """The lazy graph behind `outs`, grouped by kernel: one box per op, one frame per kernel.

    A frame holds the ops one kernel computes; its output (a stored buffer) has a thick border and
    the number of its schedule item. Movement ops are views, not work: they are drawn as labels on
    the edges that read through them (the view's shape, and its strides when it is not a plain
    reshape). An op inlined into several kernels (recomputed in each) sits outside the frames with a
    dashed border. Buffers already in memory and loads sit outside too.
    """
    outs = [o.lazydata if hasattr(o, "lazydata") else o for o in outs]
    schedule = create_schedule(list(outs)) if schedule is None else schedule
    stored = {id(item.out): n for n, item in enumerate(schedule)}
    kernels_of = _kernels_of(schedule, stored)
    graph = graphviz.Digraph(graph_attr={"rankdir": "BT", "fontname": "Helvetica", "compound": "true"},
                             node_attr={"shape": "box", "style": "filled", "fontname": "Helvetica",
                                        "fontsize": "10"},
                             edge_attr={"fontname": "Helvetica", "fontsize": "8", "fontcolor": "#555555"})
    frames = {n: graphviz.Digraph(name=f"cluster_item{n}") for n in sorted(set().union(*kernels_of.values()))}
    for n, frame in frames.items():
        frame.attr(label=f"kernel {n}: {schedule[n].name}", style="rounded", color="#8888aa",
                   fontname="Helvetica", fontsize="10")
    names: dict[int, str] = {}
    for node in _bases_in_order(outs):
        node_id = names[id(node)] = f"n{len(names)}"
        kernels = kernels_of.get(id(node), set())
        target = frames[next(iter(kernels))] if len(kernels) == 1 else graph
        extra = {"style": "filled,dashed"} if len(kernels) > 1 else {}
        label = _base_label(node, stored.get(id(node)))
        if len(kernels) > 1:
            label += "\nrecomputed in kernels " + ", ".join(map(str, sorted(kernels)))
        target.node(node_id, label, fillcolor=_color(node.op), penwidth="3" if id(node) in stored else "1",
                    **extra)
        for k, src in enumerate(node.srcs):
            if src.is_const():  # a small constant beside each op that reads it, not one node for all
                target.node(f"{node_id}_c{k}", _const_text(src), shape="ellipse", fillcolor=COLORS[LoadOps],
                            fontsize="8", height="0.2")
                graph.edge(f"{node_id}_c{k}", node_id)
                continue
            view = _view_label(src)
            graph.edge(names[id(src.base)], node_id, **({"label": view} if view else {}))
    for frame in frames.values():
        graph.subgraph(frame)
    if legend:
        _draw_legend(graph)
    return graph


def _bases_in_order(outs: Sequence[LazyBuffer]) -> list[LazyBuffer]:
    """Every base buffer behind `outs`, sources before users, in a fixed order."""
    def drawn_sources(node: LazyBuffer) -> list[LazyBuffer]:
        return [src.base for src in node.srcs if not src.is_const()]
    return postorder([o.base for o in outs], drawn_sources)


def _kernels_of(schedule: list[ScheduleItem], stored: dict[int, int]) -> dict[int, set[int]]:
    """For each base buffer (by id): the schedule items whose kernel computes it (inlined or stored)."""
    kernels: dict[int, set[int]] = {}
    for n, item in enumerate(schedule):
        if isinstance(item.ast.op, LoadOps):
            continue
        stack, seen = [item.out], set()
        while stack:
            node = stack.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            kernels.setdefault(id(node), set()).add(n)
            stack.extend(src.base for src in node.srcs if src.base.realized is None and
                         id(src.base) not in stored and not src.is_const())
    return kernels


def _const_text(src: LazyBuffer) -> str:
    """A constant's value as a reader writes it: 0, 1.5, true."""
    value = src.base.arg
    if isinstance(value, bool):
        return str(value).lower()
    return f"{value:g}" if isinstance(value, float) else str(value)


def _view_label(src: LazyBuffer) -> str:
    """An edge's label: the view it reads through ('' for the buffer itself)."""
    if not src.is_view:
        return ""
    text = f"view {_shape_text(src.shape)}"
    if not src.st.contiguous:
        text += "\n" + "\n".join(f"strides={v.strides}" + (f" offset={v.offset}" if v.offset else "") +
                                  (f" mask={v.mask}" if v.mask else "") for v in src.st.views)
    return text


def _draw_legend(graph: graphviz.Digraph) -> None:
    """What the colours, borders and frames mean, in a small frame of its own."""
    legend = graphviz.Digraph(name="cluster_legend")
    legend.attr(label="legend", style="rounded", color="#bbbbbb", fontname="Helvetica", fontsize="10")
    entries = [("legend_load", "load / copy\n(data from the host)", COLORS[LoadOps], {}),
               ("legend_alu", "elementwise op", COLORS[UnaryOps], {}),
               ("legend_reduce", "reduce", COLORS[ReduceOps], {}),
               ("legend_stored", "thick border:\nstored (a kernel's output)", "#ffffff", {"penwidth": "3"}),
               ("legend_dashed", "dashed: recomputed\nin several kernels", "#ffffff",
                {"style": "filled,dashed"})]
    entries.append(("legend_const", "constant", COLORS[LoadOps], {"shape": "ellipse"}))
    for name, text, color, extra in entries:
        legend.node(name, text, fillcolor=color, fontsize="9", **extra)
    for (a, *_), (b, *_) in zip(entries[:-1], entries[1:], strict=True):
        legend.edge(a, b, style="invis")
    legend.node("legend_view", "a frame is one kernel;\nedge labels are views\n(movement ops, no work)",
                shape="plaintext", style="", fontsize="9")
    graph.subgraph(legend)


def _base_label(buf: LazyBuffer, kernel: int | None) -> str:
    op = f"{type(buf.op).__name__}.{buf.op.name}"
    if buf.op is LoadOps.CONST and buf.realized is None:
        op += f" {buf.arg}"
    elif isinstance(buf.op, ReduceOps):
        op += f" axes={buf.arg}"
    elif buf.op is UnaryOps.CAST:
        op += f" {buf.arg.name}"
    if buf.op is LoadOps.COPY and buf.srcs and buf.srcs[0].device != buf.device:
        op += f" {buf.srcs[0].device}->{buf.device}"  # a copy between devices: communication
    elif ":" in buf.device:  # a numbered device (several devices in one graph)
        op += f" on {buf.device}"
    label = f"{op}\n{_shape_text(buf.shape)} {buf.dtype.name}"
    if buf.realized is not None:
        label += "\n(in memory)"
    elif kernel is not None:
        label += f"\nstored: schedule item {kernel}"
    return label


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
