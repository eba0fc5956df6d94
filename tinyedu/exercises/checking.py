"""Small pieces the checkers of several chapters share: checking an answer's type, finding kernels.

A checker tests the simple things first (is it a number, a function, a list of ints?) so that its
hint can say exactly what is wrong; these helpers phrase those first checks once. The kernel helpers
give the compute kernels a Tensor expression schedules (the LoadOps that only bring inputs into
memory left out), which is what every "predict this about the kernel" exercise is about.
"""

from __future__ import annotations

import math
from typing import Any, Callable

from tinyedu.codegen.kernel import Kernel
from tinyedu.core.ops import LoadOps
from tinyedu.engine.schedule import ScheduleItem, create_schedule


def is_plain_number(x: object) -> bool:
    """A finite int or float, and not a bool (True would pass for 1)."""
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def is_count(x: object) -> bool:
    """An int, and not a bool: what a prediction of "how many" must be."""
    return isinstance(x, int) and not isinstance(x, bool)


def need_function(answer: Any, name: str, takes: str) -> None:
    """Fail with a hint unless the answer is callable (`takes` says what it is called with)."""
    if not callable(answer):
        raise AssertionError(f"{name}: expected a function {takes}, got {type(answer).__name__}")


def compute_items(tensor: Any) -> list[ScheduleItem]:
    """The kernels that compute `tensor`, in order: its schedule without the LoadOps items."""
    return [item for item in create_schedule([tensor.lazydata]) if not isinstance(item.ast.op, LoadOps)]


def one_kernel(build: Callable[[], Any], exercise: str) -> Kernel:
    """The Kernel of the single compute kernel that `build()` schedules."""
    items = compute_items(build())
    if len(items) != 1:
        raise ValueError(f"{exercise}: the expression makes {len(items)} compute kernels; this exercise "
                         "needs an expression that is exactly one kernel")
    return Kernel(items[0].ast)
