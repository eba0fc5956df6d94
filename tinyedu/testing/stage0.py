"""Stage 0: gradient checks for Value (the exercises of notebook 00 are in chapter00.py)."""

from __future__ import annotations

import math
from typing import Callable, Sequence

from tinyedu.scalar.value import Value


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


def _is_plain_number(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
