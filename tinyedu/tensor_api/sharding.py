"""Tensors on several devices: shard a tensor over devices, gather it back (tinyedu/multi).

`x.shard(("C:0", "C:1"), axis=0)` cuts x along axis 0, one slice per device; `axis=None` puts a
whole copy on each (a replica). The result is a Tensor like any other: its ops run slice by slice
on each device and communicate where they must (see tinyedu/multi/lazy.py), and its gradient is
sharded the same way. `x.to("C")` (or `x.unshard("C")`) joins the slices on one device, and
`w.shard_(devices, None)` replicates a model's weight in place (an optimizer's assign then writes
each device's copy).
"""

from __future__ import annotations

from typing import Sequence

from tinyedu.lazy import engine
from tinyedu.multi.function import Gather, Shard
from tinyedu.tensor_api.base import TensorLike


class ShardingMixin:
    def shard(self: TensorLike, devices: Sequence[str], axis: int | None = 0) -> TensorLike:
        """This tensor cut along `axis` over `devices` (None: copied whole onto each)."""
        if isinstance(devices, str) or not devices:
            raise TypeError(f"shard: expected a tuple of device names such as ('C:0', 'C:1'), "
                            f"got {devices!r}")
        devices = engine().canonical_device(tuple(devices))
        if axis is not None:
            axis = self._axis(axis, "shard")
        if self.device == devices and getattr(self.lazydata, "axis", None) == axis:
            return self
        return self._apply(Shard, devices=devices, axis=axis)

    def shard_(self: TensorLike, devices: Sequence[str], axis: int | None = 0) -> TensorLike:
        """Shard this tensor in place (tinygrad's name): a model's weights, which the model and its
        optimizer hold, move to the devices without being replaced."""
        if self._ctx is not None:
            raise RuntimeError("shard_: only a leaf tensor (a weight, an input) can be sharded in place; "
                               "use shard(), which keeps the graph")
        self.lazydata = self.shard(devices, axis).lazydata
        return self

    def unshard(self: TensorLike, device: str | None = None) -> TensorLike:
        """The whole value on one device (default: the first of its devices)."""
        if isinstance(self.device, str):
            return self.to(device) if device is not None else self
        device = engine().canonical_device(device if device is not None else self.device[0])
        return self._apply(Gather, device=device)

    @property
    def shard_axis(self: TensorLike) -> int | None:
        """The axis this tensor is cut along over its devices (None: one device, or replicated)."""
        return getattr(self.lazydata, "axis", None)
