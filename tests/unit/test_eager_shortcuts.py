"""The shortcuts an eager step takes must give what the plain way gives.

The scheduler's and backward()'s graph walks are written out for speed: they must list the nodes in
the order of the library's one generic walk (postorder). A number operand becomes a constant of the
other operand's shape at once, and equal kernels of two graph structures share one AST object.
"""

import numpy as np

from tinyedu import Tensor, count_primitives, dtypes
from tinyedu.core.helpers import postorder
from tinyedu.core.ops import LoadOps
from tinyedu.engine import schedule
from tinyedu.engine.schedule_cache import ScheduleCache
from tinyedu.models.transformer import Block


def _block_loss() -> Tensor:
    Tensor.manual_seed(0)
    x = Tensor(np.random.default_rng(0).standard_normal((2, 5, 16)).astype(np.float32), requires_grad=True)
    return Block(16, 2)(x).square().mean()


def test_backward_walks_the_graph_in_postorder():
    loss = _block_loss()

    def inputs_with_grad(t: Tensor) -> list[Tensor]:
        return [p for p in reversed(t._parents) if p._ctx is not None or p.requires_grad]

    assert loss._graph_order() == postorder([loss], inputs_with_grad)[::-1]


def test_scheduler_walks_the_graph_in_postorder():
    loss = _block_loss().backward()
    shared = Tensor.ones(2, 5, 16) * 3  # two outputs that share a node, one of them a view
    outs = [loss.lazydata, shared.lazydata.reshape((10, 16)), shared.exp().lazydata]

    def unrealized_sources(node):
        return [src.base for src in node.srcs if src.base.realized is None]

    roots = [out.base for out in outs if out.base.realized is None]
    assert schedule.bases_to_run(outs) == postorder(roots, unrealized_sources)


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
