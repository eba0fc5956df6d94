"""Threads that behave: how OpenMP's idle threads wait, and THREAD loops on the LLVM device.

OpenMP reads its wait policy once, when the runtime is loaded, so each case runs in a fresh Python
with OMP_DISPLAY_ENV=verbose, which makes libgomp print the settings it took (GOMP_SPINCOUNT = '0'
is passive waiting) as it loads with the first threaded kernel. tinyedu chooses the policy only while
it loads that library: the environment the process sees before and after is the same.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tinyedu import Tensor, dtypes
from tinyedu.codegen import heuristics
from tinyedu.codegen.kernel import Kernel
from tinyedu.codegen.opts import Opt, OptOps
from tinyedu.engine.lower import lower
from tinyedu.engine.schedule import create_schedule
from tinyedu.runtime import ops_llvm
from tinyedu.runtime.device import Device, DeviceUnavailable
from tinyedu.runtime.toolchain import WAIT_SETTINGS, find_compiler, openmp_available

ROOT = Path(__file__).resolve().parents[1]

CHILD = """
import os
import numpy as np
from tinyedu import Tensor
a = np.random.default_rng(0).random((384, 384), dtype=np.float32)
(Tensor(a) @ Tensor(a)).numpy()  # a threaded kernel: its library loads the OpenMP runtime
print("policy:", os.environ.get("OMP_WAIT_POLICY"))
"""


def run_child(**settings: str) -> str:
    """What a fresh Python that imports tinyedu and runs one threaded kernel prints (and libgomp with it)."""
    env = {k: v for k, v in os.environ.items() if k not in WAIT_SETTINGS}
    env.update(settings, THREADS="2", OMP_DISPLAY_ENV="verbose",
               PYTHONPATH=os.pathsep.join([str(ROOT), *sys.path]))
    result = subprocess.run([sys.executable, "-c", CHILD], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout + result.stderr


def spin_count(output: str) -> str:
    """The spin count libgomp reports (0: a waiting thread sleeps at once)."""
    found = re.search(r"GOMP_SPINCOUNT = '(\d+)'", output)
    if found is None:
        pytest.skip("the OpenMP runtime is not libgomp (it printed no GOMP_SPINCOUNT)")
    return found.group(1)


needs_openmp = pytest.mark.skipif(not openmp_available(find_compiler()), reason="the compiler has no OpenMP")


@needs_openmp
def test_tinyedu_leaves_the_wait_policy_to_the_user() -> None:
    """tinyedu never writes OMP_WAIT_POLICY: the runtime its kernels load keeps libgomp's default
    (spinning), and the environment is as it was."""
    output = run_child()
    assert "policy: None" in output
    assert spin_count(output) != "0", output


@needs_openmp
def test_a_passive_policy_the_user_set_makes_threads_sleep() -> None:
    output = run_child(OMP_WAIT_POLICY="passive")
    assert "policy: passive" in output
    assert spin_count(output) == "0", output


@needs_openmp
@pytest.mark.parametrize("setting, value, policy", [("OMP_WAIT_POLICY", "active", "active"),
                                                    ("GOMP_SPINCOUNT", "1000", "None")])
def test_a_wait_policy_the_user_set_is_kept(setting: str, value: str, policy: str) -> None:
    output = run_child(**{setting: value})
    assert f"policy: {policy}" in output
    assert (spin_count(output) != "0") if value == "active" else (spin_count(output) == value), output


# ---- LLVM: THREAD loops run on libgomp's threads, with the same bits as one thread ----
def llvm_with_openmp() -> None:
    try:
        Device["LLVM"].check_runnable()
    except DeviceUnavailable as missing:
        pytest.skip(str(missing))
    if ops_llvm.openmp() is None:
        pytest.skip("libgomp is not installed: the LLVM device runs THREAD loops on one thread")


# Odd row counts (iterations that do not divide among the threads), columns a multiple of 16, so the
# heuristics give every case opts with THREADS=1 too: a kernel without opts multiplies and adds where an
# optimized one uses a fused multiply-add (codegen/linearizer.py), which rounds differently.
CASES = {
    "matmul": lambda a, b, x: a @ b,
    "matmul, relu, backward-like transpose": lambda a, b, x: (a @ b).relu().T @ a,
    "long sum (blocks)": lambda a, b, x: x.sum(),
    "max of everything (threads over the reduce)": lambda a, b, x: x.max(),
    "int sum": lambda a, b, x: (x * 100).cast(dtypes.int32).sum(),
    "row sums of an exp": lambda a, b, x: x.reshape(333, 1000).exp().sum(1),
}


@pytest.mark.parametrize("case", CASES)
def test_llvm_threads_compute_the_same_bits_as_one_thread(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    llvm_with_openmp()
    monkeypatch.setattr(heuristics, "THREAD_MIN_WORK", 0)  # thread these small kernels too
    rng = np.random.default_rng(7)
    arrays = tuple(rng.standard_normal(shape).astype(np.float32) for shape in ((67, 48), (48, 80), 333_000))
    results = {}
    for threads in ("1", "2", "3"):
        monkeypatch.setenv("THREADS", threads)
        for device in ("LLVM", "C"):
            results[device, threads] = CASES[case](*(Tensor(a, device=device) for a in arrays)).numpy()
    # every thread count, the same bits as one thread on the same device; the two devices, the same
    # bits too, except where C sums exps in SIMD lanes (tinyedu/renderer/c_vector_math.py, simd_sums),
    # in another order and with its own exp, which LLVM's IR does not have
    for device in ("LLVM", "C"):
        assert all(results[device, t].tobytes() == results[device, "1"].tobytes() for t in ("2", "3"))
    if case != "row sums of an exp":
        assert results["C", "1"].tobytes() == results["LLVM", "1"].tobytes()
    expected = CASES[case](*(Tensor(a, device="NUMPY") for a in arrays)).numpy()
    for device in ("LLVM", "C"):
        np.testing.assert_allclose(results[device, "2"], expected, rtol=1e-5, atol=1e-4)


def test_llvm_renders_a_thread_loop_as_a_worker_that_gomp_parallel_runs(monkeypatch) -> None:
    llvm_with_openmp()
    monkeypatch.setenv("THREADS", "2")
    item = [i for i in create_schedule([(Tensor.empty(64, 64) @ Tensor.empty(64, 64)).lazydata])
            if i.ast.op.name == "STORE"][-1]
    program = lower("LLVM", item.ast, [Opt(OptOps.THREAD, 0, 2)], compile=False)
    ir = program.source
    assert "call void @GOMP_parallel(ptr @r_64_64_64.tidx0, ptr %tidx0.context, i32 %tidx0.threads" in ir
    assert "define internal void @r_64_64_64.tidx0(ptr %context)" in ir
    assert "atomicrmw add ptr %tidx0.counter, i32 1 monotonic" in ir
    assert Device["LLVM"].threads() == 2


FORKED_LLVM = """
import os, sys, time
import numpy as np
from tinyedu import Tensor
a = np.random.default_rng(0).random((384, 384), dtype=np.float32)
expected = (Tensor(a, device="LLVM") @ Tensor(a, device="LLVM")).numpy()  # threads start in the parent
pid = os.fork()
if pid == 0:
    ok = np.array_equal((Tensor(a, device="LLVM") @ Tensor(a, device="LLVM")).numpy(), expected)
    os._exit(0 if ok else 1)
end = time.monotonic() + 60
while (status := os.waitpid(pid, os.WNOHANG)) == (0, 0):
    if time.monotonic() > end:
        os.kill(pid, 9)
        sys.exit("the forked child hung")
    time.sleep(0.02)
print("child ok" if os.waitstatus_to_exitcode(status[1]) == 0 else "child got another result")
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork() here")
def test_a_forked_child_runs_threaded_llvm_kernels_on_one_thread() -> None:
    """The LLVM kernels use the same libgomp as C ones, so toolchain.py's fork handler covers them."""
    llvm_with_openmp()
    env = {**os.environ, "THREADS": "2", "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path])}
    result = subprocess.run([sys.executable, "-c", FORKED_LLVM], cwd=ROOT, env=env, capture_output=True,
                            text=True, timeout=180)
    assert "child ok" in result.stdout, result.stdout + result.stderr


# ---- which kernels the heuristics thread ----
def heuristic_ops(t: Tensor, threads: int = 2) -> list[OptOps]:
    item = [i for i in create_schedule([t.lazydata]) if i.ast.op.name == "STORE"][-1]
    return [opt.op for opt in heuristics.hand_coded_optimizations(Kernel(item.ast), 16, threads)]


def test_threads_go_to_kernels_that_run_long_enough() -> None:
    """About 100 us on one core: 2^20 iterations that each load, 8x as many in a matmul's register
    block (a 160^3 matmul runs in tens of microseconds: a thread's wake-up would cost more than it
    saves)."""
    assert OptOps.THREAD in heuristic_ops(Tensor.empty(1 << 20) + 1)
    assert OptOps.THREAD in heuristic_ops(Tensor.empty(1 << 20).sum())
    assert OptOps.THREAD not in heuristic_ops(Tensor.empty(1 << 19) + 1)
    assert OptOps.THREAD not in heuristic_ops(Tensor.empty(160, 160) @ Tensor.empty(160, 160))
    assert OptOps.THREAD in heuristic_ops(Tensor.empty(256, 256) @ Tensor.empty(256, 256))
    assert OptOps.THREAD in heuristic_ops(Tensor.empty(128, 784) @ Tensor.empty(784, 256))  # the MLP's
    assert OptOps.THREAD not in heuristic_ops(Tensor.empty(256, 256) @ Tensor.empty(256, 256), threads=1)


# ---- the test suite's workers ----
def test_in_a_worker_threads_is_one() -> None:
    """Run by the test below, in a pytest-xdist worker started without THREADS."""
    if not os.environ.get("TINYEDU_PROBE_XDIST_THREADS"):
        pytest.skip("run by test_xdist_workers_run_kernels_on_one_thread, in a worker")
    assert os.environ.get("PYTEST_XDIST_WORKER") and os.environ["THREADS"] == "1"


def test_xdist_workers_run_kernels_on_one_thread() -> None:
    """tests/conftest.py gives each xdist worker THREADS=1 unless THREADS is set: two workers with a
    thread per core each would wait for each other's cores."""
    pytest.importorskip("xdist")
    env = {k: v for k, v in os.environ.items() if k not in ("THREADS", "PYTEST_XDIST_WORKER")}
    env.update(TINYEDU_PROBE_XDIST_THREADS="1", PYTHONPATH=os.pathsep.join([str(ROOT), *sys.path]))
    command = [sys.executable, "-m", "pytest", "-q", "-n", "1", "-p", "no:cacheprovider",
               "tests/test_threads.py::test_in_a_worker_threads_is_one"]
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0 and "1 passed" in result.stdout, result.stdout + result.stderr


def test_a_kernel_whose_only_opt_is_thread_computes_the_bits_of_one_thread() -> None:
    """THREAD shares a kernel's iterations among threads and changes nothing else: a matmul with no
    opts and the same matmul with only THREAD add their products the same way (no fused multiply-add,
    which the other opts bring), so they give the same bits; this is what the heuristics choose for a
    kernel they cannot vectorize, with THREADS=1 and with 2."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((8, 4099)).astype(np.float32)
    b = rng.standard_normal((4099, 3)).astype(np.float32)
    (item,) = [i for i in create_schedule([(Tensor(a).realize() @ Tensor(b).realize()).lazydata])
               if i.ast.op.name != "COPY"]
    outs = []
    for opts in ([], [Opt(OptOps.THREAD, 0, 2)]):
        out = Tensor.empty(8, 3).realize()
        lower("C", item.ast, opts).runner([out.lazydata.base.realized, *(x.realized for x in item.inputs)])
        outs.append(out.numpy())
    assert outs[0].tobytes() == outs[1].tobytes()
    assert np.allclose(outs[0], a.astype(np.float64) @ b, rtol=1e-4, atol=1e-3)
