"""One small computation through the whole pipeline, drawn as one picture (the site's home page).

Every part of the picture is drawn from the real objects of that computation: the lazy graph behind
the Tensor, the kernel AST of each ScheduleItem the scheduler makes, the UOps the linearizer emits
for the kernel, the C source the C device would compile, and the value the kernel computes. Nothing
in it is typed by hand, so the picture cannot drift from the code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import graphviz
import numpy as np

from tinyedu.core.ops import LoadOps
from tinyedu.core.uops import uops_listing
from tinyedu.engine.lower import lower
from tinyedu.engine.schedule import create_schedule
from tinyedu.tensor import Tensor
from tinyedu.viz.lazy_graph import draw_ast, draw_lazy

EXAMPLE = "y = (a * b).sum(1).relu()"
EXAMPLE_A = [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]
EXAMPLE_B = [[1.0, -1.0, 2.0], [-3.0, 0.5, 1.0]]


@dataclass
class PipelineStages:
    """What each stage made for one Tensor: graph, kernels, and the UOps and C of the last kernel."""

    code: str
    tensor: Any
    schedule: list          # every ScheduleItem (loads included), as create_schedule returns them
    kernels: list           # the compute ScheduleItems
    lazy: graphviz.Digraph  # the lazy graph, drawn before the kernels ran (realizing frees it)
    uops: list              # the UOps of the last kernel
    source: str             # its C source
    result: np.ndarray


def pipeline_stages(tensor: Any | None = None, code: str = EXAMPLE) -> PipelineStages:
    """Run the stages one by one on `tensor` (default: the home page's example) and keep what they made."""
    if tensor is None:
        a, b = Tensor(EXAMPLE_A), Tensor(EXAMPLE_B)
        tensor = (a * b).sum(1).relu()
    schedule = create_schedule([tensor.lazydata])
    kernels = [item for item in schedule if not isinstance(item.ast.op, LoadOps)]
    lazy = draw_lazy([tensor.lazydata], schedule, legend=False)
    lowered = lower("C", kernels[-1].ast, opts=[], compile=False)  # the kernel as written: no opts
    uops, source = lowered.uops, lowered.source
    result = Tensor(tensor.lazydata).numpy()  # runs the kernels (a fresh schedule: the list above is kept)
    return PipelineStages(code, tensor, schedule, kernels, lazy, uops, source, result)


def _embed(parent: graphviz.Digraph, drawing: graphviz.Digraph, name: str, label: str, prefix: str) -> None:
    """Put a drawing into `parent` as a labelled cluster, its node ids prefixed so they stay distinct."""
    cluster = graphviz.Digraph(name=f"cluster_{name}", node_attr=drawing.node_attr)
    cluster.attr(label=label, style="rounded", color="#9999aa", fontname="Helvetica", fontsize="12")
    for line in drawing.body:  # node ids start a line (nested subgraphs indent them further)
        line = re.sub(r"^(\t+)(?!subgraph\b|graph\b|node\b|edge\b)(\w+)(?= \[| ->|$)",
                      lambda m: f"{m.group(1)}{prefix}{m.group(2)}", line)
        line = re.sub(r"^(\t+)subgraph (\w+)", lambda m: f"{m.group(1)}subgraph cluster_{prefix}{m.group(2)}",
                      line)
        cluster.body.append(re.sub(r"-> (\w+)", lambda m: f"-> {prefix}{m.group(1)}", line))
    parent.subgraph(cluster)


def _text_node(graph: graphviz.Digraph, name: str, text: str, label: str) -> None:
    cluster = graphviz.Digraph(name=f"cluster_{name}")
    cluster.attr(label=label, style="rounded", color="#9999aa", fontname="Helvetica", fontsize="12")
    escaped = text.replace("\\", "\\\\").rstrip("\n").replace("\n", "\\l") + "\\l"
    cluster.node(name, escaped, shape="box", style="filled", fillcolor="#fbfbf5", fontname="Courier",
                 fontsize="9")
    graph.subgraph(cluster)


def draw_pipeline(stages: PipelineStages) -> graphviz.Digraph:
    """code -> graph -> kernels -> UOps -> C -> result, top to bottom, as one graphviz drawing."""
    graph = graphviz.Digraph(graph_attr={"rankdir": "TB", "fontname": "Helvetica", "compound": "true",
                                         "nodesep": "0.2", "ranksep": "0.3"},
                             edge_attr={"fontname": "Helvetica", "fontsize": "10", "color": "#555555"})
    graph.node("code", stages.code, shape="note", fontname="Courier", fontsize="11", style="filled",
               fillcolor="#fff7d6")
    lazy = stages.lazy
    _embed(graph, lazy, "lazy", "1 · the lazy graph (tinyedu/lazy.py)", "lazy_")
    last_lazy = [line for line in lazy.body if re.match(r"^\tn\d+ \[", line)][-1].split()[0]
    graph.edge("code", f"lazy_{last_lazy}", label="Tensor ops", lhead="cluster_lazy")
    previous = f"lazy_{last_lazy}"
    for number, item in enumerate(stages.kernels):
        prefix = f"k{number}_"
        _embed(graph, draw_ast(item.ast), f"kernel{number}",
               f"2 · kernel {item.name}: its AST (engine/schedule.py)", prefix)
        graph.edge(previous, f"{prefix}a0", label="create_schedule", lhead=f"cluster_kernel{number}")
        previous = f"{prefix}a0"
    _text_node(graph, "uops", uops_listing(stages.uops), "3 · UOps (codegen/linearizer.py)")
    graph.edge(previous, "uops", label="Kernel, linearize", lhead="cluster_uops")
    _text_node(graph, "csource", stages.source, "4 · C (renderer/cstyle.py)")
    graph.edge("uops", "csource", label="render_c", lhead="cluster_csource")
    graph.node("result", f"y = {np.array2string(stages.result, separator=', ')}", shape="note",
               fontname="Courier", fontsize="11", style="filled", fillcolor="#e2f5e2")
    graph.edge("csource", "result", label="cc, ctypes: run", ltail="cluster_csource")
    return graph


def pipeline_figure() -> str:
    """The home page's figure: the example's pipeline as inline SVG, scaled to the page's width."""
    svg = draw_pipeline(pipeline_stages()).pipe(format="svg").decode()
    svg = svg[svg.index("<svg"):]
    svg = re.sub(r'<svg width="[^"]*" height="[^"]*"', '<svg class="pipeline-picture" width="100%"', svg,
                 count=1)
    caption = (f"The pipeline for <code>{EXAMPLE}</code>, drawn by <code>tinyedu.viz.pipeline</code> from "
               "the real objects when this site was built.")
    figure = '<figure class="pipeline" style="width: 100%; max-width: 100%">'
    return f"{figure}{svg}<figcaption>{caption}</figcaption></figure>"
