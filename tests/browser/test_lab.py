"""The live lab in headless Chromium: the digit page's numbers and the text page's tokens against tinyedu's.

The site is built with `mkdocs build --strict` (which runs scripts/site_wasm.py: the CNN and the GPT
exported to WebAssembly) and served on 127.0.0.1.

- The digit page is opened with `#replay=STROKES`, which draws the strokes on the canvas the way the
  pointer does and reads the digit. The page writes the 28x28 input it made and the ten probabilities
  into `#lab-numbers`; tinyedu runs the same CNN on that input, and the two must agree.
- The text page is opened with `#prompt=...&new=N` (greedy) or with `&temperature=T&top_k=K&seed=S`
  (sampled), which fills its controls and generates. The page writes the prompt's and the new tokens'
  ids into `#text-numbers`; they must equal GPT.generate's (greedy) or portable_generate_tokens' (the
  sampling rule the module's C shares) on the same prompt, and `#text-out` must show their bytes.
"""

from __future__ import annotations

import functools
import html
import http.server
import json
import re
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import replace
from pathlib import Path
from urllib.parse import quote, urlencode

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
def lab_site(tmp_path_factory: pytest.TempPathFactory):
    """The built site served on 127.0.0.1: (its URL, lab/status.json)."""
    if find_chromium() is None:
        pytest.skip("no Chromium found: install it or set CHROMIUM=/path/to/chrome")
    out = tmp_path_factory.mktemp("lab-site")
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{proc.stdout}\n{proc.stderr}"
    status = json.loads((out / "lab" / "status.json").read_text())
    handler = functools.partial(QuietHandler, directory=str(out))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}/", status
    server.shutdown()


@pytest.fixture(scope="module")
def lab_url(lab_site: tuple[str, dict]) -> str:
    return lab_page(lab_site, "digits", "digit")


@pytest.fixture(scope="module")
def text_url(lab_site: tuple[str, dict]) -> str:
    return lab_page(lab_site, "text", "text")


def lab_page(lab_site: tuple[str, dict], name: str, model: str) -> str:
    """The page's URL, or a skip saying why the site was built without its model."""
    url, status = lab_site
    if not status[name]["ok"]:
        pytest.skip(f"the site was built without the {model} model: {status[name]['missing']}")
    return url + f"lab_{name}/"


def page_numbers(dom: str) -> tuple[np.ndarray, np.ndarray]:
    found = re.search(r'<pre id="lab-numbers">(.*?)</pre>', dom, re.DOTALL)
    assert found and found.group(1), "the page wrote no numbers: " + re.sub(r"\s+", " ", dom)[-1500:]
    numbers = json.loads(found.group(1))
    return np.array(numbers["input"], np.float32), np.array(numbers["probabilities"], np.float32)


@pytest.mark.parametrize("strokes, digit", [(ONE, 1), (SEVEN, 7)], ids=["one", "seven"])
def test_drawn_digit_gives_tinyedus_probabilities(lab_url: str, tmp_path: Path, strokes, digit: int) -> None:
    from tinyedu import Tensor

    dom = live_page(lab_url + "#replay=" + quote(json.dumps(strokes)), "lab-numbers", tmp_path, whole=True)
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
    said = "The canvas is empty: draw a digit"
    dom = live_page(lab_url + "#replay=" + quote("[]"), "lab-message", tmp_path, whole=True, until=said)
    assert "The canvas is empty: draw a digit" in dom
    assert re.search(r'<pre id="lab-numbers"></pre>', dom)


def test_site_builds_without_clang_and_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tinyedu.export import targets

    monkeypatch.setattr(targets, "WASM_TARGET", replace(targets.WASM_TARGET, compiler=("no-such-clang",)))
    status = site_wasm().build_lab(tmp_path)
    for page, wasm in (("digits", "digits.wasm"), ("text", "text.wasm")):
        assert status[page]["ok"] is False and "no-such-clang" in status[page]["missing"]
        assert "apt-get install clang lld" in status[page]["missing"]
        assert not (tmp_path / "lab" / wasm).exists()
    assert status["text"]["trained"]["block_size"] == 64  # the page still quotes the model's facts


PROMPT = "class Stack:\n    def push(self, item):"


def page_tokens(dom: str) -> dict:
    found = re.search(r'<pre id="text-numbers">(.*?)</pre>', dom, re.DOTALL)
    assert found and found.group(1), "the page wrote no tokens: " + re.sub(r"\s+", " ", dom)[-1500:]
    return json.loads(found.group(1))


def page_text(dom: str) -> str:
    found = re.search(r'<pre id="text-out">(.*?)</pre>', dom, re.DOTALL)
    assert found, "the page has no output"
    return html.unescape(re.sub(r"<[^>]*>", "", found.group(1)))


@pytest.mark.parametrize("prompt, new", [(PROMPT, 24), ("    return sorted(", 200)],
                         ids=["stack", "to-block-size"])
def test_greedy_text_gives_tinyedus_tokens(text_url: str, tmp_path: Path, prompt: str, new: int) -> None:
    query = urlencode({"prompt": prompt, "new": new}, quote_via=quote)
    dom = live_page(text_url + "#" + query, "text-numbers", tmp_path, whole=True)
    result = page_tokens(dom)
    model, bpe = site_wasm().text_model()
    ids = bpe.encode(prompt).tolist()
    assert result["prompt_tokens"] == len(ids) and result["tokens"][:len(ids)] == ids
    room = model.block_size - len(ids)
    expected = model.generate(ids, min(new, room))
    assert result["tokens"] == expected
    assert page_text(dom) == bpe.decode(expected).decode("utf-8", errors="replace")
    assert "your CPU running WebAssembly compiled from tinyedu's kernels" in dom
    if new > room:
        assert f"It stopped at the model's {model.block_size} positions (block_size)" in dom


@pytest.mark.parametrize("temperature, top_k, seed", [(0.8, 40, 7), (1.0, 0, 12345)])
def test_sampled_text_gives_tinyedus_tokens(text_url: str, tmp_path: Path, temperature: float, top_k: int,
                                            seed: int) -> None:
    from tinyedu.models.portable_sampling import portable_generate_tokens

    query = {"prompt": PROMPT, "new": 24, "temperature": temperature, "top_k": top_k, "seed": seed}
    url = text_url + "#" + urlencode(query, quote_via=quote)
    result = page_tokens(live_page(url, "text-numbers", tmp_path, whole=True))
    model, bpe = site_wasm().text_model()
    ids = bpe.encode(PROMPT).tolist()
    expected = portable_generate_tokens(model, ids, 24, temperature, top_k or None, seed)
    assert expected != model.generate(ids, 24)  # the draw made a difference
    assert result["tokens"] == expected


@pytest.mark.parametrize("prompt, said", [
    ("", "The prompt is empty"),
    ("x = 1\n" * 20, "The prompt is longer than the model's 64 positions"),  # 80 tokens
    ("x" * 5000, "the module takes at most 4,096"),
], ids=["empty", "past-block-size", "past-the-buffer"])
def test_text_page_refuses_bad_prompts(text_url: str, tmp_path: Path, prompt: str, said: str) -> None:
    # on real time: a prompt is measured in tokens once the module has compiled, which a busy
    # machine can make outlast --dump-dom's virtual time
    url = text_url + "#" + urlencode({"prompt": prompt, "new": 8}, quote_via=quote)
    dom = live_page(url, "text-message", tmp_path, whole=True, until=said)
    assert said in dom
    assert re.search(r'<pre id="text-numbers"></pre>', dom)


def live_page(url: str, element: str, tmp_path: Path, timeout: float = 120, whole: bool = False,
              until: str = "") -> str:
    """Open `url` in headless Chromium on real time (--dump-dom's virtual time stops performance.now(),
    and can run out while a large module compiles on a busy machine) through the DevTools protocol,
    and return #element's text once the page has written it, or once it contains `until` (with
    `whole`: the page's HTML then)."""
    websocket = pytest.importorskip("websocket", reason="this test drives Chromium with websocket-client")
    from tests.browser.test_webgpu_page import free_port

    port = free_port()
    proc = subprocess.Popen([find_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                             "--disable-quic", f"--remote-debugging-port={port}",
                             f"--user-data-dir={tmp_path / 'profile'}", url],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        target, deadline = None, time.time() + 30
        while target is None and time.time() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/json", timeout=2) as answer:
                    target = next((t for t in json.load(answer) if t.get("type") == "page"
                                   and t["url"].startswith(url.split("#")[0])), None)
            except OSError:
                pass
            time.sleep(0.2)
        assert target is not None, "Chromium did not open the page"
        connection = websocket.create_connection(target["webSocketDebuggerUrl"], timeout=30)
        expression = f"(document.getElementById({json.dumps(element)}) || {{}}).textContent || ''"
        deadline, text = time.time() + timeout, ""
        while (not text or until not in text) and time.time() < deadline:
            time.sleep(0.5)
            connection.send(json.dumps({"id": 1, "method": "Runtime.evaluate",
                                        "params": {"expression": expression, "returnByValue": True}}))
            reply = json.loads(connection.recv())
            while reply.get("id") != 1:
                reply = json.loads(connection.recv())
            text = reply["result"]["result"].get("value") or ""
        if whole and text:
            connection.send(json.dumps({"id": 2, "method": "Runtime.evaluate", "params": {
                "expression": "document.documentElement.outerHTML", "returnByValue": True}}))
            reply = json.loads(connection.recv())
            while reply.get("id") != 2:
                reply = json.loads(connection.recv())
            text = reply["result"]["result"].get("value") or ""
        connection.close()
        return text
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_text_page_times_its_tokens(text_url: str, tmp_path: Path) -> None:
    """On real time the page's tokens/s is a measurement: the same greedy tokens, and a positive rate."""
    query = urlencode({"prompt": PROMPT, "new": 64}, quote_via=quote)
    text = live_page(text_url + "#" + query, "text-numbers", tmp_path)
    assert text, "the page wrote no tokens"
    result = json.loads(text)
    model, bpe = site_wasm().text_model()
    ids = bpe.encode(PROMPT).tolist()
    assert result["tokens"] == model.generate(ids, model.block_size - len(ids))
    assert result["tokens_per_second"] > 0
    print(f"\nChromium: {len(result['tokens']) - len(ids)} new tokens at {result['tokens_per_second']:.0f} "
          f"tokens/s (prefill of {len(ids)} tokens: {result['prefill_ms']:.1f} ms)")
