"""Stage 0: Neuron/Layer/MLP on Values, the hinge-loss training loop, and make_moons."""

from __future__ import annotations

import gc
import math
import random

import numpy as np
import pytest

from tinyedu.datasets import make_moons
from tinyedu.scalar import MLP, Layer, Module, Neuron, Value, fit, hinge_loss


def test_parameter_counts():
    assert len(Neuron(3).parameters()) == 4  # 3 weights and a bias
    assert len(Layer(3, 4).parameters()) == 16
    # (2 + 1) * 16 + (16 + 1) * 16 + (16 + 1) * 1
    assert len(MLP(2, [16, 16, 1]).parameters()) == 337
    assert Module().parameters() == []


def test_parameters_are_distinct_values():
    params = MLP(3, [4, 2]).parameters()
    assert len({id(p) for p in params}) == len(params)


def test_neuron_computes_nonlinearity_of_affine_map():
    x = [0.5, -1.5]
    for seed in range(4):
        tanh = Neuron(2, nonlinearity="tanh", rng=random.Random(seed))
        pre = tanh.w[0].data * 0.5 + tanh.w[1].data * -1.5 + tanh.b.data
        assert tanh(x).data == pytest.approx(math.tanh(pre), rel=1e-15)
        relu = Neuron(2, nonlinearity="relu", rng=random.Random(seed))  # the same weights
        assert relu(x).data == pytest.approx(max(0.0, pre), rel=1e-15)
        linear = Neuron(2, nonlinearity=None, rng=random.Random(seed))
        assert linear(x).data == pytest.approx(pre, rel=1e-15)


def test_last_layer_is_linear_and_hidden_layers_use_the_nonlinearity():
    mlp = MLP(2, [8, 3], nonlinearity="relu", rng=random.Random(0))
    assert [n.nonlinearity for n in mlp.layers[0].neurons] == ["relu"] * 8
    assert [n.nonlinearity for n in mlp.layers[1].neurons] == [None] * 3
    out = mlp([0.3, -0.7])
    assert isinstance(out, list) and len(out) == 3
    small = MLP(2, [4, 1], rng=random.Random(0))
    single = small([0.3, -0.7])
    assert isinstance(single, Value)
    hidden = [h.data for h in small.layers[0]([0.3, -0.7])]
    assert min(hidden) >= 0  # relu
    out_neuron = small.layers[1].neurons[0]
    expected = sum(w.data * h for w, h in zip(out_neuron.w, hidden, strict=True)) + out_neuron.b.data
    assert single.data == pytest.approx(expected, rel=1e-15)  # no nonlinearity on the output


def test_bad_arguments():
    with pytest.raises(ValueError, match="nonlinearity must be one of"):
        MLP(2, [4, 1], nonlinearity="sigmoidish")
    with pytest.raises(ValueError, match="layer_sizes is empty"):
        MLP(2, [])
    with pytest.raises(ValueError, match="Neuron: expected 2 inputs, got 3"):
        Neuron(2)([1.0, 2.0, 3.0])


def test_same_seed_same_network_and_different_seed_different():
    def weights(seed):
        return [p.data for p in MLP(2, [4, 4, 1], rng=random.Random(seed)).parameters()]

    assert weights(0) == weights(0)
    assert weights(0) != weights(1)
    assert weights(0) == [p.data for p in MLP(2, [4, 4, 1]).parameters()]  # rng=None means seed 0


def test_neurons_in_a_layer_differ():
    layer = Layer(3, 2)  # one shared rng: two neurons must not get the same weights
    assert [w.data for w in layer.neurons[0].w] != [w.data for w in layer.neurons[1].w]


def test_mlp_zero_grad_resets_every_parameter():
    mlp = MLP(2, [4, 1], rng=random.Random(0))
    mlp([1.0, -2.0]).backward()
    assert any(p.grad != 0 for p in mlp.parameters())
    mlp.zero_grad()
    assert all(p.grad == 0 for p in mlp.parameters())


def test_mlp_gradients_match_finite_differences():
    mlp = MLP(2, [3, 1], nonlinearity="tanh", rng=random.Random(3))
    x = [0.4, -0.9]
    mlp(x).backward()
    eps = 1e-6
    for p in mlp.parameters():
        original = p.data
        p.data = original + eps
        up = mlp(x).data
        p.data = original - eps
        down = mlp(x).data
        p.data = original
        assert p.grad == pytest.approx((up - down) / (2 * eps), rel=1e-5, abs=1e-7)


def test_hinge_loss_value_and_label_check():
    mlp = MLP(2, [1], rng=random.Random(0))  # a single linear neuron: score = w . x + b
    X, y = [[1.0, 0.0], [0.0, 1.0]], [1, -1]
    loss, accuracy = hinge_loss(mlp, X, y, alpha=0.0)
    w0, w1 = (w.data for w in mlp.layers[0].neurons[0].w)
    expected = (max(0.0, 1 - w0) + max(0.0, 1 + w1)) / 2
    assert loss.data == pytest.approx(expected)
    assert accuracy == ((w0 > 0) + (w1 < 0)) / 2
    with pytest.raises(ValueError, match="labels must be -1 or \\+1"):
        hinge_loss(mlp, X, [0, 1])


def test_mlp_learns_moons():
    X, y = make_moons(50, noise=0.1, seed=0)
    model = MLP(2, [16, 16, 1], nonlinearity="relu", rng=random.Random(0))
    history = fit(model, X.tolist(), (2 * y - 1).tolist(), steps=30, learning_rate=1.0)
    losses = [loss for loss, _ in history]
    assert history[-1][1] >= 0.95
    assert losses[-1] < 0.25 * losses[0]


def test_training_is_deterministic():
    X, y = make_moons(20, noise=0.1, seed=1)
    X, labels = X.tolist(), (2 * y - 1).tolist()
    runs = [fit(MLP(2, [4, 1], rng=random.Random(7)), X, labels, steps=5) for _ in range(2)]
    assert runs[0] == runs[1]


@pytest.mark.parametrize("enabled", [True, False])
def test_fit_restores_the_cycle_collector(enabled):
    was = gc.isenabled()
    try:
        gc.enable() if enabled else gc.disable()
        fit(MLP(2, [2, 1]), [[0.0, 1.0]], [1], steps=1)
        assert gc.isenabled() is enabled
    finally:
        gc.enable() if was else gc.disable()


def test_graphs_have_no_reference_cycles():
    # fit() pauses the cycle collector because reference counting alone frees a Value graph.
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    try:
        loss, _ = hinge_loss(MLP(2, [4, 1]), [[0.5, 0.5], [1.0, -1.0]], [1, -1])
        loss.backward()
        del loss
        assert gc.collect() == 0  # nothing was left for the cycle collector
    finally:
        if was:
            gc.enable()


# -- make_moons -------------------------------------------------------------------------------

def test_make_moons_shapes_labels_and_determinism():
    X, y = make_moons(101, noise=0.2, seed=3)
    assert X.shape == (101, 2) and X.dtype == np.float64
    assert y.shape == (101,) and y.dtype == np.int64
    assert set(y.tolist()) == {0, 1} and (y == 0).sum() == 50 and (y == 1).sum() == 51
    X2, y2 = make_moons(101, noise=0.2, seed=3)
    assert np.array_equal(X, X2) and np.array_equal(y, y2)
    X3, _ = make_moons(101, noise=0.2, seed=4)
    assert not np.array_equal(X, X3)


def test_make_moons_without_noise_lies_on_the_two_half_circles():
    X, y = make_moons(40, noise=0.0, seed=0)
    upper, lower = X[y == 0], X[y == 1]
    assert np.allclose(np.hypot(upper[:, 0], upper[:, 1]), 1.0) and (upper[:, 1] >= -1e-12).all()
    assert np.allclose(np.hypot(lower[:, 0] - 1.0, lower[:, 1] - 0.5), 1.0)
    assert (lower[:, 1] <= 0.5 + 1e-12).all()


@pytest.mark.parametrize("kwargs, match", [({"n_samples": 1}, "n_samples must be an int >= 2"),
                                           ({"n_samples": 10.0}, "n_samples must be an int"),
                                           ({"noise": -0.1}, "noise is a standard deviation")])
def test_make_moons_rejects_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_moons(**kwargs)
