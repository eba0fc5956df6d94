"""Stage 0 (notebook 00): gradient checks for Value, and the exercise checkers."""

from __future__ import annotations

import math
from typing import Callable, Sequence

from tinyedu.scalar.value import Value

# ================================================================================================
# stage 0: scalar autograd (Value): gradient checks and the exercises of notebook 00
# ================================================================================================
# A checker prints a short success message for a right answer and raises AssertionError for a
# wrong one. The message says what kind of answer was expected and gives a hint, never the answer.


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


# -- exercise: backpropagation by hand ------------------------------------------------------------
# L = (a * b + c) * f, written in steps e = a * b, d = e + c, L = d * f.
MANUAL_BACKPROP_INPUTS = {"a": 2.0, "b": -3.0, "c": 10.0, "f": -2.0}
_MANUAL_BACKPROP_HINTS = {
    "d": "L = d * f, and the derivative of a product with respect to one factor is the other factor.",
    "f": "L = d * f, and the derivative of a product with respect to one factor is the other factor.",
    "e": "d = e + c: a sum passes the gradient through unchanged, so dL/de = dL/dd * 1.",
    "c": "d = e + c: a sum passes the gradient through unchanged, so dL/dc = dL/dd * 1.",
    "a": "e = a * b, so dL/da = dL/de * de/da, and de/da is the other factor of the product.",
    "b": "e = a * b, so dL/db = dL/de * de/db, and de/db is the other factor of the product.",
}


def _manual_backprop_expected() -> dict[str, float]:
    """The right answers, computed by the engine itself (the unit tests check them by hand)."""
    v = {name: Value(x) for name, x in MANUAL_BACKPROP_INPUTS.items()}
    e = v["a"] * v["b"]
    d = e + v["c"]
    L = d * v["f"]
    L.backward()
    return {"a": v["a"].grad, "b": v["b"].grad, "c": v["c"].grad, "d": d.grad, "e": e.grad, "f": v["f"].grad}


def check_manual_backprop(answers: dict[str, float]) -> None:
    """Check dL/dx for x in a, b, c, d, e, f of L = (a * b + c) * f, worked out by hand."""
    expected = _manual_backprop_expected()
    if not isinstance(answers, dict):
        raise AssertionError(f"manual_backprop: expected a dict like {{'a': ..., 'b': ...}} with one number "
                             f"per name {sorted(expected)}, got {type(answers).__name__}")
    missing = sorted(set(expected) - set(answers))
    if missing:
        raise AssertionError(f"manual_backprop: missing gradient(s) for {missing}; give dL/dx for every x "
                             f"in {sorted(expected)}. Work backwards from L: d and f first, then e and c, "
                             "then a and b.")
    not_numbers = sorted(k for k in expected if not _is_plain_number(answers[k]))
    if not_numbers:
        raise AssertionError(f"manual_backprop: the answers for {not_numbers} are not finite numbers; each "
                             "gradient dL/dx is a single number (an int or a float).")
    wrong = [k for k in sorted(expected) if abs(answers[k] - expected[k]) > 1e-6]
    if wrong:
        hints = "\n".join(f"  dL/d{k}: {_MANUAL_BACKPROP_HINTS[k]}" for k in wrong)
        raise AssertionError(f"manual_backprop: {len(wrong)} of 6 gradients are not right yet: {wrong}.\n"
                             f"{hints}\nThe chain rule multiplies the local derivatives along the path "
                             "from L down to the variable.")
    print("manual_backprop: correct, all six gradients match backward().")


# -- exercise: the derivative of the sigmoid ------------------------------------------------------
_SIGMOID_POINTS = (-4.0, -1.5, -0.3, 0.0, 0.7, 2.0, 5.0)


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def check_exercise_sigmoid_grad(fn: Callable[[float], float]) -> None:
    """Check `fn(x)`, a closed form for the slope of sigmoid(x) = 1 / (1 + exp(-x)), at a few x."""
    if not callable(fn):
        raise AssertionError(f"sigmoid_grad: expected a function of one float returning a float, got "
                             f"{type(fn).__name__}")
    for x in _SIGMOID_POINTS:
        try:
            got = fn(x)
        except Exception as error:  # the learner's code: report what broke and where
            raise AssertionError(f"sigmoid_grad: calling your function with x = {x} raised "
                                 f"{type(error).__name__}: {error}") from error
        if not _is_plain_number(got):
            raise AssertionError(f"sigmoid_grad: at x = {x} your function returned {got!r} "
                                 f"({type(got).__name__}); it should return a finite float.")
        slope = numerical_grad(_sigmoid, [x])[0]
        if abs(got - slope) > 1e-6:
            if abs(got - _sigmoid(x)) < 1e-9:
                hint = "that is sigmoid(x) itself; the exercise asks for its slope."
            else:
                hint = "the slope can be written with sigmoid(x) itself: sigmoid'(x) = sigmoid(x) * (...)."
            raise AssertionError(f"sigmoid_grad: at x = {x} your function returned {got:.6f}, but the "
                                 f"numerical slope of sigmoid there is {slope:.6f}. Hint: {hint}")
    print(f"sigmoid_grad: correct at all {len(_SIGMOID_POINTS)} test points.")


# -- exercise: a new op with its own _backward ----------------------------------------------------
_CUBE_POINTS = (-1.5, 0.5, 2.0)


def check_exercise_custom_op(cube: Callable[[Value], Value]) -> None:
    """Check `cube(x)`: a new primitive Value op computing x**3, with its own `_backward`.

    Three things must hold: the forward value; the output records x as its input (else backward
    never reaches x); the gradient, including when the op's output is scaled (`out_grad` is used)
    and when x feeds two cubes (`+=`, not `=`).
    """
    if not callable(cube):
        raise AssertionError(f"custom_op: expected a function taking a Value and returning a Value, got "
                             f"{type(cube).__name__}")
    for x in _CUBE_POINTS:
        xv = Value(x)
        out = cube(xv)
        if not isinstance(out, Value):
            raise AssertionError(f"custom_op: cube(Value({x})) returned {type(out).__name__}; it must return "
                                 "a new Value, e.g. Value(x.data ** 3, (x,), 'cube').")
        if abs(out.data - x**3) > 1e-9:
            raise AssertionError(f"custom_op: cube(Value({x})).data is {out.data}, not x cubed.")
        if xv not in out._prev:
            raise AssertionError("custom_op: the output does not list x among its inputs (_prev), so "
                                 "backward() cannot reach x; pass (x,) as the children of the new Value.")
        (out * 2.5).backward()  # the gradient arriving at the op is 2.5, not 1
        slope = 3 * x * x
        if abs(xv.grad - 2.5 * slope) > 1e-6:
            if abs(xv.grad - slope) < 1e-6:
                hint = ("your _backward ignores out_grad; multiply the local derivative by the gradient "
                        "arriving from above (chain rule).")
            else:
                hint = "the local derivative of x**3 is wrong."
            raise AssertionError(f"custom_op: in 2.5 * cube(x) at x = {x}, x.grad is {xv.grad:.6f} but "
                                 f"finite differences say {2.5 * slope:.6f}. Hint: {hint}")
        xv = Value(x)
        (cube(xv) + cube(xv)).backward()  # x feeds two ops: its gradient must be the sum
        if abs(xv.grad - 2 * slope) > 1e-6:
            raise AssertionError(f"custom_op: in cube(x) + cube(x) at x = {x}, x.grad is {xv.grad:.6f}, "
                                 "which is not the sum over both uses. Hint: use `x.grad += ...` in "
                                 "_backward, not `x.grad = ...`: a Value used twice collects both "
                                 "contributions.")
    print("custom_op: correct forward, graph link, chain rule and accumulation.")


# -- exercise: what two backward() calls do ---------------------------------------------------------
# x = Value(-2.0); y = x * x * x; y.backward() called three times without zero_grad: x.grad?
_REPEATED_BACKWARD = {"x": -2.0, "calls": 3}


def check_exercise_repeated_backward(answer: float) -> None:
    """Check the value of x.grad after three backward() calls on y = x * x * x at x = -2."""
    x, calls = _REPEATED_BACKWARD["x"], _REPEATED_BACKWARD["calls"]
    if not _is_plain_number(answer):
        raise AssertionError(f"repeated_backward: expected a single number (x.grad), got {answer!r}")
    one_call = 3 * x * x
    if abs(answer - calls * one_call) > 1e-9:
        if abs(answer - one_call) < 1e-9:
            hint = "that is the gradient of one call; does backward() overwrite .grad or add to it?"
        elif abs(answer) < 1e-9:
            hint = "backward() never resets the gradient of x; only zero_grad() does."
        else:
            hint = "work out dy/dx at x = -2 for one call first, then think about what each call adds."
        raise AssertionError(f"repeated_backward: {answer} is not x.grad after {calls} calls. Hint: {hint}")
    print("repeated_backward: correct, leaf gradients accumulate across backward() calls.")


EXERCISES: dict[str, Callable[..., None]] = {
    "manual_backprop": check_manual_backprop,
    "sigmoid_grad": check_exercise_sigmoid_grad,
    "custom_op": check_exercise_custom_op,
    "repeated_backward": check_exercise_repeated_backward,
}


def check_exercise(name: str, answer: object) -> None:
    """Check the answer to the exercise called `name` (see EXERCISES for the names)."""
    if name not in EXERCISES:
        raise ValueError(f"check_exercise: no exercise named {name!r}; the exercises are {sorted(EXERCISES)}")
    EXERCISES[name](answer)
