"""Chapter 09 (notebook 09: a Transformer): the exercises and their checkers.

Implement-this: `09.causal_mask` (plugged in as `tinyedu.models.transformer.causal_mask`, which
CausalSelfAttention calls) and `09.layer_norm` (plugged in as `LayerNorm.__call__`, which every
block's two LayerNorms call). Prediction: `09.parameter_count`.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable

import numpy as np

from tinyedu.core.ops import LoadOps
from tinyedu.exercises.checking import is_count, need_function
from tinyedu.exercises.hooks import plug
from tinyedu.exercises.registry import exercise
from tinyedu.models import transformer
from tinyedu.models.tasks import ADDITION_VOCAB, Addition
from tinyedu.nn import LayerNorm
from tinyedu.nn.optim import SGD
from tinyedu.nn.state import get_parameters
from tinyedu.tensor import Tensor


def _small_model(seed: int) -> transformer.Transformer:
    Tensor.manual_seed(seed)
    return transformer.Transformer(ADDITION_VOCAB, 11, dim=16, n_heads=2, n_layers=2)


def _copied_from_host(t: Tensor, size: int) -> bool:
    """Does the tensor's lazy graph copy a whole array of `size` elements from the host?"""
    stack, seen = [t.lazydata], set()
    while stack:
        base = stack.pop().base
        if id(base) in seen:
            continue
        seen.add(id(base))
        if base.op is LoadOps.COPY and base.size == size:
            return True
        stack.extend(base.srcs)
    return False


# -- exercise: the causal mask ---------------------------------------------------------------------
@exercise("09.causal_mask", answer="causal_mask", title="The causal mask, from arange and a comparison",
          hook="tinyedu.models.transformer.causal_mask")
def check_causal_mask(causal_mask: Callable[..., Tensor]) -> str:
    need_function(causal_mask, "causal_mask", "causal_mask(length) returning a Tensor")
    for length in (1, 4, 7):
        mask = causal_mask(length)
        if not isinstance(mask, Tensor):
            raise AssertionError(f"causal_mask({length}) returned {type(mask).__name__}; return a Tensor "
                                 "(build it from Tensor.arange and a comparison, so the kernels compute it)")
        if mask.shape != (length, length):
            raise AssertionError(f"causal_mask({length}) has shape {mask.shape}; it must be ({length}, "
                                 f"{length}): one row per query position, one column per key position")
        if length > 1 and _copied_from_host(mask, length * length):
            raise AssertionError(f"causal_mask({length}) copies a finished ({length}, {length}) mask from "
                                 "the host (numpy's tril, or a Python list): build it on the device instead, "
                                 "from Tensor.arange(length) as a column and as a row and one comparison, so "
                                 "the kernels compute it")
        if mask.dtype.name != "bool":
            raise AssertionError(f"causal_mask({length}) holds {mask.dtype.name} values; it must be bool "
                                 "(a comparison such as `a <= b` gives bools), so that "
                                 "`mask.where(scores, -inf)` picks the score where it is True")
        got, want = mask.numpy(), np.tril(np.ones((length, length), dtype=bool))
        if np.array_equal(got, want):
            continue
        if np.array_equal(got, want.T):
            hint = ("it is True above the diagonal: query i would look at the keys after it, the future. "
                    "Row i (the query) must be True for the columns j <= i")
        elif np.array_equal(got, np.tril(want, -1)):
            hint = ("the diagonal is False: a position may look at itself (j <= i, not j < i). Without it "
                    "the first position sees nothing at all and its softmax is 0/0 = NaN")
        elif got.all():
            hint = "every entry is True: that is no mask at all"
        else:
            hint = "row i must be True exactly in columns 0..i"
        raise AssertionError(f"causal_mask({length}) is\n{got.astype(int)}\nHint: {hint}.")
    # plugged into the Transformer: earlier predictions never depend on later tokens
    tokens = Addition(3).train_batch(3, np.random.default_rng(0))[:, :-1].astype(np.int32)
    changed = tokens.copy()
    changed[:, 6:] = (changed[:, 6:] + 5) % ADDITION_VOCAB
    model = _small_model(0)
    expected = model(Tensor(tokens)).numpy()
    with plug(transformer, "causal_mask", causal_mask) as plugged:
        logits = model(Tensor(tokens)).numpy()
        logits_changed = model(Tensor(changed)).numpy()
    plugged.require_called("causal_mask")
    if not np.allclose(logits, expected, atol=1e-5):
        raise AssertionError("with your mask plugged in, the Transformer's outputs differ from the "
                             "library's; check causal_mask(11) (the length the model uses)")
    if not np.array_equal(logits[:, :6], logits_changed[:, :6]):
        raise AssertionError("changing tokens 6..10 changed the predictions at positions 0..5: the mask lets "
                             "positions see the future")
    return ("the lower triangle, bools; plugged into a Transformer, no position sees a later token and the "
            "outputs are the library's.")


# -- exercise: LayerNorm ---------------------------------------------------------------------------
def _layer(width: int, seed: int) -> LayerNorm:
    rng = np.random.default_rng(seed)
    layer = LayerNorm(width)
    layer.weight.assign(Tensor(rng.uniform(0.5, 2, width).astype(np.float32)))
    layer.bias.assign(Tensor(rng.uniform(-1, 1, width).astype(np.float32)))
    return layer


def _reference(layer: LayerNorm, x: np.ndarray, ddof: int = 0, eps_outside: bool = False) -> np.ndarray:
    x64 = x.astype(np.float64)
    centered = x64 - x64.mean(-1, keepdims=True)
    var = x64.var(-1, ddof=ddof, keepdims=True)
    scale = 1 / (np.sqrt(var) + layer.eps) if eps_outside else 1 / np.sqrt(var + layer.eps)
    return centered * scale * layer.weight.numpy() + layer.bias.numpy()


def _layer_norm_hint(layer: LayerNorm, x: np.ndarray, got: np.ndarray) -> str:
    def normalized(axis: int | None) -> np.ndarray:
        centered = x - x.mean(axis, keepdims=True)
        scaled = centered / np.sqrt(x.var(axis, keepdims=True) + layer.eps)
        return scaled * layer.weight.numpy() + layer.bias.numpy()

    candidates = [
        (_reference(layer, x, ddof=1),
         "that is the unbiased variance (divided by n - 1, as .var() and .std() do by default); LayerNorm "
         "divides by n: ((x - mean) ** 2).mean(-1, keepdim=True)"),
        (_reference(layer, x, eps_outside=True),
         "eps belongs inside the square root: (x - mean) / sqrt(var + eps)"),
        ((_reference(layer, x) - layer.bias.numpy()) / layer.weight.numpy(),
         "the normalized values are right; now multiply by self.weight and add self.bias"),
        (normalized(None), "normalize each position on its own: mean and variance of axis -1 only, not all"),
        (normalized(0), "normalize each position over its own features: statistics of axis -1, not axis 0"),
    ]
    for want, hint in candidates:
        if got.shape == want.shape and np.allclose(got, want, rtol=1e-4, atol=1e-4):
            return hint
    return ("LayerNorm: subtract the mean over the last axis, divide by sqrt(biased variance + eps), then "
            "* weight + bias (take the mean and variance with keepdim=True so they broadcast)")


@exercise("09.layer_norm", answer="layer_norm", title="LayerNorm from the primitives",
          hook="LayerNorm.__call__")
def check_layer_norm(layer_norm: Callable[[LayerNorm, Tensor], Tensor]) -> str:
    need_function(layer_norm, "layer_norm", "layer_norm(self, x) returning a Tensor")
    rng = np.random.default_rng(0)
    layer = _layer(6, 1)
    cases = {"values around 5 with spread 10": rng.normal(5, 10, (3, 4, 6)).astype(np.float32),
             "rows that barely vary (variance 1e-6, where eps matters)":
                 (1e-3 * rng.standard_normal((2, 6))).astype(np.float32)}
    for what, x in cases.items():
        out = layer_norm(layer, Tensor(x))
        if not isinstance(out, Tensor):
            raise AssertionError(f"layer_norm returned {type(out).__name__}; return a Tensor built from x")
        if out.shape != x.shape:
            raise AssertionError(f"layer_norm: input of shape {x.shape} gave shape {out.shape}; the output "
                                 "has the input's shape (use keepdim=True in the mean and the variance)")
        got = out.numpy()
        if not np.allclose(got, _reference(layer, x), rtol=1e-4, atol=1e-4):
            raise AssertionError(f"layer_norm on {what} differs from LayerNorm. Hint: "
                                 f"{_layer_norm_hint(layer, x, got)}.")
    # plugged in: three SGD steps of a Transformer give the library's losses and weights
    task, losses = Addition(3), {}
    for plugged_in in (False, True):
        model = _small_model(1)
        opt = SGD(get_parameters(model), lr=0.3)
        batches = np.random.default_rng(2)
        losses[plugged_in] = []
        with plug(LayerNorm, "__call__", layer_norm) if plugged_in else contextlib.nullcontext() as plugged:
            for _ in range(3):
                tokens = task.train_batch(16, batches)
                y = tokens[:, 1:].copy()
                y[:, :task.prompt_length - 1] = -100
                opt.zero_grad()
                logits = model(Tensor(tokens[:, :-1].astype(np.int32))).reshape(-1, ADDITION_VOCAB)
                loss = logits.cross_entropy(Tensor(y.reshape(-1).astype(np.int32))).backward()
                opt.step()
                losses[plugged_in].append(loss.item())
        if plugged_in:
            plugged.require_called("layer_norm")
    if not np.allclose(losses[True], losses[False], rtol=1e-4):
        raise AssertionError(f"training with your layer_norm gave the losses {np.round(losses[True], 5)}, "
                             f"the library {np.round(losses[False], 5)}: check the gradient path (build the "
                             "output only from Tensor ops on x, self.weight and self.bias)")
    return "matches LayerNorm (also where eps matters); three training steps of a Transformer with it agree."


# -- exercise: predict the parameter count -----------------------------------------------------------
@exercise("09.parameter_count", answer="parameter_count", title="How many parameters has the Transformer?")
def check_parameter_count(parameter_count: Any) -> str:
    Tensor.manual_seed(0)
    model = transformer.Transformer(12, 11, dim=48, n_heads=4, n_layers=2)
    want = sum(t.numel() for t in get_parameters(model))
    if not is_count(parameter_count):
        raise AssertionError(f"parameter_count: expected a whole number, got {parameter_count!r}")
    if parameter_count == want:
        return f"{want}: the number of heads does not change it (they split the same 48 numbers)."
    norms = 5 * 2 * 48                                # two LayerNorms per block and the last one
    biases = 2 * (144 + 48 + 192 + 48) + 12           # every Linear's bias
    if parameter_count == want - norms:
        hint = "you left out the LayerNorms: each has a weight and a bias of 48"
    elif parameter_count == want - biases:
        hint = "every Linear has a bias as well as a weight"
    elif parameter_count == want - 11 * 48:
        hint = "the position embedding is a table too: 11 positions × 48"
    elif parameter_count > want:
        hint = "too many: the heads do not add weights (4 heads of 12 share the qkv Linear of 48 -> 144)"
    else:
        hint = ("count per block: two LayerNorms (2 × 96), qkv 48→144 and proj 48→48, the MLP 48→192→48, "
                "each Linear with a bias; then the two embeddings (12 and 11 rows of 48), the last LayerNorm "
                "and the head 48→12")
    raise AssertionError(f"parameter_count: {parameter_count} is not it. Hint: {hint}.")
