"""asin, acos, atan, erf and copysign, forward and backward, against PyTorch on every device: random
inputs through helper_test_op (odd shapes, non-contiguous views, finite differences on NUMPY) and
float32's edge values through check_edges (domain ends, +-1, +-0.0, +-inf, NaN, |x| up to 1e30).
Their accuracy in ulps over the whole float32 range is measured in tests/test_accuracy.py. Also the
gradient cases of issue 18: max of NaN, a denormal power, softmax of a constant row."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tests.test_accuracy import ulp_error
from tests.test_ops import backends, device, helper_test_op  # noqa: F401 - device: runs each test on every device
from tinyedu import Tensor

torch = pytest.importorskip("torch")
from tests.torch_edges import check_edges  # noqa: E402 - needs torch

UNIT_EDGES = np.array([-1.0, -0.9999999, -0.75, -0.5, -0.4999999, -1e-30, -0.0, 0.0, 1e-45, 1e-30, 0.25,
                       0.5, 0.5000001, 0.9999999, 1.0, 1.0000001, -1.0000001, 2.0, math.inf, -math.inf,
                       math.nan], np.float32)
LINE_EDGES = np.array([-math.inf, -1e30, -1e4, -39 / 16, -1.5, -1.0, -0.8, -7 / 16, -1e-30, -0.0, 0.0, 1e-45,
                       1e-30, 7 / 16, 11 / 16, 0.8, 19 / 16, 39 / 16, 3.0, 11.0, 1e4, 1e19, 1e30, math.inf,
                       math.nan], np.float32)
UNARY = {"asin": UNIT_EDGES, "acos": UNIT_EDGES, "atan": LINE_EDGES, "erf": LINE_EDGES}


@backends(name=list(UNARY))
@pytest.mark.parametrize("name", list(UNARY))
def test_random_values(name: str) -> None:
    low, high = (-0.99, 0.99) if name in ("asin", "acos") else (-4.0, 4.0)
    helper_test_op([(2, 5)], lambda x: getattr(x, name)(), low=low, high=high)


@pytest.mark.parametrize("name", list(UNARY))
def test_non_contiguous_views(name: str) -> None:
    helper_test_op([(2, 3)], lambda x: getattr(x, name)(), low=-0.9, high=0.9, layout="permuted")
    helper_test_op([(2, 3)], lambda x: getattr(x, name)(), low=-0.9, high=0.9, layout="padded")


@backends(name=list(UNARY))
@pytest.mark.parametrize("name", list(UNARY))
def test_edge_values(name: str) -> None:
    check_edges(lambda x: getattr(x, name)(), None, [UNARY[name]], atol=0, rtol=1e-6, grad_atol=0,
                grad_rtol=1e-5)


def test_aliases() -> None:
    x = Tensor([0.25, -0.5])
    for ours, alias in (("asin", "arcsin"), ("acos", "arccos"), ("atan", "arctan")):
        np.testing.assert_array_equal(getattr(x, ours)().numpy(), getattr(x, alias)().numpy())


def test_an_integer_input_is_promoted() -> None:
    np.testing.assert_allclose(Tensor([0, 1]).atan().numpy(), [0.0, math.pi / 4], rtol=1e-7)
    assert Tensor([0, 1]).erf().dtype == Tensor([0.0]).dtype


@backends()
def test_copysign() -> None:
    helper_test_op([(2, 3), (2, 3)], lambda x, y: x.copysign(y), low=-2, high=2)
    helper_test_op([(2, 3), (3,)], lambda x, y: x.copysign(y), low=-2, high=2)


def test_copysign_edges() -> None:
    """-0.0 is negative, +-inf and NaN keep their magnitude; the gradient is 0 at x = 0 (PyTorch's)."""
    x = np.array([1, -1, 0, -0.0, 2, math.nan, math.inf, -3, -math.inf, 0], np.float32)
    y = np.array([-0.0, 0, -1, 1, math.nan, 1, -1, math.inf, 0, -math.inf], np.float32)
    check_edges(lambda a, b: a.copysign(b), None, [x, y], atol=0, rtol=0, grad_atol=0, grad_rtol=0)


def test_copysign_with_a_number() -> None:
    np.testing.assert_array_equal(Tensor([1.0, -2.0, 0.0]).copysign(-1).numpy(), [-1.0, -2.0, -0.0])
    assert np.signbit(Tensor([3.0]).copysign(-0.0).numpy()).all()
    np.testing.assert_array_equal(Tensor([1, -2]).copysign(1).numpy(), [1.0, 2.0])


@backends()
def test_atan2() -> None:
    helper_test_op([(2, 3), (2, 3)], lambda y, x: y.atan2(x), low=-3, high=3)
    helper_test_op([(2, 3), (3,)], lambda y, x: y.atan2(x), low=[-3, 0.5], high=[3, 3])


def test_atan2_edges() -> None:
    """Both zeros (of either sign), both infinities, one of each, NaN: C's (and PyTorch's) table."""
    values = np.array([0.0, -0.0, 1.0, -1.0, math.inf, -math.inf, math.nan, 1e-45, 1e30, -3.0], np.float32)
    y, x = (a.ravel() for a in np.meshgrid(values, values))
    check_edges(lambda a, b: a.atan2(b), None, [y, x], atol=0, rtol=2e-7, grad_rtol=1e-6, grad_atol=0)
    ours = Tensor(y).atan2(Tensor(x)).numpy()
    theirs = torch.atan2(torch.tensor(y), torch.tensor(x)).numpy()
    numbers = ~np.isnan(theirs)
    assert np.array_equal(np.signbit(ours[numbers]), np.signbit(theirs[numbers]))  # +-0 and +-pi


def test_atan2_is_accurate(device: str) -> None:  # noqa: F811 - the fixture imported above
    """Within 1.5 ulp of float64's atan2 over pairs of magnitudes from 1e-44 to 1e38 (PyTorch: 1).
    PYTHON interprets every op of every element: it takes a sample."""
    rng = np.random.default_rng(0)
    y, x = ((np.exp(rng.uniform(-100, 88, 50_000)) * rng.choice([-1, 1], 50_000)).astype(np.float32)
            for _ in range(2))
    y[:25_000], x[:25_000] = rng.uniform(-3, 3, (2, 25_000)).astype(np.float32)
    if device == "PYTHON":
        y, x = y[::100], x[::100]
    exact = np.arctan2(y.astype(np.float64), x.astype(np.float64))
    error = ulp_error(Tensor(y).atan2(Tensor(x)).numpy(), exact)
    assert error.max() <= 1.5, (error.max(), y[error.argmax()], x[error.argmax()])


# ---- the gradient cases of issue 18 ----
@pytest.mark.parametrize("values", [[math.nan], [1.0, math.nan, 3.0], [math.nan, math.nan], [2.0, 2.0],
                                    [[1.0, math.nan], [2.0, 3.0]]])
def test_max_and_min_of_nan_send_the_gradient_to_the_nans(values: list) -> None:
    for op in ("max", "min"):
        ours, theirs = Tensor(values, requires_grad=True), torch.tensor(values, requires_grad=True)
        getattr(ours, op)().backward()
        getattr(theirs, op)().backward()
        np.testing.assert_array_equal(ours.grad.numpy(), theirs.grad.numpy())


def test_max_of_a_nan_scalar() -> None:
    ours, theirs = Tensor(math.nan, requires_grad=True), torch.tensor(math.nan, requires_grad=True)
    ours.max().backward()
    theirs.max().backward()
    np.testing.assert_array_equal(ours.grad.numpy(), theirs.grad.numpy())


def test_power_with_a_denormal_exponent() -> None:
    """y x^(y-1) is inf; PyTorch multiplies the incoming -0.3 last: -inf (g * y first is -0.0: NaN)."""
    ours, theirs = Tensor([1e-45], requires_grad=True), torch.tensor([1e-45], requires_grad=True)
    (ours ** Tensor([1e-45])).backward(Tensor([-0.3]))
    (theirs ** torch.tensor([1e-45])).backward(torch.tensor([-0.3]))
    np.testing.assert_array_equal(ours.grad.numpy(), theirs.grad.numpy())
    assert ours.grad.numpy()[0] == -math.inf


@pytest.mark.parametrize("n", [3, 10, 100, 1000])
def test_softmax_of_a_constant_row_has_exactly_zero_gradient(n: int) -> None:
    """The gradient of a sum of probabilities is 0; sum(g s) with rounded s left 5e-9 of noise
    (PyTorch: 6e-10 at n = 100)."""
    x = Tensor.full((2, n), 0.7, requires_grad=True)
    x.softmax(-1).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.zeros((2, n), np.float32))


def test_softmax_gradient_still_matches_pytorch() -> None:
    helper_test_op([(3, 17)], lambda x: x.softmax(-1), low=-5, high=5)
    helper_test_op([(3, 17)], lambda x: x.log_softmax(-1), low=-5, high=5)
    helper_test_op([(4, 6)], lambda x: x.softmax(0), low=-50, high=50)
