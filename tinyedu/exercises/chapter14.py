"""Chapter 14 (many devices): the ring's reduce-scatter step, where a reshape keeps the shards, and
which ops of a sharded graph communicate.

The first two plug into the library: `reduce_scatter_step` into the ring all-reduce
(tinyedu/multi/allreduce.py), which every sum over a sharded axis and data-parallel training use;
`reshaped_axis` into MultiLazyBuffer.reshape (tinyedu/multi/lazy.py), which gathers the shards
when it answers None. The third is a prediction, checked against what the library schedules.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from tinyedu.engine.schedule import create_schedule
from tinyedu.exercises.checking import need_function
from tinyedu.exercises.hooks import plug
from tinyedu.exercises.registry import exercise
from tinyedu.multi import allreduce
from tinyedu.multi import lazy as multi_lazy
from tinyedu.tensor import Tensor

# -- exercise: the reduce-scatter step --------------------------------------------------------------


def _ring_reference(arrays: list[np.ndarray]) -> np.ndarray:
    """Chunk c summed in ring order from device c, in float32 numpy."""
    n, flat = len(arrays), [a.reshape(-1) for a in arrays]
    out = np.empty_like(flat[0])
    for c, (lo, hi) in enumerate(allreduce.chunk_bounds(flat[0].size, n)):
        total = flat[c][lo:hi]
        for k in allreduce.ring_order(n, c)[1:]:
            total = total + flat[k][lo:hi]
        out[lo:hi] = total
    return out


@exercise("14.reduce_scatter_step", answer="reduce_scatter_step", title="The ring's reduce-scatter step",
          hook="tinyedu.multi.allreduce.reduce_scatter_step")
def check_reduce_scatter_step(reduce_scatter_step: Callable[..., None]) -> str:
    need_function(reduce_scatter_step, "reduce_scatter_step", "reduce_scatter_step(chunks, step, op)")
    for n, size in [(2, 5), (3, 7), (4, 4), (5, 13), (3, 2)]:
        rng = np.random.default_rng(n * 10 + size)
        arrays = [rng.standard_normal(size).astype(np.float32) for _ in range(n)]
        buffers = [Tensor(a, device=f"NUMPY:{i}").lazydata for i, a in enumerate(arrays)]
        devices = [b.device for b in buffers]

        def after_step(phase: str, step: int, chunks: list, n: int = n, devices: list = devices) -> None:
            for j, row in enumerate(chunks):
                for c, chunk in enumerate(row):
                    if chunk is not None and chunk.device != devices[j]:
                        raise AssertionError(
                            f"after {phase} step {step} on {n} devices, device {j}'s chunk {c} lives on "
                            f"{chunk.device}. Hint: copy what device i sends to device j with "
                            "copy_to_device(...) before combining it with device j's own chunk.")

        with plug(allreduce, "reduce_scatter_step", reduce_scatter_step) as plugged:
            outs = allreduce.ring_all_reduce(buffers, "sum", on_step=after_step)
            got = [o.numpy() for o in outs]
        plugged.require_called("reduce_scatter_step")
        want = _ring_reference(arrays)
        exact = np.sum(np.stack(arrays).astype(np.float64), 0)
        for i, g in enumerate(got):
            if np.array_equal(g.view(np.uint32), want.view(np.uint32)):
                continue
            if np.allclose(g, exact, rtol=1e-5, atol=1e-6):
                raise AssertionError(
                    f"on {n} devices the sums are right but not in the ring's order (device {i} got "
                    f"{g}, the ring gives {want}, bit for bit). Hint: in step s device i sends chunk "
                    "(i - s) mod n to device (i + 1) mod n, so chunk c is summed from device c onwards.")
            raise AssertionError(
                f"on {n} devices with {size} values each, device {i} ends with {g}, expected the sum "
                f"{want}. Hint: in step s, device i sends its chunk (i - s) mod n to device (i + 1) mod n, "
                "which combines it with its own chunk (combine(op, received, own)); every chunk must be "
                "summed exactly once from every device after n - 1 steps.")
    # the library on it: a sum over a sharded axis, and data-parallel gradients, use the ring
    data = np.random.default_rng(0).standard_normal((9, 4)).astype(np.float32)
    with plug(allreduce, "reduce_scatter_step", reduce_scatter_step):
        total = Tensor(data).shard(("NUMPY:0", "NUMPY:1", "NUMPY:2"), 0).sum(0).numpy()
    if not np.allclose(total, data.sum(0), rtol=1e-5, atol=1e-5):
        raise AssertionError(f"a (9, 4) tensor sharded over 3 devices sums over its rows to {total}, "
                             f"expected {data.sum(0)}. Hint: check the step on a buffer of 4 values.")
    return ("your reduce-scatter step, in the ring on 2 to 5 devices and sizes they do not divide: the "
            "bits of a sum in ring order on every device; a sharded tensor's sum(0) over 3 devices")


# -- exercise: where a reshape keeps the shards -----------------------------------------------------
RESHAPES = [  # (shape, axis, new shape): sharded over 2 or 3 devices
    ((8, 4), 0, (32,)), ((8, 4), 0, (4, 8)), ((8, 4), 0, (2, 4, 4)), ((8, 4), 1, (32,)),
    ((6, 4), 0, (3, 8)), ((6, 4), 1, (6, 2, 2)), ((4, 6), 1, (4, 2, 3)), ((4, 6), 1, (24,)),
    ((6, 4), 0, (1, 6, 4)), ((3, 8), 1, (3, 4, 2)), ((3, 8), 1, (24,)), ((2, 6, 2), 1, (12, 2)),
]


@exercise("14.reshaped_axis", answer="reshaped_axis", title="Which reshapes keep the shards",
          hook="tinyedu.multi.lazy.reshaped_axis")
def check_reshaped_axis(reshaped_axis: Callable[..., Any]) -> str:
    need_function(reshaped_axis, "reshaped_axis", "reshaped_axis(old, axis, sizes, new)")
    library = multi_lazy.reshaped_axis
    for devices in [("NUMPY:0", "NUMPY:1"), ("NUMPY:0", "NUMPY:1", "NUMPY:2")]:
        for shape, axis, new in RESHAPES:
            if shape[axis] < len(devices):
                continue
            sizes = [hi - lo for lo, hi in allreduce.chunk_bounds(shape[axis], len(devices))]
            got = reshaped_axis(shape, axis, list(sizes), new)
            want = library(shape, axis, list(sizes), new)
            if got != want:
                kind = "keeps the slices as blocks of one axis" if want is not None else \
                    "mixes the devices' slices (a gather is needed)"
                raise AssertionError(
                    f"reshaping {shape} sharded on axis {axis} (slices of {sizes}) to {new}: you answered "
                    f"{got}, but this reshape {kind}{'' if want is None else f': {want}'}. Hint: device i "
                    "holds, for each index of the axes before the sharded one, a block of sizes[i] * "
                    "(product of the axes after it) elements; find the new axis whose axes before it have "
                    "the same product and whose inner size divides every block.")
    data = np.arange(48, dtype=np.float32).reshape(8, 6)
    with plug(multi_lazy, "reshaped_axis", reshaped_axis) as plugged:
        x = Tensor(data).shard(("NUMPY:0", "NUMPY:1"), 0)
        out = [x.reshape(48), x.reshape(4, 12), x.permute(1, 0).reshape(48)]
        values = [o.numpy() for o in out]
    plugged.require_called("reshaped_axis")
    for v, want in zip(values, [data.reshape(48), data.reshape(4, 12), data.T.reshape(48)], strict=True):
        if not np.array_equal(v, want):
            raise AssertionError(f"with your reshaped_axis a reshape to {want.shape} gives wrong values")
    return ("your decision matches the library's on 12 reshapes over 2 and 3 devices; sharded reshapes "
            "that keep or gather the slices give numpy's values with it")


# -- exercise: which ops of a graph communicate ------------------------------------------------------
def graph_ops(x: Tensor, w: Tensor) -> dict[str, Tensor]:
    """The graph of the prediction: x (8, 4) sharded on axis 0 over two devices, w (4, 3) replicated."""
    y = x @ w
    return {"scale": x * 2, "matmul": y, "row_sum": y.sum(1), "col_sum": y.sum(0), "flatten": x.reshape(32),
            "transpose_flatten": x.T.reshape(32), "middle_rows": x[2:6], "first_rows": x[:3],
            "gram": x.T @ x, "softmax_rows": y.softmax(1)}


def communicates(t: Tensor, before: set[int]) -> bool:
    """Whether computing `t` copies anything between devices (beyond its inputs' placement)."""
    items = create_schedule(list(t.lazydata.lbs))
    return any("->" in item.name and id(item.out) not in before for item in items)


@exercise("14.which_communicate", answer="which_communicate",
          title="Which ops of a sharded graph communicate")
def check_which_communicate(which_communicate: Any) -> str:
    devices = ("NUMPY:0", "NUMPY:1")
    rng = np.random.default_rng(0)
    x = Tensor(rng.standard_normal((8, 4)).astype(np.float32)).shard(devices, 0).realize()
    w = Tensor(rng.standard_normal((4, 3)).astype(np.float32)).to(devices).realize()
    ops = graph_ops(x, w)
    if not isinstance(which_communicate, (set, frozenset, list, tuple)) or \
            not all(isinstance(k, str) for k in which_communicate):
        raise AssertionError(f"which_communicate: expected a set of op names from {sorted(ops)}")
    unknown = set(which_communicate) - set(ops)
    if unknown:
        raise AssertionError(f"which_communicate: {sorted(unknown)} are not ops of the graph; the ops are "
                             f"{sorted(ops)}")
    truth = {name for name, t in ops.items() if communicates(t, set())}
    missed, extra = truth - set(which_communicate), set(which_communicate) - truth
    if missed:
        name = sorted(missed)[0]
        raise AssertionError(f"{name} communicates: look at which axis it reduces or which slices a device "
                             "would need from the other one (a sum over the sharded axis, a reshape that "
                             "mixes the rows, a shrink that leaves a device nothing)")
    if extra:
        name = sorted(extra)[0]
        raise AssertionError(f"{name} runs shard by shard: each device has every value its own slice of the "
                             "result needs (w is on every device; the op keeps the sharded axis apart)")
    return f"{len(truth)} of the {len(ops)} ops communicate, the others run shard by shard"
