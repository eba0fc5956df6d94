"""Movement ops as views: symbolic index expressions, View, and ShapeTracker.

- `symbolic`: integer expressions (`NumNode`, `Variable`, `MulNode`, ...) that simplify as they
  are built; the language index arithmetic is written in. `rules` holds the simplifications,
  `visitors` the render/eval/substitute tables (examples of the `render_with` protocol).
- `view`: `View`, one (shape, strides, offset, mask) window onto a flat buffer.
- `shapetracker`: `ShapeTracker`, a stack of views, and the index/validity expressions that the
  code generators and the NUMPY device read elements with.
"""

from tinyedu.shape.shapetracker import ShapeTracker, idx_vars, merge_views
from tinyedu.shape.symbolic import (
    AndNode,
    DivNode,
    LtNode,
    ModNode,
    MulNode,
    Node,
    NumNode,
    SumNode,
    Variable,
    given_valid,
    variable_bounds,
)
from tinyedu.shape.view import View, strides_for_shape, unflatten
from tinyedu.shape.visitors import EVAL_OPS, RENDER_OPS, SUBSTITUTE_OPS

__all__ = [
    "Node", "NumNode", "Variable", "MulNode", "DivNode", "ModNode", "SumNode", "LtNode", "AndNode",
    "given_valid", "variable_bounds",
    "RENDER_OPS", "EVAL_OPS", "SUBSTITUTE_OPS",
    "View", "strides_for_shape", "unflatten",
    "ShapeTracker", "idx_vars", "merge_views",
]
