"""tinyedu.nn layers against torch.nn with the same weights: forward, backward, running statistics,
initialisation, and the errors for bad arguments."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tinyedu import Tensor, dtypes
from tinyedu.nn import BatchNorm2d, Conv2d, Dropout, Embedding, LayerNorm, Linear
from tinyedu.nn.state import get_parameters, get_state_dict

torch = pytest.importorskip("torch")


def _copy_weights(ours: object, theirs: "torch.nn.Module") -> None:
    """Give the torch module our tensors (the state dict names are the same)."""
    state = {name: torch.tensor(t.numpy()) for name, t in get_state_dict(ours).items()}
    theirs.load_state_dict(state)


def _compare(ours: object, theirs: "torch.nn.Module", x_np: np.ndarray, rtol: float = 1e-5,
             atol: float = 1e-5) -> None:
    """Same forward output, same gradients of the input and of every parameter."""
    rng = np.random.default_rng(7)
    x = Tensor(x_np, requires_grad=True)
    tx = torch.tensor(x_np, requires_grad=True)
    out, tout = ours(x), theirs(tx)
    np.testing.assert_allclose(out.numpy(), tout.detach().numpy(), rtol=rtol, atol=atol)
    cotangent = rng.standard_normal(tout.shape).astype(np.float32)
    (out * Tensor(cotangent)).sum().backward()
    (tout * torch.tensor(cotangent)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=rtol, atol=atol)
    theirs_params = dict(theirs.named_parameters())
    for name, p in get_state_dict(ours).items():
        if p.requires_grad:
            np.testing.assert_allclose(p.grad.numpy(), theirs_params[name].grad.numpy(), rtol=rtol, atol=atol,
                                       err_msg=name)


@pytest.mark.parametrize("bias", [True, False])
def test_linear_matches_torch(bias: bool) -> None:
    layer = Linear(7, 5, bias=bias)
    reference = torch.nn.Linear(7, 5, bias=bias)
    _copy_weights(layer, reference)
    _compare(layer, reference, np.random.default_rng(0).standard_normal((3, 4, 7)).astype(np.float32))


@pytest.mark.parametrize("kwargs", [
    {},
    {"stride": 2, "padding": 1},
    {"padding": "same", "dilation": 2},
    {"groups": 2, "bias": False},
])
def test_conv2d_matches_torch(kwargs: dict) -> None:
    layer = Conv2d(4, 6, 3, **kwargs)
    reference = torch.nn.Conv2d(4, 6, 3, **kwargs)
    _copy_weights(layer, reference)
    _compare(layer, reference, np.random.default_rng(1).standard_normal((2, 4, 9, 8)).astype(np.float32),
             rtol=1e-4, atol=1e-5)


def test_layernorm_matches_torch() -> None:
    layer = LayerNorm((3, 5))
    reference = torch.nn.LayerNorm((3, 5))
    layer.weight.assign(Tensor(np.linspace(0.5, 2, 15, dtype=np.float32).reshape(3, 5)))
    layer.bias.assign(Tensor(np.linspace(-1, 1, 15, dtype=np.float32).reshape(3, 5)))
    _copy_weights(layer, reference)
    _compare(layer, reference, 100 * np.random.default_rng(2).standard_normal((4, 3, 5)).astype(np.float32),
             rtol=1e-4, atol=1e-4)


def test_embedding_matches_torch() -> None:
    layer = Embedding(10, 4)
    reference = torch.nn.Embedding(10, 4)
    _copy_weights(layer, reference)
    index = np.array([[1, 9, 1], [0, 3, 3]])
    out = layer(Tensor(index.astype(np.int32)))
    tout = reference(torch.tensor(index))
    np.testing.assert_array_equal(out.numpy(), tout.detach().numpy())
    out.sum().backward()
    tout.sum().backward()
    np.testing.assert_array_equal(layer.weight.grad.numpy(), reference.weight.grad.numpy())
    with pytest.raises(IndexError, match="out of range for size 10"):
        layer(Tensor([3, 10]))
    with pytest.raises(TypeError, match="integer indices"):
        layer(Tensor([1.0]))


@pytest.mark.parametrize("momentum", [0.1, None])
def test_batchnorm2d_running_stats_and_eval_match_torch(momentum: float | None) -> None:
    rng = np.random.default_rng(3)
    layer = BatchNorm2d(3, momentum=momentum)
    reference = torch.nn.BatchNorm2d(3, momentum=momentum)
    layer.weight.assign(Tensor([0.5, 1.0, 2.0]))
    layer.bias.assign(Tensor([0.0, -1.0, 1.0]))
    _copy_weights(layer, reference)
    for step in range(3):  # training: batch statistics, running averages updated in place
        x_np = (rng.standard_normal((4, 3, 5, 5)) * (step + 1) + step).astype(np.float32)
        with Tensor.train():
            _compare(layer, reference.train(), x_np, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(layer.running_mean.numpy(), reference.running_mean.numpy(), rtol=1e-5,
                                   atol=1e-6)
        np.testing.assert_allclose(layer.running_var.numpy(), reference.running_var.numpy(), rtol=1e-5)
        assert layer.num_batches_tracked.item() == reference.num_batches_tracked.item() == step + 1
    # evaluation: the running statistics, and nothing changes
    x_np = rng.standard_normal((2, 3, 4, 4)).astype(np.float32)
    mean_before = layer.running_mean.numpy()
    _compare(layer, reference.eval(), x_np, rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(layer.running_mean.numpy(), mean_before)


def test_batchnorm2d_without_running_stats_and_errors() -> None:
    layer = BatchNorm2d(2, track_running_stats=False, affine=False)
    assert get_state_dict(layer) == {}
    out = layer(Tensor(np.arange(16, dtype=np.float32).reshape(2, 2, 2, 2)))
    np.testing.assert_allclose(out.numpy().mean((0, 2, 3)), [0, 0], atol=1e-6)
    with pytest.raises(ValueError, match="expected 4-d input"):
        BatchNorm2d(2)(Tensor.ones(2, 2))
    with pytest.raises(ValueError, match="num_features=2"):
        BatchNorm2d(2)(Tensor.ones(1, 3, 2, 2))
    with Tensor.train(), pytest.raises(ValueError, match="more than one value per channel"):
        BatchNorm2d(2)(Tensor.ones(1, 2, 1, 1))


def test_dropout_drops_only_while_training() -> None:
    x = Tensor.ones(1000)
    np.testing.assert_array_equal(Dropout(0.5)(x).numpy(), np.ones(1000))
    Tensor.manual_seed(0)
    with Tensor.train():
        out = Dropout(0.25)(x).numpy()
    kept = out != 0
    assert 0.65 < kept.mean() < 0.85
    np.testing.assert_allclose(out[kept], 1 / 0.75)
    with pytest.raises(ValueError, match="between 0 and 1"):
        Dropout(1.5)


def test_initialisation_follows_torch() -> None:
    Tensor.manual_seed(0)
    linear, conv = Linear(400, 300), Conv2d(8, 16, 5)
    cases = ((linear.weight, 400), (linear.bias, 400), (conv.weight, 8 * 25), (conv.bias, 8 * 25))
    for tensor, fan_in in cases:
        values, bound = tensor.numpy(), 1 / math.sqrt(fan_in)
        assert np.abs(values).max() <= bound
        assert np.abs(values).max() > 0.95 * bound          # U(-bound, bound), not something narrower
        assert abs(values.std() - bound / math.sqrt(3)) < 0.05 * bound
    assert linear.weight.shape == (300, 400) and conv.weight.shape == (16, 8, 5, 5)
    embedding = Embedding(100, 50).weight.numpy()
    assert abs(embedding.mean()) < 0.05 and abs(embedding.std() - 1) < 0.05
    norm = BatchNorm2d(4)
    np.testing.assert_array_equal(norm.running_var.numpy(), np.ones(4))
    assert norm.num_batches_tracked.dtype == dtypes.int32


def test_state_dict_names_and_parameters_match_torch() -> None:
    class Net:
        def __init__(self) -> None:
            self.conv = Conv2d(1, 4, 3)
            self.bn = BatchNorm2d(4)
            self.layers = [Linear(4, 8), Linear(8, 2)]
            self.norm = LayerNorm(2)

    class TorchNet(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = torch.nn.Conv2d(1, 4, 3)
            self.bn = torch.nn.BatchNorm2d(4)
            self.layers = torch.nn.ModuleList([torch.nn.Linear(4, 8), torch.nn.Linear(8, 2)])
            self.norm = torch.nn.LayerNorm(2)

    net, reference = Net(), TorchNet()
    ours = {k: t.shape for k, t in get_state_dict(net).items()}
    theirs = {k: tuple(t.shape) for k, t in reference.state_dict().items()}
    assert ours == theirs
    assert [p.shape for p in get_parameters(net)] == [tuple(p.shape) for p in reference.parameters()]


@pytest.mark.parametrize("make, match", [
    (lambda: Linear(0, 3), "in_features must be a positive int"),
    (lambda: Conv2d(3, 4, 3, groups=2), "divisible by groups"),
    (lambda: Conv2d(2, 4, 0), "kernel_size must be an int or 2 ints"),
    (lambda: LayerNorm(-1), "must be a positive int"),
    (lambda: Embedding(5, 0), "embedding_dim must be a positive int"),
])
def test_bad_layer_arguments(make, match) -> None:
    with pytest.raises(ValueError, match=match):
        make()
