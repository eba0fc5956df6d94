"""The memory pool (tinyedu/runtime/device.py): a dead buffer's memory goes to the next buffer of
its byte size, but only memory nobody can still see, so a pooled buffer is never handed out while
something still reads or writes it."""

from __future__ import annotations

import gc

import numpy as np
import pytest

from tinyedu import Tensor
from tinyedu.core.dtype import dtypes
from tinyedu.runtime.device import POOL, Buffer, MemoryPool


@pytest.fixture(autouse=True)
def empty_pool():
    gc.collect()  # (buffers of earlier tests that wait for the collector would return now)
    POOL.clear()
    yield
    POOL.clear()


def test_freed_memory_is_reused_only_when_nothing_still_sees_it():
    for size in (16, MemoryPool.LIMIT // 4096):  # small and large buffers alike
        first = Buffer("C", size, dtypes.float32)
        address = first.host_address()
        assert address == first.as_numpy().ctypes.data and address % 64 == 0
        del first
        assert POOL.bytes == 4 * size
        second = Buffer("C", size, dtypes.float32)
        assert second.as_numpy().ctypes.data == address and POOL.bytes == 0  # the same memory, reused
        array = second.as_numpy()
        array[:] = 7.0
        del second
        assert POOL.bytes == 0, "memory an array from as_numpy() still shows must not be handed out again"
        third = Buffer("C", size, dtypes.float32)
        third.as_numpy()[:] = 1.0
        assert (array == 7.0).all() and third.host_address() != address
        assert third.host_address() % 64 == 0


def test_a_view_of_the_memory_keeps_it_out_of_the_pool():
    buffer = Buffer("C", 64, dtypes.float32)
    rows = buffer.as_numpy().reshape(8, 8)  # a view: it refers to the bytes, not to the array itself
    del buffer
    assert POOL.bytes == 0
    rows[:] = 3.0
    other = Buffer("C", 64, dtypes.float32)
    other.as_numpy()[:] = 5.0
    assert (rows == 3.0).all()


def test_memory_goes_to_a_buffer_of_another_dtype_with_the_same_bytes():
    first = Buffer("C", 8, dtypes.float32)
    address = first.host_address()
    del first
    second = Buffer("C", 8, dtypes.int32)
    assert second.host_address() == address and second.as_numpy().dtype == np.int32
    second.as_numpy()[:] = np.arange(8)
    assert second.as_numpy().tolist() == list(range(8))
    assert Buffer("C", 16, dtypes.int32).host_address() != address  # another size: new memory


def test_replaced_memory_gives_kernels_its_address_and_is_never_pooled():
    """A buffer whose memory is replaced (as test_backends' guard-page test does) runs on the new memory."""
    out, inp = Buffer("C", 4, dtypes.float32), Buffer("C", 4, dtypes.float32)
    replacement = np.arange(4, dtype=np.float32)
    inp._memory = replacement
    assert inp.host_address() == replacement.ctypes.data
    del inp
    assert POOL.bytes == 0, "the replaced memory was the buffer's own: neither goes to the pool"
    del out
    assert POOL.bytes == 16


def test_the_pool_keeps_at_most_its_limits(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(MemoryPool, "LIMIT", 3 << 18)
    buffers = [Buffer("C", 1 << 16, dtypes.float32) for _ in range(5)]  # 256 KB each
    del buffers
    assert POOL.bytes == 3 << 18 and len(POOL.order) == 3
    monkeypatch.setattr(MemoryPool, "MAX_ARRAYS", 4)
    POOL.clear()
    small = [Buffer("C", 4 + k, dtypes.float32) for k in range(6)]
    newest = small[-1].host_address()
    del small
    assert len(POOL.order) == 4 and sum(len(kept) for kept in POOL.free.values()) == 4
    assert Buffer("C", 9, dtypes.float32).host_address() == newest  # the oldest went first


def test_an_eager_loop_reuses_memory_and_computes_what_numpy_does():
    """Each step's intermediates die and their memory serves the next step's; the values stay right
    while results of earlier steps, still held, keep their own memory."""
    rng = np.random.default_rng(0)
    a_np = rng.standard_normal((32, 16)).astype(np.float32)
    a = Tensor(a_np).realize()
    kept, expected = [], []
    for step in range(6):
        out = ((a * (step + 1)).exp().sum(1) + a.max(1)).realize()
        kept.append(out)
        expected.append(np.exp(a_np * (step + 1)).sum(1) + a_np.max(1))
    addresses = {t.lazydata.base.realized.host_address() for t in kept}
    assert len(addresses) == len(kept), "a result still held shares memory with another"
    for out, want in zip(kept, expected, strict=True):
        np.testing.assert_allclose(out.numpy(), want, rtol=1e-6)
    assert POOL.bytes > 0, "the intermediates' memory was kept for reuse"


def test_numpy_gives_a_writable_copy_that_later_work_never_changes():
    """numpy() is PyTorch's writable array (code such as an MPI broadcast writes into it), but of a
    tensor still held, a copy: writing into it leaves the tensor alone, and a later realize that reuses
    the memory leaves it alone (tests/unit/test_numpy_hand_over.py: a temporary's memory)."""
    x = Tensor(np.arange(64 * 64, dtype=np.float32).reshape(64, 64))
    y = (x + 1).realize()
    out = y.numpy()
    assert out.flags.writeable
    out[0, 0] = -5.0
    assert y.numpy()[0, 0] == 1.0
    expected = out.copy()
    del y
    for _ in range(3):
        (x * 3).realize()
    np.testing.assert_array_equal(out, expected)
