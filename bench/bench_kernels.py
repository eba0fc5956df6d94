"""Stage 5 benchmark: optimized kernels next to numpy, PyTorch and tinygrad (CPU), in one run.

Run: .venv/bin/python bench/bench_kernels.py [--quick] [--no-beam]      (not a test; prints tables)

1. The machine: cores, load average, copy bandwidth and peak fused multiply-add throughput, both
   measured here with small C probes (one thread and all threads), so results read as fractions.
2. Workloads: a fused elementwise chain, a full sum, a row sum, matmul at 256/512/1024 and
   `x.exp() @ w` (which the scheduler splits so exp runs once per element). For tinyedu: end to end
   (build the graph, schedule, run: what a user waits for) and the kernels alone. Every time is the
   best of several runs (the machine may be shared: the best run is the least disturbed one).
   Ratios are other / tinyedu end to end, so > 1 means tinyedu is faster.
3. The targets of stage 5 (issue 9), each PASS or MISS with the measured ratio.
4. What the optimizer costs: per workload kernel, seconds in opts + linearize + render (Python)
   and in the C compiler, with NOOPT=1 and with the heuristics, on a cold compile cache.
5. BEAM=2 separately: search time, what it picked, and its speed against the heuristics'.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from typing import Callable

import numpy as np
from timing import QUICK, best_time, load, peer_note, tinygrad, torch

from tinyedu import Tensor
from tinyedu.core.helpers import GlobalCounters

REPEAT = 3 if QUICK else 7





def tinyedu_times(build: Callable[[], Tensor]) -> tuple[float, float]:
    """(end to end, kernels only) for realizing a freshly built graph each time."""
    total = best_time(lambda: build().realize(), REPEAT)
    kernels = float("inf")
    for _ in range(REPEAT):
        GlobalCounters.reset()
        build().realize()
        kernels = min(kernels, GlobalCounters.time_sum_s)
    return total, kernels


def tinygrad_run(build: Callable[[], object]) -> Callable[[], object]:
    def run() -> None:
        build().realize()
        tinygrad.Device[tinygrad.Device.DEFAULT].synchronize()
    return run


# ---- 1. the machine ----
def machine() -> dict[str, float]:
    """Copy bandwidth (GB/s, bytes read + written) and peak FMA GFLOPS, one thread and all
    (the probes are in tinyedu/runtime/probe.py)."""
    from tinyedu.runtime.device import thread_count
    from tinyedu.runtime.probe import copy_bandwidth, peak_gflops

    threads = thread_count()
    result: dict[str, float] = {"threads": threads}
    iterations = 20_000_000 if not QUICK else 5_000_000
    for t in sorted({1, threads}):
        result[f"copy GB/s ({t} threads)"] = copy_bandwidth(t, repeat=REPEAT)
        result[f"peak GFLOPS ({t} threads)"] = peak_gflops(t, iterations)
    n = 1 << 25
    x, out = np.ones(n, np.float32), np.zeros(n, np.float32)
    result["numpy copy GB/s"] = 8 * n / best_time(lambda: np.copyto(out, x), REPEAT) * 1e-9
    return result


# ---- 2. workloads ----
class Row:
    def __init__(self, name: str, unit: str, amount: float):
        self.name, self.unit, self.amount = name, unit, amount  # amount: FLOPs or bytes
        self.times: dict[str, float] = {}

    def rate(self, seconds: float) -> float:
        return self.amount / seconds * 1e-9


def measure(row: Row, tinyedu_build: Callable[[], Tensor], others: dict[str, Callable[[], object]]) -> Row:
    row.times["tinyedu"], row.times["kernels"] = tinyedu_times(tinyedu_build)
    for label, run in others.items():
        row.times[label] = best_time(run, REPEAT)
    return row


def workloads(rng: np.random.Generator) -> list[Row]:
    rows = []
    n = 1 << (20 if QUICK else 24)
    A, B, C = (rng.standard_normal(n).astype(np.float32) for _ in range(3))
    a, b, c = (Tensor(v).realize() for v in (A, B, C))
    others: dict[str, Callable[[], object]] = {"numpy": lambda: np.maximum(A * B + C, 0) * 0.5 - A}
    if torch:
        ta, tb, tc = (torch.from_numpy(v) for v in (A, B, C))
        others["torch"] = lambda: (ta * tb + tc).relu() * 0.5 - ta
    if tinygrad:
        ga, gb, gc = (tinygrad.Tensor(v).realize() for v in (A, B, C))
        others["tinygrad"] = tinygrad_run(lambda: (ga * gb + gc).relu() * 0.5 - ga)
    rows.append(measure(Row(f"relu(a*b+c)*0.5-a 2^{n.bit_length() - 1}", "GB/s", 16 * n),
                        lambda: (a * b + c).relu() * 0.5 - a, others))

    others = {"numpy": lambda: A.sum()}
    if torch:
        others["torch"] = lambda: ta.sum()
    if tinygrad:
        others["tinygrad"] = tinygrad_run(lambda: ga.sum())
    rows.append(measure(Row(f"sum 2^{n.bit_length() - 1}", "GB/s", 4 * n), lambda: a.sum(), others))

    side = 1 << (10 if QUICK else 12)
    M = rng.standard_normal((side, side)).astype(np.float32)
    m = Tensor(M).realize()
    others = {"numpy": lambda: M.sum(1)}
    if torch:
        tm = torch.from_numpy(M)
        others["torch"] = lambda: tm.sum(1)
    if tinygrad:
        gm = tinygrad.Tensor(M).realize()
        others["tinygrad"] = tinygrad_run(lambda: gm.sum(1))
    rows.append(measure(Row(f"sum(axis=1) {side}x{side}", "GB/s", 4 * side * side), lambda: m.sum(1), others))

    for size in ((256, 512) if QUICK else (256, 512, 1024)):
        X, W = (rng.standard_normal((size, size)).astype(np.float32) for _ in range(2))
        x, w = Tensor(X).realize(), Tensor(W).realize()
        others = {"numpy": lambda X=X, W=W: X @ W}
        if torch:
            tx, tw = torch.from_numpy(X), torch.from_numpy(W)
            others["torch"] = lambda tx=tx, tw=tw: tx @ tw
        if tinygrad:
            gx, gw = tinygrad.Tensor(X).realize(), tinygrad.Tensor(W).realize()
            others["tinygrad"] = tinygrad_run(lambda gx=gx, gw=gw: gx @ gw)
        rows.append(measure(Row(f"matmul {size}", "GFLOPS", 2 * size ** 3), lambda x=x, w=w: x @ w, others))

    X, W = (rng.standard_normal((256, 256)).astype(np.float32) * 0.1 for _ in range(2))
    x, w = Tensor(X).realize(), Tensor(W).realize()
    others = {"numpy": lambda: np.exp(X) @ W}
    if torch:
        tx, tw = torch.from_numpy(X), torch.from_numpy(W)
        others["torch"] = lambda: tx.exp() @ tw
    if tinygrad:
        gx, gw = tinygrad.Tensor(X).realize(), tinygrad.Tensor(W).realize()
        others["tinygrad"] = tinygrad_run(lambda: gx.exp() @ gw)
    rows.append(measure(Row("x.exp() @ w 256", "GFLOPS", 2 * 256 ** 3), lambda: x.exp() @ w, others))
    return rows


def print_rows(rows: list[Row], probes: dict[str, float]) -> None:
    labels = [label for label in ("numpy", "torch", "tinygrad") if any(label in r.times for r in rows)]
    print(f"workloads ({load()}, after they ran)")
    print(f"{'workload':28s} {'tinyedu':>9s} {'kernels':>9s} {'rate':>14s} {'of roof':>8s} "
          + " ".join(f"{label:>9s} {'ratio':>6s}" for label in labels))
    print(f"{'(times in ms, best of ' + str(REPEAT) + ')':28s} {'e2e':>9s} {'only':>9s} {'(kernels)':>14s}")
    threads = int(probes["threads"])
    for r in rows:
        peak = probes[f"peak GFLOPS ({threads} threads)"] if r.unit == "GFLOPS" else \
            probes[f"copy GB/s ({threads} threads)"]
        rate = r.rate(r.times["kernels"])
        cells = [f"{r.name:28s} {r.times['tinyedu'] * 1e3:9.3f} {r.times['kernels'] * 1e3:9.3f} "
                 f"{rate:8.1f} {r.unit:5s} {rate / peak:7.0%}"]
        for label in labels:
            t = r.times.get(label)
            cells.append(f"{t * 1e3:9.3f} {t / r.times['tinyedu']:5.2f}x" if t else f"{'-':>9s} {'-':>6s}")
        print(" ".join(cells))
    print("(of roof: GFLOPS rows against the peak FMA rate, GB/s rows against the copy bandwidth; a copy "
          "reads and writes, a sum only reads, so a sum can pass 100%)")


# ---- 3. the targets ----
def targets(rows: list[Row], probes: dict[str, float]) -> None:
    by_name = {r.name.split(" 2^")[0].split(" ")[0] + (r.name.split()[-1] if "matmul" in r.name else ""): r
               for r in rows}
    threads = int(probes["threads"])
    copy = probes[f"copy GB/s ({threads} threads)"]
    checks = []
    for size in ("256", "512", "1024"):
        r = by_name.get(f"matmul{size}")
        if r:
            checks.append((f"matmul {size}: >= 0.5x numpy's GFLOPS (kernel)",
                           r.times["numpy"] / r.times["kernels"], 0.5))
            checks.append((f"matmul {size}: >= 0.5x numpy's GFLOPS (end to end)",
                           r.times["numpy"] / r.times["tinyedu"], 0.5))
    for key, label in (("sum", "sum 2^24"), ("sum(axis=1)", "sum(axis=1) 4096^2")):
        r = by_name.get(key)
        if r:
            checks.append((f"{label}: no slower than numpy", r.times["numpy"] / r.times["tinyedu"], 1.0))
            if "torch" in r.times:
                checks.append((f"{label}: aim, PyTorch's time", r.times["torch"] / r.times["tinyedu"], 1.0))
    chain = next(r for r in rows if r.name.startswith("relu"))
    checks.append(("elementwise chain: >= 85% of copy bandwidth (kernel)",
                   chain.rate(chain.times["kernels"]) / copy, 0.85))
    checks.append(("elementwise chain: >= 85% of copy bandwidth (end to end)",
                   chain.rate(chain.times["tinyedu"]) / copy, 0.85))
    for r in rows:
        if "tinygrad" in r.times:
            checks.append((f"faster than tinygrad: {r.name}", r.times["tinygrad"] / r.times["tinyedu"], 1.0))
    print(f"\ntargets (ratio: other / tinyedu, or the fraction reached; measured above, {load()} now)")
    for name, value, bar in checks:
        print(f"  {'PASS' if value >= bar else 'MISS'}  {name:62s} {value:6.2f} (needs {bar})")


def kernel_ast(expr: Tensor):
    """The AST of the one compute kernel of `expr` (its inputs are realized)."""
    from tinyedu.core.ops import LoadOps
    from tinyedu.engine.schedule import create_schedule

    return next(i.ast for i in create_schedule([expr.lazydata]) if not isinstance(i.ast.op, LoadOps))


# ---- 4. what the optimizer costs ----
def optimizer_cost(rng: np.random.Generator) -> None:
    from tinyedu.engine import lower as lowering
    from tinyedu.runtime.device import Device

    x = Tensor(rng.standard_normal((512, 512)).astype(np.float32)).realize()
    v = Tensor(rng.standard_normal(1 << 20).astype(np.float32)).realize()
    exprs = {"matmul 512": x @ x, "sum(axis=1) 512": x.sum(1), "sum 2^20": v.sum(),
             "chain 2^20": (v * v + v).relu()}
    print("\nlowering one kernel on a cold compile cache (ms): Python = opts + linearize + render "
          f"({load()})")
    print(f"{'kernel':20s} {'NOOPT python':>13s} {'compile':>8s} {'heuristics python':>18s} {'compile':>8s}")
    saved = os.environ.get("TINYEDU_CACHE")
    with tempfile.TemporaryDirectory() as folder:
        os.environ["TINYEDU_CACHE"] = folder
        try:
            for name, expr in exprs.items():
                ast = kernel_ast(expr)
                cells = []
                for noopt in ("1", ""):
                    os.environ["NOOPT"] = noopt
                    Device["C"].programs.clear()
                    program = lowering.lower("C", ast)
                    python = sum(program.seconds[s] for s in ("opts", "linearize", "render"))
                    cells.append(f"{python * 1e3:13.1f} {program.seconds['compile'] * 1e3:8.1f}")
                print(f"{name:20s} " + "  ".join(cells))
        finally:
            os.environ.pop("NOOPT", None)
            if saved is None:
                os.environ.pop("TINYEDU_CACHE", None)
            else:
                os.environ["TINYEDU_CACHE"] = saved
            Device["C"].programs.clear()


# ---- 5. BEAM ----
def beam(rng: np.random.Generator) -> None:
    from tinyedu.codegen.heuristics import hand_coded_optimizations
    from tinyedu.codegen.kernel import Kernel
    from tinyedu.engine.beam import scratch_buffers, time_runner
    from tinyedu.engine.lower import lower, search
    from tinyedu.runtime.device import Device

    print(f"\nBEAM=2 (a fresh cache: the search runs; then again: read from the cache) ({load()})")
    x = Tensor(rng.standard_normal((512, 512)).astype(np.float32)).realize()
    v = Tensor(rng.standard_normal(1 << 22).astype(np.float32)).realize()
    saved = os.environ.get("TINYEDU_CACHE")
    with tempfile.TemporaryDirectory() as folder:
        os.environ["TINYEDU_CACHE"] = folder
        try:
            for name, expr in {"matmul 512": x @ x, "sum(axis=1) 512": x.sum(1), "sum 2^22": v.sum()}.items():
                ast = kernel_ast(expr)
                result = search(ast, "C", 2)
                again = time.perf_counter()
                search(ast, "C", 2)
                cached = time.perf_counter() - again
                device = Device["C"]
                heuristic = hand_coded_optimizations(Kernel(ast), device.vector_width, device.threads())
                buffers = scratch_buffers(ast, "C")
                heuristic_time = time_runner(lower("C", ast, heuristic).runner, buffers)
                print(f"  {name}: searched {result.tried} kernels in {result.search_seconds:.1f} s (from the "
                      f"cache: {cached * 1e3:.1f} ms); {result.seconds * 1e3:.3f} ms vs heuristics "
                      f"{heuristic_time * 1e3:.3f} ms vs as written {result.baseline * 1e3:.3f} ms\n"
                      f"    picked {result.opts}")
        finally:
            if saved is None:
                os.environ.pop("TINYEDU_CACHE", None)
            else:
                os.environ["TINYEDU_CACHE"] = saved


def _version(package: str) -> str:
    from importlib.metadata import version

    return version(package)


def main() -> None:
    rng = np.random.default_rng(0)
    load_before = os.getloadavg()
    probes = machine()
    print(f"tinyedu device C; numpy {np.__version__}"
          + (f"; torch {torch.__version__} ({torch.get_num_threads()} threads)" if torch else "; no torch")
          + (f"; tinygrad {_version('tinygrad')} ({tinygrad.Device.DEFAULT})" if tinygrad
             else "; no tinygrad")
          + f"; {os.cpu_count()} cores, tinyedu THREADS={probes['threads']}\n{peer_note()}")
    print(f"load average before: {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f} "
          "(above 0 means other processes share the machine; timings are then noisy)")
    print("machine: " + ", ".join(f"{k} {v:.1f}" for k, v in probes.items() if k != "threads") + "\n")
    rows = workloads(rng)
    print_rows(rows, probes)
    targets(rows, probes)
    optimizer_cost(rng)
    if "--no-beam" not in sys.argv:
        beam(rng)
    load_after = os.getloadavg()
    print(f"\nload average after: {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f}")


if __name__ == "__main__":
    main()
