"""GRAPH=1's drawing of a lazy graph: one frame per kernel, views folded into edge labels, a legend."""

from __future__ import annotations

import re

import numpy as np

from tinyedu import Tensor
from tinyedu.core.ops import LoadOps
from tinyedu.engine.schedule import create_schedule
from tinyedu.nn import Linear
from tinyedu.viz.lazy_graph import draw_lazy


def mlp_gradients() -> list:
    Tensor.manual_seed(0)
    l1, l2 = Linear(8, 16), Linear(16, 4)
    x = Tensor(np.random.default_rng(0).standard_normal((5, 8)).astype(np.float32))
    l2(l1(x).relu()).relu().sum().backward()
    return [p.grad.lazydata for p in (l1.weight, l1.bias, l2.weight, l2.bias)]


def test_one_frame_per_kernel_and_every_op_in_its_kernels_frame():
    outs = mlp_gradients()
    schedule = create_schedule(outs)
    source = draw_lazy(outs, schedule).source
    kernels = [n for n, item in enumerate(schedule) if not isinstance(item.ast.op, LoadOps)]
    frames = re.findall(r"subgraph cluster_item(\d+) \{", source)
    assert sorted(map(int, frames)) == kernels
    for n in kernels:  # each kernel's frame holds its stored output
        frame = source.split(f"subgraph cluster_item{n} {{")[1].split("\n\t}")[0]
        assert f"stored: schedule item {n}" in frame, frame


def test_views_are_edge_labels_and_the_legend_explains_the_marks():
    outs = mlp_gradients()
    source = draw_lazy(outs).source
    assert not re.search(r'^\t+n\d+ \[label="view', source, re.M), "a view drawn as a node"
    assert re.search(r'-> n\d+ \[label="view \(5, 16, 8\)', source), "a view read is not labelled"
    assert "subgraph cluster_legend" in source
    for words in ("load / copy", "elementwise op", "reduce", "stored (a kernel's output)", "recomputed",
                  "constant", "edge labels are views"):
        assert words in source
    assert "subgraph cluster_legend" not in draw_lazy(outs, legend=False).source


def test_an_op_recomputed_by_two_kernels_is_dashed_outside_the_frames():
    x = Tensor(np.arange(6, dtype=np.float32).reshape(2, 3)).realize()
    shared = x * 2  # cheap elementwise: each reduce recomputes it (rule 5 keeps it fused)
    a, b = shared.sum(0), shared.max(1)
    source = draw_lazy([a.lazydata, b.lazydata]).source
    node = re.search(r'\tn\d+ \[label="BinaryOps.MUL[^]]*\]', source)
    assert node and "recomputed in kernels" in node.group(0) and "dashed" in node.group(0), source


def test_the_drawing_is_the_same_on_every_run():
    assert draw_lazy(mlp_gradients()).source == draw_lazy(mlp_gradients()).source
