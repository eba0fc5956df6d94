"""Stage 0 benchmark: tinyedu's scalar autograd against micrograd (when installed).

Two workloads, each forward + backward, timed with time.perf_counter over a few repeats (median):

* mlp:   the moons MLP 2-16-16-1 on 100 samples, hinge loss + L2 (about 70,000 Values);
* chain: 100,000 relu ops in a row, then backward.

Both libraries build one Python object per node, so the interesting numbers are the ratio (the
price of tinyedu's checks) and what happens to a long chain: micrograd's recursive topological
sort hits Python's recursion limit. We report that, then retry micrograd with the limit raised
(in a subprocess, in case the interpreter's stack gives out) so the timing is still compared.

The MLP is timed twice: with Python's cycle collector on (the default, for both libraries) and
paused (what tinyedu's `fit` does; see tinyedu/scalar/train.py).

Run: .venv/bin/python bench/bench_scalar.py   (not a test; numbers depend on the machine)
"""

from __future__ import annotations

import gc
import random
import statistics
import subprocess
import sys
import textwrap
import time
from typing import Callable

from tinyedu.datasets import make_moons
from tinyedu.scalar import MLP, Value, hinge_loss

try:
    import micrograd.engine as mg_engine
    import micrograd.nn as mg_nn
except ImportError:  # pip install micrograd
    mg_engine = mg_nn = None

REPEATS = 5
CHAIN = 100_000
X, Y = make_moons(100, noise=0.1, seed=0)
X_LIST, LABELS = X.tolist(), (2 * Y - 1).tolist()


def median_seconds(fn: Callable[[], object], repeats: int = REPEATS, collect: bool = True) -> float:
    """Median wall time of fn(); the previous run's graph is freed before each timing."""
    times = []
    was_enabled = gc.isenabled()
    for _ in range(repeats):
        gc.collect()
        if not collect:
            gc.disable()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
        if was_enabled:
            gc.enable()
    return statistics.median(times)


# -- tinyedu -------------------------------------------------------------------------------------

TINY_MODEL = MLP(2, [16, 16, 1], nonlinearity="relu", rng=random.Random(0))


def tinyedu_mlp() -> None:
    loss, _ = hinge_loss(TINY_MODEL, X_LIST, LABELS, alpha=1e-4)
    TINY_MODEL.zero_grad()
    loss.backward()


def tinyedu_chain() -> None:
    x = Value(0.5)
    y = x
    for _ in range(CHAIN):
        y = y.relu()
    y.backward()


# -- micrograd (the same computations, written the micrograd way) -------------------------------

if mg_nn is not None:
    random.seed(0)  # micrograd draws its weights from the global random module
    MG_MODEL = mg_nn.MLP(2, [16, 16, 1])


def micrograd_mlp() -> None:
    scores = [MG_MODEL([mg_engine.Value(a), mg_engine.Value(b)]) for a, b in X_LIST]
    losses = [(1 + -label * score).relu() for label, score in zip(LABELS, scores, strict=True)]
    data_loss = sum(losses) * (1.0 / len(losses))
    reg_loss = 1e-4 * sum(p * p for p in MG_MODEL.parameters())
    loss = data_loss + reg_loss
    MG_MODEL.zero_grad()
    loss.backward()


def micrograd_chain() -> None:
    x = mg_engine.Value(0.5)
    y = x
    for _ in range(CHAIN):
        y = y.relu()
    y.backward()


MICROGRAD_CHAIN_RAISED_LIMIT = textwrap.dedent(f"""
    import statistics, sys, time
    import micrograd.engine as mg
    sys.setrecursionlimit({CHAIN} * 2 + 1000)
    times = []
    for _ in range({REPEATS}):
        start = time.perf_counter()
        y = x = mg.Value(0.5)
        for _ in range({CHAIN}):
            y = y.relu()
        y.backward()
        times.append(time.perf_counter() - start)
    print(statistics.median(times))
""")


def micrograd_chain_raised_limit() -> float | str:
    """micrograd's chain with the recursion limit raised, in a child process (it may crash)."""
    command = [sys.executable, "-c", MICROGRAD_CHAIN_RAISED_LIMIT]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
        return f"crashed: {last}"
    return float(done.stdout.strip())


def fmt(result: float | str) -> str:
    return f"{result * 1e3:12.1f} ms" if isinstance(result, float) else f"{result:>15}"


def main() -> None:
    print(f"Python {sys.version.split()[0]}, median of {REPEATS} runs, forward + backward\n")
    rows: list[tuple[str, float | str, float | str]] = []
    have_mg = mg_nn is not None
    missing = "not installed"
    rows.append(("mlp 2-16-16-1 x 100 (gc on)", median_seconds(tinyedu_mlp),
                 median_seconds(micrograd_mlp) if have_mg else missing))
    rows.append(("mlp 2-16-16-1 x 100 (gc paused)", median_seconds(tinyedu_mlp, collect=False),
                 median_seconds(micrograd_mlp, collect=False) if have_mg else missing))
    tiny_chain = median_seconds(tinyedu_chain, repeats=3)
    if have_mg:
        try:
            micrograd_chain()
            mg_chain: float | str = median_seconds(micrograd_chain, repeats=3)
        except RecursionError:
            mg_chain = "RecursionError"
    else:
        mg_chain = missing
    rows.append((f"chain of {CHAIN:,} relu", tiny_chain, mg_chain))
    if have_mg and mg_chain == "RecursionError":
        rows.append((f"chain of {CHAIN:,} relu (micrograd: recursion limit raised)", tiny_chain,
                     micrograd_chain_raised_limit()))

    width = max(len(name) for name, _, _ in rows)
    print(f"{'workload':<{width}}  {'tinyedu':>15}  {'micrograd':>15}  {'tinyedu/micrograd':>17}")
    for name, tiny, mg in rows:
        ratio = f"{tiny / mg:17.2f}" if isinstance(tiny, float) and isinstance(mg, float) else f"{'-':>17}"
        print(f"{name:<{width}}  {fmt(tiny)}  {fmt(mg)}  {ratio}")


if __name__ == "__main__":
    main()
