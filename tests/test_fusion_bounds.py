"""Fusion rules 7 and 9 (tinyedu/engine/schedule.py) bound the kernels the other rules made: they run
last, so they count what a kernel will really hold, and where every kernel is under the bounds the
number of ops a formula takes does not enter the schedule.

Run while the other rules were still deciding, rule 9 counted ops that rule 5 stored afterwards:
an LSTM step's kernels hold fewer than 100 ops, yet rule 9 cut it dozens of times, and a cheaper
tanh moved the cuts and made more kernels (12 steps: 290 kernels, 307 with a tanh series of 7 terms
instead of 10, 375 with 4).
"""

from __future__ import annotations

import numpy as np
import pytest

import tinyedu.expr
from tinyedu import Tensor
from tinyedu.core.ops import LoadOps
from tinyedu.engine.schedule import MAX_KERNEL_OPS, create_schedule
from tinyedu.function_composite import TANH_SERIES_64
from tinyedu.models import LSTMRegressor
from tinyedu.nn.state import get_parameters


def _lstm_step_kernels() -> list:
    """The kernels of a small LSTM's forward and backward over 12 steps (loss and every gradient)."""
    Tensor.manual_seed(0)
    model = LSTMRegressor(input_size=2, hidden_size=4)
    params = get_parameters(model)
    Tensor.realize_all(*params)
    x = Tensor(np.random.default_rng(0).standard_normal((2, 12, 2)).astype(np.float32))
    loss = (model(x) ** 2).mean().backward()
    outs = [loss.lazydata, *(p.grad.lazydata for p in params)]
    return [item for item in create_schedule(outs) if not isinstance(item.ast.op, LoadOps)]


def test_a_cheaper_tanh_leaves_the_lstm_step_s_kernels_as_they_are(monkeypatch: pytest.MonkeyPatch) -> None:
    """tanh's polynomial near 0 as the 10-term Taylor series, as the 5 fitted terms (fewer ops), and cut
    to 3 terms (fewer still, values a little off): the same kernels."""
    counts = {}
    fitted, taylor = tinyedu.expr.TANH_NEAR_ZERO, TANH_SERIES_64[:10]
    for terms, coefficients in ((10, taylor), (5, fitted), (3, fitted[:3])):
        monkeypatch.setattr(tinyedu.expr, "TANH_NEAR_ZERO", coefficients)
        kernels = _lstm_step_kernels()
        assert not any("rule 9" in item.reason or "rule 7" in item.reason for item in kernels)
        counts[terms] = len(kernels)
    assert len(set(counts.values())) == 1, counts


def _wide(x: Tensor, ops: int) -> Tensor:
    """About `ops` distinct elementwise ops on x, shallow: x times ops/2 constants, summed in pairs
    (so rule 7, the depth, never fires)."""
    terms = [x * (1 + i / 1000) for i in range(ops // 2)]
    while len(terms) > 1:
        terms = [a + b for a, b in zip(terms[::2], terms[1::2], strict=False)] + terms[len(terms) // 2 * 2:]
    return terms[0]


@pytest.mark.parametrize("ops", [40, 200])
def test_rule_9_stores_an_op_whose_recomputed_copies_would_be_a_kernel_s_worth(ops: int) -> None:
    """Three outputs read one chain of an 8-element input: rule 5 (memory only) recomputes it in each
    of the three kernels. Two extra copies of 40 ops stay; of 200 ops (400 >= 256) it is stored."""
    x = Tensor(np.linspace(-1, 1, 8).astype(np.float32)).realize()
    y = _wide(x, ops)
    outs = [y * 2, y * 3, y * 4]
    items = [i for i in create_schedule([o.lazydata for o in outs]) if not isinstance(i.ast.op, LoadOps)]
    stored_by_9 = [item.out for item in items if "rule 9" in item.reason]
    if 2 * ops >= MAX_KERNEL_OPS:
        assert stored_by_9 == [y.lazydata.base] and len(items) == 4
    else:
        assert stored_by_9 == [] and len(items) == 3
    expected = np.linspace(-1, 1, 8) * sum(1 + i / 1000 for i in range(ops // 2))
    for out, factor in zip(outs, (2, 3, 4), strict=True):
        np.testing.assert_allclose(out.numpy(), expected * factor, rtol=1e-5, atol=1e-5)


def test_rule_9_cuts_a_kernel_only_where_it_would_reach_the_bound() -> None:
    """600 ops are cut into kernels under the bound; 200 ops are one kernel."""
    x = Tensor(np.linspace(-1, 1, 8).astype(np.float32)).realize()
    for ops, kernels in ((200, 1), (600, 3)):
        items = [i for i in create_schedule([_wide(x, ops).lazydata]) if not isinstance(i.ast.op, LoadOps)]
        assert len(items) == kernels, (ops, [i.reason for i in items])
        assert all(sum(n.op.__class__.__name__ != "BufferOps" for n in i.ast.walk()) < MAX_KERNEL_OPS
                   for i in items)
