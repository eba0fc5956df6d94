"""BEAM search (its action space, the beam loop, the disk cache, and results through it) and the
scheduler's rule against expensive recompute (rule 8, 'no expensive recompute')."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tinyedu import Tensor
from tinyedu.codegen.kernel import AxisKind, Kernel
from tinyedu.codegen.opts import Opt, OptOps, apply_opts
from tinyedu.codegen.search import beam_search, candidate_opts
from tinyedu.core.ops import LoadOps
from tinyedu.engine import beam, lower
from tinyedu.engine.schedule import create_schedule
from tinyedu.runtime.device import Device


def compute_items(t: Tensor):
    return [i for i in create_schedule([t.lazydata]) if not isinstance(i.ast.op, LoadOps)]


def matmul_ast(n: int = 32):
    rng = np.random.default_rng(0)
    x, w = (Tensor(rng.standard_normal((n, n)).astype(np.float32)).realize() for _ in range(2))
    return compute_items(x @ w)[0].ast


# ---- the search, with a made-up clock ----
def test_candidates_are_exactly_the_opts_that_apply():
    k = Kernel(matmul_ast())
    candidates = candidate_opts(k, threads=2)
    assert Opt(OptOps.UPCAST, 1, 16) in candidates and Opt(OptOps.UNROLL, 2, 4) in candidates
    assert Opt(OptOps.THREAD, 0, 2) in candidates and Opt(OptOps.PACK, 0, 2) in candidates
    assert Opt(OptOps.UPCAST, 2, 4) not in candidates  # axis 2 is the reduce
    for opt in candidates:
        apply_opts(Kernel(matmul_ast()), [opt])  # each one applies


def test_beam_keeps_the_fastest_and_stops_when_nothing_is_faster():
    """A clock that rewards exactly one upcast of 4 on axis 1 and one unroll of 2: the search must
    find both, in two rounds, and then stop."""
    kernel = Kernel(matmul_ast())

    def fake_time(opts: list[Opt]) -> float:
        k = apply_opts(Kernel(matmul_ast()), opts)
        upcasts = [k.full_shape[a] for a in k.expanded_axes if k.kinds[a] is AxisKind.UPCAST]
        unrolls = [k.full_shape[a] for a in k.expanded_axes if k.kinds[a] is AxisKind.UNROLL]
        return 10.0 - (upcasts == [4]) * 3 - (unrolls == [2]) * 2 + 0.01 * len(opts)

    result = beam_search(kernel, fake_time, width=2, threads=2)
    assert sorted(o.op.name for o in result.opts) == ["UNROLL", "UPCAST"]
    assert result.seconds == pytest.approx(5.02) and result.baseline == 10.0
    assert len(result.history) == 3  # as written, then one better opt per round


# ---- the real device, and the disk cache ----
def test_search_times_on_the_device_and_caches_the_winner(tmp_path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("TINYEDU_CACHE", str(tmp_path))
    monkeypatch.setenv("BEAM_BUDGET", "0")  # one round is enough to test the plumbing
    monkeypatch.setenv("THREADS", "2")  # (the test workers run with THREADS=1: the change below must be one)
    ast = matmul_ast(32)
    first = lower.search(ast, "C", 1)
    assert not first.cached and first.tried > 1 and first.seconds <= first.baseline
    files = list((tmp_path / "beam").glob("*.json"))
    assert len(files) == 1 and json.loads(files[0].read_text())["kernel"] == "r_32_32_32"
    again = lower.search(ast, "C", 1)
    assert again.cached and again.opts == first.opts
    monkeypatch.setenv("THREADS", "1")  # another thread count is another search
    assert not lower.search(ast, "C", 1).cached


def test_beam_results_match_numpy(tmp_path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("TINYEDU_CACHE", str(tmp_path))
    monkeypatch.setenv("BEAM_BUDGET", "0")
    monkeypatch.setenv("BEAM", "1")
    Device["C"].programs.clear()
    rng = np.random.default_rng(1)
    X, W = rng.standard_normal((24, 40)).astype(np.float32), rng.standard_normal((40, 16)).astype(np.float32)
    got = (Tensor(X) @ Tensor(W)).relu().numpy()
    np.testing.assert_allclose(got, np.maximum(X @ W, 0), rtol=1e-5, atol=1e-5)
    assert list((tmp_path / "beam").glob("*.json"))


def test_scratch_buffers_have_the_kernels_sizes():
    x = Tensor(np.ones((8, 12), np.float32)).realize()
    ast = compute_items(x.pad(((1, 1), (0, 0))).sum(1))[0].ast
    out, data = beam.scratch_buffers(ast, "C")
    assert out.size == 10 and data.size == 96


# ---- rule 8: no expensive recompute ----
def test_an_expensive_op_seen_through_an_expand_by_a_reduce_is_stored():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((64, 48)).astype(np.float32) * 0.1
    W = rng.standard_normal((48, 32)).astype(np.float32)
    x, w = Tensor(X).realize(), Tensor(W).realize()
    items = compute_items(x.exp() @ w)
    assert [i.name for i in items] == ["E_64_48", "r_64_32_48"]
    assert "no expensive recompute" in items[0].reason
    np.testing.assert_allclose((x.exp() @ w).numpy(), np.exp(X) @ W, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("build, kernels", [
    (lambda x, w: (x * 2 + 1) @ w, 1),           # cheap: recomputing beats storing
    (lambda x, w: x.exp().sum(1), 1),            # expensive, but read once per element
    (lambda x, w: x.sqrt() @ w, 2),              # sqrt counts as expensive too
    (lambda x, w: x.exp().reshape(64, 48, 1).expand(64, 48, 5) + 1, 1),  # no reduce: no rule
])
def test_what_rule_8_does_not_store(build, kernels: int):
    x = Tensor(np.ones((64, 48), np.float32)).realize()
    w = Tensor(np.ones((48, 32), np.float32)).realize()
    assert len(compute_items(build(x, w))) == kernels
