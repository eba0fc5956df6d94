"""The Tensor layer's short cuts for the common case build the graph the general code builds.

matmul and linear of one float dtype and the same batch axes apply the primitives directly (no
unsqueeze, broadcasting or sum checks): the same primitives in the same order, the same lazy graph,
the same values and gradients bit for bit, and the general code still for every other case.
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


@pytest.mark.parametrize("shape", [((), 3, 5, 4), ((), 1, 5, 4), ((), 3, 5, 1), ((), 1, 5, 1), ((), 2, 0, 3),
                                   ((2,), 3, 5, 4), ((2, 3), 4, 2, 1), ((2, 1), 3, 4, 5)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_matmul_short_cut_builds_what_the_general_code_builds(shape, dtype):
    batch, n, k, m = shape
    rng = np.random.default_rng(0)
    x_np = rng.standard_normal((*batch, n, k)).astype(dtype)
    w_np = rng.standard_normal((*batch, k, m)).astype(dtype)

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
    np.testing.assert_allclose(np.frombuffer(fast[2], dtype).reshape(*batch, n, m), x_np @ w_np, rtol=1e-5,
                               atol=1e-6)
    if not batch:
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


def test_arange_of_ints_builds_the_copy_the_general_path_builds():
    for args in ((10,), (3, -5, -2), (0,), (2**31 - 1, 2**31 - 3, -1)):
        fast = Tensor.arange(*args)
        general = Tensor.arange(*args, dtype="int32")  # (with a dtype: the general path)
        assert fast.dtype == general.dtype == dtypes.int32 and fast.shape == general.shape
        assert fast.lazydata.op == general.lazydata.op and fast.lazydata.arg.dtype == np.int32
        np.testing.assert_array_equal(fast.numpy(), np.arange(*args))
    with pytest.raises(OverflowError, match="int32"):
        Tensor.arange(2**31, 2**31 + 2)  # (beyond int32: the general path, and its error)


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "int32", "int64", "bool", "float16", "float32"])
def test_a_python_number_promotes_as_before(dtype):
    """An int tensor keeps its dtype with a Python int without asking result_type: what result_type says."""
    from tinyedu.core.dtype import result_type, scalar_dtype

    x = Tensor(np.array([1, 2, 3]), dtype=dtype)
    for number in (5, 300, -1, 2.5, True):
        want = result_type((x.dtype, "tensor"), (scalar_dtype(number), "scalar"))
        assert (x + number).dtype == want, (dtype, number)
        assert (x == number).dtype == dtypes.bool
    np.testing.assert_array_equal((x != 2).numpy(), np.array([1, 2, 3]).astype(x.dtype.np) != 2)


def test_shortcuts_keep_the_primitive_counts():
    ints = Tensor(np.arange(6, dtype=np.int32).reshape(2, 3))
    with count_primitives() as counts:
        ints != 3  # noqa: B015
    assert dict(counts) == {"Eq": 2, "Reshape": 1, "Expand": 1}
    x, b = Tensor(np.ones((2, 3), np.float32)), Tensor(np.ones(3, np.float32))
    with count_primitives() as counts:
        x * b  # noqa: B015
    assert dict(counts) == {"Reshape": 1, "Expand": 1, "Mul": 1}
    with count_primitives() as counts:
        x.unsqueeze(1)
    assert dict(counts) == {"Reshape": 1}


def test_one_dtype_broadcasting_gives_the_graph_of_the_general_path():
    rng = np.random.default_rng(5)
    a = Tensor(rng.standard_normal((4, 1, 3)).astype(np.float32), requires_grad=True)
    b = Tensor(rng.standard_normal((5, 1)).astype(np.float32), requires_grad=True)
    fast = a - b  # one dtype: the short cut
    general = a._expanded_to((4, 5, 3)) - b._expanded_to((4, 5, 3))  # (the same shapes: no broadcasting)
    assert _structure(fast.lazydata) == _structure(general.lazydata)
    reverse = b._expanded_to((4, 5, 3)) - a._expanded_to((4, 5, 3))
    assert _structure((b - a).lazydata) == _structure(reverse.lazydata)
    with pytest.raises(Exception, match="broadcast|shape"):
        a - Tensor(np.ones((4, 2), np.float32))
