"""A decoder-only Transformer (the GPT shape), built from tinyedu.nn layers and Tensor ops.

    tokens (B, T) ──▶ token embedding + position embedding ──▶ n_layers × Block ──▶ LayerNorm ──▶ Linear
                                                                                  logits (B, T, vocab)
    Block:  x = x + attention(LayerNorm(x))       every position looks back at the ones before it
            x = x + mlp(LayerNorm(x))             then each position thinks on its own

Attention is written here from the primitives (matmul, a comparison for the causal mask, where,
softmax), because seeing it built is the point of chapter 09. It computes the same thing as
PyTorch's `F.scaled_dot_product_attention(q, k, v, is_causal=True)`, which the tests check.

Names follow a small GPT: `tok_emb`, `pos_emb`, `blocks.0.attn.qkv`, ..., `head`, so a PyTorch model
with the same attributes loads the state dict unchanged (the tests do exactly that).
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from tinyedu.core.dtype import dtypes
from tinyedu.nn import Embedding, LayerNorm, Linear
from tinyedu.tensor import Tensor
from tinyedu.tensor_api.grad_mode import no_grad


# --8<-- [start:attention]
def causal_mask(length: int, device: str | None = None) -> Tensor:
    """(length, length) bools, True where query i may look at key j, that is j <= i (the past and itself)."""
    query = Tensor.arange(length, device=device).reshape(length, 1)
    key = Tensor.arange(length, device=device).reshape(1, length)
    return key <= query


def attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """softmax(q @ kᵀ / √d, where mask allows) @ v, and the attention weights (the softmax).

    q, k, v: (..., T, d). Row i of the weights says how much query i takes from each value; a masked
    score becomes -inf, so exp() makes its weight exactly 0.
    """
    scores = q @ k.transpose(-2, -1) * (1 / math.sqrt(q.shape[-1]))  # (..., T, T): every query · every key
    if mask is not None:
        scores = mask.where(scores, -math.inf)
    weights = scores.softmax(-1)
    return weights @ v, weights
# --8<-- [end:attention]


# --8<-- [start:self-attention]
class CausalSelfAttention:
    """Multi-head self-attention: n_heads attentions of size dim / n_heads side by side, each free to
    look for something else, their outputs concatenated and mixed by a final Linear."""

    def __init__(self, dim: int, n_heads: int):
        if dim % n_heads:
            raise ValueError(f"CausalSelfAttention: dim ({dim}) must be divisible by n_heads ({n_heads})")
        self.n_heads = n_heads
        self.qkv = Linear(dim, 3 * dim)  # queries, keys and values of every head, in one matmul
        self.proj = Linear(dim, dim)

    def __call__(self, x: Tensor) -> Tensor:
        return self.forward(x)[0]

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """The output (B, T, dim) and the attention weights (B, n_heads, T, T)."""
        batch, length, dim = x.shape
        # (B, T, 3·dim) -> (3, B, heads, T, head_dim): q, k and v, each split into heads
        heads = self.qkv(x).reshape(batch, length, 3, self.n_heads, dim // self.n_heads)
        q, k, v = heads.permute(2, 0, 3, 1, 4)
        out, weights = attention(q, k, v, causal_mask(length, x.device))
        out = out.permute(0, 2, 1, 3).reshape(batch, length, dim)  # the heads side by side again
        return self.proj(out), weights
# --8<-- [end:self-attention]


class MLP:
    """Position-wise feed-forward: dim -> 4·dim -> dim with GELU (the tanh form, as GPT-2)."""

    def __init__(self, dim: int):
        self.fc = Linear(dim, 4 * dim)
        self.proj = Linear(4 * dim, dim)

    def __call__(self, x: Tensor) -> Tensor:
        return self.proj(self.fc(x).gelu(approximate="tanh"))


# --8<-- [start:block]
class Block:
    """Pre-norm residual block: x + attn(ln1(x)), then + mlp(ln2(x)). The residual path x is never
    normalized, so gradients reach the first layers undiminished."""

    def __init__(self, dim: int, n_heads: int):
        self.ln1, self.attn = LayerNorm(dim), CausalSelfAttention(dim, n_heads)
        self.ln2, self.mlp = LayerNorm(dim), MLP(dim)

    def __call__(self, x: Tensor) -> Tensor:
        return self.forward(x)[0]

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:
        attended, weights = self.attn.forward(self.ln1(x))
        x = x + attended
        return x + self.mlp(self.ln2(x)), weights
# --8<-- [end:block]


# --8<-- [start:transformer]
class Transformer:
    """A decoder-only Transformer over `vocab_size` tokens and at most `block_size` positions."""

    def __init__(self, vocab_size: int, block_size: int, dim: int = 64, n_heads: int = 4, n_layers: int = 2):
        for name, value in (("vocab_size", vocab_size), ("block_size", block_size), ("dim", dim),
                            ("n_heads", n_heads), ("n_layers", n_layers)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"Transformer: {name} must be a positive int, got {value!r}")
        self.vocab_size, self.block_size = vocab_size, block_size
        self.tok_emb = Embedding(vocab_size, dim)  # what each token is
        self.pos_emb = Embedding(block_size, dim)  # where it is: attention alone cannot tell order
        self.blocks = [Block(dim, n_heads) for _ in range(n_layers)]
        self.ln_f = LayerNorm(dim)
        self.head = Linear(dim, vocab_size)

    def __call__(self, tokens: Tensor) -> Tensor:
        """Logits (B, T, vocab_size) for integer tokens (B, T): position t predicts token t + 1."""
        return self.forward(tokens)[0]

    def forward(self, tokens: Tensor) -> tuple[Tensor, list[Tensor]]:
        """The logits, and every layer's attention weights (B, n_heads, T, T) for drawing."""
        self._check_tokens(tokens)
        length = tokens.shape[1]
        x = self.tok_emb(tokens) + self.pos_emb(Tensor.arange(length, device=tokens.device))
        maps = []
        for block in self.blocks:
            x, weights = block.forward(x)
            maps.append(weights)
        return self.head(self.ln_f(x)), maps
# --8<-- [end:transformer]

    def _check_tokens(self, tokens: Tensor) -> None:
        check_tokens("Transformer", tokens, self.block_size)

    # --8<-- [start:generate]
    def generate(self, prompts: Sequence[Sequence[int]] | np.ndarray, new_tokens: int,
                 temperature: float = 1.0, rng: np.random.Generator | None = None) -> np.ndarray:
        """Continue each prompt (all of one length) by `new_tokens` tokens, one at a time.

        Each new token is drawn from softmax(logits / temperature) of the last position: a low
        temperature sharpens the distribution towards the likeliest token, a high one flattens it;
        temperature=0 always takes the likeliest (greedy decoding, deterministic).

        Every forward pass runs on a window of exactly block_size tokens, so its kernels are compiled
        once: a short sequence is padded at the end (the causal mask keeps those padding tokens out
        of every earlier position), a long one keeps only its last block_size tokens.
        """
        if not isinstance(temperature, (int, float)) or temperature < 0 or math.isnan(temperature):
            raise ValueError(f"generate: temperature must be a number >= 0, got {temperature!r}")
        sequences = np.array(prompts, dtype=np.int64)
        if sequences.ndim != 2 or sequences.shape[1] == 0:
            raise ValueError(f"generate: prompts must be a (batch, length) array of tokens with length >= 1, "
                             f"got shape {sequences.shape}")
        if sequences.min() < 0 or sequences.max() >= self.vocab_size:
            raise ValueError(f"generate: prompt tokens must be in 0..{self.vocab_size - 1}")
        rng = rng if rng is not None else np.random.default_rng(0)
        window = np.zeros((len(sequences), self.block_size), dtype=np.int32)
        for _ in range(new_tokens):
            length = min(sequences.shape[1], self.block_size)
            window[:, :length] = sequences[:, -length:]
            with no_grad():
                logits = self(Tensor(window))[:, length - 1].numpy().astype(np.float64)
            if temperature == 0:
                chosen = logits.argmax(-1)
            else:
                scaled = logits / temperature
                probs = np.exp(scaled - scaled.max(-1, keepdims=True))
                probs /= probs.sum(-1, keepdims=True)
                chosen = np.array([rng.choice(self.vocab_size, p=p) for p in probs])
            sequences = np.concatenate([sequences, chosen[:, None]], axis=1)
        return sequences
    # --8<-- [end:generate]


def check_tokens(model: str, tokens: Tensor, block_size: int) -> None:
    """Integer tokens of shape (batch, length) with 1 <= length <= block_size, else a clear error."""
    if not isinstance(tokens, Tensor) or tokens.ndim != 2 or tokens.dtype.is_float:
        what = (f"shape {tokens.shape}, {tokens.dtype.name}" if isinstance(tokens, Tensor)
                else type(tokens).__name__)
        raise ValueError(f"{model}: expected integer tokens of shape (batch, length), got {what}")
    if not 1 <= tokens.shape[1] <= block_size:
        raise ValueError(f"{model}: sequences of length {tokens.shape[1]} do not fit; the model has "
                         f"positions for 1..{block_size} tokens (block_size)")


def token_tensor(tokens: np.ndarray) -> Tensor:
    """Integer tokens as the int32 Tensor the model reads."""
    return Tensor(np.asarray(tokens, dtype=np.int32), dtype=dtypes.int32)


__all__ = ["causal_mask", "attention", "CausalSelfAttention", "MLP", "Block", "Transformer", "token_tensor"]
