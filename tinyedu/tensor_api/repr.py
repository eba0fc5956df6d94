"""How a Tensor prints: like numpy (summarized when large), plus its shape, dtype and device."""

from __future__ import annotations

import numpy as np

from tinyedu.tensor_api.base import TensorLike


def format_tensor(t: TensorLike) -> str:
    """`repr` realizes the tensor: printing is one of the moments a lazy value must exist."""
    grad = ", requires_grad=True" if t.requires_grad else ""
    values = np.array2string(t.numpy(), separator=", ", threshold=100, edgeitems=3, precision=4,
                             prefix="Tensor(")
    return f"Tensor({values}, shape={t.shape}, dtype={t.dtype.name}, device={t.device}{grad})"
