"""ShapeTracker against numpy: random movement-op sequences must read the same elements.

The base buffer holds 1..n, so a 0 in a result can only come from padding. Every tracker is read
two independent ways: (a) evaluating `expr_idxs` over numpy index grids, and (b) a plain
per-element Python loop over the views. Both must match numpy applying the same moves.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tinyedu.core.helpers import prod
from tinyedu.shape import NumNode, ShapeTracker, View, given_valid, idx_vars

MAX_SIZE = 1500
FUZZ_EXAMPLES = int(os.environ.get("SHAPE_FUZZ_EXAMPLES", "400"))  # raise it for a long hunt
MOVES = ["reshape", "permute", "expand", "pad", "shrink", "stride", "flip"]
# Reshape after a permute/flip/stride/pad is where a second view appears, so draw it most often.
WEIGHTED_MOVES = MOVES + ["reshape"] * 4 + ["permute", "pad", "stride"]


# ---- two ways of reading a buffer through a tracker ------------------------------------------
def gather_symbolic(tracker: ShapeTracker, base: np.ndarray) -> np.ndarray:
    """(a) Evaluate the index and validity expressions over every position at once."""
    variables = idx_vars(tracker.shape)
    index, valid = tracker.expr_idxs(variables)
    grids = np.indices(tracker.shape, dtype=np.int64)
    env = {v: grids[axis] for axis, v in enumerate(variables)}  # Variables as keys
    index = np.broadcast_to(index.eval(env), tracker.shape)
    valid = np.broadcast_to(valid.eval(env), tracker.shape).astype(bool)
    assert np.all((index[valid] >= 0) & (index[valid] < base.size)), "a valid element reads outside"
    if base.size == 0:
        return np.zeros(tracker.shape, dtype=base.dtype)
    return np.where(valid, base[np.where(valid, index, 0)], 0)


def gather_loop(tracker: ShapeTracker, base: np.ndarray) -> np.ndarray:
    """(b) One element at a time, walking the views from the top (what you see) down to memory."""
    out = np.zeros(tracker.shape, dtype=base.dtype)
    for position in np.ndindex(*tracker.shape):
        idx, valid = list(position), True
        for k in reversed(range(len(tracker.views))):
            view = tracker.views[k]
            ranges = view.mask if view.mask is not None else [(0, size) for size in view.shape]
            if not all(lo <= i < hi for i, (lo, hi) in zip(idx, ranges, strict=True)):
                valid = False
                break
            flat = view.offset + sum(i * s for i, s in zip(idx, view.strides, strict=True))
            if k > 0:  # split the flat position into the axes of the view below (C order)
                idx = []
                for size in reversed(tracker.views[k - 1].shape):
                    flat, digit = divmod(flat, size)
                    idx.insert(0, digit)
        if valid:
            out[position] = base[flat]
    return out


# ---- the same moves in numpy ---------------------------------------------------------------
def numpy_move(a: np.ndarray, op: str, arg) -> np.ndarray:
    if op == "reshape":
        return a.reshape(arg)
    if op == "permute":
        return a.transpose(arg)
    if op == "expand":
        return np.broadcast_to(a, arg)
    if op == "pad":
        return np.pad(a, arg) if a.ndim else a
    if op == "shrink":
        return a[tuple(slice(start, end) for start, end in arg)]
    if op == "stride":
        return a[tuple(slice(None, None, k) for k in arg)]
    if op == "flip":
        axes = {axis % a.ndim for axis in arg}
        return a[tuple(slice(None, None, -1) if axis in axes else slice(None) for axis in range(a.ndim))]
    raise AssertionError(op)


def prime_factors(n: int) -> list[int]:
    factors, p = [], 2
    while n > 1:
        while n % p == 0:
            factors.append(p)
            n //= p
        p += 1
    return factors


def draw_move_arg(data: st.DataObject, op: str, shape: tuple[int, ...]):
    """A valid random argument for `op` on `shape`, or None to skip (would grow too big)."""
    ndim, n = len(shape), prod(shape)
    if op == "reshape":
        if n == 0:
            dims = data.draw(st.lists(st.integers(0, 4), min_size=1, max_size=4))
            dims[data.draw(st.integers(0, len(dims) - 1))] = 0
            return tuple(dims)
        factors = prime_factors(n)
        dims = [1] * data.draw(st.integers(1 if factors else 0, 4))
        for f in factors:
            dims[data.draw(st.integers(0, len(dims) - 1))] *= f
        return tuple(dims)
    if op == "permute":
        return tuple(data.draw(st.permutations(range(ndim))))
    if op == "expand":
        new = tuple(data.draw(st.integers(0, 4)) if s == 1 else s for s in shape)
        return new if prod(new) <= MAX_SIZE else None
    if op == "pad":
        arg = tuple((data.draw(st.integers(0, 2)), data.draw(st.integers(0, 2))) for _ in shape)
        return arg if prod(s + a + b for s, (a, b) in zip(shape, arg, strict=True)) <= MAX_SIZE else None
    if op == "shrink":
        arg = []
        for s in shape:
            start = data.draw(st.integers(0, s))
            arg.append((start, data.draw(st.integers(start, s))))
        return tuple(arg)
    if op == "stride":
        return tuple(data.draw(st.sampled_from([1, 1, 2, 3, -1, -1, -2, -3])) for _ in shape)
    if op == "flip":
        if ndim == 0:
            return ()
        axes = data.draw(st.lists(st.integers(0, ndim - 1), unique=True, max_size=ndim))
        return tuple(a - ndim if data.draw(st.booleans()) else a for a in axes)  # some negative axes
    raise AssertionError(op)


sizes = st.sampled_from([0] + [1] * 3 + [2, 3, 4] * 6)  # size-0 and size-1 axes, but not too often
shapes = st.lists(sizes, min_size=0, max_size=4).map(tuple)


def check_tracker(tracker: ShapeTracker, expected: np.ndarray, base: np.ndarray) -> None:
    assert tracker.shape == expected.shape
    np.testing.assert_array_equal(gather_symbolic(tracker, base), expected)
    np.testing.assert_array_equal(gather_loop(tracker, base), expected)
    # max_index: inside the buffer, and at least the largest index a valid element reads
    index, valid = tracker.index_arrays()
    assert tracker.max_index() < base.size
    assert tracker.base_size() == tracker.max_index() + 1
    if valid.any():
        assert tracker.max_index() >= index[valid].max()
    # real_strides: along an axis with a real stride, the index moves by exactly that stride
    for axis, stride in enumerate(tracker.real_strides()):
        if stride is not None and tracker.shape[axis] > 1 and tracker.size > 0:
            assert np.all(np.diff(index, axis=axis) == stride)
    # the flat-index variant reads the same elements in C order
    flat_index, flat_valid = tracker.expr_node()
    if tracker.size:
        positions = np.arange(tracker.size)
        got_index = np.broadcast_to(flat_index.eval({"idx": positions}), (tracker.size,))
        got_valid = np.broadcast_to(flat_valid.eval({"idx": positions}), (tracker.size,)).astype(bool)
        np.testing.assert_array_equal(got_valid, valid.reshape(-1))
        np.testing.assert_array_equal(got_index[got_valid], index.reshape(-1)[got_valid])
    if tracker.contiguous:
        np.testing.assert_array_equal(expected.reshape(-1), base[: tracker.size])
    # given_valid: the index simplified for the valid positions (what a kernel's gated load computes)
    if valid.any():
        variables = idx_vars(tracker.shape)
        index_node, valid_node = tracker.expr_idxs(variables)
        grids = np.indices(tracker.shape, dtype=np.int64)
        at_valid = {v: grids[axis][valid] for axis, v in enumerate(variables)}
        simplified = given_valid(index_node, valid_node).eval(at_valid)
        np.testing.assert_array_equal(np.broadcast_to(simplified, index[valid].shape), index[valid])


@settings(max_examples=FUZZ_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_random_moves_match_numpy(data: st.DataObject) -> None:
    shape = data.draw(shapes, label="shape")
    base = np.arange(1, prod(shape) + 1, dtype=np.int64)
    expected, tracker = base.reshape(shape), ShapeTracker.from_shape(shape)
    check_tracker(tracker, expected, base)
    for _ in range(data.draw(st.integers(1, 8), label="number of moves")):
        op = data.draw(st.sampled_from(WEIGHTED_MOVES), label="op")
        arg = draw_move_arg(data, op, tracker.shape)
        if arg is None:
            continue
        tracker, expected = getattr(tracker, op)(arg), numpy_move(expected, op, arg)
        check_tracker(tracker, expected, base)
        event(f"{len(tracker.views)} view(s)")
        event("masked" if any(v.mask is not None for v in tracker.views) else "no mask")
        # simplify() changes how the tracker is written, never what it reads
        np.testing.assert_array_equal(gather_loop(tracker.simplify(), base), expected)


# ---- specific behaviour ----------------------------------------------------------------------
def test_movement_ops_never_copy() -> None:
    # A billion elements: only the View numbers change, so every op is instant and tiny.
    tracker = ShapeTracker.from_shape((1000, 1000, 1000))
    moved = (tracker.permute((2, 0, 1)).shrink(((0, 10), (5, 10), (0, 1000))).flip((1,))
             .pad(((1, 1), (0, 0), (2, 0))).stride((1, 2, 3)).reshape((12, 3, 334)))
    for t in (tracker, moved):
        assert all(isinstance(v, View) for v in t.views)
        for v in t.views:
            assert all(isinstance(x, (int, tuple, bool, type(None))) for x in vars(v).values())
    assert tracker == ShapeTracker.from_shape((1000, 1000, 1000))  # the original is untouched


def test_contiguous_reshape_stays_one_view() -> None:
    tracker = ShapeTracker.from_shape((2, 3, 4))
    for new_shape in [(24,), (4, 6), (2, 12), (1, 24, 1), (2, 3, 2, 2), (6, 4)]:
        reshaped = tracker.reshape(new_shape)
        assert reshaped.views == (View.create(new_shape),) and reshaped.contiguous


def test_permute_then_reshape_needs_two_views() -> None:
    base = np.arange(1, 7)
    tracker = ShapeTracker.from_shape((2, 3)).permute((1, 0)).reshape((6,))
    assert len(tracker.views) == 2
    expected = base.reshape(2, 3).T.reshape(6)
    np.testing.assert_array_equal(gather_symbolic(tracker, base), expected)
    np.testing.assert_array_equal(gather_loop(tracker, base), expected)
    index, valid = tracker.expr_idxs()
    assert index.render() == "((idx0/2)+((idx0%2)*3))" and valid == NumNode(1)
    assert tracker.real_strides() == (None,)
    # reshaping back collapses the stack to the single permuted view again
    back = tracker.reshape((3, 2))
    assert len(back.views) == 1 and back.views[0].strides == (1, 3)


def test_real_strides_none_where_an_axis_is_also_inside_a_division() -> None:
    """Found by test_random_moves_match_numpy: the index is (...(idx0*6+idx1*3)//4*4) + (...)%2 +
    idx1*2, so idx1 has no single stride (it moves the index by 3, then 5); the plain idx1*2 term
    must not hide the others."""
    t = ShapeTracker.from_shape((3, 4)).reshape((3, 2, 2)).permute((0, 2, 1)).reshape((12,))
    t = t.stride((3,)).reshape((2, 2))
    index, _ = t.index_arrays()
    assert np.diff(index, axis=1).ravel().tolist() == [3, 5]
    assert t.real_strides() == (None, None)


def test_expr_idxs_convention() -> None:
    tracker = ShapeTracker.from_shape((4, 5)).shrink(((1, 3), (0, 5))).pad(((0, 0), (1, 0)))
    index, valid = tracker.expr_idxs()
    assert index.render() == "((idx0*5)+idx1+4)"
    assert valid.render() == "(idx1>0)"  # the left padding column is invalid
    index, valid = tracker.expr_idxs([NumNode(1), 3])
    assert (index, valid) == (NumNode(12), NumNode(1))
    assert tracker.real_strides() == (5, None) and tracker.real_strides(ignore_valid=True) == (5, 1)
    assert tracker.max_index() == 14 and tracker.base_size() == 15


def test_zero_d_and_size_zero() -> None:
    scalar = ShapeTracker.from_shape(())
    assert scalar.shape == () and scalar.size == 1 and scalar.contiguous
    assert scalar.expr_idxs() == (NumNode(0), NumNode(1))
    assert scalar.reshape((1, 1)).expand((3, 2)).views[0].strides == (0, 0)
    empty = ShapeTracker.from_shape((2, 0, 3))
    assert empty.size == 0 and empty.max_index() == -1 and empty.base_size() == 0
    assert empty.expr_idxs() == (NumNode(0), NumNode(1))  # no position, so no mask to check
    padded = empty.pad(((0, 0), (1, 1), (0, 0)))
    assert padded.shape == (2, 2, 3) and padded.base_size() == 0
    np.testing.assert_array_equal(gather_loop(padded, np.zeros(0, dtype=np.int64)), np.zeros((2, 2, 3)))


def test_str_shows_the_views() -> None:
    tracker = ShapeTracker.from_shape((2, 3)).permute((1, 0)).reshape((6,))
    text = str(tracker)
    assert "\n" not in text and "strides=(1, 3)" in text and "shape=(6,)" in text
    described = tracker.describe()
    assert "views[0]" in described and "reads the memory" in described and "what you see" in described


# ---- invalid arguments -----------------------------------------------------------------------
@pytest.mark.parametrize("op, arg, error, words", [
    ("reshape", (4, 2), ValueError,
     "reshape: cannot reshape shape (2, 3) (6 elements) to (4, 2) (8 elements); "
     "the number of elements must match"),
    ("reshape", (-1, 3), ValueError, "negative"),
    ("reshape", (2.0, 3), ValueError, "must contain ints"),
    ("permute", (0, 0), ValueError, "repeats an axis"),
    ("permute", (0, 2), IndexError, "is out of range for shape (2, 3); valid axes are 0..1"),
    ("permute", (0,), ValueError, "has 1 axes but shape (2, 3) has 2"),
    ("expand", (4, 3), ValueError, "only size-1 axes can be expanded"),
    ("pad", ((1, -1), (0, 0)), ValueError, "pad amounts must be >= 0"),
    ("pad", ((1, 1),), ValueError, "one (a, b) pair per axis"),
    ("shrink", ((0, 3), (0, 3)), ValueError, "0 <= start <= end <= size"),
    ("shrink", ((1, 0), (0, 3)), ValueError, "0 <= start <= end <= size"),
    ("stride", (1, 0), ValueError, "steps must be non-zero"),
    ("flip", (2,), IndexError, "valid axes are -2..1"),
    ("flip", (1, -1), ValueError, "same axis twice"),
])
def test_errors_name_the_op_and_the_fix(op: str, arg, error: type, words: str) -> None:
    with pytest.raises(error) as info:
        getattr(ShapeTracker.from_shape((2, 3)), op)(arg)
    assert str(info.value).startswith(op + ":") and words in str(info.value)


junk = st.one_of(
    st.integers(-3, 6), st.floats(allow_nan=False, allow_infinity=False), st.none(), st.text(max_size=2),
    st.lists(st.integers(-3, 6), max_size=4).map(tuple),
)
junk_args = st.one_of(
    st.lists(st.one_of(st.integers(-3, 6), st.floats(-2, 5)), max_size=4).map(tuple),
    st.lists(st.tuples(st.integers(-3, 6), st.integers(-3, 6)), max_size=4).map(tuple),
    st.lists(junk, max_size=4).map(tuple), junk,
)


@settings(max_examples=300, deadline=None)
@given(shapes, st.sampled_from(MOVES), junk_args)
def test_invalid_args_only_raise_value_or_index_errors(shape, op, arg) -> None:
    tracker = ShapeTracker.from_shape(shape)
    try:
        result = getattr(tracker, op)(arg)
    except (ValueError, IndexError) as e:
        assert str(e).startswith(op + ":"), str(e)
    else:
        assert isinstance(result, ShapeTracker)


def test_from_shape_rejects_bad_shapes() -> None:
    with pytest.raises(ValueError, match="ShapeTracker.from_shape"):
        ShapeTracker.from_shape((2, -1))
    with pytest.raises(ValueError, match="ShapeTracker.from_shape"):
        ShapeTracker.from_shape(3)


@pytest.mark.parametrize("n, count, step", [(28, 3, 1), (9, 3, 2), (13, 5, 1), (7, 2, 3)])
def test_sliding_windows_merge_into_one_view(n: int, count: int, step: int) -> None:
    """The windows of a convolution (Tensor._windows: repeat, lay end to end, pad, cut into rows
    `step` longer) read element p + i*step at (i, p): one view with strides (step, 1), which the
    simplifier finds once it splits `p + i*(n+step)` as `i*n + (p + i*step)` for `// n` and `% n`."""
    keep = n - (count - 1) * step
    tracker = (ShapeTracker.from_shape((n,)).reshape((1, n)).expand((count, n)).reshape((count * n,))
               .pad(((0, count * step),)).reshape((count, n + step)).shrink(((0, count), (0, keep))))
    assert len(tracker.views) == 1 and tracker.views[0].strides == (step, 1)
    base = np.arange(1, n + 1)
    expected = np.stack([base[i * step:i * step + keep] for i in range(count)])
    np.testing.assert_array_equal(gather_symbolic(tracker, base), expected)
    np.testing.assert_array_equal(gather_loop(tracker, base), expected)
