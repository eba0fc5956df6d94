"""Indexing: `x[...]` and `gather`, built from movement ops and one-hot sums.

Basic indexing (ints, slices, None, ...) only moves data, so it is a view: shrink, stride and
reshape. Indexing with a tensor of integers picks arbitrary elements; there is no primitive for
that, so we build it from comparisons: `index == arange(n)` is a one-hot mask, and multiplying
by the mask and summing away the axis keeps exactly the picked elements. It costs n times more
work than a real gather, but it is made of primitives, so the gradient comes for free: each
picked element receives the gradient of every place it was picked for.
"""

from __future__ import annotations

import math
from typing import Any, Iterator

import numpy as np

from tinyedu.core.dtype import dtypes
from tinyedu.core.errors import ArgumentError, DeviceError, DTypeError, ShapeError
from tinyedu.tensor_api.base import TensorLike, broadcast_shape

_VALID = "ints, slices, None, ..., and integer tensors or lists"


class IndexingMixin:
    def __getitem__(self: TensorLike, index: Any) -> TensorLike:
        """numpy/PyTorch indexing: ints (negative count from the end), slices with any step (a negative
        step walks backwards, which PyTorch refuses but numpy allows), None (a new size-1 axis),
        ... (all the axes not named), and integer tensors or lists (advanced indexing).

        As in PyTorch, an int (or 0-d integer tensor) removes its axis; the axes picked by integer
        tensors are replaced by the broadcast shape of those tensors, in place if the tensors index
        neighbouring axes and in front otherwise.
        """
        items = self._expand_ellipsis(list(index) if isinstance(index, tuple) else [index])
        # Basic indexing, one axis at a time: bounds to shrink to, steps to stride by, the final shape.
        bounds, steps, shape = [], [], []
        picks: list[tuple[int, TensorLike]] = []  # (axis in `shape`, integer tensor) for advanced indexing
        selects: list[tuple[int, TensorLike]] = []  # 0-d integer tensors: like ints, their axis is removed
        axis = 0
        for item in items:
            if item is None:
                shape.append(1)
                continue
            size = self.shape[axis]
            if isinstance(item, int):
                i = item + size if item < 0 else item
                if not 0 <= i < size:
                    raise IndexError(f"__getitem__: index {item} is out of bounds for axis {axis} of size "
                                     f"{size} (shape {self.shape}); valid indices are {-size}..{size - 1}")
                bounds.append((i, i + 1))
                steps.append(1)
            elif isinstance(item, slice):
                lo, hi, step = _slice_bounds(item, size)
                bounds.append((lo, hi))
                steps.append(step)
                shape.append(math.ceil((hi - lo) / abs(step)))
            else:  # an integer tensor
                bounds.append((0, size))
                steps.append(1)
                (selects if item.ndim == 0 else picks).append((len(shape), item))
                shape.append(size)
            axis += 1
        x = self.shrink(bounds)._stride(steps).reshape(shape)
        return x._take(picks, selects) if picks or selects else x

    def __iter__(self: TensorLike) -> Iterator[TensorLike]:
        """Rows along the first axis, as views (x[0], x[1], ...)."""
        if not self.ndim:
            raise TypeError("iter(): a 0-d tensor has no first axis to iterate over; use .item()")
        return (self[i] for i in range(self.shape[0]))

    def __setitem__(self: TensorLike, index: Any, value: Any) -> None:
        raise TypeError("__setitem__: indexed assignment is not supported; build the new values with "
                        "mask.where(value, x) or cat, and write them in place with x.assign(new_values)")

    def _expand_ellipsis(self: TensorLike, items: list[Any]) -> list[Any]:
        """Check each index item, turn lists into tensors, and replace ... with enough full slices."""
        items = [self._index_item(item) for item in items]
        if sum(item is Ellipsis for item in items) > 1:
            raise IndexError("__getitem__: an index can only have a single ellipsis (...)")
        named = sum(item is not None and item is not Ellipsis for item in items)
        if named > self.ndim:
            raise IndexError(f"__getitem__: too many indices for a tensor of shape {self.shape}: {named} "
                             f"axes indexed but it has {self.ndim}")
        fill = [slice(None)] * (self.ndim - named)
        if any(item is Ellipsis for item in items):
            at = next(k for k, item in enumerate(items) if item is Ellipsis)
            return items[:at] + fill + items[at + 1:]
        return items + fill

    def _index_item(self: TensorLike, item: Any) -> Any:
        if item is None or item is Ellipsis or isinstance(item, slice):
            return item
        if isinstance(item, (bool, np.bool_)):
            raise IndexError(f"__getitem__: a bool index ({item}) is not supported; valid indices are "
                             f"{_VALID}")
        if isinstance(item, (int, np.integer)):
            return int(item)
        if isinstance(item, (list, tuple, np.ndarray)):  # a tuple inside the index is a list, as in torch
            if isinstance(item, tuple) and not all(isinstance(i, (int, np.integer, list, tuple))
                                                   for i in item):
                raise IndexError(f"__getitem__: a tuple inside an index must hold ints (it picks elements, "
                                 f"like a list), got {item!r}; valid indices are {_VALID}")
            item = type(self)(item, device=self.device)
        if isinstance(item, type(self)):
            if item.dtype == dtypes.bool:
                raise IndexError(f"__getitem__: boolean mask indexing (a bool tensor of shape {item.shape}) "
                                 "is not supported, since the result's shape would depend on the data; use "
                                 "mask.where(x, 0) to zero the other elements")
            if item.dtype.is_float:
                raise IndexError("__getitem__: tensors used as indices must be integers, got "
                                 f"{item.dtype.name}; cast with .int()")
            if item.device != self.device:
                raise DeviceError(f"__getitem__: the index is on {item.device} but the tensor is on "
                                  f"{self.device}")
            return item
        raise IndexError(f"__getitem__: invalid index {item!r} of type {type(item).__name__}; valid indices "
                         f"are {_VALID}")

    def _take(self: TensorLike, picks: list[tuple[int, TensorLike]], selects: list[tuple[int,
              TensorLike]]) -> TensorLike:
        """Advanced indexing: result[b..., rest...] = self[..., i1[b], ..., i2[b], ...] for the picked axes.

        One mask over (broadcast index shape B, sizes of the picked axes) is 1 exactly at the picked
        elements; x.where(mask, 0).sum(picked axes) then keeps them.
        """
        indexed = picks + selects
        axes = [a for a, _ in indexed]
        batch = broadcast_shape(*(t.shape for _, t in indexed), op="__getitem__")
        mask = None
        for k, (a, index) in enumerate(indexed):
            n = self.shape[a]
            index = _check_in_range(index, n, f"__getitem__: index tensor for axis {a}", negative_ok=True)
            index = (index < 0).where(index + n, index)
            onehot = index._broadcast_to(batch).unsqueeze(-1) == type(self).arange(n, device=self.device)
            # put this axis' n at position k among the picked axes, size 1 at the others
            onehot = onehot.reshape(batch + (1,) * k + (n,) + (1,) * (len(indexed) - k - 1))
            mask = onehot if mask is None else mask & onehot
        rest = [a for a in range(self.ndim) if a not in axes]
        x = self.permute(axes + rest)
        x = x.reshape((1,) * len(batch) + x.shape)
        mask = mask.reshape(mask.shape + (1,) * len(rest))
        picked_axes = tuple(range(len(batch), len(batch) + len(indexed)))
        out = mask.where(x, 0).sum(picked_axes).cast(self.dtype)  # (*batch, rest...)
        # PyTorch puts the batch axes where the picked axes were if those were neighbours.
        pick_axes = sorted(a for a, _ in picks)
        remaining = sorted(rest + pick_axes)
        positions = [remaining.index(a) for a in pick_axes]
        if positions and positions == list(range(positions[0], positions[0] + len(positions))):
            before = sum(1 for a in rest if a < pick_axes[0])
            nb = len(batch)
            order = list(range(nb, nb + before)) + list(range(nb)) + list(range(nb + before, out.ndim))
            out = out.permute(order)
        return out

    def gather(self: TensorLike, dim: Any = None, index: Any = None, *, idx: Any = None) -> TensorLike:
        """out[i][j][k] = self[index[i][j][k]][j][k] for dim=0 (and likewise for other dims), as torch.gather.

        index has as many axes as self, and along every other axis it may be shorter than self.
        Built as a one-hot sum, like advanced indexing: (index == arange(n)) marks the picks.
        PyTorch's order is gather(dim, index), tinygrad's gather(idx, dim): both work (a Tensor and
        an int cannot be confused), and so do the keywords dim=, index= and idx=.
        """
        if idx is not None:
            if index is not None:
                raise TypeError("gather: give the index once, as index= or idx=")
            index = idx
        tensor = type(self)
        if isinstance(dim, tensor) and not isinstance(index, tensor):
            dim, index = index, dim  # tinygrad's positional order
        if dim is None:
            raise TypeError("gather: missing the dim argument: gather(dim, index)")
        if not isinstance(index, tensor):
            raise TypeError(f"gather: index must be a Tensor of integers, got {type(index).__name__}")
        d = self._axis(dim, "gather")
        if index.dtype.is_float or index.dtype == dtypes.bool:
            raise DTypeError(f"gather: index must hold integers, got {index.dtype.name}; cast with .int()")
        if self.ndim == 0:
            if index.ndim != 0:
                raise ShapeError(f"gather: a 0-d tensor needs a 0-d index, got shape {index.shape}")
            return self.reshape(1).gather(0, index.reshape(1)).reshape(())
        too_big = any(i > s for k, (i, s) in enumerate(zip(index.shape, self.shape, strict=False)) if k != d)
        if index.ndim != self.ndim or too_big:
            raise ShapeError(f"gather: index of shape {index.shape} does not fit a tensor of shape "
                             f"{self.shape} along dim {dim}: it needs {self.ndim} axes, each no larger than "
                             f"the tensor's except dim {d}")
        if index.device != self.device:
            raise DeviceError(f"gather: the index is on {index.device} but the tensor is on {self.device}")
        n = self.shape[d]
        index = _check_in_range(index, n, f"gather: index along dim {d}", negative_ok=False)
        x = self.shrink(tuple(None if k == d else (0, i) for k, i in enumerate(index.shape)))
        x = x.unsqueeze(-1).transpose(d, -1)  # the n candidates move to a new last axis
        onehot = index.unsqueeze(-1) == tensor.arange(n, device=self.device)
        return onehot.where(x, 0).sum(-1).cast(self.dtype)

    def _select(self: TensorLike, axis: int, positions: np.ndarray) -> TensorLike:
        """The elements at host-known positions along axis (a 1-d int array; repeats allowed), by the
        same one-hot sum as gather."""
        n, d = self.shape[axis], axis % self.ndim
        x = self.transpose(d, -1).unsqueeze(-2)  # (..., 1, n)
        tensor = type(self)
        picks = tensor(np.asarray(positions, np.int32).reshape(-1, 1), device=self.device)
        return _one_hot_pick(picks == tensor.arange(n, device=self.device), x, -1).transpose(d, -1)

    def masked_select(self: TensorLike, mask: TensorLike) -> TensorLike:
        """The elements where mask (broadcast against self) is True, as a 1-d tensor in C order
        (torch.masked_select). How many there are depends on the data, so the mask is read first (torch
        waits for it too); the gradient goes back to the picked elements."""
        if not isinstance(mask, type(self)) or mask.dtype != dtypes.bool:
            what = getattr(mask, "dtype", type(mask).__name__)
            raise DTypeError(f"masked_select: mask must be a bool Tensor, got {what}")
        if mask.device != self.device:
            raise DeviceError(f"masked_select: the mask is on {mask.device} but the tensor is on "
                              f"{self.device}")
        shape = broadcast_shape(self.shape, mask.shape, op="masked_select")
        where = np.flatnonzero(mask._broadcast_to(shape).numpy())
        return self._broadcast_to(shape).reshape(-1)._select(0, where)

    # ---- scatter: the other direction of gather ----
    def scatter(self: TensorLike, dim: int, index: TensorLike, src: Any = None, *, value: Any = None,
                reduce: str | None = None) -> TensorLike:
        """A copy of self with out[index[i][j]][j] = src[i][j] for dim=0 (and likewise for other dims), as
        torch.scatter; src may be a tensor or a number (also as value=). If two entries of index name the
        same place, torch's result is unspecified (it depends on the order of writes); here it is their
        sum. reduce='add' / 'multiply' (torch's older spelling) are scatter_reduce's 'sum' / 'prod'."""
        src = value if src is None else src
        if reduce is not None:
            modes = {"add": "sum", "multiply": "prod"}
            if reduce not in modes:
                raise ArgumentError(f"scatter: reduce must be 'add' or 'multiply', got {reduce!r} "
                                    "(scatter_reduce has sum, prod, mean, amax, amin)")
            return self.scatter_reduce(dim, index, src, modes[reduce])
        if self.ndim == 0:
            return self.reshape(1).scatter(0, _as_1d(index), _as_1d(src)).reshape(())
        values, hits = self._scatter_spread(dim, index, src, 0, "scatter")
        return hits.any(-1).where(_one_hot_pick(hits, values, -1), self).cast(self.dtype)

    def scatter_reduce(self: TensorLike, dim: int, index: TensorLike, src: Any, reduce: str, *,
                       include_self: bool = True) -> TensorLike:
        """Like scatter, but every value sent to a place is combined with reduce ('sum', 'prod', 'mean',
        'amax', 'amin'), together with self's own value there if include_self (torch.scatter_reduce).
        Places no index names keep self's value. Ties of amax/amin share the gradient equally, as in
        torch."""
        return self._scatter_reduce(dim, index, src, reduce, include_self, "scatter_reduce")

    def _scatter_reduce(self: TensorLike, dim: int, index: TensorLike, src: Any, reduce: str,
                        include_self: bool, op: str) -> TensorLike:
        fills = {"sum": 0, "mean": 0, "prod": 1, "amax": float("-inf"), "amin": float("inf")}
        if reduce not in fills:
            raise ArgumentError(f"scatter_reduce: reduce must be one of {', '.join(fills)}, got {reduce!r}")
        if self.ndim == 0:
            return self.reshape(1)._scatter_reduce(0, _as_1d(index), _as_1d(src), reduce, include_self,
                                                   op).reshape(())
        fill = fills[reduce] if self.dtype.is_float or reduce in ("sum", "mean", "prod") else \
            _int_limit(self.dtype, low=reduce == "amax")
        values, hits = self._scatter_spread(dim, index, src, fill, op)
        if not index.numel():
            return self  # nothing is sent anywhere
        hit, me = hits.any(-1), self.unsqueeze(-1)
        if reduce in ("amax", "amin"):  # one reduction over self and the sent values: ties share evenly
            candidates = values.cat(me, dim=-1) if include_self else values
            out = candidates.max(-1) if reduce == "amax" else candidates.min(-1)
        elif reduce == "prod":
            out = values.prod(-1) * (self if include_self else 1)
        else:
            out = values.sum(-1) + (self if include_self else 0)
            if reduce == "mean":
                count = hits.sum(-1) + int(include_self)
                count = (count > 0).where(count, 1)  # places without a value keep self (no 0/0)
                out = out / count if self.dtype.is_float else (out.float() / count).floor()
        return hit.where(out.cast(self.dtype), self)

    def _scatter_spread(self: TensorLike, dim: int, index: TensorLike, src: Any, fill: Any,
                        op: str) -> tuple[TensorLike, TensorLike]:
        """(values, hits), both of shape self.shape + (m,), m = index.shape[dim]: the i-th value sent along
        dim sits at its target place in slot i (fill elsewhere), and hits says where one was sent."""
        d = self._axis(dim, op)
        tensor = type(self)
        if not isinstance(index, tensor) or index.dtype.is_float or index.dtype == dtypes.bool:
            raise TypeError(f"{op}: index must be a Tensor of integers, got "
                            f"{getattr(index, 'dtype', index)!r}")
        if not isinstance(src, tensor):
            if not isinstance(src, (bool, int, float)):
                raise TypeError(f"{op}: src must be a Tensor or a number, got {type(src).__name__}")
            src = tensor.full(index.shape, src, dtype=self.dtype, device=self.device)
        if index.device != self.device or src.device != self.device:
            raise DeviceError(f"{op}: self, index and src must be on one device, got {self.device}, "
                              f"{index.device} and {src.device}")
        fits = index.ndim == self.ndim == src.ndim and all(
            i <= s and (i <= t or k == d)
            for k, (i, s, t) in enumerate(zip(index.shape, src.shape, self.shape, strict=True)))
        if not fits:
            raise ShapeError(f"{op}: index of shape {index.shape} does not fit self {self.shape} and src "
                             f"{src.shape} along dim {d}: all need {self.ndim} axes, index no larger than "
                             f"src anywhere and no larger than self except along dim {d}")
        n = self.shape[d]
        where = f"{op}: index along dim {d}" if op.startswith("scatter") else \
            f"{op}: index (a flat position in an output plane of {n} elements; output_size sets its size)"
        index = _check_in_range(index, n, where, negative_ok=False)
        src = src.cast(self.dtype).shrink(tuple((0, i) for i in index.shape))
        onehot = index.unsqueeze(-1) == tensor.arange(n, device=self.device)  # index.shape + (n,)
        values = onehot.where(src.unsqueeze(-1), fill).transpose(d, -1)  # n places at d, m values last
        covered = index.shape[:d] + (n,) + index.shape[d + 1:]
        pads = tuple((0, s - i) for s, i in zip(self.shape, covered, strict=True)) + ((0, 0),)
        return values.pad(pads, value=fill), onehot.transpose(d, -1).pad(pads)

    # ---- masks built from index comparisons ----
    def one_hot(self: TensorLike, num_classes: int = -1) -> TensorLike:
        """out[..., c] = 1 where self[...] == c: int32 (PyTorch: int64) with a new last axis of
        num_classes (-1: the largest value + 1, which reads the data)."""
        if self.dtype.is_float or self.dtype == dtypes.bool:
            raise DTypeError(f"one_hot: only integer (class index) tensors, got {self.dtype.name}")
        if not isinstance(num_classes, int) or isinstance(num_classes, bool) or num_classes < -1:
            raise ArgumentError(f"one_hot: num_classes must be a non-negative int or -1, got {num_classes!r}")
        if self.numel():
            low, high = self.min().item(), self.max().item()
            if low < 0:
                raise ArgumentError(f"one_hot: class values must be non-negative, got {low}")
            if num_classes == -1:
                num_classes = high + 1
            if high >= num_classes:
                raise ArgumentError(f"one_hot: class values must be smaller than num_classes={num_classes}, "
                                    f"got {high}")
        elif num_classes == -1:
            raise ArgumentError("one_hot: cannot infer num_classes from an empty tensor; pass it")
        return (self.unsqueeze(-1) == type(self).arange(num_classes, device=self.device)).int()

    def tril(self: TensorLike, diagonal: int = 0, *, k: int | None = None) -> TensorLike:
        """The lower triangle of the last two axes (row - col >= -diagonal), zeros elsewhere."""
        return self._triangle(diagonal if k is None else k, lower=True)

    def triu(self: TensorLike, diagonal: int = 0, *, k: int | None = None) -> TensorLike:
        """The upper triangle of the last two axes (col - row >= diagonal), zeros elsewhere
        (`k=` is tinygrad's name for diagonal)."""
        return self._triangle(diagonal if k is None else k, lower=False)

    def _triangle(self: TensorLike, diagonal: int, lower: bool) -> TensorLike:
        op = "tril" if lower else "triu"
        if self.ndim < 2:
            raise ShapeError(f"{op}: needs at least 2 axes (a matrix), got shape {self.shape}")
        if not isinstance(diagonal, int) or isinstance(diagonal, bool):
            raise TypeError(f"{op}: diagonal must be an int, got {type(diagonal).__name__}")
        rows, cols = self.shape[-2:]
        arange = type(self).arange
        offset = arange(cols, device=self.device).reshape(1, cols) - \
            arange(rows, device=self.device).reshape(rows, 1)  # col - row
        keep = offset <= diagonal if lower else offset >= diagonal
        return keep.where(self, self.zeros_like())

    def masked_fill(self: TensorLike, mask: TensorLike, value: float | int | bool) -> TensorLike:
        """value where mask is True, self elsewhere; the dtype stays self's (torch.masked_fill)."""
        if not isinstance(mask, type(self)) or mask.dtype != dtypes.bool:
            what = getattr(mask, "dtype", type(mask).__name__)
            raise DTypeError(f"masked_fill: mask must be a bool Tensor, got {what}")
        if not isinstance(value, (bool, int, float)):
            raise TypeError(f"masked_fill: value must be a Python number, got {type(value).__name__}")
        return mask.where(self._to_tensor(value, self.dtype), self)


def _slice_bounds(item: slice, size: int) -> tuple[int, int, int]:
    """A slice as the (lo, hi) range it covers and its step; for a negative step lo..hi is walked
    backwards from hi - 1 (a stride by -k starts at the last element)."""
    for part in (item.start, item.stop, item.step):
        is_int = isinstance(part, (int, np.integer)) and not isinstance(part, bool)
        if part is not None and not is_int:
            raise TypeError(f"__getitem__: slice {item} must have int (or None) start, stop and step")
    if item.step == 0:
        raise ValueError(f"__getitem__: slice {item} has step 0; the step must be non-zero")
    start, stop, step = item.indices(size)
    if step > 0:
        return start, max(start, stop), step
    return stop + 1, max(start + 1, stop + 1), step


def _check_in_range(index: TensorLike, n: int, what: str, negative_ok: bool) -> TensorLike:
    """Check the index values, which depend on data. Indices the user gave (in memory or host data) are
    read directly; indices computed on the device have to be computed first: one small realize."""
    low = -n if negative_ok else 0
    values = index.lazydata.known_values()
    index = index.cast(dtypes.int32)  # uint8 indices too: -n and index + n must fit
    if values is None and index.numel() and ((index < low) | (index >= n)).any().item():
        values = index.numpy()
    if values is not None:
        values = values.astype(np.int64)
        bad = values[(values < low) | (values >= n)]
        if bad.size:
            raise IndexError(f"{what}: value {bad.reshape(-1)[0]} is out of range for size {n}; valid values "
                             f"are {low}..{n - 1}")
    return index


def _one_hot_pick(mask: TensorLike, x: TensorLike, axis: int | tuple[int, ...]) -> TensorLike:
    """The one element of x that mask marks along axis, as sum(where(mask, x, 0)). A sum starts from +0.0,
    so a picked -0.0 would come out as +0.0: it is summed as +0.0 (times -1) and the zero sum negated
    back. The result is -0.0, and the gradient passes both signs, (-1)(-1) = 1; the test for -0.0
    needs no gradient. (Where mask marks several elements, the result is their sum.)"""
    if not x.dtype.is_float:
        return mask.where(x, 0).sum(axis).cast(x.dtype)
    y = x.detach()
    flip = mask & (y == 0) & (y.reciprocal() < 0)  # the pick is a -0.0
    total = mask.where(x * flip.where(-1.0, 1.0), 0).sum(axis)
    return (flip.any(axis) & (total == 0)).where(-total, total)


def _as_1d(x: Any) -> Any:
    """A 0-d tensor as shape (1,) (numbers pass through): scatter on 0-d tensors works on (1,)."""
    return x.reshape(1) if hasattr(x, "reshape") else x


def _int_limit(dtype: Any, low: bool) -> int:
    """The smallest (low) or largest value of an integer or bool dtype: what amax / amin start from."""
    if dtype == dtypes.bool:
        return 0 if low else 1
    info = np.iinfo(dtype.np)
    return int(info.min if low else info.max)
