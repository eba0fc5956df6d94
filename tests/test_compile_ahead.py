"""Lowering ahead: the new kernels of a schedule are compiled side by side before it runs.

Checked: every new kernel is lowered ahead (and DEBUG=2 says so), the values equal the one-thread
run (COMPILE_THREADS=1) bit for bit, and an error on a lowering thread changes nothing: the
realizer's own lowering raises it in order (here it succeeds, so the values are still right).
"""

import numpy as np
import pytest

from tinyedu import Device, Tensor
from tinyedu.core.ops import LoadOps
from tinyedu.engine import lower as lower_module
from tinyedu.engine.schedule import create_schedule

RNG = np.random.default_rng(0)
X = RNG.standard_normal((6, 5)).astype(np.float32)


def fresh_graph(k: float) -> Tensor:
    """Three kernels whose ASTs no earlier test made (the constant `k` is in every one of them)."""
    x = Tensor(X)
    a = (x * k).exp().sum(1, keepdim=True)  # a reduce read broadcast: stored
    return ((x - a).max(0) * k + a.T.sum()).relu()


def expected(k: float) -> np.ndarray:
    a = np.exp(X.astype(np.float64) * k).sum(1, keepdims=True)
    return np.maximum((X - a).max(0) * k + a.sum(), 0)


@pytest.fixture
def compiles(monkeypatch, tmp_path):
    if Device.DEFAULT != "C":
        pytest.skip("the C device compiles each kernel in a compiler process")
    monkeypatch.setenv("TINYEDU_CACHE", str(tmp_path))  # an empty compile cache: kernels compile
    monkeypatch.setenv("COMPILE_THREADS", "2")


def kernel_asts(t: Tensor) -> list:
    return [item.ast for item in create_schedule([t.lazydata]) if not isinstance(item.ast.op, LoadOps)]


def test_new_kernels_are_lowered_ahead_and_debug2_says_so(compiles, monkeypatch, capsys):
    k = 1.0 + RNG.random()
    t = fresh_graph(k)
    asts = kernel_asts(t)
    assert len(asts) >= 2
    monkeypatch.setenv("DEBUG", "2")
    value = t.numpy()
    out = capsys.readouterr().out
    assert f"lowered {len(asts)} new kernels ahead on 2 threads" in out
    assert out.count("(compile ") >= len(asts)  # each kernel's own compile time, on its first run
    np.testing.assert_allclose(value, expected(k), rtol=1e-5)


def test_values_equal_the_one_thread_lowering(compiles, monkeypatch):
    k = 1.0 + RNG.random()
    ahead = fresh_graph(k).numpy()
    monkeypatch.setenv("COMPILE_THREADS", "1")
    k2 = k + 1e-3  # other constants: other kernels, compiled one by one this time
    one_by_one = fresh_graph(k2).numpy()
    again = fresh_graph(k2).numpy()
    np.testing.assert_allclose(ahead, expected(k), rtol=1e-5)
    np.testing.assert_array_equal(one_by_one, again)
    np.testing.assert_allclose(one_by_one, expected(k2), rtol=1e-5)


def test_an_error_while_lowering_ahead_is_left_to_the_realizer(compiles, monkeypatch):
    tried = []

    def failing(device, ast):
        tried.append(ast)
        raise RuntimeError("a compiler that failed on this thread")

    monkeypatch.setattr(lower_module, "lower", failing)  # lower_ahead's lower; the realizer keeps its own
    k = 1.0 + RNG.random()
    value = fresh_graph(k).numpy()
    assert len(tried) >= 2
    np.testing.assert_allclose(value, expected(k), rtol=1e-5)
