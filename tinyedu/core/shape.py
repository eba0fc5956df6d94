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

The full library builds on these two classes (tinyedu/shape/): it checks every argument with a
clear error, remembers answers, adds `stride`/`flip`, merges stacked views again, and computes the
index as a symbolic expression that simplifies itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any, Sequence

from .helpers import prod

Mask = tuple[tuple[int, int], ...] | None  # per axis [lo, hi): the positions that are data


def strides_for_shape(shape: Sequence[int]) -> tuple[int, ...]:
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
    mask: Mask = None

    # --8<-- [start:create]
    @classmethod
    def create(cls, shape: Sequence[int], strides: Sequence[int] | None = None, offset: int = 0,
               mask: Sequence[tuple[int, int]] | None = None) -> "View":
        """A View in canonical form, so that two views that read the same elements compare equal:
        a size-1 axis has stride 0; a mask that covers everything is no mask; a view with no
        elements, or whose mask is empty, reads no memory (strides 0, offset 0)."""
        shape = tuple(shape)
        strides = strides_for_shape(shape) if strides is None else tuple(strides)
        zeros = (0,) * len(shape)
        if prod(shape) == 0:
            return cls(shape, zeros)
        if mask is not None:
            mask = tuple((lo, hi) for lo, hi in mask)
            if any(lo >= hi for lo, hi in mask):
                return cls(shape, zeros, 0, ((0, 0),) * len(shape))
            if all(m == (0, s) for m, s in zip(mask, shape, strict=True)):
                mask = None
        strides = tuple(0 if s == 1 else st for s, st in zip(shape, strides, strict=True))
        return cls(shape, strides, offset, mask)
    # --8<-- [end:create]

    @cached_property
    def contiguous(self) -> bool:
        """Dense, in order, from the start: reading it is reading the buffer (an empty view is)."""
        return self.offset == 0 and self.mask is None and (self.strides == strides_for_shape(self.shape)
                                                           or prod(self.shape) == 0)

    @property
    def size(self) -> int:
        return prod(self.shape)

    @property
    def all_invalid(self) -> bool:
        """Every position is padding: the view reads nothing."""
        return self.mask is not None and any(lo >= hi for lo, hi in self.mask)

    def valid_ranges(self) -> tuple[tuple[int, int], ...]:
        return self.mask if self.mask is not None else tuple((0, s) for s in self.shape)

    def permute(self, order: Sequence[int]) -> "View":
        mask = None if self.mask is None else tuple(self.mask[a] for a in order)
        return self.create(tuple(self.shape[a] for a in order), tuple(self.strides[a] for a in order),
                           self.offset, mask)

    def expand(self, shape: Sequence[int]) -> "View":
        mask = None if self.mask is None else tuple(
            m if old == new else ((0, new) if m[1] > m[0] else (0, 0))
            for m, old, new in zip(self.mask, self.shape, shape, strict=True))
        return self.create(shape, self.strides, self.offset, mask)

    # --8<-- [start:pad-shrink]
    def pad(self, padding: Sequence[tuple[int, int]]) -> "View":
        """Add (before, after) positions per axis that read 0: move the offset back, mask the rest."""
        offset, shape, mask = self.offset, [], []
        for size, stride, (lo, hi), (before, after) in zip(self.shape, self.strides, self.valid_ranges(),
                                                           padding, strict=True):
            offset -= before * stride
            shape.append(size + before + after)
            mask.append((lo + before, hi + before))
        return self.create(shape, self.strides, offset, mask)

    def shrink(self, bounds: Sequence[tuple[int, int]]) -> "View":
        """Keep positions start..end-1 of each axis: move the offset forward, cut the mask."""
        offset, shape, mask = self.offset, [], []
        for stride, (lo, hi), (start, end) in zip(self.strides, self.valid_ranges(), bounds, strict=True):
            offset += start * stride
            shape.append(end - start)
            lo, hi = min(max(lo - start, 0), end - start), max(min(hi - start, end - start), 0)
            mask.append((lo, hi) if lo < hi else (0, 0))
        return self.create(shape, self.strides, offset, mask)
    # --8<-- [end:pad-shrink]

    def reshape(self, new_shape: Sequence[int]) -> "View | None":
        """The same elements, in the same C order, seen with `new_shape`; None if one View can't.

        Size-1 axes come and go freely. The other axes are matched in groups with equal element
        counts ((6,) <-> (2, 3)). A group can be regrouped only if it lies in memory like one C-order
        block (each axis' stride is the next one's stride times its size), as numpy's reshape without
        copy; a mask must be one box in the new shape. Otherwise the ShapeTracker stacks a new View.
        """
        new_shape = tuple(new_shape)
        if new_shape == self.shape:
            return self
        if self.size == 0 or self.contiguous:
            return self.create(new_shape)
        if self.all_invalid:  # (a 0-d view cannot be masked, so () stays a separate view)
            return self.create(new_shape, mask=((0, 0),) * len(new_shape)) if new_shape else None
        axes = zip(self.shape, self.strides, self.valid_ranges(), strict=True)
        old = [axis for axis in axes if axis[0] != 1]  # (size, stride, valid range) of each real axis
        new = [s for s in new_shape if s != 1]
        strides: list[int] = []
        mask: list[tuple[int, int]] = []
        i = j = 0
        while i < len(old):  # grow the group on whichever side has fewer elements until both match
            i_end, j_end, old_count, new_count = i + 1, j + 1, old[i][0], new[j]
            while old_count != new_count:
                if old_count < new_count:
                    old_count, i_end = old_count * old[i_end][0], i_end + 1
                else:
                    new_count, j_end = new_count * new[j_end], j_end + 1
            group, sizes = old[i:i_end], new[j:j_end]
            if any(outer[1] != inner[1] * inner[0] for outer, inner in zip(group, group[1:], strict=False)):
                return None  # not one C-order block of memory
            strides.extend(st * group[-1][1] for st in strides_for_shape(sizes))
            interval = box_to_interval([s for s, _, _ in group], [m for _, _, m in group])
            box = None if interval is None else interval_to_box(*interval, sizes)
            if box is None:
                return None  # the valid positions are not one box in the new shape
            mask.extend(box)
            i, j = i_end, j_end
        strides_left, mask_left = iter(strides), iter(mask)
        return self.create(new_shape, [0 if s == 1 else next(strides_left) for s in new_shape], self.offset,
                           [(0, 1) if s == 1 else next(mask_left) for s in new_shape])

    def index(self, idxs: list[Any], ops: Any) -> tuple[Any, Any]:
        """(memory index, valid) at loop indices `idxs`, computed with `ops` (see ShapeTracker.index)."""
        index = ops.const(self.offset)
        for i, size, stride in zip(idxs, self.shape, self.strides, strict=True):
            if size != 1 and stride != 0:
                index = ops.add(index, ops.mul(i, ops.const(stride)))
        valid = ops.const(True)
        for i, (lo, hi), size in zip(idxs, self.valid_ranges(), self.shape, strict=True):
            if lo > 0:  # i >= lo, written as lo-1 < i
                valid = ops.and_(valid, ops.lt(ops.const(lo - 1), i))
            if hi < size:
                valid = ops.and_(valid, ops.lt(i, ops.const(hi)))
        return index, valid


def c_steps(shape: Sequence[int]) -> list[int]:
    """How many elements one step along each axis skips in C order (size-1 axes included)."""
    return [prod(shape[k + 1:]) for k in range(len(shape))]


def box_to_interval(sizes: Sequence[int], box: Sequence[tuple[int, int]]) -> tuple[int, int] | None:
    """The flat C-order positions of a box of `sizes` as one [start, end) range, or None. A box is one
    range if it is a single position on the leading axes, any range on one axis, full after it."""
    j = 0
    while j < len(sizes) - 1 and box[j][1] - box[j][0] == 1:
        j += 1
    if any(box[k] != (0, sizes[k]) for k in range(j + 1, len(sizes))):
        return None
    steps = c_steps(sizes)
    start = sum(box[k][0] * steps[k] for k in range(j + 1))
    return start, start + (box[j][1] - box[j][0]) * steps[j]


def interval_to_box(start: int, end: int, sizes: Sequence[int]) -> list[tuple[int, int]] | None:
    """The box of `sizes` whose flat C-order positions are exactly [start, end), or None."""
    for j, (size, step) in enumerate(zip(sizes, c_steps(sizes), strict=True)):
        if start % step or end % step:
            continue
        first, last = start // step, end // step - 1  # the range along axis j, in rows of `step`
        if first // size != last // size:
            continue  # it wraps into the next block of the axes before j
        leading, rest = [], first // size
        for s in reversed(sizes[:j]):  # first // size, as one digit per leading axis
            rest, digit = divmod(rest, s)
            leading.insert(0, (digit, digit + 1))
        return leading + [(first % size, last % size + 1)] + [(0, s) for s in sizes[j + 1:]]
    return None


@dataclass(frozen=True)
class ShapeTracker:
    """A stack of Views, the last one the shape the tensor has now. Most trackers have one View."""

    views: tuple[View, ...]

    @classmethod
    def from_shape(cls, shape: Sequence[int]) -> "ShapeTracker":
        return cls((View.create(tuple(shape)),))

    @property
    def shape(self) -> tuple[int, ...]:
        return self.views[-1].shape

    @property
    def contiguous(self) -> bool:
        return len(self.views) == 1 and self.views[0].contiguous

    # --8<-- [start:stack]
    def with_views(self, views: tuple[View, ...]) -> "ShapeTracker":
        """Every movement op's result passes through here (the full library's seam: it merges views)."""
        if views[-1].size == 0 or views[-1].all_invalid:
            return type(self)(views[-1:])  # nothing is read, so the views below don't matter
        return type(self)(views)

    def permute(self, order: Sequence[int]) -> "ShapeTracker":
        return self.with_views(self.views[:-1] + (self.views[-1].permute(order),))

    def expand(self, shape: Sequence[int]) -> "ShapeTracker":
        return self.with_views(self.views[:-1] + (self.views[-1].expand(shape),))

    def shrink(self, bounds: Sequence[tuple[int, int]]) -> "ShapeTracker":
        return self.with_views(self.views[:-1] + (self.views[-1].shrink(bounds),))

    def pad(self, padding: Sequence[tuple[int, int]]) -> "ShapeTracker":
        return self.with_views(self.views[:-1] + (self.views[-1].pad(padding),))

    def reshape(self, shape: Sequence[int]) -> "ShapeTracker":
        view = self.views[-1].reshape(shape)
        if view is not None:
            return self.with_views(self.views[:-1] + (view,))
        # read the old views in C order, then regroup: a second View on top
        return self.with_views(self.views + (self.views[-1].create(shape),))
    # --8<-- [end:stack]

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
            for size, step in zip(view.shape, c_steps(view.shape), strict=True):
                at = ops.const(0) if size == 1 else ops.mod(ops.div(flat, ops.const(step)), ops.const(size))
                idxs.append(at)
            index, inner_valid = view.index(idxs, ops)
            valid = ops.and_(valid, inner_valid)
        return index, valid
    # --8<-- [end:index]


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
