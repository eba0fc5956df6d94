"""fork() after a threaded kernel: the child runs kernels too, and gets the right answer.

gcc's OpenMP runtime is not fork-safe: a child made by fork() after the parent ran a parallel loop
would wait forever in its own first parallel loop (tinyedu/runtime/toolchain.py says why, and how a
child falls back to one thread). Each case runs in a fresh Python with THREADS=2, whose children
must finish within a deadline: a hang fails the test instead of hanging the suite.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tinyedu import Tensor

ROOT = Path(__file__).resolve().parents[1]
DEADLINE = 60.0  # seconds for a child; it needs a second or two (spawn imports tinyedu again)


def threaded_matmul() -> np.ndarray:
    """A 384x384 matmul: enough work that the C device shares its loop among threads (THREADS=2)."""
    a = np.random.default_rng(0).random((384, 384), dtype=np.float32)
    return (Tensor(a) @ Tensor(a)).numpy()


CHILD = """
import multiprocessing, os, sys, time
import numpy as np
from tests.test_fork import DEADLINE, threaded_matmul
from tinyedu.runtime.toolchain import find_compiler, openmp_available

expected = threaded_matmul()  # the parent runs a threaded kernel first: OpenMP's threads exist now
if openmp_available(find_compiler()) and os.path.isdir("/proc/self/task"):
    assert len(os.listdir("/proc/self/task")) > 1, "the matmul did not start OpenMP threads"
method = sys.argv[1]
if method == "os.fork":
    out = sys.argv[2]
    pid = os.fork()
    if pid == 0:
        np.save(out, threaded_matmul())
        os._exit(0)
    end = time.monotonic() + DEADLINE
    while os.waitpid(pid, os.WNOHANG) == (0, 0):
        if time.monotonic() > end:
            os.kill(pid, 9)
            sys.exit("the forked child hung")
        time.sleep(0.02)
    result = np.load(out)
else:
    with multiprocessing.get_context(method).Pool(1) as pool:
        result = pool.apply_async(threaded_matmul).get(timeout=DEADLINE)  # a hang raises TimeoutError
np.testing.assert_array_equal(result, expected)
a = np.random.default_rng(0).random((384, 384), dtype=np.float32).astype(np.float64)
np.testing.assert_allclose(result, a @ a, rtol=1e-5)
print("child ok")
"""


@pytest.mark.parametrize("method", ["os.fork", "fork", "forkserver", "spawn"])
def test_a_child_process_runs_threaded_kernels_after_the_parent_did(method: str, tmp_path: Path) -> None:
    env = {**os.environ, "THREADS": "2", "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path])}
    process = subprocess.Popen([sys.executable, "-c", CHILD, method, str(tmp_path / "result.npy")], cwd=ROOT,
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               start_new_session=True)  # its own process group: a timeout kills it all
    try:
        output, _ = process.communicate(timeout=DEADLINE + 60)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        pytest.fail(f"{method}: the child process hung")
    assert process.returncode == 0 and "child ok" in output, output
