"""Normalization and dropout: the layers whose behaviour depends on statistics or on training mode.

layer_norm and batch_norm rescale activations to mean 0 and variance 1 (then an affine weight
and bias), which keeps deep networks trainable; they differ only in the axes the statistics
are taken over. dropout zeroes random activations, but only while `Tensor.training` is on.
"""

from __future__ import annotations

from contextlib import ContextDecorator
from typing import ClassVar, Sequence

from tinyedu.core.errors import ArgumentError, ShapeError
from tinyedu.core.helpers import prod
from tinyedu.tensor_api.base import TensorLike
from tinyedu.tensor_api.nn_ops import check_tensors


class TrainMode(ContextDecorator):
    """What Tensor.train returns: sets `training` on the tensor class for a block (or a decorated
    function) and puts the previous mode back at the end."""

    def __init__(self, tensor_class: type, mode: bool = True):
        self.tensor_class, self.mode = tensor_class, mode

    def __enter__(self) -> TrainMode:
        self.previous, self.tensor_class.training = self.tensor_class.training, self.mode
        return self

    def __exit__(self, *exc: object) -> None:
        self.tensor_class.training = self.previous


class NormalizationMixin:
    training: ClassVar[bool] = False  # dropout is active only while training (see train)

    @classmethod
    def train(cls, mode: bool = True) -> TrainMode:
        """`with Tensor.train():` (or as a decorator) turns training mode on inside the block, and
        `Tensor.train(False)` turns it off; the previous mode comes back at the end."""
        return TrainMode(cls, mode)

    def dropout(self: TensorLike, p: float = 0.5) -> TensorLike:
        """While training, zero each element with probability p and scale the rest by 1/(1-p), so the
        expected value is unchanged; outside training mode it does nothing (as nn.Dropout in eval).

        The random mask comes from Tensor.manual_seed's generator, so runs repeat.
        """
        if not isinstance(p, (int, float)) or isinstance(p, bool) or not 0 <= p <= 1:
            raise ValueError(f"dropout: probability p has to be between 0 and 1, got {p!r}")
        if not type(self).training or p == 0:
            return self
        return self._dropout(p)

    def _dropout(self: TensorLike, p: float) -> TensorLike:
        """Zero each element with probability p and scale the rest by 1/(1-p), training or not."""
        if p == 1:
            return self * 0
        keep = type(self).rand(*self.shape, device=self.device) >= p
        return keep.where(self * (1 / (1 - p)), 0)

    def layer_norm(self: TensorLike, normalized_shape: int | Sequence[int], weight: TensorLike | None = None,
                   bias: TensorLike | None = None, eps: float = 1e-5) -> TensorLike:
        """Normalize over the last len(normalized_shape) axes (each sample on its own), then
        * weight + bias (both of shape normalized_shape), as torch.nn.functional.layer_norm."""
        check_tensors("layer_norm", self, weight=weight, bias=bias)
        if not isinstance(normalized_shape, (int, tuple, list)):
            raise TypeError(f"layer_norm: normalized_shape must be an int or a tuple of ints, got "
                            f"{type(normalized_shape).__name__}")
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        if not shape or self.shape[self.ndim - len(shape):] != shape or len(shape) > self.ndim:
            raise ShapeError(f"layer_norm: normalized_shape {shape} must be the last axes of the input, but "
                             f"the input has shape {self.shape}")
        axes = tuple(range(self.ndim - len(shape), self.ndim))
        out = self._normalize(axes, eps)
        for name, param in (("weight", weight), ("bias", bias)):
            if param is not None and param.shape != shape:
                raise ShapeError(f"layer_norm: {name} must have shape normalized_shape {shape}, got "
                                 f"{param.shape}")
        out = out * weight if weight is not None else out
        return out + bias if bias is not None else out

    def batch_norm(self: TensorLike, running_mean: TensorLike | None = None,
                   running_var: TensorLike | None = None, weight: TensorLike | None = None,
                   bias: TensorLike | None = None, training: bool = False, eps: float = 1e-5) -> TensorLike:
        """Normalize each channel (axis 1 of (N, C, ...)) over the batch and all other axes.

        training=True uses this batch's mean and (biased) variance; otherwise the running
        statistics. Like PyTorch's functional form it never changes running_mean/var itself: the
        BatchNorm2d layer (tinyedu.nn) updates them, in place, with `assign`.
        """
        check_tensors("batch_norm", self, running_mean=running_mean, running_var=running_var,
                      weight=weight, bias=bias)
        if self.ndim < 2:
            raise ValueError("batch_norm: expected input (N, C, ...) with at least 2 axes, got shape "
                             f"{self.shape}")
        channels = self.shape[1]
        params = {"running_mean": running_mean, "running_var": running_var, "weight": weight, "bias": bias}
        for name, param in params.items():
            if param is not None and param.shape != (channels,):
                raise ShapeError(f"batch_norm: {name} must have shape ({channels},), one per channel, got "
                                 f"{param.shape}")
        per_channel = (1, channels) + (1,) * (self.ndim - 2)
        axes = (0, *range(2, self.ndim))
        if training:
            out = self._normalize(axes, eps)
        else:
            if running_mean is None or running_var is None:
                raise ArgumentError("batch_norm: outside training, running_mean and running_var are needed")
            mean, var = running_mean.reshape(per_channel), running_var.reshape(per_channel)
            out = (self._float() - mean) * (var + eps).rsqrt()
        out = out * weight.reshape(per_channel) if weight is not None else out
        return out + bias.reshape(per_channel) if bias is not None else out

    def _normalize(self: TensorLike, axes: tuple[int, ...], eps: float) -> TensorLike:
        """(x - mean) / sqrt(var + eps) over `axes`, with the biased variance (divide by n)."""
        x = self._float()
        centered = x - x.mean(axes, keepdim=True)
        return centered * (centered.square().mean(axes, keepdim=True) + eps).rsqrt()

    # ---- tinygrad's names ----
    def layernorm(self: TensorLike, axis: int | tuple[int, ...] = -1, eps: float = 1e-5) -> TensorLike:
        """tinygrad's layernorm: normalize over `axis` (no weight or bias; see layer_norm for PyTorch's)."""
        axes = self._reduce_axes(axis, "layernorm")
        return self._normalize(axes, eps)

    def batchnorm(self: TensorLike, weight: TensorLike | None, bias: TensorLike | None, mean: TensorLike,
                  invstd: TensorLike, axis: int | tuple[int, ...] = 1) -> TensorLike:
        """tinygrad's batchnorm: (x - mean) * weight * invstd + bias, with the statistics given per
        channel along `axis` (see batch_norm for PyTorch's)."""
        check_tensors("batchnorm", self, weight=weight, bias=bias, mean=mean, invstd=invstd)
        axes = self._reduce_axes(axis, "batchnorm")
        shape = tuple(s if i in axes else 1 for i, s in enumerate(self.shape))
        for name, t in (("weight", weight), ("bias", bias), ("mean", mean), ("invstd", invstd)):
            if t is not None and t.numel() != prod(shape):
                raise ShapeError(f"batchnorm: {name} of shape {t.shape} does not fit the axes {axes} of "
                                 f"{self.shape}: it needs {prod(shape)} elements")
        x = self._float() - mean.reshape(shape)
        x = x * weight.reshape(shape) if weight is not None else x
        out = x * invstd.reshape(shape)
        return out + bias.reshape(shape) if bias is not None else out

