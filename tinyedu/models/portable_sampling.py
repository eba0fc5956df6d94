"""Sampling that C and JavaScript can repeat token for token: one small PRNG and one sampling rule.

generate() draws with numpy's Generator, whose algorithm (PCG64 plus numpy's own choice()) no exported
program reproduces. The exported generator (tinyedu.export.generator) draws instead with the rule below,
written out here so that tinyedu gives the very tokens the C program gives for the same prompt, seed,
temperature and top-k:

- the PRNG is SplitMix64 (Steele, Lea and Flood 2014): a 64-bit state that grows by 0x9E3779B97F4A7C15
  per draw, mixed by two xor-shift-multiplies; its top 53 bits / 2**53 give a uniform double in [0, 1);
- the rule: the top_k largest logits (all of them when top_k is None), ordered largest first, ties by
  the smaller token id; weights exp((logit - largest) / temperature) in float64; one uniform draw u;
  the token is the first whose running sum of weights exceeds u * (sum of all the weights).
  Temperature 0 (or top_k 1) takes the argmax and draws nothing, as generate() does.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from tinyedu.models.generate import _check_sampling, _checked_prompt

MASK64 = (1 << 64) - 1


class SplitMix64:
    """The PRNG of the exported generator: `next_uniform()` is a float in [0, 1) from 53 random bits."""

    def __init__(self, seed: int) -> None:
        if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed <= MASK64:
            raise ValueError(f"SplitMix64: seed must be an int in 0..2**64-1, got {seed!r}")
        self.state = seed

    def next_u64(self) -> int:
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK64
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        return z ^ (z >> 31)

    def next_uniform(self) -> float:
        return (self.next_u64() >> 11) * (1.0 / (1 << 53))


def portable_pick(logits: np.ndarray, temperature: float, top_k: int | None, rng: SplitMix64) -> int:
    """One token from float32 `logits` by the rule in this module's docstring."""
    logits = np.asarray(logits, dtype=np.float32).reshape(-1)
    if temperature == 0 or top_k == 1:
        return int(logits.argmax())  # the first of equal maxima, as the C argmax
    order = np.argsort(-logits, kind="stable")[:top_k]  # largest first, ties by the smaller id
    largest = float(logits[order[0]])
    weights = [math.exp((float(logits[i]) - largest) / temperature) for i in order]
    threshold = rng.next_uniform() * _total(weights)
    running = 0.0
    for token, weight in zip(order, weights, strict=True):
        running += weight
        if running > threshold:
            return int(token)
    return int(order[-1])  # u * total rounds up to the total: the last one


def _total(weights: list[float]) -> float:
    """Left-to-right float64 sum, as the C loop adds them (not math.fsum: the same rounding matters)."""
    total = 0.0
    for weight in weights:
        total += weight
    return total


def portable_generate_tokens(model: Any, prompt_ids: Sequence[int], new_tokens: int,
                             temperature: float = 0.0, top_k: int | None = None,
                             seed: int = 0) -> list[int]:
    """generate_tokens with the portable PRNG and rule: the tokens the exported generator (C, wasm)
    makes for the same prompt, new_tokens, temperature, top_k and seed. Greedy (temperature 0) equals
    model.generate's greedy tokens."""
    sequence = _checked_prompt(model, prompt_ids, new_tokens, "portable_generate_tokens")
    _check_sampling(temperature, top_k, model.vocab_size, None)
    rng = SplitMix64(seed)
    cache = model.new_cache()
    logits = model.forward_cached(sequence, 0, cache)[-1]
    for step in range(new_tokens):
        sequence.append(portable_pick(np.asarray(logits), temperature, top_k, rng))
        if step + 1 < new_tokens:
            logits = model.forward_cached(sequence[-1:], len(sequence) - 1, cache)[-1]
    return sequence


__all__ = ["SplitMix64", "portable_pick", "portable_generate_tokens"]
