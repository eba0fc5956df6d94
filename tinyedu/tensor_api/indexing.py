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
from typing import TYPE_CHECKING, Any, Iterator

import numpy as np

from tinyedu.dtype import dtypes

if TYPE_CHECKING:
    from tinyedu.tensor import Tensor

_VALID = "ints, slices, None, ..., and integer tensors or lists"


class IndexingMixin:
    def __getitem__(self, index: Any) -> "Tensor":
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
        picks: list[tuple[int, Tensor]] = []  # (axis in `shape`, integer tensor) for advanced indexing
        selects: list[tuple[int, Tensor]] = []  # 0-d integer tensors: like ints, their axis is removed
        axis = 0
        for item in items:
            if item is None:
                shape.append(1)
                continue
            size = self.shape[axis]
            if isinstance(item, int):
                i = item + size if item < 0 else item
                if not 0 <= i < size:
                    raise IndexError(f"__getitem__: index {item} is out of range for axis {axis} of size "
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

    def __iter__(self) -> Iterator["Tensor"]:
        """Rows along the first axis, as views (x[0], x[1], ...)."""
        if not self.ndim:
            raise TypeError("iter(): a 0-d tensor has no first axis to iterate over; use .item()")
        return (self[i] for i in range(self.shape[0]))

    def __setitem__(self, index: Any, value: Any) -> None:
        raise TypeError("__setitem__: indexed assignment is not supported; build the new values with "
                        "mask.where(value, x) or cat, and write them in place with x.assign(new_values)")

    def _expand_ellipsis(self, items: list[Any]) -> list[Any]:
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

    def _index_item(self, item: Any) -> Any:
        from tinyedu.tensor import Tensor

        if item is None or item is Ellipsis or isinstance(item, slice):
            return item
        if isinstance(item, (bool, np.bool_)):
            raise IndexError(f"__getitem__: a bool index ({item}) is not supported; valid indices are "
                             f"{_VALID}")
        if isinstance(item, (int, np.integer)):
            return int(item)
        if isinstance(item, (list, np.ndarray)):
            item = Tensor(item, device=self.device)
        if isinstance(item, Tensor):
            if item.dtype == dtypes.bool:
                raise IndexError(f"__getitem__: boolean mask indexing (a bool tensor of shape {item.shape}) "
                                 "is not supported, since the result's shape would depend on the data; use "
                                 "mask.where(x, 0) to zero the other elements")
            if item.dtype.is_float:
                raise IndexError("__getitem__: tensors used as indices must be integers, got "
                                 f"{item.dtype.name}; cast with .int()")
            if item.device != self.device:
                raise ValueError(f"__getitem__: the index is on {item.device} but the tensor is on "
                                 f"{self.device}")
            return item
        raise IndexError(f"__getitem__: invalid index {item!r} of type {type(item).__name__}; valid indices "
                         f"are {_VALID}")

    def _take(self, picks: list[tuple[int, "Tensor"]], selects: list[tuple[int, "Tensor"]]) -> "Tensor":
        """Advanced indexing: result[b..., rest...] = self[..., i1[b], ..., i2[b], ...] for the picked axes.

        One mask over (broadcast index shape B, sizes of the picked axes) is 1 exactly at the picked
        elements; x.where(mask, 0).sum(picked axes) then keeps them.
        """
        from tinyedu.tensor import Tensor, broadcast_shape

        indexed = picks + selects
        axes = [a for a, _ in indexed]
        batch = broadcast_shape(*(t.shape for _, t in indexed), op="__getitem__")
        mask = None
        for k, (a, index) in enumerate(indexed):
            n = self.shape[a]
            index = _check_in_range(index, n, f"__getitem__: index tensor for axis {a}", negative_ok=True)
            index = (index < 0).where(index + n, index)
            onehot = index._broadcast_to(batch).unsqueeze(-1) == Tensor.arange(n, device=self.device)
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

    def gather(self, dim: Any = None, index: Any = None, *, idx: Any = None) -> "Tensor":
        """out[i][j][k] = self[index[i][j][k]][j][k] for dim=0 (and likewise for other dims), as torch.gather.

        index has as many axes as self, and along every other axis it may be shorter than self.
        Built as a one-hot sum, like advanced indexing: (index == arange(n)) marks the picks.
        PyTorch's order is gather(dim, index), tinygrad's gather(idx, dim): both work (a Tensor and
        an int cannot be confused), and so do the keywords dim=, index= and idx=.
        """
        from tinyedu.tensor import Tensor

        if idx is not None:
            if index is not None:
                raise TypeError("gather: give the index once, as index= or idx=")
            index = idx
        if isinstance(dim, Tensor) and not isinstance(index, Tensor):
            dim, index = index, dim  # tinygrad's positional order
        if dim is None:
            raise TypeError("gather: missing the dim argument: gather(dim, index)")
        if not isinstance(index, Tensor):
            raise TypeError(f"gather: index must be a Tensor of integers, got {type(index).__name__}")
        d = self._axis(dim, "gather")
        if index.dtype.is_float or index.dtype == dtypes.bool:
            raise TypeError(f"gather: index must hold integers, got {index.dtype.name}; cast with .int()")
        if self.ndim == 0:
            if index.ndim != 0:
                raise ValueError(f"gather: a 0-d tensor needs a 0-d index, got shape {index.shape}")
            return self.reshape(1).gather(0, index.reshape(1)).reshape(())
        too_big = any(i > s for k, (i, s) in enumerate(zip(index.shape, self.shape, strict=False)) if k != d)
        if index.ndim != self.ndim or too_big:
            raise ValueError(f"gather: index of shape {index.shape} does not fit a tensor of shape "
                             f"{self.shape} along dim {dim}: it needs {self.ndim} axes, each no larger than "
                             f"the tensor's except dim {d}")
        if index.device != self.device:
            raise ValueError(f"gather: the index is on {index.device} but the tensor is on {self.device}")
        n = self.shape[d]
        index = _check_in_range(index, n, f"gather: index along dim {d}", negative_ok=False)
        x = self.shrink(tuple(None if k == d else (0, i) for k, i in enumerate(index.shape)))
        x = x.unsqueeze(-1).transpose(d, -1)  # the n candidates move to a new last axis
        onehot = index.unsqueeze(-1) == Tensor.arange(n, device=self.device)
        return onehot.where(x, 0).sum(-1).cast(self.dtype)

    # ---- masks built from index comparisons ----
    def one_hot(self, num_classes: int = -1) -> "Tensor":
        """out[..., c] = 1 where self[...] == c: int32 (PyTorch: int64) with a new last axis of
        num_classes (-1: the largest value + 1, which reads the data)."""
        from tinyedu.tensor import Tensor

        if self.dtype.is_float or self.dtype == dtypes.bool:
            raise TypeError(f"one_hot: only integer (class index) tensors, got {self.dtype.name}")
        if not isinstance(num_classes, int) or isinstance(num_classes, bool) or num_classes < -1:
            raise ValueError(f"one_hot: num_classes must be a non-negative int or -1, got {num_classes!r}")
        if self.numel():
            low, high = self.min().item(), self.max().item()
            if low < 0:
                raise ValueError(f"one_hot: class values must be non-negative, got {low}")
            if num_classes == -1:
                num_classes = high + 1
            if high >= num_classes:
                raise ValueError(f"one_hot: class values must be smaller than num_classes={num_classes}, got "
                                 f"{high}")
        elif num_classes == -1:
            raise ValueError("one_hot: cannot infer num_classes from an empty tensor; pass it")
        return (self.unsqueeze(-1) == Tensor.arange(num_classes, device=self.device)).int()

    def tril(self, diagonal: int = 0, *, k: int | None = None) -> "Tensor":
        """The lower triangle of the last two axes (row - col >= -diagonal), zeros elsewhere."""
        return self._triangle(diagonal if k is None else k, lower=True)

    def triu(self, diagonal: int = 0, *, k: int | None = None) -> "Tensor":
        """The upper triangle of the last two axes (col - row >= diagonal), zeros elsewhere
        (`k=` is tinygrad's name for diagonal)."""
        return self._triangle(diagonal if k is None else k, lower=False)

    def _triangle(self, diagonal: int, lower: bool) -> "Tensor":
        from tinyedu.tensor import Tensor

        op = "tril" if lower else "triu"
        if self.ndim < 2:
            raise ValueError(f"{op}: needs at least 2 axes (a matrix), got shape {self.shape}")
        if not isinstance(diagonal, int) or isinstance(diagonal, bool):
            raise TypeError(f"{op}: diagonal must be an int, got {type(diagonal).__name__}")
        rows, cols = self.shape[-2:]
        offset = Tensor.arange(cols, device=self.device).reshape(1, cols) - \
            Tensor.arange(rows, device=self.device).reshape(rows, 1)  # col - row
        keep = offset <= diagonal if lower else offset >= diagonal
        return keep.where(self, self.zeros_like())

    def masked_fill(self, mask: "Tensor", value: float | int | bool) -> "Tensor":
        """value where mask is True, self elsewhere; the dtype stays self's (torch.masked_fill)."""
        from tinyedu.tensor import Tensor

        if not isinstance(mask, Tensor) or mask.dtype != dtypes.bool:
            what = getattr(mask, "dtype", type(mask).__name__)
            raise TypeError(f"masked_fill: mask must be a bool Tensor, got {what}")
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


def _check_in_range(index: "Tensor", n: int, what: str, negative_ok: bool) -> "Tensor":
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
