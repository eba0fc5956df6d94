"""Data-parallel SGD on several devices in one process against SGD on one device, step for step."""

from __future__ import annotations

import numpy as np
import pytest

from tinyedu import Tensor
from tinyedu.models.mlp import MnistMLP
from tinyedu.multi.data_parallel import DataParallel
from tinyedu.nn.optim import SGD
from tinyedu.nn.state import get_parameters


def mean_loss(model, x: Tensor, y: Tensor) -> Tensor:
    return model(x).cross_entropy(y)


def batches(steps: int, n: int) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(0)
    return [(rng.standard_normal((n, 28, 28)).astype(np.float32), rng.integers(0, 10, n).astype(np.int32))
            for _ in range(steps)]


@pytest.mark.parametrize("devices,all_reduce", [(("C:0", "C:1"), "ring"), (("C", "C:1", "C:2"), "naive")])
def test_data_parallel_sgd_follows_single_device_sgd(devices: tuple[str, ...], all_reduce: str) -> None:
    data = batches(1, 31) * 4  # one batch of 31 examples (slices of unequal size), fitted 4 times
    Tensor.manual_seed(3)
    model = MnistMLP(hidden=32)
    opt = SGD(get_parameters(model), lr=0.1)
    single = []
    for x, y in data:
        opt.zero_grad()
        loss = mean_loss(model, Tensor(x), Tensor(y)).backward()
        opt.step()
        single.append(loss.item())
    Tensor.manual_seed(3)
    parallel = DataParallel(lambda: MnistMLP(hidden=32), devices, lambda ps: SGD(ps, lr=0.1), mean_loss,
                            all_reduce=all_reduce)
    assert [r.l1.weight.device for r in parallel.replicas] == [Tensor([0], device=d).device for d in devices]
    losses = [parallel.step(x, y) for x, y in data]
    np.testing.assert_allclose(losses, single, rtol=1e-5)
    assert single[-1] < single[0]  # (it learns: the comparison is not between two untrained models)
    assert parallel.replicas_identical()
    np.testing.assert_allclose(parallel.replicas[-1].l1.weight.numpy(), model.l1.weight.numpy(),
                               rtol=1e-4, atol=1e-6)


def test_a_batch_smaller_than_the_device_count_is_refused() -> None:
    parallel = DataParallel(lambda: MnistMLP(hidden=4), ("C:0", "C:1", "C:2"), lambda ps: SGD(ps, lr=0.1),
                            mean_loss)
    x, y = batches(1, 2)[0]
    with pytest.raises(ValueError, match="a batch of 2 examples cannot be split over 3 devices"):
        parallel.step(x, y)
