"""What every part of Tensor shares: the type of `self` in the mixins, and numpy's broadcasting rule.

Tensor (tinyedu/tensor.py) is built from the mixins in this package, so the imports go one way:
tensor.py imports the mixins, and the mixins import only this module (and grad_mode.py) from the
tensor layer. A mixin never names Tensor: it makes new tensors with `type(self)(...)` or a class
method reached through self (`type(self).arange(...)`), and asks "is x a tensor?" with
`isinstance(x, type(self))`.

`TensorLike` is the type of `self` in the mixins, so that a reader (and an editor) sees what a
mixin may rely on: the state and the core methods that tensor.py defines, and the three methods of
other mixins that nearly every recipe calls. The mixins call each other's methods too (`self.sum`,
`self.where`...): they are all on Tensor, which composes every mixin; they are not repeated here.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from tinyedu.core.dtype import DType
from tinyedu.core.errors import ShapeError
from tinyedu.core.function import Function
from tinyedu.lazy import LazyBuffer

Scalar = float | int | bool
Operand = Any  # a Tensor or a Python number


class TensorLike(Protocol):
    """The part of Tensor that the mixins build on (tinyedu/tensor.py and the core's Tensor it
    subclasses define all of it but `cast` and `reshape`, which are elementwise.py's and
    movement.py's)."""

    lazydata: LazyBuffer
    grad: TensorLike | None
    requires_grad: bool
    _ctx: Function | None

    def __init__(self, data: Any, device: str | None = None, dtype: DType | str | type | None = None,
                 requires_grad: bool | None = None) -> None: ...

    # ---- what it is, and its values ----
    @property
    def shape(self) -> tuple[int, ...]: ...

    @property
    def dtype(self) -> DType: ...

    @property
    def device(self) -> str: ...

    @property
    def ndim(self) -> int: ...

    def numel(self) -> int: ...

    def numpy(self) -> np.ndarray: ...

    def item(self) -> Scalar: ...

    def detach(self) -> TensorLike: ...

    # ---- the core: apply a primitive Function, broadcast two operands, check an axis ----
    def _apply(self, function: type[Function], *others: TensorLike, **kwargs: Any) -> TensorLike: ...

    def _broadcasted(self, other: Operand, op: str, reverse: bool = False,
                     match_dtype: bool = True) -> tuple[TensorLike, TensorLike]: ...

    def _broadcast_to(self, shape: tuple[int, ...]) -> TensorLike: ...

    def _to_tensor(self, x: Operand, dtype: DType) -> TensorLike: ...

    def _axis(self, axis: int, op: str, ndim: int | None = None) -> int: ...

    # ---- from the mixins, used by nearly all of them ----
    def cast(self, dtype: Any) -> TensorLike: ...

    def _float(self) -> TensorLike: ...

    def reshape(self, *shape: Any, **kwargs: Any) -> TensorLike: ...


def broadcast_shape(*shapes: tuple[int, ...], op: str = "broadcast") -> tuple[int, ...]:
    """numpy broadcasting: align on the right; each axis must match or be 1."""
    if len(shapes) == 2 and shapes[0] == shapes[1] and type(shapes[0]) is tuple:
        return shapes[0]  # the usual case (x + y of one shape), answered first
    ndim = max(len(s) for s in shapes)
    padded = [(1,) * (ndim - len(s)) + tuple(s) for s in shapes]
    out = []
    for sizes in zip(*padded, strict=True):
        real = {s for s in sizes if s != 1}
        if len(real) > 1:
            listed = " and ".join(str(tuple(s)) for s in shapes)
            raise ShapeError(f"{op}: shapes {listed} cannot be broadcast "
                             "together; each axis (aligned from the right) must be equal or 1")
        out.append(real.pop() if real else 1)
    return tuple(out)
