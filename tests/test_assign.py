"""Tensor.assign: in-place writes, who sees them, and every way it can go wrong.

The oracle is plain numpy (what the values must be), and PyTorch's semantics for in-place updates:
holders and views of the memory see the new values; a computation built before the write computes
with the old ones; autograd refuses a graph whose input was overwritten.
"""

from __future__ import annotations

import numpy as np
import pytest

from tinyedu import Device, Tensor, dtypes, no_grad
from tinyedu.engine import assign as assign_engine
from tinyedu.engine import realize
from tinyedu.runtime.device import Buffer, DeviceUnavailable


def _programs_run(fn) -> list[str]:
    """Names of the programs (kernels, copies, fills) that ran inside fn()."""
    names: list[str] = []
    realize.observers.append(lambda name, ast, program, buffers: names.append(name))
    try:
        fn()
    finally:
        realize.observers.pop()
    return names


@pytest.mark.parametrize("device", Device.known)
def test_assign_writes_in_place_and_holders_see_it(device: str) -> None:
    try:
        Device[device].check_runnable()  # CUDA compiles anywhere, runs only on a GPU
    except DeviceUnavailable as missing:  # e.g. GPU without an OpenCL platform
        pytest.skip(str(missing))
    w = Tensor(np.arange(6, dtype=np.float32).reshape(2, 3), device=device).realize()
    buffer = w.lazydata.base.realized
    same = Tensor(w.lazydata)                        # another Tensor holding the same memory
    view, flat = w.T, w.reshape(6)                   # views made before the write
    assert w.assign(w * 2 + 1) is w
    expected = np.arange(6, dtype=np.float32).reshape(2, 3) * 2 + 1
    assert w.lazydata.base.realized is buffer        # the same memory, not a new tensor
    np.testing.assert_array_equal(w.numpy(), expected)
    np.testing.assert_array_equal(same.numpy(), expected)
    np.testing.assert_array_equal(view.numpy(), expected.T)
    np.testing.assert_array_equal(flat.numpy(), expected.reshape(6))


def test_a_computation_built_before_the_write_uses_the_old_values() -> None:
    w = Tensor([1.0, 2.0, 3.0]).realize()
    before = w * 10                                  # lazy: not run yet
    w.assign(Tensor([7.0, 8.0, 9.0]))
    after = w * 10
    np.testing.assert_array_equal(before.numpy(), [10, 20, 30])  # as an eager framework would give
    np.testing.assert_array_equal(after.numpy(), [70, 80, 90])


def test_assign_all_computes_every_value_from_the_old_contents() -> None:
    # a swap: each value reads the other target, so neither may be written before both are computed
    a, b = Tensor([1.0, 2.0]).realize(), Tensor([3.0, 4.0]).realize()
    Tensor.assign_all([a, b], [b + 0, a + 0])
    np.testing.assert_array_equal(a.numpy(), [3, 4])
    np.testing.assert_array_equal(b.numpy(), [1, 2])
    Tensor.assign_all([a, b], [b * 2, a * 2])          # the same with kernels instead of plain copies
    np.testing.assert_array_equal(a.numpy(), [2, 4])
    np.testing.assert_array_equal(b.numpy(), [6, 8])


def test_a_transposed_read_of_the_target_goes_through_a_copy() -> None:
    # w.T reads element (j, i) where (i, j) is written: writing in place would read new values
    data = np.arange(9, dtype=np.float32).reshape(3, 3)
    w = Tensor(data).realize()
    names = _programs_run(lambda: w.assign(w.T + 1))
    np.testing.assert_array_equal(w.numpy(), data.T + 1)
    assert any(name.startswith("copy_") for name in names)


def test_an_elementwise_update_writes_straight_into_the_target() -> None:
    w = Tensor(np.ones((4, 4), dtype=np.float32)).realize()
    g = Tensor(np.full((4, 4), 2.0, dtype=np.float32)).realize()
    names = _programs_run(lambda: w.assign(w - 0.5 * g))
    np.testing.assert_array_equal(w.numpy(), np.zeros((4, 4)))
    assert names == ["E_4_4"]                          # one kernel, no copy


def test_an_update_fused_after_a_reduce_is_written_in_place_and_correct() -> None:
    rng = np.random.default_rng(0)
    x_np = rng.standard_normal((5, 3)).astype(np.float32)
    w_np = rng.standard_normal((3, 4)).astype(np.float32)
    x, w = Tensor(x_np).realize(), Tensor(w_np).realize()
    # the gradient of w for loss = (x @ w).sum() is x.T @ ones: a reduce; the update is fused after it
    names = _programs_run(lambda: w.assign(w - 0.1 * (x.T @ Tensor.ones(5, 4))))
    np.testing.assert_allclose(w.numpy(), w_np - 0.1 * x_np.T @ np.ones((5, 4), np.float32), rtol=1e-6)
    assert not any(name.startswith("copy_") for name in names)


def test_reading_the_target_inside_the_reduce_is_not_written_in_place() -> None:
    data = np.arange(1, 5, dtype=np.float32).reshape(2, 2)
    w = Tensor(data).realize()
    w.assign(w @ w)                                  # every output element reads a row and a column of w
    np.testing.assert_allclose(w.numpy(), data @ data)


def test_assign_into_a_constant_or_lazy_tensor_gives_it_memory_first() -> None:
    z = Tensor.zeros(3)                              # a constant: kernels read it as a literal
    z.assign(z + 1)
    z.assign(z * 5)
    np.testing.assert_array_equal(z.numpy(), [5, 5, 5])
    np.testing.assert_array_equal(Tensor.zeros(3).numpy(), [0, 0, 0])  # other zeros are untouched
    lazy = Tensor([1.0, 2.0]) + 1
    lazy.assign(Tensor([0.0, 0.0]))
    np.testing.assert_array_equal(lazy.numpy(), [0, 0])


def test_assign_numbers_and_arrays() -> None:
    t = Tensor([1, 2, 3], dtype=dtypes.int32).realize()
    t.assign(7)
    np.testing.assert_array_equal(t.numpy(), [7, 7, 7])
    t.assign(np.array([4, 5, 6]))
    np.testing.assert_array_equal(t.numpy(), [4, 5, 6])
    assert t.dtype == dtypes.int32


def test_assign_to_itself_is_a_no_op() -> None:
    w = Tensor([1.0, 2.0]).realize()
    assert _programs_run(lambda: w.assign(w)) == []
    np.testing.assert_array_equal(w.numpy(), [1, 2])


@pytest.mark.parametrize("value, error, match", [
    (Tensor([1.0, 2.0]), ValueError, r"shape \(2,\) but the tensor has shape \(3,\)"),
    (Tensor([1, 2, 3]), TypeError, r"int32 but the tensor is float32; cast it first"),
    ("text", TypeError, r"must be a Tensor, a number"),
])
def test_bad_values_are_refused(value, error, match) -> None:
    w = Tensor([1.0, 2.0, 3.0]).realize()
    with pytest.raises(error, match=match):
        w.assign(value)
    np.testing.assert_array_equal(w.numpy(), [1, 2, 3])


def test_other_device_and_bad_targets_are_refused() -> None:
    w = Tensor([1.0, 2.0], device="C").realize()
    with pytest.raises(ValueError, match="on NUMPY but the tensor is on C"):
        w.assign(Tensor([1.0, 2.0], device="NUMPY"))
    x = Tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    with pytest.raises(RuntimeError, match="backward\\(\\) may still need"):
        y.assign(Tensor([0.0, 0.0]))
    m = Tensor(np.ones((2, 3), np.float32)).realize()
    with pytest.raises(ValueError, match="reorders or selects part of a buffer"):
        m.T.assign(Tensor(np.zeros((3, 2), np.float32)))
    with pytest.raises(ValueError, match="the same tensor is assigned twice"):
        Tensor.assign_all([m, m], [m + 1, m + 2])
    with pytest.raises(ValueError, match="2 targets but 1 values"):
        Tensor.assign_all([m, w], [m])


def test_backward_refuses_an_input_overwritten_after_the_forward_pass() -> None:
    w = Tensor([1.0, 2.0, 3.0], requires_grad=True).realize()
    loss = (w * w).sum()
    with no_grad():
        w.assign(w * 10)
    with pytest.raises(RuntimeError, match="overwritten by assign\\(\\) after the forward pass"):
        loss.backward()


def test_gradients_stay_correct_across_updates() -> None:
    """Three SGD steps by hand on a two-layer linear model, checked against numpy's own gradients."""
    rng = np.random.default_rng(1)
    x_np = rng.standard_normal((4, 3)).astype(np.float32)
    w1_np = rng.standard_normal((3, 5)).astype(np.float32)
    w2_np = rng.standard_normal((5, 2)).astype(np.float32)
    w1, w2 = Tensor(w1_np, requires_grad=True).realize(), Tensor(w2_np, requires_grad=True).realize()
    x = Tensor(x_np)
    for _ in range(3):
        loss = (x @ w1 @ w2).square().sum()
        w1.grad = w2.grad = None
        loss.backward()
        with no_grad():
            Tensor.assign_all([w1, w2], [w1 - 0.01 * w1.grad, w2 - 0.01 * w2.grad])
        out = x_np @ w1_np @ w2_np                 # numpy: d/dW of sum(out^2)
        g2 = (x_np @ w1_np).T @ (2 * out)
        g1 = x_np.T @ (2 * out @ w2_np.T)
        w1_np, w2_np = w1_np - 0.01 * g1, w2_np - 0.01 * g2
        np.testing.assert_allclose(loss.numpy(), (out ** 2).sum(), rtol=1e-5)
    np.testing.assert_allclose(w1.numpy(), w1_np, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(w2.numpy(), w2_np, rtol=1e-4, atol=1e-5)


def test_the_version_guard_refuses_a_stale_plan() -> None:
    """Safety net under the snapshots: a computation planned on memory written since is refused."""
    w = Tensor([1.0, 2.0]).realize()
    y = w * 3
    w.lazydata.base.realized.version += 1            # a write nobody told the graph about
    with pytest.raises(RuntimeError, match="assign has overwritten since"):
        y.numpy()


def test_snapshots_are_only_taken_for_pending_readers() -> None:
    w = Tensor([1.0, 2.0]).realize()
    assert not any(n.startswith("snapshot") for n in _programs_run(lambda: w.assign(w + 1)))
    pending = w * 2
    assert any(n.startswith("snapshot") for n in _programs_run(lambda: w.assign(w + 1)))
    np.testing.assert_array_equal(pending.numpy(), [4, 6])
    assert assign_engine.pending_readers(w.lazydata.base.realized) == []  # it ran: nothing pending


def test_versions_count_writes() -> None:
    w = Tensor([1.0]).realize()
    buffer: Buffer = w.lazydata.base.realized
    start = buffer.version
    w.assign(w + 1)
    w.assign(w + 1)
    assert buffer.version == start + 2


def test_clone_does_not_share_memory() -> None:
    w = Tensor([1.0, 2.0]).realize()
    copy = w.clone()
    w.assign(w * 10)
    np.testing.assert_array_equal(copy.numpy(), [1, 2])
    x = Tensor([1.0, 2.0], requires_grad=True)
    x.clone().sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [1, 1])


def test_a_constant_assigned_in_place_stays_that_constant() -> None:
    # assign stores a constant value straight into the target's buffer; constants are remembered (by
    # LazyBuffer.full and the node cache), and one that was stored must not later read the target
    lr = Tensor(np.array(0.5, dtype=np.float32)).realize()
    for value in (0.05, 0.0, 0.1, 0.05, 0.0):
        lr.assign(Tensor(value))
        assert lr.item() == np.float32(value)
        assert (Tensor(value) + Tensor(np.array(0.0, dtype=np.float32))).item() == np.float32(value)
    constant = Tensor.full((3,), 0.25)
    target = Tensor(np.zeros(3, dtype=np.float32)).realize()
    target.assign(constant)
    target.assign(target + 1)
    np.testing.assert_array_equal(Tensor.full((3,), 0.25).numpy(), [0.25] * 3)
    np.testing.assert_array_equal(target.numpy(), [1.25] * 3)


def test_a_reader_the_update_frees_needs_no_snapshot() -> None:
    """Old values are kept just before a weight is written, when the update's schedule has freed the
    graphs it ran: the forward product of the matmul (part of the kernel that stored the logits, which
    the loss reads) is gone by then, so nothing is copied, and the loss realized afterwards is still
    the one computed from the old weight. A computation a tensor still holds gets its snapshot."""
    from tinyedu.nn.optim import SGD

    rng = np.random.default_rng(0)
    x_np = rng.standard_normal((8, 5)).astype(np.float32)
    w_np = rng.standard_normal((3, 5)).astype(np.float32)
    labels = np.array([0, 1, 2, 0, 1, 2, 0, 1], dtype=np.int32)
    x, w = Tensor(x_np).realize(), Tensor(w_np, requires_grad=True)
    opt = SGD([w], lr=0.1)
    loss = x.linear(w).cross_entropy(Tensor(labels))
    loss.backward()
    assert not any(n.startswith("snapshot") for n in _programs_run(opt.step))
    logits = x_np.astype(np.float64) @ w_np.T.astype(np.float64)
    logp = logits - np.log(np.exp(logits).sum(1, keepdims=True))
    np.testing.assert_allclose(loss.numpy(), -logp[np.arange(8), labels].mean(), rtol=1e-5)  # old weight's
    assert not np.array_equal(w.numpy(), w_np)                                           # (it did change)

    old = w.numpy()
    held = w * 2                                                     # lazy, and held: it needs one
    x.linear(w).cross_entropy(Tensor(labels)).backward()
    assert sum(n.startswith("snapshot") for n in _programs_run(opt.step)) == 1
    np.testing.assert_array_equal(held.numpy(), 2 * old)


def test_rule_two_is_remembered_per_kernel_and_per_target() -> None:
    """The answer of rule 2 is remembered per (AST, the target's buffer numbers): one kernel that
    reads one buffer inside its reduce and another where it stores answers differently for each."""
    from tinyedu.engine.schedule_cache import schedules

    w = Tensor(np.arange(16, dtype=np.float32).reshape(4, 4)).realize()
    x = Tensor(np.ones((4, 1), dtype=np.float32)).realize()
    [item] = schedules.schedule([(x + w.sum(1, keepdim=True)).lazydata])  # one kernel: the add fuses
    number = {id(inp.realized): k + 1 for k, inp in enumerate(item.inputs)}
    in_reduce = frozenset({number[id(w.lazydata.base.realized)]})
    where_stored = frozenset({number[id(x.lazydata.base.realized)]})
    for _ in range(2):  # the second time from the remembered answers
        assert not assign_engine._reads_only_where_it_stores(item.ast, in_reduce)
        assert assign_engine._reads_only_where_it_stores(item.ast, where_stored)
