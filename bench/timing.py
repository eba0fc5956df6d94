"""What the benchmarks share: the --quick flag, the frameworks they compare against, and timing.

Each benchmark is a script (`python bench/bench_x.py`), so this folder is on its import path.

The peers (PyTorch, tinygrad) are imported here, when a benchmark imports this module, which is
before it imports tinyedu (`from timing import ...` sorts before `from tinyedu import ...`): a
library loaded first cannot be changed by what tinyedu does later (tests/test_import_side_effects.py
checks that tinyedu changes nothing, and bench/bench_import.py times it). PyTorch gets its best
documented CPU settings: threads = cores (torch.set_num_threads; THREADS=n, which sets tinyedu's,
sets PyTorch's too: on a busy machine THREADS=1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 compares
one thread with one thread, where waiting for taken cores would measure the machine), and its
forward passes run under torch.no_grad or torch.inference_mode in each benchmark. `peer_note()` says
so beside each table, and `load()` gives the load average: the machine may be shared, so read the
ratios of one run.
"""

from __future__ import annotations

import importlib
import json
import os
import statistics
import subprocess
import sys
import time
from types import ModuleType
from typing import Callable

QUICK = "--quick" in sys.argv  # fewer repeats and smaller sizes


def optional(name: str) -> ModuleType | None:
    """The module `name`, or None where it is not installed (its column is then left out)."""
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def _peer(name: str) -> ModuleType | None:
    module = optional(name)
    threads = int(os.environ.get("THREADS") or os.cpu_count() or 1)  # as many as tinyedu's kernels get
    if name == "torch" and module is not None:
        module.set_num_threads(threads)
    if name == "tinygrad" and module is not None:
        # tinygrad picks a GPU-like device first (OpenCL, which is PoCL on a CPU here): pin its CPU
        # device, which compiles with clang and runs on `threads` threads (tinygrad >= 0.10).
        from tinygrad import helpers
        if hasattr(helpers, "DEV"):  # tinygrad 0.14 and later
            helpers.DEV.value = "CPU"
        else:
            module.Device.DEFAULT = "CPU"
        if hasattr(helpers, "NUM_CPU_THREADS"):
            helpers.NUM_CPU_THREADS.value = threads
    return module


torch, tinygrad = _peer("torch"), _peer("tinygrad")  # before tinyedu (see above)


def _version(module: ModuleType) -> str:
    from importlib.metadata import version
    return version(module.__name__)


def peer_note() -> str:
    """How the peers run, for the line above a table."""
    parts = [f"PyTorch {torch.__version__}, {torch.get_num_threads()} threads" if torch else "no PyTorch"]
    if tinygrad:
        threads = getattr(tinygrad.helpers, "NUM_CPU_THREADS", None)
        parts.append(f"tinygrad {_version(tinygrad)} on its {tinygrad.Device.DEFAULT} device, "
                     f"{threads.value if threads else 'its default'} threads")
    else:
        parts.append("no tinygrad")
    return "; ".join(parts) + "; imported before tinyedu, in this process"


def blas_note() -> str:
    """Which BLAS numpy calls, with how many threads and which CPU kernel (OpenBLAS picks one per CPU,
    or the one OPENBLAS_CORETYPE names): the reference of every matmul ratio."""
    threadpoolctl = optional("threadpoolctl")
    coretype = os.environ.get("OPENBLAS_CORETYPE")
    note = f"OPENBLAS_CORETYPE={coretype}" if coretype else "OPENBLAS_CORETYPE unset"
    if threadpoolctl is None:
        return note + " (pip install threadpoolctl to see numpy's BLAS)"
    pools = [p for p in threadpoolctl.threadpool_info() if p.get("user_api") == "blas"]
    return "; ".join([note] + [f"numpy's BLAS: {p['internal_api']} {p['version']}, kernel "
                               f"{p.get('architecture')}, {p['num_threads']} threads" for p in pools])


def blas_threads() -> int | None:
    """How many threads numpy's BLAS runs, as its environment says (OPENBLAS_NUM_THREADS, else
    OMP_NUM_THREADS); None when neither is set (then it takes every core)."""
    value = os.environ.get("OPENBLAS_NUM_THREADS") or os.environ.get("OMP_NUM_THREADS")
    return int(value) if value else None


def load() -> str:
    """The load average (1, 5, 15 minutes): printed beside every table, since the machine may be shared."""
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def median_time(run: Callable[[], object], repeat: int, warmup: int = 3) -> float:
    """Median seconds of `run()` over `repeat` calls, after `warmup` calls (which compile, fill the
    caches and record a JIT): the typical call, robust to a few disturbed ones."""
    for _ in range(warmup):
        run()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def best_time(run: Callable[[], object], repeat: int, warmup: int = 1) -> float:
    """Best seconds of `run()` over `repeat` calls after `warmup` calls: the call least disturbed by
    the rest of the machine."""
    for _ in range(warmup):
        run()
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


def in_own_process(module: str, function: str, *args: object) -> object:
    """`module.function(*args)` (a function of a bench module, with arguments and a result that JSON
    can carry) run in a fresh Python process, with this environment.

    For a peer whose threads would otherwise share the cores with tinyedu's: numpy's BLAS (OpenBLAS)
    keeps its worker threads spinning for about 0.1 s after each call, so tinyedu's kernels timed
    right after numpy's would share a core with them (measured on 2 cores: the first 50 reads of a
    256x256 `(a @ b).numpy()` after a block of numpy's matmuls took 2.3 ms each on average, against
    0.27 ms), and tinyedu's OpenMP threads spin after its kernels too. In their own processes,
    neither waits for the other's threads."""
    code = (f"import json, sys\nimport {module}\n"
            f"print(json.dumps({module}.{function}(*json.loads(sys.argv[1]))))")
    bench = os.path.dirname(os.path.abspath(__file__))
    path = os.pathsep.join(p for p in (bench, os.environ.get("PYTHONPATH")) if p)
    # (the command line's flags, --quick, go along: the child's sys.argv[2:])
    done = subprocess.run([sys.executable, "-c", code, json.dumps(args), *sys.argv[1:]], capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": path})
    if done.returncode != 0:
        raise RuntimeError(f"{module}.{function} in its own process failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.splitlines()[-1])
