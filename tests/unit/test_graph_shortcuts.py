"""The Tensor layer's short cuts for the common case build the graph the general code builds.

matmul and linear of two float matrices apply the primitives directly (no unsqueeze, broadcasting
or sum checks): the same primitives in the same order, the same lazy graph, the same values and
gradients bit for bit, and the general code still for every other case.
"""

import numpy as np
import pytest

from tinyedu import Tensor, count_primitives, dtypes
from tinyedu.lazy import LazyBuffer


def _structure(out: LazyBuffer) -> list:
    """The graph below `out`, node by node in a fixed order, realized buffers by their data."""
    names: dict[int, int] = {}
    rows: list = []

    def walk(node: LazyBuffer) -> int:
        if id(node) not in names:
            if node._base is not None:
                row = ("view", walk(node._base), node.st)
            elif node.realized is not None:
                row = ("realized", node.realized.as_numpy().tobytes())
            else:
                row = (node.op, node.dtype, node.st, node.arg, tuple(walk(s) for s in node.srcs))
            rows.append(row)
            names[id(node)] = len(rows) - 1
        return names[id(node)]

    walk(out)
    return rows


def _general(x: Tensor, wt: Tensor) -> Tensor:
    """_times_transposed's general line, which the 2-d short cut stands for."""
    return (x.unsqueeze(-2) * wt.unsqueeze(-3)).sum(-1)


@pytest.mark.parametrize("shape", [(3, 5, 4), (1, 5, 4), (3, 5, 1), (1, 5, 1), (2, 0, 3)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_2d_matmul_short_cut_builds_what_the_general_code_builds(shape, dtype):
    n, k, m = shape
    rng = np.random.default_rng(0)
    x_np, w_np = rng.standard_normal((n, k)).astype(dtype), rng.standard_normal((k, m)).astype(dtype)

    def run(product) -> tuple:
        x, w = Tensor(x_np, requires_grad=True).realize(), Tensor(w_np, requires_grad=True).realize()
        with count_primitives() as counts:
            out = product(x, w)
        graph = _structure(out.lazydata)
        (out * out).sum().backward()
        return graph, list(counts.items()), out.numpy().tobytes(), x.grad.numpy().tobytes(), \
            w.grad.numpy().tobytes()

    fast = run(lambda x, w: x @ w)
    general = run(lambda x, w: _general(x, w.transpose(-1, -2)))
    assert fast == general  # (counts as ordered items: the primitives in the same order, too)
    np.testing.assert_allclose(np.frombuffer(fast[2], dtype).reshape(n, m), x_np @ w_np, rtol=1e-5, atol=1e-6)
    assert run(lambda x, w: x.linear(w.T.contiguous()))[1:] == \
        run(lambda x, w: _general(x, w.T.contiguous()))[1:]


def test_other_matmuls_take_the_general_code():
    rng = np.random.default_rng(1)
    a = Tensor(rng.standard_normal((2, 3, 4)).astype(np.float32))
    b = Tensor(rng.standard_normal((4, 5)).astype(np.float32))
    np.testing.assert_allclose((a @ b).numpy(), a.numpy() @ b.numpy(), rtol=1e-5)
    ints = Tensor([[1, 2], [3, 4]], dtype=dtypes.int32)
    assert (ints @ ints).dtype == _general(ints, ints.T).dtype == dtypes.int64  # (an int sum is int64)
    np.testing.assert_array_equal((ints @ ints).numpy(), np.array([[7, 10], [15, 22]]))
    halves = Tensor(rng.standard_normal((3, 4)).astype(np.float16))
    assert (halves @ halves.T).dtype == dtypes.float16
