"""Chapter 02 (notebook 02, stage 1: views and the ShapeTracker): the exercises and their checkers.

Implement-this: `02.permute` (plugged in as `View.permute`) and `02.pad` (plugged in as `View.pad`:
the offset and the mask). Predictions: `02.strides`, `02.index_expression` (compared by value at
every position, so any algebraically equal expression is right).
"""

from __future__ import annotations

import ast
import operator
from typing import Any, Callable, Sequence

import numpy as np

from tinyedu import Tensor
from tinyedu.exercises.hooks import plug
from tinyedu.exercises.registry import exercise
from tinyedu.shape import ShapeTracker
from tinyedu.shape.view import View


# -- predictions about views: strides and index expressions ----------------------------------------
def check_strides(shape: Sequence[int], order: Sequence[int], answer: Sequence[int]) -> str:
    """Exercise: the strides of a fresh C-order tensor of `shape` after `permute(order)`."""
    expected = ShapeTracker.from_shape(tuple(shape)).permute(tuple(order)).views[-1].strides
    if not isinstance(answer, (tuple, list)) or len(answer) != len(expected):
        raise AssertionError(f"give one stride per axis: a tuple of {len(expected)} ints")
    if tuple(answer) != tuple(expected):
        raise AssertionError(
            "not quite. First write the strides of the fresh tensor: the last axis has stride 1, and each "
            "axis before it steps over everything after it. Then permute moves those strides with their "
            "axes: new axis k is old axis order[k].")
    return f"strides {tuple(expected)}. Permute only reorders the strides; memory is untouched."


def evaluate_index_expression(text: str, grids: dict[str, np.ndarray]) -> np.ndarray:
    """Evaluate an index expression such as "((idx0*-4)+idx1+8)" on integer arrays, safely.

    Allowed: the variables in `grids`, integers, + - * / % and parentheses. `/` is integer division,
    as in the rendered expressions (and in C, for the non-negative values index math divides).
    """
    ops = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.floordiv,
           ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod}

    def value(node: ast.AST) -> Any:
        if isinstance(node, ast.BinOp) and type(node.op) in ops:
            return ops[type(node.op)](value(node.left), value(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            return -value(node.operand) if isinstance(node.op, ast.USub) else value(node.operand)
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return node.value
        if isinstance(node, ast.Name) and node.id in grids:
            return grids[node.id]
        what = node.id if isinstance(node, ast.Name) else type(node).__name__
        raise AssertionError(f"the expression may only use {sorted(grids)}, integers, + - * / % and "
                             f"parentheses; it has {what!r}")

    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as error:
        raise AssertionError(f"the expression does not parse ({error.msg}); write it like "
                             "\"((idx0*4)+idx1)\"")\
            from None
    return np.broadcast_to(np.asarray(value(tree.body), dtype=np.int64), next(iter(grids.values())).shape)


def check_index_expression(t: Any, answer: str) -> str:
    """Exercise: an index expression for a tensor's view, compared by value at every position.

    Any expression that gives the same buffer index at every valid position is right, however it is
    written: "8 - 4*idx0 + idx1" is as good as the rendered "((idx0*-4)+idx1+8)".
    """
    if not isinstance(answer, str):
        raise AssertionError("write the expression as a string, e.g. \"((idx0*4)+idx1)\"")
    st = t.lazydata.st
    expected, valid = st.index_arrays()
    grids = {f"idx{axis}": g for axis, g in enumerate(np.indices(st.shape, dtype=np.int64))}
    got = evaluate_index_expression(answer, grids)
    if np.array_equal(got[valid], expected[valid]):
        return (f"{answer.strip()} reads the same element as {st.expr_idxs()[0].render()} at all "
                f"{valid.sum()} positions.")
    origin = (0,) * st.ndim
    if got[origin] != expected[origin]:
        raise AssertionError(f"not quite: at {', '.join(f'idx{a} = 0' for a in range(st.ndim))} your "
                             "expression "
                             f"gives {got[origin]}, which is not the buffer index of element {origin}. Start "
                             "with the offset: where in memory does the first element of this view live?")
    for axis in range(st.ndim):
        if st.shape[axis] > 1:
            step = tuple(1 if a == axis else 0 for a in range(st.ndim))
            if got[step] - got[origin] != expected[step] - expected[origin]:
                raise AssertionError(f"not quite: one step along idx{axis} moves your index by "
                                     f"{got[step] - got[origin]}, and that is not this view's stride on axis "
                                     f"{axis} (a flip makes a stride negative, an expand makes it 0).")
    raise AssertionError("not quite: the offset and the steps are right, but somewhere further in the range "
                         "your expression reads another element. Is the expression linear in each index?")



# The library's own movement ops, kept before any learner's version is plugged in.
REFERENCE_PERMUTE: Callable[..., View] = View.permute
REFERENCE_PAD: Callable[..., View] = View.pad


@exercise("02.strides", answer="permuted_strides", title="Predict the strides after a permute")
def check_permuted_strides(answer: Any) -> str:
    """The strides of a fresh (2, 3, 4) tensor after permute(2, 0, 1)."""
    return check_strides((2, 3, 4), (2, 0, 1), answer)


@exercise("02.index_expression", answer="flip_index", title="Write the index expression of x.flip(0)")
def check_flip_index(answer: Any) -> str:
    """An index expression for x.flip(0), x a fresh (3, 4) tensor; any equal expression is right."""
    x = Tensor(np.arange(12, dtype=np.float32)).reshape(3, 4)
    return check_index_expression(x.flip(0), answer)


def _views() -> dict[str, View]:
    """Views of every kind a movement op can hand over: offsets, negative and zero strides, masks."""
    fresh = View.create((2, 3, 4))
    return {
        "a fresh (2, 3, 4) view": fresh,
        "a shrunk view (offset 5)": View.create((3, 4)).shrink(((1, 3), (1, 3))),
        "a flipped view (negative stride)": View.create((3, 4)).stride((-1, 1)),
        "an expanded view (stride 0)": View.create((3, 1, 4)).expand((3, 5, 4)),
        "a padded view (with a mask)": View.create((3, 4)).pad(((1, 0), (0, 2))),
        "a padded, flipped 3-d view": View.create((2, 3, 4)).stride((1, -1, 2)).pad(((0, 1), (2, 0), (1, 1))),
    }


def _fields(view: View) -> dict[str, Any]:
    return {"shape": view.shape, "strides": view.strides, "offset": view.offset, "mask": view.mask}


def _need_view(out: Any, call: str) -> View:
    if not isinstance(out, View):
        raise AssertionError(f"{call} returned {type(out).__name__}; it must return a new View, made with "
                             "View.create(shape, strides, offset, mask).")
    return out


def _tensor_checks(cases: list[tuple[str, Callable[[Any], Any], Callable[[np.ndarray], np.ndarray]]],
                   what: str) -> None:
    """Run Tensor programs through the whole pipeline (scheduler, kernels, C) and compare with numpy."""
    X = np.arange(1, 25, dtype=np.float32).reshape(2, 3, 4)
    for name, program, reference in cases:
        got = program(Tensor(X)).numpy()
        want = reference(X)
        if got.shape != want.shape or not np.allclose(got, want, rtol=1e-5, atol=1e-5):
            raise AssertionError(f"every view above was right, yet `{name}` computed with your {what} "
                                 "plugged in "
                                 "differs from numpy. Does your function change the view it was given, or "
                                 "depend on something besides its arguments?")


# -- exercise: View.permute ----------------------------------------------------------------------------
def _conv_reference(X: np.ndarray, W: np.ndarray) -> np.ndarray:
    padded = np.pad(X, ((0, 0), (0, 0), (1, 1), (1, 1)))
    out = np.zeros((X.shape[0], W.shape[0], X.shape[2], X.shape[3]), np.float32)
    for i in range(X.shape[2]):
        for j in range(X.shape[3]):
            out[:, :, i, j] = np.einsum("nchw,ochw->no", padded[:, :, i:i + 3, j:j + 3], W)
    return out


_W = np.random.default_rng(0).standard_normal((2, 3, 3, 3)).astype(np.float32)


def _pipeline_cases() -> list:
    w = Tensor(_W)
    return [
        ("x.permute(2, 0, 1) * 2", lambda x: x.permute(2, 0, 1) * 2, lambda X: X.transpose(2, 0, 1) * 2),
        ("x.sum(0)", lambda x: x.sum(0), lambda X: X.sum(0)),
        ("x[0] @ x[1].T", lambda x: x[0] @ x[1].T, lambda X: X[0] @ X[1].T),
        ("x.pad(...).flip(2).permute(1, 2, 0)",
         lambda x: x.pad(((0, 0), (1, 2), (0, 1))).flip(2).permute(1, 2, 0),
         lambda X: np.pad(X, ((0, 0), (1, 2), (0, 1)))[:, :, ::-1].transpose(1, 2, 0)),
        ("conv2d with padding 1", lambda x: x.reshape(2, 3, 2, 2).conv2d(w, padding=1),
         lambda X: _conv_reference(X.reshape(2, 3, 2, 2), _W)),
    ]


@exercise("02.permute", answer="permute", title="View.permute: reorder the axes of a view",
          hook="View.permute")
def check_permute(permute: Callable[..., View]) -> str:
    """Plug `permute` in as View.permute: every kind of view, then tensors through the whole pipeline."""
    if not callable(permute):
        raise AssertionError("permute: expected a function permute(self, order), got "
                             f"{type(permute).__name__}")
    orders = {2: [(1, 0)], 3: [(2, 0, 1), (1, 2, 0), (0, 2, 1)]}
    for name, view in _views().items():
        for order in orders[view.ndim]:
            call = f"permute({name}, {order})"
            try:
                got = _need_view(permute(view, order), call)
            except ValueError as error:
                if "mask" not in str(error):
                    raise
                raise AssertionError(f"{call} raised ValueError: {error}. Hint: the mask is one (lo, hi) "
                                     "range "
                                     "per axis, and each range moves with its axis.") from None
            want = REFERENCE_PERMUTE(view, order)
            if got == want:
                continue
            inverse = tuple(sorted(range(len(order)), key=order.__getitem__))
            g, w = _fields(got), _fields(want)
            if _fields(REFERENCE_PERMUTE(view, inverse)) == g and inverse != order:
                hint = ("you applied the inverse permutation: new axis k is old axis order[k] "
                        "(shape[k] = old shape[order[k]]), not old axis k moved to position order[k].")
            elif g["shape"] != w["shape"]:
                hint = "the shape: new axis k is old axis order[k], so new shape[k] = old shape[order[k]]."
            elif g["strides"] != w["strides"]:
                hint = "the strides move with their axes: new strides[k] = old strides[order[k]]."
            elif g["offset"] != w["offset"]:
                hint = "a permute moves no element: the offset stays what it was."
            elif g["mask"] != w["mask"]:
                hint = "the mask is one (lo, hi) range per axis, and each range moves with its axis."
            else:
                hint = ("build the result with View.create(shape, strides, offset, mask), which also works "
                        "out `contiguous`.")
            raise AssertionError(f"{call} gave {got}, not the permuted view. Hint: {hint}")
    with plug(View, "permute", permute) as plugged:
        _tensor_checks(_pipeline_cases(), "permute")
        plugged.require_called("View.permute")
    return ("every kind of view (offsets, negative and zero strides, masks); then transposes, a sum over "
            "axis 0 (the Kernel permutes the reduce axis last with your permute), a matmul and a padded "
            "conv2d ran through the scheduler and the C compiler on your permute and match numpy.")


# -- exercise: View.pad -----------------------------------------------------------------------------------
@exercise("02.pad", answer="pad", title="View.pad: padding as an offset and a mask", hook="View.pad")
def check_pad(pad: Callable[..., View]) -> str:
    """Plug `pad` in as View.pad: the offset moves back, the mask shifts; then real padded computations."""
    if not callable(pad):
        raise AssertionError(f"pad: expected a function pad(self, padding), got {type(pad).__name__}")
    for name, view in _views().items():
        paddings = [((1, 0),) * view.ndim, tuple((k % 2, 2 - k % 2) for k in range(view.ndim))]
        for padding in paddings:
            call = f"pad({name}, {padding})"
            got, want = _need_view(pad(view, padding), call), REFERENCE_PAD(view, padding)
            if got == want:
                continue
            g, w = _fields(got), _fields(want)
            if g["shape"] != w["shape"]:
                hint = "the shape: each axis grows by before + after."
            elif g["offset"] != w["offset"]:
                hint = ("the offset: the first element of the padded view lies `before` steps *before* the "
                        "old "
                        "first element, so it moves back by before * stride on every axis (a negative stride "
                        "moves it forward).")
            elif w["mask"] is not None and g["mask"] is None:
                hint = "the padded positions need a mask: one (lo, hi) valid range per axis."
            elif view.mask is not None:
                hint = ("this view was padded before: its valid range per axis (view.valid_ranges()) is "
                        "shifted by `before`, not replaced by the range of the whole old shape.")
            else:
                hint = ("the valid range of an axis is where the old elements now sit: (before, before + "
                        "size).")
            raise AssertionError(f"{call} gave {got}, not the padded view. Hint: {hint}")
    with plug(View, "pad", pad) as plugged:
        _tensor_checks(_pipeline_cases() + [
            ("(x.exp().pad(...) + 1).sum(2)",
             lambda x: ((x * 0.1).exp().pad(((1, 1), (0, 0), (2, 0))) + 1).sum(2),
             lambda X: (np.pad(np.exp(X * np.float32(0.1)), ((1, 1), (0, 0), (2, 0))) + 1).sum(2)),
        ], "pad")
        plugged.require_called("View.pad")
    return ("every kind of view, padded once and twice; then padded tensors, a padded conv2d and a padded "
            "exp "
            "ran through the scheduler and the C compiler on your pad and match numpy: no read outside a "
            "buffer, zeros where the padding is.")
