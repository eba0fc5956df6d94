"""Chapter 13's GPT (tinyedu.models.gpt.GPT) ported to eager PyTorch, reading tinyedu's state dict.

The same arithmetic as tinyedu's model: token embedding, n_layers pre-norm blocks (LayerNorm, one qkv
Linear, rotary positions from the model's own cos/sin tables, causal softmax attention, a projection,
LayerNorm, a GELU (tanh) MLP), a final LayerNorm and the head tied to the token embedding. Decoding
keeps a KV cache that it writes in place, or recomputes the whole prefix. bench/bench_decode.py times
its decoding next to tinyedu's, bench/bench_training.py a training step; tests/test_gpt.py checks
that it gives tinyedu's greedy tokens and loss (without timing).

The caller imports torch (bench/timing.py imports it before tinyedu) and passes it in, so that this
file imports no framework itself.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np


class TorchGPT:
    """Eager PyTorch forward passes, greedy decoding and a training loss with the weights of a tinyedu GPT."""

    def __init__(self, torch: Any, state: dict[str, np.ndarray], config: dict[str, Any]):
        if config.get("positions", "rope") != "rope" or config.get("window") is not None:
            raise ValueError("TorchGPT: the port covers rotary positions without a window (chapter 13's "
                             "model)")
        self.torch = torch
        self.w = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in state.items()}
        self.layers, self.heads, self.dim = config["n_layers"], config["n_heads"], config["dim"]
        self.block_size = config["block_size"]

    def _rope(self, x: Any, positions: Any) -> Any:
        cos, sin = self.w["rope_cos"][positions], self.w["rope_sin"][positions]
        half = x.shape[-1] // 2
        x1, x2 = x[..., :half], x[..., half:]
        return self.torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)

    def forward(self, tokens: Any, start: int, cache: list | None) -> Any:
        """Logits (..., T, vocab) of tokens (..., T) at positions start.. (a batch of sequences, or
        one); with a cache (per layer k, v of (heads, block, head_dim); one sequence), reading
        positions < start from it and writing the new ones."""
        torch, w, F = self.torch, self.w, self.torch.nn.functional
        lead, T, hd = tokens.shape[:-1], tokens.shape[-1], self.dim // self.heads
        positions = torch.arange(start, start + T)
        x = w["tok_emb.weight"][tokens]
        for n in range(self.layers):
            p = f"blocks.{n}."
            h = F.layer_norm(x, (self.dim,), w[p + "ln1.weight"], w[p + "ln1.bias"])
            # (..., T, 3, heads, hd) -> q, k, v of (..., heads, T, hd)
            q, k, v = F.linear(h, w[p + "attn.qkv.weight"], w[p + "attn.qkv.bias"]).reshape(
                *lead, T, 3, self.heads, hd).movedim(-3, 0).transpose(-3, -2)
            q, k = self._rope(q, positions), self._rope(k, positions)
            if cache is not None:
                cache[n][0][:, start:start + T] = k
                cache[n][1][:, start:start + T] = v
                k, v = cache[n][0][:, :start + T], cache[n][1][:, :start + T]
            mask = torch.arange(k.shape[-2]).reshape(1, -1) <= positions.reshape(-1, 1)
            scores = (q @ k.transpose(-2, -1)) * (1 / math.sqrt(hd))
            out = scores.masked_fill(~mask, -math.inf).softmax(-1) @ v
            x = x + F.linear(out.transpose(-3, -2).reshape(*lead, T, self.dim), w[p + "attn.proj.weight"],
                             w[p + "attn.proj.bias"])
            h = F.layer_norm(x, (self.dim,), w[p + "ln2.weight"], w[p + "ln2.bias"])
            h = F.gelu(F.linear(h, w[p + "mlp.fc.weight"], w[p + "mlp.fc.bias"]), approximate="tanh")
            x = x + F.linear(h, w[p + "mlp.proj.weight"], w[p + "mlp.proj.bias"])
        x = F.layer_norm(x, (self.dim,), w["ln_f.weight"], w["ln_f.bias"])
        return x @ w["tok_emb.weight"].T

    def loss(self, tokens: Any) -> Any:
        """The next-token cross-entropy of windows (B, T + 1), as tinyedu's GPT.loss."""
        logits = self.forward(tokens[:, :-1], 0, None)
        return self.torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                      tokens[:, 1:].reshape(-1).long())

    def parameters(self) -> list[Any]:
        """The weights a training step updates (the rotary tables are not weights), made leaves
        that record gradients."""
        return [t.requires_grad_(True) for name, t in self.w.items() if "rope" not in name]

    def generate(self, prompt: list[int], new_tokens: int, cache: bool = True) -> list[int]:
        """Greedy decoding, as tinyedu's generate(temperature=0), under torch.inference_mode."""
        torch = self.torch
        with torch.inference_mode():
            hd = self.dim // self.heads
            shape = (self.heads, self.block_size, hd)
            kv = [(torch.zeros(shape), torch.zeros(shape)) for _ in range(self.layers)] if cache else None
            sequence = list(prompt)
            logits = self.forward(torch.tensor(sequence), 0, kv)[-1]
            for step in range(new_tokens):
                sequence.append(int(logits.argmax()))
                if step + 1 < new_tokens:
                    logits = (self.forward(torch.tensor(sequence[-1:]), len(sequence) - 1, kv)[-1] if cache
                              else self.forward(torch.tensor(sequence), 0, None)[-1])
            return sequence
