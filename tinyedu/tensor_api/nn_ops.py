"""Neural-network building blocks on tensors: matmul, linear, convolution and pooling.

None of them is a primitive. matmul is a broadcast multiply and a sum; a convolution is the same
matmul after `_pool` has cut the image into windows (im2col) with movement ops only; pooling
is a max or a mean over those windows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tinyedu.tensor import Tensor

IntPair = int | tuple[int, int]


def _pair(value: Any, name: str, op: str, minimum: int) -> tuple[int, int]:
    """An int or a pair of ints (one per spatial axis), each >= minimum, as PyTorch's conv/pool args."""
    if isinstance(value, int):
        value = (value, value)
    pair = tuple(value) if isinstance(value, (tuple, list)) else ()
    ok = len(pair) == 2 and all(isinstance(v, int) and not isinstance(v, bool) for v in pair)
    if not ok or min(pair) < minimum:
        raise ValueError(f"{op}: {name} must be an int or a pair of ints >= {minimum}, got {value!r}")
    return pair


def check_tensors(op: str, device: str, **tensors: Any) -> None:
    """Weights, biases and targets must be Tensors on the input's device (None means not given)."""
    from tinyedu.tensor import Tensor

    for name, t in tensors.items():
        if t is not None and not isinstance(t, Tensor):
            raise TypeError(f"{op}: {name} must be a Tensor, got {type(t).__name__}")
        if t is not None and t.device != device:
            raise ValueError(f"{op}: {name} is on {t.device} but the input is on {device}; move it with "
                             f".to({device!r})")


class NNMixin:
    # --8<-- [start:matmul]
    def matmul(self, other: "Tensor") -> "Tensor":
        """Batched matrix product with broadcasting, as a broadcast multiply and a sum.

        (..., n, k) @ (..., k, m): put x as (..., n, 1, k) and w as (..., 1, m, k), multiply
        (broadcasting makes (..., n, m, k)) and sum the last axis. No new primitive is needed.
        """
        from tinyedu.tensor import Tensor, broadcast_shape

        if not isinstance(other, Tensor):
            raise TypeError(f"matmul: expected a Tensor, got {type(other).__name__}")
        x, w = self, other
        if x.ndim == 0 or w.ndim == 0:
            raise ValueError(f"matmul: both operands need at least 1 dimension, got shapes {x.shape} and "
                             f"{w.shape}")
        x1, w1 = x.ndim == 1, w.ndim == 1
        x = x.reshape(1, x.shape[0]) if x1 else x
        w = w.reshape(w.shape[0], 1) if w1 else w
        if x.shape[-1] != w.shape[-2]:
            raise ValueError(f"matmul: shapes {self.shape} and {other.shape} do not line up: the last axis "
                             f"of the first ({x.shape[-1]}) must equal the second-to-last of the second "
                             f"({w.shape[-2]})")
        batch_op = f"matmul: the batch axes of {self.shape} and {other.shape}"
        broadcast_shape(x.shape[:-2], w.shape[:-2], op=batch_op)  # a clear error if they do not broadcast
        out = (x.unsqueeze(-2) * w.transpose(-1, -2).unsqueeze(-3)).sum(-1)
        if x1:
            out = out.squeeze(-2)
        if w1:
            out = out.squeeze(-1)
        return out

    # --8<-- [end:matmul]
    def dot(self, other: "Tensor") -> "Tensor":
        return self.matmul(other)

    def linear(self, weight: "Tensor", bias: "Tensor | None" = None) -> "Tensor":
        """x @ weight.T + bias, with PyTorch's layout: weight is (out_features, in_features)."""
        check_tensors("linear", self.device, weight=weight, bias=bias)
        if self.ndim == 0 or weight.ndim != 2 or self.shape[-1] != weight.shape[1]:
            raise ValueError(f"linear: input of shape {self.shape} and weight of shape {weight.shape} do not "
                             "fit; the weight must be (out_features, in_features) with in_features = the "
                             "input's last axis")
        out = self.matmul(weight.T)
        if bias is not None:
            if bias.shape != (weight.shape[0],):
                raise ValueError(f"linear: bias must have shape ({weight.shape[0]},), one per output "
                                 f"feature, got {bias.shape}")
            out = out + bias
        return out

    # ---- windows, convolution, pooling ----
    # --8<-- [start:pool]
    def _pool(self, kernel: tuple[int, ...], stride: tuple[int, ...], dilation: tuple[int, ...]) -> "Tensor":
        """Sliding windows over the last len(kernel) axes: (..., *spatial) -> (..., *out, *kernel).

        Along a spatial axis of size n a window holds k elements `dilation` apart, and windows start
        every `stride` elements, so there are out = (n - dilation*(k-1) - 1) // stride + 1 of them.
        `_windows` makes a window at *every* start; a strided shrink keeps every stride-th. All views.
        """
        nd = len(kernel)
        first = self.ndim - nd
        x = self
        for k, s, d in zip(kernel, stride, dilation, strict=True):
            n = x.shape[first]
            out = (n - d * (k - 1) - 1) // s + 1
            x = x.permute(*range(first), *range(first + 1, x.ndim), first)  # this spatial axis goes last
            x = x._windows(k, d)  # (..., k, n - d*(k-1)): a window at every start
            x = x.shrink((None,) * (x.ndim - 1) + ((0, (out - 1) * s + 1),))  # the starts that are used...
            x = x._stride((1,) * (x.ndim - 1) + (s,))  # ...every s-th: (..., k, out)
            x = x.transpose(-1, -2)  # (..., out, k)
        # now (..., out0, k0, out1, k1, ...): gather the outs, then the kernel axes
        outs = [first + 2 * i for i in range(nd)]
        return x.permute(*range(first), *outs, *(o + 1 for o in outs))

    # --8<-- [end:pool]
    def conv2d(self, weight: "Tensor", bias: "Tensor | None" = None, stride: IntPair = 1,
               padding: IntPair | str = 0, dilation: IntPair = 1, groups: int = 1) -> "Tensor":
        """2-d convolution (cross-correlation, as in PyTorch) of (N, C_in, H, W) or (C_in, H, W) input
        with a weight of shape (C_out, C_in / groups, kH, kW).

        im2col: pad, cut the input into windows (N, C_in, oH, oW, kH, kW) with `_pool`, lay each
        window out as a row of C_in/groups * kH * kW numbers, and multiply by the weight seen as a
        matrix. With groups, the channels are split into independent groups, each with its own
        slice of the weight.
        """
        x, op = self, "conv2d"
        check_tensors(op, self.device, weight=weight, bias=bias)
        if x.ndim not in (3, 4) or weight.ndim != 4:
            raise ValueError(f"{op}: expected input (N, C_in, H, W) or (C_in, H, W) and weight (C_out, "
                             f"C_in/groups, kH, kW), got input {self.shape} and weight {weight.shape}")
        unbatched = x.ndim == 3
        x = x.unsqueeze(0) if unbatched else x
        (n, cin, _, _), (cout, cin_g, kh, kw) = x.shape, weight.shape
        if kh == 0 or kw == 0:
            raise ValueError(f"{op}: the weight {weight.shape} has an empty kernel ({kh}, {kw}); kH and kW "
                             "must be >= 1")
        if not isinstance(groups, int) or isinstance(groups, bool) or groups < 1:
            raise ValueError(f"{op}: groups must be a positive int, got {groups!r}")
        if cin != cin_g * groups or cout % groups:
            raise ValueError(f"{op}: input {self.shape} has {cin} channels but weight {weight.shape} with "
                             f"groups={groups} expects {cin_g * groups}; C_in must be weight.shape[1] * "
                             f"groups and C_out ({cout}) divisible by groups")
        sh, sw = _pair(stride, "stride", op, 1)
        dh, dw = _pair(dilation, "dilation", op, 1)
        pads = _conv_padding(padding, (kh, kw), (dh, dw), (sh, sw))
        x = x.pad(((0, 0), (0, 0), *pads))
        _check_output_size(op, self.shape, x.shape[2:], (kh, kw), (dh, dw))
        windows = x._pool((kh, kw), (sh, sw), (dh, dw))  # (n, cin, oh, ow, kh, kw)
        oh, ow = windows.shape[2:4]
        cols = windows.reshape(n, groups, cin_g, oh, ow, kh, kw).permute(0, 1, 3, 4, 2, 5, 6)
        cols = cols.reshape(n, groups, oh * ow, cin_g * kh * kw)  # one row per output pixel
        matrix = weight.reshape(groups, cout // groups, cin_g * kh * kw).transpose(1, 2)
        out = cols.matmul(matrix)  # (n, groups, oh*ow, cout/groups)
        out = out.permute(0, 1, 3, 2).reshape(n, cout, oh, ow)
        if bias is not None:
            if bias.shape != (cout,):
                raise ValueError(f"{op}: bias must have shape ({cout},), one per output channel, got "
                                 f"{bias.shape}")
            out = out + bias.reshape(1, cout, 1, 1)
        return out.squeeze(0) if unbatched else out

    def max_pool2d(self, kernel_size: IntPair, stride: IntPair | None = None, padding: IntPair = 0,
                   dilation: IntPair = 1) -> "Tensor":
        """The max over each kernel_size window of the last two axes; stride defaults to kernel_size.

        Padding is filled with -inf, so it never wins the max (integers are pooled as floats).
        """
        windows = self._pool_windows("max_pool2d", kernel_size, stride, padding, dilation, float("-inf"))
        return windows.max((-2, -1)).cast(self.dtype)

    def avg_pool2d(self, kernel_size: IntPair, stride: IntPair | None = None, padding: IntPair = 0,
                   count_include_pad: bool = True) -> "Tensor":
        """The mean over each window. With count_include_pad (PyTorch's default) padded zeros count
        in the mean; without, each window is divided by the number of real elements in it."""
        windows = self._pool_windows("avg_pool2d", kernel_size, stride, padding, 1, 0.0)
        if count_include_pad:
            return windows.mean((-2, -1))
        ones = self.ones_like(dtype="float32", requires_grad=False)
        counts = ones._pool_windows("avg_pool2d", kernel_size, stride, padding, 1, 0.0).sum((-2, -1))
        return windows.sum((-2, -1)) / counts

    def _pool_windows(self, op: str, kernel_size: IntPair, stride: IntPair | None, padding: IntPair,
                      dilation: IntPair, fill: float) -> "Tensor":
        if self.ndim not in (3, 4):
            raise ValueError(f"{op}: expected input (N, C, H, W) or (C, H, W), got shape {self.shape}")
        kernel = _pair(kernel_size, "kernel_size", op, 1)
        steps = kernel if stride is None else _pair(stride, "stride", op, 1)
        pad = _pair(padding, "padding", op, 0)
        dil = _pair(dilation, "dilation", op, 1)
        if any(p > k // 2 for p, k in zip(pad, kernel, strict=True)):
            raise ValueError(f"{op}: padding {padding} must be at most half of kernel_size {kernel_size}")
        x = self if self.dtype.is_float else self.float()
        x = x.pad(((0, 0),) * (x.ndim - 2) + tuple((p, p) for p in pad), value=fill)
        _check_output_size(op, self.shape, x.shape[-2:], kernel, dil)
        return x._pool(kernel, steps, dil)


def _conv_padding(padding: IntPair | str, kernel: tuple[int, int], dilation: tuple[int, int],
                  stride: tuple[int, int]) -> tuple[tuple[int, int], ...]:
    """(before, after) padding per spatial axis, from an int, a pair, 'valid' (none) or 'same'."""
    if padding == "valid":
        return ((0, 0), (0, 0))
    if padding == "same":  # keep H and W: pad dilation*(k-1) in total, the odd one after (as PyTorch)
        if stride != (1, 1):
            raise ValueError(f"conv2d: padding='same' needs stride 1, got stride {stride}")
        totals = [d * (k - 1) for k, d in zip(kernel, dilation, strict=True)]
        return tuple((t // 2, t - t // 2) for t in totals)
    if isinstance(padding, str):
        raise ValueError(f"conv2d: padding must be an int, a pair of ints, 'valid' or 'same': {padding!r}")
    return tuple((p, p) for p in _pair(padding, "padding", "conv2d", 0))


def _check_output_size(op: str, shape: tuple[int, ...], padded: tuple[int, ...], kernel: tuple[int, int],
                       dilation: tuple[int, int]) -> None:
    spans = [d * (k - 1) + 1 for k, d in zip(kernel, dilation, strict=True)]
    if any(span > size for span, size in zip(spans, padded, strict=True)):
        raise ValueError(f"{op}: the kernel {kernel} with dilation {dilation} spans {tuple(spans)}, larger "
                         f"than the padded input {tuple(padded)} (input shape {shape}); use a smaller kernel "
                         "or more padding")
