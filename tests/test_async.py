"""ASYNC=1: C kernels queued to a launcher thread (tinyedu/runtime/launch_queue.py) give the same bits
as kernels called on the Python thread, and the host never sees memory a queued kernel still uses.

Each case runs the same computation with and without ASYNC and compares the results bit for bit
(the kernels are the same programs; only the thread that calls them differs), and the results with
numpy in float64. The cases that matter most are the ones where Python touches memory while kernels
are queued: reading a result, writing an input a queued kernel reads (assign, copyin), a training
loop that never reads anything until the end, TinyJit's replay, fork() and exit.
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tinyedu import Tensor, TinyJit
from tinyedu.nn import Linear
from tinyedu.nn.optim import Adam
from tinyedu.runtime import launch_queue
from tinyedu.runtime.device import CORES, Buffer, InFlight, thread_count
from tinyedu.runtime.launch_queue import QUEUE, LaunchQueue

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(Tensor.default_device != "C", reason="ASYNC queues the C device's kernels")


@pytest.fixture
def asynchronous(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("ASYNC", "1")
    yield
    QUEUE.drain()


def rng_array(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def train(steps: int, jit: bool = False) -> list[np.ndarray]:
    """An MLP trained with Adam for `steps` steps, nothing read until the end: its weights and losses."""
    Tensor.manual_seed(0)
    l1, l2 = Linear(20, 32), Linear(32, 5)
    params = [l1.weight, l1.bias, l2.weight, l2.bias]
    opt = Adam(params, lr=0.01)
    x, y = Tensor(rng_array(64, 20)).realize(), Tensor(np.arange(64, dtype=np.int32) % 5).realize()

    def step() -> Tensor:
        opt.zero_grad()
        loss = l2(l1(x).relu()).cross_entropy(y).backward()
        opt.step()
        return loss.realize()

    run = TinyJit(step) if jit else step
    losses = [run() for _ in range(steps)]
    return [p.numpy() for p in params] + [np.array([loss.item() for loss in losses])]


def test_kernels_are_queued_and_a_read_waits_for_them(asynchronous):
    a, b = Tensor(rng_array(256, 256)), Tensor(rng_array(256, 256, seed=1))
    out = ((a @ b).relu() + 1).realize()
    buffer = out.lazydata.base.realized
    assert buffer.pending > 0, "the kernel was called on the Python thread, not queued"
    result = out.numpy()  # waits for the kernel
    assert buffer.pending <= InFlight.finished
    expected = np.maximum(a.numpy().astype(np.float64) @ b.numpy().astype(np.float64), 0) + 1
    np.testing.assert_allclose(result, expected, rtol=1e-5, atol=1e-4)


def test_training_gives_the_same_bits(monkeypatch: pytest.MonkeyPatch):
    """Adam's update copies new values into weights: those copies are queued behind the kernels too."""
    expected = train(6)
    monkeypatch.setenv("ASYNC", "1")
    copies = []
    queue_copy = LaunchQueue.submit_copy
    monkeypatch.setattr(LaunchQueue, "submit_copy", lambda self, *a: copies.append(a) or queue_copy(self, *a))
    for ours, theirs in zip(train(6), expected, strict=True):
        np.testing.assert_array_equal(ours, theirs)
    assert copies, "no copy was queued"
    for ours, theirs in zip(train(6, jit=True), expected, strict=True):  # TinyJit's replay after queued work
        np.testing.assert_array_equal(ours, theirs)


def test_an_input_written_after_a_queued_kernel_read_it(asynchronous):
    """The kernels read the old values: assign (host data copied into x's memory) waits for them first.
    (Each matmul takes milliseconds: without the wait, the copy would land while they read x.)"""
    old, new = rng_array(1024, 1024), rng_array(1024, 1024, seed=2)
    x = Tensor(old).realize()
    (x @ x + 0).numpy()  # (compiled now: lowering a new kernel waits for the queue)
    products = [(x @ x + k).realize() for k in range(4)]  # queued: each reads x
    x.assign(Tensor(new)).realize()                        # writes x's memory from the host
    plus = (x + 1).realize()                               # queued: reads the new x
    expected = old.astype(np.float64) @ old
    for k, product in enumerate(products):
        np.testing.assert_allclose(product.numpy(), expected + k, rtol=1e-4, atol=1e-3)
    np.testing.assert_array_equal(plus.numpy(), new + 1)


def test_copies_queued_behind_the_kernels_they_need(asynchronous, monkeypatch: pytest.MonkeyPatch):
    """assign's copies run on the launcher thread: a snapshot of old values for a computation still
    lazy, and a swap's copies, each of values that queued kernels write just before."""
    copies = []
    queue_copy = LaunchQueue.submit_copy
    monkeypatch.setattr(LaunchQueue, "submit_copy", lambda self, *a: copies.append(a) or queue_copy(self, *a))
    old, other = rng_array(384, 384), rng_array(384, 384, seed=3)
    x = Tensor(old).realize()
    w = (x @ x).realize()                    # queued: writes w
    doubled = w * 2                          # lazy: reads the old w
    w.assign(w + 1).realize()                # w written in place: a snapshot of the old w first
    a, b = (x * 3).realize(), Tensor(other).realize()
    Tensor.assign_all([a, b], [b * 2, a * 5])  # each value reads the other's old contents
    assert len(copies) >= 2, "the snapshot and the swap's copy were not queued"
    product = old.astype(np.float64) @ old
    np.testing.assert_allclose(doubled.numpy(), product * 2, rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(w.numpy(), product + 1, rtol=1e-4, atol=1e-3)
    np.testing.assert_array_equal(a.numpy(), other * 2)
    np.testing.assert_array_equal(b.numpy(), old * 3 * 5)


def test_a_result_read_while_later_kernels_are_queued(asynchronous):
    a = Tensor(rng_array(512, 512)).realize()
    first = (a @ a * 3).realize()
    later = [(a @ a + k).realize() for k in range(5)]  # queued behind it, each reading a
    x = a.numpy().astype(np.float64)
    np.testing.assert_allclose(first.numpy(), x @ x * 3, rtol=1e-4, atol=1e-3)
    for k, t in enumerate(later):
        np.testing.assert_allclose(t.numpy(), a.numpy().astype(np.float64) @ a.numpy() + k, rtol=1e-4,
                                   atol=1e-3)


def test_python_waits_rather_than_queue_without_bound(asynchronous, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(launch_queue, "MAX_QUEUED", 2)
    a = Tensor(rng_array(64, 64)).realize()
    outs, most = [], 0
    for k in range(10):
        outs.append((a * k + 1).realize())
        most = max(most, len(QUEUE.held))
    assert most <= 3
    for k, t in enumerate(outs):
        np.testing.assert_array_equal(t.numpy(), a.numpy() * k + 1)


def test_python_waits_rather_than_hold_memory_without_bound(asynchronous, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(launch_queue, "MAX_QUEUED_BYTES", 1)  # one kernel ahead at most
    a = Tensor(rng_array(256, 256)).realize()
    outs = []
    for k in range(6):
        outs.append((a @ a + k).realize())
        assert len(QUEUE.held) <= 1 and QUEUE.held_bytes <= 256 * 256 * 4
    x = a.numpy().astype(np.float64)
    for k, t in enumerate(outs):
        np.testing.assert_allclose(t.numpy(), x @ x + k, rtol=1e-4, atol=1e-3)
    assert QUEUE.held_bytes == 0


def test_a_kernel_with_more_pointers_than_the_queue_takes_runs_directly(asynchronous,
                                                                        monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(launch_queue, "MAX_ARGS", 2)
    a, b, c = (Tensor(rng_array(33, 7, seed=s)).realize() for s in range(3))
    out = (a * b + c).realize()  # four pointers: called on the Python thread
    assert out.lazydata.base.realized.pending <= InFlight.finished
    np.testing.assert_array_equal(out.numpy(), a.numpy() * b.numpy() + c.numpy())


def test_no_buffer_dies_while_a_queued_kernel_uses_it(asynchronous):
    """The queue holds its kernels' buffers: an intermediate nobody else holds stays alive until it ran.
    (Counted after a garbage collection at both ends: a reference cycle that an earlier test in this
    worker left, or that this one makes, may hold a buffer until the collector runs.)"""
    gc.collect()
    live = Buffer.live
    a = Tensor(rng_array(256, 256)).realize()
    out = ((a @ a).exp().sum()).realize()  # two kernels; the intermediate is only the queue's
    assert any(len(buffers) > 1 for _, buffers in QUEUE.held) or out.lazydata.base.realized.pending <= \
        InFlight.finished
    total = out.numpy()
    x = a.numpy().astype(np.float64)
    np.testing.assert_allclose(total, np.exp(x @ x).sum(), rtol=1e-4)
    QUEUE.drain()
    del out
    gc.collect()
    assert Buffer.live == live + 1  # (a's buffer): every queued one was let go


CHILD = """
import os, sys
import numpy as np
from tinyedu import Tensor
a = np.random.default_rng(0).standard_normal((384, 384)).astype(np.float32)
queued = [(Tensor(a) @ Tensor(a) + k).realize() for k in range(4)]  # queued, nothing read
if sys.argv[1] == "fork":
    pid = os.fork()
    if pid == 0:
        child = (Tensor(a) @ Tensor(a)).numpy()
        os._exit(0 if np.array_equal(child, queued[0].numpy()) else 3)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, status
    print("ok", queued[3].numpy()[0, 0] - queued[0].numpy()[0, 0])
# "exit": leave with kernels still queued
"""


@pytest.mark.parametrize("case", ["fork", "exit"])
def test_fork_and_exit_with_kernels_queued(case: str):
    env = {**os.environ, "ASYNC": "1", "PYTHONPATH": str(ROOT)}
    result = subprocess.run([sys.executable, "-c", CHILD, case], env=env, capture_output=True, text=True,
                            timeout=120, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    if case == "fork":
        assert result.stdout.split() == ["ok", "3.0"]


def test_kernels_leave_the_python_thread_a_core(monkeypatch: pytest.MonkeyPatch):
    """With ASYNC=1, THREADS defaults to one core fewer (the Python thread's); a THREADS given wins."""
    monkeypatch.delenv("THREADS", raising=False)
    monkeypatch.delenv("ASYNC", raising=False)
    assert thread_count() == CORES
    monkeypatch.setenv("ASYNC", "1")
    assert thread_count() == max(1, CORES - 1)
    monkeypatch.setenv("THREADS", "3")
    assert thread_count() == 3
