"""A GPT for text: chapter 09's Transformer with rotary positions, a sliding window and a KV cache.

    tokens (B, T) ──▶ token embedding (+ learned positions) ──▶ n_layers × GPTBlock ──▶ LayerNorm
                  ──▶ logits = x @ tok_emb.weightᵀ   (the head is tied to the token embedding)

What is new next to chapter 09 (tinyedu/models/transformer.py, whose `attention` and `MLP` it uses):

- positions="rope" rotates each query and key by an angle that grows with its position (rotary
  embeddings, Su et al. 2021), so a score q·k depends only on how far apart the two tokens are;
  positions="learned" adds a learned vector per position, as chapter 09 does.
- window=w lets each token see only the last w tokens (itself included): a sliding-window mask.
- a KV cache: generating one more token only needs the new token's query, key and value; the keys
  and values of the tokens before it do not change, so each layer keeps them (`KVCache`) and a
  decoding step runs the model on the new positions alone (`forward_cached`).

The head reuses the token embedding's matrix (weight tying, as GPT-2): the same vector says what a
token means on the way in and how likely it is on the way out, and the model has vocab × dim fewer
weights. Token and position embeddings start at N(0, 0.02²) so the first logits are near 0 (loss
≈ ln vocab_size).
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from tinyedu.jit import TinyJit
from tinyedu.models.generate import generate_tokens
from tinyedu.models.transformer import MLP, attention, check_tokens
from tinyedu.nn import Embedding, LayerNorm, Linear
from tinyedu.nn.optim import AdamW, WarmupCosine, clip_grad_norm
from tinyedu.nn.state import get_parameters, get_state_dict
from tinyedu.tensor import Tensor
from tinyedu.tensor_api.grad_mode import no_grad

POSITIONS = ("rope", "learned")


# --8<-- [start:rope]
def rope_tables(length: int, head_dim: int, base: float = 10000.0) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin of the rotation angles, (length, head_dim / 2), in float64.

    Pair i of a head's vector turns by position · base^(-2i / head_dim): the first pairs turn fast
    (they tell neighbours apart), the last ones slowly (they still differ thousands of tokens apart).
    """
    frequencies = base ** (-np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    angles = np.arange(length, dtype=np.float64)[:, None] * frequencies[None, :]
    return np.cos(angles), np.sin(angles)


def apply_rope(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotate pairs (x[i], x[i + d/2]) of x (..., T, d) by the angles whose cos and sin are (T, d/2).

    A rotation keeps lengths, and rotating q by angle a·m and k by a·n leaves q·k depending on m - n
    only: attention sees relative positions without any position vector in the residual stream.
    """
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return (x1 * cos - x2 * sin).cat(x2 * cos + x1 * sin, dim=-1)
# --8<-- [end:rope]


# --8<-- [start:mask]
def attention_mask(query_positions: Tensor, key_length: int, window: int | None) -> Tensor:
    """(T, key_length) bools: query at position p sees key j when j <= p (causal) and, with a window,
    p - window < j (only the last `window` tokens, itself included)."""
    query = query_positions.reshape(-1, 1)
    key = Tensor.arange(key_length, device=query_positions.device).reshape(1, key_length)
    allowed = key <= query
    if window is not None:
        allowed = allowed & (key > query - window)
    return allowed
# --8<-- [end:mask]


def table_rows(table: Tensor, positions: Tensor) -> Tensor:
    """The rows (T, d) of `table` (n, d) at `positions` (T,), as a one-hot sum: table[positions] without
    indexing's range check, which would add kernels to every decoding step. The positions are the
    model's own (0..block_size - 1: arange, or forward_cached's, checked on the host). Exact: each sum
    adds one row's value to zeros (and the rotation tables hold no -0.0)."""
    one_hot = positions.reshape(-1, 1) == Tensor.arange(table.shape[0], device=table.device)   # (T, n)
    return one_hot.unsqueeze(-1).where(table.unsqueeze(0), 0.0).sum(1)


class KVCache:
    """The keys and values one layer has computed so far: (1, n_heads, block_size, head_dim) each,
    allocated once and written in place with `assign`; rows past the current position hold stale
    values that the mask hides until they are overwritten."""

    def __init__(self, n_heads: int, block_size: int, head_dim: int, device: str | None = None):
        shape = (1, n_heads, block_size, head_dim)
        self.k = Tensor.zeros(shape, device=device).contiguous().realize()
        self.v = Tensor.zeros(shape, device=device).contiguous().realize()


class DecodeCache:
    """One sequence's KVCache of every layer, and the TinyJit-recorded steps that fill them (one per
    number of new tokens). It lives as long as the sequence does."""

    def __init__(self, layers: list[KVCache]):
        self.layers = layers
        self.steps: dict[int, TinyJit] = {}


class KeptDecoding:
    """What GPT.decoding_state keeps between generate() calls. It has __slots__ and no __dict__, so
    get_state_dict does not walk into it: the cache is not part of the model's state."""

    __slots__ = ("key", "memory", "cache", "recompute")

    def __init__(self, key: tuple[int, ...], memory: list, cache: DecodeCache, recompute: TinyJit):
        # memory: the model's buffers when it was made, kept alive so that their ids stay unique
        self.key, self.memory, self.cache, self.recompute = key, memory, cache, recompute


# --8<-- [start:cache-update]
def write_rows(cache: Tensor, rows: Tensor, positions: Tensor) -> Tensor:
    """`cache` (1, H, S, d) with rows (1, H, T, d) written at `positions` (T,): a new lazy tensor.

    The positions are a tensor in memory, not Python numbers, so the kernels are the same at every
    step (compiled once). A one-hot (T, S) matrix places row t at position positions[t]; a sum of
    one value and zeros is exact, so the cache holds the keys' very bits (but for -0.0, which the
    sum makes 0.0; no dot product can tell the two apart). One row, a decoding step, needs no sum.
    """
    slots = Tensor.arange(cache.shape[2], device=cache.device)
    one_hot = positions.reshape(-1, 1) == slots.reshape(1, -1)                      # (T, S)
    if rows.shape[2] == 1:  # one new row (every decoding step): the one-hot row is the mask, no sum needed
        return one_hot.reshape(1, 1, -1, 1).where(rows, cache)                      # one elementwise kernel
    placed = (one_hot.reshape(1, 1, *one_hot.shape, 1).where(rows.unsqueeze(3), 0.0)).sum(2)
    written = one_hot.any(0).reshape(1, 1, -1, 1)                                   # (1, 1, S, 1)
    return written.where(placed, cache)
# --8<-- [end:cache-update]


def to_memory_unless_one_row(x: Tensor) -> Tensor:
    """x (..., T, d) put in memory (`contiguous`) before the matmul that reads it, unless T is 1.

    Left to fuse, an elementwise result (a LayerNorm's output, a rotation) is recomputed in the matmul
    for every output it meets. Over many positions that costs more than storing it: the kernel is
    not vectorized and redoes T·d work per output (at dim 128 a training step's MLP matmul takes ~5x
    as long). For one position (every decoding step) the recomputation is d operations per output,
    less than launching one more kernel: fused, a decoding step runs 10 kernels fewer.
    """
    return x if x.shape[-2] == 1 else x.contiguous()


class GPTAttention:
    """Multi-head self-attention with rotary or no positions, a causal (or sliding-window) mask, and an
    optional KV cache."""

    def __init__(self, dim: int, n_heads: int, window: int | None):
        self.n_heads, self.head_dim, self.window = n_heads, dim // n_heads, window
        self.qkv = Linear(dim, 3 * dim)
        self.proj = Linear(dim, dim)

    def __call__(self, x: Tensor, positions: Tensor, rope: tuple[Tensor, Tensor] | None,
                 cache: KVCache | None = None) -> tuple[Tensor, list[tuple[Tensor, Tensor]]]:
        """The output (B, T, dim), and the (cache tensor, new value) pairs to assign when cached."""
        batch, length, dim = x.shape
        heads = self.qkv(x).reshape(batch, length, 3, self.n_heads, self.head_dim)
        q, k, v = heads.permute(2, 0, 3, 1, 4)  # each (B, heads, T, head_dim)
        if rope is not None:
            # in memory (contiguous): fused into the scores' matmul, the rotation would be recomputed
            # for every query-key pair, and the kernel would not vectorize (16 ms instead of 0.1 ms);
            # but for one query (a decoding step) fusing is cheaper. k goes to memory always: a one-row
            # k fused into the cache write would be rotated again for every slot of the cache
            q, k = to_memory_unless_one_row(apply_rope(q, *rope)), apply_rope(k, *rope).contiguous()
        writes = []
        if cache is not None:  # attend over every cached position; the mask hides the ones not yet written
            k, v = write_rows(cache.k, k, positions), write_rows(cache.v, v, positions)
            writes = [(cache.k, k), (cache.v, v)]
        mask = attention_mask(positions, k.shape[2], self.window)
        out, _ = attention(q, k, v, mask)
        out = out.permute(0, 2, 1, 3).reshape(batch, length, dim)
        return self.proj(out), writes


class GPTBlock:
    """Pre-norm residual block, as chapter 09's: x + attn(ln1(x)), then + mlp(ln2(x)).

    Each LayerNorm's output is put in memory before the matmul that reads it, unless it is one
    position (see to_memory_unless_one_row).
    """

    def __init__(self, dim: int, n_heads: int, window: int | None):
        self.ln1, self.attn = LayerNorm(dim), GPTAttention(dim, n_heads, window)
        self.ln2, self.mlp = LayerNorm(dim), MLP(dim)

    def __call__(self, x: Tensor, positions: Tensor, rope: tuple[Tensor, Tensor] | None,
                 cache: KVCache | None = None) -> tuple[Tensor, list[tuple[Tensor, Tensor]]]:
        attended, writes = self.attn(to_memory_unless_one_row(self.ln1(x)), positions, rope, cache)
        x = x + attended
        return x + self.mlp(to_memory_unless_one_row(self.ln2(x))), writes


# --8<-- [start:gpt]
class GPT:
    """A decoder-only language model over `vocab_size` tokens and at most `block_size` positions."""

    def __init__(self, vocab_size: int, block_size: int, dim: int = 128, n_heads: int = 4, n_layers: int = 4,
                 positions: str = "rope", window: int | None = None):
        _check_config(vocab_size, block_size, dim, n_heads, n_layers, positions, window)
        self.config = {"vocab_size": vocab_size, "block_size": block_size, "dim": dim, "n_heads": n_heads,
                       "n_layers": n_layers, "positions": positions, "window": window}
        self.vocab_size, self.block_size, self.n_heads = vocab_size, block_size, n_heads
        self.positions, self.window = positions, window
        self.tok_emb = Embedding(vocab_size, dim)
        self.tok_emb.weight = _small_normal(vocab_size, dim)
        if positions == "learned":
            self.pos_emb = Embedding(block_size, dim)
            self.pos_emb.weight = _small_normal(block_size, dim)
        else:  # buffers (in the state dict, not trained): cos and sin for every position
            cos, sin = rope_tables(block_size, dim // n_heads)
            self.rope_cos = Tensor(cos.astype(np.float32)).realize()
            self.rope_sin = Tensor(sin.astype(np.float32)).realize()
        self.blocks = [GPTBlock(dim, n_heads, window) for _ in range(n_layers)]
        self.ln_f = LayerNorm(dim)

    def __call__(self, tokens: Tensor) -> Tensor:
        """Logits (B, T, vocab_size) for integer tokens (B, T): position t predicts token t + 1."""
        self._check_tokens(tokens)
        positions = Tensor.arange(tokens.shape[1], device=tokens.device)
        return self._forward(tokens, positions, None)[0]

    def _forward(self, tokens: Tensor, positions: Tensor,
                 caches: list[KVCache] | None) -> tuple[Tensor, list[tuple[Tensor, Tensor]]]:
        x = self.tok_emb(tokens)
        rope = None
        if self.positions == "learned":
            x = x + self.pos_emb(positions)
        else:
            rope = (table_rows(self.rope_cos, positions), table_rows(self.rope_sin, positions))
        writes = []
        for n, block in enumerate(self.blocks):
            x, block_writes = block(x, positions, rope, caches[n] if caches is not None else None)
            writes += block_writes
        return self.head(to_memory_unless_one_row(self.ln_f(x))), writes

    def head(self, x: Tensor) -> Tensor:
        """Logits: every position's vector against every token's embedding (the tied head)."""
        return x @ self.tok_emb.weight.T

    def loss(self, tokens: Tensor) -> Tensor:
        """Mean next-token cross entropy of (B, T + 1) tokens: positions 0..T-1 predict tokens 1..T."""
        if not isinstance(tokens, Tensor) or tokens.ndim != 2 or tokens.shape[1] < 2:
            raise ValueError(f"GPT.loss: expected integer tokens of shape (batch, length >= 2), got "
                             f"{tokens.shape if isinstance(tokens, Tensor) else type(tokens).__name__}")
        logits = self(tokens[:, :-1])
        return logits.reshape(-1, self.vocab_size).cross_entropy(tokens[:, 1:].reshape(-1))
# --8<-- [end:gpt]

    # --8<-- [start:forward-cached]
    def new_cache(self) -> DecodeCache:
        """Empty keys and values for every layer, for one sequence of up to block_size tokens."""
        head_dim = self.tok_emb.weight.shape[1] // self.n_heads
        return DecodeCache([KVCache(self.n_heads, self.block_size, head_dim, self.tok_emb.weight.device)
                            for _ in self.blocks])

    def decoding_state(self) -> tuple[DecodeCache, TinyJit]:
        """The KV cache and the TinyJit of `padded_logits` that generate() uses, kept from call to call.

        Why: a TinyJit records a step on its second and third calls and replays it from then on; a
        cache and a TinyJit made anew by each generate() call would run the first steps of every
        call through the whole pipeline (build, schedule, look up), which cost more than a short
        call's replayed steps. Kept, a second call with the same prompt length replays from its
        first step, and a new prompt length records one more prefill step beside the others.

        Stale rows need no clearing: a call starts at position 0 and writes every position it reads
        (the mask hides rows past the position being computed until the call writes them). The state
        is made anew when the model's tensors are other tensors or other memory than when it was
        made (a layer replaced, a weight set to a new Tensor); weights written in place (assign,
        load_state_dict, an optimizer step) are read by the replayed kernels as they are now.
        One sequence at a time: two generate() calls on one model from two threads would share it.
        """
        tensors = list(get_state_dict(self).values())
        Tensor.realize_all(*tensors)
        memory = [t.lazydata.base.realized for t in tensors]
        key = tuple(map(id, memory))
        kept = getattr(self, "_decoding", None)
        if kept is None or kept.key != key:
            kept = self._decoding = KeptDecoding(key, memory, self.new_cache(), TinyJit(self.padded_logits))
        return kept.cache, kept.recompute

    def forward_cached(self, tokens: Sequence[int], start: int, cache: DecodeCache) -> np.ndarray:
        """Logits (T, vocab) of `tokens`, the sequence's tokens at positions start..start+T-1, given that
        `cache` holds the keys and values of positions 0..start-1; their own are written into it.

        Only the T new positions go through the model. The positions reach the kernels as a tensor,
        so a decoding step (T = 1) is the same computation at every position: TinyJit records it once
        and replays its kernels at every later step.
        """
        if not (0 <= start and start + len(tokens) <= self.block_size and len(tokens) >= 1):
            raise ValueError(f"GPT.forward_cached: positions {start}..{start + len(tokens) - 1} do not fit "
                             f"in block_size {self.block_size}")
        if len(tokens) not in cache.steps:
            cache.steps[len(tokens)] = TinyJit(lambda step_input: self._cached_step(step_input, cache))
        # one (2, T) input, the tokens over their positions: a step copies one array in, not two
        step_input = np.empty((2, len(tokens)), dtype=np.int32)
        step_input[0], step_input[1] = tokens, np.arange(start, start + len(tokens))
        with no_grad():
            return cache.steps[len(tokens)](Tensor(step_input, device=self.tok_emb.weight.device)).numpy()

    def _cached_step(self, step_input: Tensor, cache: DecodeCache) -> Tensor:
        length = step_input.shape[1]  # views of the one input (shrink: no kernel of their own)
        ids, positions = step_input.shrink(((0, 1), None)), step_input.shrink(((1, 2), None)).reshape(length)
        logits, writes = self._forward(ids, positions, cache.layers)
        Tensor.assign_all([target for target, _ in writes], [value for _, value in writes])
        return logits[0].realize()
    # --8<-- [end:forward-cached]

    def padded_logits(self, window: Tensor) -> Tensor:
        """Logits (1, block_size, vocab) of a (1, block_size) window, realized (what forward_last runs)."""
        with no_grad():
            return self(window).realize()

    def forward_last(self, tokens: Sequence[int],
                     run: Callable[[Tensor], Tensor] | None = None) -> np.ndarray:
        """Logits (vocab,) after `tokens`, recomputing the whole prefix (no cache). The prefix is padded
        to block_size, so every length runs the same kernels (the causal mask keeps the padding out),
        and `run` may be TinyJit(model.padded_logits), which replays them."""
        window = np.zeros((1, self.block_size), dtype=np.int32)
        window[0, :len(tokens)] = tokens
        logits = (run or self.padded_logits)(Tensor(window, device=self.tok_emb.weight.device))
        return logits[0, len(tokens) - 1].numpy()

    def generate(self, prompt_ids: Sequence[int], new_tokens: int, temperature: float = 0.0,
                 top_k: int | None = None, seed: int = 0, cache: bool = True,
                 top_p: float | None = None) -> list[int]:
        """The prompt followed by `new_tokens` tokens (see tinyedu.models.generate.generate_tokens)."""
        return generate_tokens(self, prompt_ids, new_tokens, temperature, top_k, seed, cache, top_p)

    def _check_tokens(self, tokens: Tensor) -> None:
        check_tokens("GPT", tokens, self.block_size)


def _small_normal(rows: int, cols: int) -> Tensor:
    """N(0, 0.02²) weights, as GPT-2 starts its embeddings."""
    return (Tensor.normal(rows, cols) * 0.02).realize().requires_grad_(True)


def _check_config(vocab_size: int, block_size: int, dim: int, n_heads: int, n_layers: int, positions: str,
                  window: int | None) -> None:
    for name, value in (("vocab_size", vocab_size), ("block_size", block_size), ("dim", dim),
                        ("n_heads", n_heads), ("n_layers", n_layers)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"GPT: {name} must be a positive int, got {value!r}")
    if dim % n_heads or (positions == "rope" and (dim // n_heads) % 2):
        raise ValueError(f"GPT: dim ({dim}) must split into n_heads ({n_heads}) heads"
                         + (" of even size (RoPE turns pairs)" if positions == "rope" else ""))
    if positions not in POSITIONS:
        raise ValueError(f"GPT: positions must be one of {POSITIONS}, got {positions!r}")
    if window is not None and (not isinstance(window, int) or isinstance(window, bool) or window < 1):
        raise ValueError(f"GPT: window must be None (causal) or a positive int, got {window!r}")


# --8<-- [start:train]
def train_gpt(model: GPT, data_ids: np.ndarray, steps: int, batch: int, lr: float, seed: int = 0,
              warmup_steps: int | None = None, min_lr: float | None = None, clip: float | None = None,
              evaluate: Callable[[int], object] | None = None, eval_every: int = 100) -> list[float]:
    """Train `model` with AdamW on random windows of block_size + 1 tokens of `data_ids`; the losses.

    With `warmup_steps` (and `min_lr`, default 0), the learning rate follows WarmupCosine from `lr`;
    without, it stays `lr`. With `clip`, the gradients' total norm is clipped to it before each step.
    `evaluate(step)` is called before steps 0, eval_every, 2 * eval_every, ... and after the last one
    (with `steps`): the place to measure a validation loss. The step runs under TinyJit: from the
    fourth step on, its recorded kernels replay without building or scheduling the graph again.
    """
    data = np.asarray(data_ids, dtype=np.int32).reshape(-1)
    span = model.block_size + 1
    if len(data) < span + 1:
        raise ValueError(f"train_gpt: {len(data)} tokens are too few for windows of block_size + 1 = {span}")
    if isinstance(eval_every, bool) or not isinstance(eval_every, int) or eval_every < 1:
        raise ValueError(f"train_gpt: eval_every must be an int >= 1, got {eval_every!r}")
    rng = np.random.default_rng(seed)
    optimizer = AdamW(get_parameters(model), lr=lr)
    schedule = None if warmup_steps is None else WarmupCosine(optimizer, lr, warmup_steps, steps,
                                                              min_lr or 0.0)

    @TinyJit
    def step(tokens: Tensor) -> Tensor:
        optimizer.zero_grad()
        loss = model.loss(tokens).backward()
        if clip is not None:
            clip_grad_norm(optimizer.params, clip)
        optimizer.step()
        return loss

    losses = []
    for k in range(steps):
        if evaluate is not None and k % eval_every == 0:
            evaluate(k)
        starts = rng.integers(0, len(data) - span + 1, batch)
        windows = np.stack([data[s:s + span] for s in starts])
        losses.append(step(Tensor(windows, device=model.tok_emb.weight.device)).item())
        if schedule is not None:
            schedule.step()
    if evaluate is not None:
        evaluate(steps)
    return losses
# --8<-- [end:train]


# --8<-- [start:bigram]
def bigram_loss(train_ids: np.ndarray, val_ids: np.ndarray, vocab_size: int, k: float = 1.0,
                unigram_weight: float = 0.0) -> float:
    """The validation cross entropy (nats per token) of a model that looks at one token back:
    P(b | a) = (1 - w) (count(a b) + k) / (count(a) + k V) + w P(b), from the training text, with
    P(b) = (count(b) + 1) / (N + V). `k` (add-k smoothing) keeps a little probability for a pair never
    seen; `w` mixes in how common b is on its own, which is better than a flat k when a is rare."""
    train, val = (np.asarray(ids, dtype=np.int64).reshape(-1) for ids in (train_ids, val_ids))
    if len(train) < 2 or len(val) < 2:
        raise ValueError("bigram_loss: the training and validation texts need at least two tokens each")
    if min(train.min(), val.min()) < 0 or max(train.max(), val.max()) >= vocab_size:
        raise ValueError(f"bigram_loss: token ids must be in 0..{vocab_size - 1}")
    if not k > 0 or not 0 <= unigram_weight < 1:
        raise ValueError(f"bigram_loss: k must be > 0 and unigram_weight in [0, 1), got {k!r}, "
                         f"{unigram_weight!r}")
    counts = np.full((vocab_size, vocab_size), float(k))
    np.add.at(counts, (train[:-1], train[1:]), 1)
    pair = counts / counts.sum(1, keepdims=True)
    unigram = (np.bincount(train, minlength=vocab_size) + 1.0) / (len(train) + vocab_size)
    probabilities = (1 - unigram_weight) * pair[val[:-1], val[1:]] + unigram_weight * unigram[val[1:]]
    return float(-np.log(probabilities).mean())


def best_bigram_loss(train_ids: np.ndarray, val_ids: np.ndarray, vocab_size: int,
                     ks: Sequence[float] = (1.0, 0.3, 0.1, 0.03, 0.01, 0.003),
                     weights: Sequence[float] = (0.0, 0.01, 0.03, 0.1, 0.2)) -> tuple[float, float, float]:
    """The lowest bigram_loss over a grid of k and unigram weights: (loss, k, weight).

    Chosen on the validation text itself, so the baseline is as strong as a bigram gets here (a little
    optimistic, if anything): a GPT that beats it has learned more than one token of context."""
    return min((bigram_loss(train_ids, val_ids, vocab_size, k, w), k, w) for k in ks for w in weights)
# --8<-- [end:bigram]


__all__ = ["GPT", "GPTBlock", "GPTAttention", "KVCache", "DecodeCache", "rope_tables", "apply_rope",
           "attention_mask", "write_rows", "train_gpt", "bigram_loss",
           "best_bigram_loss"]
