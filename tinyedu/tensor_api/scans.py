"""Running (cumulative) ops along an axis: cumsum, cumprod, cummax, cummin, logcumsumexp.

Each is a *scan*: out[i] combines x[0], ..., x[i] with an associative op (times, max, log-add-exp).
tinyedu has no loop primitive, so a scan is built from movement ops in log2(n) rounds (Hillis and
Steele): round r combines each element with the one 2^r places before it. After round r each
element holds the combination of the 2^(r+1) elements ending at it, so ceil(log2 n) rounds cover
the whole axis: n log2 n work, one kernel per round (cumsum sums windows instead, in blocks).
The gradient is the chain rule through these primitives, which is exact where a division-based
formula is not (a product with zeros in it, for one).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

import tinyedu.function_select as FS
from tinyedu.core.dtype import dtypes
from tinyedu.tensor_api.base import TensorLike
from tinyedu.tensor_api.grad_mode import no_grad
from tinyedu.tensor_api.reduce import dim_or_axis

Combine = Callable[[TensorLike, TensorLike], TensorLike]


def doubling_scan(x: TensorLike, combine: Combine, identity: float | int) -> TensorLike:
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


def _log_add_exp(a: TensorLike, b: TensorLike) -> TensorLike:
    return a.stack(b, dim=-1).logsumexp(-1)


def _logcumsumexp_gradient(x: TensorLike, out: TensorLike, grad: Any, axis: int) -> TensorLike:
    """d/dx[j] of sum_k g[k] out[k] is sum over k >= j of g[k] exp(x[j] - out[k]): in the log domain,
    a logcumsumexp from the end of log|g| - out, plus x, exponentiated; the positive and the negative
    gradients separately (PyTorch's formula)."""
    with no_grad():
        g = type(x)(grad, device=x.device)
        log_g = g.abs().log()

        def part(sign: TensorLike) -> TensorLike:
            logs = (sign.where(log_g, -float("inf")) - out).flip(axis)
            return (logs._scan(axis, "logcumsumexp", _log_add_exp, -float("inf")).flip(axis) + x).exp()

        return part(g > 0) - part(g < 0)


def _extreme(x: TensorLike, lowest: bool) -> float | int:
    """The identity of max (lowest=True) or min: +-inf for floats, the ends of an integer dtype."""
    if x.dtype.is_float:
        return -float("inf") if lowest else float("inf")
    info = np.iinfo(x.dtype.np)
    return int(info.min if lowest else info.max)


class ScanMixin:
    def _scan(self: TensorLike, axis: int, op: str, combine: Combine, identity: float | int) -> TensorLike:
        """doubling_scan along `axis` (moved last and back); a 0-d tensor is its own scan."""
        if self.ndim == 0:
            self._axis(axis, op)
            return self
        a = self._axis(axis, op)
        return doubling_scan(self.transpose(a, -1), combine, identity).transpose(a, -1)

    # ---- running sums ----
    @dim_or_axis
    def cumsum(self: TensorLike, axis: int = 0) -> TensorLike:
        """Running sum along an axis: out[i] = x[0] + ... + x[i]. bool and ints sum as int64 (as sum does).

        With movement ops only: pad n-1 zeros in front and cut windows of n (out[i] is the sum of
        window i), which costs n^2 additions. Long axes go in blocks of 32: a running sum inside
        each block, plus the running sum of the block totals (recursively), so about 32 n.
        """
        if self.ndim == 0:
            self._axis(axis, "cumsum")
            return self.sum()
        a = self._axis(axis, "cumsum")
        x = self if self.dtype.is_float else self.cast(dtypes.int64)
        return x.transpose(a, -1)._cumsum_last().transpose(a, -1)

    def _cumsum_last(self: TensorLike, block: int = 32) -> TensorLike:
        n = self.shape[-1]
        if n <= block:
            padded = self.pad(((0, 0),) * (self.ndim - 1) + ((n - 1, 0),)) if n else self
            return padded._windows(n, 1).sum(-2) if n else self
        blocks = -(-n // block)
        x = self.pad(((0, 0),) * (self.ndim - 1) + ((0, blocks * block - n),))
        x = x.reshape(*self.shape[:-1], blocks, block)
        inside = x._cumsum_last(block)                       # running sum within each block
        totals = inside[..., -1]                              # (..., blocks)
        before = totals._cumsum_last(block) - totals          # what all earlier blocks add up to
        out = (inside + before.unsqueeze(-1)).reshape(*self.shape[:-1], blocks * block)
        return out[..., :n]

    @dim_or_axis
    def cumprod(self: TensorLike, axis: int = 0, dtype: Any = None) -> TensorLike:
        """Running product: out[i] = x[0] * ... * x[i] (dtype= casts first; bool and uint8 multiply as
        int32). A zero makes every later product 0; the gradient still reaches the elements before it
        and the zero itself, as in PyTorch, because it is the chain rule through multiplies."""
        x = self if dtype is None else self.cast(dtype)
        if dtype is None and x.dtype in (dtypes.bool, dtypes.uint8):
            x = x.int()
        return x._scan(axis, "cumprod", lambda u, v: u * v, 1)

    @dim_or_axis
    def logcumsumexp(self: TensorLike, axis: int = 0) -> TensorLike:
        """Running log(sum(exp(x))): each combination is a logsumexp of two, which subtracts their
        max first, so large values do not overflow and -inf counts as exp(-inf) = 0. The gradient is
        PyTorch's formula (_logcumsumexp_gradient)."""
        x = self._float()
        a = self._axis(axis, "logcumsumexp")
        if self.ndim == 0:  # one element: its own log(exp(x))
            return x
        with no_grad():
            out = x.detach()._scan(a, "logcumsumexp", _log_add_exp, -float("inf"))
        return x._apply(FS.GivenGradient, out,
                        gradient=lambda g: _logcumsumexp_gradient(x.detach(), out, g, a).lazydata)

    @dim_or_axis
    def cummax(self: TensorLike, axis: int = 0) -> tuple[TensorLike, TensorLike]:
        """(values, indices) of the running max, as PyTorch: NaN is the largest value, and on a tie the
        index is the *last* position with the max. Gradients go to the element at each index."""
        return self._running_extreme(axis, "cummax")

    @dim_or_axis
    def cummin(self: TensorLike, axis: int = 0) -> tuple[TensorLike, TensorLike]:
        """(values, indices) of the running min: cummax of the values in reverse order."""
        return self._running_extreme(axis, "cummin")

    def _running_extreme(self: TensorLike, axis: int, op: str) -> tuple[TensorLike, TensorLike]:
        """The values are a scan that keeps the later of two elements unless the earlier one is
        strictly more extreme (a NaN stays until the next NaN). It is a `where`, so every value keeps
        its bits and the whole gradient goes to the element chosen (Maximum would split it on a tie).
        Position j is a *record* when x[j] is the running extreme there (or NaN); the index at i is
        the last record at or before i: a running max of j at the records, -1 elsewhere."""
        if self.ndim == 0:
            self._axis(axis, op)
            return self, type(self)(0, device=self.device)
        if self.dtype == dtypes.bool:
            values, indices = self.int()._running_extreme(axis, op)
            return values.cast(dtypes.bool), indices
        a = self._axis(axis, op)

        def later_unless_beaten(earlier: TensorLike, later: TensorLike) -> TensorLike:
            keep_later = (later >= earlier) if op == "cummax" else (later <= earlier)
            if later.dtype.is_float:
                keep_later = keep_later | (later != later)
            return keep_later.where(later, earlier)

        values = self._scan(a, op, later_unless_beaten, _extreme(self, lowest=op == "cummax"))
        with no_grad():
            record = self == values.detach()
            if self.dtype.is_float:
                record = record | (self != self)
            n = self.shape[a]
            position = type(self).arange(n, device=self.device).reshape((n,) + (1,) * (self.ndim - a - 1))
            indices = record.where(position, -1)._scan(a, op, lambda u, v: u.maximum(v), -1)
        return values, indices
