"""Movement ops: they change which element sits where, never the elements, so they are free views.

The six primitives (reshape, permute, expand, pad, shrink, stride) only edit a ShapeTracker; the
rest here (transpose, flip, squeeze, ...) are spelled with them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

import tinyedu.function as F
from tinyedu.helpers import flatten_args, prod

if TYPE_CHECKING:
    from tinyedu.tensor import Tensor


class MovementMixin:
    # ---- the primitives ----
    def reshape(self, *shape: Any) -> "Tensor":
        """A new shape with the same number of elements; one entry may be -1 (inferred)."""
        shape = flatten_args(shape)
        if any(not isinstance(s, int) or isinstance(s, bool) for s in shape):
            raise TypeError(f"reshape: the new shape must be ints, got {shape}")
        if shape.count(-1) > 1 or any(s < -1 for s in shape):
            raise ValueError(f"reshape: invalid shape {shape}; sizes must be >= 0 with at most one -1")
        if -1 in shape:
            known = prod(s for s in shape if s != -1)
            if known == 0 or self.numel() % known:
                raise ValueError(f"reshape: cannot infer the -1 in {shape} for a tensor of shape "
                                 f"{self.shape} ({self.numel()} elements)")
            shape = tuple(self.numel() // known if s == -1 else s for s in shape)
        if prod(shape) != self.numel():
            raise ValueError(f"reshape: cannot reshape shape {self.shape} ({self.numel()} elements) to "
                             f"{shape} ({prod(shape)} elements); the number of elements must match")
        return self if shape == self.shape else self._apply(F.Reshape, shape=shape)

    view = reshape

    def permute(self, *order: Any) -> "Tensor":
        order = flatten_args(order)
        order = tuple(self._axis(a, "permute") for a in order) if self.ndim else order
        if sorted(order) != list(range(self.ndim)):
            raise ValueError(f"permute: {flatten_args(order)} is not a permutation of the {self.ndim} axes "
                             f"of a tensor of shape {self.shape}")
        return self if order == tuple(range(self.ndim)) else self._apply(F.Permute, order=order)

    def expand(self, *shape: Any) -> "Tensor":
        """Repeat size-1 axes (without copying: their stride becomes 0). -1 keeps a size."""
        shape = flatten_args(shape)
        if len(shape) < self.ndim:
            raise ValueError(f"expand: the new shape {shape} has fewer dimensions than the tensor "
                             f"{self.shape}")
        x = self.reshape((1,) * (len(shape) - self.ndim) + self.shape) if len(shape) > self.ndim else self
        shape = tuple(old if new == -1 else new for old, new in zip(x.shape, shape, strict=True))
        for old, new in zip(x.shape, shape, strict=True):
            if old != new and old != 1:
                raise ValueError(f"expand: cannot expand shape {self.shape} to {shape}; only size-1 axes can "
                                 "grow (reshape or repeat otherwise)")
        return x if shape == x.shape else x._apply(F.Expand, shape=shape)

    def pad(self, padding: Sequence[tuple[int, int] | None], value: float = 0.0) -> "Tensor":
        """Add `lo` elements before and `hi` after along each axis (None: no padding), filled with `value`."""
        pairs = self._pairs(padding, "pad", "(before, after)", tuple((0, 0) for _ in self.shape))
        if any(min(p) < 0 for p in pairs):
            raise ValueError(f"pad: padding {tuple(padding)} must be (before, after) pairs of ints >= 0, one "
                             f"per axis of shape {self.shape}")
        if not isinstance(value, (int, float)):
            raise TypeError(f"pad: the fill value must be a number, got {type(value).__name__}")
        if all(p == (0, 0) for p in pairs):
            return self
        padded = self._apply(F.Pad, padding=pairs)
        if value == 0:
            return padded
        inside = self.ones_like(dtype="bool")._apply(F.Pad, padding=pairs)
        return inside.where(padded, value)

    def shrink(self, bounds: Sequence[tuple[int, int] | None]) -> "Tensor":
        """Keep [start, end) along each axis (None keeps all)."""
        pairs = self._pairs(bounds, "shrink", "(start, end)", tuple((0, s) for s in self.shape))
        for (lo, hi), s in zip(pairs, self.shape, strict=True):
            if not 0 <= lo <= hi <= s:
                raise ValueError(f"shrink: bounds {tuple(bounds)} are invalid for shape {self.shape}; each "
                                 "must be (start, end) with 0 <= start <= end <= size")
        if all(p == (0, s) for p, s in zip(pairs, self.shape, strict=True)):
            return self
        return self._apply(F.Shrink, bounds=pairs)

    def _stride(self, steps: Sequence[int]) -> "Tensor":
        """Every k-th element along each axis; a negative k walks backwards (k = -1 is a flip)."""
        steps = tuple(self._per_axis(steps, "stride"))
        if any(not isinstance(k, int) or k == 0 for k in steps):
            raise ValueError(f"stride: steps {steps} must be non-zero ints, one per axis of shape "
                             f"{self.shape}")
        return self if all(k == 1 for k in steps) else self._apply(F.Stride, steps=steps)

    def _pairs(self, arg: Sequence[Any], op: str, what: str, defaults: tuple) -> tuple[tuple[int, int], ...]:
        """One (int, int) pair per axis; None takes the axis' default."""
        pairs = []
        for entry, default in zip(self._per_axis(arg, op), defaults, strict=True):
            ok = entry is None or (isinstance(entry, (tuple, list)) and len(entry) == 2 and
                                   all(isinstance(v, int) and not isinstance(v, bool) for v in entry))
            if not ok:
                raise ValueError(f"{op}: {tuple(arg)} must hold one {what} pair of ints (or None) per axis "
                                 f"of shape {self.shape}; {entry!r} is not one")
            pairs.append(default if entry is None else tuple(entry))
        return tuple(pairs)

    def _per_axis(self, arg: Sequence[Any], op: str) -> tuple[Any, ...]:
        if not isinstance(arg, (tuple, list)):
            raise TypeError(f"{op}: expected a tuple with one entry per axis of shape {self.shape}, got "
                            f"{type(arg).__name__}")
        arg = tuple(arg)
        if len(arg) != self.ndim:
            raise ValueError(f"{op}: expected one entry per axis ({self.ndim} for shape {self.shape}), got "
                             f"{arg}")
        return arg

    # ---- composed ----
    def flip(self, axis: Any) -> "Tensor":
        axes = {self._axis(a, "flip") for a in (axis if isinstance(axis, (tuple, list)) else (axis,))}
        return self._stride(tuple(-1 if i in axes else 1 for i in range(self.ndim)))

    def transpose(self, dim0: int = 1, dim1: int = 0) -> "Tensor":
        a, b = self._axis(dim0, "transpose"), self._axis(dim1, "transpose")
        if self.ndim == 0:
            return self
        order = list(range(self.ndim))
        order[a], order[b] = order[b], order[a]
        return self.permute(order)

    @property
    def T(self) -> "Tensor":  # noqa: N802 - the name is the math
        return self.permute(tuple(reversed(range(self.ndim))))

    def flatten(self, start_dim: int = 0, end_dim: int = -1) -> "Tensor":
        if self.ndim == 0:
            return self.reshape(1)
        start, end = self._axis(start_dim, "flatten"), self._axis(end_dim, "flatten")
        if start > end:
            raise ValueError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim} for shape "
                             f"{self.shape}")
        return self.reshape(self.shape[:start] + (prod(self.shape[start:end + 1]),) + self.shape[end + 1:])

    def unflatten(self, dim: int, sizes: Sequence[int]) -> "Tensor":
        d = self._axis(dim, "unflatten")
        return self.reshape(self.shape[:d] + tuple(sizes) + self.shape[d + 1:])

    def squeeze(self, dim: int | None = None) -> "Tensor":
        if dim is None:
            return self.reshape(tuple(s for s in self.shape if s != 1))
        d = self._axis(dim, "squeeze")
        if not self.ndim or self.shape[d] != 1:
            return self
        return self.reshape(self.shape[:d] + self.shape[d + 1:])

    def unsqueeze(self, dim: int) -> "Tensor":
        d = self._axis(dim, "unsqueeze", ndim=self.ndim + 1)
        return self.reshape(self.shape[:d] + (1,) + self.shape[d:])

    def contiguous(self) -> "Tensor":
        """A dense copy of a view (a kernel boundary: the scheduler must store it)."""
        return self._apply(F.Contiguous)

    def clone(self) -> "Tensor":
        """A copy in memory of its own (contiguous() may return the tensor itself; a clone must not
        share memory, since `assign` can write a tensor in place)."""
        return self._apply(F.Contiguous, copy=True)

    def repeat(self, *repeats: Any) -> "Tensor":
        """Tile the tensor: (a, b).repeat(2, 3) is (2a, 3b), the copies one after another (torch.repeat).

        Each axis of size s becomes (1, s), is expanded to (r, s) (free: stride 0) and merged into r*s.
        Extra leading repeats add new axes.
        """
        repeats = flatten_args(repeats)
        if any(not isinstance(r, int) or isinstance(r, bool) or r < 0 for r in repeats):
            raise ValueError(f"repeat: repeats {repeats} must be ints >= 0")
        if len(repeats) < self.ndim:
            raise ValueError(f"repeat: {len(repeats)} repeats {repeats} for a tensor of shape {self.shape}; "
                             f"give at least one per axis ({self.ndim})")
        shape = (1,) * (len(repeats) - self.ndim) + self.shape
        pairs = tuple(zip(repeats, shape, strict=True))
        spread = self.reshape(tuple(x for _, s in pairs for x in (1, s)))
        spread = spread.expand(tuple(x for r, s in pairs for x in (r, s)))
        return spread.reshape(tuple(r * s for r, s in pairs))

    def as_strided(self, size: Sequence[int], stride: Sequence[int], storage_offset: int = 0) -> "Tensor":
        """Element (i0, i1, ...) is position storage_offset + i0*stride[0] + i1*stride[1] + ... of the
        tensor flattened in C order (torch.as_strided reads the memory; tinyedu tensors share none,
        so the C-order layout plays that role).

        One View(size, stride, storage_offset) says exactly this, but a new view would need a new
        primitive with its own backward. Spelled with movement ops it is differentiable for free:
        every axis is a sliding window over the positions (see `_windows`). It is still a view (no
        copy), though a stack of several: the ShapeTracker cannot yet prove that they merge into one.
        """
        size, stride = tuple(size), tuple(stride)
        ints = all(isinstance(v, int) and not isinstance(v, bool) for v in (*size, *stride, storage_offset))
        if not ints or len(size) != len(stride):
            raise TypeError(f"as_strided: size {size} and stride {stride} must be sequences of ints of the "
                            f"same length, and storage_offset ({storage_offset!r}) an int")
        if min((*size, *stride, storage_offset), default=0) < 0:
            raise ValueError(f"as_strided: size {size}, stride {stride} and storage_offset {storage_offset} "
                             "must all be >= 0 (negative strides are not supported, as in PyTorch)")
        flat = self.reshape(-1)
        if prod(size) == 0:
            return flat.shrink(((0, 0),)).reshape(size)
        last = storage_offset + sum((n - 1) * k for n, k in zip(size, stride, strict=True))
        if last >= self.numel():
            raise ValueError(f"as_strided: size {size} with stride {stride} and storage_offset "
                             f"{storage_offset} reads position {last}, but the tensor of shape {self.shape} "
                             f"has only {self.numel()} elements (positions 0..{self.numel() - 1})")
        x = flat.shrink(((storage_offset, self.numel()),))
        for count, step in zip(size, stride, strict=True):
            x = x._windows(count, step)  # x[..., i, p] = previous x[..., p + i*step]
        return x.shrink((None,) * len(size) + ((0, 1),)).reshape(size)  # position p = 0

    def _windows(self, count: int, step: int) -> "Tensor":
        """(..., n) -> (..., count, n - (count-1)*step), where out[..., i, p] = self[..., p + i*step].

        The trick (from tinygrad's pooling): repeat the last axis `count` times (an expand, free),
        lay the copies end to end, and cut them again into rows `step` elements longer. Row i then
        begins i*step further into its own copy. Padding at the end gives the last rows something
        to read; the final shrink drops what would run past the data. Convolution windows and
        as_strided are both built from this.
        """
        *batch, n = self.shape
        keep = n - (count - 1) * step
        rows = self.unsqueeze(-2).expand(*batch, count, n)
        if step == 0 or count <= 1:
            return rows
        flat = rows.reshape(*batch, count * n).pad(((0, 0),) * len(batch) + ((0, count * step),))
        return flat.reshape(*batch, count, n + step).shrink((None,) * (len(batch) + 1) + ((0, keep),))
