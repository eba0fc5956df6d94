"""Running (cumulative) ops along an axis: cumprod, cummax, cummin, logcumsumexp.

Each is a *scan*: out[i] combines x[0], ..., x[i] with an associative op (times, max, log-add-exp).
tinyedu has no loop primitive, so a scan is built from movement ops, like cumsum (reduce.py): pad
n - 1 copies of the op's identity in front, cut n windows of n (window i ends at x[i]) and reduce
each window; n^2 work. Long axes go in blocks of 32: a scan inside each block, a scan of the block
totals (recursively), and each block combined with the total of all blocks before it, so about
32 n work and a graph of log32(n) levels. The gradient is the chain rule through these primitives,
which is exact where a division-based formula is not (a product with zeros in it, for one).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from tinyedu.dtype import dtypes
from tinyedu.tensor_api.reduce import dim_or_axis

if TYPE_CHECKING:
    from tinyedu.tensor import Tensor

Combine = Callable[["Tensor", "Tensor"], "Tensor"]
BLOCK = 32


def scan_last(x: "Tensor", reduce_windows: Callable[["Tensor"], "Tensor"], combine: Combine,
              identity: float | int) -> "Tensor":
    """The inclusive scan of x along its last axis (see the module docstring).

    reduce_windows reduces axis -2 of a (..., n, n) stack of windows; combine(a, b) is the op on
    two broadcastable tensors (a comes first); identity is what padding holds (op(identity, v) = v).
    """
    n = x.shape[-1]
    keep = ((0, 0),) * (x.ndim - 1)
    if n == 0:
        return x
    if n <= BLOCK:
        padded = x.pad(keep + ((n - 1, 0),), value=identity)
        return reduce_windows(padded._windows(n, 1))
    blocks = -(-n // BLOCK)
    tiled = x.pad(keep + ((0, blocks * BLOCK - n),), value=identity).reshape(*x.shape[:-1], blocks, BLOCK)
    inside = scan_last(tiled, reduce_windows, combine, identity)   # a scan within each block
    running = scan_last(inside[..., -1], reduce_windows, combine, identity)  # over block totals
    before = running.pad(keep + ((1, 0),), value=identity)[..., :-1]  # all blocks before this one
    out = combine(before.unsqueeze(-1), inside).reshape(*x.shape[:-1], blocks * BLOCK)
    return out[..., :n]


def _lowest(x: "Tensor") -> float | int:
    """The identity of max: -inf for floats, the smallest value of an integer dtype."""
    return -float("inf") if x.dtype.is_float else int(np.iinfo(x.dtype.np).min)


class ScanMixin:
    def _scan(self, axis: int, op: str, reduce_windows: Callable, combine: Combine,
              identity: float | int) -> "Tensor":
        """scan_last along `axis` (moved last and back); a 0-d tensor is its own scan."""
        if self.ndim == 0:
            self._axis(axis, op)
            return self
        a = self._axis(axis, op)
        x = self.transpose(a, -1)
        return scan_last(x, reduce_windows, combine, identity).transpose(a, -1)

    @dim_or_axis
    def cumprod(self, axis: int = 0, dtype: Any = None) -> "Tensor":
        """Running product: out[i] = x[0] * ... * x[i] (dtype= casts first; bool and uint8 multiply as
        int32). A zero makes every later product 0; the gradient still reaches the elements before it
        and the zero itself, as in PyTorch, because it is the chain rule through multiplies."""
        x = self if dtype is None else self.cast(dtype)
        if dtype is None and x.dtype in (dtypes.bool, dtypes.uint8):
            x = x.int()
        return x._scan(axis, "cumprod", lambda w: w.prod(-2), lambda a, b: a * b, 1)

    @dim_or_axis
    def logcumsumexp(self, axis: int = 0) -> "Tensor":
        """Running log(sum(exp(x))): each window and each join of blocks is a logsumexp, which
        subtracts its max first, so large values do not overflow and -inf counts as exp(-inf) = 0."""
        def log_add_exp(a: "Tensor", b: "Tensor") -> "Tensor":
            return a.expand(b.shape).stack(b, dim=-1).logsumexp(-1)

        return self._float()._scan(axis, "logcumsumexp", lambda w: w.logsumexp(-2), log_add_exp,
                                   -float("inf"))

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
            running = x._scan(a, op, lambda w: w.max(-2), lambda u, v: u.maximum(v), _lowest(x))
            record = x == running
            if x.dtype.is_float:
                record = record | (x != x)
            position = Tensor.arange(n, device=self.device).reshape((n,) + (1,) * (self.ndim - a - 1))
            marked = record.where(position, -1)
            indices = marked._scan(a, op, lambda w: w.max(-2), lambda u, v: u.maximum(v), -1)
        return self._pick_along(indices, a), indices
