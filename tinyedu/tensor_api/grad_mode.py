"""Grad mode: whether new operations record the autograd graph, and `no_grad` to switch it off.

It is one switch for every tensor, so it lives here, below Tensor: Tensor._apply reads it, and the
mixins that compute a value without its graph (softmax, the scans) turn it off with `no_grad`.
`count_primitives`, the other thing Tensor._apply does besides recording, lives here too, so that a
mixin can ask whether anyone is counting (then it builds its graph op by op, never from a template).
"""

from __future__ import annotations

from collections import Counter
from typing import ClassVar


class GradMode:
    """The switch itself: `GradMode.enabled` is False inside `with no_grad():`."""

    enabled: ClassVar[bool] = True


class no_grad:  # noqa: N801 - used like torch.no_grad
    """`with no_grad():` builds no autograd graph (for inference and parameter updates)."""

    def __enter__(self) -> None:
        self.previous, GradMode.enabled = GradMode.enabled, False

    def __exit__(self, *exc: object) -> None:
        GradMode.enabled = self.previous


class count_primitives:  # noqa: N801 - used like no_grad
    """`with count_primitives() as counts:` counts the primitive Functions applied inside the block.

    This is how you can see that `softmax` or `conv2d` is nothing but a few primitives:
    `counts` is a Counter such as {'Max': 1, 'Sub': 1, 'Exp2': 1, 'Sum': 1, 'Reshape': 2, ...}.
    """

    active: ClassVar[list[Counter]] = []

    def __enter__(self) -> Counter:
        self.counts: Counter = Counter()
        count_primitives.active.append(self.counts)
        return self.counts

    def __exit__(self, *exc: object) -> None:
        count_primitives.active.remove(self.counts)
