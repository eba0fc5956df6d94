"""Chapter 13 (a language model): reference solutions, and typical mistakes with the hint they get."""

from __future__ import annotations

import numpy as np

from tinyedu.exercises.registry import Mistake
from tinyedu.models import gpt
from tinyedu.tensor import Tensor
from tinyedu.text import bpe

# --8<-- [start:merge_pair]
merge_pair = bpe.merge_pair
# --8<-- [end:merge_pair]

# --8<-- [start:write_rows]
write_rows = gpt.write_rows
# --8<-- [end:write_rows]


# --8<-- [start:online_softmax_step]
# m, total (n, 1), out (n, d): the running values; scores (n, B), values (B, d): the next block of keys
def online_softmax_step(m, total, out, scores, values):
    m_new = np.maximum(m, scores.max(1, keepdims=True))
    p = np.exp(scores - m_new)      # every exponent is <= 0: no overflow, masked keys give exactly 0
    shrink = np.exp(m - m_new)      # the old sums were relative to m; 0 before the first block (m = -inf)
    return m_new, total * shrink + p.sum(1, keepdims=True), out * shrink + p @ values
# --8<-- [end:online_softmax_step]


def _merge_everywhere(ids: np.ndarray, pair: tuple[int, int], new_id: int) -> np.ndarray:
    """Every place the pair starts, overlapping runs included ('a a a' -> 'X')."""
    at = np.flatnonzero((ids[:-1] == pair[0]) & (ids[1:] == pair[1]))
    merged = ids.copy()
    merged[at] = new_id
    return np.delete(merged, at + 1)


def _merge_first_of_each_run(ids: np.ndarray, pair: tuple[int, int], new_id: int) -> np.ndarray:
    """Skips every start that follows a start: right for 'a a a', wrong for 'a a a a' ('X a a')."""
    starts = (ids[:-1] == pair[0]) & (ids[1:] == pair[1])
    at = np.flatnonzero(starts & ~np.concatenate([[False], starts[:-1]]))
    merged = ids.copy()
    merged[at] = new_id
    return np.delete(merged, at + 1)


def _merge_keeping_length(ids: np.ndarray, pair: tuple[int, int], new_id: int) -> np.ndarray:
    at = np.flatnonzero((ids[:-1] == pair[0]) & (ids[1:] == pair[1]))
    merged = ids.copy()
    merged[at] = new_id
    return merged


def _merge_from_the_right(ids: np.ndarray, pair: tuple[int, int], new_id: int) -> np.ndarray:
    return bpe.merge_pair(ids[::-1].copy(), pair[::-1], new_id)[::-1].copy()


def _write_by_multiplying(cache: Tensor, rows: Tensor, positions: Tensor) -> Tensor:
    one_hot = (positions.reshape(-1, 1) == Tensor.arange(cache.shape[2]).reshape(1, -1)).float()
    placed = (one_hot.reshape(1, 1, *one_hot.shape, 1) * rows.unsqueeze(3)).sum(2)
    written = one_hot.sum(0).reshape(1, 1, -1, 1)
    return placed + cache * (1 - written)


def _write_placed_with_where_kept_by_multiplying(cache: Tensor, rows: Tensor, positions: Tensor) -> Tensor:
    """The new rows chosen with `where` (no 0 * inf there), the cache kept by a multiplication."""
    one_hot = positions.reshape(-1, 1) == Tensor.arange(cache.shape[2]).reshape(1, -1)
    placed = one_hot.reshape(1, 1, *one_hot.shape, 1).where(rows.unsqueeze(3), 0.0).sum(2)
    written = one_hot.float().sum(0).reshape(1, 1, -1, 1)
    return placed + cache * (1 - written)


def _write_with_python_positions(cache: Tensor, rows: Tensor, positions: Tensor) -> Tensor:
    out = cache
    for t, p in enumerate(positions.numpy().tolist()):  # read at record time: a replay keeps these numbers
        out = out[:, :, :p].cat(rows[:, :, t:t + 1], out[:, :, p + 1:], dim=2)
    return out


def _write_dropping_the_cache(cache: Tensor, rows: Tensor, positions: Tensor) -> Tensor:
    one_hot = positions.reshape(-1, 1) == Tensor.arange(cache.shape[2]).reshape(1, -1)
    return (one_hot.reshape(1, 1, *one_hot.shape, 1).where(rows.unsqueeze(3), 0.0)).sum(2)


def _step_without_rescale(m, total, out, scores, values):
    m_new = np.maximum(m, scores.max(1, keepdims=True))
    p = np.exp(scores - m_new)
    return m_new, total + p.sum(1, keepdims=True), out + p @ values


def _step_without_max(m, total, out, scores, values):
    p = np.exp(scores)
    return np.maximum(m, scores.max(1, keepdims=True)), total + p.sum(1, keepdims=True), out + p @ values


def _step_with_the_blocks_own_max(m, total, out, scores, values):
    block_max = scores.max(1, keepdims=True)
    p = np.exp(scores - block_max)  # relative to this block's max, not to the running one
    return np.maximum(m, block_max), total + p.sum(1, keepdims=True), out + p @ values


def _step_through_the_blocks_max(m, total, out, scores, values):
    """Right in exact arithmetic, but a block of masked keys has block_max -inf: -inf - (-inf) = NaN."""
    block_max = scores.max(1, keepdims=True)
    m_new = np.maximum(m, block_max)
    p = np.exp(scores - block_max) * np.exp(block_max - m_new)
    shrink = np.exp(m - m_new)
    return m_new, total * shrink + p.sum(1, keepdims=True), out * shrink + p @ values


def _step_rescaling_the_sum_only(m, total, out, scores, values):
    m_new = np.maximum(m, scores.max(1, keepdims=True))
    p = np.exp(scores - m_new)
    return m_new, total * np.exp(m - m_new) + p.sum(1, keepdims=True), out + p @ values


MISTAKES = [
    Mistake("13.merge_pair", _merge_everywhere, "the pairs overlap", "overlapping pairs all merged"),
    Mistake("13.merge_pair", _merge_first_of_each_run, "'a a a a' -> 'X X'", "only the first pair of a run"),
    Mistake("13.merge_pair", _merge_keeping_length, "as long as the input", "the second token kept"),
    Mistake("13.merge_pair", _merge_from_the_right, "from left to right", "merged right to left"),
    Mistake("13.merge_pair", lambda ids, pair, new_id: bpe.merge_pair(ids, pair, new_id).tolist(),
            "return a numpy array", "a list"),
    Mistake("13.kv_cache_update", _write_by_multiplying, "0 * inf", "a 0/1 mask multiplied in"),
    Mistake("13.kv_cache_update", _write_placed_with_where_kept_by_multiplying, "cache slots they overwrite",
            "placed with where, the cache kept by multiplying"),
    Mistake("13.kv_cache_update", _write_dropping_the_cache, "keep the cache's values", "zeros elsewhere"),
    Mistake("13.kv_cache_update", _write_with_python_positions, "as Python numbers",
            "positions read with .numpy()"),
    Mistake("13.online_softmax", _step_without_rescale, "how does exp(s - m_old) relate", "no rescale"),
    Mistake("13.online_softmax", _step_without_max, "exp overflows float64", "exp of the raw scores"),
    Mistake("13.online_softmax", _step_rescaling_the_sum_only, "out needs too", "only the sum rescaled"),
    Mistake("13.online_softmax", _step_with_the_blocks_own_max, "as if its own max",
            "each block relative to its own max"),
    Mistake("13.online_softmax", _step_through_the_blocks_max, "-inf - (-inf) is NaN",
            "through the block's max: NaN on a masked block"),
]
