"""Movement ops: they change which element sits where, never the elements, so they are free views.

The six primitives (reshape, permute, expand, pad, shrink, stride) only edit a ShapeTracker; the
rest here (transpose, flip, squeeze, ...) are spelled with them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

import tinyedu.function as F
from tinyedu.dtype import DType
from tinyedu.helpers import flatten_args, prod

if TYPE_CHECKING:
    from tinyedu.tensor import Tensor


def _sizes(args: tuple, kwargs: dict, names: tuple[str, ...], op: str) -> tuple:
    """Sizes or axes given positionally (f(2, 3) or f((2, 3))) or as one keyword: PyTorch's name or
    tinygrad's (`permute(dims=...)`, `permute(order=...)`)."""
    unknown = [k for k in kwargs if k not in names]
    if unknown:
        raise TypeError(f"{op}: unexpected keyword argument {unknown[0]!r}; expected "
                        f"{' or '.join(repr(n) for n in names)}")
    if not kwargs:
        return flatten_args(args)
    if args or len(kwargs) > 1:
        raise TypeError(f"{op}: give {names[0]} once, either positionally or as a keyword")
    value = next(iter(kwargs.values()))
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


class MovementMixin:
    # ---- the primitives ----
    def reshape(self, *shape: Any, **kwargs: Any) -> "Tensor":
        """A new shape with the same number of elements; one entry may be -1 (inferred)."""
        shape = _sizes(shape, kwargs, ("shape",), "reshape")
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

    def view(self, *shape: Any) -> "Tensor":
        """reshape; or, given one dtype, a bitcast (`x.view(dtypes.int32)`, as in PyTorch)."""
        if len(shape) == 1 and isinstance(shape[0], (DType, str, type)):
            return self.bitcast(shape[0])
        return self.reshape(*shape)

    def permute(self, *order: Any, **kwargs: Any) -> "Tensor":
        order = _sizes(order, kwargs, ("dims", "order"), "permute")
        order = tuple(self._axis(a, "permute") for a in order) if self.ndim else order
        if sorted(order) != list(range(self.ndim)):
            raise ValueError(f"permute: {flatten_args(order)} is not a permutation of the {self.ndim} axes "
                             f"of a tensor of shape {self.shape}")
        return self if order == tuple(range(self.ndim)) else self._apply(F.Permute, order=order)

    def expand(self, *shape: Any, **kwargs: Any) -> "Tensor":
        """Repeat size-1 axes (without copying: their stride becomes 0). -1 keeps a size."""
        shape = _sizes(shape, kwargs, ("size", "shape"), "expand")
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

    def pad(self, padding: Sequence[Any], value: float = 0.0) -> "Tensor":
        """Add `before` elements before and `after` after along each axis, filled with `value`.

        `padding` is one (before, after) pair per axis (None: no padding; tinygrad's form), or a flat
        list of ints, pairs for the *last* axes first (PyTorch's F.pad: (left, right, top, bottom)).
        A negative amount crops, as in F.pad.
        """
        pairs = self._pad_pairs(padding, "pad")
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise TypeError(f"pad: the fill value must be a number, got {type(value).__name__}")
        crop = tuple((max(-lo, 0), s - max(-hi, 0)) for (lo, hi), s in zip(pairs, self.shape, strict=True))
        if any(lo > hi for lo, hi in crop):
            raise ValueError(f"pad: padding {tuple(padding)} crops more than the tensor of shape "
                             f"{self.shape} has; a negative amount may remove at most the whole axis")
        x = self.shrink(crop)
        pairs = tuple((max(lo, 0), max(hi, 0)) for lo, hi in pairs)
        if all(p == (0, 0) for p in pairs):
            return x
        padded = x._apply(F.Pad, padding=pairs)
        if value == 0:
            return padded
        inside = x.ones_like(dtype="bool")._apply(F.Pad, padding=pairs)
        return inside.where(padded, value)

    def _pad_pairs(self, padding: Sequence[Any], op: str) -> tuple[tuple[int, int], ...]:
        """One (before, after) pair per axis, from either form `pad` accepts."""
        flat = isinstance(padding, (tuple, list)) and len(padding) > 0 and all(
            isinstance(p, int) and not isinstance(p, bool) for p in padding)
        if not flat:
            return self._pairs(padding, op, "(before, after)", tuple((0, 0) for _ in self.shape))
        if len(padding) % 2 or len(padding) > 2 * self.ndim:
            raise ValueError(f"{op}: a flat padding {tuple(padding)} needs an even number of ints, at most "
                             f"two per axis of shape {self.shape} (last axis first, as F.pad), or give one "
                             "(before, after) pair per axis")
        given = [(padding[i], padding[i + 1]) for i in range(0, len(padding), 2)][::-1]
        return ((0, 0),) * (self.ndim - len(given)) + tuple(given)

    def pad2d(self, padding: Sequence[int], value: float = 0.0) -> "Tensor":
        """tinygrad's flat padding of the last axes: (left, right, top, bottom, ...); negative crops."""
        if not isinstance(padding, (tuple, list)) or not all(isinstance(p, int) for p in padding):
            raise TypeError(f"pad2d: padding must be a flat list of ints (left, right, top, bottom), got "
                            f"{padding!r}")
        return self.pad(tuple(padding), value)

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
    def flip(self, *axis: Any, **kwargs: Any) -> "Tensor":
        """Reverse the order along the given axes: flip(0), flip(0, 1), flip((0, 1)), flip(dims=...)."""
        axes = {self._axis(a, "flip") for a in _sizes(axis, kwargs, ("dims", "axis"), "flip")}
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

    def squeeze(self, dim: int | Sequence[int] | None = None) -> "Tensor":
        """Drop size-1 axes: all of them, or those among `dim` (an int or a tuple); an axis of another
        size is left alone, as in PyTorch."""
        if dim is None:
            return self.reshape(tuple(s for s in self.shape if s != 1))
        dims = {self._axis(d, "squeeze") for d in (dim if isinstance(dim, (tuple, list)) else (dim,))}
        if not self.ndim:
            return self
        return self.reshape(tuple(s for i, s in enumerate(self.shape) if not (i in dims and s == 1)))

    def unsqueeze(self, dim: int) -> "Tensor":
        d = self._axis(dim, "unsqueeze", ndim=self.ndim + 1)
        return self.reshape(self.shape[:d] + (1,) + self.shape[d:])

    def movedim(self, source: int | Sequence[int], destination: int | Sequence[int]) -> "Tensor":
        """Move axes to new positions, the others keeping their order (torch.movedim)."""
        src = source if isinstance(source, (tuple, list)) else (source,)
        dst = destination if isinstance(destination, (tuple, list)) else (destination,)
        if len(src) != len(dst):
            raise ValueError(f"movedim: source {source} and destination {destination} must name as many axes")
        src = [self._axis(a, "movedim") for a in src]
        dst = [self._axis(a, "movedim") for a in dst]
        if len(set(src)) != len(src) or len(set(dst)) != len(dst):
            raise ValueError(f"movedim: source {source} and destination {destination} must not repeat an "
                             "axis")
        rest = iter(a for a in range(self.ndim) if a not in src)
        where = dict(zip(dst, src, strict=True))
        return self.permute(tuple(where[i] if i in where else next(rest) for i in range(self.ndim)))

    moveaxis = movedim

    def contiguous(self) -> "Tensor":
        """A dense copy of a view (a kernel boundary: the scheduler must store it)."""
        return self._apply(F.Contiguous)

    def contiguous_backward(self) -> "Tensor":
        """The same tensor; its *gradient* is made contiguous (a kernel boundary in the backward pass)."""
        return self._apply(F.ContiguousBackward)

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
