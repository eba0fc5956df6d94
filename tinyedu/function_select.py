"""Functions whose value the Tensor method computes and passes in, with a gradient of their own.

PickAlong picks elements by computed positions (sort, topk): the value keeps each picked element's
exact bits, and the gradient of each output goes back to the one element it was picked from.

The Tensor method computes the value (tinyedu/tensor_api/sorting.py) and passes it in with `pick`,
a bool mask of shape (..., m, n) that is True at [..., p, i] when output p is input i. The chain
rule through that computation would also give this gradient, but the value would need a sum of
the picked element and zeros, which turns -0.0 into +0.0; here the value and the gradient are
separate, so each can be exact.
"""

from __future__ import annotations

from typing import Callable

from tinyedu.function import Function
from tinyedu.lazy import LazyBuffer
from tinyedu.ops import ReduceOps, TernaryOps


class PickAlong(Function):
    """out[..., p] = x[..., i] where pick[..., p, i]; the gradient of x[..., i] is the sum of the
    gradients of the outputs picked from it (a scatter-add, as PyTorch's gather backward)."""

    def forward(self, x: LazyBuffer, value: LazyBuffer, pick: LazyBuffer) -> LazyBuffer:
        self.pick = pick
        return value

    def backward(self, grad: LazyBuffer) -> tuple[LazyBuffer | None, ...]:
        *batch, m, n = self.pick.shape
        g = grad.reshape((*batch, m, 1)).expand(self.pick.shape)
        scattered = self.pick.e(TernaryOps.WHERE, g, g.const(0)).r(ReduceOps.SUM, (len(batch),))
        return scattered.reshape((*batch, n)), None, None


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
