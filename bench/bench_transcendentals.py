"""Transcendentals of issue 31: exp, tanh, sigmoid, gelu of 2^22 float32 and exp of 2^22 float64,
tinyedu on the C device next to PyTorch, side by side in one run, with one thread each and with
default threads.

Run: .venv/bin/python bench/bench_transcendentals.py [--quick]      (not a test; prints a table)

Each thread setting runs in a fresh Python (OpenMP and PyTorch read their thread counts when they
load): THREADS=1 OMP_NUM_THREADS=1 (PyTorch: torch.set_num_threads(1), by bench/timing.py), then
no setting (threads = cores for both). PyTorch is imported first (bench/timing.py) and runs under
torch.no_grad. Each cell is the median of several runs after warm-up, and the ratio tinyedu / PyTorch
(goal <= 1.5). The load average is printed beside each table: the machine may be shared.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
from timing import QUICK, load, median_time, peer_note, torch

from tinyedu import Tensor

ROOT = Path(__file__).resolve().parents[1]
SIZE = 1 << (18 if QUICK else 22)
REPEAT = 5 if QUICK else 20


def cases() -> dict[str, tuple]:
    """name -> (tinyedu run, PyTorch run or None)."""
    X = np.random.default_rng(0).standard_normal(SIZE).astype(np.float32)
    x, x64 = Tensor(X).realize(), Tensor(X.astype(np.float64)).realize()
    tx, tx64 = (torch.from_numpy(X), torch.from_numpy(X.astype(np.float64))) if torch else (None, None)
    ours = {"exp": lambda: x.exp().realize(), "tanh": lambda: x.tanh().realize(),
            "sigmoid": lambda: x.sigmoid().realize(), "gelu": lambda: x.gelu().realize(),
            "exp float64": lambda: x64.exp().realize()}
    theirs = {"exp": lambda: torch.exp(tx), "tanh": lambda: torch.tanh(tx),
              "sigmoid": lambda: torch.sigmoid(tx), "gelu": lambda: torch.nn.functional.gelu(tx),
              "exp float64": lambda: torch.exp(tx64)} if torch else {}
    return {name: (run, theirs.get(name)) for name, run in ours.items()}


def table() -> None:
    """The child: one line per case, in this process's thread setting."""
    print(f"-- THREADS={os.environ.get('THREADS', 'unset')}; {peer_note()} ({load()})")
    print(f"{'case (2^%d elements)' % SIZE.bit_length() if False else 'case':28s} {'PyTorch ms':>11s} "
          f"{'tinyedu ms':>11s} {'ratio':>7s}")
    for name, (ours, theirs) in cases().items():
        if torch:
            with torch.no_grad():
                t_theirs = median_time(theirs, REPEAT)
        t_ours = median_time(ours, REPEAT)
        ratio = f"{t_ours / t_theirs:6.2f}x" if torch else "-"
        label = f"{name} (2^{SIZE.bit_length() - 1}{'' if 'float64' in name else ' float32'})"
        print(f"{label:28s} {t_theirs * 1e3 if torch else float('nan'):11.2f} {t_ours * 1e3:11.2f} {ratio:>7s}",
              flush=True)
    print(f"   ({load()})")


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
