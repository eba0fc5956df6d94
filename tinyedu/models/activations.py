"""Sigmoid, tanh and GELU whose gradients stay finite when the input is large.

`Tensor.sigmoid` is 1 / (1 + exp(-x)): for x below about -88, exp(-x) overflows float32 to inf.
The value is still right (1 / inf = 0), but the backward pass multiplies the chain rule's 0 by
exp'(-x) = inf, and 0 * inf is NaN. Training a Transformer, one large negative activation in
a GELU is enough to turn every weight into NaN a few hundred steps in.

Here exp only ever sees -|x| <= 0, so it lies in (0, 1] and nothing overflows:
sigmoid(x) = 1 / (1 + e) for x >= 0 and e / (1 + e) for x < 0, with e = exp(-|x|).
(The models use these until the library's own sigmoid and tanh are written this way.)
"""

from __future__ import annotations

import math

from tinyedu.tensor import Tensor


# --8<-- [start:sigmoid]
def sigmoid(x: Tensor) -> Tensor:
    e = (-x.abs()).exp()                # in (0, 1]: never overflows
    return (x >= 0).where(1, e) / (1 + e)


def tanh(x: Tensor) -> Tensor:
    return 2 * sigmoid(2 * x) - 1


def gelu(x: Tensor) -> Tensor:
    """The tanh approximation (PyTorch's approximate='tanh'): 0.5 x (1 + tanh(z)) = x sigmoid(2z)."""
    z = math.sqrt(2 / math.pi) * (x + 0.044715 * x * x * x)
    return x * sigmoid(2 * z)
# --8<-- [end:sigmoid]


__all__ = ["sigmoid", "tanh", "gelu"]
