"""A short program stays fast: the lazy graph and every kernel AST are DAGs, and every pass over them
visits each node once.

Most composite ops read their input several times (tanh reads x four times, x ** 1.5 three). When
anything downstream treats the shared graph as a tree, a stack of k such ops costs c^k: stacking
x ** 1.5 six times took over a minute. These tests stack every composite op and count nodes: the
kernels' ASTs must stay about as big as the lazy graph (linear in k), never exponential.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import pytest

from tinyedu import Tensor
from tinyedu.codegen.kernel import Kernel
from tinyedu.codegen.linearizer import linearize
from tinyedu.core.dtype import dtypes
from tinyedu.core.ops import BinaryOps, BufferOps, ConstBuffer, LazyOp, LoadOps, MemBuffer
from tinyedu.engine.schedule import MAX_KERNEL_OPS, create_schedule
from tinyedu.lazy import LazyBuffer
from tinyedu.runtime.device import Buffer
from tinyedu.runtime.ops_numpy import NumpyProgram
from tinyedu.shape import ShapeTracker

COMPOSITES: dict[str, Callable[[Tensor], Tensor]] = {
    "pow_1.5": lambda x: x.abs() ** 1.5, "pow_tensor": lambda x: x.abs() ** (x * 0.1),
    "rpow": lambda x: 1.1 ** x, "softplus": lambda x: x.softplus(), "gelu": lambda x: x.gelu(),
    "gelu_tanh": lambda x: x.gelu(approximate="tanh"), "tanh": lambda x: x.tanh(),
    "sigmoid": lambda x: x.sigmoid(), "silu": lambda x: x.silu(), "mish": lambda x: x.mish(),
    "elu": lambda x: x.elu(), "celu": lambda x: x.celu(0.5), "selu": lambda x: x.selu(),
    "hardswish": lambda x: x.hardswish(), "hardsigmoid": lambda x: x.hardsigmoid(),
    "softsign": lambda x: x.softsign(), "quick_gelu": lambda x: x.quick_gelu(),
    "logsigmoid": lambda x: x.logsigmoid(), "sinh": lambda x: x.sinh() * 0.1,
    "cosh": lambda x: x.cosh() * 0.1, "asinh": lambda x: x.asinh(), "acosh": lambda x: (x.abs() + 1).acosh(),
    "atanh": lambda x: (x * 0.5).atanh(),
    "expm1": lambda x: x.expm1(), "log1p": lambda x: x.abs().log1p(), "tan": lambda x: x.tan(),
    "relu": lambda x: x.relu() - 0.5, "abs": lambda x: x.abs() - 0.5, "clamp": lambda x: x.clamp(-1, 1),
    "hardtanh": lambda x: x.hardtanh(), "relu6": lambda x: x.relu6(), "leaky_relu": lambda x: x.leaky_relu(),
    "round": lambda x: (x * 3).round() * 0.3 + x, "floor": lambda x: x.floor() + x,
    "ceil": lambda x: x.ceil() - x, "trunc": lambda x: x.trunc() + x, "sign": lambda x: x.sign() + x,
    "mod": lambda x: x % 0.7, "floor_divide": lambda x: x // 0.7 + x, "minimum": lambda x: x.minimum(x * 0.5),
    "softmax": lambda x: x.softmax(0), "log_softmax": lambda x: x.log_softmax(0),
    "layer_norm": lambda x: x.layer_norm(8), "sqrt_abs": lambda x: (x.abs() + 1).sqrt(),
    "where": lambda x: (x > 0).where(x * x, -x), "cos_sin": lambda x: x.cos() * x.sin(),
}


def _bases(outs: list[LazyBuffer]) -> int:
    """Distinct unrealized nodes of the lazy graph behind `outs`."""
    seen, stack = set(), [o.base for o in outs]
    while stack:
        node = stack.pop()
        if id(node) in seen or node.realized is not None:
            continue
        seen.add(id(node))
        stack.extend(s.base for s in node.srcs)
    return len(seen)


def _sizes(f: Callable[[Tensor], Tensor], depth: int) -> tuple[int, int, int, int]:
    """(lazy nodes, AST nodes summed over the kernels, UOps summed, the largest kernel) for f applied
    `depth` times, forward and backward."""
    x = Tensor(np.linspace(-2, 2, 8).astype(np.float32), requires_grad=True).realize()
    y = x
    for _ in range(depth):
        y = f(y)
    grad = Tensor.zeros(8) if not y.requires_grad else None
    if grad is None:
        y.sum().backward()
        grad = x.grad
    outs = [y.lazydata, grad.lazydata]
    kernels = [item for item in create_schedule(outs) if not isinstance(item.ast.op, LoadOps)]
    ast_nodes = [len(item.ast.walk()) for item in kernels]
    uops = sum(len(linearize(Kernel(item.ast))) for item in kernels)
    return _bases(outs), sum(ast_nodes), uops, max(ast_nodes, default=0)


@pytest.mark.parametrize("name", COMPOSITES)
def test_a_deep_stack_of_composite_ops_stays_linear(name: str) -> None:
    f = COMPOSITES[name]
    lazy6, _, _, _ = _sizes(f, 6)
    lazy12, ast12, uops12, largest = _sizes(f, 12)
    # twice the ops, twice the lazy graph (it is a DAG: LazyBuffer.create dedups)
    assert lazy12 <= 2.2 * lazy6, (lazy6, lazy12)
    # and the kernels hold a few times the lazy graph: each kernel computes a node once, but some
    # nodes are recomputed by several kernels (rule 5 recomputes what is cheaper than storing). The
    # factor does not grow with the depth (gelu, whose erfc holds an exp of about 30 ops: 8.9, 9.0
    # at 12, 24 ops); a tree walk would give 2^12 paths.
    assert ast12 <= 10 * lazy12 + 100 and uops12 <= 11 * lazy12 + 100, (lazy12, ast12, uops12)
    assert largest <= MAX_KERNEL_OPS + 64  # rule 9 (+ the leaves, which are not ops)


def test_the_stack_from_the_issue_runs() -> None:
    """x ** 1.5 stacked 6 times took over a minute; softplus or gelu stacked 6 times, 5-6 s."""
    torch = pytest.importorskip("torch")
    for ours, theirs in ((lambda x: x ** 1.5, lambda x: x ** 1.5),
                         (lambda x: x.softplus(), torch.nn.functional.softplus),
                         (lambda x: x.gelu(), torch.nn.functional.gelu)):
        start = np.linspace(-2, 2, 8).astype(np.float32)
        y, expected = Tensor(start), torch.tensor(start, dtype=torch.float64)
        for _ in range(6):
            y, expected = ours(y), theirs(expected)
        np.testing.assert_allclose(y.numpy(), expected.numpy(), rtol=1e-4, atol=1e-6)


def test_rule_9_bounds_the_size_of_a_kernel() -> None:
    """Many different ops, shallow (a tree of sums): rule 7 (depth) never fires, rule 9 must."""
    x = Tensor(np.linspace(-1, 1, 16).astype(np.float32)).realize()
    terms = [(x * (1 + i / 100)).sin() * (i + 1) for i in range(300)]
    while len(terms) > 1:
        terms = [a + b for a, b in zip(terms[::2], terms[1::2], strict=False)] + terms[len(terms) // 2 * 2:]
    schedule = [item for item in create_schedule([terms[0].lazydata]) if not isinstance(item.ast.op, LoadOps)]
    assert len(schedule) > 1 and any("rule 9" in item.reason for item in schedule)
    ops = [sum(not isinstance(n.op, BufferOps) for n in item.ast.walk()) for item in schedule]
    assert max(ops) <= MAX_KERNEL_OPS
    expected = sum(np.sin(np.linspace(-1, 1, 16) * (1 + i / 100)) * (i + 1) for i in range(300))
    np.testing.assert_allclose(terms[0].numpy(), expected, rtol=1e-4, atol=1e-3)


def _chain(depth: int, value: float = 1.0) -> LazyOp:
    """x + x, (x + x) + (x + x), ...: a DAG of depth + 1 nodes whose tree has 2^(depth + 1) - 1."""
    st = ShapeTracker.from_shape((1,)).expand((4,))
    node = LazyOp(BufferOps.CONST, (), ConstBuffer(value, dtypes.float32, st))
    for _ in range(depth):
        node = LazyOp(BinaryOps.ADD, (node, node))
    return node


def test_lazyop_walks_hashes_and_prints_a_dag_once() -> None:
    deep, twin = _chain(16), _chain(16)  # 17 nodes, 2^17 - 1 of them as a tree
    assert len(deep.walk()) == 17 and len(deep.toposort()) == 17 and len(deep.leaves) == 1
    assert deep == twin and hash(deep) == hash(twin) and deep is not twin
    assert deep != _chain(16, -1.0) and _chain(3, 0.0) != _chain(3, -0.0)  # constants compare by bits
    lines = str(deep).splitlines()
    assert len(lines) == 2 * 16 + 1
    assert lines[1].endswith("[shared #1]") and lines[-1].endswith("[same as #1]")


def test_numpy_device_evaluates_a_shared_node_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from tinyedu.runtime import ops_numpy

    calls = []
    real_alu = ops_numpy.alu
    monkeypatch.setattr(ops_numpy, "alu", lambda *a, **k: calls.append(1) or real_alu(*a, **k))
    ast = LazyOp(BufferOps.STORE, (_chain(16),), MemBuffer(0, dtypes.float32, ShapeTracker.from_shape((4,))))
    out = Buffer("NUMPY", 4, dtypes.float32)
    NumpyProgram(ast)([out])
    assert out.as_numpy().tolist() == [2.0**16] * 4
    assert len(calls) == 16  # one ADD per distinct node (a tree walk: 2^16 - 1)
