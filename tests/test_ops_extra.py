"""Ops PyTorch users reach for (scans, sorting, isclose, std_mean, prod(dtype=), nll_loss(weight=)) and
the semantic fixes around min, clamp and cat: each against PyTorch, forward and backward, on every
device (the `device` fixture of test_ops), at random values (with finite differences on NUMPY) and at
float32's edges (tests/torch_edges.py: 0, -0.0, +-inf, NaN, ties). The odd shapes up to 40k elements
are in tests/test_fuzz_torch.py.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

from tests.test_ops import _check_int_op, _distinct, backends, device, helper_test_op  # noqa: F401
from tinyedu import Device, Tensor, dtypes

torch = pytest.importorskip("torch")
from tests.torch_edges import check_edges  # noqa: E402 - needs torch

F = torch.nn.functional
NAN, INF = float("nan"), float("inf")
EDGES = np.array([3.0, -0.0, 0.0, NAN, 1.0, 1.0, -INF, INF, NAN, 0.0, -2.0, 1e4, -1e4, 1e-8], np.float32)
FINITE = np.array([3.0, -0.0, 0.0, 17, 1.0, 1.0, -0.5, 0.5, 1e-8, 0.0, -2.0, 300, -1e-3, 2.5], np.float32)


def _bits(a: np.ndarray) -> np.ndarray:
    return np.asarray(a, np.float32).view(np.uint32)


# ---- the fixed bugs ----
def test_min_argmin_of_integers_at_their_extremes() -> None:
    """min was -max(-x): int32's -2**31 has no negation and wrapped to itself."""
    _check_int_op(lambda x: x.min(), lambda x: x.min(), np.array([0, -2**31], np.int32))
    _check_int_op(lambda x: x.argmin(), lambda x: x.argmin(), np.array([0, -2**31], np.int32))
    extremes = np.array([[2**31 - 1, -2**31, 0], [-1, 2**31 - 1, -2**31]], np.int32)
    for axis in (0, 1):
        _check_int_op(lambda x, a=axis: x.amin(a), lambda x, a=axis: x.min(a), extremes)
        _check_int_op(lambda x, a=axis: x.argmin(a), lambda x, a=axis: x.argmin(a), extremes)
    _check_int_op(lambda x: x.amin(1), lambda x: x.amin(1), np.array([[255, 0, 7], [3, 255, 9]], np.uint8))
    _check_int_op(lambda x: x.amin(0), lambda x: x.min(0), np.array([[True, False], [True, True]]))
    _check_int_op(lambda x: x.minimum(x.flip(0)), lambda x: x.minimum(x.flip(0)),
                  np.array([0, -2**31], np.int32))


def test_float_min_keeps_nan_and_argmin_finds_it() -> None:
    x = Tensor([1.0, NAN, -INF])
    assert np.isnan(x.min().item()) and x.argmin().item() == 1 == torch.tensor([1.0, NAN, -INF]).argmin()
    assert np.signbit(Tensor([0.5, -0.0]).min().item())  # -(max(-x)) = -(+0.0) = -0.0


CLAMPS: dict[str, Callable] = {
    "min_above_max": lambda x, lo, hi: x.clamp(lo, hi),
    "min_only": lambda x, lo, hi: x.clamp(lo, None),
    "max_only": lambda x, lo, hi: x.clamp(None, hi),
    "clip": lambda x, lo, hi: x.clip(lo, hi),
}


@pytest.mark.parametrize("name", list(CLAMPS))
@backends(name=["min_above_max"])
def test_clamp_with_tensor_bounds_at_the_edges(name: str) -> None:
    """min(max(x, lo), hi) as torch, NaN anywhere gives NaN, and torch's gradient rule at the bounds:
    x where lo <= x <= hi, lo where x < lo < hi, hi where x > hi or hi < lo."""
    x = np.array([NAN, -0.3, 0.2, 5, 1, 0, -0.0, 1, 0, 2, 3, -INF, INF], np.float32)
    lo = np.array([3, 3, 3, 3, 1, 1, 0, 1, 1, NAN, 0, 0, 0], np.float32)
    hi = np.array([0, 0, 0, 0, 1, 1, -0.0, 1, 1, 1, 3, INF, 2], np.float32)
    check_edges(CLAMPS[name], None, [x, lo, hi])
    check_edges(CLAMPS[name], None, [x[:, None], lo[None, :4], hi[None, :4]])  # bounds broadcast


@pytest.mark.parametrize("bounds", [(3.0, 0.0), (0.0, -0.0), (-0.0, 0.0), (-1.0, None), (None, 0.5)])
@backends(bounds=[(3.0, 0.0)])
def test_clamp_with_number_bounds(bounds: tuple) -> None:
    x = np.array([-0.3, 0.2, 3.0, 0.0, -0.0, 5.0, NAN, INF, -INF], np.float32)
    check_edges(lambda t: t.clamp(*bounds), None, [x])
    ours, theirs = Tensor(x).clamp(*bounds).numpy(), torch.tensor(x).clamp(*bounds).numpy()
    if Device.DEFAULT == "WASM":  # WebAssembly leaves the sign of a NaN it makes to the machine (its spec)
        ours, theirs = (np.where(np.isnan(a), np.float32(NAN), a) for a in (ours, theirs))
    assert np.array_equal(_bits(ours), _bits(theirs))
    assert Tensor([-0.3, 0.2]).clip(3, 0).tolist() == [0.0, 0.0]


def test_int_clamp_with_min_above_max() -> None:
    _check_int_op(lambda x: x.clamp(3, 0), lambda x: x.clamp(3, 0), np.array([-5, 1, 7], np.int32))
    _check_int_op(lambda x, lo, hi: x.clamp(lo, hi), lambda x, lo, hi: x.clamp(lo, hi),
                  *(np.array(v, np.int32) for v in ([-5, 1, 7], [4, 0, 1], [2, 2, -1])))


def test_cat_and_stack_keep_every_bit() -> None:
    """cat added zero-padded pieces, and -0.0 + 0.0 = +0.0: 1 / cat(-0.0, 1) was inf."""
    a = Tensor([-0.0, NAN, -INF], requires_grad=True)
    b = Tensor([[1.0, -0.0]], requires_grad=True).reshape(2)
    joined = a.cat(b)
    assert (1 / Tensor([-0.0]).cat(Tensor([1.0]))).tolist() == [-INF, 1.0]
    expected = np.array([-0.0, NAN, -INF, 1.0, -0.0], np.float32)
    assert np.array_equal(_bits(joined.numpy()), _bits(expected))
    stacked = Tensor.stack([a, a * 1], 1)
    assert np.array_equal(_bits(stacked.numpy()), _bits(np.stack([expected[:3]] * 2, 1)))
    cotangent = np.array([-0.0, 2.0, -0.0, 3.0, -0.0], np.float32)
    joined.backward(Tensor(cotangent))
    assert np.array_equal(_bits(a.grad.numpy()), _bits(cotangent[:3]))


def test_stack_and_cat_take_dim_positionally() -> None:
    xs = [np.arange(6, dtype=np.float32).reshape(2, 3) * k for k in (1, -1, 2)]
    ours = [Tensor(x) for x in xs]
    theirs = [torch.tensor(x) for x in xs]
    for dim in (0, 1, 2, -1):
        np.testing.assert_array_equal(Tensor.stack(ours, dim).numpy(), torch.stack(theirs, dim).numpy())
    np.testing.assert_array_equal(Tensor.cat(ours, 1).numpy(), torch.cat(theirs, 1).numpy())
    with pytest.raises(TypeError, match="dim given twice"):
        Tensor.stack(ours, 1, dim=1)


# ---- scans ----
SCANS: dict[str, tuple[Callable, Callable]] = {  # name: (torch_fn, tinyedu_fn)
    "cumprod": (lambda x, d: x.cumprod(d), lambda x, d: x.cumprod(d)),
    "logcumsumexp": (lambda x, d: x.logcumsumexp(d), lambda x, d: x.logcumsumexp(d)),
    "cummax": (lambda x, d: x.cummax(d).values, lambda x, d: x.cummax(d)[0]),
    "cummin": (lambda x, d: x.cummin(d).values, lambda x, d: x.cummin(d)[0]),
}


@pytest.mark.parametrize("shape,dim", [((5,), 0), ((3, 4), -1), ((2, 70), 1)])
@pytest.mark.parametrize("name", list(SCANS))
@backends(shape=[(3, 4)])
def test_scans(name: str, shape: tuple[int, ...], dim: int) -> None:
    """Random values (cumprod away from 0 so finite differences are smooth); 70 takes 7 rounds."""
    torch_fn, ours = SCANS[name]
    low = 0.5 if name == "cumprod" else -2.0
    arrays = [_distinct(shape) + 0.001] if name in ("cummax", "cummin") else None
    high = 1.5 if name == "cumprod" else 2.0
    helper_test_op([shape], lambda x: torch_fn(x, dim), lambda x: ours(x, dim), low=low, high=high,
                   arrays=arrays, layout="flipped" if len(shape) > 1 else "contiguous")


@pytest.mark.parametrize("name", list(SCANS))
@backends(name=["cumprod", "cummax"])
def test_scans_at_the_edges(name: str) -> None:
    """Zeros (cumprod's gradient must still reach the elements before and at a zero), -0.0, +-inf,
    NaN, ties and large values. cumprod's gradient at +-inf and NaN is the chain rule's, not torch's
    (docs/numerics_and_semantics.md), so there it sees finite values only."""
    torch_fn, ours = SCANS[name]
    edges = FINITE if name == "cumprod" else EDGES
    check_edges(lambda x: torch_fn(x, 0), lambda x: ours(x, 0), [edges])
    check_edges(lambda x: torch_fn(x, -1), lambda x: ours(x, -1), [edges.reshape(2, 7)])
    zeros = np.array([[2.0, 0.0, 3.0, 0.0, 5.0], [-0.0, 4.0, 0.5, -1.0, 2.0]], np.float32)
    check_edges(lambda x: torch_fn(x, 1), lambda x: ours(x, 1), [zeros])


@pytest.mark.parametrize("name", ["cummax", "cummin"])
def test_cummax_indices(name: str) -> None:
    """Ties take the last index, NaN is the extreme and each later NaN takes over, as torch."""
    data = np.array([[1, 1, 0, 1, NAN, 2, NAN, -0.0, 0.0], [0.0, -0.0, 0.0, -1, -1, 3, 3, 2, 3]], np.float32)
    values, indices = getattr(Tensor(data), name)(1)
    expected = getattr(torch.tensor(data), name)(1)
    np.testing.assert_array_equal(indices.numpy(), expected.indices.numpy())
    assert np.array_equal(_bits(values.numpy()), _bits(expected.values.numpy()))
    ints = np.array([5, -2**31, 2**31 - 1, 2**31 - 1, -3], np.int32)
    values, indices = getattr(Tensor(ints), name)(0)
    expected = getattr(torch.tensor(ints), name)(0)
    np.testing.assert_array_equal(values.numpy(), expected.values.numpy())
    np.testing.assert_array_equal(indices.numpy(), expected.indices.numpy())


def test_scans_of_integers_and_0d() -> None:
    _check_int_op(lambda x: x.cumprod(0), lambda x: x.cumprod(0), np.array([3, -2, 0, 5], np.int32))
    _check_int_op(lambda x: x.cumprod(0), lambda x: x.cumprod(0), np.array([True, True, False]))
    assert Tensor([1, 2, 3]).cumprod(0, dtype=dtypes.float32).dtype == dtypes.float32
    values, index = Tensor(2.5).cummax(0)
    assert values.item() == 2.5 and index.item() == 0
    helper_test_op([()], lambda x: x.logcumsumexp(0))


# ---- sorting ----
@pytest.mark.parametrize("shape,dim", [((6,), 0), ((3, 5), -1), ((4, 3, 2), 0)])
@pytest.mark.parametrize("descending", [False, True])
@backends(shape=[(3, 5)])
def test_sort(shape: tuple[int, ...], dim: int, descending: bool) -> None:
    arrays = [_distinct(shape)]
    helper_test_op([shape], lambda x: x.sort(dim, descending)[0], arrays=arrays, layout="permuted")
    for layout in ("contiguous", "permuted"):
        helper_test_op([shape], lambda x: x.sort(dim, descending)[1].int() if isinstance(x, Tensor)
                       else x.sort(dim, descending)[1].int(), arrays=arrays, layout=layout)
    helper_test_op([shape], lambda x: x.argsort(dim, descending).int(), arrays=arrays)


@pytest.mark.parametrize("descending", [False, True])
@backends(descending=[False])
def test_sort_at_the_edges(descending: bool) -> None:
    """Stable ties, -0.0 before 0.0 only by position, NaN as the largest; values keep their bits and
    the gradient goes to each value's element, exactly as torch.sort(stable=True)."""
    for data in (EDGES, EDGES.reshape(2, 7).T.copy()):
        check_edges(lambda x: x.sort(dim=0, descending=descending, stable=True)[0],
                    lambda x: x.sort(0, descending)[0], [data])
        values, indices = Tensor(data).sort(0, descending)
        expected = torch.tensor(data).sort(dim=0, descending=descending, stable=True)
        np.testing.assert_array_equal(indices.numpy(), expected.indices.numpy())
        assert np.array_equal(_bits(values.numpy()), _bits(expected.values.numpy()))
    ints = np.array([3, -2**31, 0, 2**31 - 1, 3, -1], np.int32)
    _check_int_op(lambda x: x.sort(descending=descending, stable=True).values,
                  lambda x: x.sort(descending=descending)[0], ints)
    _check_int_op(lambda x: x.argsort(descending=descending, stable=True),
                  lambda x: x.argsort(descending=descending), ints)


@pytest.mark.parametrize("k", [0, 3, 5])
@pytest.mark.parametrize("largest", [True, False])
@backends(k=[3])
def test_topk(k: int, largest: bool) -> None:
    """Distinct values: the same picks as torch, and the gradient scattered to them."""
    helper_test_op([(3, 5)], lambda x: x.topk(k, 1, largest)[0], arrays=[_distinct((3, 5))])
    helper_test_op([(5, 3)], lambda x: x.topk(k, 0, largest)[1].int(), arrays=[_distinct((5, 3))])


def test_topk_at_the_edges_and_errors() -> None:
    """With ties torch does not promise which index comes first; the values must still match, and the
    picks are those of the stable sort."""
    values, indices = Tensor(EDGES).topk(4)
    np.testing.assert_array_equal(values.numpy(), torch.tensor(EDGES).topk(4).values.numpy())
    stable = torch.tensor(EDGES).sort(descending=True, stable=True).indices[:4]
    np.testing.assert_array_equal(indices.numpy(), stable.numpy())
    check_edges(lambda x: x.sort(descending=False, stable=True)[0][:3], lambda x: x.topk(3, largest=False)[0],
                [EDGES])
    with pytest.raises(ValueError, match="k=6 is out of range"):
        Tensor.ones(5).topk(6)
    with pytest.raises(ValueError, match="int32 index would wrap"):
        Tensor.ones(2, 40000).sort()


# ---- isclose, std_mean, prod(dtype=), nll_loss(weight=) ----
@pytest.mark.parametrize("rtol,atol,equal_nan", [(1e-5, 1e-8, False), (1e-5, 1e-8, True), (1e-3, 0.0, False),
                                                 (0.0, 0.0, False), (0.0, 1.5, True)])
@backends(equal_nan=[True])
def test_isclose(rtol: float, atol: float, equal_nan: bool) -> None:
    a = np.array([1, NAN, INF, INF, 0, 1e-9, 1.0001, -0.0, 1e30, NAN, 2, -INF], np.float32)
    b = np.array([1, NAN, INF, -INF, 1e-9, 0, 1, 0, 1.00001e30, 1, 0.6, 1e38], np.float32)
    expected = torch.isclose(torch.tensor(a), torch.tensor(b), rtol, atol, equal_nan).numpy()
    np.testing.assert_array_equal(Tensor(a).isclose(Tensor(b), rtol, atol, equal_nan).numpy(), expected)
    ints, others = np.array([1, 5, -3], np.int32), np.array([-3, 5, 1], np.int32)
    expected = torch.isclose(torch.tensor(ints), torch.tensor(others), rtol, atol).numpy()
    np.testing.assert_array_equal(Tensor(ints).isclose(Tensor(others), rtol, atol).numpy(), expected)


def test_isclose_errors_and_allclose() -> None:
    assert Tensor([1.0, 2.0]).allclose(Tensor([1.0, 2.0 + 1e-6]))
    assert not Tensor([1.0, NAN]).allclose(Tensor([1.0, NAN]))
    with pytest.raises(ValueError, match="rtol must be a number >= 0"):
        Tensor([1.0]).isclose(Tensor([1.0]), rtol=-1)


@pytest.mark.parametrize("args", [{}, {"dim": 1}, {"dim": (0, 2), "keepdim": True},
                                  {"dim": -1, "correction": 0}, {"dim": 1, "unbiased": False},
                                  {"dim": 2, "correction": 2}])
@backends(args=[{"dim": 1}])
def test_std_mean_and_var_mean(args: dict[str, Any]) -> None:
    for name in ("std_mean", "var_mean"):
        helper_test_op([(2, 3, 4)], lambda x, n=name: getattr(torch, n)(x, **args),
                       lambda x, n=name: getattr(x, n)(**args))
    # torch.std_mean's one-pass mean is NaN where a column holds an infinity; ours is mean()'s +-inf
    check_edges(lambda x: (x.std(0), x.mean(0)), lambda x: x.std_mean(0), [EDGES.reshape(2, 7)])


@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_prod_dtype(dtype: str) -> None:
    ints = np.array([[1, 2, 3], [4, -5, 0]], np.int32)
    ours = Tensor(ints).prod(1, dtype=dtype)
    theirs = torch.tensor(ints).prod(1, dtype=getattr(torch, dtype))
    assert ours.dtype == dtypes.from_any(dtype)
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    helper_test_op([(3, 4)], lambda x: x.prod(0, dtype=torch.float32) if not isinstance(x, Tensor)
                   else x.prod(0, dtype=dtypes.float32))
    check_edges(lambda x: x.prod(1), None, [EDGES.reshape(2, 7)])


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("shape", [(5, 4), (4,), (2, 3, 2)])
@backends(shape=[(5, 4)], reduction=["mean"])
def test_nll_loss_weight(reduction: str, shape: tuple[int, ...]) -> None:
    """PyTorch's weighted mean: sum(w[t] * loss) / sum(w[t]) over the targets not ignored."""
    rng = np.random.default_rng(1)
    classes = shape[1] if len(shape) > 1 else shape[0]
    target_shape = shape[:1] + shape[2:] if len(shape) > 1 else ()
    target = rng.integers(0, classes, target_shape)
    if target.size > 1:
        target.reshape(-1)[1] = -100
    weight = rng.uniform(0, 2, classes).astype(np.float32)
    weight[0] = 0.0

    def theirs(x: Any) -> Any:
        weights = torch.tensor(weight, dtype=x.dtype)
        return F.nll_loss(x, torch.tensor(target), weight=weights, reduction=reduction)

    def ours(x: Tensor) -> Tensor:
        return x.nll_loss(Tensor(target.astype(np.int32)), reduction, weight=Tensor(weight))

    helper_test_op([shape], theirs, ours)
    with pytest.raises(ValueError, match="weight must be a float tensor of shape"):
        Tensor.ones(*shape).nll_loss(Tensor(target.astype(np.int32)), weight=Tensor.ones(classes + 1))


def test_int_where_with_a_vector_mask() -> None:
    """An int pad with a fill value is where(mask, x, fill); upcast to 16 lanes on C, the bool mask's
    broadcast once shared its name with the int broadcast and put 1 (not -1) in the lanes: the pad
    read as the fill everywhere."""
    data = np.arange(40000, dtype=np.int32)
    out = Tensor(data).pad(((16, 0),), value=-1)[:40000].numpy()
    np.testing.assert_array_equal(out, np.concatenate([np.full(16, -1, np.int32), data[:-16]]))
