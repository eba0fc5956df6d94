"""Reductions. Only SUM and MAX are primitives; min, mean, var, softmax... are built from them."""

from __future__ import annotations

from typing import TYPE_CHECKING

import tinyedu.function as F
from tinyedu.dtype import dtypes

if TYPE_CHECKING:
    from tinyedu.tensor import Tensor

Axis = int | tuple[int, ...] | list[int] | None


class ReduceMixin:
    def _reduce_axes(self, axis: Axis, op: str) -> tuple[int, ...]:
        """Normalize `axis` (None = all, an int, or a tuple; negatives count from the end)."""
        if axis is None:
            return tuple(range(self.ndim))
        axes = (axis,) if isinstance(axis, int) else tuple(axis)
        normalized = tuple(self._axis(a, op) for a in axes)
        if len(set(normalized)) != len(normalized):
            raise ValueError(f"{op}: axis {axis} names the same dimension twice (shape {self.shape})")
        return tuple(a for a in normalized if self.ndim)  # a 0-d tensor has nothing to reduce

    def _reduce(self, function: type[F.Function], axis: Axis, keepdim: bool, op: str) -> "Tensor":
        axes = self._reduce_axes(axis, op)
        out = self._apply(function, axes=axes) if axes else self
        if keepdim:
            return out
        return out.reshape(tuple(s for i, s in enumerate(self.shape) if i not in axes))

    def sum(self, axis: Axis = None, keepdim: bool = False, dtype=None) -> "Tensor":
        """Sum over axes. bool and uint8 sum as int32 (PyTorch would use int64, which tinyedu lacks)."""
        x = self
        if dtype is not None:
            x = x.cast(dtype)
        elif x.dtype in (dtypes.bool, dtypes.uint8):
            x = x.cast(dtypes.int32)
        return x._reduce(F.Sum, axis, keepdim, "sum")

    def max(self, axis: Axis = None, keepdim: bool = False) -> "Tensor":
        for a in self._reduce_axes(axis, "max"):
            if self.shape[a] == 0:
                raise ValueError(f"max: cannot reduce over axis {a} of size 0 (shape {self.shape}); the max of "
                                 "nothing is undefined")
        return self._reduce(F.Max, axis, keepdim, "max")

    def min(self, axis: Axis = None, keepdim: bool = False) -> "Tensor":
        # min(x) = -max(-x). bool and uint8 have no negation, so they take the detour through int32
        # (int32 itself overflows only for -2**31, whose negation does not exist).
        x = self if self.dtype in (dtypes.float32, dtypes.int32) else self.cast(dtypes.int32)
        return (-((-x).max(axis, keepdim))).cast(self.dtype)

    def mean(self, axis: Axis = None, keepdim: bool = False) -> "Tensor":
        """The average; integer tensors are averaged as floats."""
        x = self if self.dtype.is_float else self.float()
        axes = self._reduce_axes(axis, "mean")
        count = 1
        for a in axes:
            count *= self.shape[a]
        total = x.sum(axis, keepdim)
        return total / count if count else total * float("nan")
