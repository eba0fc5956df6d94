"""tinyedu.models against PyTorch twins with the same weights: the same outputs, attention weights,
gradients of every parameter, BatchNorm running statistics, and the same weights after a few SGD
steps; the tasks' encodings; and clear errors for bad input. (Training to the targets is in
chapters 09 and 10, which nbval runs.)"""

from __future__ import annotations

import numpy as np
import pytest

from tinyedu import Tensor
from tinyedu.models import (
    LSTM,
    LSTMCell,
    LSTMRegressor,
    ResNet,
    Transformer,
    attention,
    causal_mask,
)
from tinyedu.models.tasks import Addition, adding_problem, mnist_split, shift_images
from tinyedu.models.transformer import MLP
from tinyedu.nn.optim import SGD
from tinyedu.nn.state import get_parameters, get_state_dict

torch = pytest.importorskip("torch")
twins = pytest.importorskip("tests.torch_twins")


def _assert_grads_match(ours: object, theirs: "torch.nn.Module", rtol: float, atol: float) -> None:
    theirs_params = dict(theirs.named_parameters())
    names = [name for name, p in get_state_dict(ours).items() if p.requires_grad]
    assert sorted(names) == sorted(theirs_params), "the two models do not have the same parameters"
    for name in names:
        p = get_state_dict(ours)[name]
        assert p.grad is not None, f"no gradient reached {name}"
        np.testing.assert_allclose(p.grad.numpy(), theirs_params[name].grad.numpy(), rtol=rtol, atol=atol,
                                   err_msg=name)


# ---- Transformer ----
def _transformer_pair(seed: int = 0, **sizes: int) -> tuple[Transformer, "torch.nn.Module"]:
    config = {"vocab_size": 12, "block_size": 9, "dim": 32, "n_heads": 4, "n_layers": 2} | sizes
    Tensor.manual_seed(seed)
    ours = Transformer(**config)
    return ours, twins.load_from(ours, twins.Transformer(**config))


def test_transformer_forward_backward_match_torch() -> None:
    ours, theirs = _transformer_pair()
    tokens = np.random.default_rng(0).integers(0, 12, (3, 9))
    logits, maps = ours.forward(Tensor(tokens.astype(np.int32)))
    t_logits, t_maps = theirs(torch.tensor(tokens))
    np.testing.assert_allclose(logits.numpy(), twins.numpy_of(t_logits), rtol=1e-4, atol=1e-4)
    for ours_map, their_map in zip(maps, t_maps, strict=True):
        assert ours_map.shape == (3, 4, 9, 9)
        np.testing.assert_allclose(ours_map.numpy(), twins.numpy_of(their_map), rtol=1e-4, atol=1e-5)
    targets = np.random.default_rng(1).integers(0, 12, (3, 9))
    targets[:, :4] = -100  # as in training: only the answer positions count
    logits.reshape(-1, 12).cross_entropy(Tensor(targets.reshape(-1).astype(np.int32))).backward()
    torch.nn.functional.cross_entropy(t_logits.reshape(-1, 12), torch.tensor(targets.reshape(-1))).backward()
    _assert_grads_match(ours, theirs, rtol=1e-3, atol=1e-5)


def test_causal_attention_never_looks_ahead() -> None:
    """Changing a later token leaves every earlier position's logits exactly as they were."""
    ours, _ = _transformer_pair(seed=1)
    tokens = np.random.default_rng(2).integers(0, 12, (2, 9))
    changed = tokens.copy()
    changed[:, 5:] = (changed[:, 5:] + 3) % 12
    a = ours(Tensor(tokens.astype(np.int32))).numpy()
    b = ours(Tensor(changed.astype(np.int32))).numpy()
    np.testing.assert_array_equal(a[:, :5], b[:, :5])
    assert not np.allclose(a[:, 5:], b[:, 5:])


def test_attention_matches_torch_sdpa_at_extreme_scores() -> None:
    """Scores up to ~1e4 (a saturated softmax: weights of exactly 0 and 1) and a row that only sees itself."""
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((2, 3, 5, 8)).astype(np.float32) for _ in range(3))
    q *= 40
    k *= 40
    out, weights = attention(Tensor(q), Tensor(k), Tensor(v), causal_mask(5))
    expected = torch.nn.functional.scaled_dot_product_attention(torch.tensor(q), torch.tensor(k),
                                                                torch.tensor(v), is_causal=True)
    np.testing.assert_allclose(out.numpy(), expected.numpy(), rtol=1e-4, atol=1e-4)
    w = weights.numpy()
    assert np.isfinite(w).all() and (w[..., 0, 1:] == 0).all() and (w[..., 0, 0] == 1).all()
    np.testing.assert_allclose(w.sum(-1), 1, rtol=1e-6)
    assert (np.triu(np.ones((5, 5)), 1) * w == 0).all()


def test_causal_mask() -> None:
    np.testing.assert_array_equal(causal_mask(4).numpy(), np.tril(np.ones((4, 4), dtype=bool)))


def test_attention_equals_the_library_sdpa_forward_and_backward() -> None:
    """The attention built from primitives is Tensor.scaled_dot_product_attention(is_causal=True)."""
    rng = np.random.default_rng(4)
    q_np, k_np, v_np = (rng.standard_normal((2, 3, 6, 4)).astype(np.float32) * 5 for _ in range(3))
    ours = [Tensor(a, requires_grad=True) for a in (q_np, k_np, v_np)]
    library = [Tensor(a, requires_grad=True) for a in (q_np, k_np, v_np)]
    out, _ = attention(*ours, causal_mask(6))
    expected = library[0].scaled_dot_product_attention(library[1], library[2], is_causal=True)
    np.testing.assert_allclose(out.numpy(), expected.numpy(), rtol=1e-5, atol=1e-6)
    cotangent = Tensor(rng.standard_normal((2, 3, 6, 4)).astype(np.float32))
    (out * cotangent).sum().backward()
    (expected * cotangent).sum().backward()
    for a, b in zip(ours, library, strict=True):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-5, atol=1e-5)


def test_mlp_at_extreme_activations_matches_torch() -> None:
    """GELU inputs from -1e4 to 1e4 (and 0, -0.0): values and gradients finite and equal to PyTorch's.
    (A sigmoid written as 1 / (1 + exp(-x)) gives NaN gradients below -88; the library's does not.)"""
    Tensor.manual_seed(5)
    ours = MLP(4)
    theirs = twins.load_from(ours, twins.MLP(4))
    x_np = np.array([[1e4, -1e4, 0.0, -0.0], [-100.0, 89.0, -3.0, 1e-30], [5e3, -2e3, 20.0, -20.0]],
                    dtype=np.float32)
    x = Tensor(x_np, requires_grad=True)
    tx = torch.tensor(x_np, requires_grad=True)
    out, t_out = ours(x), theirs(tx)
    np.testing.assert_allclose(out.numpy(), twins.numpy_of(t_out), rtol=1e-5, atol=1e-3)
    out.sum().backward()
    t_out.sum().backward()
    assert np.isfinite(x.grad.numpy()).all()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-4, atol=1e-5)
    _assert_grads_match(ours, theirs, rtol=1e-4, atol=1e-3)


def test_transformer_sgd_steps_match_torch() -> None:
    """Three SGD steps with momentum on the addition task: the same weights afterwards.

    (SGD, not Adam: Adam divides each step by the gradient's size, so where a gradient is rounding
    noise around 0, such as the keys' bias, whose gradient softmax makes exactly 0, it turns
    different noise into different steps of up to lr. Adam itself is compared with torch.optim in
    tests/test_optim.py.)
    """
    ours, theirs = _transformer_pair(seed=2, block_size=11)
    task = Addition(digits=3)
    opt = SGD(get_parameters(ours), lr=0.1, momentum=0.9)
    t_opt = torch.optim.SGD(theirs.parameters(), lr=0.1, momentum=0.9)
    rng = np.random.default_rng(4)
    for _ in range(3):
        batch = task.train_batch(16, rng)
        x, y = batch[:, :-1], batch[:, 1:].copy()
        y[:, :task.prompt_length - 1] = -100
        opt.zero_grad()
        ours(Tensor(x.astype(np.int32))).reshape(-1, 12).cross_entropy(Tensor(y.reshape(-1).astype(np.int32))
                                                                        ).backward()
        opt.step()
        t_opt.zero_grad()
        torch.nn.functional.cross_entropy(theirs(torch.tensor(x))[0].reshape(-1, 12),
                                          torch.tensor(y.reshape(-1))).backward()
        t_opt.step()
    theirs_params = dict(theirs.named_parameters())
    for name, p in get_state_dict(ours).items():
        np.testing.assert_allclose(p.numpy(), twins.numpy_of(theirs_params[name]), rtol=1e-4, atol=1e-5,
                                   err_msg=name)


def test_generate_greedy_and_temperature() -> None:
    ours, theirs = _transformer_pair(seed=3, block_size=6)
    prompt = np.array([[1, 2, 3], [4, 5, 6]])
    greedy = ours.generate(prompt, 5, temperature=0)  # runs past block_size: the window slides
    assert greedy.shape == (2, 8) and (greedy[:, :3] == prompt).all()
    expected = torch.tensor(prompt)
    with torch.no_grad():
        for _ in range(5):
            logits = theirs(expected[:, -6:])[0][:, -1]
            expected = torch.cat([expected, logits.argmax(-1, keepdim=True)], 1)
    np.testing.assert_array_equal(greedy, expected.numpy())
    a = ours.generate(prompt, 4, temperature=1.0, rng=np.random.default_rng(5))
    b = ours.generate(prompt, 4, temperature=1.0, rng=np.random.default_rng(5))
    np.testing.assert_array_equal(a, b)  # seeded: the same samples
    cold = ours.generate(np.repeat(prompt[:1], 20, 0), 1, temperature=1e-4, rng=np.random.default_rng(6))
    assert (cold[:, -1] == greedy[0, 3]).all()  # a temperature near 0 is greedy


def test_transformer_errors() -> None:
    with pytest.raises(ValueError, match="divisible by n_heads"):
        Transformer(12, 8, dim=30, n_heads=4)
    with pytest.raises(ValueError, match="positive int"):
        Transformer(12, 0)
    model = Transformer(12, 4, dim=8, n_heads=2, n_layers=1)
    with pytest.raises(ValueError, match=r"length 5 do not fit.*1\.\.4"):
        model(Tensor(np.zeros((1, 5), dtype=np.int32)))
    with pytest.raises(ValueError, match="integer tokens of shape"):
        model(Tensor(np.zeros((1, 4), dtype=np.float32)))
    with pytest.raises(ValueError, match="temperature"):
        model.generate([[1]], 1, temperature=-1)
    with pytest.raises(ValueError, match="prompt tokens must be in 0..11"):
        model.generate([[12]], 1)


# ---- the addition task ----
def test_addition_encoding_and_held_out_split() -> None:
    task = Addition(digits=3, held_out=500, seed=0)
    tokens = task.encode(np.array([[123, 45], [999, 999], [0, 0]]))
    assert [task.text(t) for t in tokens] == ["123+045=8610", "999+999=8991", "000+000=0000"]
    np.testing.assert_array_equal(task.decode_answer(tokens), [168, 1998, 0])
    assert len({tuple(p) for p in task.test.tolist()}) == 500  # distinct problems
    batch = task.train_batch(4000, np.random.default_rng(1))
    held_out = {tuple(p) for p in task.test.tolist()}
    a = batch[:, 0] * 100 + batch[:, 1] * 10 + batch[:, 2]
    b = batch[:, 4] * 100 + batch[:, 5] * 10 + batch[:, 6]
    assert not held_out & set(zip(a.tolist(), b.tolist(), strict=True))  # training never sees them
    np.testing.assert_array_equal(task.decode_answer(batch), a + b)
    with pytest.raises(ValueError, match="digits must be"):
        Addition(digits=0)


# ---- LSTM ----
def test_lstm_matches_torch_two_layers() -> None:
    Tensor.manual_seed(0)
    ours = LSTM(3, 6, num_layers=2)
    theirs = twins.load_from(ours, torch.nn.LSTM(3, 6, 2, batch_first=True))
    x_np = np.random.default_rng(0).standard_normal((4, 7, 3)).astype(np.float32) * 3
    x = Tensor(x_np, requires_grad=True)
    tx = torch.tensor(x_np, requires_grad=True)
    out, (h, c) = ours(x)
    t_out, (t_h, t_c) = theirs(tx)
    for a, b in ((out, t_out), (h, t_h), (c, t_c)):
        np.testing.assert_allclose(a.numpy(), twins.numpy_of(b), rtol=1e-4, atol=1e-5)
    cotangent = np.random.default_rng(1).standard_normal((4, 7, 6)).astype(np.float32)
    ((out * Tensor(cotangent)).sum() + c.sum()).backward()
    ((t_out * torch.tensor(cotangent)).sum() + t_c.sum()).backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-4, atol=1e-5)
    _assert_grads_match(ours, theirs, rtol=1e-4, atol=1e-5)


def test_lstm_given_state_and_cell_match_torch() -> None:
    Tensor.manual_seed(1)
    ours = LSTM(2, 5)
    theirs = twins.load_from(ours, torch.nn.LSTM(2, 5, batch_first=True))
    rng = np.random.default_rng(2)
    x, h0, c0 = (rng.standard_normal(s).astype(np.float32) for s in ((3, 4, 2), (1, 3, 5), (1, 3, 5)))
    out, _ = ours(Tensor(x), (Tensor(h0), Tensor(c0)))
    t_out, _ = theirs(torch.tensor(x), (torch.tensor(h0), torch.tensor(c0)))
    np.testing.assert_allclose(out.numpy(), twins.numpy_of(t_out), rtol=1e-4, atol=1e-5)
    cell = LSTMCell(2, 5)
    t_cell = twins.load_from(cell, torch.nn.LSTMCell(2, 5))
    h, c = cell(Tensor(x[:, 0]), (Tensor(h0[0]), Tensor(c0[0])))
    t_h, t_c = t_cell(torch.tensor(x[:, 0]), (torch.tensor(h0[0]), torch.tensor(c0[0])))
    np.testing.assert_allclose(h.numpy(), twins.numpy_of(t_h), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(c.numpy(), twins.numpy_of(t_c), rtol=1e-5, atol=1e-6)


def test_lstm_saturated_gates_match_torch() -> None:
    """Inputs of ±1e4: every gate saturates at exactly 0 or 1, as in PyTorch, and nothing overflows."""
    Tensor.manual_seed(2)
    ours = LSTMRegressor(2, 4)
    theirs = twins.load_from(ours, twins.LSTMRegressor(2, 4))
    x_np = np.array([[[1e4, -1e4], [-1e4, 1e4], [0.0, -0.0]]], dtype=np.float32)
    x = Tensor(x_np, requires_grad=True)
    tx = torch.tensor(x_np, requires_grad=True)
    out, t_out = ours(x), theirs(tx)
    np.testing.assert_allclose(out.numpy(), twins.numpy_of(t_out), rtol=1e-5, atol=1e-6)
    out.sum().backward()
    t_out.sum().backward()
    assert np.isfinite(x.grad.numpy()).all()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-4, atol=1e-6)
    _assert_grads_match(ours, theirs, rtol=1e-4, atol=1e-6)


def test_lstm_sgd_steps_match_torch_on_the_adding_problem() -> None:
    Tensor.manual_seed(3)
    ours = LSTMRegressor(2, 8)
    theirs = twins.load_from(ours, twins.LSTMRegressor(2, 8))
    opt = SGD(get_parameters(ours), lr=0.5, momentum=0.9)
    t_opt = torch.optim.SGD(theirs.parameters(), lr=0.5, momentum=0.9)
    rng = np.random.default_rng(0)
    for _ in range(3):
        x, y = adding_problem(8, 10, rng)
        opt.zero_grad()
        ((ours(Tensor(x)) - Tensor(y)) ** 2).mean().backward()
        opt.step()
        t_opt.zero_grad()
        ((theirs(torch.tensor(x)) - torch.tensor(y)) ** 2).mean().backward()
        t_opt.step()
    theirs_params = dict(theirs.named_parameters())
    for name, p in get_state_dict(ours).items():
        np.testing.assert_allclose(p.numpy(), twins.numpy_of(theirs_params[name]), rtol=1e-4, atol=1e-5,
                                   err_msg=name)


def test_adding_problem() -> None:
    x, y = adding_problem(50, 10, np.random.default_rng(0))
    assert x.shape == (50, 10, 2) and x.dtype == np.float32 and y.shape == (50,)
    marks = x[:, :, 1]
    assert (marks.sum(1) == 2).all() and (marks[:, :5].sum(1) == 1).all()
    np.testing.assert_allclose(y, (x[:, :, 0] * marks).sum(1), rtol=1e-6)


def test_lstm_errors() -> None:
    with pytest.raises(ValueError, match="hidden_size must be a positive int"):
        LSTM(2, 0)
    with pytest.raises(ValueError, match=r"expected input \(batch, time, features\)"):
        LSTM(2, 3)(Tensor.zeros(4, 2))
    with pytest.raises(ValueError, match="layer 0 expects 2 features, the input has 3"):
        LSTM(2, 3)(Tensor.zeros(1, 4, 3))


# ---- ResNet ----
def test_resnet_train_and_eval_match_torch() -> None:
    """Training mode (batch statistics, running statistics updated in place) and eval mode."""
    Tensor.manual_seed(0)
    ours = ResNet(widths=(4, 8, 8))
    theirs = twins.load_from(ours, twins.ResNet((4, 8, 8)))
    assert "layers.1.downsample.0.weight" in get_state_dict(ours)
    x_np = np.random.default_rng(0).standard_normal((3, 1, 28, 28)).astype(np.float32)
    x = Tensor(x_np, requires_grad=True)
    tx = torch.tensor(x_np, requires_grad=True)
    with Tensor.train():
        out = ours(x)
        t_out = theirs.train()(tx)
        np.testing.assert_allclose(out.numpy(), twins.numpy_of(t_out), rtol=1e-4, atol=1e-4)
        cotangent = np.random.default_rng(1).standard_normal((3, 10)).astype(np.float32)
        (out * Tensor(cotangent)).sum().backward()
        (t_out * torch.tensor(cotangent)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-3, atol=1e-5)
    _assert_grads_match(ours, theirs, rtol=1e-3, atol=1e-4)
    t_state = theirs.state_dict()
    for name, t in get_state_dict(ours).items():
        if "running" in name or "num_batches" in name:
            np.testing.assert_allclose(t.numpy(), t_state[name].numpy(), rtol=1e-5, atol=1e-6, err_msg=name)
    eval_np = 50 * np.random.default_rng(2).standard_normal((2, 1, 28, 28)).astype(np.float32)
    with torch.no_grad():
        expected = theirs.eval()(torch.tensor(eval_np)).numpy()
    np.testing.assert_allclose(ours(Tensor(eval_np)).numpy(), expected, rtol=1e-4, atol=1e-3)


def test_resnet_shapes_and_errors() -> None:
    model = ResNet(widths=(4, 8))
    assert model(Tensor.zeros(2, 1, 28, 28)).shape == (2, 10)
    assert model.layers[0].downsample == [] and len(model.layers[1].downsample) == 2
    with pytest.raises(ValueError, match="widths must be"):
        ResNet(widths=())
    with pytest.raises(ValueError, match=r"expected images \(N, C, H, W\)"):
        model(Tensor.zeros(2, 28, 28))


def test_mnist_split_and_shift() -> None:
    images = np.arange(10 * 4 * 4, dtype=np.float32).reshape(10, 4, 4)
    train, held_out = mnist_split(images, n_train=8)
    assert sorted(np.concatenate([train, held_out]).tolist()) == list(range(10)) and len(held_out) == 2
    np.testing.assert_array_equal(train, np.random.default_rng(0).permutation(10)[:8])  # chapter 08's split
    shifted = shift_images(images, np.random.default_rng(0), background=-1.0)
    for image, moved in zip(images, shifted, strict=True):
        padded = np.pad(image, 1, constant_values=-1)
        matches = [(dy, dx) for dy in (-1, 0, 1) for dx in (-1, 0, 1)
                   if np.array_equal(padded[1 + dy:5 + dy, 1 + dx:5 + dx], moved)]
        assert len(matches) == 1
