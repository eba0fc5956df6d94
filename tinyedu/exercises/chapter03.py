"""Chapter 03 (notebook 03, stage 2: the lazy graph and the scheduler): the exercises and their checkers.

Implement-this: two of the scheduler's rules, plugged into tinyedu/engine/schedule.py:
`03.keeps_zero` (rule 6's question, `schedule.keeps_zero`) and `03.store_is_cheaper` (rule 5's cost
model, `schedule.store_is_cheaper`). Prediction: `03.kernel_count`.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from tinyedu import Tensor
from tinyedu.core.helpers import GlobalCounters
from tinyedu.core.ops import BinaryOps, LoadOps, TernaryOps, UnaryOps
from tinyedu.engine import schedule
from tinyedu.engine.realize import run_schedule
from tinyedu.exercises.checking import compute_items, is_count
from tinyedu.exercises.hooks import plug
from tinyedu.exercises.registry import exercise


# -- predict how many kernels an expression takes --------------------------------------------------
def check_kernel_count(build: Callable[[], Any], predicted: int) -> str:
    """Exercise: predict how many kernels the scheduler makes for the Tensor `build()` returns."""
    if not is_count(predicted):
        raise AssertionError("predict the number of kernels as an int")
    tensor = build()
    kernels = compute_items(tensor)
    if predicted == len(kernels):
        return f"{len(kernels)} kernel(s)."
    rules = sorted({item.reason for item in kernels if not item.reason.startswith("rule 1")})
    direction = "more" if len(kernels) > predicted else "fewer"
    hint = ("Besides the output, buffers were stored by: " + "; ".join(rules)) if rules else \
        "Only the output is stored here: everything else fuses into one kernel."
    raise AssertionError(f"not quite: the scheduler makes {direction} kernels than {predicted}. {hint}")



def _inputs() -> tuple[Any, Any, np.ndarray, np.ndarray]:
    """The notebook's a and b: two (4, 6) tensors already in memory."""
    rng = np.random.default_rng(0)
    A, B = (rng.standard_normal((4, 6)).astype(np.float32) for _ in range(2))
    return Tensor(A).realize(), Tensor(B).realize(), A, B


KERNEL_COUNT_QUESTIONS = {
    "centered_square_sum": "((a - a.mean(1, keepdim=True)) ** 2).sum()",
    "two_reductions": "(a * 3).sum() + (a * 3).max()",
    "padded_log": "(a * a + 1).log().pad(((0, 0), (1, 1))).sum()",
    "views_then_sum": "(a.T * 2 + b.T).flip(1).sum(0)",
    "normalize_rows": "(a - a.mean(1, keepdim=True)) / (a.var(1, keepdim=True) + 1e-5).sqrt()",
}


@exercise("03.kernel_count", answer="kernel_counts", title="Predict how many kernels the scheduler makes")
def check_kernel_counts(answers: Any) -> str:
    """`answers` maps each name of KERNEL_COUNT_QUESTIONS to a predicted number of kernels."""
    if not isinstance(answers, dict) or set(answers) != set(KERNEL_COUNT_QUESTIONS):
        raise AssertionError("expected a dict with one prediction per expression: "
                             f"{sorted(KERNEL_COUNT_QUESTIONS)}")
    a, b, _, _ = _inputs()
    for name, expression in KERNEL_COUNT_QUESTIONS.items():
        try:
            build = lambda expression=expression: eval(expression, {"a": a, "b": b})  # noqa: S307
            check_kernel_count(build, answers[name])
        except AssertionError as error:
            raise AssertionError(f"{name}, {expression}: {error}") from None
    return f"all {len(answers)} kernel counts."


# -- exercise: rule 6, does an op keep 0 at 0? ------------------------------------------------------------
# What each op gives when all its inputs are 0, as a question (the hint, not the answer).
_ZERO_QUESTIONS = {
    UnaryOps.NEG: "what is -0?", UnaryOps.EXP2: "what is 2**0?", UnaryOps.LOG2: "what is log2(0)?",
    UnaryOps.SIN: "what is sin(0)?", UnaryOps.COS: "what is cos(0)?", UnaryOps.SQRT: "what is sqrt(0)?",
    UnaryOps.RECIP: "what is 1/0?",
    UnaryOps.CAST: "what is 0 cast to another dtype?", BinaryOps.ADD: "what is 0 + 0?",
    BinaryOps.SUB: "what is 0 - 0?", BinaryOps.MUL: "what is 0 * 0?", BinaryOps.DIV: "what is 0.0 / 0.0?",
    BinaryOps.MAX: "what is max(0, 0)?", BinaryOps.MOD: "what is fmod(0.0, 0.0)?",
    BinaryOps.CMPLT: "is 0 < 0 true (1) or false (0)?", BinaryOps.CMPEQ: "is 0 == 0 true (1) or false (0)?",
    BinaryOps.AND: "what is 0 & 0?", BinaryOps.OR: "what is 0 | 0?", BinaryOps.XOR: "what is 0 ^ 0?",
    TernaryOps.WHERE: "what does where(0, 0, 0) pick?",
}


def _padded_programs() -> list[tuple[str, Callable, Callable]]:
    """Padded views of elementwise results, fused or not depending on rule 6."""
    return [
        ("(a * 0.5).exp().pad(...) + 1", lambda a: (a * 0.5).exp().pad(((1, 1), (0, 2))) + 1,
         lambda A: np.pad(np.exp(A * np.float32(0.5)), ((1, 1), (0, 2))) + 1),
        ("(1 / (a * a + 1)).pad(...)", lambda a: (1 / (a * a + 1)).pad(((0, 1), (1, 0))),
         lambda A: np.pad(1 / (A * A + 1), ((0, 1), (1, 0)))),
        ("(a == a).float().pad(...)", lambda a: (a == a).float().pad(((1, 0), (0, 1))),
         lambda A: np.pad((A == A).astype(np.float32), ((1, 0), (0, 1)))),
        ("(-a).relu().sqrt().pad(...).sum(1)", lambda a: (-a).relu().sqrt().pad(((1, 1), (2, 0))).sum(1),
         lambda A: np.pad(np.sqrt(np.maximum(-A, 0)), ((1, 1), (2, 0))).sum(1)),
    ]


@exercise("03.keeps_zero", answer="keeps_zero", title="Rule 6: which ops keep 0 at 0",
          hook="schedule.keeps_zero")
def check_keeps_zero(keeps_zero: Callable[[Any], bool]) -> str:
    """The answer for every ALU op, then padded programs scheduled with it, compiled and run."""
    if not callable(keeps_zero):
        raise AssertionError("keeps_zero: expected a function of one op returning a bool, got "
                             f"{type(keeps_zero)}")
    for op, question in _ZERO_QUESTIONS.items():
        answer = keeps_zero(op)
        if not isinstance(answer, bool):
            raise AssertionError(f"keeps_zero({op}) returned {answer!r}; it must return True or False.")
        if answer != (op in schedule.ZERO_PRESERVING):
            said = "keeps 0 at 0" if answer else "does not keep 0 at 0"
            raise AssertionError(f"your rule says {op.name} {said}. Evaluate it with every input 0: "
                                 f"{question} "
                                 "(a comparison that is false is 0, a true one is 1)")

    a, _, A, _ = _inputs()
    kernels = []
    with plug(schedule, "keeps_zero", keeps_zero) as plugged:
        for name, program, reference in _padded_programs():
            out = program(Tensor(A))
            items = schedule.create_schedule([out.lazydata])
            kernels.append(sum(not isinstance(i.ast.op, LoadOps) for i in items))
            if not np.allclose(out.numpy(), reference(A), rtol=1e-5, atol=1e-6, equal_nan=True):
                raise AssertionError(f"every op's answer is right, yet {name} computed with your rule "
                                     "differs "
                                     "from numpy. Does your function depend on anything but the op?")
        plugged.require_called("schedule.keeps_zero")
    return (f"all {len(_ZERO_QUESTIONS)} ops; padded exp, reciprocal, == and sqrt were scheduled with your "
            f"rule ({', '.join(map(str, kernels))} kernels), compiled and match numpy.")


# -- exercise: rule 5, store or recompute? ---------------------------------------------------------------
# (kernels, leaf_elements, size, has_reduce): the cases are chosen to have no ties.
_STORE_CASES = [
    (1, 48, 24, False), (1, 24, 24, True), (2, 48, 24, False), (2, 24, 24, False), (3, 24, 24, False),
    (2, 40, 24, False), (2, 8, 24, True), (4, 30, 24, False), (2, 1000, 10, False), (5, 6, 24, False),
    (3, 0, 24, False),
]


def _store_hint(kernels: int, leaf: int, size: int, has_reduce: bool, answer: bool) -> str:
    if kernels == 1:
        return ("a buffer read by one kernel only is simply inlined there: there is nothing to save by "
                "storing it.")
    if has_reduce:
        return ("a buffer with a reduce inside is never recomputed: each reading kernel would redo the whole "
                "reduction, and a kernel holds at most one reduce.")
    if answer and kernels * leaf > kernels * size:
        return "storing costs a write too: `size` elements out once, then `size` in per reading kernel."
    return ("count the elements moved: storing writes `size` once and reads `size` in each of the `kernels` "
            "kernels; recomputing reads `leaf_elements` in each of them. Store when that is more.")


def _memory_programs() -> list[tuple[str, Callable]]:
    def mlp_grad(a: Any) -> Any:
        Tensor.manual_seed(0)
        w1 = Tensor.randn(6, 16, requires_grad=True)
        w2 = Tensor.randn(16, 3, requires_grad=True)
        (((a @ w1).relu() @ w2) ** 2).mean().backward()
        return w1.grad

    return [("s.sum() + s.max() with s = a * b", lambda a, b: (a * b).sum() + (a * b).max()),
            ("e / e.sum() with e = (a - 1).exp()", lambda a, b: (a - 1).exp() / (a - 1).exp().sum()),
            ("softmax(a)", lambda a, b: a.softmax(1)),
            ("the gradient of an MLP's first layer", lambda a, b: mlp_grad(a))]


def _run_counting(program: Callable, a: Any, b: Any) -> tuple[np.ndarray, int, int]:
    out = program(a, b)
    GlobalCounters.reset()
    run_schedule(schedule.create_schedule([out.lazydata]))
    return out.numpy(), GlobalCounters.kernel_count, GlobalCounters.global_mem


@exercise("03.store_is_cheaper", answer="store_is_cheaper", title=("Rule 5: store a shared buffer or "
                                                                   "recompute it"),
          hook="schedule.store_is_cheaper")
def check_store_is_cheaper(store_is_cheaper: Callable[..., bool]) -> str:
    """Decisions on cases without ties, then real schedules: same kernels and bytes as the library's."""
    if not callable(store_is_cheaper):
        raise AssertionError(f"store_is_cheaper: expected a function, got {type(store_is_cheaper).__name__}")
    for kernels, leaf, size, has_reduce in _STORE_CASES:
        answer = store_is_cheaper(kernels, leaf, size, has_reduce)
        if not isinstance(answer, bool):
            raise AssertionError(f"store_is_cheaper returned {answer!r}; it must return True or False.")
        if answer != schedule.store_is_cheaper(kernels, leaf, size, has_reduce):
            call = (f"store_is_cheaper(kernels={kernels}, leaf_elements={leaf}, size={size}, "
                    f"has_reduce={has_reduce})")
            raise AssertionError(f"{call} returned {answer}. Hint: "
                                 f"{_store_hint(kernels, leaf, size, has_reduce, answer)}")
    a, b, _, _ = _inputs()
    moved = []
    for name, program in _memory_programs():
        want = _run_counting(program, a, b)
        with plug(schedule, "store_is_cheaper", store_is_cheaper) as plugged:
            got = _run_counting(program, a, b)
            plugged.require_called("schedule.store_is_cheaper")
        if not np.allclose(got[0], want[0], rtol=1e-5, atol=1e-6) or got[1:] != want[1:]:
            raise AssertionError(f"every case is right, yet {name} scheduled with your rule runs {got[1]} "
                                 "kernels "
                                 f"moving {got[2]} bytes, the library's {want[1]} kernels and {want[2]} "
                                 "bytes.")
        moved.append(f"{got[1]} kernels / {got[2]} bytes")
    return ("every decision; the notebook's examples and an MLP's gradient scheduled with your rule run the "
            f"same kernels and move the same bytes as the library's ({'; '.join(moved)}).")
