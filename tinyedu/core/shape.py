"""Views: how a movement op changes which element sits at each position, without moving any data.

A `View` describes a tensor that lives in a flat buffer: element (i0, i1, ...) sits at
`offset + i0*strides[0] + i1*strides[1] + ...`. Every movement op is a new View of the same memory:

    permute   reorder shape and strides                 (a transpose copies nothing)
    expand    a size-1 axis gets stride 0               (every position reads the same element)
    shrink    add lo*stride to the offset, cut the shape
    pad       the other way round, plus a *mask*: positions outside it are padding and read 0
    reshape   new strides, if the old ones can express the new shape (almost always)

A reshape of a view that has been permuted, expanded or padded cannot always be written as one
View: then the ShapeTracker keeps a stack of views, and an index goes through them one after the
other (unflattened with `//` and `%` between two views).

The index is computed with whatever arithmetic you hand `ShapeTracker.index`: the linearizer hands
it a UOpBuilder (and gets UOps), a test hands it Python ints (and gets numbers). That is the one
idea of this file: a movement op costs nothing at run time but a little index arithmetic.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .helpers import prod


def strides_for_shape(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Row-major (C order) strides; a size-1 axis gets stride 0 (it is never moved along)."""
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step if size != 1 else 0)
        step *= size
    return tuple(reversed(strides))


@dataclass(frozen=True)
class View:
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int = 0
    mask: tuple[tuple[int, int], ...] | None = None  # per axis [lo, hi): the positions that are data

    @staticmethod
    def create(shape: tuple[int, ...], strides: tuple[int, ...] | None = None, offset: int = 0,
               mask: tuple[tuple[int, int], ...] | None = None) -> "View":
        strides = strides_for_shape(shape) if strides is None else strides
        # a size-1 axis is never moved along: its stride is 0, so equal views compare equal
        strides = tuple(0 if s == 1 else st for s, st in zip(shape, strides, strict=True))
        if mask is not None and all(lo == 0 and hi == s for (lo, hi), s in zip(mask, shape, strict=True)):
            mask = None  # a mask that covers everything is no mask
        return View(tuple(shape), strides, offset, mask)

    @property
    def contiguous(self) -> bool:
        """Dense, in order, from the start: reading it is reading the buffer."""
        return self.offset == 0 and self.mask is None and self.strides == strides_for_shape(self.shape)

    def permute(self, order: tuple[int, ...]) -> "View":
        mask = None if self.mask is None else tuple(self.mask[a] for a in order)
        return View.create(tuple(self.shape[a] for a in order), tuple(self.strides[a] for a in order),
                           self.offset, mask)

    def expand(self, shape: tuple[int, ...]) -> "View":
        mask = None if self.mask is None else tuple(
            m if old == new else ((0, new) if m != (0, 0) else (0, 0))
            for m, old, new in zip(self.mask, self.shape, shape, strict=True))
        return View.create(shape, self.strides, self.offset, mask)

    def shrink(self, bounds: tuple[tuple[int, int], ...]) -> "View":
        offset = self.offset + sum(lo * st for (lo, _), st in zip(bounds, self.strides, strict=True))
        mask = None if self.mask is None else tuple(
            (max(0, mlo - lo), max(0, min(mhi, hi) - lo))
            for (mlo, mhi), (lo, hi) in zip(self.mask, bounds, strict=True))
        return View.create(tuple(hi - lo for lo, hi in bounds), self.strides, offset, mask)

    def pad(self, padding: tuple[tuple[int, int], ...]) -> "View":
        """Pad = a shrink to negative lo and past the end, with a mask over the original part."""
        shape = tuple(s + lo + hi for s, (lo, hi) in zip(self.shape, padding, strict=True))
        old = self.mask or tuple((0, s) for s in self.shape)
        mask = tuple((mlo + lo, mhi + lo) for (mlo, mhi), (lo, _) in zip(old, padding, strict=True))
        offset = self.offset - sum(lo * st for (lo, _), st in zip(padding, self.strides, strict=True))
        return View.create(shape, self.strides, offset, mask)

    def reshape(self, shape: tuple[int, ...]) -> "View | None":
        """The same elements in another shape as one View, or None if one View cannot say it.

        Axes of size 1 come and go freely. Otherwise the old axes are grouped with the new ones
        whose sizes multiply to the same number; a group can only be regrouped if its axes are
        "mergeable" (each stride is the next one times its size), as numpy's reshape without copy.
        """
        if self.contiguous:
            return View.create(shape)
        if self.mask is not None:
            return None  # (regrouping a mask is possible but long; a second View says it just as well)
        old = [(s, st) for s, st in zip(self.shape, self.strides, strict=True) if s != 1]
        strides: list[int] = []
        i = 0
        old = [list(axis) for axis in old]
        for size in shape:
            if size == 1:
                strides.append(0)
                continue
            if i < len(old) and old[i][0] > size and old[i][0] % size == 0:  # split an old axis: outer part
                outer = old[i][0] // size
                strides.append(old[i][1] * outer)
                old[i][0] = outer
                continue
            group, n = [], 1  # old axes covering this new one (or a new axis covering part of an old one)
            while n < size and i < len(old):
                group.append(old[i])
                n, i = n * old[i][0], i + 1
            if n != size:
                return None  # the new axis splits an old one: only the simple cases below
            if any(a[1] != b[0] * b[1] for a, b in zip(group, group[1:], strict=False)):
                return None  # the old axes are not one stretch of memory
            strides.append(group[-1][1])
        return View.create(shape, tuple(strides), self.offset) if i == len(old) else None

    def index(self, idxs: list[Any], ops: Any) -> tuple[Any, Any]:
        """(memory index, valid) at loop indices `idxs`, computed with `ops` (see ShapeTracker.index)."""
        index = ops.const(self.offset)
        for i, size, stride in zip(idxs, self.shape, self.strides, strict=True):
            if size != 1 and stride != 0:
                index = ops.add(index, ops.mul(i, ops.const(stride)))
        valid = ops.const(True)
        mask = self.mask or [(0, s) for s in self.shape]
        for i, (lo, hi), size in zip(idxs, mask, self.shape, strict=True):
            if lo > 0:  # i >= lo, written as lo-1 < i
                valid = ops.and_(valid, ops.lt(ops.const(lo - 1), i))
            if hi < size:
                valid = ops.and_(valid, ops.lt(i, ops.const(hi)))
        return index, valid


@dataclass(frozen=True)
class ShapeTracker:
    """A stack of Views, the last one the shape the tensor has now. Most trackers have one View."""

    views: tuple[View, ...]

    @staticmethod
    def from_shape(shape: tuple[int, ...]) -> "ShapeTracker":
        return ShapeTracker((View.create(tuple(shape)),))

    @property
    def shape(self) -> tuple[int, ...]:
        return self.views[-1].shape

    @property
    def contiguous(self) -> bool:
        return len(self.views) == 1 and self.views[0].contiguous

    def _last(self, view: View) -> "ShapeTracker":
        return ShapeTracker(self.views[:-1] + (view,))

    def permute(self, order: tuple[int, ...]) -> "ShapeTracker":
        return self._last(self.views[-1].permute(order))

    def expand(self, shape: tuple[int, ...]) -> "ShapeTracker":
        return self._last(self.views[-1].expand(shape))

    def shrink(self, bounds: tuple[tuple[int, int], ...]) -> "ShapeTracker":
        return self._last(self.views[-1].shrink(bounds))

    def pad(self, padding: tuple[tuple[int, int], ...]) -> "ShapeTracker":
        return self._last(self.views[-1].pad(padding))

    def reshape(self, shape: tuple[int, ...]) -> "ShapeTracker":
        view = self.views[-1].reshape(shape)
        if view is not None:
            return self._last(view)
        return ShapeTracker(self.views + (View.create(shape),))  # read the old view in order, then regroup

    # --8<-- [start:index]
    def index(self, idxs: list[Any], ops: Any) -> tuple[Any, Any]:
        """Where position `idxs` of this shape lives in memory, and whether it is data (not padding).

        `ops` does the arithmetic: it has const(x), add, mul, div, mod, lt and and_. Going from the
        last View to the first, each View turns its indices into a flat position, which the View
        before it reads as a position of *its* shape: unflattened with // and %.
        """
        index, valid = self.views[-1].index(idxs, ops)
        for view in reversed(self.views[:-1]):
            flat, idxs = index, []
            for size, step in zip(view.shape, strides_for_shape(view.shape), strict=True):
                at = ops.const(0) if size == 1 else ops.mod(ops.div(flat, ops.const(step)), ops.const(size))
                idxs.append(at)
            index, inner_valid = view.index(idxs, ops)
            valid = ops.and_(valid, inner_valid)
        return index, valid
    # --8<-- [end:index]

    def size(self) -> int:
        """How many elements the buffer under the first View must hold (its largest index + 1)."""
        return prod(self.views[0].shape)


class IntOps:
    """Plain-integer arithmetic for `ShapeTracker.index`: the index of one position, as a number.
    (Floor division is right here: every index that is divided is non-negative.)"""

    const = staticmethod(lambda x: x)
    add = staticmethod(lambda a, b: a + b)
    mul = staticmethod(lambda a, b: a * b)
    div = staticmethod(lambda a, b: a // b)
    mod = staticmethod(lambda a, b: a % b)
    lt = staticmethod(lambda a, b: a < b)
    and_ = staticmethod(lambda a, b: a and b)
