"""numpy() of a temporary (tinyedu/tensor.py): in `(a @ b).numpy()` nothing but the call holds the
tensor, so the memory its kernel wrote is handed over instead of copied. Everything else gets a copy:
a tensor still held, a node another tensor shares, a view of a base something else holds, a buffer
TinyJit keeps. Whatever runs afterwards never changes an array already handed out, and every array
is writable. (Arrays of HAND_OVER_FROM_BYTES or more are handed over: the tests use 256 KB.)"""

from __future__ import annotations

import gc

import numpy as np
import pytest

from tinyedu import Tensor, TinyJit
from tinyedu.core.dtype import dtypes
from tinyedu.engine import realize
from tinyedu.runtime.device import POOL
from tinyedu.tensor import HAND_OVER_FROM_BYTES

N = 256  # (N, N) float32: 256 KB


@pytest.fixture
def written():
    """The address of the memory each program writes, in order (C device: host memory)."""
    addresses: list[int] = []

    def observe(name, ast, program, buffers) -> None:  # (keeps no buffer: that would count as a holder)
        addresses.append(buffers[0].host_address())

    realize.observers.append(observe)
    yield addresses
    realize.observers.remove(observe)


@pytest.fixture
def inputs() -> tuple[Tensor, Tensor, np.ndarray]:
    rng = np.random.default_rng(0)
    a_np, b_np = (rng.standard_normal((N, N)).astype(np.float32) for _ in range(2))
    expected = a_np.astype(np.float64) @ b_np.astype(np.float64)
    return Tensor(a_np).realize(), Tensor(b_np).realize(), expected


on_c = pytest.mark.skipif(Tensor.default_device != "C", reason="reads the C device's host addresses")


@on_c
def test_a_temporary_hands_over_the_memory_its_kernel_wrote(inputs, written):
    a, b, expected = inputs
    assert N * N * 4 >= HAND_OVER_FROM_BYTES
    out = (a @ b).numpy()
    assert out.ctypes.data == written[-1], "the array is the kernel's output memory, not a copy"
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-4)
    assert out.flags.writeable and out.shape == (N, N) and out.dtype == np.float32
    out[0, 0] = 5.0  # the caller's own: nothing else sees it


@on_c
def test_a_held_tensor_gets_a_copy_that_leaves_it_alone(inputs, written):
    a, b, expected = inputs
    c = a @ b
    out = c.numpy()
    assert out.ctypes.data != written[-1]
    out[:] = 0.0
    np.testing.assert_allclose(c.numpy(), expected, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("share", ["detach", "reshape"])
def test_a_temporary_that_shares_its_node_or_base_gets_a_copy(inputs, share):
    a, b, expected = inputs
    c = a @ b
    temporary = {"detach": lambda: c.detach(),  # a new tensor on c's node
                 "reshape": lambda: c.reshape(N * N)}[share]  # another view of c's base
    out = temporary().numpy()
    out[:] = -1.0
    np.testing.assert_allclose(c.numpy(), expected, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(temporary().numpy().reshape(N, N), expected, rtol=1e-5, atol=1e-4)


def test_arrays_handed_over_never_change_afterwards(inputs):
    """The pool never hands their memory to a new buffer, and later kernels write elsewhere."""
    a, b, expected = inputs
    gc.collect()
    POOL.clear()
    outs = [(a @ b * float(k)).numpy() for k in range(1, 4)]
    kept = [out.copy() for out in outs]
    for _ in range(3):
        (a * 3 - b).realize()
        (a @ b).realize()
    for k, (out, before) in enumerate(zip(outs, kept, strict=True), start=1):
        np.testing.assert_array_equal(out, before)
        np.testing.assert_allclose(out, expected * k, rtol=1e-5, atol=1e-3)


def test_a_tinyjit_output_is_copied_before_the_next_replay_overwrites_it(inputs):
    a, b, _ = inputs
    step = TinyJit(lambda x: (x @ b).realize())
    rng = np.random.default_rng(1)
    xs = [rng.standard_normal((N, N)).astype(np.float32) for _ in range(5)]
    outs = [step(Tensor(x)).numpy() for x in xs]  # replays write the same output buffer
    for x, out in zip(xs, outs, strict=True):
        np.testing.assert_allclose(out, x.astype(np.float64) @ b.numpy().astype(np.float64),
                                   rtol=1e-5, atol=1e-4)


@on_c
def test_a_small_temporary_is_copied_and_its_memory_kept_for_reuse(written):
    x = Tensor(np.arange(16, dtype=np.float32)).realize()
    POOL.clear()
    out = (x + 1).numpy()
    assert out.ctypes.data != written[-1] and 16 * 4 < HAND_OVER_FROM_BYTES
    gc.collect()
    assert POOL.bytes >= 16 * 4, "the small buffer's memory went back to the pool"
    np.testing.assert_array_equal(out, np.arange(16, dtype=np.float32) + 1)


def test_queued_kernels_finish_before_their_memory_is_handed_over(inputs, monkeypatch):
    monkeypatch.setenv("ASYNC", "1")
    a, b, expected = inputs
    for _ in range(3):
        np.testing.assert_allclose((a @ b).numpy(), expected, rtol=1e-5, atol=1e-4)


def test_bfloat16_and_int_temporaries_come_back_exact(inputs):
    a, _, _ = inputs
    halves = (a * 2).cast(dtypes.bfloat16)
    want = (halves.numpy()).astype(np.float32)
    np.testing.assert_array_equal((halves * 1).numpy(), want)  # bfloat16 -> float32, a new array
    ints = Tensor(np.arange(N * N, dtype=np.int32).reshape(N, N)).realize()
    got = (ints * 3 - 1).numpy()
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, np.arange(N * N, dtype=np.int32).reshape(N, N) * 3 - 1)


def test_a_tinyjit_output_in_a_weights_memory_is_copied(inputs):
    """A step that returns a weight it updates in place: each replay hands back a new tensor on the
    weight's own memory, which the next replay writes again."""
    _, b, _ = inputs
    weight = Tensor.zeros(N, N).contiguous().realize()

    @TinyJit
    def step(x: Tensor) -> Tensor:
        weight.assign(weight + x @ b)
        return weight

    rng = np.random.default_rng(2)
    xs = [rng.standard_normal((N, N)).astype(np.float32) for _ in range(5)]
    outs = [step(Tensor(x)).numpy() for x in xs]
    total = np.zeros((N, N))
    for x, out in zip(xs, outs, strict=True):
        total += x.astype(np.float64) @ b.numpy().astype(np.float64)
        np.testing.assert_allclose(out, total, rtol=1e-4, atol=1e-3)
