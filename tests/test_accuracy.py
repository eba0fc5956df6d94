"""How far the transcendental ops are from the correctly rounded float32 answer, in ulps, measured.

For each op: 120k float32 points over its whole range (uniform near 0; log-spaced magnitudes from the
smallest subnormal to float32's largest value, both signs; uniform up to |x| = 110, where exp
overflows and underflows; subnormals, +-0, +-inf, NaN), the op computed by tinyedu, and the exact
answer computed in float64 (numpy) and compared with it in units of the float32 spacing (ulp) at
the answer. A result that should be NaN and is not (or the reverse), or an infinity of the wrong
sign, counts as an infinite error. The bound asserted for each op is in ULP_BOUND; the measured
figures are in docs/numerics_and_semantics.md (`python tests/test_accuracy.py` prints them, with
PyTorch's error on the same points).

C and NUMPY run every point; LLVM, NEON (under qemu on x86-64) and PYTHON (which interprets every
op of every element in Python) run a sample, one kernel per op. The gradients of exp, tanh and
sigmoid are measured the same way against their float64 derivatives.
"""

from __future__ import annotations

import math
import sys
from typing import Callable

import numpy as np
import pytest

from tinyedu import Device, Tensor
from tinyedu.runtime.device import DeviceUnavailable

SPECIALS = [0.0, -0.0, math.inf, -math.inf, math.nan, 1e-45, -1e-45, 1e-40, -1e-40, 1.1754942e-38,
            88.72283, 88.72284, -87.33655, -103.97, -103.28, 89.41599, -89.41599, 1.0, -1.0, 0.5, -0.5]


def sample_points(n: int = 120_000, seed: int = 0) -> np.ndarray:
    """float32 points over the whole range (see the module docstring); the same points every run."""
    rng = np.random.default_rng(seed)
    near_zero = rng.uniform(-4, 4, n // 4)
    magnitudes = np.exp(rng.uniform(math.log(1e-45), math.log(3.4e38), n // 2))
    signed = magnitudes * rng.choice([-1.0, 1.0], n // 2)
    exp_range = rng.uniform(-110, 110, n // 4 - len(SPECIALS))
    return np.concatenate([near_zero, signed, exp_range, SPECIALS]).astype(np.float32)


def unit_points(n: int = 120_000, seed: int = 0) -> np.ndarray:
    """For asin and acos: uniform in [-1, 1], log-spaced towards 0 and towards +-1, and the others."""
    rng = np.random.default_rng(seed)
    uniform = rng.uniform(-1, 1, n // 2)
    towards_zero = np.exp(rng.uniform(math.log(1e-45), 0, n // 4)) * rng.choice([-1.0, 1.0], n // 4)
    towards_one = (1 - np.exp(rng.uniform(math.log(6e-8), 0, n // 8))) * rng.choice([-1.0, 1.0], n // 8)
    rest = sample_points(n - n // 2 - n // 4 - n // 8, seed + 1)
    return np.concatenate([uniform, towards_zero, towards_one, rest]).astype(np.float32)


def ulp_error(got: np.ndarray, exact: np.ndarray) -> np.ndarray:
    """|got - exact| in ulps of float32 at the correctly rounded answer; inf for a wrong NaN or inf.

    An answer beyond float32's range counts from 2^128, where float32 would put the next value
    (so inf for exact = 3.4028235e38 * (1 + 2^-25) is half an ulp off, as it should be)."""
    got, exact = got.astype(np.float64), exact.astype(np.float64)
    with np.errstate(all="ignore"):
        rounded = exact.astype(np.float32)
        spacing = np.spacing(np.minimum(np.abs(rounded), np.finfo(np.float32).max)).astype(np.float64)
        ulp = np.maximum(spacing, 2.0**-149)
        beyond = lambda v: np.where(np.isinf(v), np.sign(v) * 2.0**128, v)  # noqa: E731
        error = np.abs(beyond(got) - beyond(exact)) / ulp
    same_infinity = np.isinf(got) & np.isinf(exact) & (np.sign(got) == np.sign(exact))
    error = np.where(same_infinity, 0.0, error)
    nan_got, nan_exact = np.isnan(got), np.isnan(exact)
    error = np.where(nan_got & nan_exact, 0.0, error)
    return np.where(nan_got != nan_exact, np.inf, error)


def _softplus(x: np.ndarray) -> np.ndarray:
    return np.where(x > 20, x, np.log1p(np.exp(x)))


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return np.where(x >= 0, 1 / (1 + np.exp(-x)), np.exp(x) / (1 + np.exp(x)))


# op -> (tinyedu, float64 reference, points)
Op = tuple[Callable[[Tensor], Tensor], Callable[[np.ndarray], np.ndarray], Callable[[], np.ndarray]]
OPS: dict[str, Op] = {
    "exp": (Tensor.exp, np.exp, sample_points),
    "exp2": (Tensor.exp2, np.exp2, sample_points),
    "log": (Tensor.log, np.log, sample_points),
    "log2": (Tensor.log2, np.log2, sample_points),
    "expm1": (Tensor.expm1, np.expm1, sample_points),
    "log1p": (Tensor.log1p, np.log1p, sample_points),
    "sigmoid": (Tensor.sigmoid, _sigmoid, sample_points),
    "softplus": (Tensor.softplus, _softplus, sample_points),
    "tanh": (Tensor.tanh, np.tanh, sample_points),
    "sinh": (Tensor.sinh, np.sinh, sample_points),
    "cosh": (Tensor.cosh, np.cosh, sample_points),
    "asin": (Tensor.asin, np.arcsin, unit_points),
    "acos": (Tensor.acos, np.arccos, unit_points),
    "atan": (Tensor.atan, np.arctan, sample_points),
    "erf": (Tensor.erf, np.vectorize(math.erf, otypes=[np.float64]), sample_points),
}
# The bound each op is held to, in ulps (the measured maxima are a little below: see the docs).
ULP_BOUND = {name: 2.0 for name in OPS}  # erf: 1.68 with erfc's polynomial in pairs (Estrin; 1.85 by Horner)

# the derivative in float64: exp, tanh and sigmoid
GRADIENTS: dict[str, tuple[Callable[[Tensor], Tensor], Callable[[np.ndarray], np.ndarray]]] = {
    "exp": (Tensor.exp, np.exp),
    "tanh": (Tensor.tanh, lambda x: 1 / np.cosh(x) ** 2),
    "sigmoid": (Tensor.sigmoid, lambda x: _sigmoid(x) * _sigmoid(-x)),
}
GRADIENT_BOUND = {"exp": 1.0, "tanh": 2.5, "sigmoid": 3.0}

# LLVM, NEON and PYTHON measure every `stride`-th point
SAMPLED = {"LLVM": 10, "NEON": 10, "PYTHON": 200}


def _device_or_skip(device: str) -> None:
    try:
        Device[device].check_runnable()  # CUDA compiles anywhere, runs only on a GPU
    except DeviceUnavailable as missing:
        pytest.skip(str(missing))


def measure(name: str, device: str = "C", stride: int = 1) -> tuple[float, float]:
    """The op's largest ulp error on its points (every stride-th), and the point where it is."""
    ours, exact, points = OPS[name]
    x = points()[::stride]
    with np.errstate(all="ignore"):
        errors = ulp_error(ours(Tensor(x, device=device)).numpy(), exact(x.astype(np.float64)))
    worst = int(np.argmax(errors))
    return float(errors[worst]), float(x[worst])


@pytest.mark.parametrize("device", ["C", "NUMPY", "LLVM", "NEON", "PYTHON"])
@pytest.mark.parametrize("name", list(OPS))
def test_ulp_error_over_the_whole_range(name: str, device: str) -> None:
    _device_or_skip(device)
    error, where = measure(name, device, SAMPLED.get(device, 1))
    assert error <= ULP_BOUND[name], f"{name} on {device}: {error:.2f} ulp at x = {where!r}"


def measure_gradient(name: str, device: str = "C") -> tuple[float, float]:
    ours, exact = GRADIENTS[name]
    x = sample_points(20_000, seed=2)
    t = Tensor(x, device=device, requires_grad=True)
    ours(t).sum().backward()
    with np.errstate(all="ignore"):
        errors = ulp_error(t.grad.numpy(), exact(x.astype(np.float64)))
    worst = int(np.argmax(errors))
    return float(errors[worst]), float(x[worst])


@pytest.mark.parametrize("device", ["C", "NUMPY"])
@pytest.mark.parametrize("name", list(GRADIENTS))
def test_gradient_ulp_error(name: str, device: str) -> None:
    error, where = measure_gradient(name, device)
    assert error <= GRADIENT_BOUND[name], f"{name}' on {device}: {error:.2f} ulp at x = {where!r}"


def test_tanh_gradient_keeps_its_digits_where_tanh_rounds_to_one() -> None:
    """1 - tanh^2 is 0.4% off at x = 6 and exactly 0 from x = 9; sech^2 is right to an ulp or two."""
    x = np.array([6.0, 9.0, 20.0, -30.0], np.float32)
    t = Tensor(x, requires_grad=True)
    t.tanh().sum().backward()
    np.testing.assert_allclose(t.grad.numpy(), 1 / np.cosh(x.astype(np.float64)) ** 2, rtol=3e-7)


def test_sigmoid_of_very_negative_values_is_subnormal_not_zero() -> None:
    """1 / (1 + exp(100)) is 1 / inf = 0; sigmoid(-100) is 3.7e-44 (PyTorch's float32 sigmoid gives 0)."""
    x = np.array([-88.8, -95.0, -100.0, -103.0], np.float32)
    got = Tensor(x).sigmoid().numpy()
    assert (got > 0).all() and (ulp_error(got, _sigmoid(x.astype(np.float64))) <= 1).all(), got


@pytest.mark.parametrize("terms", [1, 2, 3, 4, 7, 10])
def test_estrin_evaluates_the_polynomial_horner_does(terms: int) -> None:
    """expr.estrin (erfc's polynomial, evaluated in pairs for a shorter chain of dependent operations)
    against numpy's float64 polyval: the same polynomial to a few float32 roundings of its terms."""
    from tinyedu.expr import Expr, estrin

    x = np.linspace(-1, 1, 101).astype(np.float32)
    coefficients = tuple(float(np.float32((-1) ** n / (n + 1.5))) for n in range(terms))
    got = Tensor(estrin(Expr(Tensor(x).lazydata), coefficients).lazydata).numpy()
    exact = np.polyval(np.array(coefficients[::-1]), x.astype(np.float64))
    scale = np.polyval(np.abs(np.array(coefficients[::-1])), np.abs(x.astype(np.float64)))
    assert np.abs(got - exact).max() <= 4 * terms * 2.0**-24 * scale.max()


def torch_error(name: str) -> float:
    """PyTorch's largest ulp error on the same points (for the table in the docs)."""
    import torch

    functions = {"softplus": torch.nn.functional.softplus, "asin": torch.asin, "acos": torch.acos}
    _, exact, points = OPS[name]
    x = points()
    ours = functions.get(name) or getattr(torch, name)
    with np.errstate(all="ignore"):
        return float(ulp_error(ours(torch.from_numpy(x)).numpy(), exact(x.astype(np.float64))).max())


if __name__ == "__main__":  # the table of docs/numerics_and_semantics.md
    devices = sys.argv[1:] or ["C", "NUMPY"]
    print("| op | " + " | ".join(devices) + " | PyTorch |")
    for op in OPS:
        ours = " | ".join(f"{measure(op, d)[0]:.2f}" for d in devices)
        print(f"| `{op}` | {ours} | {torch_error(op):.2f} |")
    for op in GRADIENTS:
        print(f"| `{op}` gradient | " + " | ".join(f"{measure_gradient(op, d)[0]:.2f}" for d in devices))
