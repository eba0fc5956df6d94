"""Threads that behave: how OpenMP's idle threads wait, and the xdist workers' one thread each.

OpenMP reads its wait policy once, when the runtime is loaded, so each case runs in a fresh Python
with OMP_DISPLAY_ENV=verbose, which makes libgomp print the settings it took (GOMP_SPINCOUNT = '0'
is passive waiting) as it loads with the first threaded kernel.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tinyedu.runtime.device import WAIT_SETTINGS
from tinyedu.runtime.toolchain import find_compiler, openmp_available

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
def test_openmp_threads_wait_passively_by_default() -> None:
    output = run_child()
    assert "policy: passive" in output
    assert spin_count(output) == "0", output


@needs_openmp
@pytest.mark.parametrize("setting, value, policy", [("OMP_WAIT_POLICY", "active", "active"),
                                                    ("GOMP_SPINCOUNT", "1000", "None")])
def test_a_wait_policy_the_user_set_is_kept(setting: str, value: str, policy: str) -> None:
    output = run_child(**{setting: value})
    assert f"policy: {policy}" in output
    assert (spin_count(output) != "0") if value == "active" else (spin_count(output) == value), output
