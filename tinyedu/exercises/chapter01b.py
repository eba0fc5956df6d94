"""Chapter 01b (notebook 01b: numerics and semantics): the exercises and their checkers.

Implement-this:
- `01b.softplus`: a numerically stable composite Function (a subclass of
  `tinyedu.function_composite.UnaryFunction`), plugged in as `function_composite.Softplus`, so that
  `Tensor.softplus`, `mish`, `logsigmoid` and `binary_cross_entropy_with_logits` all run on it.
- `01b.toposort`: a walk over a kernel AST (a DAG) that visits each node once, plugged in as
  `LazyOp.toposort`, which the engine's FLOP counter (`schedule.count_flops`) runs on every kernel.

Predictions: `01b.nan_compare` and `01b.signed_zero`.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

import tinyedu.function_composite as FC
from tinyedu import Tensor
from tinyedu.core.dtype import dtypes
from tinyedu.core.helpers import GlobalCounters
from tinyedu.core.ops import BinaryOps, BufferOps, ConstBuffer, LazyOp, LoadOps
from tinyedu.engine.schedule import count_flops, create_schedule
from tinyedu.exercises.hooks import plug
from tinyedu.exercises.registry import exercise
from tinyedu.shape import ShapeTracker

# ---- 01b.softplus: a stable composite Function ----
SOFTPLUS_X = np.array([-1e4, -100.0, -17.0, -1.0, -1e-3, 0.0, 1e-3, 1.0, 17.0, 19.5, 25.0, 100.0, 1e4],
                      np.float32)


def _softplus_reference(x: np.ndarray, beta: float = 1.0, threshold: float = 20.0) -> np.ndarray:
    x = x.astype(np.float64)
    return np.where(x * beta > threshold, x, np.logaddexp(0.0, x * beta) / beta)


def _sigmoid64(z: np.ndarray) -> np.ndarray:
    return np.exp(-np.logaddexp(0.0, -z))


@exercise("01b.softplus", answer="Softplus", title="A stable softplus Function: log1p, a threshold, a "
          "sigmoid that never overflows", hook="tinyedu.function_composite.Softplus")
def check_softplus(softplus_class: Any) -> str:
    """The learner's Softplus, plugged in: values (tiny and huge), beta and threshold, gradients
    (no NaN anywhere), and then mish and binary_cross_entropy_with_logits running on it."""
    if not (isinstance(softplus_class, type) and issubclass(softplus_class, FC.UnaryFunction)):
        raise AssertionError("expected a class derived from UnaryFunction (class Softplus(UnaryFunction): "
                             "with "
                             "value(self, x) and derivative(self, x, ret)), got "
                             f"{type(softplus_class).__name__}")
    made = []

    class Counted(softplus_class):  # type: ignore[misc, valid-type]
        def forward(self, *args: Any, **kwargs: Any) -> Any:
            made.append(1)
            return super().forward(*args, **kwargs)

    with plug(FC, "Softplus", Counted):
        x = Tensor(SOFTPLUS_X, requires_grad=True)
        out = x.softplus()
        got, expected = out.numpy().astype(np.float64), _softplus_reference(SOFTPLUS_X)
        _check_values(got, expected, "x.softplus()")
        out.sum().backward()
        grad = x.grad.numpy().astype(np.float64)
        _check_gradient(grad, np.where(SOFTPLUS_X > 20, 1.0, _sigmoid64(SOFTPLUS_X.astype(np.float64))))
        y = Tensor(SOFTPLUS_X)
        got2 = y.softplus(beta=2.0, threshold=10.0).numpy().astype(np.float64)
        expected2 = _softplus_reference(SOFTPLUS_X, 2.0, 10.0)
        if not np.allclose(got2, expected2, rtol=1e-5, atol=1e-30, equal_nan=False):
            raise AssertionError("x.softplus(beta=2.0, threshold=10.0) is off: use the parameters, "
                                 "self.params['beta'] and self.params['threshold']: log(1 + exp(beta x)) / "
                                 "beta, "
                                 "and x itself where beta x > threshold (the derivative too)")
        # the pipeline: composite ops and a loss that use softplus, forward and backward, compiled
        logits = Tensor(np.array([[-30.0, -2.0, 0.0, 3.0], [5.0, 40.0, -0.5, 0.25]], np.float32),
                        requires_grad=True)
        target = Tensor(np.array([[0.0, 1.0, 1.0, 0.0], [1.0, 0.0, 1.0, 1.0]], np.float32))
        loss = logits.binary_cross_entropy_with_logits(target) + logits.mish().sum() * 0.01
        loss.backward()
        z, t = logits.numpy().astype(np.float64), target.numpy().astype(np.float64)
        mish = z * np.tanh(np.logaddexp(0.0, z))
        expected_loss = np.mean(np.logaddexp(0.0, z) - t * z) + mish.sum() * 0.01
        if not math.isclose(loss.item(), expected_loss, rel_tol=1e-4):
            raise AssertionError(f"binary_cross_entropy_with_logits + mish on your softplus gives "
                                 f"{loss.item():.6g}, "
                                 f"expected {expected_loss:.6g}")
        if not np.isfinite(logits.grad.numpy()).all():
            raise AssertionError("the loss's gradient has NaN or inf with your softplus: check "
                                 "derivative() at "
                                 "large |x|")
    if not made:
        raise AssertionError("Tensor.softplus never ran your class: define `class Softplus(UnaryFunction)` "
                             "in the answer cell and pass the class itself to check")
    return ("values exact to float32 from -1e4 to 1e4 (softplus(-17) = 4.1e-8, not 0), beta and threshold, "
            "gradients without NaN, and a loss with mish and binary_cross_entropy_with_logits trained on it")


def _check_values(got: np.ndarray, expected: np.ndarray, call: str) -> None:
    for x, g, e in zip(SOFTPLUS_X.tolist(), got.tolist(), expected.tolist(), strict=True):
        if math.isnan(g) or math.isinf(g):
            raise AssertionError(f"{call} at x = {x:g} gives {g}; softplus is finite there ({e:.6g}). "
                                 "exp(x) overflows float32 past x = 88: where beta x > threshold the value "
                                 "is "
                                 "x itself (PyTorch's rule), and only the other branch needs exp")
        if not math.isclose(g, e, rel_tol=1e-5, abs_tol=1e-38):
            hint = ("1 + exp(x) rounds to exactly 1 when exp(x) < 6e-8, and log(1) = 0: use log1p "
                    "(Expr has .log1p()), which keeps the tiny value" if x < -10 else
                    "compare with log(1 + exp(x)) at this x")
            raise AssertionError(f"{call} at x = {x:g} gives {g:.6g}, expected {e:.6g}: {hint}")


def _check_gradient(got: np.ndarray, expected: np.ndarray) -> None:
    for x, g, e in zip(SOFTPLUS_X.tolist(), got.tolist(), expected.tolist(), strict=True):
        if math.isnan(g):
            raise AssertionError(f"the gradient at x = {x:g} is NaN. exp(x) / (1 + exp(x)) is inf / inf "
                                 "there: "
                                 "write the derivative without an overflowing exp, e.g. as a sigmoid of x "
                                 "(1 / (1 + exp(-x)) for x >= 0, and its mirror for x < 0), or from the "
                                 "value: "
                                 "1 - exp(-softplus(x)) is sigmoid(x) too")
        if not math.isclose(g, e, rel_tol=1e-4, abs_tol=1e-7):
            raise AssertionError(f"the gradient at x = {x:g} is {g:.6g}, expected {e:.6g}: d/dx log(1 + "
                                 "exp(x)) "
                                 "is exp(x) / (1 + exp(x)), the sigmoid of x (1 where the value is x itself)")


# ---- 01b.toposort: walk a DAG once ----
@exercise("01b.toposort", answer="toposort", title="Walk a kernel AST (a DAG) once, sources first",
          hook="LazyOp.toposort")
def check_toposort(toposort: Callable[[Any], list]) -> str:
    """Every distinct node once, each after its sources; on a deep shared DAG; then plugged in as
    LazyOp.toposort, which count_flops runs on every kernel: the FLOP counter must agree."""
    if not callable(toposort):
        raise AssertionError(f"expected a function toposort(root) -> list of nodes, got "
                             f"{type(toposort).__name__}")
    a, b = _leaf(1.0), _leaf(2.0)
    small = LazyOp(_binary("MUL"), (LazyOp(_binary("ADD"), (a, b)), b))  # (a + b) * b: b is shared
    _check_order(toposort, small, 4, "(a + b) * b")
    deep = a
    for _ in range(16):
        deep = LazyOp(_binary("ADD"), (deep, deep))  # x + x, then (x + x) + (x + x), ...: 17 nodes
    _check_order(toposort, deep, 17, "a chain of 16 x + x")

    x = Tensor(np.linspace(-3, 3, 16).astype(np.float32), requires_grad=True)
    y = x
    for _ in range(6):
        y = y.tanh() * 1.5 + y.sigmoid()
    outs = [y.softmax(0).lazydata]
    items = [item for item in create_schedule(outs) if not isinstance(item.ast.op, LoadOps)]
    expected = sum(count_flops(item.ast) for item in items)
    with plug(LazyOp, "toposort", toposort) as plugged:
        GlobalCounters.reset()
        values = y.softmax(0).numpy()
        counted = GlobalCounters.global_ops
        plugged.require_called("LazyOp.toposort")
    if counted != expected:
        raise AssertionError(f"with your toposort the engine counted {counted} FLOPs for a stack of tanh and "
                             f"sigmoid, expected {expected}: some node is missing or counted twice")
    if not np.isfinite(values).all():
        raise AssertionError("the kernels gave non-finite values with your toposort plugged in")
    return ("every node once, sources first, on a chain with 2^17 paths; the FLOP counter ran on it for "
            "every "
            f"kernel of a tanh/sigmoid stack ({counted} FLOPs)")


def _leaf(value: float) -> Any:
    return LazyOp(BufferOps.CONST, (), ConstBuffer(value, dtypes.float32, ShapeTracker.from_shape((1,))))


def _binary(name: str) -> Any:
    return BinaryOps[name]


def _check_order(toposort: Callable, root: Any, distinct: int, what: str) -> None:
    order = toposort(root)
    if not isinstance(order, list):
        raise AssertionError(f"toposort({what}) returned {type(order).__name__}; return a list of the nodes")
    ids = [id(n) for n in order]
    if len(ids) > distinct and len(set(ids)) < len(ids):
        raise AssertionError(f"toposort({what}) returned {len(order)} nodes but the AST has {distinct} "
                             "distinct "
                             "ones: a shared node is visited once per path to it (a tree walk). Keep a set "
                             "of "
                             "the ids of the nodes you have already visited and skip them")
    if len(set(ids)) != distinct:
        raise AssertionError(f"toposort({what}) returned {len(set(ids))} distinct nodes, the AST has "
                             f"{distinct}: "
                             "every node must appear, the root and the leaves included")
    seen: set[int] = set()
    for node in order:
        for src in node.src:
            if id(src) not in seen:
                raise AssertionError(f"in toposort({what}) a {node.op.name} comes before one of its sources: "
                                     "put a node in the list only after all of its sources (a post-order)")
        seen.add(id(node))


# ---- predictions ----
NAN_COMPARE = ("Tensor([nan]) <= 0", "Tensor([nan]) != Tensor([nan])", "Tensor([nan]).relu() is NaN")


@exercise("01b.nan_compare", answer="nan_compare", title="Predict comparisons with NaN")
def check_nan_compare(answer: Any) -> str:
    """Predict three truths: NaN <= 0, NaN != NaN, and whether relu keeps a NaN."""
    nan = float("nan")
    truth = ((Tensor([nan]) <= 0).item(), (Tensor([nan]) != Tensor([nan])).item(),
             bool(np.isnan(Tensor([nan]).relu().numpy()[0])))
    if not isinstance(answer, (tuple, list)) or len(answer) != 3 or \
            not all(isinstance(a, bool) for a in answer):
        raise AssertionError("give three bools, in the order of NAN_COMPARE")
    for question, predicted, actual in zip(NAN_COMPARE, answer, truth, strict=True):
        if predicted != actual:
            raise AssertionError(f"{question}: not {predicted}. Every ordered comparison with NaN is False, "
                                 "!= is the negation of == (so it is True), and relu is max(x, 0), which "
                                 "keeps a NaN as PyTorch's does")
    return ("NaN <= 0 is False (so x <= y is (x < y) | (x == y), never not (y < x)); NaN != NaN; "
            "relu(NaN) is NaN")


SIGNED_ZERO = ("1 / (Tensor([-0.0]) + 0.0)", "1 / (Tensor([-0.0]) - 0.0)", "1 / (Tensor([-0.0]) * 1.0)")


@exercise("01b.signed_zero", answer="signed_zero", title="Predict the sign of zero after + and - 0.0")
def check_signed_zero(answer: Any) -> str:
    """Predict three results (inf or -inf), which say which constant folds are allowed."""
    x = Tensor([-0.0])
    truth = ((1 / (x + 0.0)).item(), (1 / (x - 0.0)).item(), (1 / (x * 1.0)).item())
    if not isinstance(answer, (tuple, list)) or len(answer) != 3 or not all(a in (math.inf, -math.inf)
                                                                          for a in answer):
        raise AssertionError("give three values, each math.inf or -math.inf")
    for question, predicted, actual in zip(SIGNED_ZERO, answer, truth, strict=True):
        if predicted != actual:
            raise AssertionError(f"{question}: not {predicted}. In round-to-nearest, -0.0 + 0.0 is +0.0 (the "
                                 "sum of zeros of opposite signs is +0), while -0.0 - 0.0 and -0.0 * 1 "
                                 "keep the sign")
    return ("x + 0.0 is not x (for x = -0.0), so the constant folder may fold x + (-0.0), x - 0.0 and "
            "x * 1 only")
