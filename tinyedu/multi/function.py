"""The two Functions that move a tensor onto several devices and back, so gradients follow.

Shard: one device -> several (cut along an axis, or copied whole); its gradient is gathered back.
Gather: several devices -> one; its gradient is cut again the way the input was.
"""

from __future__ import annotations

from tinyedu.core.function import Function
from tinyedu.lazy import LazyBuffer
from tinyedu.multi.lazy import MultiLazyBuffer, shard_bounds


def place(x: LazyBuffer | MultiLazyBuffer, device: str | tuple[str, ...],
          axis: int | None) -> LazyBuffer | MultiLazyBuffer:
    """`x` on `device` (one name: gathered there) or on several (sharded along `axis`, None:
    replicated), with as few copies as the move allows."""
    if isinstance(device, str):
        return x.copy_to_device(device)
    if isinstance(x, MultiLazyBuffer) and x.device == device:
        if x.axis == axis:
            return x
        if x.axis is None:  # every device has it all: each keeps its own slice (views, no copies)
            return x._cut(axis, shard_bounds(x.shape[axis], len(device)))
        x = x.gathered() if axis is None else x.copy_to_device(device[0])
        if axis is None:
            return x
    if isinstance(x, MultiLazyBuffer):
        x = x.copy_to_device(device[0])
    return MultiLazyBuffer.shard(x, device, axis)


class Shard(Function):
    def forward(self, x: LazyBuffer | MultiLazyBuffer, devices: tuple[str, ...],
                axis: int | None) -> MultiLazyBuffer:
        self.source = (x.device, getattr(x, "axis", None))
        return place(x, devices, axis)

    def backward(self, grad: MultiLazyBuffer) -> LazyBuffer | MultiLazyBuffer:
        return place(grad, *self.source)


class Gather(Function):
    def forward(self, x: MultiLazyBuffer, device: str) -> LazyBuffer:
        self.source = (x.device, x.axis)
        return x.copy_to_device(device)

    def backward(self, grad: LazyBuffer) -> MultiLazyBuffer:
        return place(grad, *self.source)
