"""Fused attention: softmax(q kᵀ · scale) v, causal or not, without ever holding the T × T scores.

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
block of B keys. The loop over blocks is Python's: one kernel sequence per block, and since a
block's offset is part of its kernels' index expressions, each block's kernels are compiled once
(the compile cache keeps them for the next run).
"""

from __future__ import annotations

import math

import numpy as np

from tinyedu.core.function import Function
from tinyedu.core.ops import BinaryOps, ReduceOps, TernaryOps
from tinyedu.expr import Expr
from tinyedu.lazy import LazyBuffer


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


def column(x: LazyBuffer, start: int, stop: int) -> LazyBuffer:
    """Columns start..stop of a (..., n, m) buffer."""
    return x.shrink(tuple((0, s) for s in x.shape[:-1]) + ((start, stop),))


def side_by_side(a: LazyBuffer, b: LazyBuffer) -> LazyBuffer:
    """(..., n, i) and (..., n, j) -> (..., n, i + j): the columns of a, then those of b."""
    edge = tuple((0, 0) for _ in a.shape[:-1])
    left, right = a.shape[-1], b.shape[-1]
    return a.pad(edge + ((0, right),)).e(BinaryOps.ADD, b.pad(edge + ((left, 0),)))


def wide(x: LazyBuffer, cols: int) -> LazyBuffer:
    """A (..., n, 1) column repeated `cols` times: (..., n, cols)."""
    return x.expand((*x.shape[:-1], cols))


# --8<-- [start:scores]
def block_scores(q: LazyBuffer, k: LazyBuffer, start: int, stop: int, scale: float, causal: bool,
                 first: int = 0, again: bool = False) -> LazyBuffer:
    """q kᵀ · scale for keys start..stop, q being the queries from row `first` on: (..., rows, B).
    With `causal`, query i sees key j only when j <= i: the others score -inf, so exp makes their
    weight exactly 0.

    again (the backward pass): computed as (k qᵀ)ᵀ, the same products summed in the same order, so
    the same numbers, but a different node of the lazy graph. The graph shares identical nodes, and
    the forward's q kᵀ would otherwise be kept, block after block, until the backward reads it."""
    block = keys(k, start, stop)
    product = transpose(matmul(block, transpose(q))) if again else matmul(q, transpose(block))
    scores = Expr(product) * scale
    if not causal:
        return scores.lazydata
    tq, width = q.shape[-2], stop - start
    query = LazyBuffer.from_numpy(np.arange(first, first + tq, dtype=np.int32).reshape(tq, 1), q.device)
    key = LazyBuffer.from_numpy(np.arange(start, stop, dtype=np.int32).reshape(1, width), q.device)
    shape = scores.lazydata.shape
    sees = query.reshape((1,) * (len(shape) - 2) + (tq, 1)).expand(shape).e(
        BinaryOps.CMPLT, key.reshape((1,) * (len(shape) - 2) + (1, width)).expand(shape))
    hidden = LazyBuffer.full(-math.inf, shape, scores.lazydata.dtype, q.device)
    return sees.e(TernaryOps.WHERE, hidden, scores.lazydata)  # query < key: hidden
# --8<-- [end:scores]


def running(acc: LazyBuffer) -> tuple[LazyBuffer, LazyBuffer, LazyBuffer]:
    """The forward's running values, kept side by side in one (..., Tq, dv + 2) buffer: out, sum, max."""
    width = acc.shape[-1] - 2
    return column(acc, 0, width), column(acc, width, width + 1), column(acc, width + 1, width + 2)


def blocks(length: int, size: int, queries: int, causal: bool) -> list[tuple[int, int, int]]:
    """(start, stop, first) of each block of `size` keys (the last one may be shorter), with `first`
    the first query that sees any of them. Causal, query i sees keys 0..i: the queries before the
    block's first key see none of it, so they skip the block (their running values do not change),
    and a block past the last query is skipped whole. That halves the work of causal attention."""
    starts = range(0, length, size)
    return [(start, min(start + size, length), start if causal else 0) for start in starts
            if not causal or start < queries]


class FlashAttention(Function):
    """Attention over (..., T, d) q, k, v, computed a block of keys at a time (see the module's
    docstring); backward recomputes each block's softmax from the saved logsumexp (FlashAttention-2),
    so neither pass stores a (..., Tq, Tk) buffer."""

    # --8<-- [start:forward]
    def forward(self, q: LazyBuffer, k: LazyBuffer, v: LazyBuffer, scale: float, causal: bool,
                block: int) -> LazyBuffer:
        self.q, self.k, self.v, self.scale, self.causal, self.block = q, k, v, scale, causal, block
        width = v.shape[-1]
        # One buffer of running values per query row: [sum of exp(s - m) v | sum of exp(s - m) | m],
        # stored once per block. Keeping all three in one buffer makes the blocks one chain: the
        # scheduler runs them in order and frees each block's (..., Tq, B) buffers before the next.
        rows = (*q.shape[:-1], 1)
        acc = side_by_side(LazyBuffer.full(0.0, (*q.shape[:-1], width + 1), q.dtype, q.device),
                           LazyBuffer.full(-math.inf, rows, q.dtype, q.device))
        tq = q.shape[-2]
        for start, stop, first in blocks(k.shape[-2], block, tq, causal):
            out, total, m = (Expr(x) for x in running(keys(acc, first, tq)))
            s = block_scores(keys(q, first, tq), k, start, stop, scale, causal, first)
            m_new = m.max(Expr(row(s, ReduceOps.MAX)))
            p = (Expr(s) - Expr(wide(m_new.lazydata, stop - start))).exp().lazydata
            shrink = (m - m_new).exp()  # how much the old max overestimated: exp(-inf) = 0 at first
            out = out * Expr(wide(shrink.lazydata, width)) + Expr(matmul(p, keys(v, start, stop)))
            total = total * shrink + Expr(row(p, ReduceOps.SUM))
            updated = side_by_side(side_by_side(out.lazydata, total.lazydata), m_new.lazydata)
            acc = updated if first == 0 else keys(acc, 0, first).pad(
                tuple((0, 0) for _ in acc.shape[:-2]) + ((0, tq - first), (0, 0))).e(
                BinaryOps.ADD, place(updated, first, acc.shape))
            acc = acc.contiguous()
        out, total, m = running(acc)
        self.out = (Expr(out) / Expr(wide(total, width))).lazydata
        self.logsumexp = (Expr(m) + Expr(total).log()).lazydata  # (..., Tq, 1)
        return self.out
    # --8<-- [end:forward]

    # --8<-- [start:backward]
    def backward(self, grad: LazyBuffer) -> tuple[LazyBuffer | None, ...]:
        """With p = softmax(s) rebuilt per block: dv = pᵀ g, dp = g vᵀ, ds = p (dp - rowsum(g o)),
        dq = ds k · scale, dk = dsᵀ q · scale. rowsum(g o) equals rowsum(p dp) (it is Σ_j p_j dp_j),
        and needs no block at all."""
        q, k, v, scale = self.q, self.k, self.v, self.scale
        g, tq, tk = grad, q.shape[-2], k.shape[-2]
        delta = row(g.e(BinaryOps.MUL, self.out), ReduceOps.SUM)  # (..., Tq, 1)
        # dq, dk and dv side by side in one buffer of rows [dq | dk | dv], updated (and stored) once
        # per block: one chain, so the scheduler runs the blocks in order and frees each one's p and ds
        width = max(q.shape[-1], v.shape[-1])
        grads = LazyBuffer.full(0.0, (*q.shape[:-2], tq + 2 * tk, width), q.dtype, q.device)
        for start, stop, first in blocks(tk, self.block, tq, self.causal):
            qr, gr = keys(q, first, tq), keys(g, first, tq)  # the queries that see this block
            s = block_scores(qr, k, start, stop, scale, self.causal, first, again=True)
            p = (Expr(s) - Expr(wide(keys(self.logsumexp, first, tq), stop - start))).exp().lazydata
            dp = matmul(gr, transpose(keys(v, start, stop)))
            ds = (Expr(p) * (Expr(dp) - Expr(wide(keys(delta, first, tq), stop - start))) * scale).lazydata
            parts = ((matmul(ds, keys(k, start, stop)), first), (matmul(transpose(ds), qr), tq + start),
                     (matmul(transpose(p), gr), tq + tk + start))  # dq, this block's dk and dv
            for part, row_start in parts:
                grads = grads.e(BinaryOps.ADD, place(part, row_start, grads.shape))
            grads = grads.contiguous()
        dq, dk = keys(grads, 0, tq), keys(grads, tq, tq + tk)
        dv = keys(grads, tq + tk, tq + 2 * tk)
        return (column(dq, 0, q.shape[-1]) if self.needs_input_grad[0] else None,
                column(dk, 0, k.shape[-1]) if self.needs_input_grad[1] else None,
                column(dv, 0, v.shape[-1]) if self.needs_input_grad[2] else None)
    # --8<-- [end:backward]


def place(part: LazyBuffer, row_start: int, shape: tuple[int, ...]) -> LazyBuffer:
    """part (..., n, c) padded with zeros to `shape`, its first row at row_start, its columns first."""
    *batch, rows, cols = part.shape
    return part.pad(tuple((0, 0) for _ in batch) + ((row_start, shape[-2] - row_start - rows),
                                                     (0, shape[-1] - cols)))
