"""Drawings of what each stage builds, for notebooks and the site (graphviz).

Node ids are assigned in a deterministic order (never from `id()`), so the DOT source of a
drawing is the same on every run and can be compared in a notebook test.
"""

from tinyedu.viz.value_graph import draw_value, value_svg

__all__ = ["draw_value", "value_svg"]
