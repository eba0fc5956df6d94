"""The shortcuts an eager step takes must give what the plain way gives.

A number operand becomes a constant of the other operand's shape at once, and equal kernels of two
graph structures share one AST object.
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
