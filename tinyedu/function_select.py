"""Functions whose value the Tensor method computes and passes in, with a gradient of their own.

GivenGradient: the Tensor method computes the value without a graph and passes the gradient's
formula in (logcumsumexp, tinyedu/tensor_api/scans.py, where the chain rule through its rounds would
spread 0 * NaN from a leading -inf).
"""

from __future__ import annotations

from typing import Callable

from tinyedu.core.function import Function
from tinyedu.lazy import LazyBuffer


class GivenGradient(Function):
    """An op whose value the Tensor method computed (without a graph) and whose gradient is a formula
    it passes in as `gradient`, a function from the output's gradient to the input's (on LazyBuffers).
    logcumsumexp uses it for PyTorch's formula, which the chain rule through its rounds does not give
    at -inf (there a round's 0 * NaN spreads NaN to every element)."""

    def forward(self, x: LazyBuffer, value: LazyBuffer, gradient: Callable[[LazyBuffer], LazyBuffer],
                ) -> LazyBuffer:
        self.gradient = gradient
        return value

    def backward(self, grad: LazyBuffer) -> tuple[LazyBuffer | None, ...]:
        return self.gradient(grad), None
