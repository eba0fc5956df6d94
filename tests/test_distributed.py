"""tinyedu.distributed over MPI: the collectives on 3 ranks, the MLP trained by 2 and 3 ranks with
the loss curve of one process on the full batch, and a failing rank that ends the job (no hang).
Every MPI job runs as a subprocess under a deadline (the pytest process never starts MPI)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tinyedu import distributed

pytest.importorskip("mpi4py")
DEADLINE = 120  # seconds for one job (a few steps take a few seconds; a hang would take forever)


def curve(processes: int) -> dict:
    args = ["-m", "tinyedu.distributed_train", "--steps", "3", "--batch", "50"]
    if processes == 1:
        done = subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=DEADLINE)
    else:
        done = distributed.launch(processes, args, timeout=DEADLINE)
    assert done.returncode == 0, done.stdout + done.stderr
    line = [x for x in done.stdout.splitlines() if x.startswith("result ")]
    assert len(line) == 1, done.stdout  # only rank 0 reports
    return json.loads(line[0][len("result "):])


@pytest.fixture(scope="module")
def one_process() -> dict:
    return curve(1)


@pytest.mark.mnist  # distributed_train trains on chapter 08's MNIST
@pytest.mark.parametrize("processes", [2, 3])
def test_mpi_ranks_train_with_the_loss_curve_of_one_process(processes: int, one_process: dict) -> None:
    many = curve(processes)
    assert many["world"] == processes and one_process["world"] == 1
    assert many["losses"] == pytest.approx(one_process["losses"], rel=1e-5)
    assert one_process["losses"][-1] < one_process["losses"][0]


COLLECTIVES = """
import numpy as np
from tinyedu import Tensor, distributed as dist
r, n = dist.rank(), dist.world_size()
values = [np.random.default_rng(k).standard_normal(7).astype(np.float32) for k in range(n)]
total = dist.all_reduce(Tensor(values[r]), "sum").numpy()
expected = (values[0] + values[1]) + values[2]  # rank order
assert total.tobytes() == expected.tobytes(), (r, total, expected)
assert dist.all_reduce(Tensor(values[r]), "max").numpy().tobytes() == np.maximum.reduce(values).tobytes()
assert dist.broadcast(Tensor(values[r]), root=2).numpy().tobytes() == values[2].tobytes()
print("ok", r, n)
"""


def test_all_reduce_and_broadcast_on_three_ranks() -> None:
    done = distributed.launch(3, ["-c", COLLECTIVES], timeout=DEADLINE)
    assert done.returncode == 0, done.stdout + done.stderr
    assert sorted(done.stdout.split("\n")[:3]) == ["ok 0 3", "ok 1 3", "ok 2 3"], done.stdout


@pytest.mark.mnist
def test_a_failing_rank_ends_the_job_with_its_error() -> None:
    args = ["-m", "tinyedu.distributed_train", "--steps", "50", "--batch", "50", "--fail-rank", "1"]
    done = distributed.launch(2, args, timeout=DEADLINE)  # (a hang would raise TimeoutExpired)
    assert done.returncode != 0
    assert "rank 1 failed, aborting the job" in done.stderr and "a failure on purpose" in done.stderr
    assert "step  49" not in done.stdout  # rank 0 did not go on alone


def test_a_missing_mpi4py_is_named_with_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "mpi4py", None)  # import mpi4py now raises ImportError
    with pytest.raises(ModuleNotFoundError, match=r'pip install "tinyedu\[distributed\]"'):
        distributed.rank()
