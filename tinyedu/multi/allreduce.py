"""All-reduce: every device ends with the sum (or max) of all devices' buffers.

Both versions are built from the framework's own pieces: a copy between devices (a COPY item in the
schedule) and an elementwise kernel that adds what arrived to what is there. Nothing runs until the
results are realized, so the schedule shows every transfer and every addition as its own item.

- `naive_all_reduce`: copy every buffer to the first device, add them there in device order, copy
  the result back to every device. The first device receives n-1 buffers and sends n-1: its link
  carries 2(n-1) whole buffers while the others' links idle.
- `ring_all_reduce`: cut each buffer into n chunks and pass chunks around a ring (device i sends
  only to device i+1). In the *reduce-scatter* phase (n-1 steps) each device adds the chunk it
  receives to its own, so that after it device i holds chunk i+1 fully summed; in the *all-gather*
  phase (n-1 steps) the finished chunks travel once more around the ring. Every link carries
  2(n-1)/n of a buffer, whatever n is: this is why NCCL and MPI use rings for large buffers.

The order of the additions is fixed and documented, so the bits are reproducible: the naive sum is
((x0 + x1) + x2) + ... in device order; the ring sums chunk c in ring order starting at device c,
((xc + xc+1) + ...) + xc-1 (`ring_order`). Float addition is not associative, so for three devices
or more the two can differ in the last bits; for one or two devices (a + b == b + a) and for
integers they are equal.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from tinyedu.core.dtype import dtypes
from tinyedu.core.ops import BinaryOps, TernaryOps
from tinyedu.lazy import LazyBuffer

OPS = {"sum": BinaryOps.ADD, "max": BinaryOps.MAX}
# (phase, step, chunks): called after every step of the ring; chunks[i][c] is device i's chunk c
StepHook = Callable[[str, int, list[list[LazyBuffer | None]]], None]


def combine(op: str, received: LazyBuffer, own: LazyBuffer) -> LazyBuffer:
    """`received (op) own`: one elementwise kernel on the receiving device."""
    if op not in OPS:
        raise ValueError(f"all_reduce: unknown op {op!r}; expected one of {', '.join(OPS)}")
    return received.e(OPS[op], own)


def _check(buffers: list[LazyBuffer], name: str) -> None:
    if not buffers:
        raise ValueError(f"{name}: expected one buffer per device, got none")
    devices = [b.device for b in buffers]
    if len(set(devices)) != len(devices):
        raise ValueError(f"{name}: each buffer must be on its own device, got devices {devices}")
    if any(b.shape != buffers[0].shape or b.dtype != buffers[0].dtype for b in buffers):
        raise ValueError(f"{name}: every device's buffer must have the same shape and dtype, got "
                         f"{[(b.shape, b.dtype.name) for b in buffers]}")


# --8<-- [start:naive]
def naive_all_reduce(buffers: list[LazyBuffer], op: str = "sum") -> list[LazyBuffer]:
    """Gather to the first device, reduce there in device order, broadcast the result back."""
    _check(buffers, "naive_all_reduce")
    root = buffers[0].device
    total = buffers[0]
    for b in buffers[1:]:
        total = combine(op, total, b.copy_to_device(root))
    return [total if b.device == root else total.copy_to_device(b.device) for b in buffers]
# --8<-- [end:naive]


def chunk_bounds(size: int, n: int) -> list[tuple[int, int]]:
    """[start, end) of n chunks of `size` elements, as even as possible (the first ones one larger);
    a chunk is empty when size < n."""
    small, extra = divmod(size, n)
    bounds, start = [], 0
    for i in range(n):
        end = start + small + (1 if i < extra else 0)
        bounds.append((start, end))
        start = end
    return bounds


def ring_order(n: int, chunk: int) -> list[int]:
    """The devices whose values chunk `chunk` adds, in the order the ring adds them."""
    return [(chunk + k) % n for k in range(n)]


# --8<-- [start:ring]
def reduce_scatter_step(chunks: list[list[LazyBuffer | None]], step: int, op: str = "sum") -> None:
    """Step `step` of the reduce-scatter: device i sends its partial chunk (i - step) mod n to device
    i+1, which combines it with its own (received first). Updates `chunks` in place."""
    n = len(chunks)
    sends = []
    for i in range(n):
        c = (i - step) % n
        if chunks[i][c] is not None:  # (an empty chunk: nothing to send)
            sends.append((i, (i + 1) % n, c))
    for i, j, c in sends:  # (every send reads the values from before this step)
        received = chunks[i][c].copy_to_device(chunks[j][c].device)
        chunks[j][c] = combine(op, received, chunks[j][c])


def all_gather_step(chunks: list[list[LazyBuffer | None]], step: int) -> None:
    """Step `step` of the all-gather: device i passes the finished chunk (i + 1 - step) mod n on to
    device i+1, which keeps it (replacing its partial one)."""
    n = len(chunks)
    for i in range(n):
        j, c = (i + 1) % n, (i + 1 - step) % n
        if chunks[i][c] is not None:
            chunks[j][c] = chunks[i][c].copy_to_device(chunks[j][c].device)


def ring_all_reduce(buffers: list[LazyBuffer], op: str = "sum",
                    on_step: StepHook | None = None) -> list[LazyBuffer]:
    """Reduce-scatter, then all-gather, around the ring of `buffers`' devices; `on_step` sees the
    chunks after every step (to print or draw them)."""
    _check(buffers, "ring_all_reduce")
    n, shape = len(buffers), buffers[0].shape
    if n == 1:
        return list(buffers)
    size = buffers[0].size
    bounds = chunk_bounds(size, n)
    flat = [b.reshape((size,)) for b in buffers]
    chunks: list[list[LazyBuffer | None]] = [[f.shrink(((lo, hi),)) if hi > lo else None for lo, hi in bounds]
                                             for f in flat]
    for step in range(n - 1):
        reduce_scatter_step(chunks, step, op)
        if on_step is not None:
            on_step("reduce-scatter", step, chunks)
    for step in range(n - 1):
        all_gather_step(chunks, step)
        if on_step is not None:
            on_step("all-gather", step, chunks)
    return [join(row, bounds, 0).reshape(shape) for row in chunks]
# --8<-- [end:ring]


def join(pieces: list[LazyBuffer | None], bounds: list[tuple[int, int]], axis: int) -> LazyBuffer:
    """The pieces (all on one device, None for an empty one) side by side along `axis`, which they
    cover in `bounds`: each padded out to the full length and picked where its data is (a `where`
    copies every value as it is, sign of zero included; adding padded pieces would not)."""
    total = bounds[-1][1]
    out = None
    for piece, (lo, hi) in zip(pieces, bounds, strict=True):
        if piece is None:
            continue
        padding = [(0, 0)] * len(piece.shape)
        padding[axis] = (lo, total - hi)
        padded = piece.pad(padding)
        if out is None:
            out = padded
            continue
        mask = LazyBuffer.full(True, piece.shape, dtypes.bool, piece.device).pad(padding)
        out = mask.e(TernaryOps.WHERE, padded, out)
    assert out is not None
    return out


def ring_steps(buffers: list[LazyBuffer], op: str = "sum") -> list[str]:
    """The ring all-reduce of `buffers`, realized after every step: one line per device and step,
    each chunk's values as the device holds them then (a partial sum or a finished one)."""
    lines: list[str] = []

    def show(phase: str, step: int, chunks: list[list[LazyBuffer | None]]) -> None:
        lines.append(f"{phase} step {step}:")
        for i, row in enumerate(chunks):
            shown = ["-" if c is None else np.array2string(c.numpy(), precision=4, separator=", ")
                     for c in row]
            lines.append(f"  {row[0].device if row[0] is not None else i:>8}: " + " | ".join(shown))

    ring_all_reduce(buffers, op, on_step=show)
    return lines
