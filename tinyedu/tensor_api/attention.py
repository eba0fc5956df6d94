"""Fused attention: flash_attention, and scaled_dot_product_attention(..., fused=True) through it.

scaled_dot_product_attention (nn_ops.py) is the textbook form: the whole (..., Tq, Tk) matrix of
scores, its softmax, a matmul with v. flash_attention computes the same numbers FlashAttention's
way: the keys a block at a time with an online softmax (tinyedu/function_attention.py), so no
buffer of Tq × Tk scores exists, in the forward or the backward pass.
"""

from __future__ import annotations

import math

import tinyedu.function_attention as FA
from tinyedu.core.errors import ShapeError
from tinyedu.tensor_api.base import TensorLike

BLOCK = 128  # keys per block: the largest buffer is (..., Tq, BLOCK)


class AttentionMixin:
    # --8<-- [start:flash]
    def flash_attention(self: TensorLike, key: TensorLike, value: TensorLike, is_causal: bool = False,
                        scale: float | None = None, block_size: int = BLOCK) -> TensorLike:
        """softmax(q kᵀ · scale) v for queries self (..., Tq, d), key (..., Tk, d), value (..., Tk, dv),
        block_size keys at a time with an online softmax: the same numbers as
        scaled_dot_product_attention up to rounding, and no (..., Tq, Tk) buffer, forward or backward.

        is_causal: query i sees keys 0..i only (PyTorch's top-left alignment); scale: 1/sqrt(d) by
        default. Reached from scaled_dot_product_attention(..., fused=True) too.
        """
        q, k, v = self._float(), key._float(), value._float()
        _check_flash(q, k, v, block_size)
        scale = 1 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
        if q.dtype.is_half:  # the running sums in float32, rounded to half once at the end
            return q.float().flash_attention(k.float(), v.float(), is_causal, scale, block_size).cast(q.dtype)
        return q._apply(FA.FlashAttention, k, v, scale=scale, causal=bool(is_causal), block=block_size)
    # --8<-- [end:flash]


def _check_flash(q: TensorLike, k: TensorLike, v: TensorLike, block_size: int) -> None:
    """Clear errors for inputs that do not fit, before any kernel is built."""
    op = "flash_attention"
    for name, t in (("key", k), ("value", v)):
        if not isinstance(t, type(q)):
            raise TypeError(f"{op}: {name} must be a Tensor, got {type(t).__name__}")
        if t.device != q.device:
            raise ValueError(f"{op}: {name} is on {t.device} but the query is on {q.device}")
    if q.ndim < 2 or k.ndim != q.ndim or v.ndim != q.ndim:
        raise ShapeError(f"{op}: query, key and value must be (..., T, d) with the same number of axes, got "
                         f"shapes {q.shape}, {k.shape} and {v.shape}")
    if q.shape[:-2] != k.shape[:-2] or k.shape[:-2] != v.shape[:-2]:
        raise ShapeError(f"{op}: the batch axes of query {q.shape}, key {k.shape} and value {v.shape} "
                         "must be equal (expand them first)")
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        raise ShapeError(f"{op}: query {q.shape} and key {k.shape} need the same last axis (d), key and "
                         f"value {v.shape} the same number of positions")
    if 0 in q.shape or 0 in k.shape or 0 in v.shape:
        raise ShapeError(f"{op}: empty inputs {q.shape}, {k.shape}, {v.shape}; every axis must be >= 1")
    if not isinstance(block_size, int) or isinstance(block_size, bool) or block_size < 1:
        raise ValueError(f"{op}: block_size must be a positive int, got {block_size!r}")
