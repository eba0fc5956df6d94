"""View: canonical form, each movement op on one view, and its index/validity expressions."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tinyedu.core.helpers import prod
from tinyedu.shape import NumNode, Variable, View, idx_vars, strides_for_shape
from tinyedu.shape.view import box_to_interval, interval_to_box


def read(view: View, base: np.ndarray) -> np.ndarray:
    """Every element of a view, one at a time (0 where masked)."""
    out = np.zeros(view.shape, dtype=base.dtype)
    ranges = view.valid_ranges()
    for position in np.ndindex(*view.shape):
        if all(lo <= i < hi for i, (lo, hi) in zip(position, ranges, strict=True)):
            index = view.offset + sum(i * s for i, s in zip(position, view.strides, strict=True))
            out[position] = base[index]
    return out


# ---- canonical form --------------------------------------------------------------------------
def test_strides_for_shape_is_c_order_with_zero_for_size_one() -> None:
    assert strides_for_shape((2, 3, 4)) == (12, 4, 1)
    assert strides_for_shape((2, 1, 4)) == (4, 0, 1)
    assert strides_for_shape(()) == ()


def test_create_defaults_to_contiguous() -> None:
    view = View.create((2, 3))
    assert (view.shape, view.strides, view.offset, view.mask) == ((2, 3), (3, 1), 0, None)
    assert view.contiguous
    assert View.create((2, 3), (3, 1)) == view
    assert not View.create((2, 3), (1, 2)).contiguous and not View.create((2, 3), offset=1).contiguous


def test_create_canonicalizes() -> None:
    assert View.create((2, 1, 3), (3, 7, 1)).strides == (3, 0, 1)  # size-1 strides never matter
    assert View.create((2, 3), mask=((0, 2), (0, 3))).mask is None  # a mask that covers everything
    nothing = View.create((2, 3), (5, 1), 4, mask=((0, 2), (1, 1)))  # empty on axis 1: all invalid
    assert (nothing.strides, nothing.offset, nothing.mask) == ((0, 0), 0, ((0, 0), (0, 0)))
    assert nothing.all_invalid and nothing.index_bounds() is None and nothing.real_size() == 0
    empty = View.create((2, 0, 3), (9, 9, 9), 5)  # no elements at all
    assert (empty.strides, empty.offset, empty.mask, empty.contiguous) == ((0, 0, 0), 0, None, True)
    assert View.create(()).contiguous and View.create(()).size == 1


def test_create_rejects_what_cannot_be_a_view() -> None:
    with pytest.raises(ValueError, match="negative size"):
        View.create((2, -1))
    with pytest.raises(ValueError, match="2 strides"):
        View.create((2, 3, 4), (1, 1))
    with pytest.raises(ValueError, match="does not fit"):
        View.create((2, 3), mask=((0, 3), (0, 3)))


def test_index_bounds_and_real_size() -> None:
    view = View.create((3, 4), (4, 1), 2, mask=((1, 3), (0, 2)))
    assert view.index_bounds() == (6, 11) and view.real_size() == 12
    flipped = View.create((4,)).flip((0,))
    assert flipped.index_bounds() == (0, 3) and flipped.real_size() == 4


# ---- movement on one view --------------------------------------------------------------------
def test_permute() -> None:
    view = View.create((2, 3, 4), mask=((0, 1), (0, 3), (1, 4))).permute((2, 0, 1))
    assert view.shape == (4, 2, 3) and view.strides == (1, 12, 4) and view.mask == ((1, 4), (0, 1), (0, 3))


def test_expand() -> None:
    view = View.create((1, 3)).expand((4, 3))
    assert view.shape == (4, 3) and view.strides == (0, 1)
    padded = View.create((1, 2)).pad(((0, 0), (1, 0))).expand((3, 3))
    assert padded.mask == ((0, 3), (1, 3))


def test_pad_moves_offset_back_and_masks() -> None:
    view = View.create((2, 3)).pad(((1, 0), (2, 1)))
    assert view.shape == (3, 6) and view.offset == -5 and view.mask == ((1, 3), (2, 5))
    base = np.arange(1, 7)
    np.testing.assert_array_equal(read(view, base), np.pad(base.reshape(2, 3), ((1, 0), (2, 1))))


def test_shrink_moves_offset_forward_and_cuts_the_mask() -> None:
    view = View.create((4, 5)).shrink(((1, 3), (2, 5)))
    assert view.shape == (2, 3) and view.offset == 7 and view.mask is None
    padded = View.create((3,)).pad(((2, 2),))
    assert padded.shrink(((1, 4),)).mask == ((1, 3),)
    assert padded.shrink(((0, 2),)).all_invalid  # only padding left


def test_stride_and_flip() -> None:
    base = np.arange(1, 8)
    for k in (1, 2, 3, -1, -2, -3, 7, -7):
        view = View.create((7,)).stride((k,))
        np.testing.assert_array_equal(read(view, base), base[::k])
    padded = View.create((4,)).pad(((2, 1),))  # 0 0 1 2 3 4 0
    for k in (2, 3, -2, -3):
        np.testing.assert_array_equal(read(padded.stride((k,)), base), np.pad(base[:4], (2, 1))[::k])
    flipped = View.create((2, 3)).flip((1,))
    assert flipped.strides == (3, -1) and flipped.offset == 2


@pytest.mark.parametrize("shape, new_shape, strides", [
    ((2, 3, 4), (6, 4), (4, 1)),
    ((2, 3, 4), (2, 12), (12, 1)),
    ((2, 3, 4), (2, 3, 2, 2), (12, 4, 2, 1)),
    ((2, 3, 4), (1, 2, 1, 12, 1), (0, 12, 0, 1, 0)),
])
def test_reshape_of_contiguous_is_contiguous(shape, new_shape, strides) -> None:
    view = View.create(shape).reshape(new_shape)
    assert view is not None and view.strides == strides and view.contiguous


def test_reshape_splits_and_merges_strided_axes() -> None:
    permuted = View.create((4, 6)).permute((1, 0))  # shape (6, 4), strides (1, 6)
    assert permuted.reshape((2, 3, 4)).strides == (3, 1, 6)  # split an axis: fine
    assert permuted.reshape((24,)) is None  # merge across the transposed axes: not one view
    assert View.create((4, 6)).flip((0,)).reshape((2, 2, 6)).strides == (-12, -6, 1)
    expanded = View.create((1, 3)).expand((4, 3))  # strides (0, 1)
    assert expanded.reshape((2, 2, 3)).strides == (0, 0, 1)
    assert expanded.reshape((12,)) is None


def test_reshape_with_masks() -> None:
    rows = View.create((2, 3)).pad(((1, 1), (0, 0)))  # valid rows 1..2 of 4: one flat range
    merged = rows.reshape((12,))
    assert merged is not None and merged.mask == ((3, 9),) and merged.offset == -3
    columns = View.create((2, 3)).pad(((0, 0), (0, 1)))  # valid columns 0..2 of each row of 4
    assert columns.reshape((8,)) is None
    assert columns.reshape((2, 2, 2)) is None  # [0, 3) of each row is not a box of (2, 2)
    split = View.create((4,)).pad(((2, 0),)).reshape((3, 2))  # valid 2..5 = rows 1..2
    assert split is not None and split.mask == ((1, 3), (0, 2))
    base = np.arange(1, 5)
    np.testing.assert_array_equal(read(split, base), np.pad(base, (2, 0)).reshape(3, 2))
    nothing = View.create((2,)).pad(((0, 0),)).shrink(((1, 1),)).pad(((1, 2),))
    assert nothing.all_invalid and nothing.reshape((3, 1)).all_invalid
    assert View.create((0, 3)).reshape((3, 0, 5)) == View.create((3, 0, 5))


# ---- expressions -----------------------------------------------------------------------------
def test_expr_idxs_and_expr_valid() -> None:
    view = View.create((3, 4)).pad(((1, 0), (0, 0)))
    i, j = idx_vars(view.shape)
    assert view.expr_idxs([i, j]).render() == "((idx0*4)+idx1+-4)"
    assert view.expr_valid([i, j]).render() == "(idx0>0)"
    assert view.expr_idxs([2, 1]) == NumNode(5) and view.expr_valid([0, 1]) == NumNode(0)
    assert View.create((3, 4)).expr_valid([i, j]) == NumNode(1)
    with pytest.raises(ValueError, match="2 axes"):
        view.expr_idxs([i])


def test_expr_on_size_one_axes_drops_them() -> None:
    view = View.create((1, 5)).expand((1, 5))
    assert view.expr_idxs([Variable("a", 0, 0), Variable("b", 0, 4)]).render() == "b"


# ---- boxes and flat ranges (used by reshape with masks) --------------------------------------
def flat_indices(sizes: tuple[int, ...], box: list[tuple[int, int]]) -> list[int]:
    ranges = [range(lo, hi) for lo, hi in box]
    return sorted(np.ravel_multi_index(p, sizes) for p in itertools.product(*ranges)) if sizes else [0]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=3).flatmap(
    lambda sizes: st.tuples(st.just(tuple(sizes)), st.tuples(*[
        st.integers(0, s - 1).flatmap(lambda lo, s=s: st.tuples(st.just(lo), st.integers(lo + 1, s)))
        for s in sizes]))))
def test_box_to_interval_and_back(case) -> None:
    sizes, box = case
    indices = flat_indices(sizes, list(box))
    interval = box_to_interval(sizes, list(box))
    is_range = indices == list(range(indices[0], indices[-1] + 1))
    assert (interval is not None) == is_range
    if interval is not None:
        assert interval == (indices[0], indices[-1] + 1)
        assert interval_to_box(*interval, sizes) == list(box)
    for start, end in [(0, prod(sizes)), (indices[0], indices[-1] + 1)]:
        back = interval_to_box(start, end, sizes)
        if back is not None:
            assert flat_indices(sizes, back) == list(range(start, end))
