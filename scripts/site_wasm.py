"""The site's live lab, built with the site: chapter 08's CNN exported to WebAssembly for the digit page.

mkdocs' post-build hook (scripts/mkdocs_hooks.py) calls `build_lab(site_dir)`. It loads the small
committed checkpoint (docs/lab/digits_cnn.safetensors, written by scripts/train_lab_digits.py), exports
`digit_probabilities` (normalize as in training, the CNN, softmax) with `export_c(..., target="wasm")`
and writes `lab/digits.wasm`, `lab/digits.js` and `lab/status.json` into the built site. That takes a few
seconds (about ten kernels through tinyedu's lowering, one clang run). Where clang or wasm-ld is
missing, the site still builds: status.json then says what is missing, and the page shows it.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHECKPOINT = ROOT / "docs" / "lab" / "digits_cnn.safetensors"


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


def build_lab(site_dir: str | Path) -> dict:
    """Write lab/digits.wasm and lab/digits.js into the site (or, without the tools, why not)."""
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
    (out / "status.json").write_text(json.dumps(status, indent=1) + "\n")
    return status
