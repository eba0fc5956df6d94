"""Stage 1 (notebooks 01 and 02): gradient checks for Tensor ops, and the exercise checkers."""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

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
    return ("values match numpy and the gradient matches finite differences. You wrote no backward: "
            "autograd composed it from the primitives.")


# ================================================================================================
# stage 1: views (notebook 02) -- exercises on strides and index expressions
# ================================================================================================
def check_strides(shape: Sequence[int], order: Sequence[int], answer: Sequence[int]) -> str:
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
    return f"strides {tuple(expected)}. Permute only reorders the strides; memory is untouched."


def evaluate_index_expression(text: str, grids: dict[str, np.ndarray]) -> np.ndarray:
    """Evaluate an index expression such as "((idx0*-4)+idx1+8)" on integer arrays, safely.

    Allowed: the variables in `grids`, integers, + - * / % and parentheses. `/` is integer division,
    as in the rendered expressions (and in C, for the non-negative values index math divides).
    """
    import ast
    import operator

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
