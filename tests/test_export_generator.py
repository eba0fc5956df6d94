"""tinyedu.export.generator: a GPT and its BPE tokenizer as one C program that writes text.

The program is compiled with the system's plain `cc -O2 gpt.c -lm` and run on prompts; the bytes it
prints must equal tinyedu's own greedy generation (GPT.generate with its KV cache, then the tokenizer's
decode): the same tokens, picked by argmax from logits that agree to float32 rounding. The
int8 model (weights stored as int8, dequantized inside the matmuls) exports the same way.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from tinyedu import Tensor
from tinyedu.export import export_generator
from tinyedu.export.generator import export_step, merge_rules
from tinyedu.models import GPT, quantize_int8
from tinyedu.models.portable_sampling import SplitMix64, portable_generate_tokens, portable_pick
from tinyedu.nn.state import get_parameters
from tinyedu.text import BPE, corpus, train_bpe

CC = os.environ.get("CC", "cc")
pytestmark = pytest.mark.skipif(shutil.which(CC) is None, reason="no C compiler")
TEXT = corpus()[:4000]  # a few KB of real text (Python source)


@pytest.fixture(scope="module")
def bpe() -> BPE:
    tokenizer = train_bpe(TEXT, 300)
    assert tokenizer.vocab_size == 300
    return tokenizer


def _model(positions: str, window: int | None) -> GPT:
    """A tiny GPT, untrained but with every parameter from N(0, 1): its logits are far apart, and greedy
    decoding picks varied tokens (from the N(0, 0.02²) start it repeats one token, nearly tied)."""
    Tensor.manual_seed(1)
    model = GPT(300, 32, dim=32, n_heads=2, n_layers=2, positions=positions, window=window)
    for parameter in get_parameters(model):
        parameter.assign(Tensor.normal(*parameter.shape)).realize()
    return model


def _compile(model: GPT, bpe: BPE, folder: Path) -> Path:
    source = export_generator(model, bpe, folder / "gpt.c")
    subprocess.run([CC, "-O2", str(source), "-o", str(folder / "gpt"), "-lm"], check=True)
    return folder / "gpt"


def _run(program: Path, *args: bytes | str) -> subprocess.CompletedProcess:
    return subprocess.run([str(program), *args], capture_output=True, timeout=60)


@pytest.mark.parametrize("positions, window, int8", [("rope", None, False), ("learned", 5, False),
                                                     ("rope", None, True)])
def test_c_generator_equals_tinyedu_greedy(bpe: BPE, tmp_path: Path, positions: str,
                                           window: int | None, int8: bool) -> None:
    model = quantize_int8(_model(positions, window)) if int8 else _model(positions, window)
    program = _compile(model, bpe, tmp_path)
    # short and long prompts, bytes outside ASCII, a prompt that runs into block_size (32 positions),
    # a piece of the training text (many merges apply) and bytes that are not UTF-8
    prompts = [(b"def ", 12), (b"import numpy as np\n", 20), (TEXT[1000:1040], 8), (b"\xc3\xa9t\xe9\xff", 9),
               (b"a", 31)]
    for prompt, new in prompts:
        ids = bpe.encode(prompt)
        new = min(new, model.block_size - len(ids))  # (more is refused: see the next test)
        expected = bpe.decode(model.generate(ids, new))
        result = _run(program, prompt, str(new))
        assert result.returncode == 0, result.stderr
        assert result.stdout == expected, (prompt, result.stdout, expected)
        assert result.stderr.startswith(f"\n{len(ids)} prompt + ".encode())  # the C encoder's token count
    assert len(set(model.generate(bpe.encode(b"a"), 31))) > 5  # the test is not a run of one token


def test_c_generator_stops_at_block_size_and_rejects_bad_arguments(bpe: BPE, tmp_path: Path) -> None:
    model = _model("rope", None)
    program = _compile(model, bpe, tmp_path)
    ids = bpe.encode(b"return ")
    too_many = _run(program, b"return ", "1000")  # refused with the reason, as generate refuses
    assert too_many.returncode == 1 and too_many.stdout == b""
    assert f"leaves room for {32 - len(ids)}".encode() in too_many.stderr
    with pytest.raises(ValueError):
        model.generate(ids, 1000)
    fits = _run(program, b"return ", str(32 - len(ids)))
    assert fits.returncode == 0 and fits.stdout == bpe.decode(model.generate(ids, 32 - len(ids)))
    assert _run(program, b"return ").stdout == fits.stdout  # the default: as many as fit
    assert _run(program, b"return ", "0").stdout == b"return "
    assert _run(program, b"x" * 40, "3").returncode == 1  # 40 tokens: more than block_size
    for args in [(b"",), (b"x", "-1"), (b"x", "5x"), (b"x", ""), (), (b"x", "1", "2")]:
        result = _run(program, *args)
        assert result.returncode == 2 and b"usage" in result.stderr, args


@pytest.mark.parametrize("temperature,top_k,seed", [(0.8, 0, 7), (1.5, 20, 12345), (0.5, 5, 0)])
def test_c_sampling_equals_tinyedu_portable_sampling(bpe: BPE, tmp_path: Path, temperature: float,
                                                     top_k: int, seed: int) -> None:
    """Sampled, not greedy: the C program's tokens are portable_generate_tokens' for the same seed."""
    model = _model("rope", None)
    program = _compile(model, bpe, tmp_path)
    ids = bpe.encode(b"def ")
    new = 32 - len(ids)
    tokens = portable_generate_tokens(model, ids, new, temperature, top_k or None, seed)
    result = _run(program, b"def ", str(new), str(temperature), str(top_k), str(seed))
    assert result.returncode == 0, result.stderr
    assert result.stdout == bpe.decode(tokens)
    assert tokens != model.generate(ids, new)  # it sampled: not the greedy tokens
    again = _run(program, b"def ", str(new), str(temperature), str(top_k), str(seed + 1))
    assert again.stdout != result.stdout  # the seed matters


def test_c_sampling_greedy_and_bad_sampling_arguments(bpe: BPE, tmp_path: Path) -> None:
    model = _model("rope", None)
    program = _compile(model, bpe, tmp_path)
    ids = bpe.encode(b"x = ")
    greedy = bpe.decode(model.generate(ids, 10))
    assert _run(program, b"x = ", "10", "0", "0", "3").stdout == greedy
    assert _run(program, b"x = ", "10", "2.0", "1", "3").stdout == greedy  # top_k 1 is greedy
    assert portable_generate_tokens(model, ids, 10) == model.generate(ids, 10)
    for args in [("10", "-1", "0", "1"), ("10", "1", "301", "1"), ("10", "1", "5", "-2"),
                 ("10", "x", "5", "1"), ("10", "1", "5")]:
        result = _run(program, b"x", *args)
        assert result.returncode == 2 and b"usage" in result.stderr, args


def test_splitmix64_known_values_and_portable_pick() -> None:
    """SplitMix64 from seed 0 gives the published first outputs (the reference C by Vigna)."""
    rng = SplitMix64(0)
    assert [rng.next_u64() for _ in range(3)] == [0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4,
                                                  0x06C45D188009454F]
    uniforms = [SplitMix64(s).next_uniform() for s in range(1000)]
    assert all(0.0 <= u < 1.0 for u in uniforms) and 0.45 < float(np.mean(uniforms)) < 0.55
    logits = np.array([0.0, 3.0, 1.0, 3.0, -2.0], dtype=np.float32)
    draws = [portable_pick(logits, 1.0, 3, SplitMix64(s)) for s in range(2000)]
    counts = np.bincount(draws, minlength=5) / len(draws)
    expected = np.exp([0.0, 3.0, 1.0, 3.0, -2.0]) * [0, 1, 1, 1, 0]
    np.testing.assert_allclose(counts, expected / expected.sum(), atol=0.03)  # top-3 softmax
    with pytest.raises(ValueError, match="seed"):
        SplitMix64(-1)


def test_step_embeds_its_weights_whatever_port_says(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PORT", "0")  # export_c alone would write a sidecar file, which main never reads
    program = export_step(GPT(260, 8, dim=8, n_heads=2, n_layers=1))
    assert program.embedded and "model_tok_emb_weight[2080] = {" in program.source
    assert [shape for shape, _ in program.inputs] == [(1, 1), (1,)] + [(1, 2, 8, 4)] * 2
    assert [shape for shape, _ in program.outputs] == [(260,)] + [(1, 2, 8, 4)] * 2


def test_export_generator_checks_the_vocabulary(bpe: BPE, tmp_path: Path) -> None:
    model = GPT(301, 8, dim=8, n_heads=2, n_layers=1)
    with pytest.raises(ValueError, match="301"):
        export_generator(model, bpe, tmp_path / "gpt.c")


def test_merge_rules_make_the_tokenizers_vocabulary(bpe: BPE) -> None:
    rules = merge_rules(bpe)
    assert [c for _, _, c in rules] == list(range(256, 300))
    assert all(bpe.vocab[c] == bpe.vocab[a] + bpe.vocab[b] for a, b, c in rules)


def test_generator_is_clean_under_sanitizers_and_warnings(bpe: BPE, tmp_path: Path) -> None:
    """-Wall -Wextra -pedantic say nothing; AddressSanitizer and UBSan see no out-of-bounds access, in the
    encoder (a prompt of many merges), the prefill and the decoding up to block_size."""
    model = _model("learned", None)
    source = export_generator(model, bpe, tmp_path / "gpt.c")
    warnings = subprocess.run([CC, "-O2", "-std=c11", "-Wall", "-Wextra", "-pedantic", "-c", str(source),
                               "-o", str(tmp_path / "gpt.o")], capture_output=True, text=True)
    assert warnings.returncode == 0 and warnings.stderr == "", warnings.stderr
    probe = subprocess.run([CC, "-fsanitize=address,undefined", "-x", "c", "-", "-o", str(tmp_path / "p")],
                           input="int main(void) { return 0; }", capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip("the C compiler has no AddressSanitizer here")
    subprocess.run([CC, "-O1", "-g", "-fsanitize=address,undefined", "-fno-sanitize-recover=all", str(source),
                    "-o", str(tmp_path / "gpt"), "-lm"], check=True)
    prompt = TEXT[2000:2030]
    ids = bpe.encode(prompt)
    result = _run(tmp_path / "gpt", prompt, str(32 - len(ids)))  # up to block_size
    assert result.returncode == 0, result.stderr
    assert result.stdout == bpe.decode(model.generate(ids, 32 - len(ids)))
