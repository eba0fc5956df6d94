"""tinyedu.export.wasm_generator: the generator's C compiled libc-free for wasm32, run through wasmtime.

Its tokens must equal tinyedu's: GPT.generate's for greedy decoding, portable_generate_tokens' for a
temperature, top-k and seed (the SplitMix64 rule the C generator and the text page share).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tinyedu import Tensor
from tinyedu.export.wasm_generator import build_wasm_generator, run_wasm_generator
from tinyedu.models import GPT
from tinyedu.models.portable_sampling import portable_generate_tokens
from tinyedu.nn.state import get_parameters
from tinyedu.text import BPE, corpus, train_bpe

pytest.importorskip("wasmtime")
pytestmark = pytest.mark.skipif(shutil.which("clang") is None or shutil.which("wasm-ld") is None,
                                reason="no clang / wasm-ld")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[GPT, BPE, Path]:
    bpe = train_bpe(corpus()[:4000], 300)
    Tensor.manual_seed(1)
    model = GPT(300, 32, dim=32, n_heads=2, n_layers=2, positions="rope")
    for parameter in get_parameters(model):  # N(0, 1) weights: varied greedy tokens (see the C test)
        parameter.assign(Tensor.normal(*parameter.shape)).realize()
    return model, bpe, build_wasm_generator(model, bpe, tmp_path_factory.mktemp("wg") / "gpt.wasm")


def test_wasm_generator_greedy_equals_tinyedu(built: tuple[GPT, BPE, Path]) -> None:
    model, bpe, wasm = built
    ids = bpe.encode(b"def main(")
    expected = model.generate(ids, 32 - len(ids))
    assert len(set(expected[len(ids):])) >= 3  # not a run of one token
    assert run_wasm_generator(wasm, b"def main(", 32 - len(ids)) == expected
    assert run_wasm_generator(wasm, b"def main(", 100) == expected  # stops at block_size, not past it


@pytest.mark.parametrize("temperature,top_k,seed", [(0.8, 0, 7), (1.5, 20, 12345)])
def test_wasm_generator_sampling_equals_tinyedu(built: tuple[GPT, BPE, Path], temperature: float,
                                                top_k: int, seed: int) -> None:
    model, bpe, wasm = built
    ids = bpe.encode(b"x = ")
    expected = portable_generate_tokens(model, ids, 20, temperature, top_k or None, seed)
    assert expected != model.generate(ids, 20)
    assert run_wasm_generator(wasm, b"x = ", 20, temperature, top_k, seed) == expected


def test_wasm_generator_refuses_bad_input(built: tuple[GPT, BPE, Path]) -> None:
    _, _, wasm = built
    with pytest.raises(ValueError, match="empty"):
        run_wasm_generator(wasm, b"", 3)
    with pytest.raises(ValueError, match="block_size"):
        run_wasm_generator(wasm, b"x" * 40, 3)  # 40 tokens: more than 32 positions
    with pytest.raises(ValueError, match="temperature"):
        run_wasm_generator(wasm, b"x", 3, -1.0)
    with pytest.raises(ValueError, match="block_size"):
        run_wasm_generator(wasm, b"x" * 5000, 3)
