"""The site's live lab, built with the site: chapter 08's CNN and chapter 13's GPT exported to WebAssembly.

mkdocs' post-build hook (scripts/mkdocs_hooks.py) calls `build_lab(site_dir)`, which writes into the
built site:

- the digit page's model: it loads the small committed checkpoint (docs/lab/digits_cnn.safetensors,
  written by scripts/train_lab_digits.py), exports `digit_probabilities` (normalize as in training,
  the CNN, softmax) with `export_c(..., target="wasm")` and writes `lab/digits.wasm` and
  `lab/digits.js` (about ten kernels through tinyedu's lowering, one clang run: two seconds);
- the text page's generator: chapter 13's GPT from docs/lab/text_gpt.safetensors and its tokenizer
  from docs/lab/text_bpe.json (both written by scripts/train_lab_text.py), exported with
  `build_wasm_generator` (the decoding step with its KV caches, the BPE encoder and the portable
  sampler in one libc-free module) as `lab/text.wasm` (about three seconds);
- `lab/status.json`: for each page, whether its module was built, its size and the facts it quotes.

Where clang or wasm-ld is missing, the site still builds: status.json then says what is missing, and
the pages show it.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHECKPOINT = ROOT / "docs" / "lab" / "digits_cnn.safetensors"
TEXT_CHECKPOINT = ROOT / "docs" / "lab" / "text_gpt.safetensors"
TEXT_TOKENIZER = ROOT / "docs" / "lab" / "text_bpe.json"
TEXT_FACTS = ROOT / "docs" / "lab" / "text_gpt.json"


def digit_model():
    """The trained CNN and the function the page runs: pixels in [0, 1] (1, 1, 28, 28) -> 10 probabilities."""
    from tinyedu.models import MnistCNN
    from tinyedu.models.tasks import MNIST_MEAN, MNIST_STD
    from tinyedu.nn.state import load_state_dict, safe_load

    cnn = MnistCNN()
    load_state_dict(cnn, safe_load(CHECKPOINT))

    def digit_probabilities(pixels):
        return cnn((pixels - MNIST_MEAN) / MNIST_STD).softmax(-1)

    return cnn, digit_probabilities


def text_model():
    """Chapter 13's GPT as the text page runs it, and its tokenizer: (model, bpe)."""
    from tinyedu.models import GPT
    from tinyedu.nn.state import load_state_dict, safe_load
    from tinyedu.text import BPE

    facts = json.loads(TEXT_FACTS.read_text())
    model = GPT(facts["vocab_size"], facts["block_size"], dim=facts["dim"], n_heads=facts["n_heads"],
                n_layers=facts["n_layers"], positions=facts["positions"])
    load_state_dict(model, safe_load(TEXT_CHECKPOINT))
    return model, BPE.load(TEXT_TOKENIZER)


def build_text(out: Path) -> dict:
    """Write out/text.wasm, the text page's generator; its status entry (or, without the tools, why not)."""
    from tinyedu.export.wasm_generator import TEXT_BYTES, build_wasm_generator

    facts = json.loads(TEXT_FACTS.read_text())
    try:
        model, bpe = text_model()
        with tempfile.TemporaryDirectory() as tmp:
            shutil.copy(build_wasm_generator(model, bpe, Path(tmp) / "text.wasm"), out / "text.wasm")
        status = {"ok": True, "bytes": (out / "text.wasm").stat().st_size, "text_bytes": TEXT_BYTES}
    except (RuntimeError, OSError) as error:  # no clang / wasm-ld: the page says so
        status = {"ok": False, "missing": str(error).splitlines()[0]}
    status["trained"] = facts
    return status


def build_lab(site_dir: str | Path) -> dict:
    """Write lab/digits.wasm, lab/digits.js and lab/text.wasm into the site (or, without the tools, why
    not), and lab/status.json, which the pages read."""
    import numpy as np

    from tinyedu import Tensor
    from tinyedu.export import export_c

    out = Path(site_dir) / "lab"
    out.mkdir(parents=True, exist_ok=True)
    status: dict = {}
    try:
        _, model = digit_model()
        program = export_c(model, Tensor(np.zeros((1, 1, 28, 28), np.float32)), name="digits", target="wasm")
        with tempfile.TemporaryDirectory() as tmp:
            wasm = program.compile(tmp)
            for suffix in (".wasm", ".js"):
                shutil.copy(wasm.with_suffix(suffix), out / f"digits{suffix}")
        status["digits"] = {"ok": True, "bytes": (out / "digits.wasm").stat().st_size,
                            "kernels": program.stats["kernels"]}
    except (RuntimeError, OSError) as error:  # no clang / wasm-ld: the page says so
        status["digits"] = {"ok": False, "missing": str(error).splitlines()[0]}
    status["digits"]["trained"] = json.loads((ROOT / "docs" / "lab" / "digits_cnn.json").read_text())
    status["text"] = build_text(out)
    (out / "status.json").write_text(json.dumps(status, indent=1) + "\n")
    return status
