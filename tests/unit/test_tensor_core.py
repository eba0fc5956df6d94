"""The mechanics under every Tensor op: laziness, views, the NUMPY device's semantics, autograd rules."""

import numpy as np
import pytest

from tinyedu import Tensor, dtypes, no_grad
from tinyedu.core.helpers import GlobalCounters
from tinyedu.core.ops import BinaryOps, LoadOps
from tinyedu.runtime.ops_numpy import alu, gather
from tinyedu.shape import ShapeTracker


class TestLaziness:
    def test_building_the_graph_runs_no_kernel(self):
        a, b = Tensor([1.0, 2.0, 3.0]), Tensor([4.0, 5.0, 6.0])
        GlobalCounters.reset()
        c = (a * b + 1).relu().sum()
        assert GlobalCounters.kernel_count == 0
        assert c.item() == pytest.approx(1 * 4 + 2 * 5 + 3 * 6 + 3)
        assert GlobalCounters.kernel_count > 0

    def test_movement_ops_are_views_of_the_same_base(self):
        a = Tensor(np.arange(24, dtype=np.float32).reshape(2, 3, 4)).realize()
        moved = a.permute(2, 0, 1).reshape(4, 6).shrink(((1, 3), None)).flip(0).pad(((1, 1), (0, 2)))
        assert moved.lazydata.base is a.lazydata.base
        assert moved.lazydata.is_view
        GlobalCounters.reset()
        assert moved.lazydata.st.shape == (4, 8)
        assert GlobalCounters.kernel_count == 0

    def test_realized_buffer_drops_its_sources(self):
        a = Tensor([1.0, 2.0])
        b = (a + 1).realize()
        assert b.lazydata.base.realized is not None and b.lazydata.base.srcs == ()

    def test_constants_need_no_buffer(self):
        out = (Tensor([1.0, 2.0]) * 3).realize()
        assert out.tolist() == [3.0, 6.0]
        assert out.lazydata.base.op is BinaryOps.MUL

    def test_empty_and_full_outputs(self):
        assert Tensor.empty(2, 3).shape == (2, 3)
        assert Tensor.full((2, 2), 7).numpy().tolist() == [[7, 7], [7, 7]]
        assert Tensor.empty(0).lazydata.base.op is LoadOps.EMPTY


class TestNumpyDeviceSemantics:
    """The NUMPY device defines the semantics other devices must match (C-style integer division)."""

    def test_integer_division_truncates_like_c(self):
        a, b = np.array([7, -7, 7, -7, 5], np.int32), np.array([2, 2, -2, -2, 0], np.int32)
        assert alu(BinaryOps.DIV, a, b).tolist() == [3, -3, -3, 3, 0]
        assert alu(BinaryOps.MOD, a, b).tolist() == [1, -1, 1, -1, 0]

    @pytest.mark.parametrize("moves", [
        [("permute", (1, 0))],
        [("pad", ((1, 2), (0, 1)))],
        [("stride", (-1, 2))],
        [("shrink", ((1, 3), (0, 2))), ("stride", (-2, -1))],
        [("permute", (1, 0)), ("reshape", (2, 6))],
        [("pad", ((1, 0), (2, 2))), ("reshape", (4, 8)), ("shrink", ((1, 4), (3, 8)))],
    ])
    def test_gather_matches_numpy_moves(self, moves):
        base = np.arange(1, 13, dtype=np.float32)  # 1.. so that 0 only comes from padding
        st, expected = ShapeTracker.from_shape((3, 4)), base.reshape(3, 4)
        for name, arg in moves:
            st = getattr(st, name)(arg)
            if name == "permute":
                expected = expected.transpose(arg)
            elif name == "pad":
                expected = np.pad(expected, arg)
            elif name == "stride":
                expected = expected[tuple(slice(None, None, k) for k in arg)]
            elif name == "shrink":
                expected = expected[tuple(slice(lo, hi) for lo, hi in arg)]
            elif name == "reshape":
                expected = expected.reshape(arg)
        np.testing.assert_array_equal(gather(base, st), expected)


class TestAutogradRules:
    def test_gradients_accumulate_across_backward_calls(self):
        x = Tensor([1.0, 2.0], requires_grad=True)
        (x * x).sum().backward()
        (x * 3).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), [2 * 1 + 3, 2 * 2 + 3])

    def test_backward_on_non_scalar_needs_a_gradient(self):
        x = Tensor([[1.0, 2.0]], requires_grad=True)
        with pytest.raises(RuntimeError, match=r"backward.*shape \(1, 2\).*sum\(\)"):
            (x * 2).backward()
        (x * 2).backward(gradient=Tensor([[1.0, 10.0]]))
        np.testing.assert_allclose(x.grad.numpy(), [[2.0, 20.0]])

    def test_second_backward_needs_retain_graph(self):
        x = Tensor([3.0], requires_grad=True)
        y = (x * x).sum()
        y.backward()
        with pytest.raises(RuntimeError, match="retain_graph"):
            y.backward()
        z = (x * x).sum()
        z.backward(retain_graph=True)
        z.backward()
        assert x.grad.item() == pytest.approx(6.0 * 3)

    def test_backward_without_grad_is_an_error(self):
        with pytest.raises(RuntimeError, match="requires_grad"):
            (Tensor([1.0]) * 2).sum().backward()

    def test_no_grad_and_detach_cut_the_graph(self):
        x = Tensor([1.0, 2.0], requires_grad=True)
        with no_grad():
            y = x * 2
        assert not y.requires_grad
        z = (x.detach() * x).sum()
        z.backward()
        np.testing.assert_allclose(x.grad.numpy(), [1.0, 2.0])  # only the non-detached factor

    def test_only_floats_can_require_grad(self):
        with pytest.raises(TypeError, match="int32.*float"):
            Tensor([1, 2], requires_grad=True)

    def test_a_long_chain_backpropagates_without_recursion(self):
        x = Tensor([1.0], requires_grad=True)
        y = x
        for _ in range(2000):
            y = y * 1.0001
        y.sum().backward()
        assert x.grad.item() == pytest.approx(1.0001**2000, rel=1e-3)


class TestCreationAndDtypes:
    def test_python_data_gets_pytorch_like_dtypes(self):
        assert Tensor([1, 2]).dtype == dtypes.int32
        assert Tensor([1.0, 2]).dtype == dtypes.float32
        assert Tensor([True, False]).dtype == dtypes.bool
        assert Tensor(np.zeros(3, np.float64)).dtype == dtypes.float64  # numpy arrays keep theirs
        assert (Tensor([1, 2]) + 1.5).dtype == dtypes.float32
        assert (Tensor([1, 2]) / Tensor([2, 2])).dtype == dtypes.float32
        assert (Tensor([1, 2], dtype="uint8") + Tensor([1, 2])).dtype == dtypes.int32

    def test_bad_data_is_a_clear_error(self):
        with pytest.raises(ValueError, match="ragged"):
            Tensor([[1, 2], [3]])
        with pytest.raises(TypeError, match="cannot make a tensor from"):
            Tensor({"a": 1})
        with pytest.raises(TypeError, match="unknown dtype"):
            Tensor([1.0], dtype="complex64")
        with pytest.raises(ValueError, match="unknown device"):
            Tensor([1.0], device="TPU")
        with pytest.raises(OverflowError, match="int32"):
            Tensor([2**40])

    def test_seeded_random_numbers_repeat(self):
        Tensor.manual_seed(3)
        a = Tensor.randn(4).numpy()
        Tensor.manual_seed(3)
        np.testing.assert_array_equal(a, Tensor.randn(4).numpy())


def test_count_primitives_sees_every_function_applied():
    from tinyedu import count_primitives

    x = Tensor([[1.0, -2.0], [3.0, 4.0]])
    with count_primitives() as counts:
        (x * 2 + 1).relu()
    assert counts["Mul"] == 1 and counts["Add"] == 1   # the arithmetic
    assert counts["Relu"] == 1  # relu is a composite Function (NaN and the gradient at 0 need it)
    with count_primitives() as outside:
        pass
    assert not outside
