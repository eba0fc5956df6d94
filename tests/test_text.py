"""tinyedu.text: the shipped corpus (checksum, modules, split) and the byte-level BPE tokenizer, checked
against a slow, obviously-correct BPE written here (dict counts, the lowest-rank-pair encoding rule)."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tinyedu import Tensor
from tinyedu.export.generator import _tokenizer
from tinyedu.runtime.toolchain import find_compiler
from tinyedu.text import (
    BPE,
    END_OF_TEXT,
    corpus,
    corpus_modules,
    corpus_split,
    merge_pair,
    most_frequent_pair,
    pre_split,
    train_bpe,
)
from tinyedu.text.corpus import CORPUS_FILE, HEADER, join_modules, split_modules, split_text

ROOT = Path(__file__).resolve().parent.parent


def _make_corpus_script():
    """scripts/make_corpus.py as a module (it is a script, not part of the package)."""
    spec = importlib.util.spec_from_file_location("make_corpus", ROOT / "scripts" / "make_corpus.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ---------------------------------------------------------------------------------------------
# The reference: BPE as the definition says, one Python step at a time (slow; small texts only).
# ---------------------------------------------------------------------------------------------


def naive_merge(ids: list[int], pair: tuple[int, int], new_id: int) -> list[int]:
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and (ids[i], ids[i + 1]) == pair:
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


def naive_pieces(data: bytes, split: bool) -> list[bytes]:
    return pre_split(data) if split else [data]


def naive_train(data: bytes, vocab_size: int, split: bool = False) -> list[tuple[int, int]]:
    """Pairs are counted inside each piece (one piece, the whole text, without the split)."""
    pieces, merges = [list(piece) for piece in naive_pieces(data, split)], []
    for new_id in range(256, vocab_size):
        counts: dict[tuple[int, int], int] = {}
        for ids in pieces:
            for pair in zip(ids, ids[1:], strict=False):
                counts[pair] = counts.get(pair, 0) + 1
        if not counts or max(counts.values()) < 2:
            break
        best = min(counts, key=lambda p: (-counts[p], p))  # most frequent; the smallest pair on a tie
        merges.append(best)
        pieces = [naive_merge(ids, best, new_id) for ids in pieces]
    return merges


def naive_encode(data: bytes, merges: list[tuple[int, int]], split: bool = False) -> list[int]:
    """GPT-2's rule in each piece: repeatedly merge the present pair learned earliest (not in order)."""
    rank = {pair: k for k, pair in enumerate(merges)}
    out = []
    for piece in naive_pieces(data, split):
        ids = list(piece)
        while len(ids) >= 2:
            present = [pair for pair in zip(ids, ids[1:], strict=False) if pair in rank]
            if not present:
                break
            pair = min(present, key=rank.__getitem__)
            ids = naive_merge(ids, pair, 256 + rank[pair])
        out += ids
    return out


@pytest.fixture(scope="module")
def bpe() -> BPE:
    """A 512-token BPE trained on the corpus's training split."""
    return train_bpe(corpus_split(0.9)[0], 512)


# ---------------------------------------------------------------------------------------------
# The corpus
# ---------------------------------------------------------------------------------------------


def test_corpus_matches_its_readme() -> None:
    readme = (CORPUS_FILE.parent / "README.md").read_text()
    text = corpus()
    assert hashlib.sha256(text).hexdigest() == re.search(r"SHA-256 of the text: `([0-9a-f]{64})`", readme)[1]
    assert len(text) == int(re.search(r"Size of the text: (\d+) bytes", readme)[1])
    assert len(text) >= 1_000_000
    licence = (CORPUS_FILE.parent / "PSF-LICENSE.txt").read_text()
    assert licence.count("PYTHON SOFTWARE FOUNDATION LICENSE VERSION 2") == 1


def test_corpus_is_the_listed_modules_of_real_python() -> None:
    modules = corpus_modules()
    assert [name for name, _ in modules] == _make_corpus_script().MODULES
    assert b"".join(chunk for _, chunk in modules) == corpus()
    for name, chunk in modules:
        assert chunk.startswith(HEADER + name.encode() + b"\n")
        compile(chunk, name, "exec", dont_inherit=True)  # each module is whole, valid Python source


@pytest.mark.skipif(sys.version_info[:3] != (3, 11, 7), reason="the corpus is a snapshot of CPython 3.11.7")
def test_the_script_rebuilds_the_corpus_byte_for_byte() -> None:
    libdir = Path(sysconfig.get_paths()["stdlib"])
    if not (libdir / "argparse.py").is_file():
        pytest.skip(f"no standard-library sources in {libdir}")
    assert _make_corpus_script().build(libdir) == corpus()


def test_split_is_whole_modules_that_cover_the_corpus() -> None:
    train, validation = corpus_split(0.9)
    assert train + validation == corpus() and corpus_split(0.9) == (train, validation)
    train_names = [name for name, _ in split_modules(train)]
    validation_names = [name for name, _ in split_modules(validation)]
    assert train_names + validation_names == [name for name, _ in corpus_modules()]
    assert not set(train_names) & set(validation_names)
    assert 0.85 < len(train) / len(corpus()) < 0.95
    assert len(corpus_split(0.5)[0]) < len(train)


def test_split_cuts_at_the_nearest_module_boundary() -> None:
    text = join_modules([("a.py", b"x" * 9), ("b.py", b"y" * 9), ("c.py", b"z" * 9)])  # 3 chunks of 23
    assert len(text) == 69 and split_text(text, 0.4)[0] == text[:23]
    assert split_text(text, 0.6)[0] == text[:46]
    assert split_text(text, 0.5)[0] == text[:23]  # 34.5 is as near 23 as 46: the earlier boundary
    assert split_text(text, 0.01)[0] == text[:23] and split_text(text, 0.99)[1] == text[46:]
    assert [name for name, _ in split_modules(text)] == ["a.py", "b.py", "c.py"]


@pytest.mark.parametrize("fraction", [0, 1, -0.5, 1.5, float("nan"), float("inf"), True, "0.9", None])
def test_split_rejects_a_bad_fraction(fraction) -> None:
    with pytest.raises(ValueError, match="strictly between 0 and 1"):
        corpus_split(fraction)


def test_corpus_text_errors() -> None:
    with pytest.raises(ValueError, match="at least 2"):
        split_text(join_modules([("a.py", b"pass\n")]), 0.5)
    with pytest.raises(ValueError, match="does not start with a module header"):
        split_modules(b"import os\n")
    with pytest.raises(ValueError, match="b.py has a line starting with"):
        join_modules([("b.py", b"x = 1\n# file: c.py\n")])
    with pytest.raises(ValueError, match="one non-empty line"):
        join_modules([("a\nb.py", b"")])


# ---------------------------------------------------------------------------------------------
# BPE against the reference
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("split", [False, True])
def test_merges_and_encoding_equal_the_reference_on_real_text(split: bool) -> None:
    text = corpus()[:4000]
    trained = train_bpe(text, 330, split=split)
    assert trained.merges == naive_train(text, 330, split) and len(trained.merges) == 74
    sample = corpus_split(0.9)[1][:1500]  # text it was not trained on
    assert trained.encode(sample).tolist() == naive_encode(sample, trained.merges, split)
    assert trained.encode(text).tolist() == naive_encode(text, trained.merges, split)


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=120), st.integers(256, 300), st.booleans())
def test_merges_equal_the_reference_on_repetitive_bytes(raw: bytes, vocab_size: int, split: bool) -> None:
    data = bytes(b"ab \n'"[byte % 5] for byte in raw)  # five symbols: many repeats, runs, ties, pieces
    trained = train_bpe(data, vocab_size, split=split)
    assert trained.merges == naive_train(data, vocab_size, split)
    assert trained.encode(data).tolist() == naive_encode(data, trained.merges, split)
    assert trained.decode(trained.encode(data)) == data


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 2), max_size=40), st.integers(0, 2), st.integers(0, 2))
def test_merge_pair_equals_the_reference(ids: list[int], first: int, second: int) -> None:
    merged = merge_pair(np.array(ids, dtype=np.int32), (first, second), 9)
    assert merged.tolist() == naive_merge(ids, (first, second), 9)


def test_runs_merge_from_the_left_and_overlapping_pairs_count() -> None:
    assert merge_pair(np.array([7, 7, 7, 7, 7], dtype=np.int32), (7, 7), 256).tolist() == [256, 256, 7]
    assert most_frequent_pair(np.array([7, 7, 7], dtype=np.int32), 256) == ((7, 7), 2)
    assert most_frequent_pair(np.array([5], dtype=np.int32), 256) == ((0, 0), 0)


def test_ties_go_to_the_smallest_pair() -> None:
    assert train_bpe(b"xyxy abab", 257).merges == [(ord("a"), ord("b"))]  # (a, b) and (x, y): 2 each
    assert train_bpe(b"xyxy abab", 300).merges == train_bpe(b"xyxy abab", 300).merges


def test_the_sorting_count_equals_the_dense_table() -> None:
    ids = np.frombuffer(corpus()[:20000], dtype=np.uint8).astype(np.int32)
    assert most_frequent_pair(ids, 256) == most_frequent_pair(ids, 70000)  # 70000² bins: counted by sorting
    big = train_bpe(corpus()[:3000], 400, split=False)
    assert big.merges == naive_train(corpus()[:3000], 400)
    assert big.vocab_size > 280  # from 279 tokens on, 279² > 4 * 3000 + 65536: pairs counted by sorting


def test_training_stops_when_no_pair_repeats() -> None:
    assert train_bpe(b"abc", 1000).vocab_size == 256
    assert train_bpe(b"abab", 1000).merges == [(97, 98)]
    assert train_bpe(b"", 300) == BPE([]) and train_bpe("", 256).merges == []


# ---------------------------------------------------------------------------------------------
# Round trips, files, errors
# ---------------------------------------------------------------------------------------------


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=300))
def test_round_trip_on_any_bytes(bpe: BPE, data: bytes) -> None:
    ids = bpe.encode(data)
    assert ids.dtype == np.int32 and ids.ndim == 1
    assert bpe.decode(ids) == data and bpe.decode(ids.tolist()) == data


def test_decode_takes_a_tensor_of_ids(bpe: BPE) -> None:
    ids = bpe.encode("def f(self):\n    return 1\n")
    assert bpe.decode(Tensor(ids)) == b"def f(self):\n    return 1\n"
    assert bpe.decode(Tensor(ids.astype(np.int64))) == bpe.decode(ids)


@settings(max_examples=50, deadline=None)
@given(st.text(max_size=100))
def test_round_trip_on_any_text(bpe: BPE, text: str) -> None:
    assert bpe.decode(bpe.encode(text)) == text.encode("utf-8")
    assert bpe.decode_text(bpe.encode(text)) == text


@pytest.mark.parametrize("data", [b"", b"a", b"\x00" * 1000, bytes(range(256)), b"\xff\xfe\xe2\x82",
                                  "naïve café ☕ 𝔘", b"    " * 500, b"\r\n\t\x0c"])
def test_round_trip_on_edge_inputs(bpe: BPE, data: bytes | str) -> None:
    raw = data.encode("utf-8") if isinstance(data, str) else data
    assert bpe.decode(bpe.encode(data)) == raw


def test_round_trip_on_the_corpus_and_compression(bpe: BPE) -> None:
    text = corpus()
    ids = bpe.encode(text)
    assert bpe.decode(ids) == text
    validation = corpus_split(0.9)[1]
    assert len(bpe.encode(validation)) < len(validation) / 2  # merges learned on train still compress
    assert ids.max() == 511 and ids.min() >= 0


def test_training_is_deterministic(bpe: BPE) -> None:
    again = train_bpe(corpus_split(0.9)[0], 512)
    assert again == bpe and again.merges[:4] == [(32, 32), (256, 256), (256, 32), (257, 257)]
    assert [len(token) for token in bpe.vocab[256:260]] == [2, 4, 3, 8]


def test_describe_and_token_str(bpe: BPE) -> None:
    lines = bpe.describe(3)
    assert lines == ["256: ' ' + ' ' -> '  '", "257: '  ' + '  ' -> '    '",
                     "258: '  ' + ' ' -> '   '"]
    assert len(bpe.describe()) == len(bpe.merges) == 256 and bpe.describe(0) == []
    with pytest.raises(ValueError, match="n must be a count of merges"):
        bpe.describe(-1)
    assert bpe.token_str(10) == "'\\n'" and bpe.token_str(0xE2) == "b'\\xe2'"
    with pytest.raises(ValueError, match="512 is not a token id"):
        bpe.token_str(512)


def test_save_and_load(bpe: BPE, tmp_path: Path) -> None:
    path = tmp_path / "bpe.json"
    bpe.save(path)
    loaded = BPE.load(path)
    assert loaded == bpe and loaded.vocab == bpe.vocab and path.stat().st_size < 20_000
    assert json.loads(path.read_text())["format"] == "tinyedu-bpe"


@pytest.mark.parametrize("content, message", [
    ("not json", "is not JSON"),
    ('{"merges": []}', "is not a tinyedu BPE file"),
    ('{"format": "tinyedu-bpe", "version": 3, "merges": []}', "has version 3"),
    ('{"format": "tinyedu-bpe", "version": 2, "merges": [], "special_tokens": [""]}', "special_tokens must"),
    ('{"format": "tinyedu-bpe", "version": 1, "merges": [[97, 256]]}', "merge 0 \\(token 256\\)"),
    ('{"format": "tinyedu-bpe", "version": 1, "merges": [[97, 98], [97, 98]]}', "merged twice"),
    ('{"format": "tinyedu-bpe", "version": 1, "merges": [[97, true]]}', "two token ids"),
])  # fmt: skip
def test_load_rejects_bad_files(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises((ValueError, TypeError), match=message):
        BPE.load(path)


def test_clear_errors(bpe: BPE) -> None:
    with pytest.raises(ValueError, match="at least 256"):
        train_bpe(b"abc", 255)
    for bad_size in (True, 300.0, "512"):
        with pytest.raises(ValueError, match="vocab_size must be an int"):
            train_bpe(b"abc", bad_size)
    with pytest.raises(TypeError, match="expected bytes or str, got list"):
        bpe.encode([1, 2, 3])
    with pytest.raises(ValueError, match="cannot be written as UTF-8"):
        bpe.encode("a\ud800b")
    with pytest.raises(ValueError, match="token id 512 is not in the vocabulary \\(vocab_size 512"):
        bpe.decode([1, 512, 2])
    with pytest.raises(ValueError, match="token id -1 is not in the vocabulary"):
        bpe.decode(np.array([-1]))
    with pytest.raises(TypeError, match="integer token ids"):
        bpe.decode([1.0, 2.0])
    with pytest.raises(TypeError, match="1-D"):
        bpe.decode(np.zeros((2, 2), dtype=np.int32))
    for not_ids in (b"ab", "ab", 5, np.int32(5)):
        with pytest.raises(TypeError, match="expected a sequence of token ids"):
            bpe.decode(not_ids)
    assert bpe.decode([]) == b"" and bpe.encode(b"").tolist() == [] and bpe.decode([5]) == b"\x05"


# ---------------------------------------------------------------------------------------------
# The pre-split, in Python and in the exported generator's C
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("text, pieces", [
    (b"x =    y", [b"x", b" =", b"   ", b" y"]),
    (b"it's don't we'll they've you're I'm he'd 'S", [b"it", b"'s", b" don", b"'t", b" we", b"'ll", b" they",
                                                      b"'ve", b" you", b"'re", b" I", b"'m", b" he", b"'d",
                                                      b" '", b"S"]),
    (b"def f(self):\n        return 1\n\n", [b"def", b" f", b"(", b"self", b"):", b"\n       ", b" return",
                                             b" 1", b"\n\n"]),
    (b"caf\xc3\xa9 \xff\xfe 123abc", [b"caf\xc3\xa9", b" \xff\xfe", b" 123", b"abc"]),
    (b"\t\ta  ", [b"\t", b"\t", b"a", b"  "]),  # only a space joins the word after it
    (b" \n a", [b" \n", b" a"]),
])  # fmt: skip
def test_pre_split_pieces(text: bytes, pieces: list[bytes]) -> None:
    assert pre_split(text) == pieces


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=200))
def test_pre_split_covers_the_text(data: bytes) -> None:
    assert b"".join(pre_split(data)) == data and b"" not in pre_split(data)


def test_merges_stay_inside_pieces(bpe: BPE) -> None:
    assert all(pre_split(token) == [token] for token in bpe.vocab[256:])  # no token spans two pieces
    whole = train_bpe(corpus_split(0.9)[0][:200_000], 400, split=False)
    assert any(len(pre_split(token)) > 1 for token in whole.vocab[256:])  # as "e " or "):\n    " do
    text = b"x = 1\nif x:\n    return x  \n"
    assert [bpe.decode([t]) for t in bpe.encode(text)][:3] == [b"x", b" =", b" 1"]


def test_special_tokens(tmp_path: Path) -> None:
    bpe = train_bpe(corpus()[:20_000], 300, special_tokens=[END_OF_TEXT])
    eot = bpe.special_tokens[END_OF_TEXT]
    assert eot == 299 == bpe.vocab_size - 1 and len(bpe.merges) == 43
    text = "a = 1<|endoftext|>b = 2"
    ids = bpe.encode(text, allowed_special=True)
    assert (ids == eot).sum() == 1 and bpe.decode(ids) == text.encode()
    assert eot not in bpe.encode(text).tolist() and bpe.decode(bpe.encode(text)) == text.encode()
    assert bpe.encode("<|endoftext|>", allowed_special=True).tolist() == [eot]
    bpe.save(tmp_path / "bpe.json")
    assert BPE.load(tmp_path / "bpe.json") == bpe
    (tmp_path / "v1.json").write_text('{"format": "tinyedu-bpe", "version": 1, "merges": [[97, 98]]}')
    old = BPE.load(tmp_path / "v1.json")
    assert not old.split and old.encode(b"a ab").tolist() == [97, 32, 256]
    with pytest.raises(ValueError, match="special_tokens must be a list of distinct"):
        train_bpe(b"abc", 300, special_tokens="<|endoftext|>")
    with pytest.raises(ValueError, match="at least 256 \\(the bytes\\) \\+ 1"):
        train_bpe(b"abc", 256, special_tokens=[END_OF_TEXT])


TRICKY = [b"", b"a", bytes(range(256)), bytes(range(255, -1, -1)) * 2, b"\xff\xfe\xe2\x82 \x80x",
          "naïve café ☕ 𝔘 ünïcode".encode(), b"it's don't we'll they've you're I'm he'd 'x '' 's",
          b"x =    y\t\t z   \n\n\n    ", b"def f(self):\n        return 1\n\n\nclass A:\n\tpass\r\n",
          b"   ", b" ", b"\n", b"'", b"'l", b"'ll", b"a1b2 33 4.5e-6 __init__ <|endoftext|>",
          b"\x00\x00 \x00"]


def test_c_tokenizer_equals_python(bpe: BPE, tmp_path: Path) -> None:
    """The exported generator's C tokenizer (pre-split scanner + merges) gives Python's tokens."""
    source = "#include <stdio.h>\n#include <stdlib.h>\n" + _tokenizer(bpe) + r"""
int main(int argc, char** argv) {
  FILE* f = fopen(argv[1], "rb");
  static unsigned char text[1 << 16];
  static int ids[1 << 16];
  int n = (int)fread(text, 1, sizeof text, f);
  fclose(f);
  for (int i = 0; i < n; i = piece_end(text, n, i)) printf("%d ", piece_end(text, n, i) - i);
  printf("\n");
  int count = bpe_encode(text, n, ids);
  for (int i = 0; i < count; i++) printf("%d ", ids[i]);
  if (argc > 2) print_token(ids[0]);  /* (used, so -Wall is quiet) */
  return 0;
}
"""
    (tmp_path / "tok.c").write_text(source)
    subprocess.run([find_compiler(), "-O1", "-Wall", "-Werror", str(tmp_path / "tok.c"), "-o",
                    str(tmp_path / "tok")], check=True)
    rng = np.random.default_rng(0)
    randoms = [rng.integers(0, 256, 300, dtype=np.uint8).tobytes(),
               bytes(rng.choice(list(b"ab1 \n\t'.\xc3"), 400).tolist()), corpus_split(0.9)[1][:5000]]
    for text in TRICKY + randoms:
        (tmp_path / "in.bin").write_bytes(text)
        out = subprocess.run([str(tmp_path / "tok"), str(tmp_path / "in.bin")], capture_output=True,
                             check=True, timeout=60).stdout.split(b"\n")
        assert [int(n) for n in out[0].split()] == [len(piece) for piece in pre_split(text)], text[:60]
        assert [int(t) for t in out[1].split()] == bpe.encode(text).tolist(), text[:60]
