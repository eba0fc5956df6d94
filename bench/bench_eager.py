"""Eager overhead and first-call latency: tinyedu without TinyJit next to numpy, PyTorch and tinygrad.

Run: .venv/bin/python bench/bench_eager.py [--quick]      (not a test; prints tables)

1. The eager MLP step (784-256-10, batch 128, SGD, a plain Python loop: build the graph, schedule
   it, look the programs up, run them) with the schedule cache on and off (SCHEDULE_CACHE=0),
   TinyJit's replay for reference, PyTorch, and tinygrad 0.14 eager (no TinyJit).
   Then chapter 09's Transformer block (dim 48, 4 heads, batch 64 x 11 positions): forward, a
   mean-square loss, backward and AdamW, eager and under TinyJit, against the same block in PyTorch.
   With 2 cores or more (and not THREADS=1), both tables add the eager step with ASYNC=1: its
   kernels run on a launcher thread (on cores - 1 threads) while Python builds the next step.
2. matmul 256x256 end to end, `(a @ b).numpy()` on inputs in memory, against numpy's `a @ b`, which
   is timed in a process of its own (its BLAS threads spin after each call: bench/timing.py).
3. Where an eager step's time goes, for the MLP step and the Transformer block step: building the
   graph, in two rows: the Tensor layer (Tensor ops, autograd, the optimizer's update) and the lazy
   nodes it asks for (LazyBuffer's e, r, views and constants, timed where the Tensor layer calls
   them, and the nodes a formula template replays: create), scheduling with the cache (computing the
   graph's key, then the lookup and putting this graph's nodes into the cached kernels), the
   realizer's own Python (programs looked up, buffers allocated, counters), the copies assign
   makes of a weight that a graph still lazy reads (here the loss, realized after the update, and
   the gradients' graphs, which `p.grad` keeps), launching (the Python between the realizer and
   each compiled function: its arguments, the ctypes call) and the kernels themselves. CPU time of
   this thread beside wall time: on a busy machine the wall time also counts waiting for a core.
   Before it, the Python cost of building a graph alone: microseconds per Tensor op and per lazy
   node, for 1,000 elementwise ops and for the graphs of exp and tanh.
4. First-call latency: chapter 08's CNN step in a fresh process with an empty compile cache (a
   temporary TINYEDU_CACHE), its kernels lowered ahead on COMPILE_THREADS threads or one by one.

The machine may be shared: every row of a table is measured in the same run, so compare ratios.
With THREADS=1 the tables of section 1 also give each row's median CPU time of this thread (every
kernel and every PyTorch op then runs on it): on a busy machine that column is the work itself,
where the wall time also counts waiting for a core.
PyTorch is imported before tinyedu and gets threads = cores (bench/timing.py), as do tinyedu's
kernels unless THREADS says otherwise; numpy's BLAS uses
what its environment says (OPENBLAS_NUM_THREADS / OMP_NUM_THREADS). On a busy machine, run with
THREADS=1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1: threads that wait for taken cores measure the
machine, not the frameworks.
"""

from __future__ import annotations

import gc
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Callable

import numpy as np
from timing import QUICK, in_own_process, load, median_time, peer_note, tinygrad, torch

from tinyedu import Tensor, TinyJit
from tinyedu.core import lazy as core_lazy
from tinyedu.core.helpers import GlobalCounters
from tinyedu.engine import assign as assign_module
from tinyedu.engine import realize, schedule, schedule_cache
from tinyedu.engine.schedule_cache import schedules
from tinyedu.lazy import LazyBuffer
from tinyedu.models.transformer import Block
from tinyedu.nn import Linear
from tinyedu.nn.optim import SGD, AdamW
from tinyedu.nn.state import get_parameters
from tinyedu.runtime.device import CORES, thread_count
from tinyedu.runtime.launch_queue import QUEUE
from tinyedu.runtime.ops_c import CProgram

STEPS = 10 if QUICK else 40


def with_env(name: str, value: str, run: Callable[[], float]) -> float:
    """run() with the environment variable `name` set to `value` (tinyedu reads its flags on every use)."""
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        return run()
    finally:
        if old is None:
            del os.environ[name]
        else:
            os.environ[name] = old


def one_thread() -> bool:
    """Whether tinyedu's kernels and PyTorch's ops all run on the calling thread (THREADS=1)."""
    return thread_count() == 1 and (torch is None or torch.get_num_threads() == 1)


def wall_and_cpu(run: Callable[[], object], repeat: int, warmup: int = 3) -> tuple[float, float]:
    """Median wall seconds and median CPU seconds of this thread, per call of `run()`.

    With one thread (THREADS=1) tinyedu's kernels and PyTorch's ops run on the calling thread, so its
    CPU time is the work itself, while on a busy machine the wall time also counts waiting for a core:
    the CPU column is the one to compare there (tinygrad may run work on threads of its own, so it gets
    none)."""
    for _ in range(warmup):
        run()
    walls, cpus = [], []
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.thread_time()
        run()
        cpus.append(time.thread_time() - cpu)
        walls.append(time.perf_counter() - wall)
    return statistics.median(walls), statistics.median(cpus)


def async_rows(step: Callable[[], object], rows: dict[str, tuple[float, float | None]]) -> None:
    """The step with ASYNC=1 (kernels queued to a launcher thread, on THREADS = cores - 1 by default,
    while Python builds the next step on the last core: tinyedu/runtime/launch_queue.py), when there
    are cores for it and the other rows use them too (not with THREADS=1, where PyTorch gets one
    core and this would use two). Timed as a block of steps that ends when every queued kernel ran:
    a step returns before its kernels finished, so a single step's time would not count them."""
    if one_thread() or CORES < 2:
        return

    def block() -> float:
        for _ in range(3):
            step()
        QUEUE.drain()
        start = time.perf_counter()
        for _ in range(STEPS):
            step()
        QUEUE.drain()
        return (time.perf_counter() - start) / STEPS

    seconds = with_env("ASYNC", "1", block)
    rows[f"tinyedu eager, ASYNC=1 ({thread_count_with_async()} thr.)"] = (seconds, None)


def thread_count_with_async() -> int:
    return with_env("ASYNC", "1", thread_count)


def print_rows(rows: dict[str, tuple[float, float | None]], reference: str | None) -> None:
    """Each row's wall ms (and x the reference row), and with one thread its CPU ms (and x the reference)."""
    cpu_shown = one_thread()
    head = f"{'':34s} {'wall':>8s}   {'':14s}" + (f" {'CPU, this thread':>16s}" if cpu_shown else "")
    print(head)
    for name, (wall, cpu) in rows.items():
        line = f"{name:34s} {wall * 1e3:8.2f} ms"
        if reference is not None:
            line += f"   {wall / rows[reference][0]:5.2f}x PyTorch"
        if cpu_shown and cpu is not None:
            line += f" {cpu * 1e3:8.2f} ms"
            if reference is not None:
                line += f"   {cpu / rows[reference][1]:5.2f}x PyTorch"
        print(line)


# ---- 1. the eager MLP step ----
class MLP:
    def __init__(self) -> None:
        self.l1, self.l2 = Linear(784, 256), Linear(256, 10)

    def __call__(self, x: Tensor) -> Tensor:
        return self.l2(self.l1(x).relu())


def mlp_data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return rng.standard_normal((128, 784)).astype(np.float32), rng.integers(0, 10, 128).astype(np.int32)


def tinyedu_mlp_step() -> Callable[[], Tensor]:
    Tensor.manual_seed(0)
    model = MLP()
    opt = SGD(get_parameters(model), lr=0.01)
    x_np, y_np = mlp_data()
    x, y = Tensor(x_np).realize(), Tensor(y_np).realize()

    def step() -> Tensor:
        opt.zero_grad()
        loss = model(x).cross_entropy(y).backward()
        opt.step()
        return loss.realize()

    return step


def torch_mlp_step() -> Callable[[], None]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x_np, y_np = mlp_data()
    x, y = torch.tensor(x_np), torch.tensor(y_np).long()

    def step() -> None:
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()

    return step


def tinygrad_mlp_step() -> Callable[[], object]:
    from tinygrad import Context
    from tinygrad import Tensor as TgTensor
    from tinygrad import nn as tgnn

    class TgMLP:
        def __init__(self) -> None:
            self.l1, self.l2 = tgnn.Linear(784, 256), tgnn.Linear(256, 10)

        def __call__(self, x: TgTensor) -> TgTensor:
            return self.l2(self.l1(x).relu())

    model = TgMLP()
    opt = tgnn.optim.SGD(tgnn.state.get_parameters(model), lr=0.01)
    x_np, y_np = mlp_data()
    x, y = TgTensor(x_np).realize(), TgTensor(y_np).realize()

    def step() -> object:
        with Context(TRAINING=1):
            opt.zero_grad()
            loss = model(x).sparse_categorical_crossentropy(y).backward()
            opt.step()
            return loss.realize()

    return step


def mlp_table() -> None:
    print(f"\n== eager MLP 784-256-10 SGD step, batch 128 (no TinyJit) [{load()}]")
    step = tinyedu_mlp_step()
    cached = wall_and_cpu(step, STEPS)
    uncached = with_env("SCHEDULE_CACHE", "0", lambda: wall_and_cpu(step, STEPS))
    jit = TinyJit(step)
    replay = wall_and_cpu(jit, STEPS)
    rows: dict[str, tuple[float, float | None]] = {
        "tinyedu eager, schedule cache": cached, "tinyedu eager, SCHEDULE_CACHE=0": uncached,
        "tinyedu TinyJit replay": replay}
    async_rows(step, rows)
    reference = None
    if torch is not None:
        reference = f"PyTorch ({torch.get_num_threads()} threads)"
        rows[reference] = wall_and_cpu(torch_mlp_step(), STEPS)
    if tinygrad is not None:
        try:
            rows["tinygrad 0.14 eager"] = (median_time(tinygrad_mlp_step(), max(3, STEPS // 4)), None)
        except Exception as e:  # e.g. no clang for its CPU backend
            print(f"tinygrad skipped: {type(e).__name__}: {str(e).splitlines()[0][:100]}")
    print_rows(rows, reference)
    if torch is not None:
        print(f"goal: eager <= 2x PyTorch, TinyJit <= 1x; the schedule cache makes the step "
              f"{uncached[0] / cached[0]:.2f}x faster")


# ---- 1b. a chapter 09-sized Transformer block step ----
BLOCK_SHAPE = (64, 11, 48, 4)  # batch, length, dim, heads: chapter 09's addition model (dim 48, 4 heads)


def block_data() -> np.ndarray:
    batch, length, dim, _ = BLOCK_SHAPE
    return np.random.default_rng(1).standard_normal((batch, length, dim)).astype(np.float32)


def tinyedu_block_step() -> Callable[[], Tensor]:
    """Chapter 09's Block: forward, a mean-square loss, backward, AdamW."""
    Tensor.manual_seed(0)
    block = Block(BLOCK_SHAPE[2], BLOCK_SHAPE[3])
    opt = AdamW(get_parameters(block), lr=1e-3)
    x = Tensor(block_data()).realize()

    def step() -> Tensor:
        opt.zero_grad()
        loss = block(x).square().mean().backward()
        opt.step()
        return loss.realize()

    return step


def torch_block_step() -> Callable[[], None]:
    """The same block in eager PyTorch (the same math: explicit causal attention, tanh GELU)."""
    F = torch.nn.functional
    batch, length, dim, heads = BLOCK_SHAPE
    torch.manual_seed(0)
    ln1, ln2 = torch.nn.LayerNorm(dim), torch.nn.LayerNorm(dim)
    qkv, proj = torch.nn.Linear(dim, 3 * dim), torch.nn.Linear(dim, dim)
    fc, fc_proj = torch.nn.Linear(dim, 4 * dim), torch.nn.Linear(4 * dim, dim)
    modules = torch.nn.ModuleList([ln1, ln2, qkv, proj, fc, fc_proj])
    opt = torch.optim.AdamW(modules.parameters(), lr=1e-3)
    x = torch.from_numpy(block_data())
    causal = torch.ones(length, length, dtype=torch.bool).tril()

    def forward(x: torch.Tensor) -> torch.Tensor:
        q, k, v = qkv(ln1(x)).reshape(batch, length, 3, heads, dim // heads).permute(2, 0, 3, 1, 4)
        scores = (q @ k.transpose(-2, -1)) * (1 / (dim // heads) ** 0.5)
        out = scores.masked_fill(~causal, float("-inf")).softmax(-1) @ v
        x = x + proj(out.permute(0, 2, 1, 3).reshape(batch, length, dim))
        return x + fc_proj(F.gelu(fc(ln2(x)), approximate="tanh"))

    def step() -> None:
        opt.zero_grad()
        forward(x).square().mean().backward()
        opt.step()

    return step


def block_table() -> None:
    batch, length, dim, heads = BLOCK_SHAPE
    print(f"\n== chapter 09's Transformer block step: batch {batch}, length {length}, dim {dim}, "
          f"{heads} heads; forward, mean-square loss, backward, AdamW [{load()}]")
    step = tinyedu_block_step()
    rows: dict[str, tuple[float, float | None]] = {"tinyedu eager": wall_and_cpu(step, STEPS)}
    async_rows(step, rows)
    rows["tinyedu TinyJit replay"] = wall_and_cpu(TinyJit(step), STEPS)
    if torch is not None:
        rows["PyTorch eager"] = wall_and_cpu(torch_block_step(), STEPS)
    print_rows(rows, "PyTorch eager" if torch is not None else None)


# ---- 2. matmul 256x256 end to end ----
def matmul_inputs() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    a_np, b_np = (rng.standard_normal((256, 256)).astype(np.float32) for _ in range(2))
    return a_np, b_np


def numpy_matmul_seconds() -> float:
    """numpy's 256x256 `a @ b`, timed in a process of its own (see in_own_process in timing.py)."""
    a_np, b_np = matmul_inputs()
    return median_time(lambda: a_np @ b_np, 5 * STEPS)


def matmul_table() -> None:
    print(f"\n== matmul 256x256 end to end: (a @ b).numpy() on inputs already in memory [{load()}]")
    a_np, b_np = matmul_inputs()
    a, b = Tensor(a_np).realize(), Tensor(b_np).realize()
    reference = "numpy a @ b (own process)"
    rows = {reference: in_own_process("bench_eager", "numpy_matmul_seconds")}
    rows["tinyedu, schedule cache"] = median_time(lambda: (a @ b).numpy(), 5 * STEPS)
    rows["tinyedu, SCHEDULE_CACHE=0"] = with_env("SCHEDULE_CACHE", "0",
                                                 lambda: median_time(lambda: (a @ b).numpy(), 5 * STEPS))
    GlobalCounters.reset()
    for _ in range(STEPS):
        (a @ b).numpy()
    rows["  its kernel alone"] = GlobalCounters.time_sum_s / STEPS
    if torch is not None:
        ta, tb = torch.tensor(a_np), torch.tensor(b_np)
        rows["PyTorch (a @ b).numpy()"] = median_time(lambda: (ta @ tb).numpy(), 5 * STEPS)
    if tinygrad is not None:
        from tinygrad import Tensor as TgTensor
        ga, gb = TgTensor(a_np).realize(), TgTensor(b_np).realize()
        rows["tinygrad 0.14 (a @ b).numpy()"] = median_time(lambda: (ga @ gb).numpy(), STEPS)
    for name, seconds in rows.items():
        print(f"{name:34s} {seconds * 1e3:8.3f} ms   {seconds / rows[reference]:5.2f}x numpy")
    print("goal: tinyedu end to end <= 1.3x numpy")


# ---- 3. where the eager step's time goes ----
class Stopwatch:
    """Time spent inside some functions, summed per label (the functions are wrapped while it is
    installed). Only the outermost call of a label is timed: a function of a label that calls another
    of the same label (e calls itself for a half float, reshape calls _view) is not counted twice."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.depth: dict[str, int] = {}
        self.wrapped: list[tuple[object, str, object]] = []

    def wrap(self, owner: object, name: str, label: str) -> None:
        original = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)
        function = original.__func__ if isinstance(original, staticmethod) else original
        self.wrapped.append((owner, name, original))

        def timed(*args, **kwargs):
            depth = self.depth.get(label, 0)
            self.depth[label] = depth + 1
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                self.depth[label] = depth
                if depth == 0:
                    self.seconds[label] = self.seconds.get(label, 0.0) + time.perf_counter() - start

        setattr(owner, name, staticmethod(timed) if isinstance(original, staticmethod) else timed)

    def restore(self) -> None:
        for owner, name, original in self.wrapped:
            setattr(owner, name, original)


def breakdown(name: str, make_step: Callable[[], Callable[[], Tensor]]) -> None:
    print(f"\n== where an eager {name} step's time goes (schedule cache on) [{load()}]")
    step = make_step()
    median_time(step, 3)
    watch = Stopwatch()
    watch.wrap(schedules, "schedule", "schedule")
    watch.wrap(schedule_cache, "graph_structure", "key")
    for owner in (realize, assign_module):
        watch.wrap(owner, "run_schedule", "run")
    watch.wrap(assign_module, "snapshot_for_pending_readers", "snapshots")
    for owner, names in ((LazyBuffer, ("e", "r", "full", "contiguous", "_view", "create")),
                         (core_lazy.LazyBuffer, ("reshape", "permute", "expand", "pad", "shrink", "cast"))):
        for method in names:  # every way in from the Tensor layer to the lazy graph
            watch.wrap(owner, method, "lazy")
    kernels = Kernels()
    GlobalCounters.reset()
    # The collector's rare full passes walk every object of the process (PyTorch's included) and land
    # on whatever function allocates: sums over a few steps would charge one to a random row. The
    # objects made so far are set aside (gc.freeze) while the steps are timed; medians elsewhere
    # leave the passes out the same way.
    gc.collect()
    gc.freeze()
    cpu, start = time.thread_time(), time.perf_counter()
    with kernels:
        for _ in range(STEPS):
            step()
    total, cpu = (time.perf_counter() - start) / STEPS, (time.thread_time() - cpu) / STEPS
    gc.unfreeze()
    watch.restore()
    parts = {key: value / STEPS for key, value in watch.seconds.items()}
    around_kernels = GlobalCounters.time_sum_s / STEPS  # the realizer's timer around each program
    kernel_s, launch_s = kernels.seconds / STEPS, around_kernels - kernels.seconds / STEPS
    snapshots = parts.get("snapshots", 0.0)
    rows = {"build the graph: Tensor ops, autograd, optimizer":
            total - parts["schedule"] - parts["run"] - snapshots - parts["lazy"],
            "build the graph: lazy nodes (e, r, views, constants)": parts["lazy"],
            "schedule: the graph's key (a walk of the graph)": parts["key"],
            "schedule: lookup, this graph's nodes into the kernels": parts["schedule"] - parts["key"],
            "realizer's Python (lookups, buffers, counters)": parts["run"] - around_kernels,
            "assign's snapshots for pending readers": snapshots,
            "launching (arguments, the ctypes call)": launch_s,
            f"kernels ({kernels.calls // STEPS} a step)": kernel_s}
    for label, seconds in rows.items():
        print(f"{label:56s} {seconds * 1e3:7.2f} ms  {seconds / total * 100:5.1f}%")
    print(f"{'the step (timed with the stopwatches in place)':56s} {total * 1e3:7.2f} ms  "
          f"(CPU time of this thread: {cpu * 1e3:.2f} ms)")


class Kernels:
    """Times the compiled functions themselves: while installed, every C program's function is called
    through a timer (what is left of the realizer's time around a kernel is launching)."""

    def __init__(self) -> None:
        self.seconds, self.calls = 0.0, 0
        self.original = CProgram.function

    def __enter__(self) -> None:
        kernels = self

        class Timed:
            """The C function, called through a timer (what CProgram sets on it goes to the function)."""

            def __init__(self, function: Callable[..., None]) -> None:
                object.__setattr__(self, "function", function)

            def __setattr__(self, name: str, value: object) -> None:  # argtypes
                setattr(self.function, name, value)

            def __call__(self, *args: object) -> None:
                begin = time.perf_counter()
                self.function(*args)
                kernels.seconds += time.perf_counter() - begin
                kernels.calls += 1

        CProgram.function = property(lambda program: Timed(self.original.fget(program)))

    def __exit__(self, *exc: object) -> None:
        CProgram.function = self.original


# ---- 4. first-call latency ----
FIRST_STEP = """
import time, numpy as np
from tinyedu import Device, Tensor
from tinyedu.nn import Conv2d, Linear
from tinyedu.models.transformer import Block
from tinyedu.nn.optim import SGD, AdamW
from tinyedu.nn.state import get_parameters
class CNN:
    def __init__(self):
        self.c1, self.c2, self.head = Conv2d(1, 8, 3), Conv2d(8, 16, 3), Linear(400, 10)
    def __call__(self, x):
        x = self.c1(x).relu().max_pool2d(2)
        x = self.c2(x).relu().max_pool2d(2)
        return self.head(x.flatten(1))
Tensor.manual_seed(0)
rng = np.random.default_rng(0)
x = Tensor(rng.standard_normal((64, 1, 28, 28)).astype(np.float32))
y = Tensor(rng.integers(0, 10, 64).astype(np.int32))
model = CNN()
opt = SGD(get_parameters(model), lr=0.01)
def step():
    opt.zero_grad(); loss = model(x).cross_entropy(y).backward(); opt.step(); return loss.realize()
times = []
for _ in range(2):
    start = time.perf_counter(); step(); times.append(time.perf_counter() - start)
programs = list(Device["C"].programs.values())
compile_s = sum(p.seconds.get("compile", 0.0) for p in programs)
print(times[0], times[1], len(programs), compile_s)
"""


def first_call(threads: str) -> tuple[float, float, int, float]:
    """(first step, second step, programs, summed compile seconds) in a fresh process, empty cache."""
    with tempfile.TemporaryDirectory(prefix="tinyedu-cold-") as cache:
        env = {**os.environ, "TINYEDU_CACHE": cache, "COMPILE_THREADS": threads, "DEVICE": "C"}
        out = subprocess.run([sys.executable, "-c", FIRST_STEP], env=env, capture_output=True, text=True,
                             check=True).stdout.split()
    return float(out[0]), float(out[1]), int(out[2]), float(out[3])


def first_call_table() -> None:
    print("\n== first call: chapter 08's CNN step in a fresh process, empty compile cache")
    cores = str(os.cpu_count() or 1)
    for label, threads in ((f"lowered ahead, {cores} threads", cores), ("one kernel at a time", "1")):
        first, second, programs, compile_s = first_call(threads)
        print(f"{label:34s} first step {first * 1e3:7.0f} ms ({programs} kernels; their compiles "
              f"add up to {compile_s * 1e3:.0f} ms), second step {second * 1e3:6.1f} ms")


def graph_building_table() -> None:
    """The Python cost of one Tensor op and of one lazy node, building without realizing: 1,000
    elementwise ops (add, mul, sub, relu) on a (128, 256) tensor, and the graphs of exp and tanh.
    The minimum of several runs, in CPU time of this thread (the least disturbed by a busy machine).
    The first node is a fresh copy, so no op below it is found in the node cache. exp and tanh replay
    the graph their first call recorded (tinyedu/function_template.py), as they do in a step."""
    print(f"\n== building the graph, nothing realized (min CPU time of this thread) [{load()}]")
    rng = np.random.default_rng(0)
    x = Tensor(rng.standard_normal((128, 256)).astype(np.float32)).realize()
    y = Tensor(rng.standard_normal((128, 256)).astype(np.float32)).realize()
    big = Tensor(rng.standard_normal(1 << 22).astype(np.float32)).realize()

    def elementwise() -> Tensor:
        z = Tensor._wrap(x.lazydata.copy())
        for _ in range(250):
            z = (((z + y) * y) - x).relu()
        return z

    def nodes(out: Tensor) -> int:  # the lazy bases the graph adds below the realized inputs
        return len(schedule.bases_to_run([out.lazydata]))

    for label, build, ops in (("1,000 elementwise Tensor ops", elementwise, 1000),
                              ("exp of 2^22 float32", big.exp, 1), ("tanh of 2^22 float32", big.tanh, 1)):
        count = nodes(build())
        best = min(_cpu_time(build) for _ in range(3 if QUICK else 10))
        per_op = f"{best / ops * 1e6:6.2f} us per Tensor op, " if ops > 1 else ""
        print(f"{label:30s} {best * 1e3:7.3f} ms  {per_op}{best / count * 1e6:6.2f} us per lazy node "
              f"({count} nodes)")


def _cpu_time(run: Callable[[], object]) -> float:
    start = time.thread_time()
    run()
    return time.thread_time() - start


if __name__ == "__main__":
    print(f"tinyedu threads: {thread_count()}; {peer_note()} [{load()}]")
    mlp_table()
    block_table()
    matmul_table()
    graph_building_table()
    breakdown("MLP", tinyedu_mlp_step)
    breakdown("Transformer block", tinyedu_block_step)
    first_call_table()
