"""Chapter 13 (a language model): the BPE merge step, the KV-cache update, the online-softmax rescale.

The first two plug into the library: `merge_pair` into the tokenizer's training and encoding
(tinyedu/text/bpe.py), `write_rows` into the GPT's decoding steps (tinyedu/models/gpt.py), which
TinyJit records once and replays at every position. The third is the heart of fused attention
written in numpy, checked against a float64 softmax over the whole row.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from tinyedu.exercises.checking import need_function
from tinyedu.exercises.hooks import plug
from tinyedu.exercises.registry import exercise
from tinyedu.jit import JitError
from tinyedu.models import gpt
from tinyedu.models.gpt import GPT
from tinyedu.tensor import Tensor
from tinyedu.text import bpe
from tinyedu.text.corpus import corpus_split

# -- exercise: the BPE merge step -------------------------------------------------------------------
MERGE_CASES = [  # (ids, pair, new_id, what the case catches)
    ([5, 1, 2, 7, 1, 2], (1, 2), 9, "two occurrences"),
    ([1, 2], (1, 2), 9, "the whole input is the pair"),
    ([3, 4, 3], (1, 2), 9, "no occurrence: the ids come back unchanged"),
    ([1, 2, 1, 2, 1], (1, 2), 9, "occurrences side by side"),
    ([7, 7, 7], (7, 7), 8, "three equal tokens: pairs overlap"),
    ([7, 7, 7, 7, 3, 7, 7], (7, 7), 8, "runs of equal tokens"),
    ([2, 1, 2, 1], (1, 2), 9, "the pair's tokens in the other order do not count"),
    ([4], (4, 4), 5, "one token"),
    ([], (4, 4), 5, "no tokens"),
]


def _merge_hint(ids: list[int], pair: tuple[int, int], got: list[int], want: list[int]) -> str:
    if len(got) == len(ids) and len(want) < len(ids):
        return ("the output is as long as the input: each merge turns two tokens into one, so the second "
                "token of every occurrence must go")
    if pair[0] == pair[1] and len(got) < len(want):
        return ("in a run of equal tokens the pairs overlap ('a a a' holds two): merge from left to right, "
                "so the first two merge and the third stays ('a a a' -> 'X a')")
    if pair[0] == pair[1] and got == want[::-1]:
        return "the merge goes from left to right: 'a a a' -> 'X a', not 'a X'"
    if pair[0] == pair[1] and len(got) > len(want):
        return ("a run of four equal tokens holds two pairs that do not overlap: 'a a a a' -> 'X X', not "
                "'X a a'. Only the pair that shares its first token with the pair just merged is skipped; "
                "the one after it merges again")
    return "replace every occurrence of the pair, left to right, by new_id"


@exercise("13.merge_pair", answer="merge_pair", title="The BPE merge step",
          hook="tinyedu.text.bpe.merge_pair")
def check_merge_pair(merge_pair: Callable[..., np.ndarray]) -> str:
    need_function(merge_pair, "merge_pair", "merge_pair(ids, pair, new_id) returning the merged ids")
    for ids, pair, new_id, what in MERGE_CASES:
        array = np.array(ids, dtype=np.int32)
        got = merge_pair(array, pair, new_id)
        if not isinstance(got, np.ndarray):
            raise AssertionError(f"merge_pair returned {type(got).__name__}; return a numpy array of ids "
                                 "(the tokenizer goes on with numpy operations on it)")
        if not np.array_equal(array, np.array(ids, dtype=np.int32)):
            raise AssertionError(f"merge_pair changed its input ids ({what}): return a new array and leave "
                                 "`ids` as it was (the caller may still use it)")
        want = bpe.merge_pair(array.copy(), pair, new_id).tolist()  # (tests/test_text.py checks the library)
        if got.tolist() != want:
            raise AssertionError(f"merge_pair({ids}, {pair}, {new_id}) gave {got.tolist()}, expected "
                                 f"{want} ({what}). Hint: {_merge_hint(ids, pair, got.tolist(), want)}.")
    # plugged into the tokenizer: training on real text learns the library's merges, and encoding
    # then decoding gives back every byte
    text = corpus_split()[0][:6000]
    expected = bpe.train_bpe(text, 300)
    with plug(bpe, "merge_pair", merge_pair) as plugged:
        learned = bpe.train_bpe(text, 300)
        ids = learned.encode(text)
    plugged.require_called("merge_pair")
    if learned.merges != expected.merges:
        pairs = zip(learned.merges, expected.merges, strict=False)
        first = next(n for n, (a, b) in enumerate(pairs) if a != b)
        raise AssertionError(f"with your merge_pair, training on 6,000 bytes of the corpus learns merge "
                             f"{first} as {learned.merges[first]}, the library learns "
                             f"{expected.merges[first]}")
    if learned.decode(ids) != text:
        raise AssertionError("with your merge_pair, encoding then decoding does not give back the text")
    return (f"every case left to right; plugged into train_bpe, 6,000 bytes of the corpus learn the "
            f"library's {len(expected.merges)} merges and encode to {len(ids)} tokens that decode to the "
            "same bytes.")


# -- exercise: the KV-cache update ------------------------------------------------------------------
def _write_rows_reference(cache: np.ndarray, rows: np.ndarray, positions: np.ndarray) -> np.ndarray:
    out = cache.copy()
    out[:, :, positions] = rows
    return out


def _small_gpt(window: int | None) -> GPT:
    Tensor.manual_seed(13)
    return GPT(vocab_size=23, block_size=12, dim=16, n_heads=2, n_layers=2, window=window)


@exercise("13.kv_cache_update", answer="write_rows", title="The KV-cache update",
          hook="tinyedu.models.gpt.write_rows")
def check_write_rows(write_rows: Callable[[Tensor, Tensor, Tensor], Tensor]) -> str:
    need_function(write_rows, "write_rows", "write_rows(cache, rows, positions) returning a Tensor")
    rng = np.random.default_rng(13)
    for positions in ([0], [5], [2, 3, 4], [1, 4]):
        cache = rng.standard_normal((1, 2, 6, 3)).astype(np.float32)
        cache[0, 0, positions[-1], 1] = np.inf  # in a slot being overwritten: cache * 0 would be NaN
        cache[0, 1, (positions[-1] + 1) % 6, 0] = -np.inf  # in a slot kept: it must stay -inf
        rows = rng.standard_normal((1, 2, len(positions), 3)).astype(np.float32)
        rows[0, 1, 0, 2] = np.inf  # a value a 0/1 multiplication would turn into NaN elsewhere
        got = write_rows(Tensor(cache), Tensor(rows), Tensor(np.array(positions, dtype=np.int32)))
        if not isinstance(got, Tensor):
            raise AssertionError(f"write_rows returned {type(got).__name__}; return a Tensor")
        if got.shape != cache.shape:
            raise AssertionError(f"write_rows returned shape {got.shape}; it must be the cache's "
                                 f"{cache.shape}")
        got_np, want = got.numpy(), _write_rows_reference(cache, rows, np.array(positions))
        if np.array_equal(got_np, want):
            continue
        if np.isnan(got_np).any():
            hint = ("NaN where the rows or the cache hold inf: a 0/1 mask times a value turns inf into NaN "
                    "(0 * inf), in the new rows and in the cache slots they overwrite alike; choose "
                    "between the new row and the cache with `where` instead")
        elif np.array_equal(np.delete(got_np, positions, 2), np.zeros_like(np.delete(want, positions, 2))):
            hint = "the positions not written must keep the cache's values (the earlier tokens' keys)"
        else:
            hint = ("row t of `rows` goes to slot positions[t] of axis 2; every other slot keeps the "
                    "cache's row")
        raise AssertionError(f"write_rows at positions {positions}: slots differ from numpy's "
                             f"`cache[:, :, positions] = rows`. Hint: {hint}.")
    # plugged into the GPT: the decoding steps are recorded once by TinyJit and replayed at every
    # position, so the positions must reach the kernels as a tensor, not as Python numbers
    for window in (None, 4):
        model = _small_gpt(window)
        expected = model.generate([3, 1, 4], 8, cache=False)
        with plug(gpt, "write_rows", write_rows) as plugged:
            try:
                got = model.generate([3, 1, 4], 8, cache=True)
            except JitError as e:
                got = f"an error: {e}"
        plugged.require_called("write_rows")
        if got != expected:
            shown = got if isinstance(got, str) else got[3:]
            raise AssertionError(
                f"plugged into a GPT{' with a window of 4' if window else ''}, greedy decoding with the "
                f"cache gives {shown}, without it {expected[3:]}. The decoding step is recorded once and "
                "replayed at every position: if write_rows reads the positions as Python numbers "
                "(.numpy(), .item(), a slice), the replay writes every new key at the first step's position. "
                "Hint: compare the positions with Tensor.arange as tensors (a one-hot of slots)")
    return ("the cache keeps its other rows, inf stays inf (in the rows and in the cache); plugged into a "
            "GPT (causal, and a window of 4), cached greedy decoding gives the same tokens as recomputing "
            "every step.")


# -- exercise: the online-softmax rescale ------------------------------------------------------------
def _online_cases() -> list[tuple[str, np.ndarray, int]]:
    """(what, scores (n, T), block size): rows whose max grows block after block, huge scores, masks."""
    rng = np.random.default_rng(13)
    growing = np.linspace(-3, 40, 24).reshape(1, 24) + rng.standard_normal((5, 24))
    huge = rng.uniform(-1e4, 1e4, (4, 20))
    masked = rng.standard_normal((3, 16))
    masked[0, 5:] = -np.inf   # causal rows: every key after some point is hidden
    masked[1, 8:12] = -np.inf  # a whole block hidden in the middle of a row
    return [("scores that grow from block to block", growing, 5), ("scores of +-1e4", huge, 4),
            ("rows with -inf (masked) keys and whole masked blocks", masked, 4),
            ("one key per block", growing[:2, :7], 1), ("one block", rng.standard_normal((2, 6)), 8)]


def _two_blocks(step: Callable[..., Any], first: float, second: float) -> tuple[float, float] | None:
    """(total, out) after two one-key blocks with scores `first` then `second` (values 1 then 3), or None
    when the learner's step fails on them: a probe that tells one mistake from another."""
    try:
        state = (np.full((1, 1), -np.inf), np.zeros((1, 1)), np.zeros((1, 1)))
        with np.errstate(all="ignore"):
            for score, value in ((first, 1.0), (second, 3.0)):
                state = step(*state, np.array([[score]]), np.array([[value]]))
        return float(np.asarray(state[1]).reshape(-1)[0]), float(np.asarray(state[2]).reshape(-1)[0])
    except Exception:  # the probe is only for the hint; the checker has reported the failure itself
        return None


def _online_hint(step: Callable[..., Any], what: str, got: np.ndarray) -> str:
    """A hint for the mistake the probes point to; none of them states the update itself."""
    if not np.isfinite(got).all():
        if "1e4" in what:
            return ("the result is not finite: exp overflows float64 from exp(710) on, and these scores "
                    "reach 1e4. What you exponentiate must never be positive: which number do you know "
                    "is at least every score seen so far?")
        return ("the result is not finite in a row with masked keys: -inf - (-inf) is NaN, as happens when "
                "a block's own max is -inf. Subtract a number that is finite as soon as any key was seen")
    falling, rising = _two_blocks(step, 2.0, 0.0), _two_blocks(step, 0.0, 2.0)
    if falling is not None and not np.isclose(falling[0], 1 + np.exp(-2.0)):
        return ("a block whose scores all lie below the running max gets weights as if its own max were "
                "the reference (scores 2 then 0 give total "
                f"{falling[0]:.4f}, not 1 + exp(-2) = {1 + np.exp(-2.0):.4f}): every weight added to "
                "total and out must be measured against the same number")
    if rising is not None and not np.isclose(rising[0], 1 + np.exp(-2.0)):
        return ("when a block raises the max, total still holds weights measured against the old max while "
                f"the new block's are measured against the new one (scores 0 then 2 give total "
                f"{rising[0]:.4f}, not {1 + np.exp(-2.0):.4f}): how does exp(s - m_old) relate to "
                "exp(s - m_new)?")
    if rising is not None and not np.isclose(rising[1], 3 + np.exp(-2.0)):
        return ("total comes out right when a block raises the max, but out does not: out adds up the same "
                "weights (times the values) as total, so whatever total needs when the max changes, out "
                "needs too")
    return "each block must leave m, total and out as one pass over all the keys so far would"


@exercise("13.online_softmax", answer="online_softmax_step", title="The online-softmax rescale")
def check_online_softmax(online_softmax_step: Callable[..., Any]) -> str:
    need_function(online_softmax_step, "online_softmax_step",
                  "online_softmax_step(m, total, out, scores, values) returning (m, total, out)")
    rng = np.random.default_rng(7)
    for what, scores, block in _online_cases():
        n, length = scores.shape
        values = rng.standard_normal((length, 3))
        m, total, out = np.full((n, 1), -np.inf), np.zeros((n, 1)), np.zeros((n, 3))
        with np.errstate(all="ignore"):
            for start in range(0, length, block):
                result = online_softmax_step(m, total, out, scores[:, start:start + block],
                                             values[start:start + block])
                if not (isinstance(result, tuple) and len(result) == 3):
                    raise AssertionError("online_softmax_step must return three arrays: (m, total, out)")
                m, total, out = (np.asarray(x, dtype=np.float64) for x in result)
                if m.shape != (n, 1) or total.shape != (n, 1) or out.shape != (n, 3):
                    raise AssertionError(f"online_softmax_step returned shapes {m.shape}, {total.shape}, "
                                         f"{out.shape}; expected ({n}, 1), ({n}, 1), ({n}, 3)")
            got = out / total
        weights = np.exp(scores - scores.max(1, keepdims=True))
        want = (weights / weights.sum(1, keepdims=True)) @ values
        if not np.allclose(got, want, rtol=1e-9, atol=1e-9):
            row = int(np.argmax(np.nan_to_num(np.abs(got - want), nan=np.inf).max(1)))
            raise AssertionError(f"{what}, blocks of {block} keys: out / total in row {row} is "
                                 f"{np.round(got[row], 6)}, softmax(scores) @ values is "
                                 f"{np.round(want[row], 6)}. "
                                 f"Hint: {_online_hint(online_softmax_step, what, got)}.")
        if not np.allclose(m, scores.max(1, keepdims=True)):
            raise AssertionError(f"{what}: after the last block m must be the largest score of each row")
    return ("block by block, out / total equals softmax(scores) @ values in float64, for scores of +-1e4, "
            "masked keys and maxima that grow every block.")
