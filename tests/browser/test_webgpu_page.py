"""The site's WebGPU page (scripts/site_webgpu.py) in a real headless Chromium, on SwiftShader.

The page is written the way the site build writes it (`write_page`, which scripts/mkdocs_hooks.py
calls after `mkdocs build`), served on 127.0.0.1, and opened in Chromium with WebGPU on its CPU
adapter (`--enable-unsafe-webgpu --use-webgpu-adapter=swiftshader`). WebGPU work is asynchronous,
so the test drives the browser through the DevTools protocol (websocket-client) and waits until
the page says it is done; then every kernel of the ladder and the reduction must agree with the
page's JavaScript reference. The times the page prints are not checked (and SwiftShader's say
nothing about a GPU).
"""

from __future__ import annotations

import functools
import http.server
import importlib.util
import json
import socket
import subprocess
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from tests.browser.test_site import find_chromium

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.browser
WEBGPU_FLAGS = ["--enable-unsafe-webgpu", "--use-webgpu-adapter=swiftshader"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def page_url(tmp_path_factory: pytest.TempPathFactory):
    spec = importlib.util.spec_from_file_location("site_webgpu", ROOT / "scripts" / "site_webgpu.py")
    site_webgpu = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(site_webgpu)
    site = tmp_path_factory.mktemp("site")
    site_webgpu.write_page(site)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/webgpu/"
    server.shutdown()


def run_page(url: str, timeout: float = 240) -> dict:
    """Open `url` in headless Chromium with WebGPU on SwiftShader; when the page's state is no longer
    'running' (or the time is up), return its state, its status line and its result rows."""
    websocket = pytest.importorskip("websocket", reason="this test drives Chromium with websocket-client")
    chromium = find_chromium()
    if chromium is None:
        pytest.skip("no Chromium-family browser found (set CHROMIUM)")
    port = free_port()
    proc = subprocess.Popen([chromium, "--headless", "--no-sandbox", "--no-first-run", "--disable-quic",
                             f"--remote-debugging-port={port}", *WEBGPU_FLAGS, url],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        target = None
        for _ in range(100):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/json", timeout=2) as answer:
                    targets = [t for t in json.load(answer) if t.get("type") == "page"]
                target = next((t for t in targets if t["url"].startswith(url)), None)
                if target:
                    break
            except OSError:
                pass
            time.sleep(0.2)
        assert target is not None, "Chromium did not open the page"
        connection = websocket.create_connection(target["webSocketDebuggerUrl"], timeout=30)
        script = ("JSON.stringify({state: document.body.dataset.state || 'loading', "
                  "status: (document.getElementById('status') || {}).textContent, "
                  "rows: [...document.querySelectorAll('#results tbody tr')].map(r => "
                  "[...r.children].map(c => c.textContent))})")
        deadline, result = time.time() + timeout, {}
        while time.time() < deadline:
            connection.send(json.dumps({"id": 1, "method": "Runtime.evaluate",
                                        "params": {"expression": script, "returnByValue": True}}))
            reply = json.loads(connection.recv())
            while reply.get("id") != 1:
                reply = json.loads(connection.recv())
            result = json.loads(reply["result"]["result"].get("value") or "{}")
            if result.get("state") not in (None, "loading", "running"):
                break
            time.sleep(0.5)
        connection.close()
        return result
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_the_page_runs_tinyedus_kernels_and_they_are_right(page_url: str):
    result = run_page(page_url)
    if result.get("state") == "unavailable":
        pytest.skip(f"this Chromium has no WebGPU on SwiftShader: {result.get('status')}")
    assert result.get("state") == "done", result
    titles = [row[0] for row in result["rows"]]
    assert len(titles) == 5
    assert any("register-blocked" in t for t in titles) and any("GROUP" in t for t in titles)
    for title, _threads, time_text, rate, _error, check in result["rows"]:
        assert check == "right", (title, result)
        assert time_text.endswith(" ms") and rate.split()[1] in ("GFLOPS", "GB/s")
    assert "5 of 5 kernels agree with JavaScript" in result["status"]
