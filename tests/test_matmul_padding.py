"""Matmuls whose contiguous sizes are not whole vectors are padded (tinyedu/tensor_api/nn_ops.py,
`_times_transposed_padded`): the inputs are copied with zeros up to multiples of PAD_TO, the product
of the copies is cut back to its size. Checked here: the values and gradients against PyTorch in
float64, the specials (0 * inf in the padding must not leak), that the padded product's kernel
gets a vector axis, that each copy keeps its source's order in memory, and which shapes are left
alone (small ones, and ones the padding would grow by more than PAD_MAX_GROWTH). Last, numpy() of
views like the padded product's result (a slice of its base), which it copies out of the base's
memory without a kernel."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tinyedu import Tensor, count_primitives
from tinyedu.codegen import heuristics
from tinyedu.codegen.kernel import Kernel
from tinyedu.codegen.opts import OptOps
from tinyedu.core.ops import LoadOps, ReduceOps
from tinyedu.engine.schedule import create_schedule
from tinyedu.tensor_api import nn_ops


def data(shape: tuple[int, ...], seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def padded(op) -> bool:
    with count_primitives() as counts:
        op()
    return counts["Pad"] > 0


@pytest.mark.parametrize("x_shape, w_shape", [((257, 255), (255, 130)), ((3, 129, 255), (3, 255, 257))],
                         ids=["2-d", "batched"])
def test_a_padded_matmul_and_its_gradients_match_pytorch_in_float64(x_shape, w_shape) -> None:
    x_np, w_np = data(x_shape, 0), data(w_shape, 1)
    x, w = Tensor(x_np, requires_grad=True), Tensor(w_np, requires_grad=True)
    assert padded(lambda: x @ w)
    out = x @ w
    assert out.shape == x_shape[:-1] + w_shape[-1:]
    g_np = data(out.shape, 2)
    (out * Tensor(g_np)).sum().backward()
    tx, tw = (torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in (x_np, w_np))
    ref = tx @ tw
    (ref * torch.tensor(g_np, dtype=torch.float64)).sum().backward()
    np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-4, atol=1e-4)


def test_the_padding_leaks_no_nan_and_keeps_the_sign_of_zero() -> None:
    """An inf times a padded zero is NaN, but only in the rows and columns that are cut away; an
    all -0.0 input gives +0.0, as numpy, PyTorch and the unpadded kernel do (sums start at +0.0)."""
    x_np, w_np = data((257, 255), 3), data((255, 257), 4)
    x_np[5, 7], w_np[9, 11], x_np[200, 254] = np.inf, -np.inf, np.nan
    got = (Tensor(x_np) @ Tensor(w_np)).numpy()
    with np.errstate(all="ignore"):
        ref = x_np.astype(np.float64) @ w_np.astype(np.float64)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(ref))
    finite = np.isfinite(ref)
    np.testing.assert_allclose(got[finite], ref[finite], rtol=1e-4, atol=1e-4)
    zeros = (Tensor(-np.zeros((257, 255), np.float32)) @ Tensor(np.ones((255, 257), np.float32))).numpy()
    assert not np.signbit(zeros).any()


def test_the_padded_product_is_vectorized() -> None:
    """257 is a prime: unpadded, the kernel has no vector axis; padded to 272, it gets 16 lanes."""
    x, w = Tensor(data((257, 257), 5)).realize(), Tensor(data((257, 257), 6)).realize()
    items = [i for i in create_schedule([(x @ w).lazydata]) if not isinstance(i.ast.op, LoadOps)]
    matmul = next(i for i in items if any(n.op is ReduceOps.SUM for n in i.ast.walk()))
    kernel = Kernel(matmul.ast)
    assert kernel.full_shape[:2] == (272, 272), kernel.full_shape
    opts = heuristics.hand_coded_optimizations(kernel, 16, 1)
    assert any(o.op is OptOps.UPCAST and o.amount == 16 for o in opts), opts


@pytest.mark.parametrize("transposed", [True, False], ids=["x @ w", "x @ w.T (a Linear's weight)"])
def test_each_padded_copy_keeps_the_order_of_its_source_in_memory(transposed: bool) -> None:
    """x @ w passes w's transpose on: its padded copy is made as (k, m), rows of w in order, not as
    (m, k), which would read w down its columns (and only m is padded: its vectors run along m). A
    weight stored as (m, k) is copied as (m, k), both padded."""
    x_np, w_np = data((257, 255), 9), data((255, 257), 10)
    x = Tensor(x_np).realize()
    w = Tensor(w_np).realize() if transposed else Tensor(np.ascontiguousarray(w_np.T)).realize().T
    product = x @ w
    items = create_schedule([product.lazydata])
    copy = next(i for i in items if any(b is w.lazydata.base for b in i.inputs))
    assert copy.out.shape == ((255, 272) if transposed else (272, 256)), copy.out.shape
    np.testing.assert_allclose(product.numpy(), x_np.astype(np.float64) @ w_np, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("n, x_copied", [(260, False), (257, True)],
                         ids=["rows a block divides", "prime rows"])
def test_a_times_b_copies_x_only_when_its_rows_need_padding(n: int, x_copied: bool) -> None:
    """In a @ b the kernel's vectors run along m (b's rows in memory) and each element of x is read
    alone: k needs no padding, and n only when a register block of ROWS_DIVIDE rows does not divide
    it. Then x is used where it is, without a copy."""
    x_np, w_np = data((n, 255), 11), data((255, 257), 12)
    x, w = Tensor(x_np).realize(), Tensor(w_np).realize()
    product = x @ w
    assert padded(lambda: x @ w)
    copies = [i for i in create_schedule([product.lazydata]) if not any(
        n.op is ReduceOps.SUM for n in i.ast.walk())]
    read = [any(b is x.lazydata.base for b in i.inputs) for i in copies]
    assert read.count(True) == int(x_copied) and len(copies) == 1 + int(x_copied), [i.name for i in copies]
    assert (n % nn_ops.ROWS_DIVIDE != 0) == x_copied
    np.testing.assert_allclose(product.numpy(), x_np.astype(np.float64) @ w_np, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("x_shape, w_shape", [((64, 65), (65, 66)), ((2, 3), (3, 100_001)),
                                              ((257, 256), (256, 257)), ((63, 63), (63, 63))],
                         ids=["small", "grows too much", "whole vectors along k", "below the work bound"])
def test_shapes_that_do_not_need_it_are_not_padded(x_shape, w_shape) -> None:
    x, w = Tensor(data(x_shape, 7)), Tensor(data(w_shape, 8))
    assert not padded(lambda: x @ w)
    np.testing.assert_allclose((x @ w).numpy(), data(x_shape, 7).astype(np.float64) @ data(w_shape, 8),
                               rtol=1e-4, atol=1e-4)
    assert nn_ops.PAD_TO == 16  # (the sizes above are chosen around it)


@pytest.mark.parametrize("view", ["transpose", "slice", "broadcast", "bfloat16 full", "flip"])
def test_numpy_of_a_view_copies_it_out_of_its_base(view: str) -> None:
    """numpy() of a view without padding reads the base's memory with numpy's strides (a padded
    product's result is such a slice); the array is a writable copy of its own."""
    from tinyedu import dtypes

    a = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    t = Tensor(a)
    cases = {"transpose": (lambda x: x.permute(2, 0, 1), a.transpose(2, 0, 1)),
             "slice": (lambda x: x[1:, ::2, 3], a[1:, ::2, 3]),
             "broadcast": (lambda x: x[:, :1].expand(3, 6, 5), np.broadcast_to(a[:, :1], (3, 6, 5))),
             "bfloat16 full": (lambda x: Tensor.full((3,), 0.1, dtype=dtypes.bfloat16),
                               torch.full((3,), 0.1, dtype=torch.bfloat16).float().numpy()),
             "flip": (lambda x: x.flip(1), a[:, ::-1])}
    op, expected = cases[view]
    got = op(t).numpy()
    np.testing.assert_array_equal(got, expected)
    got[...] = -1
    np.testing.assert_array_equal(t.numpy(), a)
