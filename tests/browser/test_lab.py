"""The live lab's digit page in headless Chromium: a stroke replayed on the canvas, the page's numbers
against tinyedu's.

The site is built with `mkdocs build --strict` (which runs scripts/site_wasm.py: the CNN exported to
WebAssembly), served on 127.0.0.1 and opened with `#replay=STROKES`, which draws the strokes on the
canvas the way the pointer does and reads the digit. The page writes the 28x28 input it made and the
ten probabilities into `#lab-numbers`; tinyedu runs the same CNN on that input, and the two must agree.
"""

from __future__ import annotations

import functools
import http.server
import json
import re
import subprocess
import sys
import threading
from dataclasses import replace
from pathlib import Path
from urllib.parse import quote

import numpy as np
import pytest

from tests.browser.test_site import QuietHandler, find_chromium

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.browser
ONE = [[[140, 40], [142, 140], [140, 240]]]
SEVEN = [[[70, 50], [210, 50], [180, 110], [140, 180], [120, 245]], [[110, 140], [190, 140]]]


def site_wasm():
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import site_wasm
    finally:
        sys.path.pop(0)
    return site_wasm


@pytest.fixture(scope="module")
def lab_url(tmp_path_factory: pytest.TempPathFactory):
    if find_chromium() is None:
        pytest.skip("no Chromium found: install it or set CHROMIUM=/path/to/chrome")
    out = tmp_path_factory.mktemp("lab-site")
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{proc.stdout}\n{proc.stderr}"
    status = json.loads((out / "lab" / "status.json").read_text())
    if not status["digits"]["ok"]:
        pytest.skip(f"the site was built without the digit model: {status['digits']['missing']}")
    handler = functools.partial(QuietHandler, directory=str(out))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}/lab_digits/"
    server.shutdown()


def open_page(url: str, tmp_path: Path) -> str:
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--disable-dev-shm-usage", f"--user-data-dir={tmp_path / 'profile'}"]
    proc = subprocess.run([find_chromium(), *flags, "--virtual-time-budget=10000", "--dump-dom", url],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def page_numbers(dom: str) -> tuple[np.ndarray, np.ndarray]:
    found = re.search(r'<pre id="lab-numbers">(.*?)</pre>', dom, re.DOTALL)
    assert found and found.group(1), "the page wrote no numbers: " + re.sub(r"\s+", " ", dom)[-1500:]
    numbers = json.loads(found.group(1))
    return np.array(numbers["input"], np.float32), np.array(numbers["probabilities"], np.float32)


@pytest.mark.parametrize("strokes, digit", [(ONE, 1), (SEVEN, 7)], ids=["one", "seven"])
def test_drawn_digit_gives_tinyedus_probabilities(lab_url: str, tmp_path: Path, strokes, digit: int) -> None:
    from tinyedu import Tensor

    dom = open_page(lab_url + "#replay=" + quote(json.dumps(strokes)), tmp_path)
    pixels, probabilities = page_numbers(dom)
    assert pixels.shape == (784,) and probabilities.shape == (10,)
    _, model = site_wasm().digit_model()
    expected = model(Tensor(pixels.reshape(1, 1, 28, 28))).numpy()[0]
    np.testing.assert_allclose(probabilities, expected, rtol=1e-4, atol=1e-6)
    assert probabilities.argmax() == digit
    # MNIST's framing: the ink in a 20x20 box (plus a pixel of smoothing), its centre of mass at the centre
    image = pixels.reshape(28, 28)
    rows, cols = np.nonzero(image > 0.05)
    assert rows.max() - rows.min() <= 21 and cols.max() - cols.min() <= 21
    weights = image / image.sum()
    centre = ((weights.sum(1) * np.arange(28)).sum(), (weights.sum(0) * np.arange(28)).sum())
    assert all(abs(c - 13.5) <= 1.0 for c in centre), centre
    assert "your CPU running WebAssembly compiled from tinyedu's kernels" in dom
    trained = json.loads((ROOT / "docs" / "lab" / "digits_cnn.json").read_text())
    assert f"{100 * trained['held_out_accuracy']:.1f}% right on 2,000 held-out digits" in dom


def test_empty_canvas_is_refused(lab_url: str, tmp_path: Path) -> None:
    dom = open_page(lab_url + "#replay=" + quote("[]"), tmp_path)
    assert "The canvas is empty: draw a digit" in dom
    assert re.search(r'<pre id="lab-numbers"></pre>', dom)


def test_site_builds_without_clang_and_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tinyedu.export import targets

    monkeypatch.setattr(targets, "WASM_TARGET", replace(targets.WASM_TARGET, compiler=("no-such-clang",)))
    status = site_wasm().build_lab(tmp_path)
    assert status["digits"]["ok"] is False and "no-such-clang" in status["digits"]["missing"]
    assert "apt-get install clang lld" in status["digits"]["missing"]
    assert not (tmp_path / "lab" / "digits.wasm").exists()
