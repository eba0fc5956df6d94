"""Every primitive Function's backward at the edges of float32, against float64.

The primitives in tinyedu/core/function.py are what every other op is built from, so their gradients
must be right where float32 is hardest: subnormal inputs (where an intermediate such as x*ln2
rounds to a coarser subnormal), signed zeros, infinities and NaN. The oracle is PyTorch in
float64 on the same float32 inputs, rounded once to float32 at the end: the exact derivative,
rounded once. tinyedu may round a few times on the way, so agreement is to a few ulps, and
special values (inf, NaN, the sign of an infinity) must match exactly. For binary ops the rule is
"wherever PyTorch float32 reaches float64, tinyedu does too; elsewhere it gives PyTorch float32's
bits" (see test_binary_backward_at_the_edges for the one formula that needs it).
"""

from __future__ import annotations

import numpy as np
import pytest

from tinyedu import Tensor

torch = pytest.importorskip("torch")

TINY = np.float32(1.4e-45)  # the smallest subnormal
EDGES = np.array([TINY, -TINY, 3e-42, -1.1e-39, 1.2e-38, 0.0, -0.0, np.inf, -np.inf, np.nan,
                  1.0, -2.5, 7e-3, 3e38], dtype=np.float32)
GRADS = np.array([1e-8, 3.0, -0.5, 1e30], dtype=np.float32)

UNARY = {  # name: (tinyedu op, torch op, inputs)
    "neg": (lambda t: -t, lambda t: -t, EDGES),
    "reciprocal": (lambda t: t.reciprocal(), torch.reciprocal, EDGES),
    "sin": (lambda t: t.sin(), torch.sin, EDGES),
    "cos": (lambda t: t.cos(), torch.cos, EDGES),
    "exp2": (lambda t: t.exp2(), torch.exp2, EDGES),
    "log2": (lambda t: t.log2(), torch.log2, EDGES),
    "log": (lambda t: t.log(), torch.log, EDGES),  # log = log2 * ln 2: the case of the 31% error
    "sqrt": (lambda t: t.sqrt(), torch.sqrt, EDGES),
}
BINARY = {
    "add": (lambda a, b: a + b, lambda a, b: a + b),
    "sub": (lambda a, b: a - b, lambda a, b: a - b),
    "mul": (lambda a, b: a * b, lambda a, b: a * b),
    "div": (lambda a, b: a / b, lambda a, b: a / b),
    "maximum": (lambda a, b: a.maximum(b), torch.maximum),
}


def within_4_ulps(got: np.ndarray, exact64: np.ndarray) -> np.ndarray:
    """Where `got` is the float64 answer to 4 ulps, special values (inf, NaN) matching exactly."""
    with np.errstate(over="ignore"):
        want = exact64.astype(np.float32)
    special = np.isnan(want) | np.isinf(want) | np.isnan(got) | np.isinf(got)
    same_special = (np.isnan(want) & np.isnan(got)) | (want == got)
    with np.errstate(invalid="ignore"):
        err = np.abs(got.astype(np.float64) - exact64) / np.spacing(np.abs(want))
    return np.where(special, same_special, err <= 4)


def assert_close_to_float64(got: np.ndarray, exact64: np.ndarray, what: str) -> None:
    """Equal special values; elsewhere within 4 ulps of the float64 answer rounded to float32."""
    with np.errstate(over="ignore"):
        want = exact64.astype(np.float32)
    same_nan = np.isnan(got) == np.isnan(want)
    assert same_nan.all(), f"{what}: NaN where float64 has {want[~same_nan]} (got {got[~same_nan]})"
    inf = np.isinf(want) | np.isinf(got)
    np.testing.assert_array_equal(got[inf], want[inf], err_msg=f"{what}: infinities differ")
    finite = ~inf & ~np.isnan(want)
    ulp = np.spacing(np.abs(want[finite]).astype(np.float32))
    err = np.abs(got[finite].astype(np.float64) - exact64[finite])
    worst = (err / ulp).max(initial=0.0)
    assert worst <= 4, f"{what}: {worst:.1f} ulps from float64 (got {got[finite]}, want {want[finite]})"


def torch_grad(fn, *inputs: np.ndarray, grad: np.ndarray) -> list[np.ndarray]:
    ts = [torch.tensor(x.astype(np.float64), requires_grad=True) for x in inputs]
    fn(*ts).backward(torch.tensor(grad.astype(np.float64)))
    return [t.grad.numpy() for t in ts]


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_backward_at_the_edges(name: str) -> None:
    ours, theirs, xs = UNARY[name]
    x = np.repeat(xs, len(GRADS))
    g = np.tile(GRADS, len(xs))
    t = Tensor(x, requires_grad=True)
    ours(t).backward(Tensor(g))
    (exact,) = torch_grad(theirs, x, grad=g)
    assert_close_to_float64(t.grad.numpy(), exact, f"{name}'(x) at {x}")


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_backward_at_the_edges(name: str) -> None:
    ours, theirs = BINARY[name]
    a = np.repeat(EDGES, len(EDGES))  # every pair of edge values
    b = np.tile(EDGES, len(EDGES))
    g = np.resize(GRADS, a.shape)
    ta, tb = Tensor(a, requires_grad=True), Tensor(b, requires_grad=True)
    ours(ta, tb).backward(Tensor(g))
    exact = torch_grad(theirs, a, b, grad=g)
    torch32 = _torch32_grads(theirs, a, b, g)
    ours_grads = (ta.grad.numpy(), tb.grad.numpy())
    for got, exact64, t32, which in zip(ours_grads, exact, torch32, "ab", strict=True):
        # Division's d/db is -g * ((a/b)/b), PyTorch's formula, which tinyedu matches bit for bit:
        # where an intermediate of it over- or underflows float32 (a/b = inf while -g*a/b^2 is
        # finite), no float32 evaluation in that order can reach float64. There tinyedu must give
        # PyTorch float32's bits; everywhere PyTorch float32 reaches float64, tinyedu must too.
        reachable = within_4_ulps(t32, exact64)
        assert_close_to_float64(got[reachable], exact64[reachable], f"d{name}/d{which}")
        np.testing.assert_array_equal(got[~reachable], t32[~reachable], err_msg=f"d{name}/d{which}")


def _torch32_grads(fn, a: np.ndarray, b: np.ndarray, g: np.ndarray) -> list[np.ndarray]:
    ta, tb = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    fn(ta, tb).backward(torch.tensor(g))
    return [ta.grad.numpy(), tb.grad.numpy()]


def test_where_sum_and_max_backward_at_the_edges() -> None:
    x = EDGES.reshape(2, 7)
    cond = np.array([[True, False] * 3 + [True]] * 2)
    g = np.resize(GRADS, (2, 7))
    t = Tensor(x, requires_grad=True)
    (Tensor(cond).where(t, 0.0).sum(axis=1, keepdim=True) * Tensor(g)).sum().backward()
    tx = torch.tensor(x.astype(np.float64), requires_grad=True)
    g64 = torch.tensor(g.astype(np.float64))
    (torch.where(torch.tensor(cond), tx, 0.0).sum(dim=1, keepdim=True) * g64).sum().backward()
    assert_close_to_float64(t.grad.numpy(), tx.grad.numpy(), "where+sum")
    finite = np.nan_to_num(x, nan=0.0)  # max's gradient at NaN is pinned in tests/test_ops_math.py
    t = Tensor(finite, requires_grad=True)
    t.max(axis=1).backward(Tensor(g[:, 0]))
    tx = torch.tensor(finite.astype(np.float64), requires_grad=True)
    tx.amax(dim=1).backward(torch.tensor(g[:, 0].astype(np.float64)))
    assert_close_to_float64(t.grad.numpy(), tx.grad.numpy(), "max")


def test_log_gradient_at_the_smallest_subnormal() -> None:
    """The reported case: 1e-8 / 1.4e-45 = 7.136e36, not 4.946e36 (x*ln2 rounded to a subnormal)."""
    t = Tensor(np.float32([1.4e-45]), requires_grad=True)
    t.log().backward(Tensor([1e-8]))
    assert t.grad.numpy()[0] == pytest.approx(1e-8 / float(np.float32(1.4e-45)), rel=1e-6)
