"""Training for a long time must not grow memory: the live device buffers, the bytes in them, the lazy
graph nodes alive and the process RSS are the same after 1,000 steps as before them (the "memory leak
tests" item of the project's to-do list). A small CNN with BatchNorm and Adam, so that it stays fast:
1,000 steps under TinyJit (about half a second), and 150 steps eagerly, where every step builds a graph,
schedules it and runs kernels (about 15 ms of Python a step), which is where caches could grow.
"""

from __future__ import annotations

import gc
import os

import numpy as np
import pytest

from tinyedu import Tensor, TinyJit
from tinyedu.core.helpers import GlobalCounters
from tinyedu.lazy import _NODES
from tinyedu.nn import BatchNorm2d, Conv2d, Linear
from tinyedu.nn.optim import Adam
from tinyedu.nn.state import get_parameters
from tinyedu.runtime.device import Buffer


def _rss_bytes() -> int | None:
    """Resident memory of this process right now (Linux; None elsewhere)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return None


class SmallNet:
    def __init__(self) -> None:
        self.conv, self.bn, self.head = Conv2d(1, 2, 3), BatchNorm2d(2), Linear(2 * 3 * 3, 4)

    def __call__(self, x: Tensor) -> Tensor:
        return self.head(self.bn(self.conv(x)).relu().max_pool2d(2).flatten(1))


def _snapshot() -> tuple[int, int, int, int | None]:
    gc.collect()
    return Buffer.live, GlobalCounters.mem_used, len(_NODES), _rss_bytes()


@pytest.mark.parametrize("jit, steps", [(False, 150), (True, 1000)], ids=["eager", "jit"])
def test_training_keeps_memory_flat(jit: bool, steps: int) -> None:
    Tensor.manual_seed(0)
    net = SmallNet()
    opt = Adam(get_parameters(net), lr=1e-3)
    rng = np.random.default_rng(0)
    batches = [(Tensor(rng.standard_normal((4, 1, 8, 8)).astype(np.float32)).realize(),
                Tensor(rng.integers(0, 4, 4).astype(np.int32)).realize()) for _ in range(8)]

    def step(x: Tensor, y: Tensor) -> Tensor:
        with Tensor.train():
            opt.zero_grad()
            loss = net(x).cross_entropy(y).backward()
            opt.step()
        return loss

    run = TinyJit(step) if jit else step
    losses = []
    for k in range(20):  # warm up: compile, fill the memo caches, record the JIT
        losses.append(run(*batches[k % 8]).item())
    start = _snapshot()
    for k in range(steps):
        loss = run(*batches[k % 8])
        if k % (steps // 10) == 0:
            losses.append(loss.item())
    del loss
    end = _snapshot()
    assert end[0] == start[0], f"live buffers {start[0]} -> {end[0]}"
    assert end[1] == start[1], f"bytes in device buffers {start[1]} -> {end[1]}"
    assert end[2] <= start[2] + 50, f"lazy graph nodes alive {start[2]} -> {end[2]}"
    if start[3] is not None:
        assert end[3] - start[3] < 4 * 2**20, f"RSS grew by {(end[3] - start[3]) / 2**20:.1f} MiB"
    assert np.isfinite(losses).all() and losses[-1] < losses[0]  # and it did train
