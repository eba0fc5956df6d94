"""cross_entropy / nll_loss with class-index targets: against PyTorch (float64 oracle), and the two ways
tinyedu computes them agree bit for bit: targets whose values are known (every one counted: no mask, a
division by the count) and targets computed on the device (the masked path, which also serves
ignore_index)."""

import numpy as np
import pytest
import torch

from tinyedu import Tensor
from tinyedu.tensor_api import losses


def _data(n=16, c=7, seed=0, dtype=np.int32):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, c)).astype(np.float32) * 3
    y = rng.integers(0, c, n).astype(dtype)
    y[0], y[1] = 0, c - 1  # the edge labels
    return x, y


def _torch(x, y, **kw):
    xt = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    loss = torch.nn.functional.cross_entropy(xt, torch.tensor(y, dtype=torch.int64), **kw)
    loss.sum().backward()
    return loss.detach().numpy(), xt.grad.numpy()


def _ours(x, y, on_device=False, **kw):
    xt = Tensor(x, requires_grad=True)
    yt = Tensor(y).realize()
    if on_device:  # a target the loss cannot read without running a kernel
        yt = yt.maximum(-1000)  # (the values stay the same)
    loss = xt.cross_entropy(yt, **kw)
    loss.sum().backward()
    return loss.numpy(), xt.grad.numpy()


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("smoothing", [0.0, 0.2])
@pytest.mark.parametrize("ignore", [False, True])
def test_cross_entropy_matches_torch(reduction, smoothing, ignore):
    x, y = _data()
    if ignore:
        y[3] = y[5] = -100
    want_loss, want_grad = _torch(x, y, reduction=reduction, label_smoothing=smoothing)
    loss, grad = _ours(x, y, reduction=reduction, label_smoothing=smoothing)
    np.testing.assert_allclose(loss, want_loss, rtol=2e-5, atol=1e-6)
    np.testing.assert_allclose(grad, want_grad, rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_known_and_device_targets_give_the_same_bits(reduction, smoothing):
    x, y = _data(n=100, c=10, seed=1)  # (100: a count that is not a power of two)
    known = _ours(x, y, reduction=reduction, label_smoothing=smoothing)
    device = _ours(x, y, on_device=True, reduction=reduction, label_smoothing=smoothing)
    assert known[0].tobytes() == device[0].tobytes()
    assert known[1].tobytes() == device[1].tobytes()


@pytest.mark.parametrize("dtype", [np.int64, np.uint8, np.int16])
def test_target_dtypes_and_many_classes(dtype):
    c = 300 if dtype != np.uint8 else 200  # (uint8 holds 0..255; the class index must not wrap)
    x, y = _data(n=12, c=c, seed=2, dtype=dtype)
    want_loss, want_grad = _torch(x, y)
    loss, grad = _ours(x, y)
    np.testing.assert_allclose(loss, want_loss, rtol=2e-5, atol=1e-6)
    np.testing.assert_allclose(grad, want_grad, rtol=2e-5, atol=1e-6)


def test_uint8_targets_with_more_classes_than_uint8_holds():
    x = np.zeros((2, 300), np.float32)
    x[0, 44], x[1, 255] = 5.0, 7.0
    y = np.array([44, 255], np.uint8)  # 300 classes: 300 % 256 = 44 must not match class 44
    want_loss, _ = _torch(x, y, reduction="none")
    loss, _ = _ours(x, y, reduction="none")
    np.testing.assert_allclose(loss, want_loss, rtol=1e-5)


def test_nll_loss_with_weights_and_ignore_index():
    x, y = _data(n=20, c=5, seed=3)
    y[4] = 2
    y[7] = 9  # ignored below
    w = np.linspace(0.5, 2.0, 5).astype(np.float32)
    logp = torch.log_softmax(torch.tensor(x, dtype=torch.float64), 1)
    for reduction in ("mean", "sum", "none"):
        want = torch.nn.functional.nll_loss(logp, torch.tensor(y, dtype=torch.int64), weight=torch.tensor(
            w, dtype=torch.float64), ignore_index=9, reduction=reduction).numpy()
        got = Tensor(x).log_softmax(1).nll_loss(Tensor(y), reduction=reduction, ignore_index=9,
                                                weight=Tensor(w)).numpy()
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-6)


def test_every_target_ignored_gives_nan_like_torch():
    x, y = _data(n=4, c=3)
    y[:] = -100
    assert np.isnan(_ours(x, y)[0]) and np.isnan(_torch(x, y)[0])


def test_spatial_targets():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 4, 3, 5)).astype(np.float32)
    y = rng.integers(0, 4, (2, 3, 5)).astype(np.int32)
    want_loss, want_grad = _torch(x, y)
    loss, grad = _ours(x, y)
    np.testing.assert_allclose(loss, want_loss, rtol=2e-5, atol=1e-6)
    np.testing.assert_allclose(grad, want_grad, rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize("bad", [-1, 7, 300])
def test_out_of_range_targets_are_refused(bad):
    x, y = _data(c=7)
    y[2] = bad
    with pytest.raises(IndexError, match=f"target {bad} is out of range for 7 classes"):
        _ours(x, y)
    with pytest.raises(IndexError, match=f"target {bad} is out of range for 7 classes"):
        _ours(x, y, on_device=True)


def test_the_kept_class_index_is_one_per_kind_and_never_changes():
    x, y = _data(c=7)
    for _ in range(3):
        _ours(x, y)
        _ours(x, y.astype(np.int64))
    kept = [v for k, v in losses._CLASS_INDEX.items() if k[1] == 7 and k[2] == 0]
    assert len(kept) == 2  # int32 and int64 targets
    for lazy in kept:
        assert lazy.base.realized is not None
        np.testing.assert_array_equal(lazy.numpy().reshape(-1), np.arange(7))


def test_each_device_keeps_its_own_class_index():
    x, y = _data(c=6, seed=5)
    on_c = Tensor(x).cross_entropy(Tensor(y), reduction="none").numpy()
    on_numpy = Tensor(x, device="NUMPY").cross_entropy(Tensor(y, device="NUMPY"), reduction="none")
    assert on_numpy.device == "NUMPY"
    np.testing.assert_allclose(on_numpy.numpy(), on_c, rtol=1e-6)
    devices = {k[4] for k in losses._CLASS_INDEX if k[1] == 6}
    assert {"NUMPY", Tensor(x).device} <= devices
    for k, lazy in losses._CLASS_INDEX.items():
        assert lazy.device == k[4]
