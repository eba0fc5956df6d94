"""Chapter 02 (views and the ShapeTracker): reference solutions, and typical mistakes with their hints."""

from __future__ import annotations

from tinyedu.exercises.registry import Mistake
from tinyedu.shape.view import View

# --8<-- [start:permuted_strides]
# A fresh (2, 3, 4) tensor has strides (12, 4, 1): the last axis steps by 1, each axis before it over
# everything after it. permute(2, 0, 1) makes new axis k old axis order[k]: strides (1, 12, 4).
permuted_strides = (1, 12, 4)
# --8<-- [end:permuted_strides]

# --8<-- [start:flip_index]
# x is (3, 4) with strides (4, 1). flip(0) reads row 2 - idx0: (2 - idx0)*4 + idx1 = 8 - 4*idx0 + idx1.
flip_index = "8 - 4*idx0 + idx1"  # the ShapeTracker renders it as ((idx0*-4)+idx1+8)
# --8<-- [end:flip_index]


# --8<-- [start:permute]
# new axis k is old axis order[k]: its size, its stride and its valid range move together
permute = View.permute
# --8<-- [end:permute]


# --8<-- [start:pad]
# the new first element lies `before` steps before the old one; the old valid range, shifted
pad = View.pad
# --8<-- [end:pad]


# ---- typical mistakes -------------------------------------------------------------------------------
def _permute_inverse(self, order):
    inverse = tuple(sorted(range(len(order)), key=order.__getitem__))
    return permute(self, inverse)


def _permute_shape_only(self, order):
    return View.create(tuple(self.shape[a] for a in order), None, self.offset, None)


def _permute_keeps_mask(self, order):
    strides = tuple(self.strides[a] for a in order)
    return View.create(tuple(self.shape[a] for a in order), strides, self.offset, self.mask)


def _permute_resets_offset(self, order):
    return View.create(tuple(self.shape[a] for a in order), tuple(self.strides[a] for a in order), 0,
                       None if self.mask is None else tuple(self.mask[a] for a in order))


def _pad_offset_forward(self, padding):
    good = pad(self, padding)
    offset = self.offset + sum(b * s for (b, _), s in zip(padding, self.strides, strict=True))
    return View.create(good.shape, good.strides, offset, good.mask)


def _pad_no_mask(self, padding):
    good = pad(self, padding)
    return View.create(good.shape, good.strides, good.offset, None)


def _pad_forgets_old_mask(self, padding):
    offset = self.offset - sum(b * s for (b, _), s in zip(padding, self.strides, strict=True))
    shape = [n + b + a for n, (b, a) in zip(self.shape, padding, strict=True)]
    mask = [(b, b + n) for n, (b, _) in zip(self.shape, padding, strict=True)]
    return View.create(shape, self.strides, offset, mask)


def _pad_shape_before_only(self, padding):
    good = pad(self, padding)
    shape = [n + b for n, (b, _) in zip(self.shape, padding, strict=True)]
    mask = [(lo, min(hi, n)) for (lo, hi), n in zip(good.mask, shape, strict=True)]
    return View.create(shape, good.strides, good.offset, mask)


MISTAKES = [
    Mistake("02.strides", (12, 4, 1), "permute moves those strides with their axes"),
    Mistake("02.strides", (1, 12), "one stride per axis"),
    Mistake("02.index_expression", "((idx0*4)+idx1)", "your expression gives 0"),
    Mistake("02.index_expression", "8 + 4*idx0 + idx1", "one step along idx0 moves your index by 4"),
    Mistake("02.index_expression", "8 - 4*idx0 +", "does not parse"),
    Mistake("02.permute", _permute_inverse, "you applied the inverse permutation"),
    Mistake("02.permute", _permute_shape_only, "the strides move with their axes"),
    Mistake("02.permute", _permute_keeps_mask, "each range moves with its axis"),
    Mistake("02.permute", _permute_resets_offset, "the offset stays"),
    Mistake("02.permute", lambda self, order: (self.shape, self.strides), "it must return a new View"),
    Mistake("02.pad", _pad_offset_forward, "moves back by before * stride"),
    Mistake("02.pad", _pad_no_mask, "need a mask"),
    Mistake("02.pad", _pad_forgets_old_mask, "was padded before"),
    Mistake("02.pad", _pad_shape_before_only, "each axis grows by before + after"),
]
