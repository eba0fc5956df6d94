"""Gradient checks: backward() compared with finite differences, for Values and for Tensor ops.

Finite differences need nothing but the forward pass, so they are an oracle that shares no code with
the backward being checked. The exercises use these checks, and so do the op tests
(tests/test_ops.py uses check_tensor_grads).
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from tinyedu.scalar.value import Value


# ---- Value (chapter 00): plain floats ------------------------------------------------------------
def numerical_grad(f: Callable[..., float], xs: Sequence[float], eps: float = 1e-6) -> list[float]:
    """df/dx_i for every input, by central differences (f(.., x_i + h, ..) - f(.., x_i - h, ..)) / 2h.

    `f` is called as f(*xs) with plain floats (returning a float, or a Value whose .data is used).
    Central differences are exact for quadratics and err by O(h^2) in general, where the one-sided
    (f(x + h) - f(x)) / h errs by O(h): that is what makes them a trustworthy oracle.
    """
    xs = [float(x) for x in xs]
    grads = []
    for i in range(len(xs)):
        up, down = list(xs), list(xs)
        up[i] += eps
        down[i] -= eps
        grads.append((_as_float(f(*up)) - _as_float(f(*down))) / (2 * eps))
    return grads


def check_value_grads(f: Callable[..., Value], xs: Sequence[float], eps: float = 1e-6, rtol: float = 1e-5,
                      atol: float = 1e-6) -> list[float]:
    """Assert that `backward()` through f(*Values) agrees with finite differences; return its grads.

    `f` takes Values and returns a Value, e.g. `lambda a, b: (a * b).tanh()`. The finite
    differences evaluate the same f on fresh Values (forward only), so the check shares nothing
    with backward but the forward pass.
    """
    inputs = [Value(x) for x in xs]
    f(*inputs).backward()
    analytic = [v.grad for v in inputs]
    numeric = numerical_grad(lambda *zs: f(*[Value(z) for z in zs]).data, xs, eps)
    for i, (a, n) in enumerate(zip(analytic, numeric, strict=True)):
        if not abs(a - n) <= atol + rtol * abs(n):
            raise AssertionError(f"gradient of input {i} (x = {float(xs[i])!r}): backward gave {a:.8g}, "
                                 f"finite differences {n:.8g}; the _backward of some op in f is wrong")
    return analytic


def _as_float(y: object) -> float:
    return y.data if isinstance(y, Value) else float(y)


# ---- Tensor ops (chapter 01 on): float32 arrays ---------------------------------------------------
# A Tensor op's backward is checked against finite differences of a scalar loss. The loss is a
# plain Python function of numpy arrays (the op's inputs), so the check knows nothing of autograd.
def tensor_numerical_grad(loss: Callable[..., float], arrays: Sequence[np.ndarray],
                          eps: float = 1e-3) -> list[np.ndarray]:
    """d loss / d (every element of every array), by central differences (L(x+h) - L(x-h)) / 2h.

    The arrays are float32 like the tensors they become, so x + h is rounded; we divide by the
    step that was really taken, not by the 2h we asked for.
    """
    arrays = [np.asarray(a, dtype=np.float32) for a in arrays]
    grads = []
    for k, array in enumerate(arrays):
        grad = np.zeros(array.shape, dtype=np.float64)
        for index in np.ndindex(array.shape):
            x = float(array[index])
            up, down = np.float32(x + eps), np.float32(x - eps)
            values = []
            for moved in (up, down):
                shifted = array.copy()
                shifted[index] = moved
                values.append(loss(*arrays[:k], shifted, *arrays[k + 1:]))
            grad[index] = (values[0] - values[1]) / (float(up) - float(down))
        grads.append(grad)
    return grads


def check_tensor_grads(loss: Callable[..., float], arrays: Sequence[np.ndarray], grads: Sequence[np.ndarray],
                       eps: float = 1e-3, rtol: float = 1e-2, atol: float = 1e-2, max_elements: int = 40,
                       directions: int = 3, seed: int = 0) -> None:
    """Assert that `grads` (what backward gave for each array) match finite differences of `loss`.

    Up to `max_elements` input elements in all are checked one by one (2 evaluations each).
    Bigger inputs are checked along a few random directions v instead, as JAX's check_grads
    does: (L(x + h v) - L(x - h v)) / 2h must equal sum(grad * v). Tolerances are loose
    because float32 finite differences are noisy: |numerical - analytic| <= atol * scale + rtol *
    |analytic|, with scale the largest gradient (at least 1).
    """
    arrays = [np.asarray(a, dtype=np.float32) for a in arrays]
    grads = [np.asarray(g, dtype=np.float64) for g in grads]
    scale = max([1.0] + [float(np.abs(g).max()) for g in grads if g.size])
    if sum(a.size for a in arrays) <= max_elements:
        numericals = tensor_numerical_grad(loss, arrays, eps)
        for k, (numerical, analytic) in enumerate(zip(numericals, grads, strict=True)):
            error = np.abs(numerical - analytic)
            nan_differs = np.isnan(numerical) != np.isnan(analytic)
            bad = (error > atol * scale + rtol * np.abs(analytic)) | nan_differs
            if bad.any():
                where = tuple(int(i) for i in np.argwhere(bad)[0])
                raise AssertionError(f"gradient of input {k} (shape {arrays[k].shape}) at {where}: backward "
                                     f"gave {analytic[where]:.6g}, finite differences "
                                     f"{numerical[where]:.6g}\nbackward:\n{analytic}\nnumerical:\n{numerical}")
        return
    rng = np.random.default_rng(seed)
    for _ in range(directions):
        ups, downs = [], []
        for a in arrays:
            v = rng.standard_normal(a.shape)
            ups.append((a + eps * v).astype(np.float32))
            downs.append((a - eps * v).astype(np.float32))
        step = [up.astype(np.float64) - down for up, down in zip(ups, downs, strict=True)]
        numerical = loss(*ups) - loss(*downs)
        analytic = sum(float((g * s).sum()) for g, s in zip(grads, step, strict=True))
        size = sum(float(np.abs(g * s).sum()) for g, s in zip(grads, step, strict=True))
        if not abs(numerical - analytic) <= atol * 2 * eps * scale + rtol * size:  # (NaN fails too)
            raise AssertionError(f"directional derivative: backward gives {analytic / (2 * eps):.6g}, finite "
                                 f"differences {numerical / (2 * eps):.6g} (along a random direction)")
