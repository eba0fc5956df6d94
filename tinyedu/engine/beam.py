"""BEAM=n: choose a kernel's opts by timing candidates on the device, and remember the winner.

The search itself is in tinyedu/codegen/search.py; this is the part that needs a device. Each
candidate opt list is lowered like any kernel (Kernel -> opts -> linearize -> render -> compile)
and run on *scratch* buffers of the kernel's sizes (random data, never the real buffers, so timing
cannot clobber anything). The winner is cached on disk under `$TINYEDU_CACHE/beam/`, keyed by the
kernel's AST, the device, what the device compiles with (compiler, version, flags, processor),
the number of threads and the beam width: a second run (or another process) reuses it without
searching. `BEAM_BUDGET` (seconds, default 60) bounds one search.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from typing import Any

import numpy as np

from tinyedu.codegen.kernel import Kernel
from tinyedu.codegen.linearizer import linearize
from tinyedu.codegen.opts import Opt, OptError, OptOps, apply_opts
from tinyedu.codegen.search import SearchResult, beam_search
from tinyedu.codegen.uops import launch_dims
from tinyedu.helpers import debug_level, getenv
from tinyedu.ops import LazyOp, MemBuffer
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


def build(ast: LazyOp, device: str, opts: list[Opt]):
    """The runner of `ast` with exactly these opts (the lowering steps, without the cache)."""
    backend = Device[device]
    kernel = apply_opts(Kernel(ast), opts)
    compiler = backend.compiler
    uops = linearize(kernel, backend.vector_width)
    source = backend.renderer(kernel.name, uops)
    binary = compiler.build(source) if compiler is not None else source
    return backend.runtime(kernel.name, binary, launch_dims(uops))


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
    signature = "none" if compiler is None else compiler.signature()
    text = "\0".join([repr(ast), device, signature, str(backend.threads()), str(width)])
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _cache_file(key: str):
    from tinyedu.runtime.ops_c import cache_dir

    folder = cache_dir() / "beam"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"{key}.json"


def search(ast: LazyOp, device: str, width: int) -> SearchResult:
    """The BEAM search's result for this kernel: from the disk cache, or searched (then cached)."""
    from tinyedu.codegen.heuristics import hand_coded_optimizations

    path = _cache_file(cache_key(ast, device, width))
    if path.exists():
        try:
            saved = json.loads(path.read_text())
            opts = [Opt(OptOps[op], axis, amount) for op, axis, amount in saved["opts"]]
            return SearchResult(opts, saved["seconds"], saved["baseline"], saved["search_seconds"],
                                saved["tried"], cached=True)
        except (ValueError, KeyError, TypeError):
            pass  # a damaged entry: search again
    backend = Device[device]
    buffers = scratch_buffers(ast, device)

    def time_opts(opts: list[Opt]) -> float:
        try:
            return time_runner(build(ast, device, opts), buffers)
        except (OptError, RuntimeError):  # RuntimeError: the compiler rejected it
            return math.inf

    kernel = Kernel(ast)
    heuristic = hand_coded_optimizations(kernel, backend.vector_width, backend.threads())
    prefixes = [heuristic[:n] for n in range(1, len(heuristic) + 1)]  # so the search can branch off them
    result = beam_search(kernel, time_opts, width, backend.threads(), start=prefixes,
                         budget=float(getenv("BEAM_BUDGET", 60.0)))
    saved = {"kernel": kernel.name, "opts": [[o.op.name, o.axis, o.amount] for o in result.opts],
             "seconds": result.seconds, "baseline": result.baseline, "search_seconds": result.search_seconds,
             "tried": result.tried}
    temporary = path.with_suffix(f".{time.time_ns()}.tmp")
    temporary.write_text(json.dumps(saved))
    temporary.replace(path)  # atomic: another process sees the whole file or none
    if debug_level() >= 1:
        print(f"BEAM {width}: {kernel.name} searched {result.tried} kernels in {result.search_seconds:.2f} "
              f"s: {result.seconds * 1e3:.3f} ms (as written {result.baseline * 1e3:.3f} ms), {result.opts}")
    return result


def beam_opts(ast: LazyOp, device: str, width: int) -> list[Opt]:
    return search(ast, device, width).opts
