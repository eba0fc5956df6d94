"""Layers: small classes that hold their weights as Tensors and call the Tensor ops.

Names, shapes and initialisation follow PyTorch's `torch.nn` (a state dict moves between the two
unchanged): `Linear(in, out)` holds `weight` of shape (out, in) and `bias` of shape (out,), both
drawn from U(-1/sqrt(in), 1/sqrt(in)). There is no Module base class: a model is any object whose
attributes (and lists, tuples, dicts of them) hold layers and Tensors; `nn.state.get_parameters`
and `get_state_dict` find them by walking the attributes.

Training mode is `Tensor.training` (turn it on with `with Tensor.train():`): BatchNorm2d uses the
batch statistics and updates its running ones while training, and uses the running ones otherwise;
Dropout drops only while training.
"""

from __future__ import annotations

import math
from typing import Sequence

import tinyedu.core.nn as core
from tinyedu.core.dtype import dtypes
from tinyedu.tensor import Tensor
from tinyedu.tensor_api.conv import Ints, _ints
from tinyedu.tensor_api.grad_mode import no_grad


# --8<-- [start:linear]
class Linear(core.Linear):
    """y = x @ weight.T + bias: the core's Linear (tinyedu/core/nn.py), whose weights and
    parameters() it keeps (PyTorch's U(-b, b), b = 1/sqrt(in_features), for both), made as
    tinyedu.Tensor; it adds checked sizes, Tensor.linear (shapes checked, no transpose of a
    transpose) and a repr."""

    tensor = Tensor

    def __init__(self, in_features: int, out_features: int, bias: bool = True):
        _check_sizes("Linear", in_features=in_features, out_features=out_features)
        super().__init__(in_features, out_features, bias)

    def __call__(self, x: Tensor) -> Tensor:
        return x.linear(self.weight, self.bias)

    def __repr__(self) -> str:
        out_features, in_features = self.weight.shape
        return f"Linear(in_features={in_features}, out_features={out_features}, bias={self.bias is not None})"


# --8<-- [end:linear]
class Conv2d:
    """2-d convolution of (N, C_in, H, W) input: weight (C_out, C_in / groups, kH, kW), bias (C_out,)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Ints, stride: Ints = 1,
                 padding: Ints | str = 0, dilation: Ints = 1, groups: int = 1, bias: bool = True):
        _check_sizes("Conv2d", in_channels=in_channels, out_channels=out_channels, groups=groups)
        if in_channels % groups or out_channels % groups:
            raise ValueError(f"Conv2d: in_channels ({in_channels}) and out_channels ({out_channels}) must "
                             f"both be divisible by groups ({groups})")
        self.kernel_size = _ints(kernel_size, 2, "kernel_size", "Conv2d", 1)
        self.stride, self.padding, self.dilation, self.groups = stride, padding, dilation, groups
        fan_in = in_channels // groups * self.kernel_size[0] * self.kernel_size[1]
        bound = 1 / math.sqrt(fan_in)
        shape = (out_channels, in_channels // groups, *self.kernel_size)
        self.weight = Tensor.uniform(*shape, low=-bound, high=bound, requires_grad=True)
        self.bias = Tensor.uniform(out_channels, low=-bound, high=bound, requires_grad=True) if bias else None

    def __call__(self, x: Tensor) -> Tensor:
        return x.conv2d(self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)

    def __repr__(self) -> str:
        out_channels, in_per_group = self.weight.shape[:2]
        return (f"Conv2d({in_per_group * self.groups}, {out_channels}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}, padding={self.padding})")


# --8<-- [start:batchnorm]
class BatchNorm2d:
    """Normalize each channel of (N, C, H, W) input with the batch's statistics while training, and with
    running averages of them otherwise (then * weight + bias).

    The running averages are updated *in place* with `assign` while training, as in PyTorch:
    running = (1 - momentum) * running + momentum * batch statistic, where the variance that enters
    the running average is the unbiased one (divided by n - 1) while the batch is normalized with the
    biased one (divided by n). momentum=None uses the cumulative average 1 / num_batches_tracked.
    """

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = True, track_running_stats: bool = True):
        _check_sizes("BatchNorm2d", num_features=num_features)
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.weight = _in_memory(Tensor.ones(num_features), requires_grad=True) if affine else None
        self.bias = _in_memory(Tensor.zeros(num_features), requires_grad=True) if affine else None
        self.track_running_stats = track_running_stats
        if track_running_stats:
            self.running_mean = _in_memory(Tensor.zeros(num_features))
            self.running_var = _in_memory(Tensor.ones(num_features))
            self.num_batches_tracked = _in_memory(Tensor.zeros((), dtype=dtypes.int32))

    def __call__(self, x: Tensor) -> Tensor:
        if x.ndim != 4:
            raise ValueError(f"BatchNorm2d: expected 4-d input (N, C, H, W), got shape {x.shape}")
        if x.shape[1] != self.num_features:
            raise ValueError(f"BatchNorm2d: input has {x.shape[1]} channels (shape {x.shape}) but the layer "
                             f"was made for num_features={self.num_features}")
        if Tensor.training or not self.track_running_stats:
            if Tensor.training and self.track_running_stats:
                self._update_running_stats(x)
            return x.batch_norm(None, None, self.weight, self.bias, training=True, eps=self.eps)
        return x.batch_norm(self.running_mean, self.running_var, self.weight, self.bias, training=False,
                            eps=self.eps)

    def _update_running_stats(self, x: Tensor) -> None:
        n = x.numel() // x.shape[1]
        if n < 2:
            raise ValueError(f"BatchNorm2d: training needs more than one value per channel, got input shape "
                             f"{x.shape}")
        with no_grad():
            x = x.detach()
            mean = x.mean((0, 2, 3))
            unbiased_var = (x - mean.reshape(1, -1, 1, 1)).square().sum((0, 2, 3)) / (n - 1)
            tracked = self.num_batches_tracked + 1
            # the momentum is a Python constant (a literal in the kernel); momentum=None depends on the
            # step, so it is computed on the device from num_batches_tracked
            factor = self.momentum if self.momentum is not None else 1 / tracked.float()
            Tensor.assign_all(
                [self.running_mean, self.running_var, self.num_batches_tracked],
                [self.running_mean * (1 - factor) + mean * factor,
                 self.running_var * (1 - factor) + unbiased_var * factor, tracked])
# --8<-- [end:batchnorm]

    def __repr__(self) -> str:
        return f"BatchNorm2d({self.num_features}, eps={self.eps}, momentum={self.momentum})"


class LayerNorm:
    """Normalize over the last len(normalized_shape) axes of each sample, then * weight + bias."""

    def __init__(self, normalized_shape: int | Sequence[int], eps: float = 1e-5,
                 elementwise_affine: bool = True, bias: bool = True):
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        _check_sizes("LayerNorm", **{f"normalized_shape[{i}]": s for i, s in enumerate(shape)})
        self.normalized_shape, self.eps = shape, eps
        self.weight = _in_memory(Tensor.ones(*shape), requires_grad=True) if elementwise_affine else None
        with_bias = elementwise_affine and bias
        self.bias = _in_memory(Tensor.zeros(*shape), requires_grad=True) if with_bias else None

    def __call__(self, x: Tensor) -> Tensor:
        return x.layer_norm(self.normalized_shape, self.weight, self.bias, self.eps)

    def __repr__(self) -> str:
        return f"LayerNorm({self.normalized_shape}, eps={self.eps})"


class Embedding:
    """A lookup table: row i of `weight` (num_embeddings, embedding_dim) for index i; weights from N(0, 1)."""

    def __init__(self, num_embeddings: int, embedding_dim: int):
        _check_sizes("Embedding", num_embeddings=num_embeddings, embedding_dim=embedding_dim)
        self.weight = Tensor.normal(num_embeddings, embedding_dim, requires_grad=True)

    def __call__(self, index: Tensor) -> Tensor:
        if not isinstance(index, Tensor) or index.dtype.is_float or index.dtype == dtypes.bool:
            what = type(index).__name__ if not isinstance(index, Tensor) else index.dtype.name
            raise TypeError(f"Embedding: expected a Tensor of integer indices, got {what}")
        return self.weight[index]  # indexing by a tensor: a one-hot sum, so the gradient comes for free

    def __repr__(self) -> str:
        return f"Embedding({self.weight.shape[0]}, {self.weight.shape[1]})"


class Dropout:
    """Zero each element with probability p while training (scaling the rest by 1 / (1 - p))."""

    def __init__(self, p: float = 0.5):
        if not isinstance(p, (int, float)) or isinstance(p, bool) or not 0 <= p <= 1:
            raise ValueError(f"Dropout: probability p has to be between 0 and 1, got {p!r}")
        self.p = p

    def __call__(self, x: Tensor) -> Tensor:
        return x.dropout(self.p)

    def __repr__(self) -> str:
        return f"Dropout(p={self.p})"


def _in_memory(t: Tensor, requires_grad: bool = False) -> Tensor:
    """A constant (Tensor.ones) given memory of its own. Kernels read a constant as a literal and fold
    x * 1 away; a weight that training will change must be read from memory from the start."""
    return t.contiguous().realize().requires_grad_(requires_grad)


def _check_sizes(layer: str, **sizes: int) -> None:
    for name, size in sizes.items():
        if not isinstance(size, int) or isinstance(size, bool) or size < 1:
            raise ValueError(f"{layer}: {name} must be a positive int, got {size!r}")


__all__ = ["Linear", "Conv2d", "BatchNorm2d", "LayerNorm", "Embedding", "Dropout"]
