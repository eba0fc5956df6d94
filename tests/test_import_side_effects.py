"""Importing tinyedu, and running its threaded kernels, changes nothing else in the process.

Each case runs in a fresh Python (what a library reads at load time is read once per process): the
environment before and after is compared, and a PyTorch training step runs after tinyedu (PyTorch is
the oracle the notebooks and tests run in the same process). Nothing here is timed: the times, with
and without `import tinyedu` first, are printed by bench/bench_import.py.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tinyedu.runtime.toolchain import WAIT_SETTINGS, find_compiler, openmp_available

ROOT = Path(__file__).resolve().parents[1]

TINYEDU_THEN_TORCH = """
import json, os, sys
before = dict(os.environ)
import numpy as np
import tinyedu
after_import = dict(os.environ)
a = np.random.default_rng(0).random((384, 384), dtype=np.float32)
got = (tinyedu.Tensor(a) @ tinyedu.Tensor(a)).numpy()  # a threaded kernel: loads the OpenMP runtime
assert np.allclose(got, a.astype(np.float64) @ a, rtol=1e-4), "tinyedu's matmul is wrong"
after_kernel = dict(os.environ)
loss = None
if "torch" in sys.argv:
    import torch
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(128, 784), torch.randint(0, 10, (128,))
    losses = []
    for _ in range(3):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[2] < losses[0], losses
    loss = losses[-1]
print("RESULT " + json.dumps({"import": after_import == before, "kernel": after_kernel == before,
                              "changed": sorted(set(after_kernel.items()) ^ set(before.items())),
                              "loss": loss}))
"""


def run_fresh(script: str, *args: str, **settings: str) -> tuple[dict, str]:
    env = {k: v for k, v in os.environ.items() if k not in WAIT_SETTINGS}
    env.update(settings, THREADS="2", PYTHONPATH=os.pathsep.join([str(ROOT), *sys.path]))
    result = subprocess.run([sys.executable, "-c", script, *args], cwd=ROOT, env=env, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    line = next(x for x in result.stdout.splitlines() if x.startswith("RESULT "))
    return json.loads(line[len("RESULT "):]), result.stdout + result.stderr


def test_importing_tinyedu_and_running_a_threaded_kernel_leave_the_environment_as_it_was() -> None:
    found, output = run_fresh(TINYEDU_THEN_TORCH)
    assert found["import"] and found["kernel"], found["changed"]


def test_a_pytorch_step_runs_after_tinyedu_as_without_it() -> None:
    pytest.importorskip("torch")
    with_tinyedu, _ = run_fresh(TINYEDU_THEN_TORCH, "torch")
    alone, _ = run_fresh(TINYEDU_THEN_TORCH.replace("import tinyedu\n", "").replace(
        "got = (tinyedu.Tensor(a) @ tinyedu.Tensor(a)).numpy()", "got = a.astype(np.float64) @ a"), "torch")
    assert with_tinyedu["kernel"], with_tinyedu["changed"]
    assert with_tinyedu["loss"] == pytest.approx(alone["loss"], rel=1e-4)  # same seed, same step


TORCH_THEN_TINYEDU = """
import torch
torch.set_num_threads(2)
torch.ones(1024, 1024) @ torch.ones(1024, 1024)  # PyTorch's OpenMP runtime is loaded and started
import numpy as np
import tinyedu
a = np.random.default_rng(0).random((384, 384), dtype=np.float32)
(tinyedu.Tensor(a) @ tinyedu.Tensor(a)).numpy()
print("RESULT {}")
"""


@pytest.mark.skipif(not openmp_available(find_compiler()), reason="the compiler has no OpenMP")
def test_an_openmp_runtime_loaded_before_tinyedu_keeps_its_own_wait_policy() -> None:
    """PyTorch imported first: its runtime read the default policy (libgomp prints a spin count that is
    not 0), and tinyedu does not set another one for it."""
    pytest.importorskip("torch")
    _, output = run_fresh(TORCH_THEN_TINYEDU, OMP_DISPLAY_ENV="verbose")
    counts = re.findall(r"GOMP_SPINCOUNT = '(\d+)'", output)
    if not counts:
        pytest.skip("PyTorch's OpenMP runtime is not libgomp (it printed no GOMP_SPINCOUNT)")
    assert "0" not in counts, output
