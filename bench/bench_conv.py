"""The convolutions of bench/bench_cpu.py, tinyedu against PyTorch, timed call by call in turns.

Run: .venv/bin/python bench/bench_conv.py [--quick]     (not a test; prints a table)
One thread against one thread: THREADS=1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 (timing.py then
gives PyTorch one thread too).

bench_cpu.py times each framework in a block of runs, one after the other; on a shared machine
the load changes between the blocks, and the ratio with it. Here each round runs tinyedu once and
PyTorch once, so both see the same load: the table gives each one's median time and the median of
the per-round ratios (tinyedu / PyTorch: < 1 is faster), beside the load average. Same cases, same
inputs and the same calls as bench_cpu.py's (`conv_cases`): PyTorch imported first, its forward
under torch.no_grad.
"""

from __future__ import annotations

import statistics
import time

import numpy as np
from bench_cpu import conv_cases
from timing import QUICK, load, peer_note, torch

ROUNDS = 10 if QUICK else 40


def in_turns(ours, theirs, rounds: int) -> tuple[float, float, float]:
    """(our median s, their median s, median of our / their per round), after 3 warm-up runs each."""
    for _ in range(3):
        ours()
        theirs()
    times: list[tuple[float, float]] = []
    for _ in range(rounds):
        pair = []
        for run in (ours, theirs):
            start = time.perf_counter()
            run()
            pair.append(time.perf_counter() - start)
        times.append((pair[0], pair[1]))
    return (statistics.median(t for t, _ in times), statistics.median(t for _, t in times),
            statistics.median(a / b for a, b in times))


def main() -> None:
    if torch is None:
        print("PyTorch is not installed: nothing to compare with")
        return
    print(peer_note())
    print(f"== convolutions in turns, {ROUNDS} rounds ({load()}); medians in ms")
    print(f"{'case':45s} {'PyTorch':>9s} {'tinyedu':>9s} {'ratio':>7s}")
    for name, runs in conv_cases(np.random.default_rng(0)).items():
        ours, theirs, ratio = in_turns(runs["tinyedu"], runs["torch"], ROUNDS)
        print(f"{name:45s} {theirs * 1e3:9.2f} {ours * 1e3:9.2f} {ratio:6.2f}x", flush=True)
    print(f"done ({load()})")


if __name__ == "__main__":
    main()
