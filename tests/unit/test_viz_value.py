"""Stage 0 drawings: the DOT source of a Value graph is complete and the same on every run."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tinyedu.scalar import Value
from tinyedu.scalar import value as value_module
from tinyedu.viz import draw_value, value_svg


def expression() -> Value:
    a = Value(2.0, label="a")
    b = Value(-3.0, label="b")
    c = a * b + a**2
    c.label = "c"
    return c.tanh()


def test_source_is_identical_across_builds():
    first, second = draw_value(expression()).source, draw_value(expression()).source
    assert first == second
    y = expression()
    y.backward()
    assert draw_value(y).source == draw_value(y).source


def test_small_graph_golden_source():
    a = Value(2.0, label="a")
    b = Value(-3.0, label="b")
    c = a * b
    c.backward()
    assert draw_value(c).source == (
        "digraph {\n"
        "\tgraph [rankdir=LR]\n"
        "\tnode [fontname=Helvetica]\n"
        '\tv0 [label="{ a | data 2.0000 | grad -3.0000 }" shape=record]\n'
        '\tv1 [label="{ b | data -3.0000 | grad 2.0000 }" shape=record]\n'
        '\tv2 [label="{ data -6.0000 | grad 1.0000 }" shape=record]\n'
        '\tv2_op [label="*" fontsize=10 shape=circle width=0.3]\n'
        "\tv0 -> v2_op\n"
        "\tv1 -> v2_op\n"
        "\tv2_op -> v2\n"
        "}\n"
    )


def test_every_value_and_op_is_drawn_with_its_edges():
    y = expression()
    y.backward()
    source = draw_value(y).source
    order = y._topological_order()
    value_ids = re.findall(r"^\t(v\d+) \[label=\"\{", source, flags=re.M)
    assert value_ids == [f"v{i}" for i in range(len(order))]  # numbered in topological order
    for i, node in enumerate(order):
        line = next(ln for ln in source.splitlines() if ln.startswith(f"\tv{i} [label="))
        assert f"data {node.data:.4f}" in line and f"grad {node.grad:.4f}" in line
        op_line = re.search(rf'^\tv{i}_op \[label="?{re.escape(node._op)}"? ', source, flags=re.M)
        assert (op_line is not None) == bool(node._op)
    ops = [node for node in order if node._op]
    edges = re.findall(r"^\t(v\d+(?:_op)?) -> (v\d+(?:_op)?)$", source, flags=re.M)
    assert len(edges) == sum(len(node._prev) + 1 for node in ops)
    assert ('\tv0 [label="{ a | data 2.0000 |' in source) and ("c | data" in source)


def test_a_value_used_twice_draws_two_edges():
    x = Value(3.0)
    source = draw_value(x * x).source
    assert source.count("\tv0 -> v1_op\n") == 2


def test_labels_are_escaped_and_negative_zero_is_zero():
    v = Value(-0.0, label="{x|y}")
    source = draw_value(v).source
    assert r"\{x\|y\}" in source and "data 0.0000" in source and "-0.0000" not in source


def test_rankdir_and_argument_checks():
    assert "rankdir=TB" in draw_value(Value(1.0), rankdir="TB").source
    with pytest.raises(ValueError, match="draw_value: rankdir must be one of"):
        draw_value(Value(1.0), rankdir="sideways")
    with pytest.raises(TypeError, match="draw_value: expected a Value, got float"):
        draw_value(1.0)


def test_repr_svg_draws_the_graph():
    svg = expression()._repr_svg_()
    assert svg is not None and "<svg" in svg and "tanh" in svg


def test_repr_svg_falls_back_when_dot_is_missing(monkeypatch):
    monkeypatch.setenv("PATH", "")  # graphviz cannot find the `dot` program
    assert expression()._repr_svg_() is None
    assert repr(expression()).startswith("Value(data=")


def test_repr_svg_skips_huge_graphs():
    y = Value(1.0)
    for _ in range(300):
        y = y.relu()
    assert value_svg(y) is None
    assert value_svg(y, max_nodes=1000) is not None


def test_value_imports_nothing_from_viz():
    """value.py imports nothing from viz (nor graphviz): importing viz is what lets a Value draw itself
    (tinyedu's engine imports viz for GRAPH=1, so after `import tinyedu` it is there)."""
    tree = ast.parse(Path(value_module.__file__).read_text())
    imported = [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)] + \
        [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    assert not [m for m in imported if m.startswith(("tinyedu.viz", "graphviz"))], imported
    assert Value.svg_drawer is value_svg
