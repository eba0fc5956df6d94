"""Does importing tinyedu change how PyTorch runs? PyTorch's steps in fresh Pythons, with and without
`import tinyedu` first, and with a tinyedu kernel run first.

Run: .venv/bin/python bench/bench_import.py [--quick]      (not a test; prints a table)

Three settings: PyTorch alone; `import tinyedu` first; and a threaded tinyedu kernel run first (which
loads tinyedu's OpenMP runtime, the same libgomp.so.1 PyTorch then links to). Each child is a new
Python (OpenMP reads its settings when it loads), PyTorch with threads = cores
(its default, set explicitly), under torch.no_grad for the forward-only case; the two settings
alternate round by round so that a change of the machine's load hits both. Medians of the rounds'
medians, ms; the ratio is "tinyedu first" / "torch alone" (1.00: no effect). The machine may be
shared: read the ratio, and the load average printed beside the table.
tests/test_import_side_effects.py checks, without timing, that the environment is unchanged.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
from pathlib import Path

from timing import QUICK, load, optional

ROOT = Path(__file__).resolve().parents[1]

CHILD = """
import sys, time, statistics
if sys.argv[1] != "torch":
    import numpy as np
    import tinyedu
if sys.argv[1] == "kernel":
    a = np.random.default_rng(0).random((384, 384), dtype=np.float32)
    (tinyedu.Tensor(a) @ tinyedu.Tensor(a)).numpy()  # a threaded kernel: loads tinyedu's OpenMP runtime
import torch
torch.set_num_threads(__THREADS__)
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(128, 784), torch.randint(0, 10, (128,))
def step():
    opt.zero_grad()
    torch.nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
img, w = torch.randn(32, 16, 28, 28), torch.randn(32, 16, 3, 3)
def conv():
    with torch.no_grad():
        torch.relu(torch.nn.functional.conv2d(img, w, padding=1))
def median(run, n):
    for _ in range(5):
        run()
    times = []
    for _ in range(n):
        t = time.perf_counter(); run(); times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3
print(median(step, __N__), median(conv, __N__))
"""


def child(first: str, steps: int) -> tuple[float, float]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    script = CHILD.replace("__THREADS__", str(os.cpu_count() or 1)).replace("__N__", str(steps))
    result = subprocess.run([sys.executable, "-c", script, first], env=env, text=True, capture_output=True,
                            timeout=600)
    if result.returncode != 0:
        raise RuntimeError(result.stderr[-2000:])
    step, conv = result.stdout.split()
    return float(step), float(conv)


def main() -> None:
    if optional("torch") is None:
        print("no torch: nothing to compare")
        return
    rounds, steps = (3, 50) if QUICK else (7, 200)
    settings = {"torch alone": "torch", "import tinyedu": "tinyedu", "tinyedu kernel": "kernel"}
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in settings}
    for _ in range(rounds):
        for name, first in settings.items():
            times[name].append(child(first, steps))
    print(f"PyTorch in fresh Pythons, {os.cpu_count()} threads, medians of {rounds} rounds of {steps} "
          f"(ms) [{load()}]")
    print(f"{'case':32s} {'torch alone':>12s} {'import tinyedu first':>22s} {'a tinyedu kernel first':>24s}")
    for i, case in enumerate(("MLP 784-256-10 SGD step, b=128", "relu(conv2d 3x3) 32x16x28^2")):
        alone, imported, kernel = (statistics.median(t[i] for t in times[name]) for name in times)
        print(f"{case:32s} {alone:12.3f} {imported:13.3f} ({imported / alone:4.2f}x) "
              f"{kernel:15.3f} ({kernel / alone:4.2f}x)")
    print("A tinyedu kernel run before PyTorch is imported loads libgomp.so.1 with passive waiting;\n"
          "PyTorch's libtorch finds that runtime loaded and shares it (one runtime, one policy).\n"
          "Importing tinyedu alone loads nothing and changes nothing.")


if __name__ == "__main__":
    main()
