"""Tensor: PyTorch's names over a lazy graph, with autograd.

A Tensor is a LazyBuffer (`.lazydata`, the value, not computed yet) plus what autograd needs:
`requires_grad`, `.grad`, and `_ctx`, the Function that made it, with `_parents`, its inputs.
Every method here is one primitive Function (function.py) or a short composition of them: that
about twenty primitives and five movement ops carry a whole framework is the point of this file.
Methods make results with `type(self)`, so a subclass gets its own class back.

The full library's Tensor (tinyedu/tensor.py) is a subclass of this one, with the rest of PyTorch's
API (every dtype, indexing, convolutions, ...) as mixins in front of it. It inherits what behaves
the same, and overrides where it adds something; where it adds to a step inside a method, the
method calls a seam that says so in its docstring (`_lazydata_from`, `_broadcasted`, `_wrap`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from . import function as F
from .dtype import DType, dtypes, result_type, scalar_dtype
from .errors import DTypeError
from .helpers import postorder, prod
from .lazy import LazyBuffer

Scalar = float | int | bool


class Tensor:
    default_device = "C"
    _rng = np.random.default_rng(0)
    # What a new tensor starts with: no gradient, no graph. Class attributes, so `_wrap` sets only
    # `lazydata` (an attribute the instance never set reads the class's; setting one gives the
    # instance its own).
    grad: "Tensor | None" = None
    _ctx: "F.Function | None" = None
    _parents: tuple["Tensor", ...] = ()
    requires_grad: bool = False

    def __init__(self, data: Any, device: str | None = None, dtype: DType | None = None,
                 requires_grad: bool = False):
        """A tensor of `data` (a number, nested lists, a numpy array or a LazyBuffer), on `device`, cast
        to `dtype` if one is given (tinyedu.Tensor also takes dtype names such as "float16")."""
        self.lazydata = self._lazydata_from(data, device, dtype)
        if requires_grad:
            self.requires_grad_()

    def _lazydata_from(self, data: Any, device: str | None, dtype: DType | None) -> LazyBuffer:
        """The seam where data becomes a LazyBuffer: numbers, lists and numpy arrays, on `device`
        (default_device when None), in float32, int32 or bool. The full library overrides this to
        take every dtype, several devices, its registry's device names and other Tensors."""
        device = device or self.default_device
        if isinstance(data, LazyBuffer):
            lazydata = data
        elif isinstance(data, (bool, int, float)):
            lazydata = LazyBuffer.full(data, (), dtype or scalar_dtype(data), device)
        elif isinstance(data, (list, tuple, np.ndarray, np.generic)):
            array = np.asarray(data)
            if not isinstance(data, (np.ndarray, np.generic)):  # Python numbers get the default dtypes
                default = {"b": np.bool_, "i": np.int32, "u": np.int32, "f": np.float32}[array.dtype.kind]
                array = array.astype(default)
            lazydata = LazyBuffer.from_numpy(array, device)
        else:
            raise TypeError(f"Tensor: cannot make a tensor from {type(data).__name__}")
        lazydata = lazydata if dtype is None else lazydata.cast(dtype)
        _computed(lazydata.dtype, "Tensor")
        return lazydata

    def requires_grad_(self, requires_grad: bool = True) -> "Tensor":
        """Ask for (or stop asking for) this tensor's gradient; only floats have one (as in PyTorch)."""
        if requires_grad and not self.dtype.is_float:
            raise DTypeError(f"requires_grad: only floating point tensors can require gradients, this one "
                             f"is {self.dtype.name}; cast it first with .float()")
        self.requires_grad = requires_grad
        return self

    @classmethod
    def _wrap(cls, lazydata: LazyBuffer) -> "Tensor":
        """A Tensor over an op's result: what `cls(lazydata)` makes, without __init__'s checks (an op's
        result is a LazyBuffer already, of a dtype that is allowed). A training step makes hundreds."""
        out = cls.__new__(cls)
        out.lazydata = lazydata
        return out

    # ---- what it is, and its values ----
    shape = property(lambda self: self.lazydata.shape)
    dtype = property(lambda self: self.lazydata.dtype)
    device = property(lambda self: self.lazydata.device)
    ndim = property(lambda self: len(self.shape))

    def numel(self) -> int:
        return prod(self.shape)

    def __repr__(self) -> str:
        grad = " with grad" if self.requires_grad else ""
        return f"<Tensor {self.shape} {self.dtype.name} on {self.device}{grad}>"

    def realize(self) -> "Tensor":
        self.lazydata.realize()
        return self

    def numpy(self) -> np.ndarray:
        return self.lazydata.numpy()

    def item(self) -> Scalar:
        return self.numpy().item()

    def tolist(self) -> Any:
        return self.numpy().tolist()

    def detach(self) -> "Tensor":
        return self._wrap(self.lazydata)

    # ---- creation ----
    @classmethod
    def full(cls, shape: tuple[int, ...], value: Scalar, dtype: DType | None = None, **kw: Any) -> "Tensor":
        device = kw.pop("device", None) or Tensor.default_device
        return cls(LazyBuffer.full(value, tuple(shape), dtype or scalar_dtype(value), device), **kw)

    @classmethod
    def zeros(cls, *shape: int, **kw: Any) -> "Tensor":
        return cls.full(_shape(shape), 0.0, **kw)

    @classmethod
    def ones(cls, *shape: int, **kw: Any) -> "Tensor":
        return cls.full(_shape(shape), 1.0, **kw)

    @classmethod
    def arange(cls, stop: int, **kw: Any) -> "Tensor":
        return cls(np.arange(stop, dtype=np.int32), **kw)

    @staticmethod
    def manual_seed(seed: int) -> None:
        Tensor._rng = np.random.default_rng(seed)

    @classmethod
    def rand(cls, *shape: int, **kw: Any) -> "Tensor":
        """Uniform in [0, 1), from numpy's generator (seed it with Tensor.manual_seed)."""
        return cls(Tensor._rng.random(_shape(shape), dtype=np.float32), **kw)

    @classmethod
    def randn(cls, *shape: int, **kw: Any) -> "Tensor":
        return cls(Tensor._rng.standard_normal(_shape(shape), dtype=np.float32), **kw)

    @classmethod
    def uniform(cls, *shape: int, low: float = -1.0, high: float = 1.0, **kw: Any) -> "Tensor":
        return cls(Tensor._rng.uniform(low, high, _shape(shape)).astype(np.float32), **kw)

    # --8<-- [start:autograd]
    def _apply(self, function: type[F.Function], *others: "Tensor", **kwargs: Any) -> "Tensor":
        """Run a Function forward on the LazyBuffers; remember it for backward if an input needs it."""
        inputs = (self, *others)
        ctx = function(tuple(t.requires_grad for t in inputs))
        out = self._wrap(ctx.forward(*[t.lazydata for t in inputs], **kwargs))
        if any(ctx.needs_input_grad) and out.dtype.is_float:  # comparisons and int casts end the graph
            out.requires_grad, out._ctx, out._parents = True, ctx, inputs
        return out

    def backward(self) -> "Tensor":
        """Fill `.grad` of every tensor that requires one, adding to what is there. The chain rule,
        applied in reverse topological order: each node's gradient is complete before it is used."""
        if self.numel() != 1 or not self.requires_grad:
            raise RuntimeError(f"backward: call it on a one-element tensor that requires grad (this one: "
                               f"shape {self.shape}, requires_grad={self.requires_grad})")
        grads = {id(self): self.lazydata.const(1.0)}
        order = postorder([self], lambda t: [p for p in t._parents if p.requires_grad])
        for node in reversed(order):
            grad = grads.pop(id(node), None)
            if grad is None:
                continue
            if node._ctx is None:  # a leaf: accumulate into .grad
                g = self._wrap(grad)
                node.grad = g if node.grad is None else node.grad + g
                continue
            local = node._ctx.backward(grad)
            for parent, g in zip(node._parents, local if isinstance(local, tuple) else (local,), strict=True):
                if g is not None and parent.requires_grad:
                    old = grads.get(id(parent))
                    grads[id(parent)] = g if old is None else old.e(F.BinaryOps.ADD, g)
            node._ctx, node._parents = None, ()  # free the graph
        return self
    # --8<-- [end:autograd]

    # ---- broadcasting: numpy's shapes, PyTorch's dtypes ----
    def _broadcasted(self, other: "Tensor | Scalar", op: str,
                     reverse: bool = False) -> tuple["Tensor", "Tensor"]:
        """Both operands of `op` (named in errors) in one dtype and one shape. The full library
        overrides this: more dtypes to promote, several devices, and short cuts for a training step."""
        if isinstance(other, Tensor):
            if type(other) is not type(self):  # (tinyedu.Tensor is a subclass: its graphs run elsewhere)
                raise TypeError(f"{op}: a {type(self).__module__}.Tensor and a {type(other).__module__}."
                                "Tensor cannot meet in one op; make both with the same Tensor class")
            if other.device != self.device:
                raise ValueError(f"{op}: tensors on {self.device} and {other.device}: move one first (the "
                                 "core's devices do not copy between each other)")
            dtype = result_type((self.dtype, "tensor"), (other.dtype, "tensor"))
        else:
            dtype = result_type((self.dtype, "tensor"), (scalar_dtype(other), "scalar"))
            other = type(self).full((), other, dtype, device=self.device)
        x, y = self.cast(dtype), other.cast(dtype)
        if reverse:
            x, y = y, x
        shape = broadcast_shape(x.shape, y.shape)
        return x._broadcast_to(shape), y._broadcast_to(shape)

    def _broadcast_to(self, shape: tuple[int, ...]) -> "Tensor":
        return self.reshape(_pad1(self.shape, shape)).expand(shape) if self.shape != shape else self

    # ---- elementwise ----
    def cast(self, dtype: DType) -> "Tensor":
        return self if self.dtype == dtype else self._apply(F.Cast, dtype=_computed(dtype, "cast"))

    def float(self) -> "Tensor":
        return self.cast(dtypes.float32)

    def _float(self) -> "Tensor":
        """Math like sqrt or log computes in a float: an int or bool tensor is cast first (PyTorch)."""
        return self if self.dtype.is_float else self.cast(dtypes.default_float)

    def add(self, x: "Tensor | Scalar", reverse: bool = False) -> "Tensor":
        a, b = self._broadcasted(x, "add", reverse)
        return a._apply(F.Add, b)

    def sub(self, x: "Tensor | Scalar", reverse: bool = False) -> "Tensor":
        a, b = self._broadcasted(x, "sub", reverse)
        if a.dtype == dtypes.bool:
            raise DTypeError("sub: subtraction of bool tensors is not defined; use logical ops or cast to "
                             "int")
        return a._apply(F.Sub, b)

    def mul(self, x: "Tensor | Scalar", reverse: bool = False) -> "Tensor":
        a, b = self._broadcasted(x, "mul", reverse)
        return a._apply(F.Mul, b)

    def div(self, x: "Tensor | Scalar", reverse: bool = False) -> "Tensor":
        a, b = self._broadcasted(x, "div", reverse)
        return a._float()._apply(F.Div, b._float())  # true division, as `/` in Python

    def maximum(self, x: "Tensor | Scalar") -> "Tensor":
        a, b = self._broadcasted(x, "maximum")
        return a._apply(F.Maximum, b)

    def lt(self, x: "Tensor | Scalar", reverse: bool = False) -> "Tensor":
        a, b = self._broadcasted(x, "lt", reverse)
        return a._apply(F.Less, b)

    def gt(self, x: "Tensor | Scalar") -> "Tensor":
        return self.lt(x, reverse=True)

    def eq(self, x: "Tensor | Scalar") -> "Tensor":
        a, b = self._broadcasted(x, "eq")
        return a._apply(F.Eq, b)

    def where(self, x: "Tensor | Scalar", y: "Tensor | Scalar") -> "Tensor":
        """x where self is true, else y."""
        x = x if isinstance(x, Tensor) else type(self).full((), x, device=self.device)
        x, y = x._broadcasted(y, "where")
        shape = broadcast_shape(self.shape, x.shape)
        return self.cast(dtypes.bool)._broadcast_to(shape)._apply(F.Where, x._broadcast_to(shape),
                                                                   y._broadcast_to(shape))

    def neg(self) -> "Tensor":
        if self.dtype == dtypes.bool:
            raise DTypeError("neg: negation of a bool tensor is not defined; use logical_not() (or ~)")
        return self._apply(F.Neg)

    def reciprocal(self) -> "Tensor":
        return self._float()._apply(F.Reciprocal)

    def exp(self) -> "Tensor":
        return self.mul(1 / math.log(2))._apply(F.Exp2)

    def log(self) -> "Tensor":
        return self._float()._apply(F.Log2).mul(math.log(2))

    def sqrt(self) -> "Tensor":
        return self._float()._apply(F.Sqrt)

    def relu(self) -> "Tensor":
        """max(x, 0). Maximum splits the gradient of a tie, so at exactly 0 this gives 1/2 where
        PyTorch's relu gives 0 (tinyedu.Tensor.relu has PyTorch's rule)."""
        return self.maximum(0)

    def sigmoid(self) -> "Tensor":
        return (1 + (-self).exp()).reciprocal()

    def square(self) -> "Tensor":
        return self * self

    # Python's operators call the methods by name, so a subclass that overrides `add` changes `+` too.
    def __add__(self, x: "Tensor | Scalar") -> "Tensor": return self.add(x)  # noqa: E704
    def __radd__(self, x: "Tensor | Scalar") -> "Tensor": return self.add(x, reverse=True)  # noqa: E704
    def __sub__(self, x: "Tensor | Scalar") -> "Tensor": return self.sub(x)  # noqa: E704
    def __rsub__(self, x: "Tensor | Scalar") -> "Tensor": return self.sub(x, reverse=True)  # noqa: E704
    def __mul__(self, x: "Tensor | Scalar") -> "Tensor": return self.mul(x)  # noqa: E704
    def __rmul__(self, x: "Tensor | Scalar") -> "Tensor": return self.mul(x, reverse=True)  # noqa: E704
    def __truediv__(self, x: "Tensor | Scalar") -> "Tensor": return self.div(x)  # noqa: E704
    def __rtruediv__(self, x: "Tensor | Scalar") -> "Tensor": return self.div(x, reverse=True)  # noqa: E704
    def __neg__(self) -> "Tensor": return self.neg()  # noqa: E704
    def __matmul__(self, x: "Tensor") -> "Tensor": return self.matmul(x)  # noqa: E704
    def __lt__(self, x: "Tensor | Scalar") -> "Tensor": return self.lt(x)  # noqa: E704
    def __gt__(self, x: "Tensor | Scalar") -> "Tensor": return self.gt(x)  # noqa: E704
    def __eq__(self, x: "Tensor | Scalar") -> "Tensor": return self.eq(x)  # type: ignore[override]  # noqa: E704

    def __hash__(self) -> int:  # (== makes a comparison Tensor, so hash by identity)
        return id(self)

    # ---- reductions ----
    def _reduce(self, function: type[F.Function], axis: int | tuple[int, ...] | None,
                keepdim: bool) -> "Tensor":
        axes = tuple(range(self.ndim)) if axis is None else tuple(self._axis(a) for a in _tuple(axis))
        if self.ndim == 0:
            return self  # (a 0-d tensor is its own sum and max)
        out = self._apply(function, axes=axes)
        return out if keepdim else out.reshape(tuple(s for i, s in enumerate(self.shape) if i not in axes))

    def sum(self, axis: int | tuple[int, ...] | None = None, keepdim: bool = False) -> "Tensor":
        return self._reduce(F.Sum, axis, keepdim)

    def max(self, axis: int | tuple[int, ...] | None = None, keepdim: bool = False) -> "Tensor":
        return self._reduce(F.Max, axis, keepdim)

    def mean(self, axis: int | tuple[int, ...] | None = None, keepdim: bool = False) -> "Tensor":
        out = self.float().sum(axis, keepdim)
        return out / (self.numel() // max(out.numel(), 1))  # (a mean of nothing is 0/0: NaN, as in PyTorch)

    # ---- movement: views ----
    def reshape(self, *shape: int) -> "Tensor":
        shape = _shape(shape)
        if shape.count(-1) > 1 or any(s < -1 for s in shape):
            raise ValueError(f"reshape: {shape} has more than one -1 or a negative size")
        if -1 in shape:
            known = prod(s for s in shape if s != -1)
            shape = tuple(self.numel() // max(known, 1) if s == -1 else s for s in shape)
        if prod(shape) != self.numel():
            raise ValueError(f"reshape: cannot view {self.shape} ({self.numel()} elements) as {shape}")
        return self if shape == self.shape else self._apply(F.Reshape, shape=shape)

    def permute(self, *order: int) -> "Tensor":
        order = tuple(self._axis(a) for a in _shape(order))
        if sorted(order) != list(range(self.ndim)):
            raise ValueError(f"permute: {order} is not an order of the {self.ndim} axes of {self.shape}")
        return self._apply(F.Permute, order=order)

    def expand(self, *shape: int) -> "Tensor":
        shape = _shape(shape)
        pairs = zip(self.shape, shape, strict=False)
        if len(shape) != self.ndim or any(n not in (s, -1) and s != 1 for s, n in pairs):
            raise ValueError(f"expand: {self.shape} cannot be expanded to {shape}: only size-1 axes grow")
        shape = tuple(s if n == -1 else n for s, n in zip(self.shape, shape, strict=True))
        return self if shape == self.shape else self._apply(F.Expand, shape=shape)

    def pad(self, padding: tuple[tuple[int, int], ...]) -> "Tensor":
        if len(padding) != self.ndim or any(lo < 0 or hi < 0 for lo, hi in padding):
            raise ValueError(f"pad: {padding} needs one (before, after) pair of sizes >= 0 per axis of "
                             f"{self.shape}")
        return self._apply(F.Pad, padding=tuple(padding))

    def shrink(self, bounds: tuple[tuple[int, int], ...]) -> "Tensor":
        pairs = zip(bounds, self.shape, strict=False)
        if len(bounds) != self.ndim or any(not 0 <= lo <= hi <= s for (lo, hi), s in pairs):
            raise ValueError(f"shrink: {bounds} needs one (lo, hi) per axis with 0 <= lo <= hi <= size, "
                             f"for a tensor of shape {self.shape}")
        return self._apply(F.Shrink, bounds=tuple(bounds))

    def _axis(self, axis: int) -> int:
        """An axis in range (negative ones count from the end), or a clear error."""
        if not -max(self.ndim, 1) <= axis < max(self.ndim, 1):
            raise IndexError(f"axis {axis} is out of range for a tensor of shape {self.shape}")
        return axis % max(self.ndim, 1)

    def transpose(self, a: int = -2, b: int = -1) -> "Tensor":
        order = list(range(self.ndim))
        order[a], order[b] = order[b], order[a]
        return self.permute(tuple(order))

    def flatten(self, start: int = 0) -> "Tensor":
        return self.reshape(self.shape[:start] + (-1,))

    T = property(lambda self: self.transpose())

    # --8<-- [start:matmul]
    def matmul(self, w: "Tensor") -> "Tensor":
        """(..., n, k) @ (k, m): put k last on both, broadcast to (..., n, m, k), multiply, sum k.
        No matmul kernel is written anywhere: the scheduler fuses the multiply into the sum."""
        if self.ndim < 1 or w.ndim < 2 or self.shape[-1] != w.shape[-2]:
            raise ValueError(f"matmul: shapes {self.shape} and {w.shape} do not line up: "
                             "(..., n, k) @ (..., k, m)")
        x = self.reshape(self.shape[:-1] + (1, self.shape[-1]))            # (..., n, 1, k)
        w = w.reshape(w.shape[:-2] + (1,) * (self.ndim - w.ndim) + w.shape[-2:]).transpose()  # (..., 1, m, k)
        return (x * w).sum(-1)
    # --8<-- [end:matmul]

    dot = matmul

    # ---- the functions a classifier needs ----
    def softmax(self, axis: int = -1) -> "Tensor":
        e = (self - self.max(axis, keepdim=True)).exp()
        return e / e.sum(axis, keepdim=True)

    def log_softmax(self, axis: int = -1) -> "Tensor":
        shifted = self - self.max(axis, keepdim=True)
        return shifted - shifted.exp().sum(axis, keepdim=True).log()

    def cross_entropy(self, labels: "Tensor") -> "Tensor":
        """The mean over the batch of -log softmax at each row's label (labels: integer class indices)."""
        classes = type(self).arange(self.shape[-1], device=self.device)
        one_hot = (labels.reshape(labels.shape + (1,)) == classes).float()
        return -(self.log_softmax() * one_hot).sum() / labels.numel()


def _computed(dtype: DType, op: str) -> DType:
    """`dtype`, if the core computes it: float32, int32 and bool (indices and comparisons need those)."""
    if dtype not in (dtypes.float32, dtypes.int32, dtypes.bool):
        raise TypeError(f"{op}: the core computes float32, int32 and bool, not {dtype.name}; convert the "
                        "data (e.g. array.astype(np.float32)), or use tinyedu.Tensor, which has every dtype")
    return dtype


def _tuple(x: Any) -> tuple:
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def _shape(args: tuple) -> tuple[int, ...]:
    """Both f(2, 3) and f((2, 3)), as PyTorch takes shapes."""
    return tuple(args[0]) if len(args) == 1 and isinstance(args[0], (tuple, list)) else tuple(args)


def broadcast_shape(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    """numpy's rule: line the shapes up at the right; each pair of sizes is equal, or one of them is 1."""
    a, b = _pad1(a, b), _pad1(b, a)
    if any(x != y and 1 not in (x, y) for x, y in zip(a, b, strict=True)):
        raise ValueError(f"shapes {a} and {b} cannot be broadcast together")
    return tuple(max(x, y) if 0 not in (x, y) else 0 for x, y in zip(a, b, strict=True))


def _pad1(shape: tuple[int, ...], like: tuple[int, ...]) -> tuple[int, ...]:
    """`shape` with 1s in front, to as many dims as `like` (numpy lines shapes up at the right)."""
    return (1,) * (len(like) - len(shape)) + tuple(shape)
