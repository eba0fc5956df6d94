"""Byte-level BPE: the tokenizer of GPT-2 and its descendants, trained by repeated pair merges.

A language model reads token ids, not characters. Byte-level BPE (byte-pair encoding) starts from
the 256 byte values, so any input at all, any language, broken UTF-8, binary, has an encoding,
and decoding is exact. Training then repeats one step: find the most frequent adjacent pair of
tokens in the text and give it a new token, `merges[i]` making token `256 + i`. Frequent pieces
(four spaces of indentation, "self", "return ") become one token each, so the same text is
fewer tokens and a model's context window holds more of it.

Here the whole text is one sequence (no splitting into words first, as GPT-2 does with a regular
expression), so a token may span a word boundary, as ":\\n        " does in Python source. Pair
counts include overlapping pairs (in "aaa", ("a", "a") counts twice) and ties go to the smallest
pair (x, y); a merge replaces occurrences from left to right, so "aaa" becomes "[aa]a". Encoding
applies the merges in the order they were learned, which gives exactly training's tokens on the
training text. Each step is a few whole-array numpy operations, so a vocabulary of 512 to 1024
trains on the 1 MB corpus in seconds.
"""

from __future__ import annotations

import json
import os
from typing import Iterable

import numpy as np

FORMAT = "tinyedu-bpe"  # the "format" field of a saved tokenizer's JSON
VERSION = 1


# --8<-- [start:merge-pair]
def merge_pair(ids: np.ndarray, pair: tuple[int, int], new_id: int) -> np.ndarray:
    """`ids` with every occurrence of `pair`, from left to right, replaced by the one token `new_id`."""
    first, second = pair
    starts = (ids[:-1] == first) & (ids[1:] == second)  # where an occurrence of the pair starts
    if first == second:
        starts = _leftmost_in_runs(starts)  # "a a a": only the first two merge
    at = np.flatnonzero(starts)
    merged = ids.copy()
    merged[at] = new_id
    keep = np.ones(len(ids), dtype=bool)
    keep[at + 1] = False  # the second token of each occurrence is now part of new_id
    return merged[keep]
# --8<-- [end:merge-pair]


def _leftmost_in_runs(starts: np.ndarray) -> np.ndarray:
    """Of each run of consecutive True, keep the 1st, 3rd, 5th, ...: pairs that do not overlap.

    A run of k+1 equal tokens has k overlapping pair starts; reading left to right merges the
    first pair, skips the one that shared its second token, merges the next, and so on.
    """
    position = np.arange(len(starts))
    run_begins = starts & ~np.concatenate([[False], starts[:-1]])
    run_start = np.maximum.accumulate(np.where(run_begins, position, 0))
    return starts & ((position - run_start) % 2 == 0)


# --8<-- [start:most-frequent-pair]
def most_frequent_pair(ids: np.ndarray, n_tokens: int) -> tuple[tuple[int, int], int]:
    """The adjacent pair seen most often in `ids` (tokens below `n_tokens`), and its count.

    Each pair (x, y) is the one number x * n_tokens + y; counting those numbers counts the pairs.
    np.argmax returns the first maximum, which is the smallest such number: the tie-break.
    """
    if len(ids) < 2:
        return (0, 0), 0
    keys = ids[:-1].astype(np.int64) * n_tokens + ids[1:]
    if n_tokens * n_tokens <= 4 * len(keys) + 65536:  # a dense table: fast, while it is small
        counts = np.bincount(keys, minlength=n_tokens * n_tokens)
        best = int(np.argmax(counts))
        count = int(counts[best])
    else:  # a big vocabulary: count only the pairs present (a sort)
        present, counts = np.unique(keys, return_counts=True)
        index = int(np.argmax(counts))
        best, count = int(present[index]), int(counts[index])
    return (best // n_tokens, best % n_tokens), count
# --8<-- [end:most-frequent-pair]


# --8<-- [start:train]
def train_bpe(data: bytes | str, vocab_size: int) -> BPE:
    """Learn `vocab_size - 256` merges from `data`, stopping early when no pair occurs twice.

    A pair seen only once teaches nothing about text to come, so the vocabulary can come out
    smaller than asked on a short text (`bpe.vocab_size` says what it is).
    """
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, (int, np.integer)) or vocab_size < 256:
        raise ValueError(f"train_bpe: vocab_size must be an int of at least 256 (the bytes), "
                         f"got {vocab_size!r}")
    ids = _as_byte_ids(data, "train_bpe")
    merges: list[tuple[int, int]] = []
    for new_id in range(256, int(vocab_size)):
        pair, count = most_frequent_pair(ids, new_id)
        if count < 2:
            break
        merges.append(pair)
        ids = merge_pair(ids, pair, new_id)
    return BPE(merges)
# --8<-- [end:train]


def _as_byte_ids(data: bytes | str, where: str) -> np.ndarray:
    """The bytes of `data` (a str as UTF-8) as an int32 array: token ids 0..255."""
    if isinstance(data, str):
        try:
            data = data.encode("utf-8")
        except UnicodeEncodeError as e:
            raise ValueError(f"{where}: the str cannot be written as UTF-8 ({e.reason} at index {e.start}); "
                             "pass bytes instead") from None
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"{where}: expected bytes or str, got {type(data).__name__}")
    return np.frombuffer(bytes(data), dtype=np.uint8).astype(np.int32)


def _readable(token: bytes) -> str:
    """A token as a Python literal: a str when its bytes are whole UTF-8 characters, else bytes."""
    try:
        return repr(token.decode("utf-8"))
    except UnicodeDecodeError:
        return repr(token)


class BPE:
    """A trained byte-level BPE tokenizer: its merges, and the bytes of every token they make.

    Token i < 256 is the byte i; token 256 + k is `merges[k]`'s two tokens, one after the other.
    """

    def __init__(self, merges: Iterable[tuple[int, int]]):
        self.merges: list[tuple[int, int]] = _checked_merges(merges)
        self.vocab: list[bytes] = [bytes([i]) for i in range(256)]
        for first, second in self.merges:
            self.vocab.append(self.vocab[first] + self.vocab[second])

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    # --8<-- [start:encode]
    def encode(self, data: bytes | str) -> np.ndarray:
        """Token ids (int32) of `data`, a str as UTF-8: its bytes, then every merge in learned order.

        Merge k only joins tokens made before it, so applying the merges in order is the same as
        always merging the earliest-learned pair present, the rule GPT-2's tokenizer states.
        """
        ids = _as_byte_ids(data, "BPE.encode")
        for k, pair in enumerate(self.merges):
            if len(ids) < 2:
                break
            ids = merge_pair(ids, pair, 256 + k)
        return ids
    # --8<-- [end:encode]

    def decode(self, ids: Iterable[int] | np.ndarray) -> bytes:
        """The bytes that token ids stand for: exactly the bytes `encode` was given.

        `ids` is a list, a numpy array, or anything with a `.numpy()` (a Tensor of ids).
        """
        if hasattr(ids, "numpy"):
            ids = ids.numpy()
        if isinstance(ids, (str, bytes, bytearray, int, np.integer)):
            raise TypeError(f"BPE.decode: expected a sequence of token ids, got {type(ids).__name__} "
                            f"{ids!r:.40}; a single id is decoded as [id]")
        array = np.asarray(ids if isinstance(ids, np.ndarray) else list(ids))
        if array.size == 0:
            return b""
        if array.dtype.kind not in "iu" or array.ndim != 1:
            raise TypeError(f"BPE.decode: expected a 1-D sequence of integer token ids, got "
                            f"{array.dtype} with shape {array.shape}")
        bad = (array < 0) | (array >= self.vocab_size)
        if bad.any():
            raise ValueError(f"BPE.decode: token id {int(array[np.argmax(bad)])} is not in the vocabulary "
                             f"(vocab_size {self.vocab_size}: ids 0 to {self.vocab_size - 1})")
        return b"".join([self.vocab[i] for i in array.tolist()])

    def decode_text(self, ids: Iterable[int] | np.ndarray) -> str:
        """`decode` as a str, for reading samples: bytes that are not whole UTF-8 characters show as �."""
        return self.decode(ids).decode("utf-8", errors="replace")

    def token_str(self, token: int) -> str:
        """Token `token`'s bytes, readable: '    ' for four spaces, b'\\xe2' for part of a character."""
        is_int = isinstance(token, (int, np.integer)) and not isinstance(token, bool)
        if not is_int or not 0 <= token < self.vocab_size:
            raise ValueError(f"BPE.token_str: {token!r} is not a token id (vocab_size {self.vocab_size})")
        return _readable(self.vocab[token])

    def describe(self, n: int | None = None) -> list[str]:
        """The first `n` merges (all when None), one line each: "256: ' ' + ' ' -> '  '"."""
        if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 0):
            raise ValueError(f"BPE.describe: n must be a count of merges (an int >= 0) or None, got {n!r}")
        shown = self.merges if n is None else self.merges[:n]
        return [f"{256 + k}: {_readable(self.vocab[a])} + {_readable(self.vocab[b])} -> "
                f"{_readable(self.vocab[256 + k])}" for k, (a, b) in enumerate(shown)]

    def save(self, path: str | os.PathLike) -> None:
        """Write the merges as a small JSON file; the vocabulary follows from them."""
        document = {"format": FORMAT, "version": VERSION, "merges": [list(pair) for pair in self.merges]}
        with open(path, "w", encoding="utf-8") as f:
            json.dump(document, f)

    @classmethod
    def load(cls, path: str | os.PathLike) -> BPE:
        """A tokenizer from a file `save` wrote; anything else is an error that says what is wrong."""
        with open(path, encoding="utf-8") as f:
            try:
                document = json.load(f)
            except json.JSONDecodeError as e:
                raise ValueError(f"BPE.load: {path} is not JSON ({e})") from None
        if not isinstance(document, dict) or document.get("format") != FORMAT:
            raise ValueError(f"BPE.load: {path} is not a tinyedu BPE file (no \"format\": \"{FORMAT}\")")
        if document.get("version") != VERSION:
            raise ValueError(f"BPE.load: {path} has version {document.get('version')!r}; "
                             f"this tinyedu reads version {VERSION}")
        return cls(document.get("merges", None))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, BPE) and self.merges == other.merges

    def __repr__(self) -> str:
        return f"BPE(vocab_size={self.vocab_size}, merges={len(self.merges)})"


def _checked_merges(merges: object) -> list[tuple[int, int]]:
    """The merges as a list of int pairs, each made only of tokens that exist before it, none twice."""
    if not isinstance(merges, (list, tuple)):
        raise TypeError(f"BPE: merges must be a list of (int, int) pairs, got {type(merges).__name__}")
    checked: list[tuple[int, int]] = []
    for k, pair in enumerate(merges):
        ok = isinstance(pair, (list, tuple)) and len(pair) == 2 and all(
            isinstance(t, (int, np.integer)) and not isinstance(t, bool) and 0 <= t < 256 + k for t in pair)
        if not ok:
            raise ValueError(f"BPE: merge {k} (token {256 + k}) is {pair!r}; it must be two token ids "
                             f"from 0 to {256 + k - 1}, the tokens that exist before it")
        checked.append((int(pair[0]), int(pair[1])))
    if len(set(checked)) != len(checked):
        raise ValueError("BPE: a pair is merged twice; the second merge could never apply")
    return checked
