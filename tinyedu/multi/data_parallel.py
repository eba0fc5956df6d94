"""Data-parallel training in one process: a replica of the model on each device, a slice of the
batch each, gradients all-reduced, the same optimizer step on every replica.

Why it gives the single-device result: the loss of the full batch is the mean over its N examples.
Device i computes the mean over its n_i examples and weighs it by n_i / N, so the weighted losses
(and, the gradient being linear, their gradients) sum to the full batch's. The all-reduce sums the
gradients and leaves the same bits on every device (the ring passes each finished chunk around,
it does not recompute it), so every replica takes the same step and stays bit-identical. The
additions happen in another order than on one device, so the loss agrees within float32 rounding.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from tinyedu.multi.allreduce import chunk_bounds, naive_all_reduce, ring_all_reduce
from tinyedu.nn.state import get_parameters, get_state_dict
from tinyedu.tensor import Tensor

ALL_REDUCES = {"ring": ring_all_reduce, "naive": naive_all_reduce}


def replicate(model: Any, device: str, make: Callable[[], Any]) -> Any:
    """A new model from `make()` whose tensors are copies of `model`'s, on `device`."""
    replica = make()
    for name, source in get_state_dict(model).items():
        copy = source.to(device).detach().contiguous().realize()
        copy.requires_grad = source.requires_grad
        _set(replica, name, copy)
    return replica


def _set(obj: Any, dotted: str, value: Tensor) -> None:
    """obj.<dotted name> = value, through attributes, list indices and dict keys (get_state_dict's names)."""
    *path, last = dotted.split(".")
    for key in path:
        obj = obj[int(key)] if isinstance(obj, (list, tuple)) else obj[key] if isinstance(obj, dict) \
            else getattr(obj, key)
    if isinstance(obj, list):
        obj[int(last)] = value
    elif isinstance(obj, dict):
        obj[last] = value
    else:
        setattr(obj, last, value)


class DataParallel:
    """`make()` builds the model (seed before: every replica copies the first one's weights);
    `optimizer(params)` builds an optimizer for one replica; `loss(model, x, y)` is a batch's mean loss."""

    def __init__(self, make: Callable[[], Any], devices: Sequence[str], optimizer: Callable[[list], Any],
                 loss: Callable[[Any, Tensor, Tensor], Tensor], all_reduce: str = "ring"):
        if all_reduce not in ALL_REDUCES:
            raise ValueError(f"DataParallel: unknown all_reduce {all_reduce!r}; expected 'ring' or 'naive'")
        first = make()
        self.devices = list(devices)
        self.replicas = [replicate(first, d, make) for d in self.devices]
        self.optimizers = [optimizer(get_parameters(r)) for r in self.replicas]
        self.loss, self.all_reduce = loss, ALL_REDUCES[all_reduce]

    # --8<-- [start:step]
    def step(self, x: np.ndarray, y: np.ndarray) -> float:
        """One training step on the batch (x, y), cut into one slice per device; the full batch's loss."""
        n = len(x)
        if n < len(self.devices):
            raise ValueError(f"DataParallel.step: a batch of {n} examples cannot be split over "
                             f"{len(self.devices)} devices; use a batch of at least {len(self.devices)}")
        losses = []
        for replica, opt, device, (lo, hi) in zip(self.replicas, self.optimizers, self.devices,
                                                   chunk_bounds(n, len(self.devices)), strict=True):
            opt.zero_grad()
            xs, ys = Tensor(x[lo:hi], device=device), Tensor(y[lo:hi], device=device)
            weighted = self.loss(replica, xs, ys) * ((hi - lo) / n)  # this slice's share of the mean
            weighted.backward()
            losses.append(weighted)
        params = [get_parameters(r) for r in self.replicas]
        for same in zip(*params, strict=True):  # one parameter, on every device: sum the gradients
            summed = self.all_reduce([p.grad.lazydata for p in same], "sum")
            for p, g in zip(same, summed, strict=True):
                p.grad = Tensor(g, device=p.device)
        total = self.all_reduce([loss.lazydata for loss in losses], "sum")[0]
        Tensor.realize_all(*(p.grad for ps in params for p in ps))
        for opt in self.optimizers:
            opt.step()
        return float(Tensor(total).item())
    # --8<-- [end:step]

    def replicas_identical(self) -> bool:
        """Whether every replica's weights have the same bits as the first's."""
        first = [t.numpy() for t in get_state_dict(self.replicas[0]).values()]
        return all(all(np.array_equal(a.view(np.uint8), t.numpy().view(np.uint8))
                       for a, t in zip(first, get_state_dict(r).values(), strict=True))
                   for r in self.replicas[1:])
