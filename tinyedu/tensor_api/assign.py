"""assign: write new values into a tensor's memory, in place.

Everything else in tinyedu builds new tensors; assign is the one way to *change* one. It is what
optimizers and BatchNorm's running statistics need: the weight keeps its memory, so the model, any
view of the weight and a captured TinyJit step all see the new values without being told.

Rules (each broken one is a clear error):
- the value has the target's shape, dtype and device (a Python number fills every element);
- the target is a leaf: a tensor that backward() may still need cannot change under it;
- assign is not differentiable (like writing under torch.no_grad()).
The engine computes every value first and writes afterwards (tinyedu/engine/assign.py), and a
computation planned before the write that runs after it is refused rather than silently mixed.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from tinyedu.core.errors import DeviceError, ShapeError
from tinyedu.lazy import engine
from tinyedu.multi.lazy import MultiLazyBuffer
from tinyedu.tensor_api.base import TensorLike


class AssignMixin:
    # --8<-- [start:assign]
    def assign(self: TensorLike, value: Any) -> TensorLike:
        """Write `value` into this tensor's memory (in place) and return this tensor."""
        type(self).assign_all([self], [value])
        return self

    @classmethod
    def assign_all(cls, targets: Sequence[TensorLike], values: Sequence[Any]) -> None:
        """Assign several tensors at once: every value is computed from the *old* contents of all targets
        before any is written (what an optimizer needs: one weight's gradient may read another weight)."""
        if len(targets) != len(values):
            raise ValueError(f"assign_all: {len(targets)} targets but {len(values)} values; give one value "
                             "per target")
        checked = [_checked_value(cls, t, v) for t, v in zip(targets, values, strict=True)]
        for target in targets:
            target.lazydata = target.lazydata.writable()  # memory of its own, if it had none yet
        engine().assign([pair for t, v in zip(targets, checked, strict=True) for pair in
                         (t.lazydata.assign_pairs(v.lazydata) if isinstance(t.lazydata, MultiLazyBuffer)
                          else [(t.lazydata, v.lazydata)])])  # (several devices: a pair per device)
    # --8<-- [end:assign]


def _checked_value(tensor_class: type, target: TensorLike, value: Any) -> TensorLike:
    """`value` as a tensor (of `tensor_class`) that can be written into `target`, or a clear error."""
    if not isinstance(target, tensor_class):
        raise TypeError(f"assign: the target must be a Tensor, got {type(target).__name__}")
    if target._ctx is not None:
        raise RuntimeError(f"assign: this tensor (shape {target.shape}) was computed by an operation that "
                           "backward() may still need; assign into leaf tensors only (parameters, buffers, "
                           "optimizer state), or into .detach() of a new tensor")
    if isinstance(value, (bool, int, float, np.generic)):
        return tensor_class.full(target.shape, value.item() if isinstance(value, np.generic) else value,
                           dtype=target.dtype, device=target.device)
    if isinstance(value, (list, tuple, np.ndarray)):
        value = tensor_class(value, dtype=target.dtype, device=target.device)
    if not isinstance(value, tensor_class):
        raise TypeError(f"assign: the new value must be a Tensor, a number, a list or a numpy array, got "
                        f"{type(value).__name__}")
    if value.shape != target.shape:
        raise ShapeError(f"assign: the new value has shape {value.shape} but the tensor has shape "
                         f"{target.shape}; they must match (assign writes every element once)")
    if value.dtype != target.dtype:
        raise TypeError(f"assign: the new value is {value.dtype.name} but the tensor is {target.dtype.name}; "
                        f"cast it first with .cast({target.dtype})")
    if value.device != target.device:
        raise DeviceError(f"assign: the new value is on {value.device} but the tensor is on {target.device}; "
                          f"move it first with .to({target.device!r})")
    return value
