"""The site's WebGPU page: tinyedu's own WGSL kernels, run on the reader's GPU by the browser.

At site-build time (scripts/mkdocs_hooks.py calls `write_page(site_dir)`), tinyedu lowers a few
kernels for WebGPU and renders their WGSL (tinyedu/renderer/wgsl.py): the matmul ladder of chapter 12
(naive, coalesced, shared tiles, register-blocked) and the GROUP reduction. The kernels are lowered
for WebGPU's *default* limits (256 threads per workgroup, 16 KB of workgroup memory, 65535
workgroups per dimension), which every browser's adapter grants without asking. The page,
`webgpu/index.html` in the built site, holds the WGSL and a short script: it asks `navigator.gpu`
for the GPU, runs each kernel on deterministic inputs, times it (best of a few runs, waiting for
the GPU each time), prints the time and GFLOPS or GB/s, and checks the result against a plain
JavaScript reference. Nothing is loaded from anywhere else. Without WebGPU it says so.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

import numpy as np

from tinyedu import Tensor
from tinyedu.codegen.launch import launch_dims
from tinyedu.codegen.opts import Opt, OptOps
from tinyedu.core.ops import LoadOps
from tinyedu.engine.lower import lower
from tinyedu.engine.schedule import create_schedule
from tinyedu.launch import GPULimits
from tinyedu.renderer.wgsl import render_wgsl

# WebGPU's default limits: what any adapter gives a page that asks for nothing more
BROWSER_LIMITS = GPULimits(max_workgroup_size=256, max_local=(256, 256, 64), max_groups=(65535,) * 3,
                           shared_memory_bytes=16384, warp_size=32)
N = 256          # the matmuls are N x N
ROWS, COLS = 256, 4096  # the row sums

G2 = [Opt(OptOps.GLOBAL, 0, 0), Opt(OptOps.GLOBAL, 1, 0)]
SQUARE = [Opt(OptOps.LOCAL, 0, 16), Opt(OptOps.LOCAL, 1, 16)]
TILES = [Opt(OptOps.TILE, 4, 16), Opt(OptOps.PACK, 5, 1), Opt(OptOps.PACK, 5, 2)]
LADDER = {  # the same plans as notebook 12's ladder
    "matmul 1: naive (lid0 down a column)": G2 + [Opt(OptOps.LOCAL, 1, 16), Opt(OptOps.LOCAL, 0, 16)],
    "matmul 2: coalesced (lid0 along a row)": G2 + SQUARE,
    "matmul 3: shared tiles": G2 + SQUARE + TILES,
    "matmul 4: register-blocked (4 x 4 outputs per thread, float4 moves)":
        [Opt(OptOps.UPCAST, 0, 4), Opt(OptOps.UPCAST, 1, 4)] + G2 + SQUARE + TILES,
}


class BrowserTarget:
    """What the lowering needs to write WGSL for a browser (no compiler: the browser compiles)."""

    name = "WEBGPU"
    renderer = staticmethod(render_wgsl)
    vector_width = 1
    limits = BROWSER_LIMITS
    compiler = None

    def threads(self) -> int:
        return 1


def _ast(t: Tensor):
    return [i.ast for i in create_schedule([t.lazydata]) if not isinstance(i.ast.op, LoadOps)][-1]


def _kernel(title: str, kind: str, ast, opts: list[Opt] | None, amount: float, unit: str) -> dict:
    """One kernel for the page: its WGSL, entry point, grid, and what the script needs to run it."""
    program = lower(BrowserTarget(), ast, opts, compile=False)
    launch = launch_dims(program.uops)
    return {"title": title, "kind": kind, "entry": program.kernel.name, "wgsl": program.source,
            "groups": list(launch.groups), "threads": launch.threads_per_group, "opts": str(program.opts),
            "amount": amount, "unit": unit}


def kernels() -> list[dict]:
    """The ladder and the reduction, lowered for the browser."""
    a, b = (Tensor(np.zeros((N, N), dtype=np.float32)).realize() for _ in range(2))
    matmul = _ast(a @ b)
    found = [_kernel(title, "matmul", matmul, opts, 2 * N**3, "GFLOPS") for title, opts in LADDER.items()]
    x = Tensor(np.zeros((ROWS, COLS), dtype=np.float32)).realize()
    found.append(_kernel("row sums, GROUP (the GPU heuristics)", "rowsum", _ast(x.sum(1)), None,
                         4 * ROWS * COLS, "GB/s"))
    return found


def page(found: list[dict]) -> str:
    """The whole page: the kernels as JSON, the runner script, and what it prints into."""
    data = json.dumps({"n": N, "rows": ROWS, "cols": COLS, "kernels": found})
    listings = "\n".join(f"<details><summary>{html.escape(k['title'])}: {html.escape(k['opts'])}</summary>"
                         f"<pre>{html.escape(k['wgsl'])}</pre></details>" for k in found)
    return PAGE.replace("%DATA%", data.replace("</", "<\\/")).replace("%LISTINGS%", listings) \
        .replace("%SCRIPT%", (Path(__file__).with_name("site_webgpu.js")).read_text())


def write_page(site_dir: Path) -> Path:
    """Write webgpu/index.html into the built site; returns its path."""
    target = Path(site_dir) / "webgpu" / "index.html"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(page(kernels()))
    return target


PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>tinyedu kernels on your GPU (WebGPU)</title>
<style>body{font-family:sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem}
table{border-collapse:collapse}td,th{padding:.2rem .6rem;border-bottom:1px solid #ccc;text-align:right}
td:first-child,th:first-child{text-align:left}pre{background:#f5f5f5;padding:.5rem;overflow-x:auto}</style>
</head><body>
<p><a href="../">tinyedu</a> · chapter 12</p>
<h1>tinyedu's GPU kernels on your GPU</h1>
<p>These are the WGSL kernels tinyedu generated when this site was built (chapter 12's matmul ladder
at 256 × 256, and a row sum with GROUP). Your browser runs them on your GPU through WebGPU; each
result is checked against a plain JavaScript computation. Times are the best of a few runs, each
waiting for the GPU to finish.</p>
<p id="status">Running…</p>
<table id="results"><thead><tr><th>kernel</th><th>workgroups × threads</th><th>time</th><th>rate</th>
<th>max error</th><th>check</th></tr></thead><tbody></tbody></table>
<h2>The kernels</h2>
%LISTINGS%
<script id="kernels" type="application/json">%DATA%</script>
<script>
%SCRIPT%
</script>
</body></html>
"""
