"""Grad mode: whether new operations record the autograd graph, and `no_grad` to switch it off.

It is one switch for every tensor, so it lives here, below Tensor: Tensor._apply reads it, and the
mixins that compute a value without its graph (softmax, the scans) turn it off with `no_grad`.
"""

from __future__ import annotations

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
