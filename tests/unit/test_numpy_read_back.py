"""Reading values back (`Tensor.numpy()`): the array is read-only and, where nothing else holds the
buffer, it is the kernel's own output memory (Buffer.lend), not a copy. Whatever runs afterwards
(another realize, an assign into the tensor, a TinyJit replay, new buffers from the pool) never
changes an array already handed out. (Buffers of LEND_FROM_BYTES or more lend: the tests use 16 KB.)"""

from __future__ import annotations

import gc

import numpy as np
import pytest

from tinyedu import Tensor, TinyJit
from tinyedu.core.dtype import dtypes
from tinyedu.runtime.device import POOL, Buffer


@pytest.fixture(autouse=True)
def empty_pool():
    gc.collect()
    POOL.clear()
    yield
    POOL.clear()


def values(n: int, start: float = 0.0) -> np.ndarray:
    return np.arange(start, start + n * n, dtype=np.float32).reshape(n, n)


def test_the_array_is_read_only_and_is_the_kernels_own_memory():
    a = Tensor(values(64)).realize()
    t = a * 2
    array = t.numpy()
    np.testing.assert_array_equal(array, values(64) * 2)
    assert not array.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        array[0, 0] = 1.0
    buffer = t.lazydata.base.realized
    assert np.shares_memory(array, buffer._memory)  # lent, not copied
    buffer.as_numpy()  # the buffer's next use moves it to memory of its own first
    assert not np.shares_memory(array, buffer._memory)
    np.testing.assert_array_equal(buffer.as_numpy().reshape(64, 64), values(64) * 2)


def test_an_assign_into_the_tensor_never_reaches_the_array():
    a = Tensor(values(64)).realize()
    t = (a + 1).realize()
    before = t.numpy()
    t.assign(t * 10).realize()  # written in place, into the buffer that lent its memory
    np.testing.assert_array_equal(before, values(64) + 1)
    np.testing.assert_array_equal(t.numpy(), (values(64) + 1) * 10)
    t.assign(a - 5).realize()  # and again (a copy-free write of another kernel's result)
    np.testing.assert_array_equal(before, values(64) + 1)
    np.testing.assert_array_equal(t.numpy(), values(64) - 5)


def test_a_tensor_read_after_its_array_was_lent_still_computes_with_its_values():
    a = Tensor(values(64)).realize()
    t = (a * 3).realize()
    lent = t.numpy()
    u = (t + 1).numpy()  # a kernel reads the buffer whose memory was lent
    np.testing.assert_array_equal(u, values(64) * 3 + 1)
    np.testing.assert_array_equal(lent, values(64) * 3)


def test_later_realizes_never_get_the_lent_memory_from_the_pool():
    a = Tensor(values(64)).realize()
    kept = [(a * k).numpy() for k in range(1, 4)]  # each tensor dies here: only the arrays remain
    gc.collect()
    addresses = {array.ctypes.data for array in kept}
    for k in range(20):  # many new buffers of the same size, each written by a kernel
        fresh = (a - 1000 * k).realize()
        assert fresh.lazydata.base.realized.host_address() not in addresses
        new = Buffer("C", 64 * 64, dtypes.float32)
        assert new.host_address() not in addresses
        new.as_numpy()[:] = -1.0
    for k, array in enumerate(kept, start=1):
        np.testing.assert_array_equal(array, values(64) * k)


def test_a_matmul_read_back_twice_gives_two_arrays():
    rng = np.random.default_rng(0)
    x_np = rng.standard_normal((32, 16)).astype(np.float32)
    w_np = rng.standard_normal((16, 8)).astype(np.float32)
    x, w = Tensor(x_np).realize(), Tensor(w_np).realize()
    first = (x @ w).numpy()
    second = (x @ (w * 2)).numpy()
    np.testing.assert_allclose(first, x_np @ w_np, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(second, x_np @ (w_np * 2), rtol=1e-5, atol=1e-5)
    assert not np.shares_memory(first, second)


def test_tinyjit_replays_never_change_an_array_read_back_before():
    w = Tensor(values(64)).realize()

    @TinyJit
    def step(x: Tensor) -> Tensor:
        out = (x * w).sum(axis=1).realize()  # (before the assign: the replay is two C kernels, which
        w.assign(w + 1)  # it calls with the pointers it keeps) a weight the replay writes in place
        return out

    weights, outputs = [], []
    for k in range(6):  # records, then replays
        x = Tensor(np.full((64, 64), float(k), dtype=np.float32)).realize()
        outputs.append((k, step(x).numpy()))
        weights.append((k, w.numpy()))
    for k, out in outputs:  # w held k + 1 added ones when step k read it
        x_np = np.full((64, 64), float(k), np.float32)
        np.testing.assert_array_equal(out, (x_np * (values(64) + k)).sum(1))
    for k, array in weights:
        np.testing.assert_array_equal(array, values(64) + k + 1)
    assert step._direct is not None and step._direct[1] is not None  # (the replays took that path)
