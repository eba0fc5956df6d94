"""MultiLazyBuffer: one value spread over several devices, as one LazyBuffer per device.

A MultiLazyBuffer is either *sharded* along `axis` (device i holds the slice `bounds[i]` of that
axis) or *replicated* (`axis` is None: every device holds all of it). It answers the same small
interface as a LazyBuffer (e, r, reshape, permute, expand, pad, shrink, stride, cast, const,
contiguous, copy_to_device), so the autograd Functions of tinyedu/core/function.py run on it unchanged:
forward and backward of a sharded tensor are sharded too.

Each op runs shard by shard where that is correct, and communicates where it is not:

- elementwise: shard by shard; a replicated operand is cut to each device's slice (a view, no
  copy); operands sharded along different axes: one is gathered first (an all-gather);
- a reduce over other axes: shard by shard; over the sharded axis: each device reduces its slice
  (partial sums), then an all-reduce (tinyedu/multi/allreduce.py) leaves the total on every device;
- movement: a reshape that keeps the sharded axis's slices together, a permute, an expand of other
  axes, a pad or shrink that leaves every device some of its slice: shard by shard (bounds move);
  anything else (a reshape that mixes the slices, a strided axis): all-gather, then the op on the
  replicas.

Every copy between devices is a COPY item in the schedule, so DEBUG=1/2 and GRAPH=1 show them.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from tinyedu.core.dtype import DType
from tinyedu.core.helpers import prod
from tinyedu.core.ops import BinaryOps, ReduceOps, TernaryOps, UnaryOps
from tinyedu.lazy import LazyBuffer, engine
from tinyedu.multi import allreduce

ALL_REDUCE = {"ring": allreduce.ring_all_reduce, "naive": allreduce.naive_all_reduce}


def shard_bounds(size: int, n: int) -> list[tuple[int, int]]:
    """[start, end) of each device's slice of an axis of `size`: as even as possible."""
    return allreduce.chunk_bounds(size, n)


class MultiLazyBuffer:
    all_reduce = "ring"  # the all-reduce a reduce over the sharded axis uses ("ring" or "naive")

    def __init__(self, lbs: Sequence[LazyBuffer], axis: int | None):
        self.lbs, self.axis = list(lbs), axis
        self.dtype: DType = self.lbs[0].dtype
        self.device: tuple[str, ...] = tuple(lb.device for lb in self.lbs)
        if axis is None:
            self.shape: tuple[int, ...] = self.lbs[0].shape
            self.bounds = None
        else:
            sizes = [lb.shape[axis] for lb in self.lbs]
            starts = np.cumsum([0, *sizes]).tolist()
            self.bounds = list(zip(starts[:-1], starts[1:], strict=True))
            self.shape = tuple(starts[-1] if a == axis else s for a, s in enumerate(self.lbs[0].shape))

    # ---- making one ----
    @staticmethod
    def shard(lb: LazyBuffer, devices: tuple[str, ...], axis: int | None) -> "MultiLazyBuffer":
        """`lb` cut along `axis` (None: copied whole) onto `devices`: one COPY per device."""
        if axis is None:
            return MultiLazyBuffer([_replica(lb, d) for d in devices], None)
        if lb.shape[axis] < len(devices):
            raise ValueError(f"shard: axis {axis} of shape {lb.shape} has {lb.shape[axis]} elements, fewer "
                             f"than the {len(devices)} devices; shard a longer axis or use fewer devices")
        pieces = []
        for d, (lo, hi) in zip(devices, shard_bounds(lb.shape[axis], len(devices)), strict=True):
            pieces.append(lb.shrink(_span(lb.shape, axis, lo, hi)).copy_to_device(d))
        return MultiLazyBuffer(pieces, axis)

    # ---- what it is (the parts of LazyBuffer's interface Tensor reads) ----
    @property
    def base(self) -> "MultiLazyBuffer":
        return self

    realized = None  # (never one buffer: Tensor's assign checks skip it)

    @property
    def size(self) -> int:
        return prod(self.shape)

    def is_const(self) -> bool:
        return all(lb.is_const() for lb in self.lbs)

    def known_values(self) -> np.ndarray | None:
        return None

    def __repr__(self) -> str:
        how = "replicated" if self.axis is None else f"sharded on axis {self.axis} {self.bounds}"
        return f"<MLB {self.shape} {self.dtype.name} {how} on {', '.join(self.device)}>"

    def realize(self) -> "MultiLazyBuffer":
        pending = [lb for lb in self.lbs if lb.base.realized is None]
        if pending:
            engine().realize(pending)
        return self

    def numpy(self) -> np.ndarray:
        if self.axis is None:
            return self.lbs[0].numpy()
        self.realize()
        return np.concatenate([lb.numpy() for lb in self.lbs], axis=self.axis)

    # ---- communication ----
    def gathered(self) -> "MultiLazyBuffer":
        """Replicated: every device gets every slice (an all-gather: copies, then a join)."""
        if self.axis is None:
            return self
        out = []
        for d in self.device:
            pieces = [lb.copy_to_device(d) for lb in self.lbs]
            out.append(allreduce.join(pieces, self.bounds, self.axis))
        return MultiLazyBuffer(out, None)

    def copy_to_device(self, device: str | tuple[str, ...]) -> "LazyBuffer | MultiLazyBuffer":
        """One device: the whole value gathered there. Several: replicated onto them."""
        if isinstance(device, tuple):
            if device == self.device:
                return self
            return MultiLazyBuffer.shard(self.copy_to_device(device[0]), device, None)
        if self.axis is None:
            return _replica(self.lbs[0], device)
        pieces = [lb.copy_to_device(device) for lb in self.lbs]
        return allreduce.join(pieces, self.bounds, self.axis)

    def writable(self) -> "MultiLazyBuffer":
        """Each device's part in memory of its own (what assign writes into)."""
        return MultiLazyBuffer([lb.writable() for lb in self.lbs], self.axis)

    def assign_pairs(self, value: "MultiLazyBuffer") -> list[tuple[LazyBuffer, LazyBuffer]]:
        """(target, value) per device, for assign: the value cut the way this tensor is (a replicated
        value is cut with views; one sharded another way is gathered first)."""
        if value.axis != self.axis or value.bounds != self.bounds:
            value = value.gathered()
            value = value if self.axis is None else value._cut(self.axis, self.bounds)
        return list(zip(self.lbs, value.lbs, strict=True))

    def _cut(self, axis: int, bounds: list[tuple[int, int]]) -> "MultiLazyBuffer":
        """A replicated value cut to each device's slice of `axis` (views, no copies)."""
        assert self.axis is None
        return MultiLazyBuffer([lb.shrink(_span(lb.shape, axis, lo, hi))
                                for lb, (lo, hi) in zip(self.lbs, bounds, strict=True)], axis)

    # ---- compute ----
    # --8<-- [start:elementwise]
    def e(self, op: UnaryOps | BinaryOps | TernaryOps, *srcs: "MultiLazyBuffer",
          arg: Any = None) -> "MultiLazyBuffer":
        operands = [self, *srcs]
        for s in srcs:
            if not isinstance(s, MultiLazyBuffer) or s.device != self.device:
                where = s.device if hasattr(s, "device") else type(s).__name__
                raise ValueError(f"{op.name}: operands are on different devices ({self.device} and {where}); "
                                 "shard or move them to the same devices")
        sharded = [x for x in operands if x.axis is not None]
        if sharded:
            lead = sharded[0]
            operands = [x if x.axis == lead.axis and x.bounds == lead.bounds else
                        x.gathered()._cut(lead.axis, lead.bounds) for x in operands]
        lbs = [first.e(op, *rest, arg=arg) for first, *rest in zip(*(x.lbs for x in operands), strict=True)]
        return MultiLazyBuffer(lbs, operands[0].axis)
    # --8<-- [end:elementwise]

    # --8<-- [start:reduce]
    def r(self, op: ReduceOps, axes: tuple[int, ...]) -> "MultiLazyBuffer":
        partial = MultiLazyBuffer([lb.r(op, axes) for lb in self.lbs], self.axis)
        if self.axis is None or self.axis not in axes:
            return partial
        # Over the sharded axis: each device reduced its own slice; combine the partial results.
        name = "sum" if op is ReduceOps.SUM else "max"
        return MultiLazyBuffer(ALL_REDUCE[MultiLazyBuffer.all_reduce](partial.lbs, name), None)
    # --8<-- [end:reduce]

    def cast(self, dtype: DType) -> "MultiLazyBuffer":
        return MultiLazyBuffer([lb.cast(dtype) for lb in self.lbs], self.axis)

    def contiguous(self) -> "MultiLazyBuffer":
        return MultiLazyBuffer([lb.contiguous() for lb in self.lbs], self.axis)

    def const(self, value: float | int | bool, shape: tuple[int, ...] | None = None) -> "MultiLazyBuffer":
        if shape is None or shape == self.shape:
            return MultiLazyBuffer([lb.const(value) for lb in self.lbs], self.axis)
        return MultiLazyBuffer([lb.const(value, shape) for lb in self.lbs], None)

    # ---- movement ----
    def reshape(self, shape: tuple[int, ...]) -> "MultiLazyBuffer":
        shape = tuple(shape)
        if self.axis is None:
            return MultiLazyBuffer([lb.reshape(shape) for lb in self.lbs], None)
        new_axis = reshaped_axis(self.shape, self.axis, [hi - lo for lo, hi in self.bounds], shape)
        if new_axis is None:  # the slices would mix: gather first
            return self.gathered().reshape(shape)
        axis, sizes = new_axis
        return MultiLazyBuffer([lb.reshape(tuple(n if a == axis else s for a, s in enumerate(shape)))
                                for lb, n in zip(self.lbs, sizes, strict=True)], axis)

    def permute(self, order: tuple[int, ...]) -> "MultiLazyBuffer":
        axis = None if self.axis is None else tuple(order).index(self.axis)
        return MultiLazyBuffer([lb.permute(order) for lb in self.lbs], axis)

    def expand(self, shape: tuple[int, ...]) -> "MultiLazyBuffer":
        if self.axis is not None and shape[self.axis] != self.shape[self.axis]:
            return self.gathered().expand(shape)
        return MultiLazyBuffer([lb.expand(self._local(shape, lb)) for lb in self.lbs], self.axis)

    def pad(self, padding: Sequence[tuple[int, int]]) -> "MultiLazyBuffer":
        if self.axis is None or tuple(padding[self.axis]) == (0, 0):
            return MultiLazyBuffer([lb.pad(padding) for lb in self.lbs], self.axis)
        before, after = padding[self.axis]  # the first device pads before, the last after
        lbs = []
        for i, lb in enumerate(self.lbs):
            mine = list(padding)
            mine[self.axis] = (before if i == 0 else 0, after if i == len(self.lbs) - 1 else 0)
            lbs.append(lb.pad(mine))
        return MultiLazyBuffer(lbs, self.axis)

    def shrink(self, bounds: Sequence[tuple[int, int]]) -> "MultiLazyBuffer":
        if self.axis is None or tuple(bounds[self.axis]) == (0, self.shape[self.axis]):
            lbs = [lb.shrink(self._local(bounds, lb, keep=True)) for lb in self.lbs]
            return MultiLazyBuffer(lbs, self.axis)
        lo, hi = bounds[self.axis]
        kept = [(max(lo, a), min(hi, b)) for a, b in self.bounds]
        if any(b <= a for a, b in kept):  # some device would keep nothing: gather first
            return self.gathered().shrink(bounds)
        lbs = []
        for lb, (a, b), (start, _) in zip(self.lbs, kept, self.bounds, strict=True):
            mine = list(bounds)
            mine[self.axis] = (a - start, b - start)
            lbs.append(lb.shrink(mine))
        return MultiLazyBuffer(lbs, self.axis)

    def stride(self, steps: tuple[int, ...]) -> "MultiLazyBuffer":
        if self.axis is not None and steps[self.axis] != 1:
            return self.gathered().stride(steps)
        return MultiLazyBuffer([lb.stride(steps) for lb in self.lbs], self.axis)

    def _local(self, whole: Sequence[Any], lb: LazyBuffer, keep: bool = False) -> tuple:
        """A shape (or shrink bounds, `keep`) for the whole value, made one device's: the sharded
        axis keeps that device's own extent."""
        if self.axis is None:
            return tuple(whole)
        mine = (0, lb.shape[self.axis]) if keep else lb.shape[self.axis]
        return tuple(mine if a == self.axis else w for a, w in enumerate(whole))


def full(value: float | int | bool, shape: tuple[int, ...], dtype: DType,
         device: str | tuple[str, ...]) -> "LazyBuffer | MultiLazyBuffer":
    """LazyBuffer.full on one device, or on several (a replicated constant: no copies)."""
    if isinstance(device, str):
        return LazyBuffer.full(value, shape, dtype, device)
    return MultiLazyBuffer([LazyBuffer.full(value, shape, dtype, d) for d in device], None)


def _replica(lb: LazyBuffer, device: str) -> LazyBuffer:
    """`lb` on `device`: a constant is made there (no copy), anything else is copied."""
    if lb.is_const() and lb.base.realized is None and all(v.mask is None for v in lb.st.views):
        return LazyBuffer.full(lb.base.arg, lb.shape, lb.dtype, device)
    return lb.copy_to_device(device)


def _span(shape: tuple[int, ...], axis: int, lo: int, hi: int) -> tuple[tuple[int, int], ...]:
    return tuple((lo, hi) if a == axis else (0, s) for a, s in enumerate(shape))


# --8<-- [start:reshaped-axis]
def reshaped_axis(old: tuple[int, ...], axis: int, sizes: list[int],
                   new: tuple[int, ...]) -> tuple[int, list[int]] | None:
    """Where the sharded axis goes in a reshape, and each device's extent there; None if the
    devices' slices would not stay whole blocks of one axis of the new shape.

    Device i holds, for every index of the axes before `axis`, a block of sizes[i] * inner elements
    (inner: the product of the axes after it). The new shape keeps that if some axis k has the same
    product of axes before it, and each block is a whole number of rows of new[k]'s inner size.
    """
    outer, inner = prod(old[:axis]), prod(old[axis + 1:])
    for k in range(len(new)):
        if prod(new[:k]) != outer or new[k] == 1 and old[axis] != 1:
            continue
        new_inner = prod(new[k + 1:])
        if all(n * inner % new_inner == 0 for n in sizes) and new[k] * new_inner == old[axis] * inner:
            return k, [n * inner // new_inner for n in sizes]
    return None
# --8<-- [end:reshaped-axis]
