"""Joining tensors and cutting them apart: cat, stack, split, chunk.

cat has no primitive of its own: pad every piece with zeros out to the full length, each at its
own offset, and pick, at each position, the piece whose data is there (a `where` on a padded mask).
Adding the padded pieces would be shorter but not exact: -0.0 + 0.0 is +0.0, so a -0.0 would lose
its sign; `where` copies every value as it is. The gradient of pad is shrink and `where` sends the
gradient only to the side it picked, so each piece gets back exactly its slice of the gradient.
split is the opposite: one shrink per piece, all views of the same buffer.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from tinyedu.core.dtype import least_upper_dtype
from tinyedu.core.errors import ArgumentError, DeviceError, ShapeError
from tinyedu.tensor_api.base import TensorLike


def _tensors_and_dim(first: Any, others: tuple, dim: int | None, op: str) -> tuple[list[TensorLike], int]:
    """Accept `a.cat(b, c)` / `Tensor.cat(a, b, c)` and PyTorch's `Tensor.cat([a, b, c], 1)` (dim
    positional after a list) or `Tensor.cat([a, b, c], dim=1)`."""
    if isinstance(first, (list, tuple)) and len(others) == 1 and isinstance(others[0], int):
        if dim is not None:
            raise TypeError(f"{op}: dim given twice, positionally ({others[0]}) and as dim={dim}")
        return _tensors(first, (), op), others[0]
    return _tensors(first, others, op), 0 if dim is None else dim


def _tensors(first: Any, others: tuple, op: str) -> list[TensorLike]:
    """The tensors to join, checked. `first` is self, which is the list itself in Tensor.cat([a, b]),
    so "is it a tensor?" asks for CombineMixin: every tensor class is built with it."""
    tensors = [*first, *others] if isinstance(first, (list, tuple)) else [first, *others]
    if not tensors:
        raise ValueError(f"{op}: expected a non-empty list of tensors")
    for k, t in enumerate(tensors):
        if not isinstance(t, CombineMixin):
            raise TypeError(f"{op}: expected Tensors, but item {k} is a {type(t).__name__}")
        if t.device != tensors[0].device:
            raise DeviceError(f"{op}: tensors are on different devices ({tensors[0].device} and {t.device}); "
                              "move them to one with .to()")
    return tensors


class CombineMixin:
    def cat(self: TensorLike | Sequence[TensorLike], *others: TensorLike,
            dim: int | None = None) -> TensorLike:
        """Join tensors along an existing axis (dim, 0 by default); every other axis must match (dtypes
        promote, as in PyTorch). As in PyTorch, a 1-d empty tensor (shape (0,)) is skipped whatever the
        others' shape.
        """
        tensors, dim = _tensors_and_dim(self, others, dim, "cat")
        dtype = least_upper_dtype(*(t.dtype for t in tensors))
        tensors = [t for t in tensors if t.shape != (0,)] or tensors[:1]
        first = tensors[0]
        if first.ndim == 0:
            raise ShapeError("cat: 0-d tensors cannot be concatenated (they have no axis to join along); "
                             "use stack, or reshape them to (1,) first")
        d = first._axis(dim, "cat")
        for k, t in enumerate(tensors):
            same = t.ndim == first.ndim and all(t.shape[i] == first.shape[i] for i in range(t.ndim) if i != d)
            if not same:
                raise ShapeError(f"cat: shapes {[x.shape for x in tensors]} cannot be joined along dim "
                                 f"{dim}: tensor {k} has shape {t.shape}, but all must match {first.shape} "
                                 f"except in dim {d}")
        total = sum(t.shape[d] for t in tensors)
        out, start = None, 0
        for t in tensors:
            padding = [(0, 0)] * t.ndim
            padding[d] = (start, total - start - t.shape[d])
            piece = t.cast(dtype).pad(padding)
            if out is None:
                out = piece
            else:  # True along this piece's stretch of dim d, broadcast over the other axes
                here = type(t).full(tuple(t.shape[d] if i == d else 1 for i in range(t.ndim)), True,
                                   device=t.device).pad(padding)
                out = here.where(piece, out)
            start += t.shape[d]
        return out

    def stack(self: TensorLike | Sequence[TensorLike], *others: TensorLike,
              dim: int | None = None) -> TensorLike:
        """Join same-shaped tensors along a new axis `dim` (0 by default): a size-1 axis on each, then
        cat. Tensor.stack([a, b], 1) as in PyTorch."""
        tensors, dim = _tensors_and_dim(self, others, dim, "stack")
        for k, t in enumerate(tensors):
            if t.shape != tensors[0].shape:
                raise ShapeError(f"stack: all tensors must have the same shape, but tensor 0 has shape "
                                 f"{tensors[0].shape} and tensor {k} has {t.shape}")
        d = tensors[0]._axis(dim, "stack", ndim=tensors[0].ndim + 1)
        first, *rest = (t.unsqueeze(d) for t in tensors)
        return first.cat(*rest, dim=d)

    def split(self: TensorLike, split_size_or_sections: int | Sequence[int],
              dim: int = 0) -> tuple[TensorLike, ...]:
        """Cut along `dim` into pieces of `split_size` (the last may be smaller), or of the given sizes."""
        if not self.ndim:
            raise ShapeError("split: a 0-d tensor has no axis to split")
        d = self._axis(dim, "split")
        n = self.shape[d]
        if isinstance(split_size_or_sections, int) and not isinstance(split_size_or_sections, bool):
            size = split_size_or_sections
            if size < 0 or (size == 0 and n != 0):
                raise ArgumentError(f"split: split_size must be a positive int, got {size} (dim {d} has size "
                                    f"{n})")
            sizes = [min(size, n - start) for start in range(0, n, size)] if n else [0]
        elif isinstance(split_size_or_sections, (list, tuple)):
            sizes = list(split_size_or_sections)
            if any(not isinstance(s, int) or isinstance(s, bool) or s < 0 for s in sizes) or sum(sizes) != n:
                raise ArgumentError(f"split: sizes {sizes} must be ints >= 0 that add up to {n}, the size of "
                                    f"dim {d} of shape {self.shape}")
        else:
            raise TypeError("split: expected an int or a list of ints, got "
                            f"{type(split_size_or_sections).__name__}")
        pieces, start = [], 0
        for size in sizes:
            bounds = tuple((start, start + size) if i == d else None for i in range(self.ndim))
            pieces.append(self.shrink(bounds))
            start += size
        return tuple(pieces)

    def chunk(self: TensorLike, chunks: int, dim: int = 0) -> tuple[TensorLike, ...]:
        """Cut into `chunks` pieces of ceil(n / chunks) elements (so there may be fewer, as in PyTorch)."""
        if not isinstance(chunks, int) or isinstance(chunks, bool) or chunks <= 0:
            raise ArgumentError(f"chunk: chunks must be a positive int, got {chunks!r}")
        if not self.ndim:
            raise ShapeError("chunk: a 0-d tensor has no axis to chunk")
        n = self.shape[self._axis(dim, "chunk")]
        if n == 0:
            return tuple(self for _ in range(chunks))
        return self.split(math.ceil(n / chunks), dim)
