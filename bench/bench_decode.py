"""Decoding chapter 13's GPT: tinyedu's generate() next to a PyTorch port with the same weights.

Run: .venv/bin/python bench/bench_decode.py [--quick]      (not a test; prints a table)

The model is chapter 13's (dim 96, 4 heads, 3 layers, RoPE, block 64; a vocabulary of 512 tokens
stands for the chapter's BPE), with random weights scaled so that greedy choices are clear (at GPT's
N(0, 0.02²) start every logit is about 0 and float rounding could pick another token). The PyTorch
port below is eager PyTorch with the same weights and the same arithmetic: a KV cache it writes in
place, or recomputing the whole prefix; it runs under torch.inference_mode, with 1 thread and with
threads = cores (the faster is reported: on a busy machine OpenMP's spinning threads can make more
threads slower), and is imported first. Both must give the same greedy tokens (asserted).

Per framework and mode: the first call (tinyedu: fresh model, its steps recorded; kernels come from
the compile cache on disk), and the steady state: median of later calls with the same prompt and
length. tokens/s = new tokens / call time (the prompt's prefill included), and the decode step alone
= (time of a 48-token call - time of an 8-token call) / 40. Ratios are tinyedu / PyTorch time (< 1:
tinyedu is faster). The machine may be shared: read the ratios, and the load average beside the table.
"""

from __future__ import annotations

import math
import os
import statistics
import time

import numpy as np
from timing import QUICK, load, torch

from tinyedu import Tensor
from tinyedu.models.gpt import GPT
from tinyedu.nn.state import get_state_dict, load_state_dict

CONFIG = {"vocab_size": 512, "block_size": 64, "dim": 96, "n_heads": 4, "n_layers": 3}
PROMPT = [7, 300, 41, 9, 122, 5, 77, 18, 250, 3, 64, 199]
NEW, SHORT = 48, 8
REPEAT = 5 if QUICK else 15


def tinyedu_model(seed: int = 0) -> GPT:
    Tensor.manual_seed(seed)
    model = GPT(**CONFIG)
    rng = np.random.default_rng(seed)
    weights = {}
    for name, t in get_state_dict(model).items():
        if "rope" in name:
            continue
        if name.endswith("ln1.weight") or name.endswith("ln2.weight") or name == "ln_f.weight":
            weights[name] = np.ones(t.shape, np.float32)
        else:
            weights[name] = (rng.standard_normal(t.shape) * (0.3 if name == "tok_emb.weight" else
                                                             1 / math.sqrt(t.shape[-1]))).astype(np.float32)
    load_state_dict(model, weights, strict=False)
    return model


class TorchGPT:
    """Chapter 13's GPT in eager PyTorch, reading tinyedu's state dict: the same arithmetic."""

    def __init__(self, state: dict[str, np.ndarray]):
        self.w = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in state.items()}
        self.layers, self.heads = CONFIG["n_layers"], CONFIG["n_heads"]
        self.dim = CONFIG["dim"]

    def _rope(self, x, positions):
        cos, sin = self.w["rope_cos"][positions], self.w["rope_sin"][positions]
        half = x.shape[-1] // 2
        x1, x2 = x[..., :half], x[..., half:]
        return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)

    def forward(self, tokens, start: int, cache: list | None):
        """Logits (T, vocab) of tokens (T,) at positions start..; with a cache (per layer k, v of
        (heads, block, head_dim)), reading positions < start from it and writing the new ones."""
        w, F = self.w, torch.nn.functional
        T, hd = tokens.shape[0], self.dim // self.heads
        positions = torch.arange(start, start + T)
        x = w["tok_emb.weight"][tokens]
        for n in range(self.layers):
            p = f"blocks.{n}."
            h = F.layer_norm(x, (self.dim,), w[p + "ln1.weight"], w[p + "ln1.bias"])
            q, k, v = F.linear(h, w[p + "attn.qkv.weight"], w[p + "attn.qkv.bias"]).reshape(
                T, 3, self.heads, hd).permute(1, 2, 0, 3)
            q, k = self._rope(q, positions), self._rope(k, positions)
            if cache is not None:
                cache[n][0][:, start:start + T] = k
                cache[n][1][:, start:start + T] = v
                k, v = cache[n][0][:, :start + T], cache[n][1][:, :start + T]
            mask = torch.arange(k.shape[1]).reshape(1, -1) <= positions.reshape(-1, 1)
            scores = (q @ k.transpose(-2, -1)) * (1 / math.sqrt(hd))
            out = scores.masked_fill(~mask, -math.inf).softmax(-1) @ v
            x = x + F.linear(out.permute(1, 0, 2).reshape(T, self.dim), w[p + "attn.proj.weight"],
                             w[p + "attn.proj.bias"])
            h = F.layer_norm(x, (self.dim,), w[p + "ln2.weight"], w[p + "ln2.bias"])
            h = F.gelu(F.linear(h, w[p + "mlp.fc.weight"], w[p + "mlp.fc.bias"]), approximate="tanh")
            x = x + F.linear(h, w[p + "mlp.proj.weight"], w[p + "mlp.proj.bias"])
        x = F.layer_norm(x, (self.dim,), w["ln_f.weight"], w["ln_f.bias"])
        return x @ w["tok_emb.weight"].T

    def generate(self, prompt: list[int], new_tokens: int, cache: bool = True) -> list[int]:
        """Greedy decoding, as tinyedu's generate(temperature=0)."""
        with torch.inference_mode():
            hd = self.dim // self.heads
            kv = ([(torch.zeros(self.heads, CONFIG["block_size"], hd), torch.zeros(self.heads,
                   CONFIG["block_size"], hd)) for _ in range(self.layers)] if cache else None)
            sequence = list(prompt)
            logits = self.forward(torch.tensor(sequence), 0, kv)[-1]
            for step in range(new_tokens):
                sequence.append(int(logits.argmax()))
                if step + 1 < new_tokens:
                    logits = (self.forward(torch.tensor(sequence[-1:]), len(sequence) - 1, kv)[-1] if cache
                              else self.forward(torch.tensor(sequence), 0, None)[-1])
            return sequence


def timed(run) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def measure(generate, cache: bool) -> dict[str, float]:
    """First call, steady call (median), and the decode step alone, in seconds."""
    first = timed(lambda: generate(PROMPT, NEW, cache))
    for _ in range(2):
        generate(PROMPT, NEW, cache), generate(PROMPT, SHORT, cache)
    long, short = [], []
    for _ in range(REPEAT):  # alternating, so that a change of the machine's load hits both
        long.append(timed(lambda: generate(PROMPT, NEW, cache)))
        short.append(timed(lambda: generate(PROMPT, SHORT, cache)))
    steady, steady_short = statistics.median(long), statistics.median(short)
    return {"first": first, "steady": steady, "step": (steady - steady_short) / (NEW - SHORT)}


def main() -> None:
    if torch is None:
        print("no torch: nothing to compare")
        return
    torch.set_num_threads(os.cpu_count() or 1)
    model = tinyedu_model()
    state = {k: v.numpy() for k, v in get_state_dict(model).items()}
    port = TorchGPT(state)
    ours = model.generate(PROMPT, NEW)
    theirs = port.generate(PROMPT, NEW)
    recomputed = (port.generate(PROMPT, NEW, cache=False), model.generate(PROMPT, NEW, cache=False))
    assert ours == theirs == recomputed[0] == recomputed[1], \
        f"greedy tokens differ:\n tinyedu {ours[len(PROMPT):]}\n PyTorch {theirs[len(PROMPT):]}"
    print(f"chapter 13's GPT {CONFIG}, prompt {len(PROMPT)} tokens, {NEW} new, greedy; the same tokens in "
          f"both (checked); PyTorch {torch.__version__} eager, inference_mode, imported first")
    results = {}
    threads = {}
    for cache in (True, False):
        fresh = tinyedu_model()  # a new model: its first call records its steps
        results["tinyedu", cache] = measure(lambda p, n, c, m=fresh: m.generate(p, n, cache=c), cache)
        tried = {}
        for count in sorted({1, os.cpu_count() or 1}):  # PyTorch's best thread count here, each measured
            torch.set_num_threads(count)
            tried[count] = measure(port.generate, cache)
        threads[cache] = min(tried, key=lambda c: tried[c]["steady"])
        results["torch", cache] = tried[threads[cache]]
        results["torch", cache]["first"] = tried[min(tried)]["first"]  # (measured first: its first run)
    print(f"PyTorch's threads, the faster of 1 and {os.cpu_count()}: {threads[True]} with the cache, "
          f"{threads[False]} without [{load()}]")
    print(f"{'case':34s} {'PyTorch':>14s} {'tinyedu':>14s} {'ratio':>7s}  goal")
    for cache in (True, False):
        mode = "cache" if cache else "no cache"
        t, e = results["torch", cache], results["tinyedu", cache]
        rows = [(f"first call, {mode} (ms)", t["first"] * 1e3, e["first"] * 1e3, ""),
                (f"steady call, {mode} (tokens/s)", NEW / t["steady"], NEW / e["steady"], "<= 1"),
                (f"decode step, {mode} (ms/token)", t["step"] * 1e3, e["step"] * 1e3, "<= 1")]
        for name, a, b, goal in rows:
            ratio = (a / b) if "tokens/s" in name else (b / a)  # time ratio either way
            print(f"{name:34s} {a:14.2f} {b:14.2f} {ratio:6.2f}x  {goal}")
    speedup = {f: results[f, False]["step"] / results[f, True]["step"] for f in ("torch", "tinyedu")}
    print(f"the cache makes a decode step {speedup['tinyedu']:.1f}x faster in tinyedu, "
          f"{speedup['torch']:.1f}x in PyTorch")
    print(f"done [{load()}]")


if __name__ == "__main__":
    main()
