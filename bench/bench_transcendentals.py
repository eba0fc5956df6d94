"""Transcendentals of issue 31: exp, tanh, sigmoid, gelu of 2^22 float32 and exp of 2^22 float64,
tinyedu on the C device next to PyTorch, side by side in one run, with one thread each and with
default threads.

Run: .venv/bin/python bench/bench_transcendentals.py [--quick]      (not a test; prints tables)

Each thread setting runs in a fresh Python (OpenMP and PyTorch read their thread counts when they
load): THREADS=1 OMP_NUM_THREADS=1 (PyTorch: torch.set_num_threads(1), by bench/timing.py), then
no setting (threads = cores for both). PyTorch is imported first (bench/timing.py) and runs under
torch.no_grad. The two frameworks' calls alternate in blocks (see `alternating`), so a change in
the machine's load falls on both; each cell is a median. The ratio is tinyedu /
PyTorch (goal <= 1.5). "of which Python" is tinyedu's time for the same op on 16 elements: building
the graph, scheduling and launching, which every call pays whatever its size. The load average is
printed beside each table: the machine may be shared.

A last table counts the instructions of each float32 kernel's vector loop (objdump of the compiled
kernel, where objdump is installed): per 16 floats with AVX-512, per 8 with AVX2.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable

import numpy as np
from timing import QUICK, load, median_time, peer_note, torch

from tinyedu import Tensor

ROOT = Path(__file__).resolve().parents[1]
SIZE = 1 << (18 if QUICK else 22)
ROUNDS = 3 if QUICK else 9


def cases(size: int) -> dict[str, tuple[Callable[[], object], Callable[[], object] | None]]:
    """name -> (tinyedu run, PyTorch run or None), on `size` elements."""
    X = np.random.default_rng(0).standard_normal(size).astype(np.float32)
    x, x64 = Tensor(X).realize(), Tensor(X.astype(np.float64)).realize()
    ours = {"exp": lambda: x.exp().realize(), "tanh": lambda: x.tanh().realize(),
            "sigmoid": lambda: x.sigmoid().realize(), "gelu": lambda: x.gelu().realize(),
            "exp float64": lambda: x64.exp().realize()}
    if torch is None:
        return {name: (run, None) for name, run in ours.items()}
    tx, tx64 = torch.from_numpy(X), torch.from_numpy(X.astype(np.float64))
    theirs = {"exp": lambda: torch.exp(tx), "tanh": lambda: torch.tanh(tx),
              "sigmoid": lambda: torch.sigmoid(tx), "gelu": lambda: torch.nn.functional.gelu(tx),
              "exp float64": lambda: torch.exp(tx64)}
    return {name: (run, theirs[name]) for name, run in ours.items()}


def alternating(runs: list[Callable[[], object]], rounds: int) -> list[float]:
    """Seconds of each run: blocks of calls, the runs' blocks in turn, `rounds` blocks each; a block is
    three warm-up calls (a framework's memory pool refills after the other's calls) and the median of 5
    calls; the result is the median of a run's blocks."""
    blocks: list[list[float]] = [[] for _ in runs]
    for _ in range(rounds):
        for run, timed in zip(runs, blocks, strict=True):
            timed.append(median_time(run, 5, warmup=3))
    return [statistics.median(b) for b in blocks]


def table() -> None:
    """The child: one line per case, in this process's thread setting."""
    print(f"-- THREADS={os.environ.get('THREADS', 'unset')}; {peer_note()} ({load()})")
    print(f"{'case':28s} {'PyTorch ms':>11s} {'tinyedu ms':>11s} {'ratio':>7s} {'of which Python ms':>19s}")
    small = cases(16)
    for name, (ours, theirs) in cases(SIZE).items():
        with torch.no_grad() if torch else contextlib.nullcontext():
            t_ours, *rest = alternating([ours, theirs] if theirs else [ours], ROUNDS)
        t_theirs = rest[0] if rest else None
        python = median_time(small[name][0], ROUNDS)
        label = f"{name} (2^{SIZE.bit_length() - 1}{'' if 'float64' in name else ' float32'})"
        reference = f"{t_theirs * 1e3:11.2f}" if t_theirs else f"{'-':>11s}"
        ratio = f"{t_ours / t_theirs:6.2f}x" if t_theirs else "-"
        print(f"{label:28s} {reference} {t_ours * 1e3:11.2f} {ratio:>7s} {python * 1e3:19.2f}", flush=True)
    print(f"   ({load()})")


def loop_instructions(op: str) -> str:
    """The instructions in the longest vector loop of the C kernel of `op` on 2^22 float32 (the
    heuristics' opts, one thread), and how many of them divide."""
    from tinyedu.engine.lower import heuristic_opts, lower, new_kernel
    from tinyedu.engine.schedule import create_schedule
    from tinyedu.runtime.device import Device
    from tinyedu.runtime.ops_c import compiler_flags
    from tinyedu.runtime.toolchain import compile_library, find_compiler

    item = [i for i in create_schedule([getattr(Tensor.empty(SIZE), op)().lazydata])
            if i.ast.op.name == "STORE"][-1]
    opts = heuristic_opts(new_kernel(item.ast, Device["C"]), Device["C"].vector_width, 1)
    source = lower("C", item.ast, opts, compile=False).source
    compiler = find_compiler()
    with tempfile.TemporaryDirectory() as folder:
        library = Path(folder) / "kernel.so"
        compile_library("C", compiler, compiler_flags(compiler, False), source, library)
        listing = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(library)], capture_output=True,
                                 text=True, check=True).stdout
    lines = [line for line in listing.splitlines() if re.match(r"\s+[0-9a-f]+:", line)]
    addresses = [int(line.split(":")[0], 16) for line in lines]
    loop: list[str] = []
    for end, line in enumerate(lines):  # a backward jump closes a loop; the longest vector one counts
        jump = re.search(r"\bj\w+\s+([0-9a-f]+) <", line)
        if jump and int(jump.group(1), 16) in addresses[:end]:
            body = lines[addresses.index(int(jump.group(1), 16)):end + 1]
            if any(("zmm" in b or "ymm" in b) for b in body) and len(body) > len(loop):
                loop = body
    return f"{len(loop)} ({sum('div' in b for b in loop)} dividing)"


if __name__ == "__main__":
    if "--child" in sys.argv:
        table()
        sys.exit()
    settings = {"one thread": {"THREADS": "1", "OMP_NUM_THREADS": "1"}, "default threads": {}}
    for name, extra in settings.items():
        env = {k: v for k, v in os.environ.items() if k not in ("THREADS", "OMP_NUM_THREADS")}
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
        env.update(extra)
        print(f"== {name} ({os.cpu_count()} cores)", flush=True)
        subprocess.run([sys.executable, __file__, "--child", *sys.argv[1:]], env=env, check=True)
    if shutil.which("objdump"):
        print("== instructions in each kernel's vector loop")
        for op in ("exp", "tanh", "sigmoid", "gelu"):
            print(f"{op:28s} {loop_instructions(op)}")
