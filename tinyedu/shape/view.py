"""View: one way of looking at a flat buffer as an n-dimensional array, without copying it.

Element `(i0, i1, ...)` of a view lives at buffer index `offset + i0*strides[0] + i1*strides[1] + ...`,
provided it lies inside the `mask`: one `(lo, hi)` range per axis, outside which the element is
padding and reads as 0. Transposing, broadcasting, slicing, flipping and padding only change these
numbers, never the buffer. That is why movement ops are free.

The View methods assume valid arguments; `ShapeTracker` checks them and explains what went wrong.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

from tinyedu.core.helpers import prod
from tinyedu.shape.memo import cached_hash, memoized, same_fields
from tinyedu.shape.symbolic import Node, NumNode, to_node

Mask = Optional[tuple[tuple[int, int], ...]]


def strides_for_shape(shape: Sequence[int]) -> tuple[int, ...]:
    """C-order (row-major) strides, with 0 for size-1 axes (their index is always 0).

    (2, 3, 4) -> (12, 4, 1); (2, 1, 4) -> (4, 0, 1).
    """
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step if size != 1 else 0)
        step *= size
    return tuple(reversed(strides))


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class View:
    """shape, strides and offset into a buffer, plus an optional validity mask (from padding).

    Build views with `View.create`, which puts them in canonical form so that two views reading
    the same elements in the same way compare equal.
    """

    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int
    mask: Mask
    contiguous: bool

    __hash__ = cached_hash
    __eq__ = same_fields

    # --8<-- [start:create]
    @staticmethod
    @memoized
    def create(shape: Sequence[int], strides: Sequence[int] | None = None, offset: int = 0,
               mask: Sequence[tuple[int, int]] | None = None) -> View:
        """A canonical View.

        - size-1 axes get stride 0 (their index is always 0, so the stride never matters);
        - a mask that covers every element becomes None;
        - a mask that is empty on some axis means nothing is valid: the view is stored as
          mask ((0, 0), ...), strides 0, offset 0 (it reads no buffer element at all);
        - a view with no elements (a size-0 axis) has strides 0, offset 0 and no mask.
        """
        shape = tuple(int(s) for s in shape)
        if any(s < 0 for s in shape):
            raise ValueError(f"View.create: shape {shape} has a negative size")
        strides = strides_for_shape(shape) if strides is None else tuple(int(s) for s in strides)
        if len(strides) != len(shape):
            raise ValueError(f"View.create: {len(strides)} strides {strides} for {len(shape)} axes {shape}")
        if mask is not None:
            mask = tuple((int(lo), int(hi)) for lo, hi in mask)
            fits = len(mask) == len(shape) and all(0 <= lo and hi <= s
                                                   for (lo, hi), s in zip(mask, shape, strict=True))
            if not fits:
                raise ValueError(f"View.create: mask {mask} does not fit shape {shape}; "
                                 "each axis needs a (lo, hi) with 0 <= lo and hi <= size")
        zeros = (0,) * len(shape)
        if prod(shape) == 0:
            return View(shape, zeros, 0, None, True)
        if mask is not None and any(lo >= hi for lo, hi in mask):
            return View(shape, zeros, 0, ((0, 0),) * len(shape), False)
        strides = tuple(0 if s == 1 else st for s, st in zip(shape, strides, strict=True))
        if mask is not None and all(m == (0, s) for m, s in zip(mask, shape, strict=True)):
            mask = None
        contiguous = offset == 0 and mask is None and strides == strides_for_shape(shape)
        return View(shape, strides, int(offset), mask, contiguous)

    # --8<-- [end:create]
    # ---- facts ------------------------------------------------------------------------------
    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        """Number of elements the view shows (padding included)."""
        return prod(self.shape)

    @property
    def all_invalid(self) -> bool:
        """True when no element is valid (every element is padding)."""
        return self.mask is not None and any(lo >= hi for lo, hi in self.mask)

    def valid_ranges(self) -> tuple[tuple[int, int], ...]:
        """The mask, or (0, size) per axis when there is none."""
        return self.mask if self.mask is not None else tuple((0, s) for s in self.shape)

    def index_bounds(self) -> tuple[int, int] | None:
        """(smallest, largest) buffer index read by a valid element, or None if none is read."""
        if self.size == 0 or self.all_invalid:
            return None
        lo = hi = self.offset
        for stride, (first, end) in zip(self.strides, self.valid_ranges(), strict=True):
            ends = (stride * first, stride * (end - 1))
            lo, hi = lo + min(ends), hi + max(ends)
        return lo, hi

    def real_size(self) -> int:
        """How many buffer elements this view needs: one past the largest index it reads."""
        bounds = self.index_bounds()
        return 0 if bounds is None else bounds[1] + 1

    # ---- movement: each returns a new View -------------------------------------------------
    @memoized
    def permute(self, order: Sequence[int]) -> View:
        """Reorder the axes: new axis k is old axis order[k]."""
        mask = None if self.mask is None else tuple(self.mask[a] for a in order)
        return View.create(tuple(self.shape[a] for a in order), tuple(self.strides[a] for a in order),
                           self.offset, mask)

    @memoized
    def expand(self, new_shape: Sequence[int]) -> View:
        """Broadcast size-1 axes to new sizes: stride 0 reads the same element again and again."""
        mask = None
        if self.mask is not None:
            mask = tuple(m if s == n else ((0, n) if m[1] > m[0] else (0, 0))
                         for m, s, n in zip(self.mask, self.shape, new_shape, strict=True))
        return View.create(new_shape, self.strides, self.offset, mask)

    # --8<-- [start:pad-shrink]
    @memoized
    def pad(self, padding: Sequence[tuple[int, int]]) -> View:
        """Add (before, after) elements per axis that read 0: move the offset back, mask the rest."""
        offset, shape, mask = self.offset, [], []
        for size, stride, (lo, hi), (before, after) in zip(self.shape, self.strides, self.valid_ranges(),
                                                           padding, strict=True):
            offset -= before * stride
            shape.append(size + before + after)
            mask.append((lo + before, hi + before))
        return View.create(shape, self.strides, offset, mask)

    @memoized
    def shrink(self, bounds: Sequence[tuple[int, int]]) -> View:
        """Keep elements start..end-1 of each axis: move the offset forward, cut the mask."""
        offset, shape, mask = self.offset, [], []
        for stride, (lo, hi), (start, end) in zip(self.strides, self.valid_ranges(), bounds, strict=True):
            offset += start * stride
            size = end - start
            shape.append(size)
            lo, hi = min(max(lo - start, 0), size), max(min(hi - start, size), 0)
            mask.append((lo, hi) if lo < hi else (0, 0))
        return View.create(shape, self.strides, offset, mask)

    # --8<-- [end:pad-shrink]
    # --8<-- [start:stride]
    @memoized
    def stride(self, steps: Sequence[int]) -> View:
        """Take every k-th element of each axis (like `a[::k]`); a negative k walks it backwards."""
        shape, strides, mask, offset = [], [], [], self.offset
        for size, stride, (lo, hi), k in zip(self.shape, self.strides, self.valid_ranges(), steps,
                                             strict=True):
            if k < 0:  # flip first: element i becomes element size-1-i
                offset += (size - 1) * stride if size > 0 else 0
                stride, lo, hi, k = -stride, size - hi, size - lo, -k
            # new element i is old element i*k; it is valid when lo <= i*k < hi
            shape.append(ceil_div(size, k))
            strides.append(stride * k)
            mask.append((ceil_div(lo, k), ceil_div(hi, k)))
        return View.create(shape, strides, offset, mask)

    # --8<-- [end:stride]
    def flip(self, axes: Sequence[int]) -> View:
        """Reverse the given axes."""
        return self.stride([-1 if a in axes else 1 for a in range(self.ndim)])

    @memoized
    def reshape(self, new_shape: Sequence[int]) -> View | None:
        """The same elements, in the same C order, seen with `new_shape`; None if one view can't.

        Axes are matched in groups with equal element counts ((6,) <-> (2, 3)). A group of old
        axes can be merged/split only if it is laid out like one C-order block (each axis' stride
        is the next one's stride times its size); a mask must describe one contiguous range of
        the group. Otherwise the answer is None and the ShapeTracker stacks a new view instead.
        """
        new_shape = tuple(new_shape)
        if new_shape == self.shape:
            return self
        if self.size == 0 or self.contiguous:
            return View.create(new_shape)
        if self.all_invalid:  # a 0-d view cannot be masked, so () stays a separate view
            return View.create(new_shape, mask=((0, 0),) * len(new_shape)) if new_shape else None
        # Size-1 axes carry no information: drop them, reshape the rest, put new ones back.
        axes = zip(self.shape, self.strides, self.valid_ranges(), strict=True)
        old = [(size, stride, valid) for size, stride, valid in axes if size != 1]
        new = [s for s in new_shape if s != 1]
        strides: list[int] = []
        mask: list[tuple[int, int]] = []
        i = j = 0
        while i < len(old):
            # grow the group on whichever side has fewer elements until both match
            i_end, j_end, old_count, new_count = i + 1, j + 1, old[i][0], new[j]
            while old_count != new_count:
                if old_count < new_count:
                    old_count, i_end = old_count * old[i_end][0], i_end + 1
                else:
                    new_count, j_end = new_count * new[j_end], j_end + 1
            group, new_sizes = old[i:i_end], new[j:j_end]
            for (_, outer_stride, _), (inner_size, inner_stride, _) in zip(group, group[1:], strict=False):
                if outer_stride != inner_stride * inner_size:
                    return None  # not one C-order block in memory
            innermost_stride = group[-1][1]
            strides.extend(st * innermost_stride for st in strides_for_shape(new_sizes))
            interval = box_to_interval([s for s, _, _ in group], [m for _, _, m in group])
            box = None if interval is None else interval_to_box(*interval, new_sizes)
            if box is None:
                return None  # the valid region is not one box in the new shape
            mask.extend(box)
            i, j = i_end, j_end
        strides_iter, mask_iter = iter(strides), iter(mask)
        full_strides = [0 if s == 1 else next(strides_iter) for s in new_shape]
        full_mask = [(0, 1) if s == 1 else next(mask_iter) for s in new_shape]
        return View.create(new_shape, full_strides, self.offset, full_mask)

    # ---- index expressions -----------------------------------------------------------------
    def expr_idxs(self, idxs: Sequence[Node | int]) -> Node:
        """The buffer index of element `idxs`: offset + sum(idx * stride)."""
        self._check_idxs(idxs)
        terms = [to_node(i, "expr_idxs") * st for i, st in zip(idxs, self.strides, strict=True) if st != 0]
        return Node.sum([NumNode(self.offset), *terms])

    def expr_valid(self, idxs: Sequence[Node | int]) -> Node:
        """1 where `idxs` is inside the mask, 0 where it is padding."""
        self._check_idxs(idxs)
        if self.mask is None:
            return NumNode(1)
        checks: list[Node] = []
        for i, (lo, hi) in zip(idxs, self.mask, strict=True):
            i = to_node(i, "expr_valid")
            checks += [i >= lo, i < hi]
        return Node.ands(checks)

    def _check_idxs(self, idxs: Sequence[Node | int]) -> None:
        if len(idxs) != self.ndim:
            raise ValueError(f"View.expr_idxs: got {len(idxs)} indices for the {self.ndim} axes of "
                             f"shape {self.shape}; pass one per axis")

    def __str__(self) -> str:
        return (f"View(shape={self.shape}, strides={self.strides}, offset={self.offset}, "
                f"mask={self.mask}{', contiguous' if self.contiguous else ''})")


def unflatten(flat: Node, shape: Sequence[int]) -> list[Node]:
    """Split a C-order flat index into one index per axis: (flat // inner_size) % size."""
    if prod(shape) == 0:
        return [NumNode(0) for _ in shape]  # no element to address; avoids dividing by 0
    return [NumNode(0) if size == 1 else (flat // step) % size
            for size, step in zip(shape, _c_steps(shape), strict=True)]


def _c_steps(shape: Sequence[int]) -> list[int]:
    """C-order strides without the size-1 convention (number of elements inside each axis)."""
    return [prod(shape[k + 1:]) for k in range(len(shape))]


def box_to_interval(sizes: Sequence[int], box: Sequence[tuple[int, int]]) -> tuple[int, int] | None:
    """The flat C-order indices of a box of `sizes`, as one [start, end) range, or None.

    A box flattens to one range only if it is a single element on the leading axes, any range
    on one axis, and full on the axes after it, e.g. rows 2..3 of a matrix, or part of row 2.
    """
    j = 0
    while j < len(sizes) - 1 and box[j][1] - box[j][0] == 1:
        j += 1
    if any(box[k] != (0, sizes[k]) for k in range(j + 1, len(sizes))):
        return None
    steps = _c_steps(sizes)
    start = sum(box[k][0] * steps[k] for k in range(j + 1))
    return start, start + (box[j][1] - box[j][0]) * steps[j]


def interval_to_box(start: int, end: int, sizes: Sequence[int]) -> list[tuple[int, int]] | None:
    """The box of `sizes` whose flat C-order indices are exactly [start, end), or None."""
    steps = _c_steps(sizes)
    for j, (size, step) in enumerate(zip(sizes, steps, strict=True)):
        if start % step or end % step:
            continue
        first, last = start // step, end // step - 1  # range along axis j, counted in rows of `step`
        if first // size != last // size:
            continue  # it wraps into the next block of the axes before j
        leading = [(c, c + 1) for c in _digits(first // size, sizes[:j])]
        return leading + [(first % size, last % size + 1)] + [(0, s) for s in sizes[j + 1:]]
    return None


def _digits(value: int, sizes: Sequence[int]) -> list[int]:
    """Mixed-radix digits of value (C order): the index in each axis of `sizes`."""
    digits = []
    for size in reversed(sizes):
        value, digit = divmod(value, size)
        digits.append(digit)
    return list(reversed(digits))
