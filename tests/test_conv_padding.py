"""A large padded convolution input is copied out once, its zeros written (tinyedu/function_conv.py,
dense_padding), so the convolution's loads carry no in-image condition; a small one stays a view.
Both against PyTorch: the forward and the gradient of the weight (which reads the same copy)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tinyedu import Tensor
from tinyedu.core.ops import BufferOps, LoadOps
from tinyedu.engine.schedule import create_schedule
from tinyedu.function_conv import DENSE_PADDING_MIN


def kernels(t: Tensor) -> list:
    return [i for i in create_schedule([t.lazydata]) if not isinstance(i.ast.op, LoadOps)]


def masked_loads(item) -> int:
    """How many of the kernel's loads read through a mask (a padding condition)."""
    return sum(1 for node in item.ast.walk() if node.op is BufferOps.LOAD
               and any(v.mask is not None for v in node.arg.st.views))


@pytest.mark.parametrize("x_shape, w_shape, stride, padding", [
    ((2, 16, 62, 62), (4, 16, 3, 3), 1, 1),  # 2 * 16 * 64 * 64 = 131072 padded elements: copied out
    ((1, 8, 126, 80), (3, 8, 5, 3), 2, (2, 1)),  # 8 * 130 * 82 = 85280
])
def test_a_large_padded_input_is_copied_once_and_the_convolution_reads_it_unmasked(x_shape, w_shape, stride,
                                                                                  padding) -> None:
    rng = np.random.default_rng(0)
    X, W = rng.standard_normal(x_shape).astype(np.float32), rng.standard_normal(w_shape).astype(np.float32)
    x, w = Tensor(X), Tensor(W, requires_grad=True)
    out = x.conv2d(w, stride=stride, padding=padding)
    items = kernels(out)
    assert len(items) == 2 and masked_loads(items[0]) == 1 and masked_loads(items[1]) == 0
    tw = torch.from_numpy(W).requires_grad_()
    expected = torch.nn.functional.conv2d(torch.from_numpy(X), tw, stride=stride, padding=padding)
    np.testing.assert_allclose(out.numpy(), expected.detach().numpy(), rtol=1e-4, atol=1e-4)
    out.sum().backward()
    expected.sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-4, atol=1e-3)


def test_a_small_padded_input_stays_a_view_in_one_kernel() -> None:
    x = Tensor(np.ones((1, 2, 6, 6), np.float32))
    assert 2 * 8 * 8 < DENSE_PADDING_MIN
    items = kernels(x.conv2d(Tensor(np.ones((4, 2, 3, 3), np.float32)), padding=1))
    assert len(items) == 1 and masked_loads(items[0]) == 1
