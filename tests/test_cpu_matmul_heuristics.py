"""The CPU heuristics' matmul layouts: A @ B.T in its outer-product form, and which input is packed.

`linear` multiplies by its (out, in) weight as stored, so its matmul reads both inputs along the
reduce (a dot-product form). The heuristics vectorize it along the weight's rows instead and PACK
the weight's tile (tinyedu/codegen/heuristics.py, rule 3); a matrix-vector product, and a reduce too
long for a packed tile, keep the dot-product form. Each choice is checked for what it picks and,
run on the C device with exactly those opts, against numpy in float64.
"""

from __future__ import annotations

import numpy as np
import pytest

from tinyedu import Tensor
from tinyedu.codegen import heuristics
from tinyedu.codegen.kernel import AxisKind, Kernel
from tinyedu.codegen.opts import Opt, OptOps, apply_opts
from tinyedu.core.ops import LoadOps
from tinyedu.engine.lower import lower
from tinyedu.engine.schedule import create_schedule
from tinyedu.runtime.device import Buffer


def data(shape: tuple[int, ...], seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def compute_item(t: Tensor):
    items = [i for i in create_schedule([t.lazydata]) if not isinstance(i.ast.op, LoadOps)]
    assert len(items) == 1, [i.ast for i in items]
    return items[0]


def opts_and_result(t: Tensor) -> tuple[Kernel, list[Opt], np.ndarray]:
    """The heuristics' opts for t's one kernel (one thread, AVX-512's 16 lanes), and its result on
    C with exactly those opts."""
    item = compute_item(t)
    assert all(x.realized is not None for x in item.inputs)
    opts = heuristics.hand_coded_optimizations(Kernel(item.ast), 16, 1)
    out = Buffer("C", item.out.size, item.out.dtype)
    lower("C", item.ast, opts).runner([out, *(x.realized for x in item.inputs)])
    return Kernel(item.ast), opts, out.as_numpy().reshape(t.shape)


def test_the_dot_product_form_becomes_an_outer_product_with_the_weight_packed():
    x_np, w_np = data((128, 784), 0), data((256, 784), 1)
    x, w = Tensor(x_np).realize(), Tensor(w_np).realize()
    kernel, opts, got = opts_and_result(x @ w.T)
    assert kernel.full_shape == (128, 256, 784)
    # vectors along the weight's rows (the output axis of 256), not an UNROLL of the reduce
    assert opts[0] == Opt(OptOps.UPCAST, 1, 16) and not any(o.op is OptOps.UNROLL for o in opts)
    packs = [o for o in opts if o.op is OptOps.PACK]
    weight = next(p for p in range(1, len(kernel.bufs)) if kernel.sts[p].real_strides()[1] == 784)
    assert len(packs) == 1 and packs[0].amount == weight  # the weight's tile, read as vectors from there
    np.testing.assert_allclose(got, x_np.astype(np.float64) @ w_np.T.astype(np.float64), rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("rows, reduce", [(4, 784), (128, 4096)], ids=["matrix-vector", "long reduce"])
def test_few_rows_or_a_long_reduce_keep_the_dot_product_form(rows: int, reduce: int):
    """Four rows do not pay for copying the weight; a 4096-long reduce makes a tile larger than
    PACK allows (the vectors would then be gathers)."""
    x_np, w_np = data((rows, reduce), 2), data((64, reduce), 3)
    kernel, opts, got = opts_and_result(Tensor(x_np).realize() @ Tensor(w_np).realize().T)
    reduce_axis = kernel.first_reduce
    assert opts[0] == Opt(OptOps.UNROLL, reduce_axis, 16), opts
    assert not any(o.op is OptOps.PACK for o in opts)
    np.testing.assert_allclose(got, x_np.astype(np.float64) @ w_np.T.astype(np.float64), rtol=1e-4, atol=2e-3)


def test_of_two_inputs_read_across_their_rows_the_broadcast_one_is_packed():
    """The weight gradient x.T @ g: both inputs are read 256 or 784 floats apart along the reduce
    (the batch). The one read as broadcast scalars is packed, not the one read as vectors."""
    x_np, g_np = data((128, 784), 4), data((128, 256), 5)
    x, g = Tensor(x_np).realize(), Tensor(g_np).realize()
    kernel, opts, got = opts_and_result((x.reshape(128, 1, 784) * g.reshape(128, 256, 1)).sum(0))
    k = apply_opts(kernel.copy(), opts)
    vector = k.expanded_axes[-1]
    packs = [o for o in opts if o.op is OptOps.PACK]
    assert len(packs) == 1 and k.kinds[vector] is AxisKind.UPCAST
    assert k.sts[packs[0].amount].real_strides()[vector] == 0  # broadcast along the vector: g
    expected = g_np.T.astype(np.float64) @ x_np.astype(np.float64)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("size, block", [(640, (4, 4)), (128, (8, 2))])
def test_an_a_larger_than_l2_gets_a_wider_register_block(size: int, block: tuple[int, int]):
    """A @ B with A past L2_ELEMENTS (640 x 512 floats here) takes 4 rows x 4 vectors of columns, so
    each column block, which streams all of A, covers twice the columns; a smaller A keeps 8 rows x
    2 vectors. Both against numpy in float64."""
    a_np, b_np = data((size, 512), 6), data((512, size), 7)
    assert (size * 512 > heuristics.L2_ELEMENTS) == (block == (4, 4))
    kernel, opts, got = opts_and_result(Tensor(a_np).realize() @ Tensor(b_np).realize())
    upcasts = [o for o in opts if o.op is OptOps.UPCAST]
    assert [o.amount for o in upcasts] == [16, *block], opts  # the vector, rows, vectors of columns
    assert any(o.op is OptOps.PACK for o in opts)
    np.testing.assert_allclose(got, a_np.astype(np.float64) @ b_np.astype(np.float64), rtol=1e-4, atol=2e-3)


def test_both_inputs_packed_on_a_cpu_give_the_same_sums():
    """Two PACKs in one CPU kernel, one per input (as a BLAS packs a block of A and a panel of B):
    A's tile of 4 row blocks before the column loop (reused by every column block), B's panel
    before the row loop. Each is a local array of its own; packing moves where the values are read
    from, not the order of the sums, so the result equals the unpacked kernel's exactly, and
    numpy's in float64 within float32 rounding."""
    A, B = data((128, 96), 20), data((96, 64), 21)
    item = compute_item(Tensor(A).realize() @ Tensor(B).realize())
    blocked = [Opt(OptOps.UPCAST, 1, 16), Opt(OptOps.UPCAST, 0, 4), Opt(OptOps.TILE, 0, 4),
               Opt(OptOps.SWAP, 1, 2)]  # (row tiles, column blocks, row blocks in a tile | k)
    results = {}
    for name, packs in [("plain", []), ("both", [Opt(OptOps.PACK, 1, 1), Opt(OptOps.PACK, 2, 2)])]:
        program = lower("C", item.ast, blocked + packs, threads=1)
        out = Buffer("C", item.out.size, item.out.dtype)
        program.runner([out, *(x.realized for x in item.inputs)])
        results[name] = out.as_numpy().reshape(128, 64)
        assert ("local1[" in program.source) == bool(packs)  # a second local array: B's panel
    np.testing.assert_array_equal(results["both"], results["plain"])
    np.testing.assert_allclose(results["both"], A.astype(np.float64) @ B.astype(np.float64), rtol=1e-4,
                               atol=1e-4)


def test_a_tall_a_times_a_narrow_b_takes_the_outer_product_form():
    """(512 x 256) @ (256 x 32): A, contiguous along the reduce, outweighs B in the contiguity score,
    which alone would UNROLL the reduce (a dot product per output, summed across lanes). The
    heuristics vectorize along B's rows instead (the output and B are contiguous there, A does not
    move): no UNROLL, and each output's sum runs in order, one multiply-add at a time, so the result
    equals numpy's float64 product within float32 rounding of a 256-term sum."""
    a_np, b_np = data((512, 256), 8), data((256, 32), 9)
    kernel, opts, got = opts_and_result(Tensor(a_np).realize() @ Tensor(b_np).realize())
    assert kernel.full_shape == (512, 32, 256)
    assert opts[0] == Opt(OptOps.UPCAST, 1, 16) and not any(o.op is OptOps.UNROLL for o in opts), opts
    np.testing.assert_allclose(got, a_np.astype(np.float64) @ b_np.astype(np.float64), rtol=1e-4, atol=1e-3)


def test_an_axis_only_an_odd_divisor_splits_gets_a_block_of_that_size():
    """(640 x 512) @ (512 x 40): 40 columns are 5 vectors of 8, which no 2 or 4 divides; the block
    takes all 5 (4 rows x 5 vectors) instead of a single vector of columns. The block changes which
    outputs share a loop iteration, not any output's sum: numpy in float64 is the oracle."""
    a_np, b_np = data((640, 512), 10), data((512, 40), 11)
    kernel, opts, got = opts_and_result(Tensor(a_np).realize() @ Tensor(b_np).realize())
    assert [o.amount for o in opts if o.op is OptOps.UPCAST] == [8, 4, 5], opts
    np.testing.assert_allclose(got, a_np.astype(np.float64) @ b_np.astype(np.float64), rtol=1e-4, atol=2e-3)


@pytest.mark.parametrize("n", [33, 37], ids=["33 = 3 x 11", "37, a prime"])
def test_sizes_no_vector_divides_get_a_block_of_scalars(n: int):
    """n x n matrices, n not a multiple of 4: no vector. 33 = 3 x 11 gets an 11 x 11 block of scalar
    outputs; a prime size has no divisor and keeps its plain loops. Both against numpy in float64
    (every output and no more: the block covers the axes exactly)."""
    a_np, b_np = data((n, 64), 12), data((64, n), 13)
    kernel, opts, got = opts_and_result(Tensor(a_np).realize() @ Tensor(b_np).realize())
    upcasts = [o.amount for o in opts if o.op is OptOps.UPCAST]
    assert upcasts == ([11, 11] if n == 33 else []), opts
    np.testing.assert_allclose(got, a_np.astype(np.float64) @ b_np.astype(np.float64), rtol=1e-4, atol=1e-3)


def test_a_reduce_that_would_gather_along_the_rows_keeps_its_vectors_along_the_reduce():
    """((x - mean) * w).sum(-1), as in a layer norm's backward: the mean moves by 1 along the rows
    and w not at all, as B and A of a tall matmul would, but x moves by 96 there: vectors along the
    rows would gather x. The reduce stays the vector axis (x and w are contiguous along it)."""
    x_np, mean_np, w_np = data((64, 96), 14), data((64, 1), 15), data((96,), 16)
    x, mean, w = (Tensor(a).realize() for a in (x_np, mean_np, w_np))
    kernel, opts, got = opts_and_result(((x - mean) * w).sum(-1))
    assert opts[0] == Opt(OptOps.UNROLL, kernel.first_reduce, 16), opts
    expected = ((x_np.astype(np.float64) - mean_np) * w_np).sum(-1)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("x_shape, w_shape", [((1024, 96), (512, 96)), ((16, 64, 96), (512, 96))],
                         ids=["2-d", "batched rows"])
def test_a_short_reduce_under_a_wide_output_takes_the_outer_product_form(x_shape, w_shape):
    """x @ w.T with 96 terms to sum and 512 outputs per row (a language model's head): the output
    outweighs both inputs in the contiguity score, which alone would vectorize along w's rows and
    gather each vector from 16 rows of w, with nothing packed. The heuristics take the outer-product
    form instead, as for a long reduce: vectors along w's rows from a PACKed tile of w, a block of
    x's rows, no UNROLL. Against numpy in float64."""
    x_np, w_np = data(x_shape, 17), data(w_shape, 18)
    x, w = Tensor(x_np).realize(), Tensor(w_np).realize()
    kernel, opts, got = opts_and_result(x @ w.T)
    vocab = len(x_shape) - 1  # the output axis of w's rows
    assert opts[0] == Opt(OptOps.UPCAST, vocab, 16) and not any(o.op is OptOps.UNROLL for o in opts), opts
    assert sum(o.op is OptOps.PACK for o in opts) == 1, opts
    assert any(o.op is OptOps.UPCAST and o.axis != vocab for o in opts), opts  # a block of x's rows
    np.testing.assert_allclose(got, x_np.astype(np.float64) @ w_np.T.astype(np.float64), rtol=1e-4, atol=1e-3)


def test_an_input_whose_vectors_would_be_gathers_is_packed():
    """Attention's output projection: the heads merged back, (B, H, T, d).permute(0, 2, 1, 3) as
    (B, T, H d), times w.T, plus a residual. The merged heads are a view that no single stride
    describes, so the short-reduce rule cannot see x as contiguous along the sum, and the vectors
    stay along w's rows, each one 16 scalars of w 96 apart. Such an input is PACKed: its tile is
    copied once, in the order the vectors read it (2.3x faster at these sizes on one AVX-512 core,
    kernel alone). Against numpy in float64."""
    heads_np, w_np, residual_np = data((16, 4, 64, 24), 19), data((96, 96), 20), data((16, 64, 96), 21)
    heads, w, residual = (Tensor(a).realize() for a in (heads_np, w_np, residual_np))
    merged = heads.permute(0, 2, 1, 3).reshape(16, 64, 96)
    kernel, opts, got = opts_and_result(merged @ w.T + residual)
    vector = next(o for o in opts if o.op is OptOps.UPCAST)
    w_position = next(p for p, st in enumerate(kernel.sts) if p and st.real_strides()[vector.axis] == 96)
    assert any(o.op is OptOps.PACK and o.amount == w_position for o in opts), opts
    merged64 = heads_np.astype(np.float64).transpose(0, 2, 1, 3).reshape(16, 64, 96)
    np.testing.assert_allclose(got, merged64 @ w_np.T.astype(np.float64) + residual_np, rtol=1e-4, atol=1e-3)
