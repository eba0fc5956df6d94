"""Data-parallel training of chapter 08's MLP across processes, over MPI.

    mpiexec -n 2 python -m tinyedu.distributed_train --steps 20 --batch 128
    python -m tinyedu.distributed_train --steps 20 --batch 128       # one process, the full batch

Every rank builds the same model (same seed) and takes rank 0's weights (a broadcast). Each step
draws the same batch on every rank; rank r trains on its slice of it, weighs its mean loss by its
share of the batch, and the gradients and losses are all-reduced (tinyedu.distributed), so every
rank takes the step one process takes on the full batch. Rank 0 prints one line per step (the loss
and the step's time) and a last line `result {json}` with the whole curve, which the tests and
notebook 14 read. The data is chapter 08's: the MNIST test set, found as `tinyedu.datasets.mnist`
finds it ($MNIST_PATH, or a checked download into a cache folder), so the printed losses are the
same wherever it runs. `--fail-rank r` makes rank r raise at the second step, to show that the job
then ends with an error instead of hanging.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

from tinyedu import distributed as dist
from tinyedu.datasets import mnist, mnist_cache_dir
from tinyedu.models.mlp import MnistMLP
from tinyedu.models.tasks import normalize_mnist
from tinyedu.multi.allreduce import chunk_bounds
from tinyedu.nn.optim import SGD
from tinyedu.nn.state import get_parameters
from tinyedu.tensor import Tensor


def load_data(examples: int) -> tuple[np.ndarray, np.ndarray, str]:
    """(images, labels, where they came from): the first `examples` MNIST test images, normalized."""
    images, labels = mnist()
    where = os.environ.get("MNIST_PATH") or str(mnist_cache_dir())
    return normalize_mnist(images[:examples]), labels[:examples].astype(np.int32), f"MNIST ({where})"


def train(steps: int, batch: int, lr: float, fail_rank: int | None = None) -> dict:
    me, world = dist.rank(), dist.world_size()
    images, labels, source = load_data(4096)
    Tensor.manual_seed(0)
    model = MnistMLP()
    params = get_parameters(model)
    for p in params:  # every rank starts from rank 0's weights
        p.assign(dist.broadcast(p, root=0)).realize()
    opt = SGD(params, lr=lr)
    order = np.random.default_rng(1)  # the same batches on every rank
    lo, hi = chunk_bounds(batch, world)[me]
    losses, times = [], []
    for step in range(steps):
        pick = order.choice(len(images), batch, replace=False)[lo:hi]
        if step == 1 and fail_rank == me:
            raise RuntimeError(f"rank {me}: a failure on purpose (--fail-rank {fail_rank})")
        start = time.perf_counter()
        opt.zero_grad()
        loss = model(Tensor(images[pick])).cross_entropy(Tensor(labels[pick]))
        (loss * ((hi - lo) / batch)).backward()
        for p in params:
            p.grad = dist.all_reduce(p.grad, "sum")
        total = dist.all_reduce(loss.detach() * ((hi - lo) / batch), "sum").item()
        opt.step()
        Tensor.realize_all(*params)
        times.append(time.perf_counter() - start)
        losses.append(total)
        if me == 0:
            print(f"step {step:3d}  loss {total:.6f}  {times[-1] * 1e3:8.2f} ms", flush=True)
    return {"world": world, "batch": batch, "steps": steps, "data": source, "losses": losses,
            "step_ms": [t * 1e3 for t in times]}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch", type=int, default=128, help="the global batch, split over the ranks")
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--fail-rank", type=int, default=None, help="this rank raises at step 1 (a test)")
    args = parser.parse_args(argv)
    dist.abort_on_error()
    if args.batch < dist.world_size():
        raise SystemExit(f"--batch {args.batch} cannot be split over {dist.world_size()} ranks")
    result = train(args.steps, args.batch, args.lr, args.fail_rank)
    if dist.rank() == 0:
        print("result " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
