"""Neural-network building blocks on tensors: matmul, linear, convolution, pooling, losses."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tinyedu.tensor import Tensor


class NNMixin:
    def matmul(self, other: "Tensor") -> "Tensor":
        """Batched matrix product with broadcasting, as a broadcast multiply and a sum.

        (..., n, k) @ (..., k, m): put x as (..., n, 1, k) and w as (..., 1, m, k), multiply
        (broadcasting makes (..., n, m, k)) and sum the last axis. No new primitive is needed.
        """
        x, w = self, other
        if x.ndim == 0 or w.ndim == 0:
            raise ValueError(f"matmul: both operands need at least 1 dimension, got shapes {x.shape} and {w.shape}")
        x1, w1 = x.ndim == 1, w.ndim == 1
        x = x.reshape(1, x.shape[0]) if x1 else x
        w = w.reshape(w.shape[0], 1) if w1 else w
        if x.shape[-1] != w.shape[-2]:
            raise ValueError(f"matmul: shapes {self.shape} and {other.shape} do not line up: the last axis of the "
                             f"first ({x.shape[-1]}) must equal the second-to-last of the second ({w.shape[-2]})")
        out = (x.unsqueeze(-2) * w.transpose(-1, -2).unsqueeze(-3)).sum(-1)
        if x1:
            out = out.squeeze(-2)
        if w1:
            out = out.squeeze(-1)
        return out

    def dot(self, other: "Tensor") -> "Tensor":
        return self.matmul(other)
