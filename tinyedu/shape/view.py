"""View: the core's View (tinyedu/core/shape.py), with what the full library adds to it.

The core's View is the whole idea: element `(i0, i1, ...)` lives at buffer index
`offset + i0*strides[0] + ...` when it lies inside the `mask`, and each movement op (permute,
expand, pad, shrink, reshape) is a new View of the same buffer. This subclass adds, without
changing what any of those ops mean:

- checks: `View.create` refuses a negative size, a stride per axis too few or a mask that does not
  fit, with a message that says so (the core trusts its Tensor to pass valid arguments);
- memory: views never change, so every movement op remembers its answers (`@memoized`), and a
  view hashes once (`cached_hash`); a training step asks the same questions every step;
- `stride` and `flip` (`a[::k]`, `a[::-1]`), and the index as a *symbolic* expression
  (`expr_idxs`, `expr_valid`) that simplifies itself as it is built (tinyedu/shape/symbolic.py),
  which the code generators and the view-merging of ShapeTracker read;
- `index_bounds`/`real_size`: which buffer elements a view can touch.
"""

from __future__ import annotations

from typing import Sequence

from tinyedu.core import shape as core
from tinyedu.core.helpers import prod
from tinyedu.core.shape import Mask, box_to_interval, interval_to_box, strides_for_shape
from tinyedu.shape.memo import cached_hash, memoized, same_fields
from tinyedu.shape.symbolic import Node, NumNode, to_node

__all__ = ["View", "Mask", "strides_for_shape", "unflatten", "ceil_div", "box_to_interval", "interval_to_box"]


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


class View(core.View):
    """shape, strides and offset into a buffer, plus an optional validity mask (from padding).

    Build views with `View.create`, which puts them in canonical form so that two views reading
    the same elements in the same way compare equal.
    """

    __hash__ = cached_hash
    __eq__ = same_fields

    @classmethod
    def create(cls, shape: Sequence[int], strides: Sequence[int] | None = None, offset: int = 0,
               mask: Sequence[tuple[int, int]] | None = None) -> View:
        """The core's canonical View, after checking that the numbers describe one (see `_create`)."""
        return _create(cls, shape, strides, offset, mask)

    @property
    def ndim(self) -> int:
        return len(self.shape)

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


# The core's movement ops, remembered: the same view asked the same question gets the same object.
for _name in ("permute", "expand", "pad", "shrink", "reshape"):
    setattr(View, _name, memoized(getattr(core.View, _name)))


@memoized
def _create(cls: type[View], shape: Sequence[int], strides: Sequence[int] | None, offset: int,
            mask: Mask) -> View:
    shape = tuple(int(s) for s in shape)
    if any(s < 0 for s in shape):
        raise ValueError(f"View.create: shape {shape} has a negative size")
    strides = strides_for_shape(shape) if strides is None else tuple(int(s) for s in strides)
    if len(strides) != len(shape):
        raise ValueError(f"View.create: {len(strides)} strides {strides} for {len(shape)} axes {shape}")
    if mask is not None:
        mask = tuple((int(lo), int(hi)) for lo, hi in mask)
        fits = len(mask) == len(shape) and all(0 <= lo and hi <= size
                                               for (lo, hi), size in zip(mask, shape, strict=False))
        if not fits:
            raise ValueError(f"View.create: mask {mask} does not fit shape {shape}; "
                             "each axis needs a (lo, hi) with 0 <= lo and hi <= size")
    return core.View.create.__func__(cls, shape, strides, int(offset), mask)


def unflatten(flat: Node, shape: Sequence[int]) -> list[Node]:
    """Split a C-order flat index into one index per axis: (flat // inner_size) % size."""
    if prod(shape) == 0:
        return [NumNode(0) for _ in shape]  # no element to address; avoids dividing by 0
    return [NumNode(0) if size == 1 else (flat // step) % size
            for size, step in zip(shape, core.c_steps(shape), strict=True)]
