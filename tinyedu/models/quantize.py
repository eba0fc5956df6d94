"""int8 weight-only quantization: each weight matrix as int8 numbers and one float32 scale per row.

A weight row w (one output channel) becomes q = round(w / s) with s = max|w| / 127, so q is an int
in -127..127 and w ≈ q · s, off by at most s / 2 per weight. The matrices take a quarter of the
memory (one byte a weight instead of four, plus one float per row), which is what decoding is
limited by: each generated token reads every weight once. Activations stay float32 ("weight-only"):
a layer computes x @ (q.cast(float32) · s)ᵀ, and the cast and the scale are elementwise ops on the
weight that the scheduler fuses into the matmul's kernel, so no float copy of the matrix is stored.

Rows, not the whole matrix, get their own scale because their sizes differ: one scale per matrix
would be set by the largest row and leave a small row only a few of the 255 levels.
"""

from __future__ import annotations

from typing import Any

from tinyedu.core.dtype import dtypes
from tinyedu.nn import Embedding, Linear
from tinyedu.nn.state import get_state_dict, load_state_dict
from tinyedu.tensor import Tensor
from tinyedu.tensor_api.grad_mode import no_grad


# --8<-- [start:quantize]
def quantize_rows(weight: Tensor) -> tuple[Tensor, Tensor]:
    """int8 values (rows, cols) and float32 scales (rows,) with weight ≈ values · scales[:, None]."""
    with no_grad():
        largest = weight.detach().abs().max(1)
        scale = (largest > 0).where(largest / 127, 1.0)  # an all-zero row: any scale, its values are 0
        values = (weight.detach() / scale.reshape(-1, 1)).round().clamp(-127, 127)
        return values.cast(dtypes.int8).realize(), scale.realize()


class Int8Linear:
    """A Linear layer whose weight is stored as int8 values and per-row scales; `weight` dequantizes."""

    def __init__(self, layer: Linear):
        self.weight_int8, self.scale = quantize_rows(layer.weight)
        self.bias = layer.bias.detach() if layer.bias is not None else None

    @property
    def weight(self) -> Tensor:
        """The float32 weight, as a lazy expression: it fuses into whatever kernel reads it."""
        return self.weight_int8.cast(dtypes.float32) * self.scale.reshape(-1, 1)

    def __call__(self, x: Tensor) -> Tensor:
        return x.linear(self.weight, self.bias)


class Int8Embedding(Embedding):
    """An Embedding (and, in a tied GPT, the head) stored as int8 rows and one scale per token."""

    def __init__(self, layer: Embedding):
        self.weight_int8, self.scale = quantize_rows(layer.weight)

    @property
    def weight(self) -> Tensor:
        return self.weight_int8.cast(dtypes.float32) * self.scale.reshape(-1, 1)
# --8<-- [end:quantize]


def quantize_int8(model: Any) -> Any:
    """A copy of a GPT whose Linear layers and token embedding hold int8 weights; LayerNorms, biases
    and position tables stay float32. The original model is unchanged."""
    quantized = type(model)(**model.config)
    load_state_dict(quantized, get_state_dict(model))
    quantized.tok_emb = Int8Embedding(quantized.tok_emb)
    for block in quantized.blocks:
        for owner, names in ((block.attn, ("qkv", "proj")), (block.mlp, ("fc", "proj"))):
            for name in names:
                setattr(owner, name, Int8Linear(getattr(owner, name)))
    return quantized


__all__ = ["quantize_rows", "Int8Linear", "Int8Embedding", "quantize_int8"]
