"""Drawings of what each stage builds, for notebooks and the site (graphviz).

Node ids are assigned in a deterministic order (never from `id()`), so the DOT source of a
drawing is the same on every run and can be compared in a notebook test.
"""

from tinyedu.core.helpers import graph_enabled
from tinyedu.engine import schedule_hooks
from tinyedu.engine.schedule import ScheduleItem
from tinyedu.lazy import LazyBuffer
from tinyedu.viz.lazy_graph import save_schedule_graph
from tinyedu.viz.value_graph import draw_value, value_svg

__all__ = ["draw_value", "value_svg"]


def draw_schedule_when_asked(outs: list[LazyBuffer], items: list[ScheduleItem]) -> None:
    """GRAPH=1: write each realized schedule as DOT and SVG (the engine calls this through its hook)."""
    if graph_enabled():
        print(f"GRAPH: wrote {save_schedule_graph(outs, items)}")


schedule_hooks.append(draw_schedule_when_asked)
