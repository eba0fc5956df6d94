"""Neural-network building blocks on tensors: matmul, linear, attention, and the sliding windows
that convolution and pooling (tinyedu/tensor_api/conv.py) are built on.

None of them is a primitive. matmul is a broadcast multiply and a sum; a convolution multiplies
the windows of the image (cut with movement ops only, as `_pool` does) by the weight and sums each
window (the Function Conv, tinyedu/function_conv.py, whose gradients are convolutions too); pooling
is a max or a mean over those windows.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

import tinyedu.core.function as F
from tinyedu.core.dtype import dtypes
from tinyedu.core.errors import ArgumentError, DeviceError, ShapeError, UnsupportedError
from tinyedu.tensor_api.base import TensorLike, broadcast_shape


def _expand_ellipsis(term: str, ndim: int, spare: list[str], formula: str) -> str:
    """An operand's letters with "..." replaced by the spare letters of the axes it stands for."""
    if "..." not in term:
        if len(term) != ndim:
            raise ShapeError(f"einsum: {term!r} in {formula!r} names {len(term)} axes, the operand has "
                             f"{ndim}")
        return term
    rest = ndim - len(term.replace("...", ""))
    if rest < 0:
        raise ShapeError(f"einsum: {term!r} in {formula!r} names more axes than the operand has ({ndim})")
    return term.replace("...", "".join(spare[len(spare) - rest:]))


def _diagonals(t: TensorLike, term: str) -> TensorLike:
    """For a letter repeated in one operand ("ii"), keep only its diagonal (as a view: the two axes
    flattened, every (n+1)-th element)."""
    letters = list(term)
    while len(letters) != len(set(letters)):
        c = next(c for c in letters if letters.count(c) > 1)
        a, b = [i for i, x in enumerate(letters) if x == c][:2]
        n = t.shape[a]
        if t.shape[b] != n:
            raise ShapeError(f"einsum: the repeated letter {c!r} has sizes {n} and {t.shape[b]}")
        rest = [i for i in range(t.ndim) if i not in (a, b)]
        flat = t.permute(*rest, a, b).reshape(*(t.shape[i] for i in rest), n * n)
        t = flat[..., ::n + 1] if n else flat
        letters = [letters[i] for i in rest] + [c]
    return t.permute([letters.index(c) for c in dict.fromkeys(term)])


def check_tensors(op: str, x: TensorLike, **tensors: Any) -> None:
    """Weights, biases and targets must be tensors (of the class of x, the op's input) on x's device
    (None means not given)."""
    device = x.device
    for name, t in tensors.items():
        if t is not None and not isinstance(t, type(x)):
            raise TypeError(f"{op}: {name} must be a Tensor, got {type(t).__name__}")
        if t is not None and t.device != device:
            raise DeviceError(f"{op}: {name} is on {t.device} but the input is on {device}; move it with "
                              f".to({device!r})")


# A matmul whose contiguous sizes (k, and m) are not whole vectors is padded to multiples of PAD_TO
# (_times_transposed_padded), from PAD_MIN_WORK multiply-adds on (below, the copies cost more than
# they save), where that grows the work by at most PAD_MAX_GROWTH (not a size of 3 to 16).
PAD_TO = 16
PAD_MIN_WORK = 1 << 18
PAD_MAX_GROWTH = 1.25
ROWS_DIVIDE = 4  # a @ b pads a's rows only when they are not a multiple of this (see below)


def _padded(size: int) -> int:
    return -(-size // PAD_TO) * PAD_TO


def _transposed(t: TensorLike) -> bool:
    """Whether t's last two axes are a transpose of memory in order: its second-to-last axis steps
    through memory one element at a time and its last does not (b.T, for b in memory)."""
    st = getattr(t.lazydata, "st", None)  # (a tensor on several devices has one per device: no)
    strides = st.views[-1].strides if st is not None and len(st.views) == 1 else ()
    return len(strides) >= 2 and strides[-2] == 1 and strides[-1] != 1


class NNMixin:
    # --8<-- [start:matmul]
    def matmul(self: TensorLike, other: TensorLike) -> TensorLike:
        """Batched matrix product with broadcasting, as a broadcast multiply and a sum.

        (..., n, k) @ (..., k, m): put x as (..., n, 1, k) and w as (..., 1, m, k), multiply
        (broadcasting makes (..., n, m, k)) and sum the last axis. No new primitive is needed.
        (A large product whose k and m are not whole vectors runs on padded copies of x and w:
        see _times_transposed_padded.)
        """
        if not isinstance(other, type(self)):
            raise TypeError(f"matmul: expected a Tensor, got {type(other).__name__}")
        if self.dtype == other.dtype and self.dtype.is_half:
            # the products of two halves are exact in float32: sum them there and round once at the
            # end, as PyTorch's matmul does (rounding each product to half first loses a bit or two)
            return self.float().matmul(other.float()).cast(self.dtype)
        x, w = self, other
        if x.ndim == 0 or w.ndim == 0:
            raise ShapeError(f"matmul: both operands need at least 1 dimension, got shapes {x.shape} and "
                             f"{w.shape}")
        x1, w1 = x.ndim == 1, w.ndim == 1
        x = x.reshape(1, x.shape[0]) if x1 else x
        w = w.reshape(w.shape[0], 1) if w1 else w
        if x.shape[-1] != w.shape[-2]:
            raise ShapeError(f"matmul: shapes {self.shape} and {other.shape} do not line up: the last axis "
                             f"of the first ({x.shape[-1]}) must equal the second-to-last of the second "
                             f"({w.shape[-2]})")
        if x.shape[:-2] != w.shape[:-2]:  # (equal batch axes, most often none, broadcast: no message to make)
            batch_op = f"matmul: the batch axes of {self.shape} and {other.shape}"
            broadcast_shape(x.shape[:-2], w.shape[:-2], op=batch_op)  # a clear error if they do not broadcast
        order = tuple(range(w.ndim - 2)) + (w.ndim - 1, w.ndim - 2)  # (w has 2 axes or more by now)
        out = x._times_transposed(w._apply(F.Permute, order=order))  # (transpose, without its checks)
        if x1:
            out = out.squeeze(-2)
        if w1:
            out = out.squeeze(-1)
        return out

    # --8<-- [end:matmul]
    def _times_transposed(self: TensorLike, wt: TensorLike) -> TensorLike:
        """self @ wt.T for self (..., n, k) and wt (..., m, k): the broadcast multiply and sum of matmul."""
        if self.ndim >= 2 and self.shape[:-2] == wt.shape[:-2] and self.dtype == wt.dtype and \
                self.dtype.is_float and self.device == wt.device:
            return self._times_transposed_direct(wt)
        return (self.unsqueeze(-2) * wt.unsqueeze(-3)).sum(-1)

    def _times_transposed_direct(self: TensorLike, wt: TensorLike) -> TensorLike:
        """_times_transposed of one float dtype and the same batch axes (a linear layer, attention,
        most matmuls): the primitives the general line applies, in the same order, without the checks
        of unsqueeze, broadcasting and sum, which cannot fail here (a small matmul's graph costs more
        than its kernel otherwise)."""
        batch, (n, k), m = self.shape[:-2], self.shape[-2:], wt.shape[-2]
        if k % PAD_TO and m % PAD_TO and n * m * k >= PAD_MIN_WORK and \
                _padded(n) * _padded(k) * _padded(m) <= PAD_MAX_GROWTH * n * m * k:
            return self._times_transposed_padded(wt)
        x = self._apply(F.Reshape, shape=(*batch, n, 1, k))
        w = wt._apply(F.Reshape, shape=(*batch, 1, m, k))
        x = x if m == 1 else x._apply(F.Expand, shape=(*batch, n, m, k))  # (broadcasting skips a size it has)
        w = w if n == 1 else w._apply(F.Expand, shape=(*batch, n, m, k))
        out = x._apply(F.Mul, w)._apply(F.Sum, axes=(len(batch) + 2,))
        return out._apply(F.Reshape, shape=(*batch, n, m))

    def _times_transposed_padded(self: TensorLike, wt: TensorLike) -> TensorLike:
        """self @ wt.T for sizes that are not whole vectors, as the same product of copies padded
        with zeros to multiples of PAD_TO, cut back to its size.

        A kernel loads and computes in whole vectors along an axis its inputs are contiguous in (k,
        or m for wt) and blocks its outputs by divisors of n and m; a prime size such as 257 has
        neither, and the product would run one element at a time (about 70x numpy's time at 257^3
        on one AVX-512 core, `bench/bench_matmul.py`). The copies cost (n + m) k elements, the
        product n m k. The zeros change no sum (0 * w adds a zero to a sum that starts at +0.0),
        and the padded rows and columns of the result, which may hold 0 * inf = NaN, are cut away.
        Each copy keeps the order its source has in memory: b of a @ b arrives transposed (wt is b.T),
        and a copy in wt's order would read b down its columns, a transposing copy, slower than one
        that reads and writes rows in order (DEBUG=2 times both copies). In a @ b the kernel's vectors
        run along b's rows (m) and it reads x one element at a time, so there k is left as it is, and
        n is padded only when a register block of ROWS_DIVIDE rows does not divide it: a's rows of
        1000 are used where they are, without a copy."""
        batch, (n, k), m = self.shape[:-2], self.shape[-2:], wt.shape[-2]
        n2, k2, m2 = _padded(n), _padded(k), _padded(m)
        keep = ((0, 0),) * len(batch)
        transposed = _transposed(wt)
        if transposed:  # a @ b: only m needs whole vectors, and n a register block (see above)
            k2, n2 = k, (n if n % ROWS_DIVIDE == 0 else n2)
        x = self
        if (n2, k2) != (n, k):
            x = x._apply(F.Pad, padding=(*keep, (0, n2 - n), (0, k2 - k)))._apply(F.Contiguous)
        if transposed:  # (a @ b passes b's transpose: copied as b, its rows padded, then transposed)
            swap = (*range(len(batch)), len(batch) + 1, len(batch))
            w = wt._apply(F.Permute, order=swap)._apply(F.Pad, padding=(*keep, (0, k2 - k), (0, m2 - m)))
            w = w._apply(F.Contiguous)._apply(F.Permute, order=swap)
        else:
            w = wt._apply(F.Pad, padding=(*keep, (0, m2 - m), (0, k2 - k)))._apply(F.Contiguous)
        out = x._times_transposed_direct(w)
        return out._apply(F.Shrink, bounds=(*((0, size) for size in batch), (0, n), (0, m)))

    def dot(self: TensorLike, other: TensorLike) -> TensorLike:
        """The dot product of two 1-d tensors, as torch.dot (tinygrad's dot is matmul: use matmul or @)."""
        if not isinstance(other, type(self)):
            raise TypeError(f"dot: expected a Tensor, got {type(other).__name__}")
        if self.ndim != 1 or other.ndim != 1 or self.shape != other.shape:
            raise ShapeError(f"dot: expects two 1-d tensors of the same size, got shapes {self.shape} and "
                             f"{other.shape}; use matmul (or @) for matrices")
        return self.matmul(other)

    def mm(self: TensorLike, other: TensorLike) -> TensorLike:
        """Matrix product of two 2-d tensors (torch.mm; matmul also broadcasts)."""
        if self.ndim != 2 or getattr(other, "ndim", None) != 2:
            raise ShapeError(f"mm: expects two 2-d tensors, got shapes {self.shape} and "
                             f"{getattr(other, 'shape', type(other).__name__)}; use matmul for other shapes")
        return self.matmul(other)

    def bmm(self: TensorLike, other: TensorLike) -> TensorLike:
        """Batched matrix product of (b, n, k) and (b, k, m) tensors (torch.bmm: no broadcasting)."""
        if self.ndim != 3 or getattr(other, "ndim", None) != 3 or self.shape[0] != other.shape[0]:
            raise ShapeError(f"bmm: expects two 3-d tensors with the same batch size, got shapes "
                             f"{self.shape} and {getattr(other, 'shape', type(other).__name__)}")
        return self.matmul(other)

    def linear(self: TensorLike, weight: TensorLike, bias: TensorLike | None = None) -> TensorLike:
        """x @ weight.T + bias, with PyTorch's layout: weight is (out_features, in_features)."""
        check_tensors("linear", self, weight=weight, bias=bias)
        if self.ndim == 0 or weight.ndim != 2 or self.shape[-1] != weight.shape[1]:
            raise ShapeError(f"linear: input of shape {self.shape} and weight of shape {weight.shape} do not "
                             "fit; the weight must be (out_features, in_features) with in_features = the "
                             "input's last axis")
        if self.ndim >= 2 and self.dtype == weight.dtype and not self.dtype.is_half:
            out = self._times_transposed(weight)  # matmul(weight.T) would only transpose weight.T back
        else:
            out = self.matmul(weight.T)
        if bias is not None:
            if bias.shape != (weight.shape[0],):
                raise ShapeError(f"linear: bias must have shape ({weight.shape[0]},), one per output "
                                 f"feature, got {bias.shape}")
            out = out + bias
        return out

    # ---- windows, convolution, pooling ----
    # --8<-- [start:pool]
    def _pool(self: TensorLike, kernel: tuple[int, ...], stride: tuple[int, ...], dilation: tuple[int,
              ...]) -> TensorLike:
        """Sliding windows over the last len(kernel) axes: (..., *spatial) -> (..., *out, *kernel).

        Along a spatial axis of size n a window holds k elements `dilation` apart, and windows start
        every `stride` elements, so there are out = (n - dilation*(k-1) - 1) // stride + 1 of them.
        `_windows` makes a window at *every* start; a strided shrink keeps every stride-th. Windows
        that sit side by side (stride = k, no dilation) are a reshape instead, whose gradient is a
        reshape too, not a sum of overlapping windows. All views.
        """
        nd = len(kernel)
        first = self.ndim - nd
        x = self
        for k, s, d in zip(kernel, stride, dilation, strict=True):
            n = x.shape[first]
            out = (n - d * (k - 1) - 1) // s + 1
            x = x.permute(*range(first), *range(first + 1, x.ndim), first)  # this spatial axis goes last
            if s == k and d == 1:  # windows side by side (2x2 pooling): a reshape, and so is its gradient
                x = x.shrink((None,) * (x.ndim - 1) + ((0, out * k),)).reshape(*x.shape[:-1], out, k)
                continue
            x = x._windows(k, d)  # (..., k, n - d*(k-1)): a window at every start
            x = x.shrink((None,) * (x.ndim - 1) + ((0, (out - 1) * s + 1),))  # the starts that are used...
            x = x._stride((1,) * (x.ndim - 1) + (s,))  # ...every s-th: (..., k, out)
            x = x.transpose(-1, -2)  # (..., out, k)
        # now (..., out0, k0, out1, k1, ...): gather the outs, then the kernel axes
        outs = [first + 2 * i for i in range(nd)]
        return x.permute(*range(first), *outs, *(o + 1 for o in outs))

    # --8<-- [end:pool]

    # ---- resizing ----
    def interpolate(self: TensorLike, size: Any = None, scale_factor: Any = None, mode: str = "nearest",
                    align_corners: bool | None = None,
                    recompute_scale_factor: bool | None = None) -> TensorLike:
        """Resize the spatial axes of (N, C, *spatial) as F.interpolate: mode 'nearest' or
        'nearest-exact' (1 to 3 spatial axes), 'linear' (N, C, L), 'bilinear' (N, C, H, W) or
        'trilinear' (N, C, D, H, W), to `size` or to floor(n * scale_factor).

        Each output position reads a source position worked out as torch does, in float32 (with
        scale_factor, torch steps by 1/scale_factor, not by n/size). Nearest picks floor(source),
        nearest-exact the pixel whose centre is nearest, floor(source + 0.5 step); linear blends the
        two neighbours (1 - t) * x[i] + t * x[i + 1], one axis after the other (the last first, as
        torch sums the 4 or 8 terms). The picks are gathers with indices known on the host, so the
        gradient flows back to the elements read. recompute_scale_factor steps by n/size after
        working out size from scale_factor. Nearest modes keep the dtype; linear modes blend uint8
        in fixed point and give uint8 (`_blend_uint8`), other dtypes blend in float32.
        """
        spatial = {"nearest": (1, 2, 3), "nearest-exact": (1, 2, 3), "linear": (1,), "bilinear": (2,),
                   "trilinear": (3,)}
        if mode not in spatial:
            raise UnsupportedError(f"interpolate: mode must be one of {', '.join(spatial)}, got {mode!r}")
        nd = self.ndim - 2
        if nd not in spatial[mode]:
            want = " or ".join(f"{k + 2}-d" for k in spatial[mode])
            raise UnsupportedError(f"interpolate: mode {mode!r} expects a {want} input (N, C, spatial...), "
                                   f"got shape {self.shape}")
        nearest = mode.startswith("nearest")
        if nearest and align_corners is not None:
            raise ValueError("interpolate: align_corners only applies to the modes linear, bilinear and "
                             "trilinear")
        sizes, scales = _interp_sizes(self.shape[2:], size, scale_factor)
        if recompute_scale_factor:
            scales = (None,) * nd
        x = self if self.dtype.is_float or nearest or self.dtype == dtypes.uint8 else self.float()
        for axis in reversed(range(nd)):  # the last axis first
            n, out, scale = self.shape[2 + axis], sizes[axis], scales[axis]
            if nearest:
                x = x._select(2 + axis, _nearest_source(n, out, scale, exact=mode == "nearest-exact"))
            elif x.dtype == dtypes.uint8:
                x = _blend_uint8(x, 2 + axis, n, out, scale, bool(align_corners))
            else:
                low, high, t = _linear_source(n, out, scale, bool(align_corners))
                weight = type(self)(t.reshape((-1,) + (1,) * (nd - 1 - axis)), device=x.device)
                x = x._select(2 + axis, low) * (1 - weight) + x._select(2 + axis, high) * weight
        return x

    # ---- attention ----
    def scaled_dot_product_attention(self: TensorLike, key: TensorLike, value: TensorLike,
                                     attn_mask: TensorLike | None = None, dropout_p: float = 0.0,
                                     is_causal: bool = False, scale: float | None = None,
                                     fused: bool = False) -> TensorLike:
        """softmax(q @ k^T * scale + mask) @ v, with q = self (..., L, E), k (..., S, E), v (..., S, Ev).

        attn_mask: bool (True = may attend, as in PyTorch) or float (added to the scores); is_causal
        masks out the future (query i attends to keys 0..i). scale defaults to 1/sqrt(E). A query
        row that may attend to nothing gives NaN, as in PyTorch. dropout_p drops attention weights
        whenever it is > 0 (as F.scaled_dot_product_attention does, training or not). fused=True
        computes it blockwise, without the (..., L, S) scores: see flash_attention (attention.py).
        """
        op = "scaled_dot_product_attention"
        if fused:
            if attn_mask is not None or dropout_p:
                raise ArgumentError(f"{op}: fused=True takes is_causal but no attn_mask or dropout_p; use "
                                    "fused=False for those")
            return self.flash_attention(key, value, is_causal=is_causal, scale=scale)
        check_tensors(op, self, key=key, value=value, attn_mask=attn_mask)
        if self.ndim < 2 or key.ndim < 2 or value.ndim < 2:
            raise ShapeError(f"{op}: query, key and value need at least 2 axes (..., L or S, E), got "
                             f"{self.shape}, {key.shape}, {value.shape}")
        if self.shape[-1] != key.shape[-1] or key.shape[-2] != value.shape[-2]:
            raise ShapeError(f"{op}: query {self.shape}, key {key.shape} and value {value.shape} do not fit: "
                             "query and key need the same last axis E, key and value the same length S")
        if is_causal and attn_mask is not None:
            raise ArgumentError(f"{op}: pass either attn_mask or is_causal=True, not both (as in PyTorch)")
        if not isinstance(dropout_p, (int, float)) or not 0 <= dropout_p <= 1:
            raise ArgumentError(f"{op}: dropout_p must be a probability in [0, 1], got {dropout_p!r}")
        batch = f"{op}: the batch axes of query {self.shape}, key {key.shape} and value {value.shape}"
        broadcast_shape(self.shape[:-2], key.shape[:-2], value.shape[:-2], op=batch)
        if scale is None:  # (with E = 0 every score is an empty sum, 0, whatever the scale)
            scale = 1 / math.sqrt(self.shape[-1]) if self.shape[-1] else 1.0
        scores = self.matmul(key.transpose(-2, -1)) * scale
        if is_causal:
            length, source = self.shape[-2], key.shape[-2]
            attn_mask = type(self).ones(length, source, dtype=dtypes.bool, device=self.device).tril()
        if attn_mask is not None:
            is_bool = attn_mask.dtype == dtypes.bool
            scores = attn_mask.where(scores, -math.inf) if is_bool else scores + attn_mask
        weights = scores.softmax(-1)
        if dropout_p > 0:
            weights = weights._dropout(dropout_p)
        return weights.matmul(value)

    # ---- einsum ----
    @classmethod
    def einsum(cls, formula: str, *operands: Any) -> TensorLike:
        """Einstein summation, torch.einsum("ij,jk->ik", a, b): multiply the operands with their axes
        lined up by letter (broadcasting the letters one operand lacks) and sum the letters that
        are not in the output. Without "->" the output is the letters used once, in alphabetical
        order. A letter repeated in one operand takes its diagonal ("ii->i"); "..." stands for the
        remaining (broadcast) axes. Operands may also be passed as one list."""
        if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
            operands = tuple(operands[0])
        if not isinstance(formula, str) or not all(isinstance(t, cls) for t in operands) or not operands:
            raise TypeError("einsum: expected a formula string and one or more Tensors")
        formula = formula.replace(" ", "")
        inputs, arrow, output = formula.partition("->")
        terms = inputs.split(",")
        if len(terms) != len(operands):
            raise ShapeError(f"einsum: the formula {formula!r} names {len(terms)} operands, got "
                             f"{len(operands)}")
        ellipsis_ndim = max((t.ndim - len(term.replace("...", ""))
                             for term, t in zip(terms, operands, strict=True) if "..." in term), default=0)
        spare = [c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ" if c not in formula][:ellipsis_ndim]
        terms = [_expand_ellipsis(term, t.ndim, spare, formula)
                 for term, t in zip(terms, operands, strict=True)]
        if arrow:
            output = output.replace("...", "".join(spare))
        else:
            counts = {c: "".join(terms).count(c) for c in "".join(terms)}
            once = sorted(c for c, n in counts.items() if n == 1 and c not in spare)
            output = "".join(spare) + "".join(once)
        letters = sorted(set("".join(terms)) - set(output))
        order = list(output) + letters  # the product's axes: the output's, then the summed ones
        sizes: dict[str, int] = {}
        product = None
        for term, t in zip(terms, operands, strict=True):
            t = _diagonals(t, term)
            term = "".join(dict.fromkeys(term))
            for c, n in zip(term, t.shape, strict=True):
                if sizes.get(c, 1) == 1:
                    sizes[c] = n
                elif n not in (1, sizes[c]):
                    raise ShapeError(f"einsum: letter {c!r} is {sizes[c]} in one operand and {n} in another "
                                     f"({formula!r} with shapes {[o.shape for o in operands]})")
            missing = [c for c in order if c not in term]
            t = t.reshape(*t.shape, *(1,) * len(missing))
            t = t.permute([(term + "".join(missing)).index(c) for c in order])
            product = t if product is None else product * t
        if any(c not in "".join(terms) for c in output):
            raise ShapeError(f"einsum: the output of {formula!r} names a letter no operand has")
        product = product.expand(*(sizes[c] for c in order))
        return product.sum(tuple(range(len(output), len(order)))) if letters else product


def _interp_sizes(shape: tuple[int, ...], size: Any, scale_factor: Any) -> tuple[tuple[int, ...], tuple]:
    """The output sizes, and the scale_factor per axis (None when size was given), as F.interpolate."""
    nd = len(shape)
    if (size is None) == (scale_factor is None):
        raise ValueError(f"interpolate: give exactly one of size and scale_factor, got size={size!r}, "
                         f"scale_factor={scale_factor!r}")
    given = size if size is not None else scale_factor
    items = tuple(given) if isinstance(given, (tuple, list)) else (given,) * nd
    kind = int if size is not None else (int, float)
    ok = len(items) == nd and all(isinstance(v, kind) and not isinstance(v, bool) and v > 0 for v in items)
    if not ok:
        what = "size" if size is not None else "scale_factor"
        raise ValueError(f"interpolate: {what} must be one positive number or {nd} (one per spatial axis of "
                         f"{shape}), got {given!r}")
    if size is not None:
        return items, (None,) * nd
    sizes = tuple(math.floor(n * float(f)) for n, f in zip(shape, items, strict=True))
    if 0 in sizes:
        raise ShapeError(f"interpolate: scale_factor {scale_factor!r} makes the spatial size {shape} empty "
                         f"({sizes})")
    return sizes, tuple(float(f) for f in items)


def _step(n: int, out: int, scale: float | None) -> np.float32:
    """How far the source moves per output position, in float32 as torch: 1/scale_factor if given."""
    return np.float32(1.0 / scale) if scale is not None else np.float32(n) / np.float32(out)


def _nearest_source(n: int, out: int, scale: float | None, exact: bool = False) -> np.ndarray:
    """floor(i * step), clamped to the last element (torch's 'nearest', which is not rounding); with
    exact ('nearest-exact'), floor((i + 0.5) * step): the source pixel under the output pixel's centre."""
    dst = np.arange(out, dtype=np.float32) + np.float32(0.5 if exact else 0)
    return np.minimum(np.floor(dst * _step(n, out, scale)).astype(np.int64), n - 1)


def _linear_source(n: int, out: int, scale: float | None, align_corners: bool) -> tuple[np.ndarray,
                   np.ndarray, np.ndarray]:
    """(i, i + 1 clamped, t) per output position for linear blending. align_corners maps the first and
    last elements onto each other; otherwise pixel centres: source = (i + 0.5) * step - 0.5, at least 0."""
    dst = np.arange(out, dtype=np.float32)
    if align_corners:
        step = np.float32(n - 1) / np.float32(out - 1) if out > 1 else np.float32(0)
        src = dst * step
    else:
        src = np.maximum((dst + np.float32(0.5)) * _step(n, out, scale) - np.float32(0.5), np.float32(0))
    low = np.minimum(src.astype(np.int64), n - 1)
    t = np.minimum(src - low.astype(np.float32), np.float32(1)).astype(np.float32)
    return low, np.minimum(low + 1, n - 1), t


def _blend_uint8(x: TensorLike, axis: int, n: int, out: int, scale: float | None,
                 align_corners: bool) -> TensorLike:
    """One axis of a linear resize of uint8 as torch's CPU kernel does it: integer weights with p
    fraction bits, then (sum + 2^(p-1)) >> p, which rounds half up; the result is uint8 again before
    the next axis. Blending in float and rounding once differs from torch in about 1% of pixels."""
    if n == out:
        return x  # every weight would be exactly 1 (torch skips the pass too)
    low, w_low, w_high, bits = _fixed_point_weights(n, out, scale, align_corners)
    shape = (-1,) + (1,) * (x.ndim - 1 - axis)
    w_low_t = type(x)(w_low.reshape(shape), device=x.device)
    w_high_t = type(x)(w_high.reshape(shape), device=x.device)
    wide = x.int()
    total = wide._select(axis, low) * w_low_t + wide._select(axis, np.minimum(low + 1, n - 1)) * w_high_t
    return ((total + (1 << (bits - 1))) >> bits).cast(x.dtype)


def _fixed_point_weights(n: int, out: int, scale: float | None, align_corners: bool) -> tuple[np.ndarray,
                         np.ndarray, np.ndarray, int]:
    """(first source index, its weight, the next one's weight, p) for `_blend_uint8`, worked out in
    float64: the output pixel's centre c in source coordinates, weights 1 - |j + 0.5 - c| of the
    source pixels j within 1 of it, normalized to sum 1 (one pixel at an edge), then scaled by 2^p
    with p the most bits that keep every weight under 2^15 and rounded to ints."""
    dst = np.arange(out, dtype=np.float64)
    if align_corners:
        centre = dst * ((n - 1) / (out - 1) if out > 1 else 0.0) + 0.5
    else:
        centre = (dst + 0.5) * (1.0 / scale if scale is not None else n / out)
    low = np.maximum(np.trunc(centre - 0.5), 0).astype(np.int64)
    taps = np.minimum(np.trunc(centre + 1.5), n).astype(np.int64) - low  # 1 or 2 source pixels
    w_low = np.maximum(1 - np.abs(low + 0.5 - centre), 0)
    w_high = np.where(taps > 1, np.maximum(1 - np.abs(low + 1.5 - centre), 0), 0.0)
    w_low, w_high = w_low / (w_low + w_high), w_high / (w_low + w_high)
    top = max(w_low.max(), w_high.max())
    bits = next(p for p in range(23) if p == 22 or int(0.5 + top * (1 << (p + 1))) >= 1 << 15)
    to_int = lambda w: np.floor(w * (1 << bits) + 0.5).astype(np.int32)  # noqa: E731
    return low, to_int(w_low), to_int(w_high), bits
