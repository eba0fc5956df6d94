"""Fused attention: softmax(q kᵀ · scale + mask) v without ever holding the T × T score matrix.

The textbook attention (tinyedu/models/transformer.py) computes every query · every key at once: a
(..., Tq, Tk) matrix of scores, its softmax, then a product with v. At T = 4096 that is 16 million
numbers per head, written and read again several times. FlashAttention's observation: softmax can
be computed *online*, over the keys a block at a time, by keeping three running values per query

    m   the largest score seen so far      (..., Tq, 1)
    l   the sum of exp(score - m)          (..., Tq, 1)
    o   the sum of exp(score - m) · v      (..., Tq, d)

and rescaling them by exp(m_old - m_new) whenever a block raises the max. After the last block
o / l is the attention output, and m + log(l) (the logsumexp of each row of scores) is all the
backward pass needs to rebuild any block of the softmax exactly: p = exp(score - logsumexp).

Each block step is ordinary LazyBuffer ops (a matmul as a broadcast multiply and a sum, a max, an
exp), so the scheduler fuses and every device runs it; the largest buffer is (..., Tq, B) for a
block of B keys. The loop over blocks is Python's: one kernel sequence per block.
"""

from __future__ import annotations

import math

import numpy as np

from tinyedu.expr import Expr
from tinyedu.function import Function
from tinyedu.lazy import LazyBuffer
from tinyedu.ops import BinaryOps, ReduceOps, TernaryOps


# ---- a small vocabulary of (..., rows, cols) matrices on LazyBuffers ----
def matmul(a: LazyBuffer, b: LazyBuffer) -> LazyBuffer:
    """(..., n, k) @ (..., k, m): a as (..., n, 1, k) times bᵀ as (..., 1, m, k), summed over k."""
    *batch, n, k = a.shape
    m = b.shape[-1]
    left = a.reshape((*batch, n, 1, k)).expand((*batch, n, m, k))
    right = transpose(b).reshape((*batch, 1, m, k)).expand((*batch, n, m, k))
    return left.e(BinaryOps.MUL, right).r(ReduceOps.SUM, (len(batch) + 2,)).reshape((*batch, n, m))


def transpose(x: LazyBuffer) -> LazyBuffer:
    order = tuple(range(len(x.shape) - 2)) + (len(x.shape) - 1, len(x.shape) - 2)
    return x.permute(order)


def row(x: LazyBuffer, op: ReduceOps) -> LazyBuffer:
    """The sum or max of each row: (..., n, m) -> (..., n, 1)."""
    return x.r(op, (len(x.shape) - 1,))


def keys(x: LazyBuffer, start: int, stop: int) -> LazyBuffer:
    """Rows start..stop of a (..., T, d) buffer: one block of keys (or values, or their gradients)."""
    return x.shrink(tuple((0, s) for s in x.shape[:-2]) + ((start, stop), (0, x.shape[-1])))


def wide(x: LazyBuffer, cols: int) -> LazyBuffer:
    """A (..., n, 1) column repeated `cols` times: (..., n, cols)."""
    return x.expand((*x.shape[:-1], cols))


# --8<-- [start:scores]
def block_scores(q: LazyBuffer, k: LazyBuffer, start: int, stop: int, scale: float,
                 causal: bool) -> LazyBuffer:
    """q kᵀ · scale for keys start..stop: (..., Tq, B). With `causal`, query i sees key j only when
    j <= i: the others score -inf, so exp makes their weight exactly 0."""
    scores = Expr(matmul(q, transpose(keys(k, start, stop)))) * scale
    if not causal:
        return scores.lazydata
    tq, width = q.shape[-2], stop - start
    query = LazyBuffer.from_numpy(np.arange(tq, dtype=np.int32).reshape(tq, 1), q.device)
    key = LazyBuffer.from_numpy(np.arange(start, stop, dtype=np.int32).reshape(1, width), q.device)
    shape = scores.lazydata.shape
    sees = query.reshape((1,) * (len(shape) - 2) + (tq, 1)).expand(shape).e(
        BinaryOps.CMPLT, key.reshape((1,) * (len(shape) - 2) + (1, width)).expand(shape))
    hidden = LazyBuffer.full(-math.inf, shape, scores.lazydata.dtype, q.device)
    return sees.e(TernaryOps.WHERE, hidden, scores.lazydata)  # query < key: hidden
# --8<-- [end:scores]


def blocks(length: int, size: int) -> list[tuple[int, int]]:
    """(start, stop) of each block of `size` positions; the last one may be shorter."""
    return [(start, min(start + size, length)) for start in range(0, length, size)]


class FlashAttention(Function):
    """Attention over (..., T, d) q, k, v, computed a block of keys at a time (see the module's
    docstring); backward recomputes each block's softmax from the saved logsumexp (FlashAttention-2),
    so neither pass stores a (..., Tq, Tk) buffer."""

    # --8<-- [start:forward]
    def forward(self, q: LazyBuffer, k: LazyBuffer, v: LazyBuffer, scale: float, causal: bool,
                block: int) -> LazyBuffer:
        self.q, self.k, self.v, self.scale, self.causal, self.block = q, k, v, scale, causal, block
        rows = (*q.shape[:-1], 1)
        m = LazyBuffer.full(-math.inf, rows, q.dtype, q.device)   # the running max of each row
        total = LazyBuffer.full(0.0, rows, q.dtype, q.device)     # the running sum of exp(s - m)
        out = LazyBuffer.full(0.0, (*q.shape[:-1], v.shape[-1]), q.dtype, q.device)  # and of exp(s - m) v
        for start, stop in blocks(k.shape[-2], block):
            s = block_scores(q, k, start, stop, scale, causal)
            m_new = Expr(m).max(Expr(row(s, ReduceOps.MAX)))
            p = (Expr(s) - Expr(wide(m_new.lazydata, stop - start))).exp()
            shrink = (Expr(m) - m_new).exp()  # how much the old max overestimated: exp(-inf) = 0 at first
            total = (Expr(total) * shrink + Expr(row(p.lazydata, ReduceOps.SUM))).lazydata
            pv = matmul(p.lazydata, keys(v, start, stop))
            out = (Expr(out) * Expr(wide(shrink.lazydata, out.shape[-1])) + Expr(pv)).lazydata
            m = m_new.lazydata
        self.out = (Expr(out) / Expr(wide(total, out.shape[-1]))).lazydata
        self.logsumexp = (Expr(m) + Expr(total).log()).lazydata  # (..., Tq, 1)
        return self.out
    # --8<-- [end:forward]

    # --8<-- [start:backward]
    def backward(self, grad: LazyBuffer) -> tuple[LazyBuffer | None, ...]:
        """With p = softmax(s) rebuilt per block: dv = pᵀ g, dp = g vᵀ, ds = p (dp - rowsum(g o)),
        dq = ds k · scale, dk = dsᵀ q · scale. rowsum(g o) equals rowsum(p dp) (it is Σ_j p_j dp_j),
        and needs no block at all."""
        q, k, v, scale = self.q, self.k, self.v, self.scale
        g = grad
        delta = row(g.e(BinaryOps.MUL, self.out), ReduceOps.SUM)  # (..., Tq, 1)
        dq, dks, dvs = None, [], []
        for start, stop in blocks(k.shape[-2], self.block):
            width = stop - start
            s = block_scores(q, k, start, stop, scale, self.causal)
            p = (Expr(s) - Expr(wide(self.logsumexp, width))).exp().lazydata
            dvs.append(matmul(transpose(p), g))
            dp = matmul(g, transpose(keys(v, start, stop)))
            ds = (Expr(p) * (Expr(dp) - Expr(wide(delta, width))) * scale).lazydata
            step = matmul(ds, keys(k, start, stop))
            dq = step if dq is None else dq.e(BinaryOps.ADD, step)
            dks.append(matmul(transpose(ds), q))
        return (dq if self.needs_input_grad[0] else None,
                stack_blocks(dks, k.shape[-2]) if self.needs_input_grad[1] else None,
                stack_blocks(dvs, v.shape[-2]) if self.needs_input_grad[2] else None)
    # --8<-- [end:backward]


def stack_blocks(parts: list[LazyBuffer], length: int) -> LazyBuffer:
    """The blocks' gradients (..., B, d) one after another along the rows: each padded with zeros to
    its place in (..., length, d), then summed (a concatenation made of pads and adds)."""
    out, start = None, 0
    for part in parts:
        stop = start + part.shape[-2]
        padded = part.pad(tuple((0, 0) for _ in part.shape[:-2]) + ((start, length - stop), (0, 0)))
        out = padded if out is None else out.e(BinaryOps.ADD, padded)
        start = stop
    return out
