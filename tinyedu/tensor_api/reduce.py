"""Reductions. Only SUM and MAX are primitives; min, mean, var, argmax, softmax... are built from them."""

from __future__ import annotations

import functools
from typing import Any, Callable

import tinyedu.core.function as F
import tinyedu.function_math as FM
from tinyedu.core.dtype import dtypes
from tinyedu.core.errors import ShapeError
from tinyedu.core.helpers import prod
from tinyedu.function_template import templated
from tinyedu.tensor_api.base import TensorLike
from tinyedu.tensor_api.grad_mode import count_primitives, no_grad

Axis = int | tuple[int, ...] | list[int] | None


def dim_or_axis(method: Callable) -> Callable:
    """PyTorch calls the reduced axes `dim`, tinygrad `axis`: accept either keyword."""
    @functools.wraps(method)
    def accepting_dim(self: Any, *args: Any, **kwargs: Any) -> Any:
        if "dim" in kwargs:
            if "axis" in kwargs or args:
                raise TypeError(f"{method.__name__}: give the axis once: positionally, as axis= or as dim=")
            kwargs["axis"] = kwargs.pop("dim")
        return method(self, *args, **kwargs)

    return accepting_dim


class ReduceMixin:
    def _reduce_axes(self: TensorLike, axis: Axis, op: str) -> tuple[int, ...]:
        """Normalize `axis` (None = all, an int, or a tuple; negatives count from the end)."""
        if axis is None:
            return tuple(range(self.ndim))
        if not isinstance(axis, (int, tuple, list)):
            raise TypeError(f"{op}: axis must be an int, a tuple of ints or None, got {type(axis).__name__}")
        axes = (axis,) if isinstance(axis, int) else tuple(axis)
        normalized = tuple(self._axis(a, op) for a in axes)
        if len(set(normalized)) != len(normalized):
            raise ShapeError(f"{op}: axis {axis} names the same dimension twice (shape {self.shape})")
        return tuple(a for a in normalized if self.ndim)  # a 0-d tensor has nothing to reduce

    def _reduce(self: TensorLike, function: type[F.Function], axis: Axis, keepdim: bool,
                op: str) -> TensorLike:
        axes = self._reduce_axes(axis, op)
        out = self._apply(function, axes=axes) if axes else self
        if keepdim:
            return out
        # The reduced axes have size 1 now: dropping them is a valid reshape, so the primitive directly,
        # without reshape's checks of a user's shape (a step reduces often)
        shape = tuple(s for i, s in enumerate(self.shape) if i not in axes)
        return out if shape == out.shape else out._apply(F.Reshape, shape=shape)

    @dim_or_axis
    def sum(self: TensorLike, axis: Axis = None, keepdim: bool = False, dtype=None) -> TensorLike:
        """Sum over axes. bool and every int type sum in int64 and give int64, as in PyTorch (an int64
        sum wraps around past 2^63); float16 and bfloat16 accumulate in float32."""
        x = self
        if dtype is not None:
            x = x.cast(dtype)
        elif not x.dtype.is_float:
            x = x.cast(dtypes.int64)
        return x._reduce(F.Sum, axis, keepdim, "sum")

    def _check_not_empty(self: TensorLike, axis: Axis, op: str) -> None:
        for a in self._reduce_axes(axis, op):
            if self.shape[a] == 0:
                raise ValueError(f"{op}: cannot reduce over axis {a} of size 0 (shape {self.shape}); the "
                                 f"{op} of nothing is undefined")

    @dim_or_axis
    def max(self: TensorLike, axis: Axis = None, keepdim: bool = False) -> TensorLike:
        self._check_not_empty(axis, "max")
        return self._reduce(F.Max, axis, keepdim, "max")

    @dim_or_axis
    def amax(self: TensorLike, axis: Axis = None, keepdim: bool = False) -> TensorLike:
        """PyTorch's name for max over axes (max(dim) in PyTorch also returns the indices)."""
        return self.max(axis, keepdim)

    @dim_or_axis
    def amin(self: TensorLike, axis: Axis = None, keepdim: bool = False) -> TensorLike:
        return self.min(axis, keepdim)

    @dim_or_axis
    def min(self: TensorLike, axis: Axis = None, keepdim: bool = False) -> TensorLike:
        """The smallest value: the max of the values in reverse order (see _reversed_order)."""
        self._check_not_empty(axis, "min")
        return self._reversed_order().max(axis, keepdim)._reversed_order()

    def _reversed_order(self: TensorLike) -> TensorLike:
        """A map that reverses the order of the values and is its own inverse, so min(x) is
        r(max(r(x))) and argmin(x) is argmax(r(x)). Floats use -x (NaN stays NaN, -0.0 and 0.0 swap
        back). Integers use ~x, that is -x - 1 for signed and 255 - x for uint8, which never
        overflows: -x does for int32's -2**31. For bools ~x is `not x`."""
        return -self if self.dtype.is_float else ~self

    @dim_or_axis
    def mean(self: TensorLike, axis: Axis = None, keepdim: bool = False) -> TensorLike:
        """The average; integer tensors are averaged as floats. float16 and bfloat16 sum and divide in
        float32 and round once at the end, as PyTorch does (a half sum may pass 65504, the mean not)."""
        x = self if self.dtype in (dtypes.float32, dtypes.float64) else self.float()
        axes = self._reduce_axes(axis, "mean")
        count = 1
        for a in axes:
            count *= self.shape[a]
        total = x.sum(axis, keepdim)
        out = total / count if count else total * float("nan")
        return out.cast(self.dtype) if self.dtype.is_half else out

    # ---- statistics ----
    @dim_or_axis
    def var(self: TensorLike, axis: Axis = None, keepdim: bool = False, correction: int = 1) -> TensorLike:
        """The spread around the mean: sum((x - mean)^2) / (n - correction).

        correction=1 (the default, as in PyTorch) gives the unbiased estimate from a sample;
        correction=0 is the plain average of the squared deviations. n - correction <= 0 gives NaN.
        """
        if not isinstance(correction, (int, float)) or isinstance(correction, bool):
            raise TypeError(f"var: correction must be a number, got {type(correction).__name__}")
        x = self._float()
        n = self._count(axis, "var")
        squares = (x - x.mean(axis, keepdim=True)).square().sum(axis, keepdim)
        return squares / max(n - correction, 0)

    @dim_or_axis
    def std(self: TensorLike, axis: Axis = None, keepdim: bool = False, correction: int = 1) -> TensorLike:
        """The standard deviation: the square root of var (same units as x). Where the spread is 0 the
        gradient is 0, as PyTorch's (the chain rule gives 0 / 0: sqrt's slope there is infinite)."""
        return _std_of(self.var(axis, keepdim, correction))

    @dim_or_axis
    def var_mean(self: TensorLike, axis: Axis = None, keepdim: bool = False, correction: int = 1,
                 unbiased: bool | None = None) -> tuple[TensorLike, TensorLike]:
        """(var, mean) together, as torch.var_mean; unbiased=False is correction=0."""
        correction = correction if unbiased is None else int(unbiased)
        return self.var(axis, keepdim, correction), self._float().mean(axis, keepdim)

    @dim_or_axis
    def std_mean(self: TensorLike, axis: Axis = None, keepdim: bool = False, correction: int = 1,
                 unbiased: bool | None = None) -> tuple[TensorLike, TensorLike]:
        """(std, mean) together, as torch.std_mean; unbiased=False is correction=0."""
        var, mean = self.var_mean(axis, keepdim, correction, unbiased)
        return _std_of(var), mean

    def _count(self: TensorLike, axis: Axis, op: str) -> int:
        """How many elements each reduction over `axis` combines."""
        return prod(self.shape[a] for a in self._reduce_axes(axis, op))

    # ---- which index ----
    @dim_or_axis
    def argmax(self: TensorLike, axis: int | None = None, keepdim: bool = False) -> TensorLike:
        """The index of the largest value (the first one on ties, and NaN counts as largest, like PyTorch).

        With no axis, the index is into the flattened tensor. The trick: mark where x equals its
        max, give position i the score n - i (a countdown), and take the max score: the first
        marked position wins. n - score is its index. All primitives, no loop.
        """
        return self._first_max_index(axis, keepdim, "argmax")

    @dim_or_axis
    def argmin(self: TensorLike, axis: int | None = None, keepdim: bool = False) -> TensorLike:
        """The index of the smallest value (first on ties): the argmax of -x."""
        return self._reversed_order()._first_max_index(axis, keepdim, "argmin")

    def _first_max_index(self: TensorLike, axis: int | None, keepdim: bool, op: str) -> TensorLike:
        if not self.ndim:  # a single value is at index 0
            if axis is not None:
                self._axis(axis, op)  # (only 0 and -1 are valid)
            return type(self)(0, device=self.device)
        if axis is None:
            _check_index_fits(self.numel(), self.shape, op, "the flattened tensor")
            flat = self.reshape(-1)._first_max_index(0, False, op)
            return flat.reshape((1,) * self.ndim) if keepdim else flat
        a = self._axis(axis, op)
        self._check_not_empty(a, op)
        n = self.shape[a]
        _check_index_fits(n, self.shape, op, f"axis {a}")
        is_max = self == self.max(a, keepdim=True)
        if self.dtype.is_float:
            is_max = is_max | (self != self)  # NaN != NaN: NaNs count as the maximum, as in PyTorch
        countdown = type(self).arange(n, 0, -1, device=self.device).reshape((n,) + (1,) * (self.ndim - a - 1))
        return n - is_max.where(countdown, 0).max(a, keepdim)

    # ---- softmax family: subtract the max first so exp never overflows ----
    def _stable_max(self: TensorLike, axis: Axis, op: str, finite: bool = False) -> TensorLike:
        """The max over `axis` (keepdim), detached (0 for an empty axis); with finite=True an infinite
        max is replaced by 0.

        Subtracting any constant c leaves softmax and logsumexp unchanged (it cancels), so c needs no
        gradient; the max makes exp(x - c) <= 1. An infinite max turns x - c into inf - inf = NaN:
        softmax keeps that NaN, as PyTorch does (a row holding inf has no meaningful softmax), while
        logsumexp replaces the max by 0, as PyTorch does, so that logsumexp([inf, 1]) is inf.
        """
        axes = self._reduce_axes(axis, op)
        if any(self.shape[a] == 0 for a in axes):
            return self.zeros_like().sum(axes, keepdim=True)
        m = self.detach().max(axes, keepdim=True)
        return (m.abs() == float("inf")).where(0.0, m) if finite else m

    def _detached_value(self: TensorLike, name: str, axes: tuple[int, ...],
                        value: Callable[[TensorLike], tuple[TensorLike, ...]]) -> tuple[Any, ...]:
        """The LazyBuffers of value(self), built without an autograd graph (softmax and its kin pass
        them to a Function with PyTorch's gradient). Replayed from a template after the first call
        for this kind of input (tinyedu/function_template.py: the same nodes, fewer Python steps),
        except while count_primitives counts: then every primitive is applied, and counted."""
        def build(lazydata: Any) -> tuple[Any, ...]:
            with no_grad():
                return tuple(t.lazydata for t in value(type(self)._wrap(lazydata)))

        if count_primitives.active:
            return build(self.lazydata)
        return templated(name, {"axes": axes}, self.lazydata, build)

    # --8<-- [start:softmax]
    @dim_or_axis
    def softmax(self: TensorLike, axis: int = -1) -> TensorLike:
        """exp(x) / sum(exp(x)) along axis: positive values that sum to 1 (probabilities).

        The value is made of primitives; the gradient is PyTorch's formula s * (g - sum(g * s)),
        with sum(g * s) taken as sum(g * e) / sum(e) (function_math.SoftmaxGrad). The chain rule
        through the division gives the same number up to rounding, but where the true gradient is 0
        it leaves an ulp of noise, which a later op can magnify (divide by 1e-8 and it is 0.4)."""
        x = self._float()
        axes = x._reduce_axes(axis, "softmax")

        def value(x: TensorLike) -> tuple[TensorLike, ...]:
            e = (x - x._stable_max(axis, "softmax")).exp()
            return e / e.sum(axis, keepdim=True), e

        s, e = x._detached_value("softmax", axes, value)
        return x._apply(FM.SoftmaxGrad, value=s, exps=e, axes=axes, log=False)

    # --8<-- [end:softmax]
    @dim_or_axis
    def log_softmax(self: TensorLike, axis: int = -1) -> TensorLike:
        """log(softmax(x)) = x - logsumexp(x), without ever forming the tiny softmax values; the
        gradient is PyTorch's g - softmax(x) * sum(g) (see softmax)."""
        x = self._float()
        axes = x._reduce_axes(axis, "log_softmax")

        def value(x: TensorLike) -> tuple[TensorLike, ...]:
            shifted = x - x._stable_max(axis, "log_softmax")
            e = shifted.exp()
            return shifted - e.sum(axis, keepdim=True).log(), e

        out, e = x._detached_value("log_softmax", axes, value)
        return x._apply(FM.SoftmaxGrad, value=out, exps=e, axes=axes, log=True)

    @dim_or_axis
    def logsumexp(self: TensorLike, axis: Axis = None, keepdim: bool = False) -> TensorLike:
        """log(sum(exp(x))) over axis, computed as m + log(sum(exp(x - m))) with m the max; the
        gradient is PyTorch's exp(x - logsumexp(x)), which never overflows (the chain rule through
        exp(x - m) / sum(...) overflows when m had to be replaced by 0 for an infinite max)."""
        x = self._float()

        def value(x: TensorLike) -> tuple[TensorLike, ...]:
            m = x._stable_max(axis, "logsumexp", finite=True)
            return ((x - m).exp().sum(axis, keepdim=True).log() + m,)

        (out,) = x._detached_value("logsumexp", x._reduce_axes(axis, "logsumexp"), value)
        out = x._apply(FM.LogsumexpGrad, value=out)
        return out if keepdim else out.reshape(self._reduced_shape(axis, "logsumexp"))

    def _reduced_shape(self: TensorLike, axis: Axis, op: str) -> tuple[int, ...]:
        axes = self._reduce_axes(axis, op)
        return tuple(s for i, s in enumerate(self.shape) if i not in axes)

    # ---- truth ----
    @dim_or_axis
    def any(self: TensorLike, axis: Axis = None, keepdim: bool = False) -> TensorLike:
        """True where some element along axis is non-zero (False for an empty axis)."""
        return (self != 0).sum(axis, keepdim) > 0

    @dim_or_axis
    def all(self: TensorLike, axis: Axis = None, keepdim: bool = False) -> TensorLike:
        """True where every element along axis is non-zero (True for an empty axis)."""
        return (self == 0).sum(axis, keepdim) == 0

    def isclose(self: TensorLike, other: TensorLike | float, rtol: float = 1e-5, atol: float = 1e-8,
                equal_nan: bool = False) -> TensorLike:
        """|x - y| <= atol + rtol * |y| elementwise, as torch.isclose: equal values (infinities too)
        are close, an infinity is close to nothing else, NaN to nothing unless equal_nan=True."""
        for name, tol in (("rtol", rtol), ("atol", atol)):
            if not isinstance(tol, (int, float)) or isinstance(tol, bool) or not tol >= 0:
                raise ValueError(f"isclose: {name} must be a number >= 0, got {tol!r}")
        x, y = self._broadcasted(other, "isclose")
        close = x == y
        if x.dtype.is_float:
            if equal_nan:
                close = close | ((x != x) & (y != y))
            error = (x - y).abs()
            finite = error < float("inf")  # False for NaN, and inf - inf is NaN
            return close | (finite & (error <= atol + rtol * y.abs()))
        if rtol or atol:  # integers: the difference in float, as PyTorch
            close = close | ((x.float() - y.float()).abs() <= atol + rtol * y.float().abs())
        return close

    def allclose(self: TensorLike, other: TensorLike | float, rtol: float = 1e-5, atol: float = 1e-8,
                 equal_nan: bool = False) -> bool:
        """True if every element isclose, as torch.allclose."""
        return bool(self.isclose(other, rtol, atol, equal_nan).all().item())

    @dim_or_axis
    def prod(self: TensorLike, axis: Axis = None, keepdim: bool = False, dtype: Any = None) -> TensorLike:
        """The product over axes: pairs multiplied in a tree (log2 n rounds of multiplies); bool and
        every int type multiply in int64 and give int64, and dtype= casts first (as in PyTorch). On
        axes longer than 32 each round is realized, and so is its gradient (contiguous_backward):
        fused, the gradient of a deep tree repeats its work (minutes for 40,000 elements)."""
        x = self if dtype is None else self.cast(dtype)
        x = x if x.dtype.is_float or dtype is not None else x.cast(dtypes.int64)
        axes = self._reduce_axes(axis, "prod")
        for a in axes:
            x = x.transpose(a, -1)
            while x.shape[-1] > 1:
                n = x.shape[-1]
                x = x.pad(((0, 0),) * (x.ndim - 1) + ((0, n % 2),), value=1)
                x = x.reshape(*x.shape[:-1], (n + 1) // 2, 2)
                deep = self.shape[a] > 32
                x = x.contiguous_backward() if deep else x
                x = (x[..., 0] * x[..., 1]).contiguous() if deep else x[..., 0] * x[..., 1]
            if x.shape[-1] == 0:
                x = x.pad(((0, 0),) * (x.ndim - 1) + ((0, 1),), value=1)
            x = x.transpose(a, -1)
        return x if keepdim else x.reshape(tuple(s for i, s in enumerate(x.shape) if i not in axes))


def _check_index_fits(n: int, shape: tuple[int, ...], op: str, where: str) -> None:
    """argmax/argmin give int32 indices (their countdown too): n positions must fit."""
    if n > 2**31 - 1:
        raise ValueError(f"{op}: {where} (shape {shape}) has {n} positions, but an index is an int32 (at "
                         f"most 2^31 - 1); take the {op} of parts (reshape, reduce each row, then combine)")


def _std_of(var: TensorLike) -> TensorLike:
    """sqrt(var), with gradient 0 where var is 0 (PyTorch's std), not the chain rule's 0 / 0."""
    flat = var == 0
    return flat.where(0.0, flat.where(1.0, var).sqrt())
