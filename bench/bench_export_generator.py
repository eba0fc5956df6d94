"""Text-generator benchmark: a GPT as a standalone C program (export_generator) next to GPT.generate.

Run: .venv/bin/python bench/bench_export_generator.py [--quick]      (not a test; prints a few lines)

One GPT (dim 128, 4 heads, 4 layers, block_size 128, a 512-token BPE trained on 100 KB of the
corpus; random weights: speed does not depend on what they are) fills its whole block greedily from
a short prompt, three ways: the exported C program built with a plain `cc -O2` (one thread; its own
clock over the decoding steps, and its whole run with process start), and tinyedu's `generate` with
and without the KV cache (after a warm-up that compiles and records the kernels). It checks that the
C program prints the bytes tinyedu generates. The machine may be shared: compare figures measured
side by side in one run.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tinyedu import Tensor
from tinyedu.export import export_generator
from tinyedu.models import GPT
from tinyedu.nn.state import get_parameters
from tinyedu.text import corpus, train_bpe

QUICK = "--quick" in sys.argv
VOCAB, BLOCK, DIM, LAYERS = (300, 64, 64, 2) if QUICK else (512, 128, 128, 4)
PROMPT = b"    def __init__(self, "


def main() -> None:
    bpe = train_bpe(corpus()[:100_000], VOCAB)
    Tensor.manual_seed(0)
    model = GPT(bpe.vocab_size, BLOCK, dim=DIM, n_heads=4, n_layers=LAYERS)
    for parameter in get_parameters(model):  # spread-out logits: varied tokens, no near-ties
        parameter.assign(Tensor.normal(*parameter.shape) * 0.3).realize()
    ids = bpe.encode(PROMPT)
    new = BLOCK - len(ids)
    with tempfile.TemporaryDirectory() as folder:
        source, program = export_generator(model, bpe, Path(folder) / "gpt.c"), str(Path(folder) / "gpt")
        subprocess.run(["cc", "-O2", str(source), "-o", program, "-lm"], check=True)
        print(f"gpt.c: {source.stat().st_size / 1e6:.1f} MB; {len(ids)} prompt tokens, {new} new")
        start = time.perf_counter()
        result = subprocess.run([program, PROMPT, str(new)], capture_output=True, check=True)
        wall = time.perf_counter() - start
    print(f"C program:          {result.stderr.decode().strip()}; whole run {wall:.3f} s, "
          f"{new / wall:.0f} new tokens/s")
    model.generate(ids, new)  # warm-up: compile and record the kernels
    for cache in (True, False):
        start = time.perf_counter()
        tokens = model.generate(ids, new, cache=cache)
        seconds = time.perf_counter() - start
        print(f"tinyedu cache={cache!s:5}: {seconds:.3f} s, {new / seconds:.0f} new tokens/s")
    print("same bytes:", result.stdout == bpe.decode(tokens))


if __name__ == "__main__":
    main()
