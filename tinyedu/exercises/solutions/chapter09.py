"""Chapter 09 (a Transformer): reference solutions, and typical mistakes with the hint they get."""

from __future__ import annotations

import numpy as np

from tinyedu.exercises.registry import Mistake
from tinyedu.models import transformer
from tinyedu.nn import LayerNorm
from tinyedu.tensor import Tensor

# --8<-- [start:causal_mask]
# a column of query positions i compared with a row of key positions j: True where j <= i
causal_mask = transformer.causal_mask
# --8<-- [end:causal_mask]


# --8<-- [start:layer_norm]
def layer_norm(self: LayerNorm, x: Tensor) -> Tensor:
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)  # biased: divided by n
    normalized = (x - mean) / (var + self.eps).sqrt()
    return normalized * self.weight + self.bias
# --8<-- [end:layer_norm]


# --8<-- [start:parameter_count]
# embeddings 12*48 + 11*48; per block: two LayerNorms 2*96, qkv 48*144+144, proj 48*48+48,
# MLP 48*192+192 and 192*48+48; the last LayerNorm 96; the head 48*12+12
block = 2 * 96 + (48 * 144 + 144) + (48 * 48 + 48) + (48 * 192 + 192) + (192 * 48 + 48)
parameter_count = 12 * 48 + 11 * 48 + 2 * block + 96 + (48 * 12 + 12)
# --8<-- [end:parameter_count]


def _mask(compare, dtype=None):
    def causal_mask(length: int, device: str | None = None) -> Tensor:
        query = Tensor.arange(length).reshape(length, 1)
        key = Tensor.arange(length).reshape(1, length)
        out = compare(query, key)
        return out if dtype is None else out.cast(dtype)
    return causal_mask


def _norm(center_axis=-1, ddof=0, eps_outside=False, affine=True):
    def layer_norm(self: LayerNorm, x: Tensor) -> Tensor:
        mean = x.mean(center_axis, keepdim=True)
        squares = (x - mean) ** 2
        var = squares.sum(center_axis, keepdim=True) / (squares.numel() / mean.numel() - ddof)
        out = (x - mean) / (var.sqrt() + self.eps if eps_outside else (var + self.eps).sqrt())
        return out * self.weight + self.bias if affine else out
    return layer_norm


MISTAKES = [
    Mistake("09.causal_mask", _mask(lambda q, k: q <= k), "True above the diagonal", "the transposed mask"),
    Mistake("09.causal_mask", _mask(lambda q, k: k < q), "the diagonal is False", "j < i"),
    Mistake("09.causal_mask", _mask(lambda q, k: k <= q, "float32"), "must be bool", "a float mask"),
    Mistake("09.causal_mask", lambda length, device=None: np.tril(np.ones((length, length), dtype=bool)),
            "return a Tensor", "a numpy array"),
    Mistake("09.causal_mask", lambda length, device=None: Tensor(np.tril(np.ones((length, length), bool))),
            "copies a finished", "numpy's tril as a Tensor"),
    Mistake("09.causal_mask", _mask(lambda q, k: (k <= q) | (k > q)), "that is no mask at all"),
    Mistake("09.layer_norm", _norm(ddof=1), "unbiased variance"),
    Mistake("09.layer_norm", _norm(eps_outside=True), "eps belongs inside the square root"),
    Mistake("09.layer_norm", _norm(affine=False), "multiply by self.weight and add self.bias"),
    Mistake("09.layer_norm", _norm(center_axis=None), "of axis -1 only, not all"),
    Mistake("09.layer_norm", lambda self, x: x.mean(-1), "the output has the input's shape"),
    Mistake("09.parameter_count", parameter_count - 5 * 96, "left out the LayerNorms"),
    Mistake("09.parameter_count", parameter_count - (2 * (144 + 48 + 192 + 48) + 12), "bias as well"),
    Mistake("09.parameter_count", parameter_count * 4, "the heads do not add weights"),
    Mistake("09.parameter_count", 12345.5, "a whole number"),
]
