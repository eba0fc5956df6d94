"""CPU benchmark of issue 20: tinyedu next to PyTorch and tinygrad, side by side in one run, as ratios.

Run: .venv/bin/python bench/bench_cpu.py [--quick]      (not a test; prints tables)

1. Cases, each timed in every framework (median of several runs, after warm-up):
   - conv2d 3x3, 32x16x28x28 -> 32 channels (padding 1), and a ResNet block's shapes (3x3 at 64
     channels 32x32, batch 8; a 1x1 with stride 2 to 128 channels): forward, and forward + backward
     to the weights;
   - MLP 784-256-10 SGD step, batch 128: eager (build the graph, schedule, run) and under TinyJit;
   - exp, tanh, sigmoid and gelu of 2^22 float32, and exp of float64 (tinyedu/renderer/c_vector_math.py
     vectorizes their exp2 and exp on the C device; TINYEDU_NO_VECTOR_MATH=1 times the exp2f calls it
     replaces; bench/bench_transcendentals.py times these alone, with one thread and default threads);
   - matmul 256x256 and 1024x1024 end to end (build, schedule, run, read back), against numpy (its
     BLAS, kernel and threads printed above the table: threadpoolctl); bench/bench_matmul.py times
     more shapes (odd, prime, non-square), kernel alone and end to end.
   Each cell is a time and its ratio to the reference (PyTorch, or numpy for the matmul): < 1 is faster.
2. Threads on a busy machine: the TinyJit MLP step with 0, 1 and 2 other busy processes (this bench
   starts them and kills them after), with default threads, with THREADS=1, and with default threads
   but libgomp's own spinning waits, each in a fresh Python (OpenMP reads its settings when it loads),
   the settings alternating round by round. Goal: with two busy processes, default threads <= 1.2x
   the THREADS=1 time; with none, default threads not slower.
3. LLVM threads: kernels alone, THREADS=1 against default threads, on LLVM and on C.

PyTorch and tinygrad are imported before tinyedu (bench/timing.py), so PyTorch's OpenMP runtime is
loaded with its own default policy before any tinyedu kernel runs; tinyedu's kernels then share that
runtime (one libgomp.so.1 per process) and its policy. PyTorch runs with threads = cores (its
default, set by timing.py), forward-only cases under torch.no_grad. tinygrad runs on its CPU backend
(it needs clang), eager and under its own TinyJit.
The machine may be shared: read the ratios, and the load averages printed with each section.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from importlib.metadata import version
from pathlib import Path
from typing import Callable

import numpy as np
from timing import QUICK, blas_note, load, median_time, peer_note, tinygrad, torch

from tinyedu import Tensor, TinyJit
from tinyedu.engine import beam
from tinyedu.engine.lower import heuristic_opts, lower, new_kernel
from tinyedu.engine.schedule import create_schedule
from tinyedu.nn import Linear
from tinyedu.nn.optim import SGD
from tinyedu.nn.state import get_parameters
from tinyedu.runtime.device import Device, DeviceUnavailable, thread_count

REPEAT = 5 if QUICK else 20
ROOT = Path(__file__).resolve().parents[1]





# ---- 1. the cases, in each framework: {framework: run} ----
# (name, input shape, weight shape, stride, padding): the bench's case and a ResNet block's shapes
CONVS = [("conv2d 3x3 32x16x28x28->32", (32, 16, 28, 28), (32, 16, 3, 3), 1, 1),
         ("conv2d 3x3 8x64x32x32->64", (8, 64, 32, 32), (64, 64, 3, 3), 1, 1),
         ("conv2d 1x1 s2 8x64x32x32->128", (8, 64, 32, 32), (128, 64, 1, 1), 2, 0)]


def conv_cases(rng: np.random.Generator) -> dict[str, dict[str, Callable[[], object]]]:
    """Each convolution's forward row, then its forward + backward to the weights row."""
    cases = {}
    for name, x_shape, w_shape, stride, padding in CONVS[:1] if QUICK else CONVS:
        forward, backward = one_conv_case(rng, x_shape, w_shape, stride, padding)
        cases[f"{name}, forward"] = forward
        cases[f"  {name.split(' ', 1)[1]} fwd + bwd to w"] = backward  # (one key per case)
    return cases


def one_conv_case(rng: np.random.Generator, x_shape: tuple, w_shape: tuple, stride: int,
                  padding: int) -> tuple[dict, dict]:
    X = rng.standard_normal(x_shape).astype(np.float32)
    W = rng.standard_normal(w_shape).astype(np.float32) * 0.1
    x, w = Tensor(X).realize(), Tensor(W, requires_grad=True).realize()

    def ours_backward() -> None:
        w.grad = None
        x.conv2d(w, stride=stride, padding=padding).sum().backward()
        w.grad.realize()

    forward = {"tinyedu": lambda: x.conv2d(w, stride=stride, padding=padding).realize()}
    backward = {"tinyedu": ours_backward}
    if torch:
        tx, tw = torch.from_numpy(X), torch.from_numpy(W).requires_grad_()

        def torch_backward() -> None:
            tw.grad = None
            torch.nn.functional.conv2d(tx, tw, stride=stride, padding=padding).sum().backward()

        def torch_forward() -> None:
            with torch.no_grad():  # a forward pass alone: no autograd graph
                torch.nn.functional.conv2d(tx, tw, stride=stride, padding=padding)

        forward["torch"] = torch_forward
        backward["torch"] = torch_backward
    if tinygrad:
        gx, gw = tinygrad.Tensor(X).realize(), tinygrad.Tensor(W).realize()
        gw.requires_grad = True

        def tinygrad_backward() -> None:
            gw.grad = None
            gx.conv2d(gw, stride=stride, padding=padding).sum().backward()
            gw.grad.realize()

        forward["tinygrad"] = lambda: gx.conv2d(gw, stride=stride, padding=padding).realize()
        backward["tinygrad"] = tinygrad_backward
    return forward, backward


def mlp_step(rng: np.random.Generator) -> tuple[Callable[[], object], Callable[[], object]]:
    """tinyedu's MLP 784-256-10 SGD step (batch 128): (eager, TinyJit)."""
    Tensor.manual_seed(0)
    l1, l2 = Linear(784, 256), Linear(256, 10)
    opt = SGD(get_parameters([l1, l2]), lr=0.01)
    x = Tensor(rng.standard_normal((128, 784)).astype(np.float32)).realize()
    y = Tensor(rng.integers(0, 10, 128).astype(np.int32)).realize()

    def step(x: Tensor, y: Tensor) -> Tensor:
        opt.zero_grad()
        loss = l2(l1(x).relu()).cross_entropy(y).backward()
        opt.step()
        return loss

    jit = TinyJit(step)
    return lambda: step(x, y).realize(), lambda: jit(x, y).realize()


def mlp_cases(rng: np.random.Generator) -> dict[str, dict[str, Callable[[], object]]]:
    X, Y = rng.standard_normal((128, 784)).astype(np.float32), rng.integers(0, 10, 128)
    eager, jit = mlp_step(rng)
    cases = {"MLP 784-256-10 SGD step, eager": {"tinyedu": eager},
             "  the same under TinyJit": {"tinyedu": jit}}
    if torch:
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        tx, ty = torch.from_numpy(X), torch.from_numpy(Y)

        def torch_step() -> None:
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(tx), ty).backward()
            opt.step()

        cases["MLP 784-256-10 SGD step, eager"]["torch"] = torch_step
        cases["  the same under TinyJit"]["torch"] = torch_step  # PyTorch has no JIT here: its eager step
    if tinygrad:
        tg_eager, tg_jit = tinygrad_mlp(X, Y)
        cases["MLP 784-256-10 SGD step, eager"]["tinygrad"] = tg_eager
        cases["  the same under TinyJit"]["tinygrad"] = tg_jit
    return cases


def tinygrad_mlp(X: np.ndarray, Y: np.ndarray) -> tuple[Callable[[], object], Callable[[], object]]:
    from tinygrad import Context
    from tinygrad import nn as tgnn

    l1, l2 = tgnn.Linear(784, 256), tgnn.Linear(256, 10)
    opt = tgnn.optim.SGD([l1.weight, l1.bias, l2.weight, l2.bias], lr=0.01)
    x, y = tinygrad.Tensor(X).realize(), tinygrad.Tensor(Y.astype(np.int32)).realize()

    def step(x: tinygrad.Tensor, y: tinygrad.Tensor) -> tinygrad.Tensor:
        with Context(TRAINING=1):
            opt.zero_grad()
            loss = l2(l1(x).relu()).sparse_categorical_crossentropy(y).backward()
            opt.step()
            return loss.realize()

    jit = tinygrad.TinyJit(step)
    return lambda: step(x, y).numpy(), lambda: jit(x, y).numpy()


def matmul_case(rng: np.random.Generator) -> dict[str, dict[str, Callable[[], object]]]:
    cases = {}
    for n in (256, 1024):
        X, W = (rng.standard_normal((n, n)).astype(np.float32) for _ in range(2))
        x, w = Tensor(X).realize(), Tensor(W).realize()
        runs: dict[str, Callable[[], object]] = {"numpy": lambda X=X, W=W: X @ W,
                                                 "tinyedu": lambda x=x, w=w: (x @ w).numpy()}
        if torch:
            tx, tw = torch.from_numpy(X), torch.from_numpy(W)
            runs["torch"] = lambda tx=tx, tw=tw: (tx @ tw).numpy()
        if tinygrad:
            gx, gw = tinygrad.Tensor(X).realize(), tinygrad.Tensor(W).realize()
            runs["tinygrad"] = lambda gx=gx, gw=gw: (gx @ gw).numpy()
        cases[f"matmul {n}x{n} end to end (vs numpy)"] = runs
    return cases


def transcendental_cases(rng: np.random.Generator) -> dict[str, dict[str, Callable[[], object]]]:
    """exp, tanh, sigmoid, gelu of 2^22 float32 (2^18 with --quick), realized (PyTorch: no_grad)."""
    X = rng.standard_normal(1 << (18 if QUICK else 22)).astype(np.float32)
    x = Tensor(X).realize()
    ops = {"exp": (Tensor.exp, "exp"), "tanh": (Tensor.tanh, "tanh"), "sigmoid": (Tensor.sigmoid, "sigmoid"),
           "gelu": (Tensor.gelu, None)}
    cases = {}
    for name, (ours, theirs) in ops.items():
        runs: dict[str, Callable[[], object]] = {"tinyedu": lambda f=ours: f(x).realize()}
        if torch:
            tx = torch.from_numpy(X)
            function = getattr(torch, theirs) if theirs else torch.nn.functional.gelu

            def torch_run(function=function, tx=tx) -> None:
                with torch.no_grad():
                    function(tx)

            runs["torch"] = torch_run
        if tinygrad:
            gx = tinygrad.Tensor(X).realize()
            runs["tinygrad"] = lambda name=name, gx=gx: getattr(gx, name)().realize()
        cases[f"{name} of 2^{18 if QUICK else 22} float32"] = runs
    X64 = X.astype(np.float64)  # float64 loops get their own vector exp2 too (c_vector_math.py)
    x64 = Tensor(X64).realize()
    runs = {"tinyedu": lambda: x64.exp().realize()}
    if torch:
        tx64 = torch.from_numpy(X64)
        runs["torch"] = lambda: torch.exp(tx64)
    cases[f"exp of 2^{18 if QUICK else 22} float64"] = runs
    return cases


def cases_table() -> None:
    rng = np.random.default_rng(0)
    print(f"== 1. cases ({load()}); times in ms, (x) = time / reference's time")
    print(f"{'case':40s} {'reference':>12s} {'PyTorch':>16s} {'tinygrad':>16s} {'tinyedu':>16s}")
    for make in (conv_cases, mlp_cases, matmul_case, transcendental_cases):
        for name, runs in make(rng).items():
            times = {}
            for framework, run in runs.items():
                try:
                    times[framework] = median_time(run, REPEAT)
                except Exception as error:  # e.g. tinygrad without clang
                    print(f"  {framework} skipped on {name.strip()}: {type(error).__name__}: {error}"[:160])
            reference = "numpy" if "numpy" in times else "torch"
            cells = [f"{name:40s} {reference:>6s}" + (f"{times[reference] * 1e3:6.2f}" if reference in times
                                                       else f"{'-':>6s}")]
            for framework in ("torch", "tinygrad", "tinyedu"):
                t = times.get(framework)
                cells.append(f"{'-':>16s}" if t is None or reference not in times else
                             f"{t * 1e3:8.2f} ({t / times[reference]:5.2f}x)")
            print(" ".join(cells), flush=True)


# ---- 2. threads on a busy machine ----
def busy_processes(count: int) -> list[subprocess.Popen]:
    """`count` processes that keep a core busy each (killed by the caller)."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]


# The settings compared: default threads; one thread; and default threads with libgomp's own waiting
# (it spins 300000 times before it sleeps when no policy is set: what tinyedu's passive policy replaces).
SETTINGS = {"default": {}, "THREADS=1": {"THREADS": "1"}, "spinning": {"GOMP_SPINCOUNT": "300000"}}


def jit_step_in_fresh_python(settings: dict[str, str], steps: int) -> float:
    """Median ms of the TinyJit MLP step in a new Python, with these environment settings."""
    env = {k: v for k, v in os.environ.items() if k not in ("THREADS", "OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    env.update(settings)
    result = subprocess.run([sys.executable, __file__, "--jit-step", str(steps)], env=env, text=True,
                            capture_output=True, timeout=600)
    if result.returncode != 0:
        raise RuntimeError(result.stderr[-2000:])
    return float(result.stdout.split()[-1])


def threads_table() -> None:
    rounds, steps = (2, 100) if QUICK else (5, 200)
    print(f"\n== 2. TinyJit MLP step (ms, medians of {rounds} rounds of {steps} steps, each in a fresh "
          f"Python, the settings alternating): default threads ({os.cpu_count()} cores), THREADS=1, and "
          "default threads with libgomp's spinning (GOMP_SPINCOUNT=300000)")
    for busy in (0, 1, 2):
        workers = busy_processes(busy)
        try:
            time.sleep(0.5)
            times: dict[str, list[float]] = {name: [] for name in SETTINGS}
            for _ in range(rounds):
                for name, settings in SETTINGS.items():
                    times[name].append(jit_step_in_fresh_python(settings, steps))
            during = load()
        finally:
            for worker in workers:
                worker.kill()
                worker.wait()
        default, one, spin = (statistics.median(times[name]) for name in SETTINGS)
        goal = "  (goal <= 1.2)" if busy == 2 else "  (goal <= 1)" if busy == 0 else ""
        print(f"{busy} busy processes: default {default:6.2f}  THREADS=1 {one:6.2f}  spinning {spin:6.2f}  "
              f"default / THREADS=1 = {default / one:4.2f}{goal}   [{during}]", flush=True)


# ---- 3. LLVM threads: kernels alone ----
def llvm_threads_table() -> None:
    try:
        Device["LLVM"].check_runnable()
    except DeviceUnavailable as missing:
        print(f"\n== 3. LLVM skipped: {missing}")
        return
    threads = thread_count()
    print(f"\n== 3. kernels alone (best of several runs, ms): THREADS=1 against {threads} threads ({load()})")
    size = 256 if QUICK else 512
    for name, t in [(f"matmul {size}", Tensor.empty(size, size) @ Tensor.empty(size, size)),
                    ("sum 2^22", Tensor.empty(1 << 22).sum())]:
        ast = [item for item in create_schedule([t.lazydata]) if item.ast.op.name == "STORE"][-1].ast
        cells = []
        for device in ("LLVM", "C"):
            backend, buffers = Device[device], beam.scratch_buffers(ast, device)
            runners = {n: lower(device, ast, heuristic_opts(new_kernel(ast, backend), backend.vector_width,
                                                            n)).runner for n in (1, threads)}
            timed = {n: min(beam.time_runner(runners[n], buffers, 0.05) for _ in range(3)) for n in runners}
            cells.append(f"{device} {timed[1] * 1e3:7.3f} -> {timed[threads] * 1e3:7.3f} "
                         f"({timed[1] / timed[threads]:4.2f}x)")
        print(f"{name:12s} " + "   ".join(cells), flush=True)


def jit_step_only(steps: int) -> None:
    """The child of section 2: print the median ms of the TinyJit MLP step."""
    _, jit = mlp_step(np.random.default_rng(0))
    print(f"{median_time(jit, steps) * 1e3:.4f}")


if __name__ == "__main__":
    if "--jit-step" in sys.argv:
        jit_step_only(int(sys.argv[sys.argv.index("--jit-step") + 1]))
        sys.exit()
    print(peer_note())
    print(blas_note())
    print(f"{os.cpu_count()} cores; numpy {np.__version__}"
          + (f"; torch {torch.__version__} ({torch.get_num_threads()} threads)" if torch else "; no torch")
          + (f"; tinygrad {version('tinygrad')}" if tinygrad else "; no tinygrad")
          + f"; THREADS={os.environ.get('THREADS', 'unset')}")
    cases_table()
    threads_table()
    llvm_threads_table()
    print(f"\ndone ({load()})")
