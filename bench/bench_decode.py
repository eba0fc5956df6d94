"""Decoding chapter 13's GPT: tinyedu's generate() next to a PyTorch port with the same weights.

Run: .venv/bin/python bench/bench_decode.py [--quick]      (not a test; prints a table)

The model is chapter 13's (dim 96, 4 heads, 3 layers, RoPE, block 64, a 512-token BPE trained on
60 KB of the corpus), with random weights scaled so that greedy choices are clear (at GPT's
N(0, 0.02²) start every logit is about 0 and float rounding could pick another token). The cases:

- tinyedu: `generate` with the KV cache, without it (recomputing the padded window), with int8
  weights (quantize_int8, cache), speculative decoding (k = 4; the draft is the target's first block
  alone, with its embedding and final LayerNorm), and the exported C program (export_generator,
  `cc -O2`, one thread; its own clock over its decoding loop, and the whole process for its first run);
- PyTorch eager (bench/torch_gpt.py: the same arithmetic, a KV cache written in place, or the whole
  prefix recomputed; torch.inference_mode), imported first (bench/timing.py), with 2 threads
  (torch.set_num_threads(2)) and with 1: on a 2-core machine shared with other work, one thread is
  often faster. The goal compares tinyedu with the faster of the two.

All give the same greedy tokens (asserted; int8 reports how many agree). Per case: the first call
(tinyedu: a fresh model, whose steps are recorded then; kernels come from the compile cache on disk)
and the steady state: the median over rounds of later calls, every case timed once per round in turn,
so that a change of the machine's load hits all of them. tokens/s = new tokens / call time (the
prompt's prefill included); the decode step alone = (time of a 48-token call - time of an 8-token
call) / 40. The load average is printed beside the table: the machine may be shared.
"""

from __future__ import annotations

import math
import re
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Callable

import numpy as np
from timing import QUICK, load, torch
from torch_gpt import TorchGPT

from tinyedu import Tensor
from tinyedu.export import export_generator
from tinyedu.models.generate import speculative_generate
from tinyedu.models.gpt import GPT
from tinyedu.models.quantize import quantize_int8
from tinyedu.nn.state import get_state_dict, load_state_dict
from tinyedu.text import corpus, train_bpe

CONFIG = {"vocab_size": 512, "block_size": 64, "dim": 96, "n_heads": 4, "n_layers": 3}
PROMPT_TEXT = b"    def __init__(self, name, value):\n"
NEW, SHORT = 48, 8
ROUNDS = 5 if QUICK else 15
THREADS = (2, 1)  # PyTorch's thread counts, each a case


def tinyedu_model(seed: int = 0, config: dict = CONFIG) -> GPT:
    """Chapter 13's GPT with spread-out random weights (LayerNorm scales 1): clear greedy choices."""
    Tensor.manual_seed(seed)
    model = GPT(**config)
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


def first_block_draft(target: GPT) -> GPT:
    """A draft for speculative decoding: the target's embedding, first block and final LayerNorm."""
    draft = GPT(**(CONFIG | {"n_layers": 1}))
    state = get_state_dict(target)
    load_state_dict(draft, {name: state[name].numpy() for name in get_state_dict(draft)})
    return draft


class CProgram:
    """The exported generator, compiled; each run reports its own decoding loop's seconds."""

    def __init__(self, model: GPT, bpe: object, folder: Path):
        source = export_generator(model, bpe, folder / "gpt.c")
        self.binary = folder / "gpt"
        subprocess.run(["cc", "-O2", str(source), "-o", str(self.binary), "-lm"], check=True)
        self.loop_seconds = 0.0

    def generate(self, new_tokens: int) -> bytes:
        done = subprocess.run([str(self.binary), PROMPT_TEXT.decode(), str(new_tokens)], capture_output=True,
                              check=True)
        self.loop_seconds = float(re.search(rb"steps in ([0-9.]+) s", done.stderr).group(1))
        return done.stdout


def timed(run: Callable[[], object]) -> tuple[float, object]:
    start = time.perf_counter()
    out = run()
    return time.perf_counter() - start, out


def main() -> None:
    if torch is None:
        print("no torch: nothing to compare")
        return
    print(f"[{load()}] building: BPE, models, the C program")
    bpe = train_bpe(corpus()[:60_000], CONFIG["vocab_size"])
    prompt = bpe.encode(PROMPT_TEXT)
    model, int8_source = tinyedu_model(), tinyedu_model()
    quantized, draft = quantize_int8(int8_source), first_block_draft(model)
    port = TorchGPT(torch, {k: v.numpy() for k, v in get_state_dict(model).items()}, CONFIG)
    folder = tempfile.TemporaryDirectory(prefix="tinyedu-bench-decode-")
    program = CProgram(model, bpe, Path(folder.name))

    def with_threads(count: int, run: Callable[[int], list[int]]) -> Callable[[int], list[int]]:
        def call(n: int) -> list[int]:
            torch.set_num_threads(count)
            return run(n)
        return call

    spec_stats: dict = {}

    def speculative(n: int) -> list[int]:
        tokens, stats = speculative_generate(model, draft, prompt, n, k=4)
        if n == NEW:  # the statistics of the 48-token call
            spec_stats.update(stats)
        return tokens

    cases: dict[str, Callable[[int], object]] = {
        "tinyedu, cache": lambda n: model.generate(prompt, n),
        "tinyedu, no cache": lambda n: model.generate(prompt, n, cache=False),
        "tinyedu int8, cache": lambda n: quantized.generate(prompt, n),
        "tinyedu speculative, k=4": speculative,
        "C program (exported)": program.generate,
    }
    for count in THREADS:
        cases[f"PyTorch eager, cache, {count} thr"] = with_threads(count, lambda n: port.generate(prompt, n))
        cases[f"PyTorch eager, no cache, {count} thr"] = with_threads(
            count, lambda n: port.generate(prompt, n, cache=False))

    # first calls: each case's first run (tinyedu's models are fresh: nothing recorded yet)
    first, outputs = {}, {}
    for name, run in cases.items():
        first[name], outputs[name] = timed(lambda run=run: run(NEW))
    greedy = outputs["tinyedu, cache"]
    for name, out in outputs.items():
        if "int8" in name:
            continue
        got = bpe.decode(greedy) if isinstance(out, bytes) else greedy
        assert out == got, f"{name}: other greedy tokens than tinyedu's with the cache"
    int8_tokens = outputs["tinyedu int8, cache"]
    int8_agree = sum(a == b for a, b in zip(int8_tokens, greedy, strict=True)) - len(prompt)

    for _ in range(2):  # warm-up: TinyJit records on a call's second and third run of a step
        for run in cases.values():
            run(NEW), run(SHORT)
    long: dict[str, list[float]] = {name: [] for name in cases}
    short: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(ROUNDS):
        for name, run in cases.items():
            for n, times in ((NEW, long), (SHORT, short)):
                seconds, _ = timed(lambda run=run, n=n: run(n))
                times[name].append(program.loop_seconds if name.startswith("C program") else seconds)
    steady = {name: statistics.median(long[name]) for name in cases}
    step = {name: (steady[name] - statistics.median(short[name])) / (NEW - SHORT) for name in cases}

    print(f"chapter 13's GPT {CONFIG}; prompt {len(prompt)} tokens, {NEW} new (and {SHORT}), greedy; "
          f"the same tokens in every case (checked; int8: {int8_agree} of {NEW} agree); PyTorch "
          f"{torch.__version__} eager, inference_mode, imported before tinyedu; speculative: "
          f"{spec_stats['accepted']} of {spec_stats['proposed']} proposals accepted, "
          f"{spec_stats['target_passes']} target passes")
    print(f"median of {ROUNDS} rounds; C program: its own clock over its decoding loop (first call: the "
          f"whole process) [{load()}]")
    best_torch = {c: min((n for n in cases if n.startswith(f"PyTorch eager, {c},")), key=lambda n: step[n])
                  for c in ("cache", "no cache")}
    print(f"{'case':32s} {'first call':>11s} {'steady call':>12s} {'tokens/s':>9s} {'step':>10s} "
          f"{'vs PyTorch':>10s}")
    for name in cases:
        mode = "no cache" if "no cache" in name else "cache"
        ratio = step[best_torch[mode]] / step[name]  # > 1: faster than PyTorch's faster thread count
        print(f"{name:32s} {first[name] * 1e3:8.1f} ms {steady[name] * 1e3:9.2f} ms "
              f"{NEW / steady[name]:9.0f} {step[name] * 1e3:7.3f} ms {ratio:9.2f}x")
    ours, theirs = step["tinyedu, cache"], step[best_torch["cache"]]
    print(f"decode step with the cache: tinyedu {ours * 1e3:.3f} ms, PyTorch eager ({best_torch['cache']}) "
          f"{theirs * 1e3:.3f} ms: tinyedu's tokens/s is {theirs / ours:.2f}x PyTorch's (goal >= 1)")
    print(f"done [{load()}]")


if __name__ == "__main__":
    main()
