"""Movement ops: they change which element sits where, never the elements, so they are free views.

The six primitives (reshape, permute, expand, pad, shrink, stride) only edit a ShapeTracker; the
rest here (transpose, flip, squeeze, ...) are spelled with them.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

import tinyedu.core.function as F
import tinyedu.function_extra as FX
from tinyedu.core.dtype import DType
from tinyedu.core.errors import ArgumentError, ShapeError, UnsupportedError
from tinyedu.core.helpers import flatten_args, prod
from tinyedu.tensor_api.base import TensorLike


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
    def reshape(self: TensorLike, *shape: Any, **kwargs: Any) -> TensorLike:
        """A new shape with the same number of elements; one entry may be -1 (inferred)."""
        shape = _sizes(shape, kwargs, ("shape",), "reshape")
        if any(not isinstance(s, int) or isinstance(s, bool) for s in shape):
            raise TypeError(f"reshape: the new shape must be ints, got {shape}")
        if shape.count(-1) > 1 or any(s < -1 for s in shape):
            raise ShapeError(f"reshape: invalid shape {shape}; sizes must be >= 0 with at most one -1")
        if -1 in shape:
            known = prod(s for s in shape if s != -1)
            if known == 0 or self.numel() % known:
                raise ShapeError(f"reshape: cannot infer the -1 in {shape} for a tensor of shape "
                                 f"{self.shape} ({self.numel()} elements)")
            shape = tuple(self.numel() // known if s == -1 else s for s in shape)
        if prod(shape) != self.numel():
            raise ShapeError(f"reshape: cannot reshape shape {self.shape} ({self.numel()} elements) to "
                             f"{shape} ({prod(shape)} elements); the number of elements must match")
        return self if shape == self.shape else self._apply(F.Reshape, shape=shape)

    def view(self: TensorLike, *shape: Any) -> TensorLike:
        """reshape; or, given one dtype, a bitcast (`x.view(dtypes.int32)`, as in PyTorch)."""
        if len(shape) == 1 and isinstance(shape[0], (DType, str, type)):
            return self.bitcast(shape[0])
        return self.reshape(*shape)

    def permute(self: TensorLike, *order: Any, **kwargs: Any) -> TensorLike:
        order = _sizes(order, kwargs, ("dims", "order"), "permute")
        order = tuple(self._axis(a, "permute") for a in order) if self.ndim else order
        if sorted(order) != list(range(self.ndim)):
            raise ShapeError(f"permute: {flatten_args(order)} is not a permutation of the {self.ndim} axes "
                             f"of a tensor of shape {self.shape}")
        return self if order == tuple(range(self.ndim)) else self._apply(F.Permute, order=order)

    def expand(self: TensorLike, *shape: Any, **kwargs: Any) -> TensorLike:
        """Repeat size-1 axes (without copying: their stride becomes 0). -1 keeps a size."""
        shape = _sizes(shape, kwargs, ("size", "shape"), "expand")
        if len(shape) < self.ndim:
            raise ShapeError(f"expand: the new shape {shape} has fewer dimensions than the tensor "
                             f"{self.shape}")
        x = self.reshape((1,) * (len(shape) - self.ndim) + self.shape) if len(shape) > self.ndim else self
        shape = tuple(old if new == -1 else new for old, new in zip(x.shape, shape, strict=True))
        for old, new in zip(x.shape, shape, strict=True):
            if old != new and old != 1:
                raise ShapeError(f"expand: cannot expand shape {self.shape} to {shape}; only size-1 axes can "
                                 "grow (reshape or repeat otherwise)")
        return x if shape == x.shape else x._apply(F.Expand, shape=shape)

    def pad(self: TensorLike, padding: Sequence[Any], value: Any = 0.0, mode: Any = "constant") -> TensorLike:
        """Add `before` elements before and `after` after along each axis, filled with `value`.

        `padding` is one (before, after) pair per axis (None: no padding; tinygrad's form), or a flat
        list of ints, pairs for the *last* axes first (PyTorch's F.pad: (left, right, top, bottom)).
        A negative amount crops, as in F.pad. mode (F.pad's) is "constant", "reflect", "replicate" or
        "circular"; F.pad's positional order `pad(padding, mode, value)` works too (a str is a mode).
        """
        if isinstance(value, str):  # pad(padding, "reflect") or pad(padding, "constant", 1.0)
            value, mode = (0.0 if isinstance(mode, str) else mode), value
        value = 0.0 if value is None else value
        if mode != "constant":
            return self._pad_mode(padding, mode, value)
        pairs = self._pad_pairs(padding, "pad")
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise TypeError(f"pad: the fill value must be a number, got {type(value).__name__}")
        crop = tuple((max(-lo, 0), s - max(-hi, 0)) for (lo, hi), s in zip(pairs, self.shape, strict=True))
        if any(lo > hi for lo, hi in crop):
            raise ShapeError(f"pad: padding {tuple(padding)} crops more than the tensor of shape "
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

    def _pad_mode(self: TensorLike, padding: Sequence[Any], mode: Any, value: Any) -> TensorLike:
        """Padding made of the tensor's own edges: reflect mirrors without repeating the edge element,
        replicate repeats it, circular wraps around. Every piece is a view (shrink, flip, expand,
        repeat), so the gradient of a padded element goes back to the element it copies."""
        if mode not in ("reflect", "replicate", "circular"):
            raise UnsupportedError(f"pad: mode must be 'constant', 'reflect', 'replicate' or 'circular', got "
                                   f"{mode!r}")
        if value != 0:
            raise ArgumentError(f"pad: mode {mode!r} takes no fill value (got {value!r}); only 'constant' "
                                "does")
        pairs = self._pad_pairs(padding, "pad")
        crop = tuple((min(lo, 0), min(hi, 0)) for lo, hi in pairs)  # negative amounts crop, as in F.pad:
        x = self.pad(crop) if mode == "circular" else self  # circular after cropping, the others before
        for axis, (lo, hi) in enumerate(pairs):
            lo, hi, n = max(lo, 0), max(hi, 0), x.shape[axis]
            if lo or hi:
                x = x._pad_axis(axis, lo, hi, n, mode, padding)
        return x if mode == "circular" else x.pad(crop)

    def _pad_axis(self: TensorLike, axis: int, lo: int, hi: int, n: int, mode: str,
                  padding: Any) -> TensorLike:
        """One axis of `_pad_mode`, with PyTorch's limits on how much each mode can add."""
        limit = {"reflect": n - 1, "replicate": None, "circular": n}[mode]
        if n == 0:
            raise ShapeError(f"pad: mode {mode!r} copies the tensor's own elements, but axis {axis} of shape "
                             f"{self.shape} has none; use mode 'constant'")
        if limit is not None and max(lo, hi) > limit:
            raise ShapeError(f"pad: mode {mode!r} can add at most {limit} elements to each side of axis "
                             f"{axis} of size {n} (shape {self.shape}), got padding {tuple(padding)}")
        def part(lo_: int, hi_: int) -> TensorLike:
            return self.shrink(tuple((lo_, hi_) if a == axis else None for a in range(self.ndim)))
        if mode == "circular":  # three copies end to end, cut to [n - lo, 2n + hi)
            reps = tuple(3 if a == axis else 1 for a in range(self.ndim))
            return self.repeat(reps).shrink(tuple((n - lo, 2 * n + hi) if a == axis else None
                                                  for a in range(self.ndim)))
        if mode == "replicate":
            left = part(0, 1).expand(tuple(lo if a == axis else -1 for a in range(self.ndim)))
            right = part(n - 1, n).expand(tuple(hi if a == axis else -1 for a in range(self.ndim)))
        else:  # reflect: x[lo], ..., x[1] before and x[n-2], ..., x[n-1-hi] after
            left, right = part(1, lo + 1).flip(axis), part(n - 1 - hi, n - 1).flip(axis)
        return _join([left, self, right], axis)

    def _pad_pairs(self: TensorLike, padding: Sequence[Any], op: str) -> tuple[tuple[int, int], ...]:
        """One (before, after) pair per axis, from either form `pad` accepts."""
        flat = isinstance(padding, (tuple, list)) and len(padding) > 0 and all(
            isinstance(p, int) and not isinstance(p, bool) for p in padding)
        if not flat:
            return self._pairs(padding, op, "(before, after)", tuple((0, 0) for _ in self.shape))
        if len(padding) % 2 or len(padding) > 2 * self.ndim:
            raise ArgumentError(f"{op}: a flat padding {tuple(padding)} needs an even number of ints, at "
                                f"most two per axis of shape {self.shape} (last axis first, as F.pad), or "
                                "give one (before, after) pair per axis")
        given = [(padding[i], padding[i + 1]) for i in range(0, len(padding), 2)][::-1]
        return ((0, 0),) * (self.ndim - len(given)) + tuple(given)

    def pad2d(self: TensorLike, padding: Sequence[int], value: float = 0.0) -> TensorLike:
        """tinygrad's flat padding of the last axes: (left, right, top, bottom, ...); negative crops."""
        if not isinstance(padding, (tuple, list)) or not all(isinstance(p, int) for p in padding):
            raise TypeError(f"pad2d: padding must be a flat list of ints (left, right, top, bottom), got "
                            f"{padding!r}")
        return self.pad(tuple(padding), value)

    def shrink(self: TensorLike, bounds: Sequence[tuple[int, int] | None]) -> TensorLike:
        """Keep [start, end) along each axis (None keeps all)."""
        pairs = self._pairs(bounds, "shrink", "(start, end)", tuple((0, s) for s in self.shape))
        for (lo, hi), s in zip(pairs, self.shape, strict=True):
            if not 0 <= lo <= hi <= s:
                raise ValueError(f"shrink: bounds {tuple(bounds)} are invalid for shape {self.shape}; each "
                                 "must be (start, end) with 0 <= start <= end <= size")
        if all(p == (0, s) for p, s in zip(pairs, self.shape, strict=True)):
            return self
        return self._apply(F.Shrink, bounds=pairs)

    def _stride(self: TensorLike, steps: Sequence[int]) -> TensorLike:
        """Every k-th element along each axis; a negative k walks backwards (k = -1 is a flip)."""
        steps = tuple(self._per_axis(steps, "stride"))
        if any(not isinstance(k, int) or k == 0 for k in steps):
            raise ValueError(f"stride: steps {steps} must be non-zero ints, one per axis of shape "
                             f"{self.shape}")
        return self if all(k == 1 for k in steps) else self._apply(FX.Stride, steps=steps)

    def _pairs(self: TensorLike, arg: Sequence[Any], op: str, what: str, defaults: tuple) -> tuple[tuple[int,
               int], ...]:
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

    def _per_axis(self: TensorLike, arg: Sequence[Any], op: str) -> tuple[Any, ...]:
        if not isinstance(arg, (tuple, list)):
            raise TypeError(f"{op}: expected a tuple with one entry per axis of shape {self.shape}, got "
                            f"{type(arg).__name__}")
        arg = tuple(arg)
        if len(arg) != self.ndim:
            raise ValueError(f"{op}: expected one entry per axis ({self.ndim} for shape {self.shape}), got "
                             f"{arg}")
        return arg

    # ---- composed ----
    def flip(self: TensorLike, *axis: Any, **kwargs: Any) -> TensorLike:
        """Reverse the order along the given axes: flip(0), flip(0, 1), flip((0, 1)), flip(dims=...)."""
        axes = [self._axis(a, "flip") for a in _sizes(axis, kwargs, ("dims", "axis"), "flip")]
        if len(set(axes)) != len(axes):  # (flipping twice would undo it: PyTorch refuses, and so do we)
            twice = next(a for a in axes if axes.count(a) > 1)
            raise ShapeError(f"flip: dim {twice} appears multiple times in the list of dims (shape "
                             f"{self.shape}); give each axis once")
        return self._stride(tuple(-1 if i in axes else 1 for i in range(self.ndim)))

    def transpose(self: TensorLike, dim0: int = 1, dim1: int = 0) -> TensorLike:
        a, b = self._axis(dim0, "transpose"), self._axis(dim1, "transpose")
        if self.ndim == 0:
            return self
        order = list(range(self.ndim))
        order[a], order[b] = order[b], order[a]
        return self.permute(order)

    @property
    def T(self: TensorLike) -> TensorLike:  # noqa: N802 - the name is the math
        return self.permute(tuple(reversed(range(self.ndim))))

    def flatten(self: TensorLike, start_dim: int = 0, end_dim: int = -1) -> TensorLike:
        if self.ndim == 0:
            return self.reshape(1)
        start, end = self._axis(start_dim, "flatten"), self._axis(end_dim, "flatten")
        if start > end:
            raise ShapeError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim} for shape "
                             f"{self.shape}")
        return self.reshape(self.shape[:start] + (prod(self.shape[start:end + 1]),) + self.shape[end + 1:])

    def unflatten(self: TensorLike, dim: int, sizes: Sequence[int]) -> TensorLike:
        d = self._axis(dim, "unflatten")
        return self.reshape(self.shape[:d] + tuple(sizes) + self.shape[d + 1:])

    def squeeze(self: TensorLike, dim: int | Sequence[int] | None = None) -> TensorLike:
        """Drop size-1 axes: all of them, or those among `dim` (an int or a tuple); an axis of another
        size is left alone, as in PyTorch."""
        if dim is None:
            return self.reshape(tuple(s for s in self.shape if s != 1))
        dims = {self._axis(d, "squeeze") for d in (dim if isinstance(dim, (tuple, list)) else (dim,))}
        if not self.ndim:
            return self
        return self.reshape(tuple(s for i, s in enumerate(self.shape) if not (i in dims and s == 1)))

    def unsqueeze(self: TensorLike, dim: int) -> TensorLike:
        d = self._axis(dim, "unsqueeze", ndim=self.ndim + 1)
        shape = self.shape
        return self._apply(F.Reshape, shape=shape[:d] + (1,) + shape[d:])  # (always valid: no checks)

    def movedim(self: TensorLike, source: int | Sequence[int],
                destination: int | Sequence[int]) -> TensorLike:
        """Move axes to new positions, the others keeping their order (torch.movedim)."""
        src = source if isinstance(source, (tuple, list)) else (source,)
        dst = destination if isinstance(destination, (tuple, list)) else (destination,)
        if len(src) != len(dst):
            raise ShapeError(f"movedim: source {source} and destination {destination} must name as many axes")
        src = [self._axis(a, "movedim") for a in src]
        dst = [self._axis(a, "movedim") for a in dst]
        if len(set(src)) != len(src) or len(set(dst)) != len(dst):
            raise ShapeError(f"movedim: source {source} and destination {destination} must not repeat an "
                             "axis")
        rest = iter(a for a in range(self.ndim) if a not in src)
        where = dict(zip(dst, src, strict=True))
        return self.permute(tuple(where[i] if i in where else next(rest) for i in range(self.ndim)))

    moveaxis = movedim

    def contiguous(self: TensorLike) -> TensorLike:
        """A dense copy of a view (a kernel boundary: the scheduler must store it)."""
        return self._apply(F.Contiguous)

    def contiguous_backward(self: TensorLike) -> TensorLike:
        """The same tensor; its *gradient* is made contiguous (a kernel boundary in the backward pass)."""
        return self._apply(FX.ContiguousBackward)

    def clone(self: TensorLike) -> TensorLike:
        """A copy in memory of its own (contiguous() may return the tensor itself; a clone must not
        share memory, since `assign` can write a tensor in place)."""
        return self._apply(F.Contiguous, copy=True)

    def repeat(self: TensorLike, *repeats: Any) -> TensorLike:
        """Tile the tensor: (a, b).repeat(2, 3) is (2a, 3b), the copies one after another (torch.repeat).

        Each axis of size s becomes (1, s), is expanded to (r, s) (free: stride 0) and merged into r*s.
        Extra leading repeats add new axes.
        """
        repeats = flatten_args(repeats)
        if any(not isinstance(r, int) or isinstance(r, bool) or r < 0 for r in repeats):
            raise ArgumentError(f"repeat: repeats {repeats} must be ints >= 0")
        if len(repeats) < self.ndim:
            raise ShapeError(f"repeat: {len(repeats)} repeats {repeats} for a tensor of shape {self.shape}; "
                             f"give at least one per axis ({self.ndim})")
        shape = (1,) * (len(repeats) - self.ndim) + self.shape
        pairs = tuple(zip(repeats, shape, strict=True))
        spread = self.reshape(tuple(x for _, s in pairs for x in (1, s)))
        spread = spread.expand(tuple(x for r, s in pairs for x in (r, s)))
        return spread.reshape(tuple(r * s for r, s in pairs))

    def roll(self: TensorLike, shifts: int | Sequence[int],
             dims: int | Sequence[int] | None = None) -> TensorLike:
        """Shift elements along axes, wrapping around (torch.roll): out[(i + shift) % n] = self[i].
        Without dims the tensor is rolled as if flattened. Two copies end to end, cut at n - shift:
        a view, so its gradient rolls back."""
        if dims is None:
            if not isinstance(shifts, int) and len(shifts) != 1:
                raise ArgumentError(f"roll: without dims, shifts must be one int (the flattened tensor "
                                    f"rolls), got {shifts!r}")
            return self.reshape(-1).roll(shifts, 0).reshape(self.shape)
        shifts = (shifts,) if isinstance(shifts, int) else tuple(shifts)
        dims = (dims,) if isinstance(dims, int) else tuple(dims)
        ints = all(isinstance(s, int) and not isinstance(s, bool) for s in shifts)
        if len(shifts) != len(dims) or not ints:
            raise ArgumentError(f"roll: shifts {shifts} and dims {dims} must be ints, as many of one as the "
                                "other")
        x = self
        for shift, dim in zip(shifts, dims, strict=True):
            axis = self._axis(dim, "roll")
            n = x.shape[axis] if x.ndim else 1
            if x.ndim and n and shift % n:
                reps = tuple(2 if a == axis else 1 for a in range(x.ndim))
                start = n - shift % n
                bounds = tuple((start, start + n) if a == axis else None for a in range(x.ndim))
                x = x.repeat(reps).shrink(bounds)
        return x

    def repeat_interleave(self: TensorLike, repeats: Any, dim: int | None = None,
                          output_size: int | None = None) -> TensorLike:
        """Each element repeated `repeats` times along dim, copies next to each other
        (torch.repeat_interleave); dim=None flattens first. An int repeat is a view: a new axis
        expanded and merged. A tensor of repeats (one per element, or one for all) is read on the
        host, as torch reads it too, to know the output size; the copies are then picked by index."""
        x, d = (self.reshape(-1), 0) if dim is None else (self, self._axis(dim, "repeat_interleave"))
        if x.ndim == 0:
            x = x.reshape(1)
        n = x.shape[d]
        counts = repeats.numpy() if isinstance(repeats, type(self)) else np.asarray(repeats)
        valid = counts.dtype.kind in "iu" and counts.ndim <= 1 and counts.size in (1, n)
        if not valid or (counts < 0).any():
            raise ArgumentError(f"repeat_interleave: repeats must be a non-negative int or a 1-d tensor of "
                                f"ints with one entry (or {n}, one per element along dim {d} of shape "
                                f"{self.shape}), got {repeats!r}")
        total = int(counts.sum()) if counts.size == n else int(counts.reshape(-1)[0]) * n
        if output_size is not None and output_size != total:
            raise ArgumentError(f"repeat_interleave: output_size={output_size} but the repeats {repeats!r} "
                                f"give {total} elements along dim {d}")
        if counts.size == 1:
            r = int(counts.reshape(-1)[0])
            spread = x.unsqueeze(d + 1).expand(tuple(r if a == d + 1 else -1 for a in range(x.ndim + 1)))
            return spread.reshape(x.shape[:d] + (n * r,) + x.shape[d + 1:])
        return x._select(d, np.repeat(np.arange(n), counts))

    def meshgrid(self: Any, *tensors: TensorLike, indexing: str = "ij") -> tuple[TensorLike, ...]:
        """Coordinate grids from 1-d tensors (torch.meshgrid): with indexing='ij' output k varies along
        axis k; 'xy' (numpy's default) swaps the first two axes. Each grid is a view (reshape, expand).
        Tensor.meshgrid(a, b), a.meshgrid(b) and Tensor.meshgrid([a, b]) all work."""
        tensors = tuple(self) if isinstance(self, (list, tuple)) else (self, *tensors)
        if indexing not in ("ij", "xy"):
            raise ArgumentError(f"meshgrid: indexing must be 'ij' or 'xy', got {indexing!r}")
        if any(t.ndim > 1 for t in tensors) or len({t.device for t in tensors}) > 1:
            raise ShapeError(f"meshgrid: expects 0-d or 1-d tensors on one device, got shapes "
                             f"{[t.shape for t in tensors]} on {[t.device for t in tensors]}")
        flat = [t.reshape(-1) for t in tensors]
        swap = indexing == "xy" and len(flat) > 1
        if swap:
            flat[0], flat[1] = flat[1], flat[0]
        shape = tuple(t.shape[0] for t in flat)
        grids = [t.reshape(tuple(-1 if a == k else 1 for a in range(len(flat)))).expand(shape)
                 for k, t in enumerate(flat)]
        if swap:
            grids[0], grids[1] = grids[1], grids[0]
        return tuple(grids)

    def as_strided(self: TensorLike, size: Sequence[int], stride: Sequence[int],
                   storage_offset: int = 0) -> TensorLike:
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
            raise ArgumentError(f"as_strided: size {size}, stride {stride} and storage_offset "
                                f"{storage_offset} must all be >= 0 (negative strides are not supported, as "
                                "in PyTorch)")
        flat = self.reshape(-1)
        if prod(size) == 0:
            return flat.shrink(((0, 0),)).reshape(size)
        last = storage_offset + sum((n - 1) * k for n, k in zip(size, stride, strict=True))
        if last >= self.numel():
            raise ShapeError(f"as_strided: size {size} with stride {stride} and storage_offset "
                             f"{storage_offset} reads position {last}, but the tensor of shape {self.shape} "
                             f"has only {self.numel()} elements (positions 0..{self.numel() - 1})")
        x = flat.shrink(((storage_offset, self.numel()),))
        for count, step in zip(size, stride, strict=True):
            x = x._windows(count, step)  # x[..., i, p] = previous x[..., p + i*step]
        return x.shrink((None,) * len(size) + ((0, 1),)).reshape(size)  # position p = 0

    def _windows(self: TensorLike, count: int, step: int) -> TensorLike:
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


def _join(pieces: list[TensorLike], axis: int) -> TensorLike:
    """Pieces laid end to end along axis (cat for views of one tensor): each is padded to the full
    length and picked by where, so a -0.0 keeps its sign (a sum of zero-padded pieces would not)."""
    pieces = [p for p in pieces if p.shape[axis]]
    total, start, out = sum(p.shape[axis] for p in pieces), 0, None
    for p in pieces:
        span = tuple((start, total - start - p.shape[axis]) if a == axis else (0, 0) for a in range(p.ndim))
        if out is None:
            out = p.pad(span)
        else:
            out = p.ones_like(dtype="bool", requires_grad=False).pad(span).where(p.pad(span), out)
        start += p.shape[axis]
    return out
