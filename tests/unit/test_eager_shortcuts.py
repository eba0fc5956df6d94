"""The shortcuts an eager step takes must give what the plain way gives.

A number operand becomes a constant of the other operand's shape at once, equal kernels of two
graph structures share one AST object, operands of one shape and dtype skip the broadcasting steps,
and the readers a buffer keeps for assign are weak references swept in bulk.
"""

import numpy as np

from tinyedu import Tensor, count_primitives, dtypes
from tinyedu.core.ops import LoadOps
from tinyedu.engine.schedule_cache import ScheduleCache
from tinyedu.models.transformer import Block


def _block_loss() -> Tensor:
    Tensor.manual_seed(0)
    x = Tensor(np.random.default_rng(0).standard_normal((2, 5, 16)).astype(np.float32), requires_grad=True)
    return Block(16, 2)(x).square().mean()


def test_a_number_operand_is_a_constant_of_the_other_shape():
    x = Tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    with count_primitives() as counts:
        y = 2.0 - x * 0.5
    assert dict(counts) == {"Mul": 1, "Sub": 1}
    np.testing.assert_array_equal(y.numpy(), 2.0 - np.arange(6, dtype=np.float32).reshape(2, 3) * 0.5)
    ints = Tensor([[1, 2, 3]], dtype=dtypes.int32)
    assert (ints * 2).dtype == dtypes.int32 and (ints * 2.5).dtype == dtypes.float32  # promotion kept
    np.testing.assert_array_equal((ints * 2.5).numpy(), np.array([[2.5, 5.0, 7.5]], dtype=np.float32))


def test_equal_kernels_of_two_structures_share_one_ast():
    cache = ScheduleCache()
    a = Tensor(np.ones((4, 4), dtype=np.float32)).realize()
    first = cache.schedule([((a + 1) * 2).lazydata])
    b = Tensor(np.ones((4, 4), dtype=np.float32)).realize()
    second = cache.schedule([((a + 1) * 2).lazydata, (b * 3).lazydata])  # another structure, one same kernel
    assert cache.misses == 2
    kernels = [item.ast for item in first if not isinstance(item.ast.op, LoadOps)]
    later = [item.ast for item in second if not isinstance(item.ast.op, LoadOps)]
    equal = [(x, y) for x in kernels for y in later if x == y]
    assert len(equal) == 1 and equal[0][0] is equal[0][1]


def _grads(make_loss, *arrays):
    """The loss and the gradients of the tensors made from `arrays`, as raw bytes (bit for bit)."""
    tensors = [Tensor(a, requires_grad=True) for a in arrays]
    loss = make_loss(*tensors)
    loss.backward()
    return [loss.numpy().tobytes()] + [t.grad.numpy().tobytes() for t in tensors]


def test_linear_gives_what_matmul_of_the_transposed_weight_gives():
    """linear multiplies by the weight without transposing weight.T back: the same bits, gradients too."""
    rng = np.random.default_rng(0)
    w, b = rng.standard_normal((5, 7)).astype(np.float32), rng.standard_normal(5).astype(np.float32)
    for shape in ((3, 7), (2, 3, 7), (7,)):
        x = rng.standard_normal(shape).astype(np.float32)
        fast = _grads(lambda x, w, b: x.linear(w, b).square().sum(), x, w, b)
        plain = _grads(lambda x, w, b: (x.matmul(w.T) + b).square().sum(), x, w, b)
        assert fast == plain, shape
    with count_primitives() as counts:
        Tensor(np.ones((3, 7), np.float32)).linear(Tensor(w))
    assert counts["Permute"] == 0  # (matmul(weight.T) permutes twice)


def test_pending_readers_lists_each_live_unrun_reader_once():
    from tinyedu.lazy import pending_readers

    w = Tensor(np.arange(4, dtype=np.float32)).realize()
    buffer = w.lazydata.base.realized
    square = w * w  # reads the buffer twice: one reader
    doubled = w + 1
    assert {id(n) for n in pending_readers(buffer)} == {id(square.lazydata), id(doubled.lazydata)}
    assert len(pending_readers(buffer)) == 2
    doubled.realize()  # it ran: no longer pending
    assert [id(n) for n in pending_readers(buffer)] == [id(square.lazydata)]
    del square
    assert pending_readers(buffer) == []
    for _ in range(200):  # dead readers are swept: the entries stay bounded
        w * 3  # noqa: B018 - a reader made and dropped
    assert len(buffer.readers.refs) < 130
    kept = w - 1
    for _ in range(20):
        w * 3  # noqa: B018
    assert [id(n) for n in pending_readers(buffer)] == [id(kept.lazydata)]
    refs = buffer.readers.refs.values()  # asking dropped the dead readers' entries: `doubled` and `kept`
    assert len(refs) == 2 and all(ref() is not None for ref in refs)


def test_a_reader_planned_twice_on_a_buffer_reads_the_old_values_after_assign():
    w = Tensor(np.array([1.0, 2.0, 3.0], dtype=np.float32)).realize()
    square = w * w  # planned before the assign: it must see [1, 2, 3]
    w.assign(Tensor(np.array([10.0, 20.0, 30.0], dtype=np.float32))).realize()
    np.testing.assert_array_equal(square.numpy(), np.array([1.0, 4.0, 9.0], dtype=np.float32))
    np.testing.assert_array_equal((w * w).numpy(), np.array([100.0, 400.0, 900.0], dtype=np.float32))


def test_operands_of_one_shape_and_dtype_are_used_as_they_are():
    x = Tensor(np.ones((2, 3), dtype=np.float32))
    y = Tensor(np.full((2, 3), 2.0, dtype=np.float32))
    (a, b), (c, d) = x._broadcasted(y, "add"), x._broadcasted(y, "sub", reverse=True)
    assert a is x and b is y and c is y and d is x
    with count_primitives() as counts:
        z = x - y
    assert dict(counts) == {"Sub": 1}
    ints = Tensor(np.ones((2, 3), dtype=np.int32))
    assert (x + ints).dtype == dtypes.float32 and (ints - x).numpy().tolist() == [[0.0] * 3] * 2
    np.testing.assert_array_equal(z.numpy(), np.full((2, 3), -1.0, dtype=np.float32))


def test_a_remembered_movement_gives_the_same_tracker_and_keeps_the_checks():
    import pytest

    from tinyedu.shape import ShapeTracker

    st = ShapeTracker.from_shape((2, 6))
    first = st.reshape((3, 4))
    assert st.reshape((3, 4)) is first and st.reshape([3, 4]) == first  # a list: checked, not remembered
    assert first.views == ShapeTracker.from_shape((3, 4)).views
    assert st.permute((1, 0)).shape == (6, 2) and st.permute((1, 0)) is st.permute((1, 0))
    with pytest.raises(ValueError, match="must contain ints"):
        st.reshape((3.0, 4))  # equal to (3, 4), but still an error
    with pytest.raises(ValueError, match="reshape"):
        st.reshape((5, 4))
    ones = ShapeTracker.from_shape((1, 6))
    assert ones.expand((4, 6)) is ones.expand((4, 6)) and ones.expand((4, 6)).views[-1].strides == (0, 1)
    with pytest.raises(ValueError, match="expand"):
        ones.expand((4, 5))


def test_getenv_reads_what_os_environ_holds_now(monkeypatch):
    import os

    from tinyedu.core.helpers import getenv

    monkeypatch.setenv("TINYEDU_TEST_FLAG", "3")
    monkeypatch.setenv("TINYEDU_TEST_TEXT", "caf\u00e9 \u2603")
    assert getenv("TINYEDU_TEST_FLAG") == 3 and getenv("TINYEDU_TEST_TEXT", "") == "caf\u00e9 \u2603"
    monkeypatch.setenv("TINYEDU_TEST_FLAG", "5")  # a change is seen at once: nothing is cached
    assert getenv("TINYEDU_TEST_FLAG") == 5
    monkeypatch.delenv("TINYEDU_TEST_FLAG")
    assert getenv("TINYEDU_TEST_FLAG", 7) == 7 and getenv("PATH", "") == os.environ["PATH"]
    monkeypatch.setattr(os, "environ", {"TINYEDU_TEST_FLAG": "9"})  # another mapping: read the ordinary way
    assert getenv("TINYEDU_TEST_FLAG") == 9 and getenv("PATH", "") == ""


def test_an_op_result_starts_without_gradient_or_graph():
    x = Tensor(np.ones((2, 2), dtype=np.float32), requires_grad=True)
    y = Tensor(np.ones((2, 2), dtype=np.float32))
    plain = y * 2
    assert plain.grad is None and plain._ctx is None and plain._parents == () and not plain.requires_grad
    tracked = x * y
    assert tracked.requires_grad and tracked._parents[0] is x and tracked._parents[1] is y
    tracked.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.ones((2, 2), dtype=np.float32))
    assert Tensor._wrap(plain.lazydata).grad is None and Tensor.grad is None  # the class default is untouched
