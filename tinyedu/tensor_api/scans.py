"""Running (cumulative) ops along an axis: cumprod, cummax, cummin, logcumsumexp.

Each is a *scan*: out[i] combines x[0], ..., x[i] with an associative op (times, max, log-add-exp).
tinyedu has no loop primitive, so a scan is built from movement ops in log2(n) rounds (Hillis and
Steele): round r combines each element with the one 2^r places before it. After round r each
element holds the combination of the 2^(r+1) elements ending at it, so ceil(log2 n) rounds cover
the whole axis: n log2 n work, one kernel per round (cumsum, in reduce.py, sums windows instead).
The gradient is the chain rule through these primitives, which is exact where a division-based
formula is not (a product with zeros in it, for one).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from tinyedu.dtype import dtypes
from tinyedu.tensor_api.reduce import dim_or_axis

if TYPE_CHECKING:
    from tinyedu.tensor import Tensor

Combine = Callable[["Tensor", "Tensor"], "Tensor"]


def doubling_scan(x: "Tensor", combine: Combine, identity: float | int) -> "Tensor":
    """The inclusive scan of x along its last axis in log2(n) rounds (Hillis and Steele): round r
    combines each element with the one 2^r places before it (identity where there is none). Each
    round is one elementwise kernel; it is realized (contiguous) because the next round reads it
    twice, and fusing the rounds would repeat the work 2^r times. The gradient too is realized at
    each round (contiguous_backward), for the same reason."""
    n, step = x.shape[-1], 1
    while step < n:
        x = x.contiguous_backward()
        before = x.pad(((0, 0),) * (x.ndim - 1) + ((step, 0),), value=identity)[..., :n]
        x = combine(before, x).contiguous()
        step *= 2
    return x


def _lowest(x: "Tensor") -> float | int:
    """The identity of max: -inf for floats, the smallest value of an integer dtype."""
    return -float("inf") if x.dtype.is_float else int(np.iinfo(x.dtype.np).min)


class ScanMixin:
    def _scan(self, axis: int, op: str, combine: Combine, identity: float | int) -> "Tensor":
        """doubling_scan along `axis` (moved last and back); a 0-d tensor is its own scan."""
        if self.ndim == 0:
            self._axis(axis, op)
            return self
        a = self._axis(axis, op)
        return doubling_scan(self.transpose(a, -1), combine, identity).transpose(a, -1)

    @dim_or_axis
    def cumprod(self, axis: int = 0, dtype: Any = None) -> "Tensor":
        """Running product: out[i] = x[0] * ... * x[i] (dtype= casts first; bool and uint8 multiply as
        int32). A zero makes every later product 0; the gradient still reaches the elements before it
        and the zero itself, as in PyTorch, because it is the chain rule through multiplies."""
        x = self if dtype is None else self.cast(dtype)
        if dtype is None and x.dtype in (dtypes.bool, dtypes.uint8):
            x = x.int()
        return x._scan(axis, "cumprod", lambda u, v: u * v, 1)

    @dim_or_axis
    def logcumsumexp(self, axis: int = 0) -> "Tensor":
        """Running log(sum(exp(x))): each combination is a logsumexp of two, which subtracts their
        max first, so large values do not overflow and -inf counts as exp(-inf) = 0."""
        def log_add_exp(a: "Tensor", b: "Tensor") -> "Tensor":
            return a.stack(b, dim=-1).logsumexp(-1)

        return self._float()._scan(axis, "logcumsumexp", log_add_exp, -float("inf"))

    @dim_or_axis
    def cummax(self, axis: int = 0) -> tuple["Tensor", "Tensor"]:
        """(values, indices) of the running max, as PyTorch: NaN is the largest value, and on a tie the
        index is the *last* position with the max. Gradients go to the element at each index."""
        return self._running_extreme(axis, "cummax")

    @dim_or_axis
    def cummin(self, axis: int = 0) -> tuple["Tensor", "Tensor"]:
        """(values, indices) of the running min: cummax of the values in reverse order."""
        return self._running_extreme(axis, "cummin")

    def _running_extreme(self, axis: int, op: str) -> tuple["Tensor", "Tensor"]:
        """Position j is a *record* when x[j] equals the running max there (or is NaN): the index of
        the running max at i is then the last record at or before i, itself a running max (of j at the
        records, -1 elsewhere). The values are x at those indices, so they keep x's exact bits and
        their gradient goes to the chosen element only."""
        from tinyedu.tensor import Tensor, no_grad

        if self.ndim == 0:
            self._axis(axis, op)
            return self, Tensor(0, device=self.device)
        a = self._axis(axis, op)
        n = self.shape[a]
        with no_grad():
            x = self.detach() if op == "cummax" else self.detach()._reversed_order()
            running = x._scan(a, op, lambda u, v: u.maximum(v), _lowest(x))
            record = x == running
            if x.dtype.is_float:
                record = record | (x != x)
            position = Tensor.arange(n, device=self.device).reshape((n,) + (1,) * (self.ndim - a - 1))
            marked = record.where(position, -1)
            indices = marked._scan(a, op, lambda u, v: u.maximum(v), -1)
        return self._pick_along(indices, a), indices
