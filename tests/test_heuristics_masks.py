"""The CPU heuristics and padding masks (tinyedu/codegen/heuristics.py, `_pick_vector_axis`): an input
read through a mask is scored by its strides where the mask lets it read, and the vector width divides
the places where a mask starts or stops, when a width does. Each kernel is checked for the opts it
gets and, run on the C device with exactly those opts, against numpy in float64."""

from __future__ import annotations

import numpy as np

from tinyedu import Tensor
from tinyedu.codegen import heuristics
from tinyedu.codegen.kernel import Kernel
from tinyedu.codegen.linearizer import linearize
from tinyedu.codegen.opts import OptOps, apply_opts
from tinyedu.core.ops import LoadOps
from tinyedu.core.uops import UOps, VectorDType
from tinyedu.engine.lower import lower
from tinyedu.engine.schedule import create_schedule
from tinyedu.runtime.device import Buffer


def data(shape: tuple[int, ...], seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def heuristic_kernel(t: Tensor):
    """t's one kernel: its AST, the heuristics' opts (AVX-512's 16 lanes, one thread), and its result
    on C with exactly those opts."""
    items = [i for i in create_schedule([t.lazydata]) if not isinstance(i.ast.op, LoadOps)]
    assert len(items) == 1, [i.ast for i in items]
    item = items[0]
    opts = heuristics.hand_coded_optimizations(Kernel(item.ast), 16, 1)
    out = Buffer("C", item.out.size, item.out.dtype)
    lower("C", item.ast, opts).runner([out, *(x.realized for x in item.inputs)])
    return item.ast, opts, out.as_numpy().reshape(t.shape)


def test_a_rotary_embedding_gets_vectors_that_stop_at_its_halves():
    """x * cos + rotate_half(x) * sin over heads of 24: each half is contiguous where it is read, and
    vectors of 4 divide the cut at 12 (of 8 they would straddle it and load lane by lane)."""
    x_np, cos_np, sin_np = data((16, 4, 64, 24), 0), data((64, 24), 1), data((64, 24), 2)
    x, cos, sin = (Tensor(a).realize() for a in (x_np, cos_np, sin_np))
    rotated = Tensor.cat(-x[..., 12:], x[..., :12], dim=-1)
    ast, opts, got = heuristic_kernel(x * cos + rotated * sin)
    assert [(o.op, o.axis, o.amount) for o in opts] == [(OptOps.UPCAST, 3, 4)], opts
    kernel = Kernel(ast)
    apply_opts(kernel, opts)
    loads = [u for u in linearize(kernel) if u.op is UOps.LOAD]
    assert all(isinstance(u.dtype, VectorDType) for u in loads), [u.dtype for u in loads]
    x64 = x_np.astype(np.float64)
    expected = x64 * cos_np + np.concatenate([-x64[..., 12:], x64[..., :12]], -1) * sin_np
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def test_a_mask_no_width_divides_keeps_the_widest_vector():
    """A copy padded from 257 to 272 columns: no width divides 257, so the vectors stay 16 wide (the
    last one of each row straddles the edge and loads lane by lane)."""
    x_np = data((257, 257), 3)
    ast, opts, got = heuristic_kernel(Tensor(x_np).realize().pad(((0, 15), (0, 15))).contiguous())
    assert [(o.op, o.amount) for o in opts] == [(OptOps.UPCAST, 16)], opts
    np.testing.assert_array_equal(got, np.pad(x_np, ((0, 15), (0, 15))))
