"""Gradient checks and the checkers used by exercises."""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import numpy as np

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


# ================================================================================================
# stage 1: gradient checks for Tensor ops
# ================================================================================================
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


# ================================================================================================
# stage 1: tensors (notebook 01) -- exercises on broadcasting and on composing ops
# ================================================================================================
def check_broadcast_shape(a: Sequence[int], b: Sequence[int], answer: Sequence[int] | None) -> None:
    """Exercise: the shape numpy broadcasting gives `a` and `b` (None if they do not broadcast)."""
    try:
        expected: tuple[int, ...] | None = tuple(np.broadcast_shapes(tuple(a), tuple(b)))
    except ValueError:
        expected = None
    given = None if answer is None else tuple(answer)
    if given != expected:
        raise AssertionError(
            "not quite. Line the shapes up on the right; pad the shorter one with 1s on the left. Then each "
            "axis must be equal, or one of them 1 (which stretches to the other); if neither, the shapes do "
            "not broadcast and the answer is None.")
    print(f"Correct: {expected}")


def check_mish(mish: Callable[[Any], Any]) -> None:
    """Exercise: mish(x) = x * tanh(softplus(x)), written with Tensor ops; values and gradient checked."""
    from tinyedu import Tensor

    xs = np.array([-4.0, -1.5, -0.3, 0.0, 0.4, 1.0, 2.5, 6.0], dtype=np.float32)

    def reference(x: np.ndarray) -> np.ndarray:
        return x * np.tanh(np.log1p(np.exp(x)))

    x = Tensor(xs, requires_grad=True)
    out = mish(x)
    if not isinstance(out, Tensor) or out.shape != x.shape:
        raise AssertionError(f"mish must return a Tensor of the input's shape {x.shape}")
    got = out.numpy()
    if not np.allclose(got, reference(xs), rtol=1e-4, atol=1e-5):
        raise AssertionError("the values are off. softplus(x) = log(1 + exp(x)) (Tensor has .softplus()), "
                             "then tanh, then multiply by x itself.")
    out.sum().backward()
    check_tensor_grads(lambda a: float(reference(a.astype(np.float64)).sum()), [xs], [x.grad.numpy()])
    print("Correct: values match numpy and the gradient matches finite differences. You wrote no "
          "backward: autograd composed it from the primitives.")


# ================================================================================================
# stage 1: views (notebook 02) -- exercises on strides and index expressions
# ================================================================================================
def check_strides(shape: Sequence[int], order: Sequence[int], answer: Sequence[int]) -> None:
    """Exercise: the strides of a fresh C-order tensor of `shape` after `permute(order)`."""
    from tinyedu.shape import ShapeTracker

    expected = ShapeTracker.from_shape(tuple(shape)).permute(tuple(order)).views[-1].strides
    if not isinstance(answer, (tuple, list)) or len(answer) != len(expected):
        raise AssertionError(f"give one stride per axis: a tuple of {len(expected)} ints")
    if tuple(answer) != tuple(expected):
        raise AssertionError(
            "not quite. First write the strides of the fresh tensor: the last axis has stride 1, and each "
            "axis before it steps over everything after it. Then permute moves those strides with their "
            "axes: new axis k is old axis order[k].")
    print(f"Correct: strides {tuple(expected)}. Permute only reorders the strides; memory is untouched.")


def check_index_expression(t: Any, answer: str) -> None:
    """Exercise: the index expression a tensor's ShapeTracker renders (spaces are ignored)."""
    index, _ = t.lazydata.st.expr_idxs()
    expected = index.render()
    if not isinstance(answer, str):
        raise AssertionError("write the expression as a string, e.g. \"((idx0*4)+idx1)\"")
    if answer.replace(" ", "") != expected.replace(" ", ""):
        variables = sorted({part for part in expected.replace("(", " ").replace(")", " ").replace("*", " ")
                            .replace("+", " ").split() if part.startswith("idx")})
        raise AssertionError(
            f"not quite. The expression uses the variables {variables}. Work out the offset of element "
            "(0, 0) first, then how far one step along each axis moves in memory (a flip makes that step "
            "negative). The renderer writes products as (idxK*stride) and sums left to right.")
    print(f"Correct: {expected}")


# ================================================================================================
# stage 2: the scheduler (notebook 03) -- predict how many kernels an expression takes
# ================================================================================================
def check_kernel_count(build: Callable[[], Any], predicted: int) -> None:
    """Exercise: predict how many kernels the scheduler makes for the Tensor `build()` returns."""
    from tinyedu.engine.schedule import create_schedule
    from tinyedu.ops import LoadOps

    if not isinstance(predicted, int) or isinstance(predicted, bool):
        raise AssertionError("predict the number of kernels as an int")
    tensor = build()
    kernels = [item for item in create_schedule([tensor.lazydata]) if not isinstance(item.ast.op, LoadOps)]
    if predicted == len(kernels):
        print(f"Correct: {len(kernels)} kernel(s).")
        return
    rules = sorted({item.reason for item in kernels if not item.reason.startswith("rule 1")})
    direction = "more" if len(kernels) > predicted else "fewer"
    hint = ("Besides the output, buffers were stored by: " + "; ".join(rules)) if rules else \
        "Only the output is stored here: everything else fuses into one kernel."
    raise AssertionError(f"not quite: the scheduler makes {direction} kernels than {predicted}. {hint}")


# ================================================================================================
# stages 3-4: the linearizer and the C backend (notebooks 04, 05) -- predict loops, loads, C code
# ================================================================================================
# Each exercise is about the one compute kernel of a Tensor expression: `build` returns the Tensor
# (or, for the compile count, a list of Tensors). Nothing is run unless the checker says so.
def _one_kernel(build: Callable[[], Any], exercise: str) -> Any:
    """The Kernel of the single compute kernel that `build()` schedules."""
    from tinyedu.codegen.kernel import Kernel
    from tinyedu.engine.schedule import create_schedule
    from tinyedu.ops import LoadOps

    items = [item for item in create_schedule([build().lazydata]) if not isinstance(item.ast.op, LoadOps)]
    if len(items) != 1:
        raise ValueError(f"{exercise}: the expression makes {len(items)} compute kernels; this exercise "
                         "needs an expression that is exactly one kernel")
    return Kernel(items[0].ast)


def _int_list(answer: Any) -> list[int] | None:
    if not isinstance(answer, (list, tuple)) or not all(isinstance(a, int) and not isinstance(a, bool)
                                                          for a in answer):
        return None
    return list(answer)


def check_loop_bounds(build: Callable[[], Any], predicted: Sequence[int]) -> None:
    """Exercise: the loop sizes (the RANGE ends) of the kernel for `build()`, outermost first."""
    kernel = _one_kernel(build, "check_loop_bounds")
    expected = list(kernel.full_shape)
    given = _int_list(predicted)
    if given is None:
        raise AssertionError("give one int per loop, outermost loop first, e.g. [4, 6]")
    if given == expected:
        loops = " ".join(f"{name}<{size}" for name, size in zip(kernel.loop_names, expected, strict=True))
        print(f"Correct: {loops}" + (f" (the reduce loops start at {kernel.loop_names[kernel.first_reduce]})"
                                     if kernel.reduceop is not None else ""))
        return
    if sorted(given) == sorted(expected):
        raise AssertionError("the right sizes in the wrong order: the Kernel puts the output axes first and "
                             "the reduced axes last, so the reduce loops are the innermost.")
    if len(given) != len(expected):
        more = "more" if len(expected) > len(given) else "fewer"
        raise AssertionError(f"the kernel has {more} loops than {len(given)}. There is one loop per axis of "
                             "the shape the kernel iterates over (for a reduce: the shape *before* it is "
                             "reduced), except axes of size 1: a loop that runs once is no loop.")
    raise AssertionError("not quite: the loop sizes differ. For a reduce, the loops run over the reduce's "
                         "input shape (a matmul (n, k) @ (k, m) reduces a broadcast (n, m, k) product), "
                         "output axes first, then the reduced axes.")


def check_load_count(build: Callable[[], Any], predicted: int) -> None:
    """Exercise: how many LOAD UOps the linearizer emits for the kernel of `build()`."""
    from tinyedu.codegen.linearizer import linearize
    from tinyedu.codegen.uops import UOps

    if not isinstance(predicted, int) or isinstance(predicted, bool):
        raise AssertionError("predict the number of LOAD UOps as an int")
    kernel = _one_kernel(build, "check_load_count")
    expected = sum(u.op is UOps.LOAD for u in linearize(kernel))
    if predicted == expected:
        print(f"Correct: {expected} LOAD(s).")
        return
    if predicted > expected:
        raise AssertionError(f"fewer LOADs than {predicted}. A subtree the AST repeats is computed once, so "
                             "a buffer read through the same view is loaded once per iteration however many "
                             "times the expression uses it; and constants are CONST UOps, not loads.")
    raise AssertionError(f"more LOADs than {predicted}. A buffer read through two different views (say x and "
                         "x.flip(0)) is two loads: at one loop position they read different elements. A "
                         "padded read is still a load (a gated one).")


# -- exercise: the C expression of a UOp list ------------------------------------------------------
C_TEST_VALUES = [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 0.1, 3.0, 1e-3, 20.0, -20.0, 100.0, -100.0, 1e30, -1e30,
                 1e-40, float("inf"), float("-inf"), float("nan")]


def _c_expression_inputs(kernel: Any) -> dict[int, np.ndarray]:
    """Test inputs for each buffer: edge values and random ones, in a different order per buffer.

    There are at least as many as C_TEST_VALUES plus 64, rounded up to whole runs of the kernel.
    """
    from tinyedu.ops import MemBuffer

    size = kernel.full_shape[0]
    total = -(-(len(C_TEST_VALUES) + 64) // size) * size
    rng = np.random.default_rng(0)
    inputs = {}
    for buf in kernel.bufs[1:]:
        if isinstance(buf, MemBuffer) and buf.idx not in inputs:
            values = C_TEST_VALUES + list(rng.standard_normal(total - len(C_TEST_VALUES)) * 4)
            inputs[buf.idx] = rng.permutation(np.array(values, dtype=np.float32))
    return inputs


def check_c_expression(build: Callable[[], Any], answer: str) -> None:
    """Exercise: the C expression the kernel of `build()` stores, written by hand from its UOps.

    The kernel must be elementwise over one axis, reading float32 buffers element by element. Name
    the LOADs `val0, val1, ...` in the order of the listing. The answer is compiled (with the same
    compiler and flags as the kernels) into a loop `data0[gidx0] = <answer>;` and run on edge values
    (0, -0, inf, nan, ...) and random ones; every result must have the same bits as the kernel's.
    """
    import ctypes

    from tinyedu.codegen.linearizer import linearize
    from tinyedu.codegen.uops import UOps
    from tinyedu.dtype import dtypes
    from tinyedu.ops import MemBuffer
    from tinyedu.renderer.cstyle import HELPERS
    from tinyedu.runtime.device import Buffer, Device
    from tinyedu.runtime.ops_c import CompileError, Compiler
    from tinyedu.shape import ShapeTracker

    if not isinstance(answer, str) or not answer.strip():
        raise AssertionError("write the C expression as a string, e.g. \"(val0*2.0f)+val1\"")
    kernel = _one_kernel(build, "check_c_expression")
    contiguous = ShapeTracker.from_shape(kernel.full_shape)
    plain = all(b.dtype == dtypes.float32 and st == contiguous
                for b, st in zip(kernel.bufs, kernel.sts, strict=True) if isinstance(b, MemBuffer))
    if len(kernel.full_shape) != 1 or kernel.reduceop is not None or not plain:
        raise ValueError("check_c_expression: this exercise needs an elementwise float32 kernel over one "
                         "axis that reads every buffer element by element (a 1-D expression of 1-D tensors)")
    size = kernel.full_shape[0]
    loads = [u for u in linearize(kernel) if u.op is UOps.LOAD]
    inputs = _c_expression_inputs(kernel)
    total = len(next(iter(inputs.values()))) if inputs else size

    # the kernel's own result: its generated C, compiled and run as the C device runs it (in chunks)
    program, expected = Device["C"].get_runner(kernel.ast), np.zeros(total, np.float32)
    for start in range(0, total, size):
        out = Buffer("C", size, dtypes.float32)
        program([out, *(Buffer("C", size, dtypes.float32).copyin(inputs[i][start:start + size])
                        for i in sorted(inputs))])
        expected[start:start + size] = out.as_numpy()

    # the answer, in a loop that loads val0, val1, ... as the kernel does
    params = ", ".join(["float* restrict data0"] + [f"const float* restrict data{i}" for i in sorted(inputs)])
    reads = " ".join(f"float val{k} = data{u.src[0].arg}[gidx0];" for k, u in enumerate(loads))
    source = "\n".join(["#include <math.h>", "#include <stdbool.h>", *HELPERS.values(),
                        f"void exercise({params}) {{",
                        f"  for (int gidx0 = 0; gidx0 < {total}; gidx0++) {{ {reads}",
                        f"    data0[gidx0] = {answer};", "  }", "}", ""])
    try:
        library = Compiler().load(source)
    except CompileError as error:
        first = next((line for line in str(error).split("--- compiler output ---")[-1].splitlines()
                      if "error" in line), "")
        raise AssertionError(f"the compiler rejects this expression: {first.split('error:')[-1].strip()}\n"
                             f"Names: the loads are {', '.join(f'val{k}' for k in range(len(loads)))} in "
                             "listing order; float literals end in f (2.0f); functions: sqrtf, exp2f, log2f, "
                             "sinf, max_float32.") from None
    got = np.zeros(total, np.float32)
    arrays = [got] + [inputs[i] for i in sorted(inputs)]
    library.exercise.restype = None
    library.exercise(*(ctypes.c_void_p(a.ctypes.data) for a in arrays))
    same = (got.view(np.uint32) == expected.view(np.uint32)) | (np.isnan(got) & np.isnan(expected))
    if not same.all():
        i = int(np.argmin(same))
        at = ", ".join(f"val{k}={inputs[u.src[0].arg][i]!s}" for k, u in enumerate(loads))
        raise AssertionError(
            f"at {at} your expression gives {got[i]!s}, the kernel {expected[i]!s}. Read the listing from "
            "the STORE's value back to the loads: each ALU names its sources by number, in order. A literal "
            "without the f suffix is a double, which rounds differently; MAX must keep NaN (max_float32, "
            "not fmaxf); a comparison with its constant first (CMPLT [const, x]) is const < x.")
    print(f"Correct: bit for bit the kernel's result on {total} inputs (edge values included).")


# -- exercise: how many compiles -------------------------------------------------------------------
def check_compile_count(build: Callable[[], Sequence[Any]], predicted: int) -> None:
    """Exercise: how many different C sources (compiles, on a cold cache) the Tensors of `build()` need.

    Each Tensor is realized on its own, as with `.realize()` one after the other. The compile
    cache is keyed by the source text, so two kernels share a compiled library exactly when their
    generated C is the same.
    """
    from tinyedu.codegen.kernel import Kernel
    from tinyedu.codegen.linearizer import linearize
    from tinyedu.engine.schedule import create_schedule
    from tinyedu.ops import LoadOps
    from tinyedu.renderer.cstyle import render_c

    if not isinstance(predicted, int) or isinstance(predicted, bool):
        raise AssertionError("predict the number of compiles as an int")
    sources = set()
    kernels = 0
    for tensor in build():
        for item in create_schedule([tensor.lazydata]):
            if not isinstance(item.ast.op, LoadOps):
                kernel = Kernel(item.ast)
                sources.add(render_c(kernel.name, linearize(kernel)))
                kernels += 1
    if predicted == len(sources):
        print(f"Correct: {kernels} kernel(s), {len(sources)} different source(s), "
              f"so {len(sources)} compile(s).")
        return
    if predicted > len(sources):
        raise AssertionError(f"fewer compiles than {predicted}. The cache key is the C source (with the "
                             "compiler and flags): which buffers a kernel reads is not in the source, they "
                             "are its arguments. The same computation on other data reuses the library.")
    raise AssertionError(f"more compiles than {predicted}. A constant is written into the source (2.0f is "
                         "not 3.0f), and so is the shape (in the loop bounds and the kernel's name): change "
                         "either and the source, and its cache entry, is new.")
