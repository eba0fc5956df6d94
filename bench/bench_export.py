"""Exported-program benchmark: chapter 08's CNN as a standalone C program next to tinyedu and PyTorch.

Run: .venv/bin/python bench/bench_export.py [--quick]      (not a test; prints a table)

The same weights read 10,000 MNIST-sized images (uint8 pixels, batches of 100, normalized inside the
forward pass as chapter 11 exports it), five ways:
- the exported C program, built with the target's plain `cc -O2` (one thread, any x86-64), reading
  the raw pixels from a file and writing the outputs to /dev/null: its whole run, process start
  included;
- the same file built with `-O2 -march=native -fopenmp` (this machine's widest vectors, every core:
  the `#pragma omp` lines count), to show what the portable build leaves on the table;
- tinyedu, eager (each batch builds and schedules its graph, looks its kernels up, runs them);
- tinyedu under TinyJit (the recorded kernels replayed);
- PyTorch's forward with its default threads (when torch is installed).
Random weights: speed does not depend on what they are. Ratios are time / the exported program's,
so > 1 means the exported program is faster. The machine may be shared: compare ratios measured side
by side in one run, not absolute times.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

import numpy as np

from tinyedu import Tensor, TinyJit
from tinyedu.export import export_c
from tinyedu.models import MnistCNN
from tinyedu.nn.state import get_state_dict

QUICK = "--quick" in sys.argv
REPEATS = 2 if QUICK else 5
BATCH, IMAGES = 100, 2_000 if QUICK else 10_000

try:
    import torch
except ImportError:
    torch = None


CNN = MnistCNN  # chapter 08's and chapter 11's


def best_of(run: Callable[[], None]) -> float:
    run()  # warm-up: compiles, caches, first-touch page faults
    return min(_timed(run) for _ in range(REPEATS))


def _timed(run: Callable[[], None]) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def torch_forward(model: CNN) -> Callable[[np.ndarray], None]:
    """The same network in PyTorch, with the same weights, in eval mode."""
    nn = torch.nn
    net = nn.Sequential(nn.Conv2d(1, 8, 3), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                        nn.Conv2d(8, 16, 3), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
                        nn.Flatten(), nn.Linear(400, 10)).eval()
    ours = get_state_dict(model)
    names = {"0": "conv1", "1": "bn1", "4": "conv2", "5": "bn2", "9": "head"}
    net.load_state_dict({key: torch.tensor(ours[f"{names[key.split('.')[0]]}.{key.split('.', 1)[1]}"].numpy())
                         for key in net.state_dict()})

    def run(pixels: np.ndarray) -> None:
        with torch.no_grad():
            for s in range(0, len(pixels), BATCH):
                x = (torch.from_numpy(pixels[s:s + BATCH]).float() / 255 - 0.1307) / 0.3081
                net(x.reshape(-1, 1, 28, 28)).argmax(1)
    return run


def main() -> None:
    Tensor.manual_seed(0)
    model = CNN()
    pixels = np.random.default_rng(0).integers(0, 256, (IMAGES, 28, 28), dtype=np.uint8)

    def forward(x: Tensor) -> tuple[Tensor, Tensor]:
        logits = model(((x.float() / 255 - 0.1307) / 0.3081).reshape(-1, 1, 28, 28))
        return logits.argmax(1), logits

    program = export_c(forward, Tensor(pixels[:BATCH]), name="digits")
    folder = Path(tempfile.mkdtemp())
    (folder / "pixels").write_bytes(pixels.tobytes())
    portable = program.compile(folder / "portable")
    native = program.compile(folder / "native", extra_flags=("-march=native", "-fopenmp"))

    def run_program(executable: Path) -> Callable[[], None]:
        return lambda: subprocess.run([str(executable), str(folder / "pixels")], stdout=subprocess.DEVNULL,
                                      check=True)

    def eager() -> None:
        for s in range(0, IMAGES, BATCH):
            forward(Tensor(pixels[s:s + BATCH]))[0].numpy()

    jitted = TinyJit(lambda x: forward(x)[0].realize())

    def replay() -> None:
        for s in range(0, IMAGES, BATCH):
            jitted(Tensor(pixels[s:s + BATCH])).numpy()

    rows = [("exported C, cc -O2 (one thread)", best_of(run_program(portable))),
            ("exported C, -O2 -march=native -fopenmp", best_of(run_program(native))),
            ("tinyedu eager", best_of(eager)),
            ("tinyedu TinyJit", best_of(replay))]
    if torch is not None:
        run_torch = torch_forward(model)
        rows.append((f"PyTorch ({torch.get_num_threads()} threads)", best_of(lambda: run_torch(pixels))))
    base = rows[0][1]
    print(f"chapter 08's CNN, {IMAGES:,} images in batches of {BATCH} ({program.stats['kernels']} kernels "
          f"per batch), best of {REPEATS}; ratio = time / the exported program's (> 1: it is faster)")
    print(f"{'':42s} {'seconds':>8s} {'ratio':>7s}")
    for name, seconds in rows:
        print(f"{name:42s} {seconds:8.3f} {seconds / base:7.2f}")


if __name__ == "__main__":
    main()
