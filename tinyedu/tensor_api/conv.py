"""Convolution, transposed convolution and pooling, in 1, 2 or 3 dimensions: one implementation each.

A convolution is the Function Conv (tinyedu/function_conv.py): the padded input cut into windows
(as `_pool` does, tinyedu/tensor_api/nn_ops.py), multiplied by the weight and summed over each window;
its gradients are convolutions too. A transposed convolution is a convolution of the input spread
out by the stride, with the kernel flipped. Pooling is a max or a mean over the same windows.

Arguments follow PyTorch (and its positional order: `conv2d(weight, bias, stride, padding,
dilation, groups)`; tinygrad puts groups first, so pass keywords when in doubt). `padding` may also
be tinygrad's flat list, one (before, after) pair per spatial axis *last axis first* (as F.pad):
`(left, right, top, bottom)`. Padding may be negative, which crops (PyTorch refuses that).
"""

from __future__ import annotations

import math
from typing import Any

import tinyedu.function_conv as FC
from tinyedu.core.dtype import dtypes, least_upper_dtype
from tinyedu.core.errors import ArgumentError, ShapeError
from tinyedu.core.helpers import prod
from tinyedu.tensor_api.base import TensorLike
from tinyedu.tensor_api.indexing import _one_hot_pick
from tinyedu.tensor_api.nn_ops import check_tensors

Ints = int | tuple[int, ...]
Pairs = tuple[tuple[int, int], ...]


def _ints(value: Any, nd: int, name: str, op: str, minimum: int) -> tuple[int, ...]:
    """An int or a tuple of nd ints (one per spatial axis), each >= minimum."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = (value,) * nd
    items = tuple(value) if isinstance(value, (tuple, list)) else ()
    ok = len(items) == nd and all(isinstance(v, int) and not isinstance(v, bool) for v in items)
    if not ok or min(items) < minimum:
        raise ArgumentError(f"{op}: {name} must be an int or {nd} ints (one per spatial axis), each >= "
                            f"{minimum}, got {value!r}")
    return items


def _padding(padding: Any, nd: int, op: str, kernel: tuple[int, ...] = (), dilation: tuple[int, ...] = (),
             stride: tuple[int, ...] = ()) -> Pairs:
    """(before, after) per spatial axis, from an int, nd ints, 2*nd ints (F.pad order: last axis
    first), 'valid' (none) or 'same' (keep the size: dilation*(k-1) in total, the odd one after)."""
    if padding == "valid":
        return ((0, 0),) * nd
    if padding == "same":
        if any(s != 1 for s in stride):
            raise ArgumentError(f"{op}: padding='same' needs stride 1, got stride {stride}")
        totals = [d * (k - 1) for k, d in zip(kernel, dilation, strict=True)]
        return tuple((t // 2, t - t // 2) for t in totals)
    if isinstance(padding, str):
        raise ArgumentError(f"{op}: padding must be an int, {nd} ints, {2 * nd} ints, 'valid' or 'same', got "
                            f"{padding!r}")
    if isinstance(padding, (tuple, list)) and len(padding) == 2 * nd and nd > 0:
        flat = _ints(padding, 2 * nd, "padding", op, -(2**31))
        return tuple((flat[2 * i], flat[2 * i + 1]) for i in reversed(range(nd)))
    return tuple((p, p) for p in _ints(padding, nd, "padding", op, -(2**31)))


def _spatial(x: TensorLike, nd: int, op: str, what: str) -> tuple[TensorLike, bool]:
    """(N, C, *spatial), adding N = 1 for an unbatched (C, *spatial) input."""
    if x.ndim not in (nd + 1, nd + 2):
        spatial = ("L",) if nd == 1 else ("H", "W") if nd == 2 else ("D", "H", "W")
        names = ", ".join(spatial)
        raise ShapeError(f"{op}: expected input (N, {what}, {names}) or ({what}, {names}), got shape "
                         f"{x.shape}")
    return (x.unsqueeze(0), True) if x.ndim == nd + 1 else (x, False)


def _check_output_size(op: str, shape: tuple[int, ...], padded: tuple[int, ...], kernel: tuple[int, ...],
                       dilation: tuple[int, ...]) -> None:
    spans = [d * (k - 1) + 1 for k, d in zip(kernel, dilation, strict=True)]
    if any(span > size for span, size in zip(spans, padded, strict=True)):
        raise ShapeError(f"{op}: the kernel {kernel} with dilation {dilation} spans {tuple(spans)}, larger "
                         f"than the padded input {tuple(padded)} (input shape {shape}); use a smaller kernel "
                         "or more padding")


def _conv_padded(x: TensorLike, weight: TensorLike, stride: tuple[int, ...], dilation: tuple[int, ...],
                 groups: int) -> TensorLike:
    """The convolution of an already padded input, as one Function (tinyedu/function_conv.py) whose
    gradients are convolutions too. Both operands in the dtype of their product, summed as `sum`
    does: ints in int64, halves in float32 (rounded once at the end, as in matmul)."""
    dtype = least_upper_dtype(x.dtype, weight.dtype)
    if dtype.is_half:
        return _conv_padded(x.float(), weight.float(), stride, dilation, groups).cast(dtype)
    dtype = dtype if dtype.is_float else dtypes.int64
    return x.cast(dtype)._apply(FC.Conv, weight.cast(dtype), stride=stride, dilation=dilation, groups=groups)


class ConvMixin:
    # ---- convolution ----
    def conv1d(self: TensorLike, weight: TensorLike, bias: TensorLike | None = None, stride: Ints = 1,
               padding: Any = 0, dilation: Ints = 1, groups: int = 1) -> TensorLike:
        return self._conv(weight, bias, stride, padding, dilation, groups, 1, "conv1d")

    def conv2d(self: TensorLike, weight: TensorLike, bias: TensorLike | None = None, stride: Ints = 1,
               padding: Any = 0, dilation: Ints = 1, groups: int = 1) -> TensorLike:
        """2-d convolution (cross-correlation, as in PyTorch) of (N, C_in, H, W) or (C_in, H, W) input
        with a weight of shape (C_out, C_in / groups, kH, kW). See `_conv`."""
        return self._conv(weight, bias, stride, padding, dilation, groups, 2, "conv2d")

    def conv3d(self: TensorLike, weight: TensorLike, bias: TensorLike | None = None, stride: Ints = 1,
               padding: Any = 0, dilation: Ints = 1, groups: int = 1) -> TensorLike:
        return self._conv(weight, bias, stride, padding, dilation, groups, 3, "conv3d")

    def _conv(self: TensorLike, weight: TensorLike, bias: TensorLike | None, stride: Any, padding: Any,
              dilation: Any, groups: Any, nd: int, op: str) -> TensorLike:
        """N-d convolution: pad, then the Function Conv (tinyedu/function_conv.py) cuts the input into
        windows (N, C_in, *out, *kernel), multiplies each by the weight and sums it. With groups, the
        channels are split into independent groups, each with its own slice of the weight."""
        check_tensors(op, self, weight=weight, bias=bias)
        if weight.ndim != nd + 2:
            raise ShapeError(f"{op}: expected a weight (C_out, C_in/groups, {nd} kernel sizes) with {nd + 2} "
                             f"axes, got weight {weight.shape} (input {self.shape})")
        x, unbatched = _spatial(self, nd, op, "C_in")
        cin, (cout, cin_g), kernel = x.shape[1], weight.shape[:2], weight.shape[2:]
        if 0 in kernel:
            raise ShapeError(f"{op}: the weight {weight.shape} has an empty kernel {kernel}; every kernel "
                             "size must be >= 1")
        if not isinstance(groups, int) or isinstance(groups, bool) or groups < 1:
            raise ArgumentError(f"{op}: groups must be a positive int, got {groups!r}")
        if cin != cin_g * groups or cout % groups:
            raise ShapeError(f"{op}: input {self.shape} has {cin} channels but weight {weight.shape} with "
                             f"groups={groups} expects {cin_g * groups}; C_in must be weight.shape[1] * "
                             f"groups and C_out ({cout}) divisible by groups")
        stride, dilation = _ints(stride, nd, "stride", op, 1), _ints(dilation, nd, "dilation", op, 1)
        pads = _padding(padding, nd, op, kernel, dilation, stride)
        x = x.pad(((0, 0), (0, 0), *pads))
        _check_output_size(op, self.shape, x.shape[2:], kernel, dilation)
        result = _conv_padded(x, weight, stride, dilation, groups)
        if bias is not None:
            if bias.shape != (cout,):
                raise ShapeError(f"{op}: bias must have shape ({cout},), one per output channel, got "
                                 f"{bias.shape}")
            result = result + bias.reshape(1, cout, *(1,) * nd)
        return result.squeeze(0) if unbatched else result

    # ---- transposed convolution ----
    def conv_transpose1d(self: TensorLike, weight: TensorLike, bias: TensorLike | None = None,
                         stride: Ints = 1, padding: Ints = 0, output_padding: Ints = 0, groups: int = 1,
                         dilation: Ints = 1) -> TensorLike:
        return self._conv_transpose(weight, bias, stride, padding, output_padding, groups, dilation, 1,
                                    "conv_transpose1d")

    def conv_transpose2d(self: TensorLike, weight: TensorLike, bias: TensorLike | None = None,
                         stride: Ints = 1, padding: Ints = 0, output_padding: Ints = 0, groups: int = 1,
                         dilation: Ints = 1) -> TensorLike:
        """The gradient of conv2d with respect to its input, as a layer: (N, C_in, H, W) with a weight
        (C_in, C_out / groups, kH, kW) gives (N, C_out, (H-1)*stride - 2*padding + dilation*(kH-1) +
        output_padding + 1, ...). See `_conv_transpose`."""
        return self._conv_transpose(weight, bias, stride, padding, output_padding, groups, dilation, 2,
                                    "conv_transpose2d")

    def conv_transpose3d(self: TensorLike, weight: TensorLike, bias: TensorLike | None = None,
                         stride: Ints = 1, padding: Ints = 0, output_padding: Ints = 0, groups: int = 1,
                         dilation: Ints = 1) -> TensorLike:
        return self._conv_transpose(weight, bias, stride, padding, output_padding, groups, dilation, 3,
                                    "conv_transpose3d")

    def _conv_transpose(self: TensorLike, weight: TensorLike, bias: TensorLike | None, stride: Any,
                        padding: Any, output_padding: Any, groups: Any, dilation: Any, nd: int,
                        op: str) -> TensorLike:
        """A convolution in disguise: spread the input out by the stride (stride - 1 zeros between
        neighbours), pad it by dilation*(k-1) - padding on each side (plus output_padding after;
        negative means crop), and convolve with stride 1 and the kernel flipped, its in and out
        channels swapped within each group."""
        check_tensors(op, self, weight=weight, bias=bias)
        if weight.ndim != nd + 2:
            raise ShapeError(f"{op}: expected a weight (C_in, C_out/groups, {nd} kernel sizes) with {nd + 2} "
                             f"axes, got weight {weight.shape} (input {self.shape})")
        x, unbatched = _spatial(self, nd, op, "C_in")
        if not isinstance(groups, int) or isinstance(groups, bool) or groups < 1:
            raise ArgumentError(f"{op}: groups must be a positive int, got {groups!r}")
        cin, cout_g, kernel = weight.shape[0], weight.shape[1], weight.shape[2:]
        if x.shape[1] != cin or cin % groups:
            raise ShapeError(f"{op}: input {self.shape} has {x.shape[1]} channels but weight {weight.shape} "
                             f"expects {cin} (weight.shape[0]), which must be divisible by groups={groups}")
        stride, dilation = _ints(stride, nd, "stride", op, 1), _ints(dilation, nd, "dilation", op, 1)
        padding = _ints(padding, nd, "padding", op, 0)
        output_padding = _ints(output_padding, nd, "output_padding", op, 0)
        for o, s, d in zip(output_padding, stride, dilation, strict=True):
            if o >= s and o >= d:
                raise ArgumentError(f"{op}: output_padding {output_padding} must be smaller than either "
                                    f"stride {stride} or dilation {dilation}")
        w = weight.reshape(groups, cin // groups, cout_g, *kernel).transpose(1, 2)
        w = w.flip(tuple(range(3, 3 + nd))).reshape(groups * cout_g, cin // groups, *kernel)
        for axis, s in enumerate(stride, start=2):
            if s > 1:  # (.., n) -> (.., n, 1) -pad-> (.., n, s) -> (.., n*s), minus the s-1 trailing zeros
                size = x.shape[axis]
                spread = x.unsqueeze(axis + 1).pad(tuple((0, s - 1) if a == axis + 1 else (0, 0)
                                                         for a in range(x.ndim + 1)))
                x = spread.reshape(*x.shape[:axis], size * s, *x.shape[axis + 1:])
                x = x.shrink(tuple((0, (size - 1) * s + 1) if a == axis else None for a in range(x.ndim)))
        pads = tuple((d * (k - 1) - p, d * (k - 1) - p + o)
                     for k, d, p, o in zip(kernel, dilation, padding, output_padding, strict=True))
        out = x._conv(w, None, 1, _flat(pads), dilation, groups, nd, op)
        if bias is not None:
            if bias.shape != (cout_g * groups,):
                raise ShapeError(f"{op}: bias must have shape ({cout_g * groups},), one per output channel, "
                                 f"got {bias.shape}")
            out = out + bias.reshape(1, cout_g * groups, *(1,) * nd)
        return out.squeeze(0) if unbatched else out

    # ---- pooling ----
    def max_pool1d(self: TensorLike, kernel_size: Ints = 2, stride: Ints | None = None, padding: Ints = 0,
                   dilation: Ints = 1, ceil_mode: bool = False, return_indices: bool = False) -> Any:
        return self._max_pool(kernel_size, stride, padding, dilation, ceil_mode, 1, "max_pool1d",
                              return_indices)

    def max_pool2d(self: TensorLike, kernel_size: Ints = 2, stride: Ints | None = None, padding: Ints = 0,
                   dilation: Ints = 1, ceil_mode: bool = False, return_indices: bool = False) -> Any:
        """The max over each kernel_size window of the last two axes; stride defaults to kernel_size.

        Padding is filled with -inf, so it never wins the max (integers are pooled as floats).
        kernel_size defaults to 2 (tinygrad's default; PyTorch requires it). return_indices=True also
        gives, as torch, where each max came from: its flat position h * W + w in its channel's plane
        (int32; torch's are int64), which max_unpool2d takes."""
        return self._max_pool(kernel_size, stride, padding, dilation, ceil_mode, 2, "max_pool2d",
                              return_indices)

    def max_pool3d(self: TensorLike, kernel_size: Ints = 2, stride: Ints | None = None, padding: Ints = 0,
                   dilation: Ints = 1, ceil_mode: bool = False, return_indices: bool = False) -> Any:
        return self._max_pool(kernel_size, stride, padding, dilation, ceil_mode, 3, "max_pool3d",
                              return_indices)

    def avg_pool1d(self: TensorLike, kernel_size: Ints = 2, stride: Ints | None = None, padding: Ints = 0,
                   ceil_mode: bool = False, count_include_pad: bool = True) -> TensorLike:
        return self._avg_pool(kernel_size, stride, padding, ceil_mode, count_include_pad, None, 1,
                              "avg_pool1d")

    def avg_pool2d(self: TensorLike, kernel_size: Ints = 2, stride: Ints | None = None, padding: Ints = 0,
                   ceil_mode: bool = False, count_include_pad: bool = True,
                   divisor_override: int | None = None) -> TensorLike:
        """The mean over each window. With count_include_pad (PyTorch's default) padded zeros count
        in the mean; without, each window is divided by the number of real elements in it."""
        return self._avg_pool(kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, 2,
                              "avg_pool2d")

    def avg_pool3d(self: TensorLike, kernel_size: Ints = 2, stride: Ints | None = None, padding: Ints = 0,
                   ceil_mode: bool = False, count_include_pad: bool = True,
                   divisor_override: int | None = None) -> TensorLike:
        return self._avg_pool(kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, 3,
                              "avg_pool3d")

    def _max_pool(self: TensorLike, kernel_size: Any, stride: Any, padding: Any, dilation: Any,
                  ceil_mode: bool, nd: int, op: str, return_indices: bool = False) -> Any:
        windows, _ = self._pool_windows(op, nd, kernel_size, stride, padding, dilation, ceil_mode,
                                        float("-inf"))
        out = windows.max(tuple(range(-nd, 0))).cast(self.dtype)
        if not return_indices:
            return out
        args = (op, nd, kernel_size, stride, padding, dilation, ceil_mode)
        return out, _argmax_in_windows(self, windows, args)

    def max_unpool1d(self: TensorLike, indices: TensorLike, kernel_size: Ints, stride: Ints | None = None,
                     padding: Ints = 0, output_size: Any = None) -> TensorLike:
        return self._max_unpool(indices, kernel_size, stride, padding, output_size, 1, "max_unpool1d")

    def max_unpool2d(self: TensorLike, indices: TensorLike, kernel_size: Ints, stride: Ints | None = None,
                     padding: Ints = 0, output_size: Any = None) -> TensorLike:
        """The inverse of max_pool2d(return_indices=True) (F.max_unpool2d): each value goes back to the
        place its index names in a zero plane of size (H - 1) * stride - 2 * padding + kernel_size (or
        output_size, which may be larger by less than a stride). See `_max_unpool`."""
        return self._max_unpool(indices, kernel_size, stride, padding, output_size, 2, "max_unpool2d")

    def max_unpool3d(self: TensorLike, indices: TensorLike, kernel_size: Ints, stride: Ints | None = None,
                     padding: Ints = 0, output_size: Any = None) -> TensorLike:
        return self._max_unpool(indices, kernel_size, stride, padding, output_size, 3, "max_unpool3d")

    def _max_unpool(self: TensorLike, indices: TensorLike, kernel_size: Any, stride: Any, padding: Any,
                    output_size: Any, nd: int, op: str) -> TensorLike:
        """A scatter of each channel plane into zeros. Overlapping windows can name one place twice,
        always with the same value (the same input element won both): as torch's last write, the
        last of them is kept, and it alone receives the gradient (torch gives every copy all of it)."""
        check_tensors(op, self, indices=indices)
        x, unbatched = _spatial(self, nd, op, "C")
        if not self.dtype.is_float or indices.shape != self.shape:
            raise ShapeError(f"{op}: expected a float input and indices of the same shape, got "
                             f"{self.dtype.name} {self.shape} and indices {indices.shape}")
        kernel = _ints(kernel_size, nd, "kernel_size", op, 1)
        steps = kernel if stride is None else _ints(stride, nd, "stride", op, 1)
        pads = _ints(padding, nd, "padding", op, 0)
        sizes = tuple((n - 1) * s - 2 * p + k
                      for n, s, p, k in zip(x.shape[2:], steps, pads, kernel, strict=True))
        if output_size is not None:
            wanted = tuple(output_size)[-nd:]
            if len(tuple(output_size)) not in (nd, nd + 2) or any(
                    not s - t < w < s + t for w, s, t in zip(wanted, sizes, steps, strict=True)):
                raise ValueError(f"{op}: output_size {output_size!r} must give {nd} sizes (or {nd + 2}), "
                                 f"each within a stride {steps} of the default {sizes} (exclusive)")
            sizes = wanted
        lead, planes = x.shape[:2], prod(sizes)
        flat_index = indices.reshape(x.shape).reshape(*lead, -1)
        zeros = type(x).zeros(*lead, planes, dtype=x.dtype, device=x.device)
        values, hits = zeros._scatter_spread(-1, flat_index, x.reshape(*lead, -1), 0, op)
        n = flat_index.shape[-1]
        later = type(x).arange(n, device=x.device)
        later = (later.reshape(n, 1) < later) & (flat_index.unsqueeze(-1) == flat_index.unsqueeze(-2))
        hits = hits & later.any(-1).logical_not().unsqueeze(-2)  # a place written again later is not kept
        out = hits.any(-1).where(_one_hot_pick(hits, values, -1), 0).reshape(*lead, *sizes)
        return out.squeeze(0) if unbatched else out

    def _avg_pool(self: TensorLike, kernel_size: Any, stride: Any, padding: Any, ceil_mode: bool,
                  count_include_pad: bool, divisor_override: Any, nd: int, op: str) -> TensorLike:
        """Sum / divisor, where the divisor is (as PyTorch's) the window's size inside the padded input
        (count_include_pad) or inside the real input (not), never counting what ceil_mode added."""
        windows, extra = self._pool_windows(op, nd, kernel_size, stride, padding, 1, ceil_mode, 0.0)
        total = windows.sum(tuple(range(-nd, 0)))
        if divisor_override is not None:
            valid = isinstance(divisor_override, int) and not isinstance(divisor_override, bool)
            if not valid or divisor_override < 1:
                raise ArgumentError(f"{op}: divisor_override must be a positive int, got "
                                    f"{divisor_override!r}")
            return total / divisor_override
        if not count_include_pad or any(extra):  # count the real (or real + padded) positions per window
            pads = _ints(padding, nd, "padding", op, 0)
            ones = self.ones_like(dtype="float32", requires_grad=False)
            if count_include_pad:
                ones = ones.pad(((0, 0),) * (self.ndim - nd) + tuple((p, p) for p in pads), value=1.0)
                pads = (0,) * nd
            counts, _ = ones._pool_windows(op, nd, kernel_size, stride, pads, 1, ceil_mode, 0.0, extra)
            return total / counts.sum(tuple(range(-nd, 0)))
        return total / prod(_ints(kernel_size, nd, "kernel_size", op, 1))

    def _pool_windows(self: TensorLike, op: str, nd: int, kernel_size: Any, stride: Any, padding: Any,
                      dilation: Any, ceil_mode: bool, fill: float, extra: tuple[int,
                      ...] | None = None) -> tuple[TensorLike, tuple[int, ...]]:
        """The pooling windows (..., *out, *kernel) of the padded input, and the extra padding that
        ceil_mode added after each axis (a last window may start in the input and run past it)."""
        if self.ndim not in (nd + 1, nd + 2):
            spatial = {1: "L", 2: "H, W", 3: "D, H, W"}[nd]
            raise ShapeError(f"{op}: expected input (N, C, {spatial}) or (C, {spatial}), got shape "
                             f"{self.shape}")
        kernel = _ints(kernel_size, nd, "kernel_size", op, 1)
        steps = kernel if stride is None else _ints(stride, nd, "stride", op, 1)
        pads = _ints(padding, nd, "padding", op, 0)
        dil = _ints(dilation, nd, "dilation", op, 1)
        for p, k, d in zip(pads, kernel, dil, strict=True):
            if p > (d * (k - 1) + 1) // 2:
                raise ArgumentError(f"{op}: padding {padding} must be at most half of the effective kernel "
                                    f"size (dilation * (kernel_size - 1) + 1) // 2, got kernel_size "
                                    f"{kernel_size}, dilation {dilation}")
        sizes = self.shape[-nd:]
        padded = tuple(n + 2 * p for n, p in zip(sizes, pads, strict=True))
        _check_output_size(op, self.shape, padded, kernel, dil)
        if extra is None:
            extra = tuple(_ceil_extra(n, k, s, p, d) if ceil_mode else 0
                          for n, k, s, p, d in zip(sizes, kernel, steps, pads, dil, strict=True))
        x = self if self.dtype.is_float else self.float()
        x = x.pad(((0, 0),) * (x.ndim - nd) + tuple((p, p + e) for p, e in zip(pads, extra, strict=True)),
                  value=fill)
        return x._pool(kernel, steps, dil), extra


def _argmax_in_windows(x: TensorLike, windows: TensorLike, args: tuple) -> TensorLike:
    """Where each window's max sits, as torch counts it: the flat position in the channel plane of
    the first maximum in the window (scan order), or of the last NaN if there is one. The positions
    0..H*W-1 (padding -1) go through the same padding and windows as the values."""
    nd = args[1]
    sizes = x.shape[-nd:]
    plane = type(x).arange(prod(sizes), device=x.device).reshape(1, *sizes)
    where, _ = plane._pool_windows(*args, -1.0)  # the positions, as floats: exact below 2**24
    kernel_axes = tuple(range(-nd, 0))
    top = windows.max(kernel_axes, keepdim=True)
    first = ((where >= 0) & (windows == top)).where(where, float("inf")).min(kernel_axes)
    last_nan = windows.isnan().where(where, -1.0).max(kernel_axes)
    return (last_nan >= 0).where(last_nan, first).cast("int32")


def _ceil_extra(n: int, k: int, s: int, p: int, d: int) -> int:
    """How much padding after the input gives ceil_mode's last window, PyTorch's rule: one more window
    if the division has a remainder, unless that window would start past the input (and its left
    padding)."""
    span = d * (k - 1) + 1
    out = math.ceil((n + 2 * p - span) / s) + 1
    if (out - 1) * s >= n + p:
        out -= 1
    return max(0, (out - 1) * s + span - (n + 2 * p))


def _flat(pairs: Pairs) -> tuple[int, ...]:
    """Per-axis (before, after) pairs as F.pad's flat list, last axis first."""
    return tuple(v for pair in reversed(pairs) for v in pair)
