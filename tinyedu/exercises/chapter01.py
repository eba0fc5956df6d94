"""Chapter 01 (notebook 01, stage 1: tensors and autograd): the exercises and their checkers.

Implement-this: `01.mul` (the Mul Function, plugged in as `tinyedu.core.function.Mul`) and
`01.expand` (the Expand Function, whose backward is a sum, plugged in as `tinyedu.core.function.Expand`).
Predictions and compositions: `01.broadcast_shape`, `01.mish`.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

import tinyedu.core.function as F
from tinyedu import Tensor
from tinyedu.exercises.gradcheck import check_tensor_grads
from tinyedu.exercises.hooks import plug
from tinyedu.exercises.registry import exercise
from tinyedu.lazy import LazyBuffer


# -- the checks behind 01.broadcast_shape and 01.mish ----------------------------------------------
def check_broadcast_shape(a: Sequence[int], b: Sequence[int], answer: Sequence[int] | None) -> str:
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
    return f"{expected}"


def check_mish(mish: Callable[[Any], Any]) -> str:
    """Exercise: mish(x) = x * tanh(softplus(x)), written with Tensor ops; values and gradient checked."""
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
    return ("values match numpy and the gradient matches finite differences. You wrote no backward: "
            "autograd composed it from the primitives.")



BROADCAST_QUESTIONS = (((3, 1, 5), (4, 5)), ((2, 3), (3, 2)), ((8, 1, 6, 1), (7, 1, 5)))


@exercise("01.broadcast_shape", answer="broadcast_shapes", title="Predict broadcast shapes")
def check_broadcast_shapes(answers: dict) -> str:
    """`answers` maps each (shape_a, shape_b) of BROADCAST_QUESTIONS to the broadcast shape, or None."""
    if not isinstance(answers, dict) or set(answers) != set(BROADCAST_QUESTIONS):
        raise AssertionError("expected a dict with one entry per pair of shapes: "
                             f"{list(BROADCAST_QUESTIONS)}")
    for (a, b), answer in answers.items():
        try:
            check_broadcast_shape(a, b, answer)
        except AssertionError as error:
            raise AssertionError(f"{a} with {b}: {error}") from None
    return f"all {len(answers)} shapes."


@exercise("01.mish", answer="mish", title="mish(x) composed from Tensor ops; autograd writes its backward")
def check_mish_exercise(mish: Any) -> str:
    return check_mish(mish)


def _need_function_class(cls: Any, name: str) -> None:
    if not (isinstance(cls, type) and issubclass(cls, F.Function)):
        raise AssertionError(f"{name}: expected a class that subclasses Function "
                             f"(class {name}(Function): ...), got {type(cls).__name__}")


def _tensor(array: np.ndarray, requires_grad: bool = True) -> Any:
    return Tensor(array.astype(np.float32), requires_grad=requires_grad)


def _close(got: Any, want: np.ndarray) -> bool:
    return got is not None and np.shape(got) == np.shape(want) and bool(np.allclose(got, want, rtol=1e-4,
                                                                                      atol=1e-5))


def _pipeline_grads() -> list[np.ndarray]:
    """Gradients of a small network with softmax cross-entropy: every op uses Mul and Expand somewhere."""
    rng = np.random.default_rng(7)
    x = Tensor(rng.standard_normal((5, 4)).astype(np.float32))
    w1, b1, w2 = (_tensor(rng.standard_normal(shape)) for shape in ((4, 6), (6,), (6, 3)))
    logits = (x @ w1 + b1).relu() @ w2
    logits.cross_entropy(Tensor([0, 2, 1, 1, 0])).backward()
    return [p.grad.numpy() for p in (w1, b1, w2)]


def _same_network_gradients(mine: list[np.ndarray], reference: list[np.ndarray], what: str) -> None:
    for name, a, b in zip(("w1", "b1", "w2"), mine, reference, strict=True):
        if not np.allclose(a, b, rtol=1e-4, atol=1e-6):
            raise AssertionError(f"each case passed, yet a small network (matmul, bias, relu, cross-entropy) "
                                 f"gets another gradient for {name} with your {what} plugged in than with "
                                 "the library's. Look at broadcasting shapes other than the ones above.")


# -- exercise: the Mul Function ----------------------------------------------------------------------
@exercise("01.mul", answer="Mul", title="The Mul Function: forward and backward on LazyBuffers",
          hook="tinyedu.core.function.Mul")
def check_mul(Mul: Any) -> str:  # noqa: N803 - the answer is a class
    """Plug `Mul` in as tinyedu.core.function.Mul: values, both gradients, needs_input_grad, a network."""
    _need_function_class(Mul, "Mul")
    rng = np.random.default_rng(0)
    X, Y = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    with plug(F, "Mul", Mul):
        x, y = _tensor(X), _tensor(Y)
        out = x * y
        got = out.numpy()
        if not _close(got, X * Y):
            hint = "you added instead" if _close(got, X + Y) else ("x.e(BinaryOps.MUL, y) multiplies "
                                                                   "elementwise")
            raise AssertionError(f"forward: x * y gives wrong values ({hint}).")
        ctx = Mul((True, True))  # as Tensor._apply makes it when both inputs need a gradient
        ctx.forward(x.lazydata, y.lazydata)
        grads = ctx.backward(x.lazydata)
        if not isinstance(grads, tuple) or len(grads) != 2:
            raise AssertionError("backward must return a tuple with one gradient per input: (grad_x, "
                                 "grad_y).")
        out.sin().sum().backward()  # the gradient arriving at Mul is cos(x*y): not all ones
        G = np.cos(X * Y)
        gx = None if x.grad is None else x.grad.numpy()
        gy = None if y.grad is None else y.grad.numpy()
        if gx is None or gy is None:
            raise AssertionError("backward gave no gradient for " + ("x" if gx is None else "y") + ", though "
                                                                                                   "it "
                                 "needs one (needs_input_grad is True there).")
        if not (_close(gx, Y * G) and _close(gy, X * G)):
            if _close(gx, X * G) and _close(gy, Y * G):
                hint = ("you swapped them: d(x*y)/dx is y, so x's gradient is y times grad (and y's is x "
                        "times grad).")
            elif _close(gx, Y) and _close(gy, X):
                hint = "multiply by grad, the gradient arriving from above (chain rule)."
            elif _close(gx, G) or _close(gy, G):
                hint = "d(x*y)/dx is y: multiply grad by the *other* input, saved in forward."
            else:
                hint = "x's gradient is y * grad and y's is x * grad, in that order."
            raise AssertionError(f"in sin(x * y).sum(), the gradients of x and y are wrong. Hint: {hint}")
        ctx = Mul((True, False))  # only x needs a gradient, as in x * 2 or x * (a constant tensor)
        ctx.forward(x.lazydata, y.lazydata)
        if ctx.backward(x.lazydata)[1] is not None:
            raise AssertionError("with needs_input_grad = (True, False), backward still builds y's gradient: "
                                 "return None where needs_input_grad is False, so no graph is built for a "
                                 "gradient nobody needs.")
        mine = _pipeline_grads()
    _same_network_gradients(mine, _pipeline_grads(), "Mul")
    return ("forward, both gradients, needs_input_grad; a network's gradients (matmul, bias, relu, "
            "cross-entropy: every multiply goes through your Mul) match the library's.")


# -- exercise: the Expand Function ---------------------------------------------------------------------
@exercise("01.expand", answer="Expand", title="The Expand Function: the backward of broadcasting is a sum",
          hook="tinyedu.core.function.Expand")
def check_expand(Expand: Any) -> str:  # noqa: N803 - the answer is a class
    """Plug `Expand` in: broadcasting a column and a row, a 3-d case, then a network's gradients."""
    _need_function_class(Expand, "Expand")
    rng = np.random.default_rng(1)
    C, R = rng.standard_normal((2, 1)), rng.standard_normal((3,))
    with plug(F, "Expand", Expand):
        col, row = _tensor(C), _tensor(R)
        out = col + row  # (2, 1) and (3,) broadcast to (2, 3): reshape, then expand
        if not _close(out.numpy(), C + R):
            raise AssertionError("forward: col + row gives wrong values; forward returns x.expand(shape).")
        ctx = Expand((True,))
        lazy = LazyBuffer.full(1.0, (2, 1), col.dtype, col.device)
        ctx.forward(lazy, shape=(2, 3))
        grad = ctx.backward(LazyBuffer.full(1.0, (2, 3), col.dtype, col.device))
        shape = getattr(grad, "shape", None)
        if shape != (2, 1):
            raise AssertionError(f"backward for a (2, 1) input expanded to (2, 3) returned "
                                 f"{type(grad).__name__} of shape {shape}; it must have the input's shape "
                                 "(2, 1). Sum over the axes expand stretched (size 1 before, bigger after), "
                                 "keeping them: grad.r(ReduceOps.SUM, axes).")
        out.sin().sum().backward()
        G = np.cos(C + R)
        if not (_close(col.grad.numpy(), G.sum(1, keepdims=True)) and _close(row.grad.numpy(), G.sum(0))):
            if _close(col.grad.numpy(), G.max(1, keepdims=True)):
                hint = "every copy sends its gradient back and they add up: SUM, not MAX."
            elif _close(col.grad.numpy(), G.mean(1, keepdims=True)):
                hint = "each copy contributes its whole gradient: sum them, do not average."
            else:
                hint = "reduce only the axes whose size changed, with a SUM."
            raise AssertionError(f"in sin(col + row).sum(), the gradients of the broadcast inputs are wrong. "
                                 f"Hint: {hint}")
        A, B = rng.standard_normal((4, 1, 3)), rng.standard_normal((1, 5, 1))
        a, b = _tensor(A), _tensor(B)
        (a * b).sum().backward()
        if not (_close(a.grad.numpy(), np.broadcast_to(B, (4, 5, 3)).sum(1, keepdims=True)) and
                _close(b.grad.numpy(), np.broadcast_to(A, (4, 5, 3)).sum((0, 2), keepdims=True))):
            raise AssertionError("(4, 1, 3) * (1, 5, 1): wrong gradients when several axes are expanded, or "
                                 "axes in the middle. Sum over every axis whose size changed.")
        mine = _pipeline_grads()
    _same_network_gradients(mine, _pipeline_grads(), "Expand")
    return ("forward and the sum over expanded axes (one, several, in the middle); a network's gradients "
            "(every broadcast, the bias and inside matmul, goes through your Expand) match the library's.")
