"""Byte-level BPE: the tokenizer of GPT-2 and its descendants, trained by repeated pair merges.

A language model reads token ids, not characters. Byte-level BPE (byte-pair encoding) starts from
the 256 byte values, so any input at all, any language, broken UTF-8, binary, has an encoding,
and decoding is exact. Training then repeats one step: find the most frequent adjacent pair of
tokens in the text and give it a new token, `merges[i]` making token `256 + i`. Frequent pieces
(four spaces of indentation, "self", "return ") become one token each, so the same text is
fewer tokens and a model's context window holds more of it.

First the text is cut into pieces (words, numbers, punctuation, whitespace: tinyedu/text/split.py,
GPT-2's regular expression written over bytes) and merges happen only inside a piece, so no token
spans a word boundary. The pieces stay one array, with a separator id -1 between them that no pair
may contain: counting and merging stay whole-array numpy operations. `split=False` learns on the
text as one sequence instead, where tokens like ":\\n        " cross from one line into the next.
Special tokens (`<|endoftext|>` between documents) come after the merges: they stand for their own
text and are never made by a merge. Pair counts include overlapping pairs (in "aaa", ("a", "a")
counts twice) and ties go to the smallest pair (x, y); a merge replaces occurrences from left to
right, so "aaa" becomes "[aa]a". Encoding applies the merges in the order they were learned,
which gives exactly training's tokens on the training text. Each step is a few whole-array numpy
operations, so a vocabulary of 512 to 1024 trains on the 1 MB corpus in seconds.
"""

from __future__ import annotations

import json
import os
import re
from typing import Iterable, Sequence

import numpy as np

from tinyedu.text.split import pre_split

FORMAT = "tinyedu-bpe"  # the "format" field of a saved tokenizer's JSON
VERSION = 2  # 2: the pre-split and special tokens; a version 1 file (neither) still loads
SEPARATOR = -1  # between two pieces of the pre-split: no pair with it is ever counted or merged
END_OF_TEXT = "<|endoftext|>"  # GPT-2's special token between documents


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
    A pair that touches a SEPARATOR (-1, between two pieces of the pre-split) is not counted.
    """
    within = (ids[:-1] >= 0) & (ids[1:] >= 0)
    keys = ids[:-1][within].astype(np.int64) * n_tokens + ids[1:][within]
    if len(keys) == 0:
        return (0, 0), 0
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
def train_bpe(data: bytes | str, vocab_size: int, split: bool = True,
              special_tokens: Sequence[str] = ()) -> BPE:
    """Learn merges from `data` until the vocabulary (256 bytes + merges + special tokens) has
    `vocab_size` tokens, stopping early when no pair occurs twice; `split` cuts the text first.

    A pair seen only once teaches nothing about text to come, so the vocabulary can come out
    smaller than asked on a short text (`bpe.vocab_size` says what it is).
    """
    special_tokens = _checked_specials(special_tokens)
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, (int, np.integer)) or \
            vocab_size < 256 + len(special_tokens):
        raise ValueError(f"train_bpe: vocab_size must be an int of at least 256 (the bytes) + "
                         f"{len(special_tokens)} (the special tokens), got {vocab_size!r}")
    ids = _pieces(_as_bytes(data, "train_bpe"), split)
    merges: list[tuple[int, int]] = []
    for new_id in range(256, int(vocab_size) - len(special_tokens)):
        pair, count = most_frequent_pair(ids, new_id)
        if count < 2:
            break
        merges.append(pair)
        ids = merge_pair(ids, pair, new_id)
    return BPE(merges, split, special_tokens)
# --8<-- [end:train]


def _pieces(data: bytes, split: bool) -> np.ndarray:
    """The bytes of `data` as int32 ids, with SEPARATOR (-1) between the pieces of the pre-split."""
    ids = np.frombuffer(data, dtype=np.uint8).astype(np.int32)
    if not split or len(data) == 0:
        return ids
    lengths = np.array([len(piece) for piece in pre_split(data)])
    piece_of_byte = np.repeat(np.arange(len(lengths)), lengths)  # byte i is in piece piece_of_byte[i]
    spread = np.full(len(ids) + len(lengths) - 1, SEPARATOR, dtype=np.int32)
    spread[np.arange(len(ids)) + piece_of_byte] = ids  # one slot left free after each piece
    return spread


def _checked_specials(special_tokens: object) -> list[str]:
    """The special tokens as a list of distinct non-empty str."""
    if isinstance(special_tokens, (str, bytes)) or not isinstance(special_tokens, (list, tuple)) or \
            not all(isinstance(t, str) and t for t in special_tokens) or \
            len(set(special_tokens)) != len(special_tokens):
        raise ValueError(f"BPE: special_tokens must be a list of distinct non-empty str such as "
                         f"[{END_OF_TEXT!r}], got {special_tokens!r}")
    return list(special_tokens)


def _as_bytes(data: bytes | str, where: str) -> bytes:
    """`data` as bytes (a str as UTF-8), with an error that says what to pass instead."""
    if isinstance(data, str):
        try:
            data = data.encode("utf-8")
        except UnicodeEncodeError as e:
            raise ValueError(f"{where}: the str cannot be written as UTF-8 ({e.reason} at index {e.start}); "
                             "pass bytes instead") from None
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"{where}: expected bytes or str, got {type(data).__name__}")
    return bytes(data)


def _readable(token: bytes) -> str:
    """A token as a Python literal: a str when its bytes are whole UTF-8 characters, else bytes."""
    try:
        return repr(token.decode("utf-8"))
    except UnicodeDecodeError:
        return repr(token)


class BPE:
    """A trained byte-level BPE tokenizer: its merges, and the bytes of every token they make.

    Token i < 256 is the byte i; token 256 + k is `merges[k]`'s two tokens, one after the other;
    after the merges come the special tokens, each standing for its own text (`special_tokens`
    maps that text to its id). `split` says whether merges apply only inside pieces of the pre-split.
    """

    def __init__(self, merges: Iterable[tuple[int, int]], split: bool = True,
                 special_tokens: Sequence[str] = ()):
        self.merges: list[tuple[int, int]] = _checked_merges(merges)
        self.split = bool(split)
        self.vocab: list[bytes] = [bytes([i]) for i in range(256)]
        for first, second in self.merges:
            self.vocab.append(self.vocab[first] + self.vocab[second])
        self.special_tokens: dict[str, int] = {}
        for text in _checked_specials(list(special_tokens)):
            self.special_tokens[text] = len(self.vocab)
            self.vocab.append(text.encode("utf-8"))

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    # --8<-- [start:encode]
    def encode(self, data: bytes | str, allowed_special: bool = False) -> np.ndarray:
        """Token ids (int32) of `data`, a str as UTF-8: its bytes, then every merge in learned order.

        Merge k only joins tokens made before it, so applying the merges in order is the same as
        always merging the earliest-learned pair present, the rule GPT-2's tokenizer states.
        With `allowed_special`, the text of a special token ("<|endoftext|>") becomes its one id;
        without, it is ordinary text, so a prompt cannot forge a document boundary.
        """
        data = _as_bytes(data, "BPE.encode")
        if allowed_special and self.special_tokens:
            names = sorted(self.special_tokens, key=len, reverse=True)  # the longest first
            parts = re.split(b"(" + b"|".join(re.escape(n.encode()) for n in names) + b")", data)
            return np.concatenate([np.array([self.special_tokens[part.decode()]], dtype=np.int32)
                                   if k % 2 else self.encode(part) for k, part in enumerate(parts)])
        ids = _pieces(data, self.split)
        for k, pair in enumerate(self.merges):
            if len(ids) < 2:
                break
            ids = merge_pair(ids, pair, 256 + k)
        return ids[ids != SEPARATOR]
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
        document = {"format": FORMAT, "version": VERSION, "merges": [list(pair) for pair in self.merges],
                    "split": self.split, "special_tokens": list(self.special_tokens)}
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
        if document.get("version") not in (1, VERSION):
            raise ValueError(f"BPE.load: {path} has version {document.get('version')!r}; "
                             f"this tinyedu reads versions 1 and {VERSION}")
        if document["version"] == 1:  # before the pre-split and special tokens
            return cls(document.get("merges", None), split=False)
        return cls(document.get("merges", None), document.get("split") is True,
                   document.get("special_tokens", None))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, BPE) and (self.merges, self.split, self.special_tokens) == \
            (other.merges, other.split, other.special_tokens)

    def __repr__(self) -> str:
        return (f"BPE(vocab_size={self.vocab_size}, merges={len(self.merges)}, split={self.split}, "
                f"special_tokens={list(self.special_tokens)})")


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
