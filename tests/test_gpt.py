"""tinyedu.models.gpt, generate and quantize: RoPE against float64 numpy, the whole GPT (forward and
gradients) against a float64 PyTorch reference written from its state dict, the masks, the KV cache
against recomputation, seeded sampling against numpy's probabilities, speculative decoding against
the target's own greedy output, int8 weights against float32, safetensors round trips, training and
the bigram baseline against counting by hand, and clear errors."""

from __future__ import annotations

import collections
import importlib.util
import math
import pathlib

import numpy as np
import pytest

from tinyedu import Tensor, dtypes
from tinyedu.engine import realize
from tinyedu.models.generate import pick_token, speculative_generate, token_probabilities
from tinyedu.models.gpt import (
    GPT,
    apply_rope,
    attention_mask,
    best_bigram_loss,
    bigram_loss,
    rope_tables,
    train_gpt,
    write_rows,
)
from tinyedu.models.quantize import Int8Linear, quantize_int8, quantize_rows
from tinyedu.nn import Linear
from tinyedu.nn.state import get_state_dict, load_state_dict, safe_load, safe_save


def _model(seed: int = 0, **config: object) -> GPT:
    Tensor.manual_seed(seed)
    return GPT(**({"vocab_size": 23, "block_size": 24, "dim": 16, "n_heads": 2, "n_layers": 2} | config))


def _tokens(seed: int, shape: tuple[int, ...], vocab: int = 23) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, vocab, shape).astype(np.int32)


# ---- RoPE and masks ----
def _rope_reference(x: np.ndarray, positions: np.ndarray, base: float = 10000.0) -> np.ndarray:
    """Rotary embeddings in float64, written with complex numbers: pair (x[i], x[i + d/2]) is the
    complex number x[i] + i·x[i + d/2], multiplied by exp(i · position · base^(-2i/d))."""
    half = x.shape[-1] // 2
    z = x[..., :half].astype(np.float64) + 1j * x[..., half:].astype(np.float64)
    angle = positions[:, None] * base ** (-2 * np.arange(half) / x.shape[-1])
    z = z * np.exp(1j * angle)
    return np.concatenate([z.real, z.imag], axis=-1)


@pytest.mark.parametrize("head_dim", [2, 8, 14])
def test_rope_matches_float64_numpy_at_far_positions(head_dim: int) -> None:
    rng = np.random.default_rng(head_dim)
    x = rng.standard_normal((2, 3, 5, head_dim)).astype(np.float32) * np.float32(100)
    positions = np.array([0, 1, 7, 999, 4095])
    cos, sin = rope_tables(4096, head_dim)
    ours = apply_rope(Tensor(x), Tensor(cos[positions].astype(np.float32)),
                      Tensor(sin[positions].astype(np.float32))).numpy()
    np.testing.assert_allclose(ours, _rope_reference(x, positions), rtol=1e-5, atol=1e-4)


def test_rope_scores_depend_only_on_the_distance() -> None:
    """q at m and k at n score the same as q at m + s and k at n + s: the point of rotary positions."""
    rng = np.random.default_rng(1)
    q, k = (rng.standard_normal((1, 1, 1, 8)).astype(np.float32) for _ in range(2))
    cos, sin = (Tensor(t.astype(np.float32)) for t in rope_tables(64, 8))

    def score(m: int, n: int) -> float:
        qm = apply_rope(Tensor(q), cos[m:m + 1], sin[m:m + 1])
        kn = apply_rope(Tensor(k), cos[n:n + 1], sin[n:n + 1])
        return (qm * kn).sum().item()

    assert score(3, 1) == pytest.approx(score(40, 38), rel=1e-5)
    assert score(3, 1) != pytest.approx(score(3, 2), rel=1e-3)


@pytest.mark.parametrize("window", [None, 1, 3])
def test_attention_mask_is_causal_and_windowed(window: int | None) -> None:
    positions = np.array([0, 2, 5, 6])
    ours = attention_mask(Tensor(positions.astype(np.int32)), 7, window).numpy()
    key = np.arange(7)[None, :]
    expected = (key <= positions[:, None]) & ((key > positions[:, None] - window) if window else True)
    np.testing.assert_array_equal(ours, expected)


@pytest.mark.parametrize("positions", [[4], [4, 1]])  # one row (a decoding step's path) and several
def test_write_rows_places_rows_exactly(positions: list[int]) -> None:
    cache = np.random.default_rng(2).standard_normal((1, 2, 6, 3)).astype(np.float32)
    rows = np.array([[[[1e30, -0.0, np.inf], [7.0, -1.0, 2.5]],
                      [[np.nan, 5e-42, -3.0], [0.5, 1e-3, -np.inf]]]], dtype=np.float32)
    rows = rows[:, :, :len(positions)]  # (1, 2, T, 3)
    out = write_rows(Tensor(cache), Tensor(rows), Tensor(np.array(positions, dtype=np.int32))).numpy()
    expected = cache.copy()
    for t, position in enumerate(positions):
        expected[:, :, position] = rows[:, :, t]
    np.testing.assert_array_equal(out, expected)  # the very bits: inf, NaN, a denormal (-0.0 may become 0.0)
    assert out[0, 1, 4, 1] == np.float32(5e-42) and np.isnan(out[0, 1, 4, 0])


# ---- the model against a float64 PyTorch reference ----
def _torch_gpt(state: dict, tokens: "np.ndarray", config: dict, torch: object) -> object:
    """The GPT forward written independently in torch float64 from the state dict (rope via complex)."""
    F = torch.nn.functional
    w = {name: torch.tensor(t.numpy(), dtype=torch.float64, requires_grad=True) for name, t in state.items()}
    heads, length = config["n_heads"], tokens.shape[1]
    x = w["tok_emb.weight"][torch.tensor(tokens, dtype=torch.long)]
    if config["positions"] == "learned":
        x = x + w["pos_emb.weight"][:length]
    key, query = torch.arange(length)[None, :], torch.arange(length)[:, None]
    mask = (key <= query) & ((key > query - config["window"]) if config["window"] else True)
    for n in range(config["n_layers"]):
        p = f"blocks.{n}."
        h = F.layer_norm(x, x.shape[-1:], w[p + "ln1.weight"], w[p + "ln1.bias"])
        q, k, v = F.linear(h, w[p + "attn.qkv.weight"], w[p + "attn.qkv.bias"]).chunk(3, -1)
        q, k, v = (t.reshape(*t.shape[:2], heads, -1).transpose(1, 2) for t in (q, k, v))
        if config["positions"] == "rope":
            half, angle = q.shape[-1] // 2, torch.arange(length, dtype=torch.float64)[:, None] * 10000.0 ** (
                -2 * torch.arange(q.shape[-1] // 2, dtype=torch.float64) / q.shape[-1])
            turn = torch.polar(torch.ones_like(angle), angle)
            q, k = (torch.view_as_real(torch.complex(t[..., :half], t[..., half:]) * turn).movedim(-1, -2)
                    .reshape(t.shape) for t in (q, k))
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask).transpose(1, 2).reshape(x.shape)
        x = x + F.linear(out, w[p + "attn.proj.weight"], w[p + "attn.proj.bias"])
        h = F.layer_norm(x, x.shape[-1:], w[p + "ln2.weight"], w[p + "ln2.bias"])
        h = F.linear(F.gelu(F.linear(h, w[p + "mlp.fc.weight"], w[p + "mlp.fc.bias"]), approximate="tanh"),
                     w[p + "mlp.proj.weight"], w[p + "mlp.proj.bias"])
        x = x + h
    x = F.layer_norm(x, x.shape[-1:], w["ln_f.weight"], w["ln_f.bias"])
    return x @ w["tok_emb.weight"].T, w


@pytest.mark.parametrize("positions,window", [("rope", None), ("learned", None), ("rope", 3)])
def test_gpt_forward_and_gradients_match_a_float64_torch_reference(positions: str,
                                                                   window: int | None) -> None:
    torch = pytest.importorskip("torch")
    model = _model(positions=positions, window=window)
    tokens = _tokens(3, (2, 11))
    loss = model.loss(Tensor(tokens))
    logits = model(Tensor(tokens[:, :-1])).numpy()
    state = {n: t for n, t in get_state_dict(model).items() if not n.startswith("rope_")}
    t_logits, w = _torch_gpt(state, tokens[:, :-1], model.config, torch)
    np.testing.assert_allclose(logits, t_logits.detach().numpy(), rtol=1e-4, atol=1e-4)
    targets = torch.tensor(tokens[:, 1:]).long().reshape(-1)
    t_loss = torch.nn.functional.cross_entropy(t_logits.reshape(-1, 23), targets)
    assert loss.item() == pytest.approx(t_loss.item(), rel=1e-5)
    loss.backward()
    t_loss.backward()
    for name, t in state.items():
        np.testing.assert_allclose(t.grad.numpy(), w[name].grad.numpy(), rtol=1e-3, atol=1e-5, err_msg=name)


def test_a_token_reaches_only_later_positions_within_the_window() -> None:
    """One layer, window 3: changing token 5 changes the logits of positions 5, 6, 7 and no other."""
    model = _model(n_layers=1, window=3)
    tokens = _tokens(4, (1, 12))
    changed = tokens.copy()
    changed[0, 5] = (changed[0, 5] + 1) % 23
    a, b = (model(Tensor(t)).numpy()[0] for t in (tokens, changed))
    differs = [not np.array_equal(a[i], b[i]) for i in range(12)]
    assert differs == [i in (5, 6, 7) for i in range(12)]


def test_state_dict_round_trips_through_safetensors(tmp_path: object) -> None:
    model = _model(positions="learned")
    names = list(get_state_dict(model))
    assert names[:2] == ["tok_emb.weight", "pos_emb.weight"] and "head.weight" not in names  # tied head
    safe_save(get_state_dict(model), tmp_path / "gpt.safetensors")
    other = _model(seed=1, positions="learned")
    tokens = Tensor(_tokens(5, (2, 7)))
    assert not np.array_equal(model(tokens).numpy(), other(tokens).numpy())
    load_state_dict(other, safe_load(tmp_path / "gpt.safetensors"))
    np.testing.assert_array_equal(model(tokens).numpy(), other(tokens).numpy())


# ---- generation ----
@pytest.mark.parametrize("config", [{}, {"positions": "learned"}, {"window": 4}])
def test_greedy_generation_is_the_same_with_and_without_the_cache(config: dict) -> None:
    model = _model(**config)
    prompt = [3, 1, 4, 1, 5]
    with_cache = model.generate(prompt, 14, cache=True)
    assert with_cache == model.generate(prompt, 14, cache=False)
    assert with_cache[:5] == prompt and len(with_cache) == 19
    cache = model.new_cache()  # and the cached logits are the full forward's, position by position
    full = model(Tensor(np.array([with_cache], dtype=np.int32))).numpy()[0]
    prefill = model.forward_cached(with_cache[:6], 0, cache)  # first: the steps read what it writes
    steps = [model.forward_cached([t], i, cache) for i, t in enumerate(with_cache) if i >= 6]
    cached = np.concatenate([prefill, *steps])
    np.testing.assert_allclose(cached, full, rtol=1e-4, atol=1e-5)


def test_sampling_is_seeded_and_top_k_1_is_greedy() -> None:
    model = _model()
    a = model.generate([1, 2], 12, temperature=1.0, seed=7)
    assert a == model.generate([1, 2], 12, temperature=1.0, seed=7)
    assert a == model.generate([1, 2], 12, temperature=1.0, seed=7, cache=False)
    assert a != model.generate([1, 2], 12, temperature=1.0, seed=8)
    assert model.generate([1, 2], 12, temperature=0.7, top_k=1, seed=3) == model.generate([1, 2], 12)


def test_token_probabilities_match_numpy_and_draws_follow_them() -> None:
    logits = np.array([2.0, -1.0, 0.5, 1e4 / 1e4, -np.inf, 0.0], dtype=np.float32)
    for temperature, top_k in ((1.0, None), (0.5, None), (2.0, 3)):
        scaled = logits.astype(np.float64) / temperature
        keep = np.argsort(-scaled)[:top_k] if top_k else np.arange(6)
        expected = np.zeros(6)
        expected[keep] = np.exp(scaled[keep]) / np.exp(scaled[keep]).sum()
        probabilities = token_probabilities(logits, temperature, top_k)
        np.testing.assert_allclose(probabilities, expected, rtol=1e-12, atol=1e-300)
        rng, draws = np.random.default_rng(0), 4000
        counts = collections.Counter(pick_token(logits, temperature, top_k, rng) for _ in range(draws))
        for token in range(6):  # within 5 standard deviations of the binomial count
            spread = 5 * math.sqrt(draws * expected[token] * (1 - expected[token])) + 1e-9
            assert abs(counts[token] - draws * expected[token]) <= spread, (temperature, top_k, token)


def _nucleus_reference(logits: list[float], temperature: float, top_k: int | None,
                       top_p: float) -> list[float]:
    """Nucleus sampling by its definition, in plain Python: sort, add up, cut, renormalize."""
    scaled = [x / temperature for x in logits]
    if top_k is not None:
        kth = sorted(scaled, reverse=True)[top_k - 1]
        scaled = [x if x >= kth else -math.inf for x in scaled]
    top = max(scaled)
    weights = [math.exp(x - top) for x in scaled]
    probabilities = [w / sum(weights) for w in weights]
    kept, mass = set(), 0.0
    for token in sorted(range(len(logits)), key=lambda t: (-probabilities[t], t)):
        if mass >= top_p:
            break
        kept.add(token)
        mass += probabilities[token]
    total = sum(probabilities[t] for t in kept)
    return [probabilities[t] / total if t in kept else 0.0 for t in range(len(logits))]


@pytest.mark.parametrize("temperature, top_k, top_p", [(1.0, None, 0.9), (0.5, None, 0.5), (2.0, 4, 0.8),
                                                       (1.0, None, 1e-9), (1.0, None, 1.0)])
def test_top_p_keeps_the_nucleus_and_draws_follow_it(temperature: float, top_k: int | None,
                                                     top_p: float) -> None:
    logits = np.array([2.0, -1.0, 0.5, 1.0, -np.inf, 0.0, 1.0], dtype=np.float32)
    expected = np.array(_nucleus_reference(logits.tolist(), temperature, top_k, top_p))
    probabilities = token_probabilities(logits, temperature, top_k, top_p)
    np.testing.assert_allclose(probabilities, expected, rtol=1e-12, atol=1e-300)
    if top_p == 1e-9:
        assert probabilities.tolist() == [1, 0, 0, 0, 0, 0, 0]  # only the likeliest: greedy
    rng, draws = np.random.default_rng(1), 4000
    counts = collections.Counter(pick_token(logits, temperature, top_k, rng, top_p) for _ in range(draws))
    assert set(counts) <= set(np.flatnonzero(expected).tolist())  # never a token outside the nucleus
    for token in range(len(logits)):
        spread = 5 * math.sqrt(draws * expected[token] * (1 - expected[token])) + 1e-9
        assert abs(counts[token] - draws * expected[token]) <= spread, (temperature, top_k, top_p, token)


def test_top_p_generation_is_seeded() -> None:
    model = _model()
    a = model.generate([1, 2], 12, temperature=1.0, seed=7, top_p=0.9)
    assert a == model.generate([1, 2], 12, temperature=1.0, seed=7, top_p=0.9, cache=False)
    assert model.generate([1, 2], 12, temperature=1.0, seed=7, top_p=1e-9) == model.generate([1, 2], 12)
    with pytest.raises(ValueError, match="top_p must be None or a number in \\(0, 1\\]"):
        model.generate([1], 2, temperature=1.0, top_p=0.0)


def test_speculative_decoding_gives_the_targets_greedy_output() -> None:
    target = _model(seed=0, n_layers=2)
    prompt = [5, 9, 2]
    expected = target.generate(prompt, 18)
    draft = _model(seed=1, dim=8, n_layers=1)  # a different, smaller model: it rarely agrees
    near = _model(seed=2)  # the target's weights, each off by ~5%: agrees often, not always
    noise = np.random.default_rng(0)
    load_state_dict(near, {n: t.numpy() * (1 + noise.standard_normal(t.shape).astype(np.float32) * 0.05)
                           for n, t in get_state_dict(target).items()})
    rates = []
    for d, k in ((draft, 4), (near, 3), (near, 1), (target, 4)):
        out, stats = speculative_generate(target, d, prompt, 18, k=k)
        assert out == expected, (k, stats)
        assert stats["rounds"] == stats["target_passes"] == 18 - stats["accepted"]
        rates.append(stats["acceptance_rate"])
    assert rates[-1] == 1.0 and 0 < rates[1] < 1 and rates[1] > rates[0]


# ---- int8 weights ----
def test_quantize_rows_rounds_each_row_to_its_own_scale() -> None:
    w = np.random.default_rng(6).standard_normal((5, 9)).astype(np.float32)
    w[1] *= 1e4
    w[2] = 0.0
    w[3, 4] = -1e-3
    values, scale = quantize_rows(Tensor(w))
    assert values.dtype == dtypes.int8 and scale.dtype == dtypes.float32
    q, s = values.numpy().astype(np.float64), scale.numpy().astype(np.float64)
    np.testing.assert_allclose(s, np.where(np.abs(w).max(1) > 0, np.abs(w).max(1) / 127, 1.0), rtol=1e-6)
    assert np.abs(q).max() <= 127 and (q[2] == 0).all()
    assert (np.abs(q * s[:, None] - w) <= s[:, None] / 2 * (1 + 1e-5)).all()


def test_int8_linear_dequantizes_inside_the_matmul_kernel() -> None:
    """One kernel reads the int8 weight directly: no float32 copy of the matrix is ever written."""
    layer = Int8Linear(Linear(64, 32))
    x = Tensor(np.random.default_rng(7).standard_normal((4, 64)).astype(np.float32)).realize()
    kernels: list[list[tuple[int, str]]] = []
    realize.observers.append(lambda name, ast, program, buffers: kernels.append(
        [(b.size, b.dtype.name) for b in buffers]) if ast is not None else None)
    try:
        y = layer(x).numpy()
    finally:
        realize.observers.pop()
    assert len(kernels) == 1 and (2048, "int8") in kernels[0] and kernels[0][0] == (128, "float32")
    w = layer.weight_int8.numpy().astype(np.float64) * layer.scale.numpy()[:, None]
    np.testing.assert_allclose(y, x.numpy() @ w.T + layer.bias.numpy(), rtol=1e-5, atol=1e-5)


def test_int8_gpt_logits_stay_close_and_round_trip(tmp_path: object) -> None:
    model = _model()
    quantized = quantize_int8(model)
    tokens = Tensor(_tokens(8, (2, 24)))
    full, small = model(tokens).numpy(), quantized(tokens).numpy()
    assert np.abs(small - full).max() <= 0.02 * np.abs(full).max()  # ~0.4% per weight, a few % at most
    assert abs(quantized.loss(tokens).item() - model.loss(tokens).item()) < 0.01
    state = get_state_dict(quantized)
    assert state["tok_emb.weight_int8"].dtype == dtypes.int8 and "blocks.0.attn.qkv.weight_int8" in state
    safe_save(state, tmp_path / "int8.safetensors")
    loaded = quantize_int8(_model(seed=3))
    load_state_dict(loaded, safe_load(tmp_path / "int8.safetensors"))
    np.testing.assert_array_equal(loaded(tokens).numpy(), small)
    assert quantized.generate([1, 2], 6) == quantized.generate([1, 2], 6, cache=False)


# ---- training and the baseline ----
def test_train_gpt_learns_a_pattern_far_below_the_bigram_baseline() -> None:
    data = np.tile(np.array([0, 1, 2, 0, 3, 4, 0, 5]), 60)  # after a 0 the next token needs more context
    model = _model(vocab_size=6, block_size=16, n_layers=1)
    losses = train_gpt(model, data[:400], steps=40, batch=8, lr=1e-2, seed=0)
    assert len(losses) == 40 and losses[0] > 1.5 and max(losses[-5:]) < 0.3
    assert bigram_loss(data[:400], data[400:], 6) > 0.3


def test_train_gpt_with_schedule_clipping_and_evaluation() -> None:
    """The chapter's recipe: warmup + cosine, clipping, a validation callback at the promised steps."""
    pattern = np.tile(np.array([0, 1, 2, 3, 4, 5, 4, 3, 2, 1], dtype=np.int32), 60)
    Tensor.manual_seed(0)
    model = GPT(6, 16, dim=32, n_heads=2, n_layers=1)
    seen = []
    losses = train_gpt(model, pattern, steps=30, batch=8, lr=1e-2, warmup_steps=3, min_lr=1e-3, clip=1.0,
                       evaluate=seen.append, eval_every=10)
    assert seen == [0, 10, 20, 30] and len(losses) == 30 and losses[-1] < 0.5 * losses[0]
    with pytest.raises(ValueError, match="eval_every must be an int >= 1"):
        train_gpt(model, pattern, steps=2, batch=2, lr=1e-3, eval_every=0)


def test_bigram_smoothing_and_interpolation_by_hand() -> None:
    train, val = np.array([0, 1, 0, 2, 1]), np.array([1, 0, 2, 2])
    k, w, vocab = 0.1, 0.2, 3
    counts = np.full((3, 3), k)
    for a, b in zip(train[:-1], train[1:], strict=True):
        counts[a, b] += 1
    unigram = (np.bincount(train, minlength=3) + 1) / (len(train) + vocab)
    want = -np.mean([math.log((1 - w) * counts[a, b] / counts[a].sum() + w * unigram[b])
                     for a, b in zip(val[:-1], val[1:], strict=True)])
    assert bigram_loss(train, val, vocab, k, w) == pytest.approx(want, rel=1e-12)
    best = best_bigram_loss(train, val, vocab, ks=(1.0, 0.1), weights=(0.0, 0.2))
    assert best == min((bigram_loss(train, val, vocab, a, b), a, b) for a in (1.0, 0.1) for b in (0.0, 0.2))
    with pytest.raises(ValueError, match="k must be > 0"):
        bigram_loss(train, val, vocab, 0.0)


def test_bigram_loss_matches_counting_by_hand() -> None:
    train, val = [0, 1, 0, 1, 1, 2], [1, 0, 2]
    # counts of pairs: (0,1): 2, (1,0): 1, (1,1): 1, (1,2): 1; add one to each of 3 x 3 cells
    p_1_0 = (1 + 1) / (3 + 3)  # after 1: three pairs seen
    p_0_2 = (0 + 1) / (2 + 3)  # after 0: two pairs seen, none to 2
    assert bigram_loss(train, val, 3) == pytest.approx(-(math.log(p_1_0) + math.log(p_0_2)) / 2, rel=1e-12)


# ---- errors ----
@pytest.mark.parametrize("config,message", [
    ({"positions": "sinusoid"}, "positions must be one of"), ({"window": 0}, "window must be"),
    ({"dim": 15}, "must split into"), ({"dim": 6, "n_heads": 2}, "even size"), ({"n_layers": 0}, "n_layers")])
def test_bad_configurations_say_what_is_valid(config: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        _model(**config)


def test_bad_generation_arguments_say_what_is_valid() -> None:
    model = _model()
    for kwargs, message in (({"prompt_ids": [1, 99]}, "in 0..22"), ({"prompt_ids": []}, "non-empty"),
                            ({"new_tokens": 30}, "do not fit in block_size 24"),
                            ({"temperature": -1.0}, "temperature"),
                            ({"temperature": 1.0, "top_k": 0}, "top_k")):
        with pytest.raises(ValueError, match=message):
            model.generate(**({"prompt_ids": [1], "new_tokens": 2} | kwargs))
    with pytest.raises(ValueError, match="do not fit"):
        model(Tensor(_tokens(0, (1, 25))))
    with pytest.raises(ValueError, match="k .* must be an int >= 1"):
        speculative_generate(model, model, [1], 3, k=0)
    with pytest.raises(ValueError, match="share the target's vocabulary"):
        speculative_generate(model, _model(vocab_size=5), [1], 3)


# ---- generate() keeps its cache and TinyJit from call to call ----
def _fresh_generate(model: GPT, prompt: list[int], new_tokens: int, **kwargs: object) -> list[int]:
    """What generate() gives with nothing kept from earlier calls (a new model with the same weights)."""
    twin = type(model)(**model.config)
    load_state_dict(twin, get_state_dict(model))
    return twin.generate(prompt, new_tokens, **kwargs)


def test_generate_reuses_its_recorded_steps_and_gives_the_tokens_of_a_fresh_model() -> None:
    model = _model()
    calls = [([3, 1, 4], 9), ([3, 1, 4], 9), ([2, 7, 1, 8, 2, 8], 5), ([5], 14), ([3, 1, 4], 4), ([9, 9], 0)]
    for cache in (True, False):
        for prompt, new_tokens in calls:  # longer, then shorter: rows past the prompt are stale
            expected = _fresh_generate(model, prompt, new_tokens, cache=cache)
            assert model.generate(prompt, new_tokens, cache=cache) == expected
    sampled = model.generate([1, 2], 10, temperature=0.8, seed=3)
    assert sampled == _fresh_generate(model, [1, 2], 10, temperature=0.8, seed=3)
    kept, recompute = model.decoding_state()
    assert kept.steps[1].calls >= 9 + 9 + 5 and recompute.calls > 9  # one cache, one TinyJit, replaying
    assert not any(name.startswith("_") for name in get_state_dict(model))  # not part of the model's state


def test_generate_after_the_weights_change_uses_the_new_weights() -> None:
    model, other = _model(), _model(seed=1)
    prompt = [4, 2, 0]
    before = model.generate(prompt, 12)
    load_state_dict(model, get_state_dict(other))  # in place: the replayed kernels read the new values
    assert model.generate(prompt, 12) == other.generate(prompt, 12) != before
    assert model.generate(prompt, 12, cache=False) == other.generate(prompt, 12, cache=False)
    kept = model.decoding_state()[0]
    model.ln_f.weight = Tensor(get_state_dict(model)["ln_f.weight"].numpy() * 3)  # a new tensor: a new state
    assert model.decoding_state()[0] is not kept
    assert model.generate(prompt, 12) == _fresh_generate(model, prompt, 12)


def test_kept_decoding_state_follows_in_place_writes_batches_and_lengths() -> None:
    model = _model(n_layers=1)
    prompt = [6, 0, 2, 2]
    for new_tokens in (3, 11, 1, 7):  # other lengths: the same kept cache, the same recorded step
        assert model.generate(prompt, new_tokens) == _fresh_generate(model, prompt, new_tokens)
    kept = model.decoding_state()[0]
    for batch in (1, 3):  # a forward at another batch size between calls: its own kernels, state untouched
        model(Tensor(_tokens(batch, (batch, 9))))
        assert model.generate(prompt, 9) == _fresh_generate(model, prompt, 9)
    weight = model.blocks[0].mlp.fc.weight  # one weight written in place after a generate()
    weight.assign(weight * -1.5).realize()
    assert model.decoding_state()[0] is kept  # the same memory: the recorded steps read the new values
    assert model.generate(prompt, 9) == _fresh_generate(model, prompt, 9)
    assert model.generate(prompt, 9, cache=False) == _fresh_generate(model, prompt, 9, cache=False)


def test_speculative_decoding_replays_the_kept_steps() -> None:
    target, draft = _model(seed=0), _model(seed=1, dim=8, n_layers=1)
    prompt = [5, 9, 2]
    results = [speculative_generate(target, draft, prompt, 12, k=3)[0] for _ in range(3)]
    assert results[0] == results[1] == results[2] == target.generate(prompt, 12)
    assert target.decoding_state()[0].steps[4].calls >= 3 and draft.decoding_state()[0].steps[1].calls >= 3


# ---- the PyTorch port that bench/bench_decode.py and bench/bench_training.py time ----
def test_the_benchs_pytorch_port_gives_tinyedus_greedy_tokens_and_loss() -> None:
    torch = pytest.importorskip("torch")
    spec = importlib.util.spec_from_file_location(
        "torch_gpt", pathlib.Path(__file__).resolve().parents[1] / "bench" / "torch_gpt.py")
    port_module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(port_module)
    model = _model(n_layers=3, dim=24, n_heads=3)
    rng = np.random.default_rng(5)  # spread-out weights, as the bench's: clear greedy choices (no near-ties)
    scale = {name: 0.3 if name == "tok_emb.weight" else 1 / math.sqrt(t.shape[-1])
             for name, t in get_state_dict(model).items() if "rope" not in name}
    load_state_dict(model, {name: (rng.standard_normal(t.shape) * scale[name]).astype(np.float32)
                            for name, t in get_state_dict(model).items() if name in scale}, strict=False)
    port = port_module.TorchGPT(torch, {k: v.numpy() for k, v in get_state_dict(model).items()}, model.config)
    prompt = [3, 14, 15, 9, 2]
    for cache in (True, False):
        ours = model.generate(prompt, 16, cache=cache)
        assert port.generate(prompt, 16, cache=cache) == ours
    tokens = _tokens(7, (20,))  # every position's logits, on varied tokens, with and without the port's cache
    expected = model(Tensor(tokens.reshape(1, -1))).numpy()[0]
    with torch.inference_mode():
        kv = [(torch.zeros(3, 24, 8), torch.zeros(3, 24, 8)) for _ in range(3)]
        split = [port.forward(torch.tensor(tokens[:12]).long(), 0, kv),
                 *(port.forward(torch.tensor(tokens[i:i + 1]).long(), i, kv) for i in range(12, 20))]
        whole = port.forward(torch.tensor(tokens).long(), 0, None)
    np.testing.assert_allclose(whole.numpy(), expected, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(torch.cat(split).numpy(), expected, rtol=1e-4, atol=1e-4)
    # the loss bench/bench_training.py trains with: a batch of windows, and its gradient of the head
    windows = _tokens(8, (4, 21))
    model.tok_emb.weight.grad = None
    ours = model.loss(Tensor(windows)).backward()
    params = dict(zip([k for k in port.w if "rope" not in k], port.parameters(), strict=True))
    theirs = port.loss(torch.tensor(windows))
    theirs.backward()
    np.testing.assert_allclose(theirs.item(), ours.item(), rtol=1e-5)
    np.testing.assert_allclose(params["tok_emb.weight"].grad.numpy(), model.tok_emb.weight.grad.numpy(),
                               rtol=1e-3, atol=1e-5)
