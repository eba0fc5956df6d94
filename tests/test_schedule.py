"""The scheduler's fusion rules, one test each: kernels counted as they run, values checked with numpy."""

import numpy as np
import pytest

from tinyedu import Tensor, nn
from tinyedu.core.helpers import GlobalCounters
from tinyedu.core.ops import LoadOps, ReduceOps
from tinyedu.engine.schedule import MAX_KERNEL_DEPTH, create_schedule
from tinyedu.shape import ShapeTracker, View

RNG = np.random.default_rng(0)
A, B, C = (RNG.standard_normal((4, 5)).astype(np.float32) for _ in range(3))


@pytest.fixture
def abc():
    return [Tensor(x).realize() for x in (A, B, C)]


def kernels_to_compute(t: Tensor) -> tuple[int, np.ndarray]:
    """Run `t` and return (kernels it took, its value)."""
    GlobalCounters.reset()
    t.realize()
    kernels = GlobalCounters.kernel_count
    return kernels, t.numpy()


def check(t: Tensor, expected: np.ndarray, kernels: int) -> None:
    ran, value = kernels_to_compute(t)
    np.testing.assert_allclose(value, expected, rtol=1e-5, atol=1e-5)
    assert ran == kernels, f"expected {kernels} kernels, ran {ran}"


def test_elementwise_chain_and_its_reduce_are_one_kernel(abc):  # rules 3 and 4
    a, b, c = abc
    check(((a * b) + c).relu().sum(), np.maximum(A * B + C, 0).sum(), kernels=1)


def test_elementwise_after_a_reduce_fuses_into_it(abc):  # rule 4, same element order
    a, _, _ = abc
    check((a.sum(1) * 2).relu() + 1, np.maximum(A.sum(1) * 2, 0) + 1, kernels=1)


def test_a_reduce_broadcast_back_out_is_stored(abc):  # rule 4
    a, _, _ = abc
    check(a - a.max(1, keepdim=True), A - A.max(1, keepdims=True), kernels=2)


def test_a_reduce_read_through_a_reshape_that_merges_axes_fuses():  # rule 4 (issue 18)
    """matmul -> elementwise -> a reshape merging axes -> elementwise: one kernel, in the reduce's shape."""
    X, W = RNG.standard_normal((2, 3, 4)).astype(np.float32), RNG.standard_normal((4, 3)).astype(np.float32)
    x, w = Tensor(X).realize(), Tensor(W).realize()
    check(((x @ w) * 2).reshape(6, 3) + 1, ((X @ W) * 2).reshape(6, 3) + 1, kernels=1)
    check(((x @ w) * 2).reshape(2, 9).exp() + 1, np.exp(((X @ W) * 2).reshape(2, 9)) + 1, kernels=1)


def test_a_linear_layer_on_a_3d_input_then_flattened():  # the Transformer pattern behind issue 18
    X = RNG.standard_normal((2, 5, 4)).astype(np.float32)
    layer = nn.Linear(4, 8)
    W, b = layer.weight.numpy(), layer.bias.numpy()
    check(layer(Tensor(X)).reshape(-1, 8) + 1, (X @ W.T + b).reshape(-1, 8) + 1, kernels=1)


def test_views_over_a_contiguous_view_merge_into_one():
    """A reshape of a reshape reads memory in order: the pair is one view (the builder relies on it)."""
    stacked = ShapeTracker((View.create((2, 3, 3)), View.create((6, 3))))
    assert stacked.simplify() == ShapeTracker.from_shape((6, 3))
    flipped = ShapeTracker((View.create((2, 3, 3)), View.create((6, 3)).stride((-1, 1))))
    assert flipped.simplify() == ShapeTracker.from_shape((6, 3)).flip((0,))


def test_softmax_is_three_kernels(abc):
    a, _, _ = abc
    e = (a - a.max(1, keepdim=True)).exp()
    ref = np.exp(A - A.max(1, keepdims=True))
    check(e / e.sum(1, keepdim=True), ref / ref.sum(1, keepdims=True), kernels=3)


def test_matmul_is_one_kernel(abc):
    a, b, _ = abc
    check(a @ b.T, A @ B.T, kernels=1)


def test_movement_ops_fuse_as_views(abc):  # rule 3
    a, b, _ = abc
    t = (a.flip(0).T * 2 + b.T).shrink(((1, 4), None)).sum(0)
    check(t, (A[::-1].T * 2 + B.T)[1:4].sum(0), kernels=1)


def test_contiguous_asks_for_memory(abc):  # rule 2
    a, _, _ = abc
    check((a * 2).contiguous() + 1, A * 2 + 1, kernels=2)


def test_a_padded_exp_is_stored_before_the_pad(abc):  # rule 6
    a, _, _ = abc
    pad = ((1, 1), (0, 2))
    check(a.exp().pad(pad) + 1, np.pad(np.exp(A), pad) + 1, kernels=2)
    check((a * 2).pad(pad) + 1, np.pad(A * 2, pad) + 1, kernels=1)  # f(0) == 0: fused


def test_shared_buffer_is_stored_when_recomputing_costs_more(abc):  # rule 5
    a, b, _ = abc
    s = a * b  # reads two buffers: recomputing it in two kernels moves more than storing it once
    check(s.sum() + s.max(), (A * B).sum() + (A * B).max(), kernels=3)
    e = (a - 1).exp()  # reads one buffer: cheaper to recompute in each of its two kernels
    ref = np.exp(A - 1)
    check(e / e.sum(), ref / ref.sum(), kernels=2)


def test_one_reduce_per_kernel(abc):
    a, b, _ = abc
    t = a.sum() + b.max()
    schedule = create_schedule([t.lazydata])
    for item in schedule:
        reduces = [n for n in item.ast.walk() if isinstance(n.op, ReduceOps)]
        assert len(reduces) <= 1
    check(t, A.sum() + B.max(), kernels=2)


def test_long_chains_are_cut_at_the_depth_limit(abc):  # rule 7
    a, _, _ = abc
    t, ref = a, A.astype(np.float64)
    for _ in range(2 * MAX_KERNEL_DEPTH + 10):
        t, ref = t * 1.001, ref * 1.001
    ran, value = kernels_to_compute(t)
    np.testing.assert_allclose(value, ref, rtol=1e-4)
    assert ran == 3


def test_identical_subgraphs_are_built_once(abc):
    a, b, _ = abc
    assert ((a * b).exp()).lazydata is ((a * b).exp()).lazydata
    assert a.reshape(5, 4).lazydata is a.reshape(5, 4).lazydata


def test_constants_fold(abc):
    a, _, _ = abc
    assert (a * 1).lazydata is a.lazydata
    assert (a - 0).lazydata is a.lazydata
    assert (a + -0.0).lazydata is a.lazydata
    assert (-0.0 + a).lazydata is a.lazydata
    assert (a / 1).lazydata is a.lazydata
    check(a * 1 - 0, A, kernels=0)
    # x + 0.0 is not x for floats: -0.0 + 0.0 is +0.0 (the folder compares zeros by their bits)
    assert (a + 0).lazydata is not a.lazydata and (a - -0.0).lazydata is not a.lazydata
    ints = Tensor([1, -2, 3]).realize()
    assert (ints + 0).lazydata is ints.lazydata


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_exact_ops_of_float_constants_fold_to_the_ieee_answer(dtype):
    """-c, c1 + c2, c1 - c2, c1 * c2 and c1 / c2 of float constants are constants (no kernel), with
    the value rounded once in the dtype: checked against float64 arithmetic rounded to the dtype
    (for float32, exact: a double result of +, -, *, / rounds to float correctly), and bit for bit
    against the same op computed by a kernel on a buffer in memory. Specials: x / 0, 0 / 0, -0.0."""
    values = [1.0, 128.0, 3.0, -0.0, 0.0, 1e-30, 3e38, float("inf"), float("nan"), 1.5e-45]
    ops = {"add": lambda x, y: x + y, "sub": lambda x, y: x - y, "mul": lambda x, y: x * y,
           "div": lambda x, y: x / y}
    for a in values:
        neg = -Tensor.full((3,), a, dtype=dtype)
        assert neg.lazydata.base.op is LoadOps.CONST
        assert np.array_equal(neg.numpy(), np.full(3, -dtype(a)), equal_nan=True)
        for b in values:
            for name, op in ops.items():
                folded = op(Tensor.full((3,), a, dtype=dtype), Tensor.full((3,), b, dtype=dtype))
                assert folded.lazydata.base.op is LoadOps.CONST, (name, a, b)
                with np.errstate(all="ignore"):
                    expected = dtype(op(np.float64(dtype(a)), np.float64(dtype(b))))
                in_memory = op(Tensor(np.full(3, a, dtype)).realize(), Tensor(np.full(3, b, dtype)).realize())
                got, computed = folded.numpy(), in_memory.numpy()
                assert np.array_equal(got.view(f"u{got.itemsize}"), computed.view(f"u{got.itemsize}")) or \
                    (np.isnan(got).all() and np.isnan(computed).all()), (name, a, b, got, computed)
                assert np.array_equal(got, np.full(3, expected), equal_nan=True), (name, a, b)
                assert np.signbit(got[0]) == np.signbit(expected) or np.isnan(expected), (name, a, b)


def test_a_means_gradient_is_a_constant_not_a_kernel():
    """The gradient of x.mean() is 1 / n broadcast: folded, so a training step does not run a kernel
    for it (nor for its negation in a loss)."""
    x = Tensor(RNG.standard_normal((4, 32)).astype(np.float32), requires_grad=True)
    (-x.mean()).backward()
    grad = x.grad.lazydata
    assert (grad._base or grad).op is LoadOps.CONST
    check(x.grad, np.full((4, 32), -1 / 128, np.float32), kernels=0)


def test_schedule_items_are_named_by_kind_and_size(abc):
    a, b, _ = abc
    names = [item.name for item in create_schedule([(a.sum(1) + 1).lazydata, (a * b).lazydata])]
    assert names == ["r_4_5", "E_4_5"]


def test_counters_count_flops_and_bytes(abc):
    a, b, _ = abc
    GlobalCounters.reset()
    (a * b + 1).realize()
    assert GlobalCounters.kernel_count == 1
    assert GlobalCounters.global_ops == 2 * 20           # a MUL and an ADD for each of 20 elements
    assert GlobalCounters.global_mem == 3 * 20 * 4       # read a and b, write the result (float32)


def test_intermediates_are_freed_while_the_schedule_runs():
    x = Tensor(RNG.standard_normal(1 << 16).astype(np.float32)).realize()
    t = x
    for _ in range(12):  # each step reads the previous result twice: stored, then no longer needed
        t = (t.contiguous() * 0.5 + 1)
    GlobalCounters.reset()
    t.realize()
    one_buffer = x.numel() * 4
    assert GlobalCounters.kernel_count >= 12
    assert GlobalCounters.mem_peak - GlobalCounters.mem_used < 4 * one_buffer


def test_loads_are_schedule_items_but_not_kernels():
    t = Tensor([1.0, 2.0]) + Tensor([3.0, 4.0])
    ops = [item.ast.op for item in create_schedule([t.lazydata])]
    assert ops.count(LoadOps.COPY) == 2 and len(ops) == 3
    check(t, np.array([4.0, 6.0]), kernels=1)


def test_debug_levels_print_the_schedule(abc, monkeypatch, capsys):
    a, b, _ = abc
    monkeypatch.setenv("DEBUG", "3")
    (a * b).sum().realize()
    out = capsys.readouterr().out
    assert "scheduled 1 kernels" in out          # DEBUG=1
    assert "r_4_5" in out and "GFLOPS" in out    # DEBUG=2
    assert "ReduceOps.SUM" in out and "BufferOps.LOAD" in out  # DEBUG=3: the AST


def test_graph_writes_dot_and_svg(abc, monkeypatch, tmp_path, capsys):
    a, _, _ = abc
    monkeypatch.setenv("GRAPH", "1")
    monkeypatch.setenv("GRAPHPATH", str(tmp_path))
    (a.exp() - a.max(1, keepdim=True)).realize()
    assert "GRAPH: wrote" in capsys.readouterr().out
    dots = list(tmp_path.glob("*.dot"))
    assert len(dots) == 1 and dots[0].with_suffix(".svg").is_file()
    source = dots[0].read_text()
    assert "ReduceOps.MAX" in source and "stored: schedule item" in source and "view" in source


def test_fusion_off_runs_one_kernel_per_op(abc, monkeypatch):
    a, b, c = abc
    monkeypatch.setenv("FUSION", "0")
    # mul, add, and relu's compare + where, then the sum: five ops, five kernels
    check(((a * b) + c).relu().sum(), np.maximum(A * B + C, 0).sum(), kernels=5)


def test_mlp_forward_and_backward_kernel_counts():
    """Two linear layers, relu, mean squared error: 3 kernels forward, 5 for both weight gradients."""
    X, Y, W1, W2 = (RNG.standard_normal(s).astype(np.float32) for s in [(8, 6), (8, 3), (6, 16), (16, 3)])
    x, y = Tensor(X).realize(), Tensor(Y).realize()
    w1, w2 = Tensor(W1, requires_grad=True).realize(), Tensor(W2, requires_grad=True).realize()
    GlobalCounters.reset()
    loss = (((x @ w1).relu() @ w2 - y) ** 2).mean()
    Tensor.realize_all(loss)
    assert GlobalCounters.kernel_count == 3   # x@w1 (read reordered by the next matmul), @w2 - y, mean
    loss.backward()
    GlobalCounters.reset()
    Tensor.realize_all(w1.grad, w2.grad)
    assert GlobalCounters.kernel_count == 5
    # backprop by hand in numpy: the oracle
    h = X @ W1
    r = np.maximum(h, 0)
    d_out = 2 * (r @ W2 - Y) / Y.size
    np.testing.assert_allclose(loss.item(), ((r @ W2 - Y) ** 2).mean(), rtol=1e-5)
    np.testing.assert_allclose(w2.grad.numpy(), r.T @ d_out, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(w1.grad.numpy(), X.T @ ((d_out @ W2.T) * (h > 0)), rtol=1e-4, atol=1e-6)


def test_a_realized_constant_does_not_turn_later_constants_into_loads(abc):
    a, _, _ = abc

    def loads(t: Tensor) -> int:
        return sum(1 for leaf in create_schedule([t.lazydata])[-1].ast.leaves if leaf.op.name == "LOAD")

    assert loads(a + 1) == 1
    ones = Tensor.ones(4, 6).realize()  # a realized constant, alive while the next kernel is built
    assert loads(a + 1) == 1
    assert ones.numpy().sum() == 24
