"""ShapeTracker: the core's stack of views (tinyedu/core/shape.py), with what the full library adds.

Movement ops (reshape, permute, expand, pad, shrink, stride/flip) never copy data. They return a
new ShapeTracker, and the code that finally reads the buffer asks it for an *index expression*:
"element (idx0, idx1) of what you see lives at buffer index ..., and is valid when ...".

Usually one View is enough. But some reshapes cannot be written as one (shape, strides) view:
transpose a (2, 3) matrix and flatten it, and the 6 elements are read from memory in the order
0 3 1 4 2 5, which no single stride describes. Then a second view is stacked on top: the top view
turns the user's index into a flat position in the view below, which splits it back into its own
axes with `//` and `%`. The core stops there. This subclass adds:

- `simplify`: after every op, two neighbouring views that one view can express are merged again
  (reshape the flattened transpose back, and one view is left). It plugs into the core's
  `with_views`, through which every movement op's result passes;
- checks of every movement op's argument, with errors that say what would have been valid;
- `stride`/`flip`, and the index as a symbolic expression (`expr_idxs`) instead of the core's
  `index(idxs, ops)`; `index_arrays` for the NUMPY device, `real_strides`, `max_index`.

Convention: `views[0]` sits on the memory, `views[-1]` is what the user sees.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from tinyedu.core import shape as core
from tinyedu.core.helpers import prod
from tinyedu.shape import checks
from tinyedu.shape.memo import cached_hash, memoized, same_fields
from tinyedu.shape.rules import base_and_coefficient, terms_and_constant
from tinyedu.shape.symbolic import Node, NumNode, Variable, given_valid, variable_bounds
from tinyedu.shape.view import View, unflatten


def idx_vars(shape: Sequence[int], prefix: str = "idx") -> list[Variable]:
    """One index Variable per axis, `idx0` in [0, shape[0]-1] and so on (the default indices)."""
    return [Variable(f"{prefix}{axis}", 0, max(size - 1, 0)) for axis, size in enumerate(shape)]


class ShapeTracker(core.ShapeTracker):
    """A stack of views: views[0] reads the memory, views[-1] has the shape the user sees."""

    def __init__(self, views: Sequence[View]) -> None:
        object.__setattr__(self, "views", tuple(views))
        if not self.views:
            raise ValueError("ShapeTracker: needs at least one View; use ShapeTracker.from_shape(shape)")

    __hash__ = cached_hash  # hashed on every graph-node lookup: computed once per tracker
    __eq__ = same_fields

    @classmethod
    def from_shape(cls, shape: Sequence[int]) -> ShapeTracker:
        """A contiguous C-order view of a fresh buffer of `shape`."""
        if type(shape) is tuple and all(type(s) is int and s >= 0 for s in shape):  # usual case: valid
            return _contiguous(shape)
        return _contiguous(checks.check_shape("ShapeTracker.from_shape", shape))

    # ---- facts ------------------------------------------------------------------------------
    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        """Number of elements in the shape the user sees."""
        return prod(self.shape)

    # ---- movement ops: the core's, after checking the argument -------------------------------
    # The core's ops ask the last View (whose movement ops are @memoized: views are immutable, so
    # the same question always has the same answer, and a training step asks the same ones every
    # step), then pass the new stack to `with_views`, which merges views (@memoized too).
    def reshape(self, new_shape: Sequence[int]) -> ShapeTracker:
        """Same elements in C order, new shape: merged into the last view if it can express it,
        else a new contiguous view is stacked on top (see the module docstring)."""
        return _moved(self, "reshape", new_shape)

    def permute(self, order: Sequence[int]) -> ShapeTracker:
        """Reorder axes: new axis k is old axis order[k] (a transpose for 2-d)."""
        return _moved(self, "permute", order)

    def expand(self, new_shape: Sequence[int]) -> ShapeTracker:
        """Broadcast size-1 axes to any size (stride 0: the same element is read again)."""
        return _moved(self, "expand", new_shape)

    def pad(self, padding: Sequence[tuple[int, int]]) -> ShapeTracker:
        """Add (before, after) zeros on each axis; they are masked, not stored."""
        return super().pad(checks.check_pad(self.shape, padding))

    def shrink(self, bounds: Sequence[tuple[int, int]]) -> ShapeTracker:
        """Keep elements start..end-1 of each axis: bounds is one (start, end) per axis."""
        return super().shrink(checks.check_shrink(self.shape, bounds))

    def stride(self, steps: Sequence[int]) -> ShapeTracker:
        """Take every k-th element per axis, like `a[::k]`; negative k walks backwards (-1 flips)."""
        view = self.views[-1].stride(checks.check_stride(self.shape, steps))
        return self.with_views(self.views[:-1] + (view,))

    def flip(self, axes: Sequence[int]) -> ShapeTracker:
        """Reverse the given axes (negative axes count from the end)."""
        axes = checks.check_axes("flip", self.shape, axes)
        return self.stride([-1 if a in axes else 1 for a in range(self.ndim)])

    @memoized
    def with_views(self, views: tuple[View, ...]) -> ShapeTracker:
        """The core's seam: the new stack, with neighbouring views merged where one view says it."""
        tracker = super().with_views(views)
        return tracker.simplify() if len(tracker.views) > 1 else tracker

    # ---- index expressions -----------------------------------------------------------------
    # --8<-- [start:expr_idxs]
    def expr_idxs(self, idxs: Sequence[Node | int] | None = None) -> tuple[Node, Node]:
        """(index, valid) of the element at `idxs` (one Node or int per axis of `self.shape`).

        `index` is the position in the base buffer (the memory under views[0]); `valid` is 1 where
        the element comes from the buffer and 0 where it is padding, which reads as 0. Where valid
        is 0 the index means nothing (it can even be negative), so guard the load:
        `valid ? buf[index] : 0`. Default idxs are the Variables `idx0..` from `idx_vars`.

        Composition: views[-1] maps idxs to a flat C-order position among the elements of
        views[-2], which splits it into its own axes (`unflatten`), and so on down to views[0].
        `valid` is the AND of every view's mask. A tracker with no elements gives (0, 1).
        """
        if idxs is None:
            idxs = idx_vars(self.shape)
        if len(idxs) != self.ndim:
            raise ValueError(f"expr_idxs: got {len(idxs)} indices for the {self.ndim} axes of shape "
                             f"{self.shape}; pass one per axis")
        if self.size == 0:
            # No position exists, so nothing is read and no mask applies: the empty view's own
            # answer (index 0, valid 1) keeps loads and stores of empty tensors unguarded.
            return NumNode(0), NumNode(1)
        top = self.views[-1]
        index, valid = top.expr_idxs(idxs), top.expr_valid(idxs)
        for view in reversed(self.views[:-1]):
            if view.size == 0:
                return NumNode(0), NumNode(0)
            view_idxs = unflatten(index, view.shape)
            index, valid = view.expr_idxs(view_idxs), Node.ands([view.expr_valid(view_idxs), valid])
        return index, valid

    # --8<-- [end:expr_idxs]
    def expr_node(self, flat_idx: Node | int | None = None) -> tuple[Node, Node]:
        """Like expr_idxs, for a flat C-order position in `self.shape` (default Variable `idx`)."""
        if flat_idx is None:
            flat_idx = Variable("idx", 0, max(self.size - 1, 0))
        flat = flat_idx if isinstance(flat_idx, Node) else NumNode(flat_idx)
        return self.expr_idxs(unflatten(flat, self.shape))

    def index_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """Every element's buffer index and validity at once, as int/bool arrays of `self.shape`.

        What the NUMPY device needs: `np.where(valid, buf[np.where(valid, index, 0)], 0)`.
        """
        index, valid = self.expr_idxs()
        grids = np.indices(self.shape, dtype=np.int64)
        env = {f"idx{axis}": grids[axis] for axis in range(self.ndim)}
        return (np.broadcast_to(np.asarray(index.eval(env), dtype=np.int64), self.shape),
                np.broadcast_to(np.asarray(valid.eval(env)), self.shape).astype(bool))

    def real_strides(self, ignore_valid: bool = False, where_valid: bool = False) -> tuple[int | None, ...]:
        """The stride of each axis of `self.shape` in the buffer, None where there is no single one.

        An axis has a real stride when the index is `... + idx*stride + ...` in it. Unless
        `ignore_valid`, an axis that the padding mask depends on also gets None. `where_valid`: the
        strides of the index where the mask lets it read (`given_valid`: a concatenation's part
        reads with stride 1 where, over the whole axis, its index wraps around with `%`).
        """
        variables = idx_vars(self.shape)
        index, valid = self.expr_idxs(variables)
        if where_valid:
            index = given_valid(index, valid)
        found: dict[str, int | None] = {}
        for term in terms_and_constant(index)[0]:
            base, k = base_and_coefficient(term)
            if isinstance(base, Variable) and base.name not in found:
                found[base.name] = k
            else:  # inside a // or %, or in two terms: the index does not move by one stride along it
                found.update((v.name, None) for v in base.vars())
        if not ignore_valid:
            found.update((v.name, None) for v in valid.vars())
        return tuple(found.get(v.name, 0) for v in variables)

    # --8<-- [start:simplify]
    @memoized
    def simplify(self) -> ShapeTracker:
        """Merge neighbouring views into one wherever a single view reads the same elements."""
        views = list(self.views)
        k = len(views) - 1
        while k >= 1:
            merged = merge_views(views[k - 1], views[k])
            if merged is None:
                k -= 1
            else:
                views[k - 1:k + 1] = [merged]
                k = min(k, len(views) - 1)
        return ShapeTracker(tuple(views))

    # --8<-- [end:simplify]
    @memoized
    def max_index(self) -> int:
        """The largest buffer index any valid element reads (-1 when none is read)."""
        bounds = self.views[0].index_bounds()
        if self.size == 0 or bounds is None:
            return -1
        index, valid = self.expr_idxs()
        if valid.max == 0:
            return -1
        # views[0]'s mask keeps its reads inside the buffer; the expression's bound may be tighter.
        return min(bounds[1], index.max)

    def base_size(self) -> int:
        """How many base-buffer elements are needed: max_index() + 1."""
        return self.max_index() + 1

    def __str__(self) -> str:
        """One line (it is printed inside AST trees): the views from memory up to what you see."""
        return f"ShapeTracker(shape={self.shape}, views=[{', '.join(map(str, self.views))}])"

    def describe(self) -> str:
        """Several lines, one per view, saying which end is which."""
        lines = [f"ShapeTracker shape={self.shape} with {len(self.views)} view(s):"]
        for k, view in enumerate(self.views):
            role = ["reads the memory"] if k == 0 else []
            role += ["what you see"] if k == len(self.views) - 1 else []
            lines.append(f"  views[{k}] {view}" + (f"  <- {', '.join(role)}" if role else ""))
        return "\n".join(lines)


# The result of each reshape, permute and expand, by (the tracker's id, the op, its argument). A
# step moves the same trackers the same ways every step; the views' own memos (view.py) answer those
# questions too, but only after the argument's checks and a hash of the views. Keyed by the id, so
# no tracker is hashed; the entry holds the tracker itself, so that id cannot be reused while the
# entry lives, and a hit is checked to be that very tracker. Only an argument that is a tuple of
# Python ints is remembered (it passed the checks once, so it passes them again): (2.0, 3) equals
# (2, 3), and must still get its error.
_MOVES: dict[tuple, tuple[ShapeTracker, ShapeTracker]] = {}
MAX_MOVES = 20_000  # a long session with many shapes starts over instead of growing


_CHECKS = {"reshape": checks.check_reshape, "permute": checks.check_permute, "expand": checks.check_expand}


_INTS = {int}


def _moved(tracker: ShapeTracker, op: str, arg: Sequence[int]) -> ShapeTracker:
    """`tracker.<op>(arg)`: the core's op after the argument's check, or the result remembered."""
    # (only ints are keys: True == 1 and hashes alike, but reshape((True, 4)) must fail its check)
    key = (id(tracker), op, arg) if type(arg) is tuple and {*map(type, arg)} <= _INTS else None
    hit = _MOVES.get(key)  # (a None key is never stored)
    if hit is not None and hit[0] is tracker:
        return hit[1]
    result = getattr(core.ShapeTracker, op)(tracker, _CHECKS[op](tracker.shape, arg))
    if key is not None:
        if len(_MOVES) >= MAX_MOVES:
            _MOVES.clear()
        _MOVES[key] = (tracker, result)
    return result


@memoized
def _contiguous(shape: tuple[int, ...]) -> ShapeTracker:
    return ShapeTracker((View.create(shape),))


@memoized
def merge_views(inner: View, outer: View) -> View | None:
    """One View equal to `outer` stacked on `inner`, or None when the pair needs two.

    A contiguous `inner` reads memory in its own C order, so `outer` alone reads the same elements
    (a reshape of a reshape; the simplifier cannot see that `(p//9)*9 + (p//3)%3*3 + p%3` is `p`).
    Otherwise build the pair's index expression in the outer view's Variables and let the
    simplifier work; if it comes out as `offset + sum(idx*stride)` with a validity that is a box
    (`lo <= idx < hi` per axis), those numbers are the merged view.
    """
    if outer.size == 0:
        return View.create(outer.shape)
    if inner.contiguous:  # inner's element k is memory's element k
        return outer
    variables = idx_vars(outer.shape)
    index, valid = ShapeTracker((inner, outer)).expr_idxs(variables)
    names = {v.name: axis for axis, v in enumerate(variables)}
    strides = [0] * outer.ndim
    terms, offset = terms_and_constant(index)
    for term in terms:
        base, k = base_and_coefficient(term)
        if not isinstance(base, Variable) or base.name not in names:
            return None
        strides[names[base.name]] = k
    if isinstance(valid, NumNode):
        if valid.b == 0:
            return View.create(outer.shape, mask=((0, 0),) * outer.ndim) if outer.ndim else None
        return View.create(outer.shape, strides, offset)
    lowest, beyond, others = variable_bounds(valid)
    if others or any(name not in names for name in (*lowest, *beyond)):
        return None
    mask = [(max(0, lowest.get(v.name, 0)), min(size, beyond.get(v.name, size)))
            for v, size in zip(variables, outer.shape, strict=True)]
    mask = [(lo, hi) if lo < hi else (0, 0) for lo, hi in mask]
    return View.create(outer.shape, strides, offset, mask)
