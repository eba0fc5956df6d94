"""BEAM=n's pieces that touch a device: scratch buffers to time a kernel on, the timing, the disk cache.

The search itself is in tinyedu/codegen/search.py, and `search` in tinyedu/engine/lower.py puts the
two together: each candidate opt list is lowered like any kernel (`lower(device, ast, opts)`) and run
on *scratch* buffers of the kernel's sizes (random data, never the real buffers, so timing cannot
clobber anything). The winner is cached on disk under `$TINYEDU_CACHE/beam/`, keyed by the kernel's
AST, the device, what the device compiles with (compiler, version, flags, processor), the number of
threads and the beam width: a second run (or another process) reuses it without searching.
`BEAM_BUDGET` (seconds, default 60) bounds one search. The same timing and folder serve the
realizer's choice of a two-stage reduce's split (tinyedu/engine/two_stage.py).
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from pathlib import Path
from typing import Any

import numpy as np

from tinyedu.codegen.opts import Opt, OptOps
from tinyedu.codegen.search import SearchResult
from tinyedu.core.helpers import debug_level
from tinyedu.core.ops import LazyOp, MemBuffer
from tinyedu.runtime.compile_cache import cache_dir
from tinyedu.runtime.device import Buffer, Device


def scratch_buffers(ast: LazyOp, device: str) -> list[Buffer]:
    """[out, *inputs] with the sizes the kernel reads and writes, filled with random values."""
    sizes: dict[int, tuple[int, Any]] = {}
    for node in ast.walk():
        if isinstance(node.arg, MemBuffer):
            size = max(node.arg.st.max_index() + 1, 1)
            sizes[node.arg.idx] = (max(size, sizes.get(node.arg.idx, (0, None))[0]), node.arg.dtype)
    rng = np.random.default_rng(0)
    buffers = []
    for idx in range(max(sizes) + 1):
        size, dtype = sizes.get(idx, (1, ast.arg.dtype))
        if idx == 0:
            size, dtype = ast.arg.st.size, ast.arg.dtype
        values = rng.standard_normal(size) if dtype.is_float else rng.integers(0, 2, size)
        buffers.append(Buffer(device, size, dtype).copyin(values.astype(dtype.np)))
    return buffers


def time_runner(runner, buffers: list[Buffer], min_seconds: float = 0.002) -> float:
    """The fastest of several runs (at least 3, and at least `min_seconds` in all), after a warm-up."""
    runner(buffers)
    best, total, runs = math.inf, 0.0, 0
    while runs < 3 or (total < min_seconds and runs < 100):
        start = time.perf_counter()
        runner(buffers)
        elapsed = time.perf_counter() - start
        best, total, runs = min(best, elapsed), total + elapsed, runs + 1
    return best


def cache_key(ast: LazyOp, device: str, width: int) -> str:
    backend = Device[device]
    compiler = backend.compiler
    if compiler is None:
        signature = "none"
    elif hasattr(compiler, "signature"):  # a compiler of C, NEON, LLVM, CUDA: its version and flags
        signature = compiler.signature()
    else:  # a GPU driver compiles (OpenCL, WebGPU): it names the platform or adapter
        signature = "\0".join([compiler.compiler, *compiler.flags])
    text = "\0".join([repr(ast), device, signature, str(backend.threads()), str(width)])
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def cache_file(key: str) -> Path:
    """Where the search's result under `key` is kept (two_stage.py keeps its split choices here too)."""
    folder = cache_dir() / "beam"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"{key}.json"


def load_result(ast: LazyOp, device: str, width: int) -> SearchResult | None:
    """The search's saved result for this kernel, or None (never searched, or a damaged entry)."""
    path = cache_file(cache_key(ast, device, width))
    if not path.exists():
        return None
    try:
        saved = json.loads(path.read_text())
        opts = [Opt(OptOps[op], axis, amount) for op, axis, amount in saved["opts"]]
        return SearchResult(opts, saved["seconds"], saved["baseline"], saved["search_seconds"],
                            saved["tried"], cached=True)
    except (ValueError, KeyError, TypeError):
        return None


def save_result(ast: LazyOp, device: str, width: int, name: str, result: SearchResult) -> None:
    """Keep a search's result on disk (written whole or not at all: another process may read it)."""
    path = cache_file(cache_key(ast, device, width))
    saved = {"kernel": name, "opts": [[o.op.name, o.axis, o.amount] for o in result.opts],
             "seconds": result.seconds, "baseline": result.baseline, "search_seconds": result.search_seconds,
             "tried": result.tried}
    temporary = path.with_suffix(f".{time.time_ns()}.tmp")
    temporary.write_text(json.dumps(saved))
    temporary.replace(path)
    if debug_level() >= 1:
        print(f"BEAM {width}: {name} searched {result.tried} kernels in {result.search_seconds:.2f} "
              f"s: {result.seconds * 1e3:.3f} ms (as written {result.baseline * 1e3:.3f} ms), {result.opts}")
