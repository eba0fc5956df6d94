"""How far the float64 transcendental ops are from numpy's (and math.erf's) float64 answers, in ulps.

The composite formulas (tinyedu/expr.py, function_composite.py, function_math.py) take float64
constants, ranges and series lengths for a float64 tensor; this file holds them to it. For each op:
24k float64 points over the op's whole range (uniform near 0; log-spaced magnitudes from the
smallest subnormal 4.9e-324 to 1.8e308, both signs; uniform up to |x| = 750, past where exp
overflows (709.78) and underflows to 0 (-745.1); +-0, +-inf, NaN and the edges themselves), compared
with the float64 reference in units of the float64 spacing at the reference. A NaN where the
reference has none (or the reverse), or an infinity of the wrong sign, is an infinite error. The
references themselves round (numpy's sigmoid and softplus formulas by up to about 2 ulp), so the
bounds have that much slack; the measured maxima are in docs/numerics_and_semantics.md
(`python tests/test_accuracy64.py` prints them).

C and NUMPY run every point; LLVM and PYTHON a sample; NEON (qemu) one small kernel. The float64
gradients are compared with PyTorch's float64 gradients and with the exact derivatives.
"""

from __future__ import annotations

import math
import sys
from decimal import Context, Decimal
from typing import Callable

import numpy as np
import pytest

from tests.test_accuracy import _device_or_skip
from tinyedu import Tensor

SPECIALS = [0.0, -0.0, math.inf, -math.inf, math.nan, 5e-324, -5e-324, 2.2250738585072014e-308, 1e-310,
            709.782712893384, 709.7827128933841, -708.3964185322641, -745.1332191019411, -745.1332191019412,
            -744.44, 710.4758600739439, -710.4758600739439, 1.0, -1.0, 0.5, -0.5, 1.5, -1.5, 27.3, 1e16]


def sample_points(n: int = 24_000, seed: int = 0) -> np.ndarray:
    """float64 points over the whole range (see the module docstring); the same points every run."""
    rng = np.random.default_rng(seed)
    near_zero = rng.uniform(-4, 4, n // 4)
    magnitudes = np.exp(rng.uniform(math.log(5e-324), math.log(1.7e308), n // 2))
    signed = magnitudes * rng.choice([-1.0, 1.0], n // 2)
    exp_range = rng.uniform(-750, 750, n // 4 - len(SPECIALS))
    return np.concatenate([near_zero, signed, exp_range, SPECIALS])


def unit_points(n: int = 24_000, seed: int = 0) -> np.ndarray:
    """For asin and acos: uniform in [-1, 1], log-spaced towards 0 and towards +-1, and the others."""
    rng = np.random.default_rng(seed)
    uniform = rng.uniform(-1, 1, n // 2)
    towards_zero = np.exp(rng.uniform(math.log(5e-324), 0, n // 4)) * rng.choice([-1.0, 1.0], n // 4)
    towards_one = (1 - np.exp(rng.uniform(math.log(1.2e-16), 0, n // 8))) * rng.choice([-1.0, 1.0], n // 8)
    rest = sample_points(n - n // 2 - n // 4 - n // 8, seed + 1)
    return np.concatenate([uniform, towards_zero, towards_one, rest])


def ulp_error(got: np.ndarray, exact: np.ndarray) -> np.ndarray:
    """|got - exact| in ulps of float64 at the reference (the subnormal spacing 4.9e-324 at least);
    0 for equal infinities and for NaN against NaN, inf for a NaN against a number."""
    with np.errstate(all="ignore"):
        ulp = np.maximum(np.spacing(np.abs(exact)), 5e-324)
        error = np.abs(got - exact) / ulp
    error = np.where(got == exact, 0.0, error)  # equal infinities (inf - inf is NaN)
    nan_got, nan_exact = np.isnan(got), np.isnan(exact)
    error = np.where(nan_got & nan_exact, 0.0, error)
    error = np.where(nan_got != nan_exact, np.inf, error)
    return np.where(np.isnan(error), np.inf, error)  # an infinity against a finite number


def _sigmoid(x: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.where(x >= 0, 1 / (1 + np.exp(-x)), np.exp(x) / (1 + np.exp(x)))


def _softplus(x: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.where(x > 20, x, np.log1p(np.exp(x)))


_erf = np.vectorize(math.erf, otypes=[np.float64])
Op = tuple[Callable[[Tensor], Tensor], Callable[[np.ndarray], np.ndarray], Callable[[], np.ndarray], float]
# op -> (tinyedu, float64 reference, points, bound in ulps)
OPS: dict[str, Op] = {
    "exp": (Tensor.exp, np.exp, sample_points, 2.0),
    "exp2": (Tensor.exp2, np.exp2, sample_points, 1.0),
    "log": (Tensor.log, np.log, sample_points, 2.0),
    "expm1": (Tensor.expm1, np.expm1, sample_points, 2.0),
    "log1p": (Tensor.log1p, np.log1p, sample_points, 2.0),
    "sigmoid": (Tensor.sigmoid, _sigmoid, sample_points, 3.0),
    "softplus": (Tensor.softplus, _softplus, sample_points, 3.0),
    "tanh": (Tensor.tanh, np.tanh, sample_points, 2.0),
    "sinh": (Tensor.sinh, np.sinh, sample_points, 2.0),
    "cosh": (Tensor.cosh, np.cosh, sample_points, 2.0),
    "asin": (Tensor.asin, np.arcsin, unit_points, 3.0),
    "acos": (Tensor.acos, np.arccos, unit_points, 3.0),
    "atan": (Tensor.atan, np.arctan, sample_points, 2.0),
    "erf": (Tensor.erf, _erf, sample_points, 4.0),
    "trunc": (Tensor.trunc, np.trunc, sample_points, 0.0),
}
SAMPLED = {"LLVM": 10, "PYTHON": 400}


def measure(name: str, device: str = "C", stride: int = 1) -> tuple[float, float]:
    """The op's largest ulp error on its points (every stride-th), and the point where it is."""
    ours, exact, points, _ = OPS[name]
    x = points()[::stride]
    with np.errstate(all="ignore"):
        got = ours(Tensor(x, device=device)).numpy()
        errors = ulp_error(got, exact(x))
    assert got.dtype == np.float64, f"{name} of float64 came back as {got.dtype}"
    worst = int(np.argmax(errors))
    return float(errors[worst]), float(x[worst])


@pytest.mark.parametrize("device", ["C", "NUMPY", "LLVM", "PYTHON"])
@pytest.mark.parametrize("name", list(OPS))
def test_float64_ulp_error_over_the_whole_range(name: str, device: str) -> None:
    _device_or_skip(device)
    error, where = measure(name, device, SAMPLED.get(device, 1))
    assert error <= OPS[name][3], f"{name} on {device}: {error:.2f} ulp at x = {where!r}"


def test_float64_on_neon_one_small_kernel() -> None:
    """Under qemu every kernel is slow: the edges of exp, expm1 and erf, one kernel."""
    _device_or_skip("NEON")
    x = np.array([-745.13, -700.0, -1e-300, -0.0, 1e-10, 0.7, 1.4, 30.0, 709.78, 710.0, math.nan])
    t = Tensor(x, device="NEON")
    got = Tensor.stack([t.exp(), t.expm1(), t.erf()]).numpy()
    with np.errstate(all="ignore"):
        for row, exact, bound in zip(got, (np.exp(x), np.expm1(x), _erf(x)), (2, 2, 4), strict=True):
            assert ulp_error(row, exact).max() <= bound, (row, exact)


def test_float64_exp_reaches_the_ends_of_the_range() -> None:
    """e^709.78 is finite, e^709.79 inf; e^-745.13 is the smallest subnormal, e^-745.14 is 0."""
    x = np.array([709.782712893384, 709.79, -745.1332191019411, -745.14, -740.0, 700.0])
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(Tensor(x).exp().numpy(), np.exp(x))


# ---- gradients ----
def _exact_derivative(name: str, x: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return {"exp": np.exp, "tanh": lambda v: 4 * np.exp(-2 * abs(v)) / (1 + np.exp(-2 * abs(v))) ** 2,
                "sigmoid": lambda v: _sigmoid(v) * _sigmoid(-v),
                "erf": lambda v: 2 / math.sqrt(math.pi) * np.exp(-v * v)}[name](x)


@pytest.mark.parametrize("name, bound", [("exp", 2.0), ("tanh", 4.0), ("sigmoid", 4.0)])
def test_float64_gradient_ulp_error(name: str, bound: float) -> None:
    """exp', tanh' and sigmoid' over [-750, 750] (and tanh' and sigmoid' subnormal far out)."""
    x = np.concatenate([np.random.default_rng(3).uniform(-750, 750, 20_000), np.linspace(-30, 30, 2001)])
    t = Tensor(x, requires_grad=True)
    getattr(t, name)().sum().backward()
    errors = ulp_error(t.grad.numpy(), _exact_derivative(name, x))
    assert errors.max() <= bound, f"{name}': {errors.max():.2f} ulp at x = {x[int(np.argmax(errors))]!r}"


def test_float64_erf_gradient_to_27() -> None:
    """erf' = (2/sqrt(pi)) e^(-x^2) is subnormal, not 0, up to 27.3 in float64. Reference: x^2 exactly
    (x has 20 bits here) so numpy's exp is the only rounding."""
    x = np.round(np.linspace(-27.2, 27.2, 4001) * 2**14) / 2**14
    t = Tensor(x, requires_grad=True)
    t.erf().sum().backward()
    assert (ulp_error(t.grad.numpy(), _exact_derivative("erf", x)) <= 3).all()


GRADIENT_OPS = ["exp", "expm1", "log1p", "sigmoid", "tanh", "sinh", "cosh", "erf", "atan", "asin", "acos",
                "softplus", "gelu", "silu", "abs", "asinh", "atanh", "mish"]


@pytest.mark.parametrize("name", GRADIENT_OPS)
def test_float64_gradients_match_torch(name: str) -> None:
    torch = pytest.importorskip("torch")
    x = np.concatenate([np.linspace(-0.99, 0.99, 397), [1e-300, -1e-20, 0.3]])
    if name not in ("asin", "acos", "atanh"):
        x = np.concatenate([x, np.linspace(-12, 12, 601)])
    t = Tensor(x, requires_grad=True)
    getattr(t, name)().sum().backward()
    reference = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    functions = {"softplus": torch.nn.functional.softplus, "gelu": torch.nn.functional.gelu,
                 "silu": torch.nn.functional.silu, "mish": torch.nn.functional.mish}
    (functions.get(name) or getattr(torch, name))(reference).sum().backward()
    assert t.grad.numpy().dtype == np.float64
    # atol: torch's 1 - y^2, y (1 - y) and expm1's y + 1 keep absolute, not relative, digits where
    # the gradient is tiny (the ulp tests above hold ours to the exact derivative there)
    np.testing.assert_allclose(t.grad.numpy(), reference.grad.numpy(), rtol=1e-13, atol=1e-15)


def _gelu_reference(v: float) -> float:
    """x Phi(x) = x erfc(z) / 2, z = -x/sqrt(2): math.erfc at z rounded, plus the first-order term for
    the rest of z (from 40 digits), whose neglect alone would cost up to x^2 ulps."""
    z_exact = -Decimal(v) / Decimal(2).sqrt(Context(prec=40))
    z = float(z_exact)
    rest = float(z_exact - Decimal(z))
    return v * 0.5 * (math.erfc(z) - 2 / math.sqrt(math.pi) * math.exp(-z * z) * rest)


def test_float64_gelu_keeps_its_relative_precision_in_the_tail() -> None:
    """gelu is x Phi(x) with Phi from erfc, to a few ulp down to gelu(-37.5) = -1e-305 (PyTorch's
    float64 gelu is off by up to 2e-8 relative beyond x = -5)."""
    x = np.linspace(-37.5, 8, 3001)
    expected = np.array([_gelu_reference(v) for v in x])
    assert ulp_error(Tensor(x).gelu().numpy(), expected).max() <= 4


def test_float64_gelu_edges_match_torch() -> None:
    torch = pytest.importorskip("torch")
    x = np.array([math.nan, math.inf, -math.inf, 1e300, -1e300, 0.0, -0.0, 5e-324, -3.0, 2.0])
    t = Tensor(x, requires_grad=True)
    value = t.gelu()
    value.sum().backward()
    reference = torch.from_numpy(x).requires_grad_()
    torch.nn.functional.gelu(reference).sum().backward()
    expected = torch.nn.functional.gelu(torch.from_numpy(x)).numpy()  # (1 + erf) cancels: 7e-15 off at -3
    np.testing.assert_allclose(value.numpy(), expected, rtol=1e-13)
    np.testing.assert_allclose(t.grad.numpy(), reference.grad.numpy(), rtol=1e-13)


def test_float64_atan2_matches_numpy_and_torch() -> None:
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(4)
    y, x = (np.exp(rng.uniform(-700, 700, 20_000)) * rng.choice([-1.0, 1.0], 20_000) for _ in range(2))
    y[:6], x[:6] = [0.0, -0.0, np.inf, -np.inf, 1.0, 0.0], [-0.0, 0.0, np.inf, -np.inf, -0.0, -1.0]
    got = Tensor(y).atan2(Tensor(x)).numpy()
    assert ulp_error(got, np.arctan2(y, x)).max() <= 3
    y, x = rng.uniform(-10, 10, 500), rng.uniform(-10, 10, 500)
    ty, tx = Tensor(y, requires_grad=True), Tensor(x, requires_grad=True)
    ty.atan2(tx).sum().backward()
    ry, rx = (torch.tensor(v, requires_grad=True) for v in (y, x))
    torch.atan2(ry, rx).sum().backward()
    np.testing.assert_allclose(ty.grad.numpy(), ry.grad.numpy(), rtol=1e-14, atol=0)
    np.testing.assert_allclose(tx.grad.numpy(), rx.grad.numpy(), rtol=1e-14, atol=0)


if __name__ == "__main__":  # the float64 table of docs/numerics_and_semantics.md
    devices = sys.argv[1:] or ["C", "NUMPY"]
    print("| op | " + " | ".join(devices) + " |")
    for op in OPS:
        print(f"| `{op}` | " + " | ".join(f"{measure(op, d)[0]:.2f}" for d in devices) + " |")


def test_round_sign_and_logsigmoid_keep_float64():
    """round's adder is 2^52 in float64 (2^23 would leave 0.3 unrounded), sign keeps the dtype, and
    logsigmoid's softplus threshold is far enough out for float64's precision."""
    torch = pytest.importorskip("torch")
    from tinyedu import dtypes
    x = np.array([0.3, -2.5, 2.5, 0.5, 1.5, -0.0, 3e15 + 0.5, 2.0**53, -45.0, -30.0, 7.0, np.inf, np.nan])
    t, ref = Tensor(x), torch.tensor(x)
    for ours, theirs in ((t.round(), torch.round(ref)), (t.sign(), torch.sign(ref)),
                         (t.logsigmoid(), torch.nn.functional.logsigmoid(ref))):
        assert ours.dtype == dtypes.float64
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=4e-16, atol=0)
    numbers = ~np.isnan(x)  # round keeps the sign of a zero (round(-0.3) is -0.0)
    ours, theirs = t.round().numpy()[numbers], torch.round(ref).numpy()[numbers]
    assert np.array_equal(np.signbit(ours), np.signbit(theirs))
