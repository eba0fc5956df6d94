"""Decoding: turning a language model's logits into text, one token (or a few) at a time.

The functions here work with any model that offers three methods (tinyedu.models.gpt.GPT does):

- `forward_last(tokens, run) -> logits (vocab,)`: the next-token logits, recomputing the whole prefix
  with `run`, a TinyJit of `padded_logits` (a fixed-size window, so its kernels replay);
- `new_cache()`, and `forward_cached(tokens, start, cache) -> logits (T, vocab)`: the logits of T new
  tokens at positions start.., reading the keys and values of positions 0..start-1 from the cache
  and writing their own into it;
- `decoding_state() -> (cache, TinyJit of padded_logits)`: the ones generate() uses, kept by the
  model from call to call so that the TinyJit-recorded steps replay from a second call's first step.

Decoding with the cache runs the model on one position per token instead of the whole prefix.
Speculative decoding goes further: a small draft model guesses k tokens, and the large target
model checks all of them in one cached forward pass over k + 1 positions.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np


# --8<-- [start:sample]
def pick_token(logits: np.ndarray, temperature: float, top_k: int | None, rng: np.random.Generator,
               top_p: float | None = None) -> int:
    """The next token from one position's logits (vocab,).

    temperature 0 (or top_k 1) takes the likeliest token (greedy). Otherwise the token is drawn from
    softmax(logits / temperature) restricted to the top_k likeliest tokens, then to the nucleus of
    top_p: a low temperature sharpens the distribution, a high one flattens it; top_k cuts off the
    long tail at a fixed count, top_p at a fixed probability mass (few tokens where the model is
    sure, many where it is not).
    """
    logits = np.asarray(logits, dtype=np.float64)
    if temperature == 0 or top_k == 1:
        return int(logits.argmax())
    return int(rng.choice(len(logits), p=token_probabilities(logits, temperature, top_k, top_p)))


def token_probabilities(logits: np.ndarray, temperature: float, top_k: int | None,
                        top_p: float | None = None) -> np.ndarray:
    """softmax(logits / temperature) over the top_k largest logits (the rest get probability 0),
    then over the nucleus: the likeliest tokens whose probabilities, added from the largest down,
    first reach top_p (nucleus sampling, Holtzman et al. 2019); renormalized to sum to 1."""
    scaled = np.asarray(logits, dtype=np.float64) / temperature
    if top_k is not None and top_k < len(scaled):
        kth_largest = np.partition(scaled, -top_k)[-top_k]
        scaled = np.where(scaled >= kth_largest, scaled, -np.inf)
    probabilities = np.exp(scaled - scaled.max())
    probabilities /= probabilities.sum()
    if top_p is not None and top_p < 1:
        order = np.argsort(-probabilities, kind="stable")  # likeliest first; ties: the smaller id first
        mass_before = np.cumsum(probabilities[order]) - probabilities[order]
        dropped = order[mass_before >= top_p]  # the nucleus already holds top_p without them
        probabilities[dropped] = 0.0
        probabilities /= probabilities.sum()
    return probabilities
# --8<-- [end:sample]


# --8<-- [start:generate]
def generate_tokens(model: Any, prompt_ids: Sequence[int], new_tokens: int, temperature: float = 0.0,
                    top_k: int | None = None, seed: int = 0, cache: bool = True,
                    top_p: float | None = None) -> list[int]:
    """The prompt followed by `new_tokens` tokens chosen one at a time (pick_token), seeded by `seed`.

    With the cache, the prompt goes through the model once and every later step runs the model on
    the one new token; without it, every step recomputes the whole sequence. Both give the same
    logits, so greedy decoding gives the same text.
    """
    sequence = _checked_prompt(model, prompt_ids, new_tokens, "generate")
    _check_sampling(temperature, top_k, model.vocab_size, top_p)
    rng = np.random.default_rng(seed)
    kept_cache, recompute = model.decoding_state()  # kept across calls: recorded steps replay at once
    caches = kept_cache if cache else None
    logits = (model.forward_cached(sequence, 0, caches)[-1] if cache
              else model.forward_last(sequence, recompute))
    for step in range(new_tokens):
        sequence.append(pick_token(logits, temperature, top_k, rng, top_p))
        if step + 1 < new_tokens:
            logits = (model.forward_cached(sequence[-1:], len(sequence) - 1, caches)[-1] if cache
                      else model.forward_last(sequence, recompute))
    return sequence
# --8<-- [end:generate]


# --8<-- [start:speculative]
def speculative_generate(target: Any, draft: Any, prompt_ids: Sequence[int], new_tokens: int,
                         k: int = 4) -> tuple[list[int], dict[str, float]]:
    """Greedy decoding of `target`, sped up by `draft`: the same tokens as target.generate(temperature=0).

    Each round the draft proposes k tokens greedily (cheap: a small model, one position at a time).
    The target then runs once on the last accepted token and the k proposals (k + 1 positions, with
    its cache), which gives its own greedy choice after each of them. The proposals that agree with
    the target's choices are kept, up to the first disagreement, and the target's choice at that
    point is added: every round adds at least one token, and every token is the target's own choice.
    Returns the tokens and the statistics: rounds, proposed, accepted, acceptance rate, and the number
    of target forward passes (plain greedy decoding needs one per token).
    """
    sequence = _checked_prompt(target, prompt_ids, new_tokens, "speculative_generate")
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise ValueError(f"speculative_generate: k (tokens proposed per round) must be an int >= 1, "
                         f"got {k!r}")
    if draft.vocab_size != target.vocab_size or draft.block_size < len(sequence) + new_tokens:
        raise ValueError(f"speculative_generate: the draft must share the target's vocabulary "
                         f"({draft.vocab_size} vs {target.vocab_size}) and fit {len(sequence) + new_tokens} "
                         f"positions (its block_size is {draft.block_size})")
    # each model's kept cache, as generate() uses: from a second call on, every pass replays recorded
    # kernels (a draft that is the target itself needs a second cache: it runs ahead of the target)
    target_cache = target.decoding_state()[0]
    draft_cache = draft.new_cache() if draft is target else draft.decoding_state()[0]
    if len(sequence) > 1:  # the target's cache holds every token but the last, which each round feeds
        target.forward_cached(sequence[:-1], 0, target_cache)
    end, draft_seen = len(sequence) + new_tokens, 0
    stats = {"rounds": 0, "proposed": 0, "accepted": 0, "target_passes": 0}
    while len(sequence) < end:
        proposals = min(k, end - len(sequence) - 1)  # never propose past the last token asked for
        guesses, draft_seen = _draft_proposals(draft, draft_cache, sequence, draft_seen, proposals)
        scored = target.forward_cached([sequence[-1], *guesses], len(sequence) - 1, target_cache)
        choices = [int(row.argmax()) for row in np.asarray(scored, dtype=np.float64)]
        agreed = 0
        while agreed < proposals and guesses[agreed] == choices[agreed]:
            agreed += 1
        sequence += guesses[:agreed] + [choices[agreed]]
        draft_seen = min(draft_seen, len(sequence) - 1)  # its cache past the last agreed token is stale
        for name, count in (("rounds", 1), ("proposed", proposals), ("accepted", agreed),
                            ("target_passes", 1)):
            stats[name] += count
    stats["acceptance_rate"] = stats["accepted"] / stats["proposed"] if stats["proposed"] else math.nan
    return sequence, stats
# --8<-- [end:speculative]


def _draft_proposals(draft: Any, cache: list, sequence: list[int], seen: int,
                     count: int) -> tuple[list[int], int]:
    """`count` greedy tokens of the draft after `sequence`, and how many positions its cache then holds.
    The draft first reads the tokens of `sequence` it has not seen (the ones accepted last round)."""
    guesses: list[int] = []
    if count == 0:
        return guesses, seen
    logits = draft.forward_cached(sequence[seen:], seen, cache)[-1]
    seen = len(sequence)
    while True:
        guesses.append(int(np.asarray(logits, dtype=np.float64).argmax()))
        if len(guesses) == count:
            return guesses, seen
        logits = draft.forward_cached(guesses[-1:], seen, cache)[-1]
        seen += 1


def _checked_prompt(model: Any, prompt_ids: Sequence[int], new_tokens: int, op: str) -> list[int]:
    sequence = [int(t) for t in np.asarray(prompt_ids, dtype=np.int64).reshape(-1)]
    if np.asarray(prompt_ids).ndim != 1 or not sequence:
        raise ValueError(f"{op}: prompt_ids must be a non-empty 1-d sequence of token ids, got shape "
                         f"{np.asarray(prompt_ids).shape}")
    if min(sequence) < 0 or max(sequence) >= model.vocab_size:
        raise ValueError(f"{op}: prompt tokens must be in 0..{model.vocab_size - 1}, got "
                         f"{min(sequence)}..{max(sequence)}")
    if not isinstance(new_tokens, int) or isinstance(new_tokens, bool) or new_tokens < 0:
        raise ValueError(f"{op}: new_tokens must be an int >= 0, got {new_tokens!r}")
    if len(sequence) + new_tokens > model.block_size:
        raise ValueError(f"{op}: {len(sequence)} prompt tokens + {new_tokens} new ones do not fit in "
                         f"block_size {model.block_size}; the model has no position beyond it")
    return sequence


def _check_sampling(temperature: float, top_k: int | None, vocab_size: int,
                    top_p: float | None = None) -> None:
    if not isinstance(temperature, (int, float)) or isinstance(temperature, bool) or not temperature >= 0 \
            or math.isinf(temperature):
        raise ValueError(f"generate: temperature must be a finite number >= 0, got {temperature!r}")
    if top_k is not None and (not isinstance(top_k, int) or isinstance(top_k, bool)
                              or not 1 <= top_k <= vocab_size):
        raise ValueError(f"generate: top_k must be None or an int in 1..{vocab_size}, got {top_k!r}")
    if top_p is not None and (not isinstance(top_p, (int, float)) or isinstance(top_p, bool)
                              or not 0 < top_p <= 1):
        raise ValueError(f"generate: top_p must be None or a number in (0, 1], got {top_p!r}")


__all__ = ["pick_token", "token_probabilities", "generate_tokens", "speculative_generate"]
