"""Indexing, movement and pooling ops PyTorch users reach for: roll, repeat_interleave, meshgrid,
pad's modes, masked_select, scatter, scatter_reduce, interpolate, max_pool2d(return_indices=True),
max_unpool2d and tuples inside an index. Forward and backward against PyTorch with tests/test_ops.py's
helper (on every device; NEON and LLVM run the cases marked `backends`), at float32's edge values
(0, -0.0 with its sign, +-inf, NaN, ties), and the errors bad arguments give.

Plain `scatter` with two indices naming one place has no defined result in PyTorch (it depends on
the order of the writes), so it is compared only with unique indices; `scatter_reduce`, whose
result is defined, is compared with duplicates.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

from tests import test_ops
from tests.test_ops import backends, device  # noqa: F401 - device: the autouse fixture
from tinyedu import Tensor

try:
    import torch
    import torch.nn.functional as F

    from tests.torch_edges import check_edges
except ImportError:  # helper_test_op still checks against numerical gradients
    torch = F = check_edges = None


def helper_test_op(*args: Any, **kwargs: Any) -> list[np.ndarray]:
    """tests/test_ops.py's helper; with PyTorch as the oracle for the gradients, finite differences
    are left to test_ops.py's own tests (and used here only without PyTorch), to keep this file fast."""
    return test_ops.helper_test_op(*args, numerical=torch is None, **kwargs)

needs_torch = pytest.mark.skipif(torch is None, reason="compares with PyTorch")
INF, NAN = float("inf"), float("nan")
# 0, -0.0, the infinities, NaN, ties (7, 7), a large and a small value
EDGES = np.array([0.0, -0.0, INF, -INF, NAN, 1.5, -2.25, 3e4, -1e-4, 7.0, 7.0, 2.0], np.float32)


def _edges(shape: tuple[int, ...]) -> np.ndarray:
    return np.resize(EDGES, shape).astype(np.float32)


def _check_edges_signed(torch_fn: Callable, tinyedu_fn: Callable, array: np.ndarray, grad: bool = True,
                        signed: bool = True) -> None:
    """check_edges (NaN and inf where torch has them, the rest close, forward and backward), and the
    sign of every zero the same as torch's (assert_allclose takes -0.0 for 0.0)."""
    check_edges(torch_fn, tinyedu_fn, [array], grad=grad)
    if not signed:
        return
    ours = tinyedu_fn(Tensor(array))
    theirs = torch_fn(torch.tensor(array))
    for a, b in zip(*(o if isinstance(o, tuple) else (o,) for o in (ours, theirs)), strict=True):
        a, b = a.numpy(), b.numpy()
        if a.dtype.kind == "f":
            zeros = (a == 0) & (b == 0)
            np.testing.assert_array_equal(np.signbit(a[zeros]), np.signbit(b[zeros]), err_msg="sign of zero")


def _both(index: Any, which: Any) -> Any:
    """An index array as the framework of `which` wants it."""
    index = np.asarray(index)
    return Tensor(index.astype(np.int32)) if isinstance(which, Tensor) else torch.tensor(index)


# ---- roll ----
ROLL = [((3, 4), 1, 0), ((3, 4), -5, 1), ((3, 4), (1, -7), (0, 1)), ((3, 4), 7, None), ((2, 1, 3), 4, -1),
        ((3, 4), (2, 2), (1, 1)), ((), 3, None), ((5,), 0, 0), ((0, 2), 1, 0)]


@pytest.mark.parametrize("shape, shifts, dims", ROLL, ids=str)
@backends(shifts=[(1, -7)])
def test_roll(shape: tuple, shifts: Any, dims: Any) -> None:
    helper_test_op([shape], lambda x: x.roll(shifts, dims))


# ---- repeat_interleave ----
@pytest.mark.parametrize("repeats, dim", [(2, 0), (3, -1), (1, 1), (0, 0), (2, None), ([1, 0, 2], 0),
                                          ([2], 1), ([3, 1, 0, 2], 1), ([1, 2, 0, 1, 1, 2], None)], ids=str)
@backends(dim=[None])
def test_repeat_interleave(repeats: Any, dim: Any) -> None:
    def fn(x: Any) -> Any:
        return x.repeat_interleave(repeats if isinstance(repeats, int) else _both(repeats, x), dim)

    helper_test_op([(2, 4) if repeats == [3, 1, 0, 2] else (3, 2)], fn)


# ---- meshgrid ----
@pytest.mark.parametrize("shapes", [((3,), (2,)), ((2,), (1,), (3,)), ((4,),), ((), (2,))], ids=str)
@pytest.mark.parametrize("indexing", ["ij", "xy"])
@backends(indexing=["xy"], shapes=[((2,), (1,), (3,))])
def test_meshgrid(shapes: tuple, indexing: str) -> None:
    helper_test_op(shapes, lambda *xs: torch.meshgrid(*xs, indexing=indexing),
                   lambda *xs: Tensor.meshgrid(*xs, indexing=indexing))
    helper_test_op(shapes, lambda *xs: torch.meshgrid(list(xs), indexing=indexing),
                   lambda *xs: xs[0].meshgrid(*xs[1:], indexing=indexing))


# ---- pad's modes ----
PAD = [((2, 5), (2, 3)), ((2, 5), (-1, 3)), ((1, 3, 4), (1, 2, 2, 0)), ((1, 1, 2, 3, 3), (1, 1, 0, 2, 1, 0)),
       ((2, 3), (0, 2))]


@pytest.mark.parametrize("shape, padding", PAD, ids=str)
@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
@backends(shape=[(1, 3, 4)])
def test_pad_modes(shape: tuple, padding: tuple, mode: str) -> None:
    helper_test_op([shape], lambda x: F.pad(x, padding, mode=mode), lambda x: x.pad(padding, mode=mode))


def test_pad_positional_constant_and_pairs() -> None:
    helper_test_op([(2, 4)], lambda x: F.pad(x, (0, 0)), lambda x: x.pad((0, 0), "circular"))
    helper_test_op([(2, 4)], lambda x: F.pad(x, (2, 1), "reflect"), lambda x: x.pad((2, 1), "reflect"))
    helper_test_op([(2, 3)], lambda x: F.pad(x, (1, 2), "constant", 1.5),
                   lambda x: x.pad((1, 2), "constant", 1.5))
    helper_test_op([(1, 3, 4)], lambda x: F.pad(x, (1, 2, 2, 1), mode="reflect"),
                   lambda x: x.pad(((0, 0), (2, 1), (1, 2)), mode="reflect"))


# ---- masked_select ----
MASKS = [(np.array([[1, 0, 1, 1], [0, 0, 1, 0], [1, 1, 1, 1]]), (3, 4)), (np.array([1, 0, 0, 1]), (3, 4)),
         (np.array([[1], [0], [1]]), (3, 4)), (np.zeros((3, 4)), (3, 4)), (np.ones((2, 3, 1)), (3, 4))]


@pytest.mark.parametrize("mask, shape", MASKS, ids=lambda m: str(np.asarray(m).tolist()))
@backends(shape=[(3, 4)])
def test_masked_select(mask: np.ndarray, shape: tuple) -> None:
    def fn(x: Any) -> Any:
        m = mask.astype(bool)
        return x.masked_select(Tensor(m) if isinstance(x, Tensor) else torch.tensor(m))

    helper_test_op([shape], fn)


# ---- scatter ----
SCATTER = [(0, [[0, 1, 2]], (4, 3)), (1, [[2, 0], [1, 2], [0, 1], [2, 1]], (4, 3)),
           (-1, [[1], [0], [2], [0]], (4, 3)),
           (0, [[3, 0, 1], [1, 2, 0]], (4, 3)), (1, np.zeros((2, 0), int), (4, 3))]


@pytest.mark.parametrize("dim, index, shape", SCATTER, ids=str)
@backends(dim=[1])
def test_scatter(dim: int, index: Any, shape: tuple) -> None:
    """Unique indices only: with duplicates torch's result is unspecified (the module docstring)."""
    index = np.asarray(index)
    helper_test_op([shape, index.shape], lambda x, s: x.scatter(dim, _both(index, x), s))
    # a src larger than index (torch's gradient of such a src fails, so forward only)
    bigger = tuple(i + 1 for i in index.shape)
    helper_test_op([shape, bigger], lambda x, s: x.scatter(dim, _both(index, x), s), grad=False)
    # torch has no gradient for scatter with a number: compare with a src tensor holding it
    def full(x: Any, v: float) -> Any:
        return torch.full(index.shape, v, dtype=x.dtype)

    helper_test_op([shape], lambda x: x.scatter(dim, _both(index, x), full(x, -2.5)),
                   lambda x: x.scatter(dim, _both(index, x), -2.5))
    helper_test_op([shape], lambda x: x.scatter(dim, _both(index, x), full(x, 0.5)),
                   lambda x: x.scatter(dim, _both(index, x), value=0.5))


REDUCES = ["sum", "prod", "mean", "amax", "amin"]


@pytest.mark.parametrize("reduce", REDUCES)
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("dim, index", [(0, [[0, 0, 3], [3, 1, 3], [0, 0, 3]]),
                                        (1, [[1, 1], [0, 2], [2, 2], [1, 0]])], ids=str)
@backends(dim=[1], include_self=[False])
def test_scatter_reduce(reduce: str, include_self: bool, dim: int, index: list) -> None:
    """Duplicate indices: every value sent to a place takes part; places nobody names keep self."""
    index = np.asarray(index)
    helper_test_op([(4, 3), (3, 3) if dim == 0 else (4, 2)],
                   lambda x, s: x.scatter_reduce(dim, _both(index, x), s, reduce, include_self=include_self),
                   low=0.5, high=2.0)


@pytest.mark.parametrize("reduce", REDUCES)
def test_scatter_reduce_empty_index(reduce: str) -> None:
    """Nothing is sent: self comes back (even for amax, whose reduction over no values is undefined)."""
    empty = np.zeros((3, 0), int)
    helper_test_op([(3, 4), (3, 0)], lambda x, s: x.scatter_reduce(1, _both(empty, x), s, reduce,
                                                                    include_self=False))


def test_scatter_legacy_reduce_and_0d() -> None:
    index = np.array([[0, 0, 1]])
    # torch has no gradient for scatter(reduce=): compare with scatter_reduce, which means the same
    helper_test_op([(2, 3), (1, 3)], lambda x, s: x.scatter_reduce(0, _both(index, x), s, "sum"),
                   lambda x, s: x.scatter(0, _both(index, x), s, reduce="add"))
    helper_test_op([(2, 3), (1, 3)], lambda x, s: x.scatter_reduce(0, _both(index, x), s, "prod"),
                   lambda x, s: x.scatter(0, _both(index, x), s, reduce="multiply"))
    helper_test_op([(), ()], lambda x, s: x.scatter(0, _both(0, x), s))
    helper_test_op([(), ()], lambda x, s: x.scatter_reduce(0, _both(0, x), s, "amax"))


@needs_torch
def test_scatter_reduce_integers() -> None:
    x, src, index = np.array([[5, -3, 7]]), np.array([[-8, 4, 9], [1, 2, -4]]), np.zeros((2, 3), int)
    for reduce in REDUCES:
        for include_self in (True, False):
            ours = Tensor(x.astype(np.int32)).scatter_reduce(0, Tensor(index.astype(np.int32)),
                                                              Tensor(src.astype(np.int32)), reduce,
                                                              include_self=include_self)
            theirs = torch.tensor(x).scatter_reduce(0, torch.tensor(index), torch.tensor(src), reduce,
                                                    include_self=include_self)
            assert ours.tolist() == theirs.tolist(), (reduce, include_self)


# ---- pooling with indices, and unpooling ----
POOL = [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
        dict(kernel_size=(2, 3), stride=1, dilation=(2, 1)),
        dict(kernel_size=2, ceil_mode=True), dict(kernel_size=(1, 3), stride=(2, 1), padding=(0, 1))]


@pytest.mark.parametrize("kwargs", POOL, ids=str)
@backends(kwargs=[POOL[1]])
def test_max_pool2d_indices(kwargs: dict) -> None:
    helper_test_op([(2, 3, 5, 7)], lambda x: F.max_pool2d(x, **kwargs, return_indices=True),
                   lambda x: x.max_pool2d(**kwargs, return_indices=True))
    helper_test_op([(3, 5, 6)], lambda x: F.max_pool2d(x, **kwargs, return_indices=True),
                   lambda x: x.max_pool2d(**kwargs, return_indices=True), layout="flipped")


def test_max_pool_indices_1d_3d_and_integers() -> None:
    helper_test_op([(2, 7)], lambda x: F.max_pool1d(x, 3, 2, 1, return_indices=True),
                   lambda x: x.max_pool1d(3, 2, 1, return_indices=True))
    helper_test_op([(1, 1, 3, 4, 5)], lambda x: F.max_pool3d(x, 2, return_indices=True),
                   lambda x: x.max_pool3d(2, return_indices=True))

    def pool_unpool_1d(x: Any) -> Any:
        pool, unpool = (F.max_pool1d, F.max_unpool1d) if not isinstance(x, Tensor) else \
            (Tensor.max_pool1d, Tensor.max_unpool1d)
        return unpool(*pool(x, 2, return_indices=True), 2, output_size=(7,))

    helper_test_op([(2, 2, 7)], pool_unpool_1d)
    values, indices = Tensor([[[3, 9, 9, 1]]]).max_pool1d(2, return_indices=True)
    assert values.tolist() == [[[9, 9]]] and indices.tolist() == [[[1, 2]]]  # the first of a tie
    assert values.dtype == Tensor([1]).dtype


UNPOOL = [((2, 2, 4, 6), 2, None, 0, None), ((1, 2, 5, 7), 2, None, 0, (5, 7)), ((1, 1, 5, 5), 3, 2, 1, None),
          ((2, 5, 6), (2, 3), (2, 3), 0, (1, 2, 5, 7)), ((1, 1, 6, 4), 3, 1, 0, None)]


@pytest.mark.parametrize("shape, kernel, stride, padding, output_size", UNPOOL, ids=str)
@backends(kernel=[3])
def test_max_unpool2d(shape: tuple, kernel: Any, stride: Any, padding: int, output_size: Any) -> None:
    """Pool, then unpool to the pooled input's size: the maxima go back to their places, zeros elsewhere
    (the last case's windows overlap, so one place is named twice, always with the same value)."""
    def fn(x: Any) -> Any:
        pool, unpool = (F.max_pool2d, F.max_unpool2d) if not isinstance(x, Tensor) else \
            (Tensor.max_pool2d, Tensor.max_unpool2d)
        values, indices = pool(x, kernel, stride, padding, return_indices=True)
        return unpool(values, indices, kernel, stride, padding, output_size=output_size)

    # where windows overlap (kernel > stride), torch gives every copy of a place the whole gradient and
    # tinyedu only the one kept (the numerics page): gradients are compared where windows do not overlap
    kernels, strides = np.broadcast_to(kernel, 2), np.broadcast_to(stride or kernel, 2)
    overlap = bool((kernels > strides).any())
    helper_test_op([shape], fn, grad=not overlap)


# ---- interpolate ----
INTERPOLATE = [((1, 2, 5), dict(size=8)), ((1, 2, 5), dict(scale_factor=1.7)),
               ((2, 1, 4, 3), dict(size=(7, 2))),
               ((1, 1, 2, 3, 2), dict(scale_factor=2)),
               ((1, 2, 5), dict(size=8, mode="linear")),
               ((1, 2, 5), dict(size=3, mode="linear", align_corners=True)),
               ((1, 1, 6), dict(scale_factor=0.6, mode="linear")), ((1, 1, 1), dict(size=3, mode="linear")),
               ((2, 1, 4, 3), dict(size=(5, 7), mode="bilinear")),
               ((2, 1, 4, 3), dict(scale_factor=(1.5, 0.7), mode="bilinear", align_corners=True)),
               ((1, 2, 5, 4), dict(size=(2, 3), mode="bilinear", align_corners=False)),
               ((1, 1, 3, 3), dict(size=(1, 5), mode="bilinear", align_corners=True)),
               ((1, 1, 5), dict(scale_factor=1.3, mode="linear", recompute_scale_factor=True))]


@pytest.mark.parametrize("shape, kwargs", INTERPOLATE, ids=str)
@backends(kwargs=[INTERPOLATE[1][1], INTERPOLATE[8][1]])
def test_interpolate(shape: tuple, kwargs: dict) -> None:
    helper_test_op([shape], lambda x: F.interpolate(x, **kwargs), lambda x: x.interpolate(**kwargs))


@needs_torch
def test_interpolate_nearest_keeps_integers() -> None:
    x = np.arange(10, dtype=np.int32).reshape(1, 2, 5)
    ours = Tensor(x).interpolate(size=7)
    assert ours.dtype == Tensor(x).dtype
    np.testing.assert_array_equal(ours.numpy(), F.interpolate(torch.tensor(x).float(), size=7).int().numpy())


# ---- a tuple inside an index ----
TUPLE_INDEX = [((0,), slice(None)), ((0, 1), slice(None)), ((2, 0, 2), 1), (slice(None), (1, -1)),
               ((0, 2), (1, 3)), (((0, 1), (1, 0)), slice(None)), ([[0, 1], [2, 2]], slice(None))]


@pytest.mark.parametrize("index", TUPLE_INDEX, ids=str)
@backends(index=[TUPLE_INDEX[1]])
def test_getitem_tuple_items(index: tuple) -> None:
    """torch reads a tuple inside the index as a list of indices (advanced indexing)."""
    helper_test_op([(3, 4)], lambda x: x[index])


# ---- edge values: NaN, +-inf, -0.0 and ties, forward and backward ----
EDGE_CASES: dict[str, tuple[tuple[int, ...], Callable, Callable | None]] = {
    "roll": ((3, 4), lambda x: x.roll((1, -2), (0, 1)), None),
    "repeat_interleave": ((4, 3), lambda x: x.repeat_interleave(torch.tensor([2, 0, 1, 3]), 0),
                          lambda x: x.repeat_interleave(Tensor([2, 0, 1, 3]), 0)),
    "meshgrid": ((5,), lambda x: torch.meshgrid(x, x[:3], indexing="xy"),
                 lambda x: Tensor.meshgrid(x, x[:3], indexing="xy")),
    "pad_reflect": ((2, 6), lambda x: F.pad(x, (3, 2), mode="reflect"),
                    lambda x: x.pad((3, 2), mode="reflect")),
    "pad_replicate": ((2, 6), lambda x: F.pad(x, (3, 2), mode="replicate"),
                      lambda x: x.pad((3, 2), mode="replicate")),
    "pad_circular": ((2, 6), lambda x: F.pad(x, (3, 2), mode="circular"),
                     lambda x: x.pad((3, 2), mode="circular")),
    "masked_select": ((3, 4), lambda x: x.masked_select(torch.tensor(_EDGE_MASK)),
                      lambda x: x.masked_select(Tensor(_EDGE_MASK))),
    "scatter": ((3, 4), lambda x: torch.zeros(4, 4, dtype=x.dtype).scatter(0, torch.tensor(_PERM), x),
                lambda x: Tensor.zeros(4, 4).scatter(0, Tensor(_PERM), x)),
    "scatter_amax": ((3, 4), lambda x: x.scatter_reduce(1, torch.tensor(_DUPS), x, "amax"),
                     lambda x: x.scatter_reduce(1, Tensor(_DUPS), x, "amax")),
    "scatter_amin": ((3, 4), lambda x: x.scatter_reduce(1, torch.tensor(_DUPS), x, "amin"),
                     lambda x: x.scatter_reduce(1, Tensor(_DUPS), x, "amin")),
    "scatter_sum": ((3, 4), lambda x: x.scatter_reduce(1, torch.tensor(_DUPS), x, "sum", include_self=False),
                    lambda x: x.scatter_reduce(1, Tensor(_DUPS), x, "sum", include_self=False)),
    "scatter_prod": ((3, 4), lambda x: x.scatter_reduce(1, torch.tensor(_DUPS), x, "prod"),
                     lambda x: x.scatter_reduce(1, Tensor(_DUPS), x, "prod")),
    "scatter_mean": ((3, 4), lambda x: x.scatter_reduce(1, torch.tensor(_DUPS), x, "mean"),
                     lambda x: x.scatter_reduce(1, Tensor(_DUPS), x, "mean")),
    "max_pool2d_indices": ((1, 4, 6), lambda x: F.max_pool2d(x, (2, 3), 1, (1, 1), return_indices=True),
                           lambda x: x.max_pool2d((2, 3), 1, (1, 1), return_indices=True)),
    "max_unpool2d": ((1, 4, 6), lambda x: F.max_unpool2d(x, torch.tensor(_UNPOOL), 2, output_size=(8, 12)),
                     lambda x: x.max_unpool2d(Tensor(_UNPOOL), 2, output_size=(8, 12))),
    "interpolate_nearest": ((1, 3, 4), lambda x: F.interpolate(x, scale_factor=1.5),
                            lambda x: x.interpolate(scale_factor=1.5)),
    "interpolate_linear": ((1, 3, 4), lambda x: F.interpolate(x, size=7, mode="linear"),
                           lambda x: x.interpolate(size=7, mode="linear")),
    "interpolate_bilinear": ((1, 1, 3, 4),
                             lambda x: F.interpolate(x, size=(4, 6), mode="bilinear", align_corners=True),
                             lambda x: x.interpolate(size=(4, 6), mode="bilinear", align_corners=True)),
    "getitem_tuple": ((3, 4), lambda x: x[(2, 0, 0), (1,)], None),
}
_EDGE_MASK = np.resize([True, True, False, True, False], (3, 4))
_PERM = np.array([[3, 0, 2, 1], [1, 2, 0, 3], [0, 3, 1, 2]])  # unique places along dim 0
_DUPS = np.array([[0, 0, 3, 3], [1, 1, 1, 2], [2, 0, 2, 0]])
_UNPOOL = np.array([[[0, 3, 5, 30, 33, 50], [12, 15, 41, 62, 20, 22], [1, 6, 9, 27, 68, 94],
                     [48, 51, 52, 55, 80, 95]]])  # unique places in the (8, 12) plane


@needs_torch
@pytest.mark.parametrize("name", EDGE_CASES)
@backends(name=["pad_reflect", "scatter_amax", "max_pool2d_indices", "interpolate_linear"])
def test_edge_values(name: str) -> None:
    shape, torch_fn, tinyedu_fn = EDGE_CASES[name]
    array = _edges(shape)
    if name == "scatter_prod":  # torch's gradient divides the product by each factor: NaN at inf; zeros stay
        array = np.nan_to_num(array, nan=0.0, posinf=3.0, neginf=-0.5)
    if name in ("scatter_amax", "scatter_amin"):  # a NaN's gradient follows max (the numerics page: the NaN
        _check_edges_signed(torch_fn, tinyedu_fn, array, grad=False)  # gets it; torch's amax: NaN for all)
        array = np.nan_to_num(array, nan=0.5)
    # max_pool follows max (the numerics page), not torch's index: its gradient at ties and NaN, and which
    # zero a tie of 0.0 and -0.0 keeps; so its values and indices are compared, not the sign of a zero
    pool = name == "max_pool2d_indices"
    # x[index] with tensors sums its one-hot picks from +0.0, so a picked -0.0 reads +0.0 there (the new ops
    # pick with _one_hot_pick, which keeps it, at the price of one more reduction that Embedding does not pay)
    signed = not pool and name != "getitem_tuple"
    _check_edges_signed(torch_fn, tinyedu_fn or torch_fn, array, grad=not pool, signed=signed)


# ---- bad arguments ----
def _full_index(value: int) -> Tensor:
    return Tensor(np.full((1, 1, 3, 4), value, np.int32))


BAD: list[tuple[str, Callable, type, str]] = [
    ("roll_lengths", lambda x: x.roll((1, 2), 0), ValueError, "roll: shifts .* and dims"),
    ("roll_dim", lambda x: x.roll(1, 2), IndexError, r"roll: Dimension out of range.*\[-2, 1\]"),
    ("repeat_negative", lambda x: x.repeat_interleave(-1), ValueError, "repeat_interleave: repeats must be"),
    ("repeat_length", lambda x: x.repeat_interleave(Tensor([1, 2]), 0),
     ValueError, r"one per element.*\(3, 4\)"),
    ("repeat_output_size", lambda x: x.repeat_interleave(2, 0, output_size=5),
     ValueError, "output_size=5.* 6"),
    ("meshgrid_2d", lambda x: Tensor.meshgrid(x, x), ValueError, r"meshgrid: expects 0-d or 1-d.*\(3, 4\)"),
    ("meshgrid_indexing", lambda x: Tensor.meshgrid(x[0], indexing="ji"), ValueError, "'ij' or 'xy'"),
    ("pad_mode", lambda x: x.pad((1, 1), mode="wrap"),
     ValueError, "pad: mode must be .*'circular', got 'wrap'"),
    ("pad_reflect_size", lambda x: x.pad((4, 0), mode="reflect"), ValueError,
     r"pad: mode 'reflect' can add at most 3 .* axis 1 of size 4"),
    ("pad_circular_size", lambda x: x.pad((0, 0, 0, 4), mode="circular"),
     ValueError, "at most 3 .* axis 0 of size 3"),
    ("pad_empty_axis", lambda x: x[:, :0].pad((1, 1), mode="replicate"), ValueError,
     r"mode 'replicate' copies the tensor's own elements, but axis 1 of shape \(3, 0\) has none"),
    ("pad_mode_value", lambda x: x.pad((1, 1), 2.0, mode="reflect"), ValueError, "takes no fill value"),
    ("masked_select_dtype", lambda x: x.masked_select(x), TypeError, "mask must be a bool"),
    ("masked_select_shape", lambda x: x.masked_select(Tensor([True, False])), ValueError, "masked_select"),
    ("scatter_range", lambda x: x.scatter(0, Tensor([[0, 3]]), 1.0), IndexError,
     "scatter: index along dim 0: value 3 is out of range for size 3; valid values are 0..2"),
    ("scatter_negative", lambda x: x.scatter(1, Tensor([[-1]]), 1.0), IndexError, "valid values are 0..3"),
    ("scatter_shape", lambda x: x.scatter(0, Tensor([[0, 1, 2, 0, 1]]), 1.0), ValueError,
     r"scatter: index of shape \(1, 5\) does not fit self \(3, 4\)"),
    ("scatter_src_small", lambda x: x.scatter(0, Tensor([[0, 1]]), Tensor([[1.0]])),
     ValueError, "no larger than src"),
    ("scatter_float_index", lambda x: x.scatter(0, Tensor([[0.0]]), 1.0),
     TypeError, "index must be a Tensor of int"),
    ("scatter_reduce_mode", lambda x: x.scatter_reduce(0, Tensor([[0]]), x, "max"), ValueError,
     "scatter_reduce: reduce must be one of sum, mean, prod, amax, amin, got 'max'"),
    ("scatter_legacy_mode", lambda x: x.scatter(0, Tensor([[0]]), x, reduce="mean"),
     ValueError, "'add' or 'multiply'"),
    ("unpool_range", lambda x: x.reshape(1, 1, 3, 4).max_unpool2d(_full_index(99), 2),
     IndexError, "max_unpool2d: index .* 48 elements; output_size sets its size\\): value 99"),
    ("unpool_output_size", lambda x: x.reshape(1, 1, 3, 4).max_unpool2d(_full_index(0), 2, None, 0, (8, 9)),
     ValueError, r"max_unpool2d: output_size \(8, 9\) .* default \(6, 8\)"),
    ("unpool_indices_shape", lambda x: x.reshape(1, 3, 4).max_unpool2d(Tensor([0]), 2),
     ValueError, "same shape"),
    ("interpolate_mode", lambda x: x.reshape(1, 3, 4).interpolate(size=5, mode="cubic"), ValueError,
     "interpolate: mode must be one of nearest, nearest-exact, linear, bilinear, trilinear, got 'cubic'"),
    ("interpolate_dims", lambda x: x.reshape(1, 3, 4).interpolate(size=5, mode="bilinear"), ValueError,
     r"mode 'bilinear' expects a 4-d input .*\(1, 3, 4\)"),
    ("interpolate_both", lambda x: x.reshape(1, 3, 4).interpolate(size=5, scale_factor=2),
     ValueError, "exactly one"),
    ("interpolate_size", lambda x: x.reshape(1, 3, 4).interpolate(size=(5, 5)),
     ValueError, "size must be one positive"),
    ("interpolate_corners", lambda x: x.reshape(1, 3, 4).interpolate(size=5, align_corners=True), ValueError,
     "align_corners only applies"),
    ("getitem_tuple_slice", lambda x: x[(0, slice(None)), 0],
     IndexError, "a tuple inside an index must hold ints"),
    ("getitem_tuple_range", lambda x: x[(0, 3), :], IndexError, "value 3 is out of range for size 3"),
]


@pytest.mark.parametrize("name, fn, error, match", BAD, ids=[b[0] for b in BAD])
def test_bad_arguments(name: str, fn: Callable, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        fn(Tensor(np.arange(12, dtype=np.float32).reshape(3, 4)))
