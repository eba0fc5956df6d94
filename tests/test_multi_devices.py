"""Devices with a number: C:0 (= C), C:1, PYTHON:1 ... are distinct devices of one kind."""

import numpy as np
import pytest

from tinyedu import Tensor
from tinyedu.core.errors import DeviceError
from tinyedu.engine.schedule import create_schedule
from tinyedu.runtime.device import Device


def test_numbered_devices_share_a_backend_but_not_buffers() -> None:
    assert Device["C:1"] is Device["C"] and Device.canonicalize("c:2") == "C:2"
    a = Tensor([1.0, 2.0, 3.0], device="C:1")
    out = (a * 2 + 1).realize()
    assert out.device == "C:1" and out.lazydata.base.realized.device == "C:1"
    np.testing.assert_array_equal(out.numpy(), [3.0, 5.0, 7.0])


def test_a_copy_between_numbered_devices_is_its_own_item_and_mixing_them_is_refused() -> None:
    a = Tensor([1.0, 2.0], device="C:1").realize()
    with pytest.raises(DeviceError, match=r"different devices \(C:1 and C\)"):
        a + Tensor([1.0, 2.0])
    moved = a.to("PYTHON:1")
    names = [item.name for item in create_schedule([moved.lazydata])]
    assert names == ["copy_2_C:1->PYTHON:1"], names


def test_gradients_go_back_through_copies_between_numbered_devices() -> None:
    a = Tensor([1.0, 2.0, 3.0], device="C:1", requires_grad=True)
    (a.to("C") * a.to("PYTHON:2").to("C")).sum().backward()
    assert a.grad.device == "C:1"
    np.testing.assert_array_equal(a.grad.numpy(), [2.0, 4.0, 6.0])


DEVICES = ("C:0", "C:1")


def test_shard_cuts_along_an_axis_and_to_gathers_it_back() -> None:
    data = np.arange(15, dtype=np.float32).reshape(5, 3)
    x = Tensor(data).shard(("NUMPY:0", "NUMPY:1"), axis=0)
    assert x.device == ("NUMPY", "NUMPY:1") and x.shard_axis == 0 and x.shape == (5, 3)
    assert [lb.shape for lb in x.lazydata.lbs] == [(3, 3), (2, 3)]  # 5 rows: as even as possible
    np.testing.assert_array_equal(x.to("C").numpy(), data)
    np.testing.assert_array_equal(x.numpy(), data)
    replicated = Tensor(data).to(("NUMPY", "NUMPY:1"))
    assert replicated.shard_axis is None and all(lb.shape == (5, 3) for lb in replicated.lazydata.lbs)


def test_a_sharded_matmul_runs_shard_by_shard_and_a_sum_over_the_shards_all_reduces() -> None:
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((6, 4)).astype(np.float32), rng.standard_normal((4, 3)).astype(np.float32)
    xs, ws = Tensor(x).shard(DEVICES, 0), Tensor(w).to(DEVICES)
    y = xs @ ws
    assert y.shard_axis == 0 and y.lazydata.lbs[1].device == "C:1"
    items = create_schedule(list(y.lazydata.lbs))
    assert not [i.name for i in items if "->" in i.name and not i.name.startswith("copy_3_4_C->C:1")
                and not i.name.startswith("copy_4_3_C->C:1")], [i.name for i in items]  # no traffic
    np.testing.assert_allclose(y.numpy(), x @ w, rtol=1e-6, atol=1e-6)
    total = y.sum()
    assert total.shard_axis is None  # replicated: every device has the total
    moved = [i.name for i in create_schedule(list(total.lazydata.lbs)) if "->" in i.name]
    assert moved == ["copy_1_C->C:1", "copy_1_C:1->C"], moved  # the ring's two steps on two devices
    np.testing.assert_allclose(total.numpy(), (x @ w).sum(), rtol=1e-5)


def test_gradients_of_sharded_and_replicated_tensors() -> None:
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((7, 4)).astype(np.float32), rng.standard_normal((4, 2)).astype(np.float32)
    one = [Tensor(x, requires_grad=True), Tensor(w, requires_grad=True)]
    many = [Tensor(x, requires_grad=True), Tensor(w, requires_grad=True)]
    (one[0] @ one[1]).relu().square().mean().backward()
    ((many[0].shard(DEVICES, 0) @ many[1].to(DEVICES)).relu().square().mean()).backward()
    for a, b in zip(one, many, strict=True):
        assert b.grad.device == "C"
        np.testing.assert_allclose(b.grad.numpy(), a.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_sharding_errors_name_the_problem() -> None:
    with pytest.raises(ValueError, match=r"shard: axis 0 of shape \(1, 3\) has 1 elements, fewer than the 2"):
        Tensor.ones(1, 3).shard(DEVICES, 0)
    with pytest.raises(ValueError, match="expected distinct devices"):
        Tensor.ones(4).shard(("C", "C:0"))
    with pytest.raises(DeviceError, match="different devices"):
        Tensor.ones(4).shard(DEVICES) + Tensor.ones(4).shard(("C", "C:2"))
    with pytest.raises(TypeError, match="expected a tuple of device names"):
        Tensor.ones(4).shard("C:1")


def test_the_schedule_drawing_names_the_copies_between_devices() -> None:
    from tinyedu.viz.lazy_graph import draw_lazy
    x = Tensor(np.ones((4, 3), np.float32)).shard(("NUMPY:0", "NUMPY:1"), 0).realize()
    total = x.sum(0)
    outs = list(total.lazydata.lbs)
    source = draw_lazy(outs, create_schedule(outs)).source
    assert "LoadOps.COPY NUMPY->NUMPY:1" in source and "LoadOps.COPY NUMPY:1->NUMPY" in source
    assert "ReduceOps.SUM axes=(0,) on NUMPY:1" in source


def test_a_tensor_sharded_over_c_and_the_gpu() -> None:
    from tinyedu.runtime.device import DeviceUnavailable
    try:
        Device["GPU"].check_runnable()
    except DeviceUnavailable as missing:
        pytest.skip(str(missing))
    data = np.arange(20, dtype=np.float32).reshape(5, 4)
    x = Tensor(data).shard(("C", "GPU"), 0)
    assert x.lazydata.lbs[1].device == "GPU"
    np.testing.assert_array_equal(((x * 2).sum(0) + 1).numpy(), (data * 2).sum(0) + 1)
    np.testing.assert_array_equal(x.relu().to("C").numpy(), data)


def test_sgd_on_replicated_weights_and_a_sharded_batch_follows_one_device() -> None:
    """Data parallelism with sharded tensors: the weights replicated, the batch cut over the devices,
    the optimizer's assign writing each device's copy; the same steps as on one device."""
    from tinyedu.models.mlp import MnistMLP
    from tinyedu.nn.optim import SGD
    from tinyedu.nn.state import get_parameters
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((10, 28, 28)).astype(np.float32), rng.integers(0, 10, 10).astype(np.int32)
    losses = {}
    for devices in (None, ("NUMPY:0", "NUMPY:1", "NUMPY:2")):
        Tensor.manual_seed(0)
        model = MnistMLP(hidden=16)
        params = get_parameters(model)
        if devices is not None:
            for p in params:
                p.shard_(devices, axis=None)  # a replica of each weight on every device
        opt = SGD(params, lr=0.5)
        xs, ys = Tensor(x), Tensor(y)
        if devices is not None:
            xs, ys = xs.shard(devices), ys.shard(devices)
        losses[devices] = []
        for _ in range(3):
            opt.zero_grad()
            losses[devices].append(model(xs).cross_entropy(ys).backward().item())
            opt.step()
        if devices is not None:
            w = model.l1.weight.lazydata
            assert w.axis is None and all(np.array_equal(lb.numpy(), w.lbs[0].numpy()) for lb in w.lbs)
    one, many = losses.values()
    np.testing.assert_allclose(many, one, rtol=1e-5)
    assert one[-1] < one[0]
