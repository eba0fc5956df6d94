"""The naive and the ring all-reduce against sums in a fixed order, bit for bit, on 1 to 5 devices
and sizes that the device count does not divide."""

from __future__ import annotations

import numpy as np
import pytest

from tinyedu import Tensor
from tinyedu.lazy import LazyBuffer
from tinyedu.multi.allreduce import chunk_bounds, naive_all_reduce, ring_all_reduce, ring_order, ring_steps


def device_buffers(arrays: list[np.ndarray], kind: str = "NUMPY") -> list[LazyBuffer]:
    return [Tensor(a, device=f"{kind}:{i}").lazydata for i, a in enumerate(arrays)]


def ordered(arrays: list[np.ndarray], order: list[int], op: str) -> np.ndarray:
    """((a[o0] (op) a[o1]) (op) a[o2]) ... in numpy, in the array's dtype."""
    combine = np.add if op == "sum" else np.maximum
    total = arrays[order[0]]
    for k in order[1:]:
        total = combine(total, arrays[k])
    return total


def ring_reference(arrays: list[np.ndarray], op: str) -> np.ndarray:
    """Chunk c summed in ring order from device c (tinyedu/multi/allreduce.py's documented order)."""
    n, flat = len(arrays), [a.reshape(-1) for a in arrays]
    out = np.empty_like(flat[0])
    for c, (lo, hi) in enumerate(chunk_bounds(flat[0].size, n)):
        out[lo:hi] = ordered([f[lo:hi] for f in flat], ring_order(n, c), op)
    return out.reshape(arrays[0].shape)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("shape", [(1,), (7,), (3, 5), (2, 3, 4)])
@pytest.mark.parametrize("op", ["sum", "max"])
def test_both_all_reduces_give_the_bits_of_a_fixed_order(n: int, shape: tuple[int, ...], op: str) -> None:
    rng = np.random.default_rng(n * 100 + len(shape))
    arrays = [rng.standard_normal(shape).astype(np.float32) * np.float32(10.0 ** rng.integers(-3, 4))
              for _ in range(n)]
    naive = naive_all_reduce(device_buffers(arrays), op)
    ring = ring_all_reduce(device_buffers(arrays), op)
    in_device_order, in_ring_order = ordered(arrays, list(range(n)), op), ring_reference(arrays, op)
    for i in range(n):
        assert naive[i].device == ring[i].device == (f"NUMPY:{i}" if i else "NUMPY")
        np.testing.assert_array_equal(naive[i].numpy().view(np.uint32), in_device_order.view(np.uint32))
        np.testing.assert_array_equal(ring[i].numpy().view(np.uint32), in_ring_order.view(np.uint32))
    if n <= 2 or op == "max":  # (a + b == b + a; max is associative): the two orders agree
        np.testing.assert_array_equal(in_device_order, in_ring_order)
    exact = np.sum(np.stack(arrays).astype(np.float64), 0) if op == "sum" else np.max(np.stack(arrays), 0)
    np.testing.assert_allclose(in_ring_order, exact, rtol=1e-5, atol=1e-5 * np.abs(in_ring_order).max())


def test_integers_give_the_same_bits_in_both_orders_on_compiled_devices() -> None:
    rng = np.random.default_rng(0)
    arrays = [rng.integers(-1000, 1000, (11,)).astype(np.int32) for _ in range(4)]
    for result in (naive_all_reduce(device_buffers(arrays, "C"), "sum"),
                   ring_all_reduce(device_buffers(arrays, "C"), "sum")):
        for out in result:
            np.testing.assert_array_equal(out.numpy(), np.sum(arrays, 0))


def test_the_ring_moves_chunks_and_each_link_carries_2_n_minus_1_chunks() -> None:
    from tinyedu.engine.schedule import create_schedule
    arrays = [np.full(6, float(i + 1), np.float32) for i in range(3)]
    outs = ring_all_reduce([b.realize() for b in device_buffers(arrays)], "sum")
    copies = [item.name for item in create_schedule(outs) if item.name.startswith("copy")]
    assert len(copies) == 3 * 2 * 2, copies  # 3 devices, 2 steps in each phase, one chunk sent per step
    links = {"NUMPY->NUMPY:1", "NUMPY:1->NUMPY:2", "NUMPY:2->NUMPY"}
    assert {name.split("_", 2)[2] for name in copies} == links  # (copy_2_<from>-><to>): only to the next
    lines = ring_steps(device_buffers(arrays), "sum")
    assert lines[0] == "reduce-scatter step 0:" and "all-gather step 1:" in lines
    assert [line.strip() for line in lines[-3:]] == [f"{d}: [6., 6.] | [6., 6.] | [6., 6.]"
                                                     for d in ("NUMPY", "NUMPY:1", "NUMPY:2")]


def test_bad_input_is_refused_with_the_reason() -> None:
    a, b = Tensor([1.0, 2.0], device="NUMPY").lazydata, Tensor([1.0, 2.0, 3.0], device="NUMPY:1").lazydata
    with pytest.raises(ValueError, match="same shape and dtype"):
        ring_all_reduce([a, b])
    with pytest.raises(ValueError, match="each buffer must be on its own device"):
        naive_all_reduce([a, a])
    with pytest.raises(ValueError, match="unknown op 'mean'"):
        ring_all_reduce([a, Tensor([1.0, 2.0], device="NUMPY:1").lazydata], "mean")
