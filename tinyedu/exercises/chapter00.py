"""Chapter 00 (notebook 00, stage 0: scalar autograd): the exercises and their checkers.

Implement-this: `00.tanh` (a primitive Value op, plugged in as `Value.tanh`), `00.cube` (a new
primitive op), `00.topological_order` (the order backward() walks, plugged in as
`Value._topological_order`). Predictions: `00.manual_backprop`, `00.sigmoid_grad`,
`00.repeated_backward`. Each checker returns a success message or raises AssertionError with a hint.
"""

from __future__ import annotations

import math
import random
import sys
from typing import Any, Callable

from tinyedu.datasets import make_moons
from tinyedu.exercises.checking import is_plain_number, need_function
from tinyedu.exercises.gradcheck import check_value_grads, numerical_grad
from tinyedu.exercises.hooks import plug
from tinyedu.exercises.registry import exercise
from tinyedu.scalar import MLP, fit
from tinyedu.scalar.value import _NO_BACKWARD, Value


def _need_value(out: Any, call: str) -> Value:
    if not isinstance(out, Value):
        raise AssertionError(f"{call} returned {type(out).__name__}; it must return a new Value, made like "
                             "Value(result, (x,), 'name') so that it records its input.")
    return out


def _need_primitive(out: Value, x: Value, call: str) -> None:
    """The op must be one new node whose only input is x, with a _backward of its own."""
    if out._prev != (x,):
        inputs = ", ".join(f"Value({p.data:.4g})" for p in out._prev) or "nothing"
        hint = ("it is built from other ops" if out._prev else "it records no inputs, so backward() can "
                "never reach x")
        raise AssertionError(f"{call}: the output's inputs (_prev) are {inputs}, not just x: {hint}. The "
                             "exercise asks for a primitive: one new Value(result, (x,), 'name') whose only "
                             "input is x, with its own _backward.")
    if out._backward is _NO_BACKWARD:
        raise AssertionError(f"{call} has no _backward: the new Value still has the default that does "
                             "nothing, so no gradient reaches x. Define _backward(out_grad) inside your "
                             "function and assign it: out._backward = _backward.")


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


@exercise("00.manual_backprop", answer="gradients", title="Backpropagation by hand")
def check_manual_backprop(answers: dict[str, float]) -> str:
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
    not_numbers = sorted(k for k in expected if not is_plain_number(answers[k]))
    if not_numbers:
        raise AssertionError(f"manual_backprop: the answers for {not_numbers} are not finite numbers; each "
                             "gradient dL/dx is a single number (an int or a float).")
    wrong = [k for k in sorted(expected) if abs(answers[k] - expected[k]) > 1e-6]
    if wrong:
        hints = "\n".join(f"  dL/d{k}: {_MANUAL_BACKPROP_HINTS[k]}" for k in wrong)
        raise AssertionError(f"manual_backprop: {len(wrong)} of 6 gradients are not right yet: {wrong}.\n"
                             f"{hints}\nThe chain rule multiplies the local derivatives along the path "
                             "from L down to the variable.")
    return "all six gradients match backward()."


# -- exercise: the derivative of the sigmoid ------------------------------------------------------
_SIGMOID_POINTS = (-4.0, -1.5, -0.3, 0.0, 0.7, 2.0, 5.0)


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


@exercise("00.sigmoid_grad", answer="sigmoid_grad", title="The slope of the sigmoid, in closed form")
def check_exercise_sigmoid_grad(fn: Callable[[float], float]) -> str:
    """Check `fn(x)`, a closed form for the slope of sigmoid(x) = 1 / (1 + exp(-x)), at a few x."""
    need_function(fn, "sigmoid_grad", "of one float returning a float")
    for x in _SIGMOID_POINTS:
        try:
            got = fn(x)
        except NotImplementedError:
            raise
        except Exception as error:  # the learner's code: report what broke and where
            raise AssertionError(f"sigmoid_grad: calling your function with x = {x} raised "
                                 f"{type(error).__name__}: {error}") from error
        if not is_plain_number(got):
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
    return f"right at all {len(_SIGMOID_POINTS)} test points."


# -- exercise: Value.tanh, plugged into the library -----------------------------------------------
_TANH_POINTS = (-2.0, -0.5, 0.0, 0.3, 1.2, 30.0, 400.0)


def _tanh_slope_hint(grad: float, x: float, t: float) -> str:
    slope = 1.0 - t * t
    if abs(grad - slope) < 1e-9 and abs(slope) > 1e-9:
        return ("your _backward ignores out_grad; multiply the local slope by the gradient arriving from "
                "above (chain rule).")
    if abs(grad - 2.5 * (1.0 - x * x)) < 1e-9:
        return "you squared the input x; the slope of tanh is 1 - tanh(x)**2: square the output t."
    if abs(grad - 2.5 * (1.0 + t * t)) < 1e-9:
        return "check the sign: the slope of tanh is 1 - tanh(x)**2, which is at most 1."
    return ("d tanh(x)/dx = 1 - tanh(x)**2; the forward pass already computed t = tanh(x), so the _backward "
            "can reuse it.")


@exercise("00.tanh", answer="tanh", title="Value.tanh: a primitive op with its own _backward",
          hook="Value.tanh")
def check_tanh(tanh: Callable[[Value], Value]) -> str:
    """Plug `tanh` in as Value.tanh: forward, graph link, chain rule, accumulation, then train with it."""
    need_function(tanh, "tanh", "taking a Value (self) and returning a Value")
    with plug(Value, "tanh", tanh) as plugged:
        for x in _TANH_POINTS:
            xv = Value(x)
            try:
                out = _need_value(xv.tanh(), f"tanh(Value({x}))")
            except OverflowError as error:
                raise AssertionError(f"tanh(Value({x})) overflowed ({error}): a formula with e**(2x) "
                                     "overflows for large x; math.tanh computes the same value without "
                                     "overflow.") from None
            if abs(out.data - math.tanh(x)) > 1e-12:
                raise AssertionError(f"tanh(Value({x})).data is {out.data!r}, not tanh({x}); "
                                     "math.tanh computes it.")
            _need_primitive(out, xv, f"tanh(Value({x}))")
            (out * 2.5).backward()  # the gradient arriving at tanh is 2.5, not 1
            t = math.tanh(x)
            if abs(xv.grad - 2.5 * (1.0 - t * t)) > 1e-9:
                raise AssertionError(f"in 2.5 * tanh(x) at x = {x}, x.grad is {xv.grad:.6g}, the right value "
                                     f"is {2.5 * (1 - t * t):.6g}. Hint: {_tanh_slope_hint(xv.grad, x, t)}")
            xv = Value(x)
            (xv.tanh() + xv.tanh()).backward()  # x feeds two ops: its gradient is the sum
            if abs(xv.grad - 2.0 * (1.0 - t * t)) > 1e-9:
                raise AssertionError(f"in tanh(x) + tanh(x) at x = {x}, x.grad is {xv.grad:.6g}, which is "
                                     "not the sum over both uses. Hint: use `self.grad += ...` in _backward, "
                                     "not `=`.")
        check_value_grads(lambda a, b: (a * b + 0.3).tanh() * a, [0.7, -1.3])
        plugged.calls = 0
        mine = _train_tanh_mlp()
        plugged.require_called("Value.tanh")
    reference = _train_tanh_mlp()
    if any(abs(a - b) > 1e-9 for a, b in zip(mine, reference, strict=True)):
        raise AssertionError("each op is right on its own, yet an MLP trained with your tanh follows another "
                             f"loss curve ({mine[-1]:.6f} instead of {reference[-1]:.6f} after "
                             f"{len(mine)} steps). Does your tanh change anything besides its output?")
    return (f"forward, a primitive op, chain rule and accumulation; an MLP with tanh neurons trained with "
            f"your Value.tanh follows the library's loss curve exactly ({mine[-1]:.4f} after "
            f"{len(mine)} steps).")


def _train_tanh_mlp(steps: int = 5) -> list[float]:
    """Train a small tanh MLP on moons, whatever Value.tanh currently is; the loss after each step."""
    X, y = make_moons(n_samples=20, noise=0.1, seed=0)
    model = MLP(2, [6, 1], nonlinearity="tanh", rng=random.Random(0))
    return [loss for loss, _ in fit(model, X, 2 * y - 1, steps=steps, learning_rate=0.5, alpha=1e-4)]


# -- exercise: a new op with its own _backward ----------------------------------------------------
_CUBE_POINTS = (-1.5, 0.5, 2.0)


@exercise("00.cube", answer="cube", title="cube(x): a new primitive op with its own _backward")
def check_exercise_custom_op(cube: Callable[[Value], Value]) -> str:
    """Check `cube(x)`: a new primitive Value op computing x**3, with its own `_backward`.

    Four things must hold: the forward value; the op is one new node whose only input is x (a
    composition such as x*x*x is not what is asked); the gradient, including when the op's output is
    scaled (`out_grad` is used); and when x feeds two cubes (`+=`, not `=`).
    """
    need_function(cube, "cube", "taking a Value and returning a Value")
    for x in _CUBE_POINTS:
        xv = Value(x)
        out = _need_value(cube(xv), f"cube(Value({x}))")
        if abs(out.data - x**3) > 1e-9:
            raise AssertionError(f"cube(Value({x})).data is {out.data}, not x cubed.")
        _need_primitive(out, xv, f"cube(Value({x}))")
        (out * 2.5).backward()  # the gradient arriving at the op is 2.5, not 1
        slope = 3 * x * x
        if abs(xv.grad - 2.5 * slope) > 1e-6:
            if abs(xv.grad - slope) < 1e-6:
                hint = ("your _backward ignores out_grad; multiply the local derivative by the gradient "
                        "arriving from above (chain rule).")
            else:
                hint = "the local derivative of x**3 is wrong."
            raise AssertionError(f"in 2.5 * cube(x) at x = {x}, x.grad is {xv.grad:.6f} but "
                                 f"finite differences say {2.5 * slope:.6f}. Hint: {hint}")
        xv = Value(x)
        (cube(xv) + cube(xv)).backward()  # x feeds two ops: its gradient must be the sum
        if abs(xv.grad - 2 * slope) > 1e-6:
            raise AssertionError(f"in cube(x) + cube(x) at x = {x}, x.grad is {xv.grad:.6f}, "
                                 "which is not the sum over both uses. Hint: use `x.grad += ...` in "
                                 "_backward, not `x.grad = ...`: a Value used twice collects both "
                                 "contributions.")
    return "forward, a primitive op, chain rule and accumulation."


# -- exercise: the order backward() walks, plugged into the library --------------------------------
def _diamond() -> tuple[Value, list[Value]]:
    a, b = Value(2.0, label="a"), Value(-3.0, label="b")
    c = a * b
    c.label = "c=a*b"
    d = c + a
    d.label = "d=c+a"
    e = d * d
    e.label = "e=d*d"
    return e, [a, b, c, d, e]


def _check_order(order: Any, nodes: list[Value]) -> None:
    """`order` lists every node once, each after its inputs."""
    if not isinstance(order, list) or not all(isinstance(v, Value) for v in order):
        raise AssertionError(f"topological_order must return a list of Values, got {type(order).__name__}"
                             + (" with other things in it" if isinstance(order, list) else ""))
    labels = [v.label or f"Value({v.data:g})" for v in order]
    missing = [n.label for n in nodes if all(v is not n for v in order)]
    if missing:
        raise AssertionError(f"the order {labels} misses {missing}: visit the inputs (_prev) of every node "
                             "you reach, not only those of the root.")
    repeated = sorted({v.label for v in order if sum(w is v for w in order) > 1})
    if repeated:
        raise AssertionError(f"the order {labels} lists {repeated} more than once: a Value used by two "
                             "ops is still one node. Remember the nodes you have visited (a set) and skip "
                             "them.")
    position = {id(v): i for i, v in enumerate(order)}
    for node in order:
        early = sorted({p.label for p in node._prev if position[id(p)] > position[id(node)]})
        if early:
            raise AssertionError(f"in the order {labels}, {node.label} comes before its input(s) {early}. "
                                 "A node must come after all its inputs: add it to the list only once its "
                                 "inputs are in (a post-order), so that backward() can walk the list in "
                                 "reverse.")


@exercise("00.topological_order", answer="topological_order",
          title="The order backward() walks: a topological sort without recursion",
          hook="Value._topological_order")
def check_topological_order(topological_order: Callable[[Value], list[Value]]) -> str:
    """Order a diamond graph and a chain deeper than Python's recursion limit; then backprop with it."""
    need_function(topological_order, "topological_order", "taking the root Value and returning a list")
    root, nodes = _diamond()
    _check_order(topological_order(root), nodes)
    depth = 2 * sys.getrecursionlimit() + 100
    x = Value(0.5, label="x")
    y = x
    for _ in range(depth):
        y = y * 1.0
    try:
        order = topological_order(y)
    except RecursionError:
        raise AssertionError(f"a chain of {depth} ops went past Python's recursion limit "
                             f"({sys.getrecursionlimit()}): a recursive search makes one call per level. "
                             "Keep your own stack (a list of nodes still to visit) instead.") from None
    if not isinstance(order, list) or len(order) != 2 * depth + 1 or order[0] is not x or order[-1] is not y:
        raise AssertionError(f"on a chain of {depth} multiplications (x first, the root last, "
                             f"{2 * depth + 1} nodes with the constants) your order is not right; the "
                             "small graph passed, so look for a limit or a shortcut that only shows on long "
                             "graphs.")
    with plug(Value, "_topological_order", topological_order) as plugged:
        grads = check_value_grads(lambda a, b: ((a * b + a) * (a * b + a)).tanh() + b, [0.4, -0.7])
        root, _ = _diamond()
        root.backward()
        root.zero_grad()
        plugged.require_called("Value._topological_order")
    return (f"every node once, after its inputs, even on a chain of {depth} ops; backward() and zero_grad() "
            f"ran on your order and the gradients match finite differences ({grads[0]:.4f}, {grads[1]:.4f}).")


# -- exercise: what three backward() calls do ---------------------------------------------------------
# x = Value(-2.0); y = x * x * x; y.backward() called three times without zero_grad: x.grad?
_REPEATED_BACKWARD = {"x": -2.0, "calls": 3}


@exercise("00.repeated_backward", answer="x_grad", title="Predict x.grad after three backward() calls")
def check_exercise_repeated_backward(answer: float) -> str:
    """Check the value of x.grad after three backward() calls on y = x * x * x at x = -2."""
    x, calls = _REPEATED_BACKWARD["x"], _REPEATED_BACKWARD["calls"]
    if not is_plain_number(answer):
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
    return "leaf gradients accumulate across backward() calls."
