"""LazyBuffer: the graph that every Tensor operation builds, and nothing computes until asked.

A LazyBuffer is either
- a *base*: an op (elementwise, reduce or a load), its sources and an argument; the memory it will
  fill is dense, in the shape it has; or
- a *view* of a base: the same memory seen through another ShapeTracker. Movement ops only ever
  make views, so they never copy.

`realize()` hands the graph to the engine, which cuts it into kernels (schedule.py) and runs them
(realize.py); a realized base holds its device Buffer in `.realized`.

The engine is *installed*, not imported: it sits below this file (it imports LazyBuffer), so an
import from here would run the wrong way. realize.py sets `LazyBuffer.engine` when it is imported.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .dtype import DType, dtypes
from .helpers import prod
from .ops import BinaryOps, LoadOps, Op, ReduceOps, TernaryOps, UnaryOps
from .shape import ShapeTracker


def realize(buffers: list["LazyBuffer"]) -> None:
    """Compute these buffers, all in one schedule (so work they share is done once), on the engine
    installed in their class (`LazyBuffer.engine`, below)."""
    todo = [b for b in buffers if b.base.realized is None]
    if todo:
        engine = todo[0].engine
        if engine is None:
            raise RuntimeError(f"no engine installed for {type(todo[0]).__name__}: import the package (which "
                               "installs one), not its lazy.py alone")
        engine.realize(todo)


class LazyBuffer:
    # --8<-- [start:engine]
    #: The seam between the graph and the engine: an object whose `realize(buffers)` schedules the
    #: buffers and runs them. realize.py installs the core's. It is a class attribute, so a subclass
    #: installs its own: the full library's LazyBuffer runs on the full engine (tinyedu/engine/),
    #: and this class keeps running on the core's, in the same process.
    engine: Any = None
    # --8<-- [end:engine]

    def __init__(self, device: str, st: ShapeTracker, dtype: DType, op: Op | None = None, arg: Any = None,
                 srcs: tuple["LazyBuffer", ...] = (), base: "LazyBuffer | None" = None):
        self.device, self.st, self.dtype, self.shape = device, st, dtype, st.shape
        self._base = base
        if base is None:  # a base owns the computation; `realized` is its device Buffer once it ran
            self.op, self.arg, self.srcs = op, arg, srcs
            self.realized: Any = None

    @property
    def base(self) -> "LazyBuffer":
        return self._base if self._base is not None else self

    @property
    def is_view(self) -> bool:
        return self._base is not None

    @property
    def size(self) -> int:
        return prod(self.shape)

    def __repr__(self) -> str:
        what = "realized" if self.base.realized is not None else self.base.op.name
        return f"<LB {self.device} {self.shape} {self.dtype.name} {what}{' view' if self.is_view else ''}>"

    # ---- making nodes ----
    @staticmethod
    def loadop(op: LoadOps, shape: tuple[int, ...], dtype: DType, device: str, arg: Any = None,
               srcs: tuple["LazyBuffer", ...] = ()) -> "LazyBuffer":
        return LazyBuffer(device, ShapeTracker.from_shape(shape), dtype, op, arg, srcs)

    @staticmethod
    def from_numpy(array: np.ndarray, device: str) -> "LazyBuffer":
        """Host data; it is copied into device memory when the graph runs."""
        dtype = dtypes.from_numpy(array.dtype)
        host = np.ascontiguousarray(array, dtype=dtype.np).reshape(array.shape)
        return LazyBuffer.loadop(LoadOps.COPY, host.shape, dtype, device, arg=host)

    @staticmethod
    def full(value: float | int | bool, shape: tuple[int, ...], dtype: DType, device: str) -> "LazyBuffer":
        """One CONST, reshaped and expanded to `shape`: a constant tensor costs no memory at all."""
        one = LazyBuffer.loadop(LoadOps.CONST, (), dtype, device, arg=dtype.np(value).item())
        return one.reshape((1,) * len(shape)).expand(tuple(shape))

    def const(self, value: float | int | bool, shape: tuple[int, ...] | None = None) -> "LazyBuffer":
        return LazyBuffer.full(value, self.shape if shape is None else shape, self.dtype, self.device)

    # --8<-- [start:e]
    def e(self, op: UnaryOps | BinaryOps | TernaryOps, *srcs: "LazyBuffer", arg: Any = None) -> "LazyBuffer":
        """An elementwise op of this buffer and `srcs` (all the same shape): a new base."""
        assert all(s.shape == self.shape for s in srcs), f"{op.name}: shapes {[s.shape for s in srcs]}"
        if op is UnaryOps.CAST:
            dtype = arg
        elif op in (BinaryOps.CMPLT, BinaryOps.CMPEQ):
            dtype = dtypes.bool
        else:  # (WHERE takes the dtype of its values, not of its condition)
            dtype = srcs[0].dtype if op is TernaryOps.WHERE else self.dtype
        return LazyBuffer(self.device, ShapeTracker.from_shape(self.shape), dtype, op, arg, (self, *srcs))

    def r(self, op: ReduceOps, axes: tuple[int, ...]) -> "LazyBuffer":
        """Reduce over `axes`; they keep size 1, so the result still lines up with the input."""
        if not axes:
            return self
        shape = tuple(1 if i in axes else s for i, s in enumerate(self.shape))
        st = ShapeTracker.from_shape(shape)
        return LazyBuffer(self.device, st, self.dtype, op, tuple(sorted(axes)), (self,))
    # --8<-- [end:e]

    def cast(self, dtype: DType) -> "LazyBuffer":
        return self if dtype == self.dtype else self.e(UnaryOps.CAST, arg=dtype)

    def contiguous(self) -> "LazyBuffer":
        """This value in dense memory of its own: a kernel boundary."""
        if not self.is_view and self.realized is not None:
            return self
        return LazyBuffer.loadop(LoadOps.CONTIGUOUS, self.shape, self.dtype, self.device, srcs=(self,))

    # ---- movement: views, never copies ----
    def _view(self, st: ShapeTracker) -> "LazyBuffer":
        if st == self.base.st:
            return self.base
        return LazyBuffer(self.device, st, self.dtype, base=self.base)

    def reshape(self, shape: tuple[int, ...]) -> "LazyBuffer":
        return self if shape == self.shape else self._view(self.st.reshape(shape))

    def permute(self, order: tuple[int, ...]) -> "LazyBuffer":
        return self._view(self.st.permute(order))

    def expand(self, shape: tuple[int, ...]) -> "LazyBuffer":
        return self if shape == self.shape else self._view(self.st.expand(shape))

    def pad(self, padding: tuple[tuple[int, int], ...]) -> "LazyBuffer":
        return self._view(self.st.pad(tuple(padding)))

    def shrink(self, bounds: tuple[tuple[int, int], ...]) -> "LazyBuffer":
        return self._view(self.st.shrink(tuple(bounds)))

    # ---- running it ----
    def realize(self) -> "LazyBuffer":
        realize([self])
        return self

    def numpy(self) -> np.ndarray:
        """The values as a numpy array (a view is first made dense by a kernel)."""
        dense = self if self.st.contiguous and self.size == self.base.size else self.contiguous()
        return dense.realize().base.realized.numpy().reshape(self.shape).copy()
