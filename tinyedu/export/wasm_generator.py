"""The generator of export/generator.py for WebAssembly: the same decoding step, tokenizer and sampler,
compiled libc-free for wasm32, with entry points a host calls one token at a time.

The step is export_c's for target "wasm" (the WASM renderer's kernels, its libm header); the tokenizer
is generator.py's TOKENIZER without its stdio printer; the sampler is generator.py's SAMPLER with
exp(x) computed as the header's wasm_exp2(x * log2 e). The host (Python through wasmtime here, the
text page's JavaScript in a browser) writes the prompt's bytes at `gen_text()` and calls:

    int gen_start(int n_bytes, double temperature, int top_k, double seed)
        encode the prompt and run it through the step (prefill); the number of prompt tokens, or
        -1 for an empty prompt, -2 for one past block_size tokens, -3 for a bad temperature or top_k
    int gen_step(void)   the next token (picked, then fed through the step), or -1 when the model has
                         no position left (block_size): the generator stops there and says so
    int gen_token(int k) the k-th token of the sequence so far (prompt tokens first)
    void* gen_piece(int id), int gen_piece_length(int id)   a token's bytes
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import numpy as np

from tinyedu.export.generator import SAMPLER, _tokenizer, decoding_step
from tinyedu.export.program import export_c
from tinyedu.export.targets import TARGETS, WASM_EXPORT_FLAGS, missing_tool_hint
from tinyedu.models.gpt import GPT
from tinyedu.tensor import Tensor
from tinyedu.text.bpe import BPE

TEXT_BYTES = 4096  # the prompt buffer's size: a longer prompt is refused by the host

ENTRY = r"""
/* ---- for a WebAssembly host: prefill, then one token per call ---- */
#define VOCAB $vocab
#define BLOCK_SIZE $block_size
static _Alignas(64) float caches[2][$n_caches][$cache_size];
static _Alignas(64) float logits[VOCAB];
static int now = 0, length = 0, prompt_length = 0, top_k_now = VOCAB;
static double temperature_now = 0.0;
static unsigned char text[$text_bytes];
static int sequence[BLOCK_SIZE + $text_bytes];
$sampler
static void step(int token, int position) {
  ${name}_forward(&token, &position, $reads, logits, $writes);
  now = 1 - now;
}

void* gen_text(void) { return text; }
int gen_text_capacity(void) { return $text_bytes; }
int gen_block_size(void) { return BLOCK_SIZE; }
int gen_vocab(void) { return VOCAB; }
int gen_token(int k) { return k >= 0 && k < length ? sequence[k] : -1; }
void* gen_piece(int id) { return (void*)(piece_bytes + piece_start[id < 0 || id >= VOCAB ? 0 : id]); }
int gen_piece_length(int id) { return id < 0 || id >= VOCAB ? 0 : piece_start[id + 1] - piece_start[id]; }

int gen_start(int n_bytes, double temperature, int top_k, double seed) {
  if (n_bytes <= 0) return -1;
  if (n_bytes > $text_bytes) return -2;
  if (!(temperature >= 0.0 && temperature < 1e30) || top_k < 0 || top_k > VOCAB || !(seed >= 0.0)) return -3;
  int n = bpe_encode(text, n_bytes, sequence);
  if (n > BLOCK_SIZE) return -2;
  for (int c = 0; c < 2; c++) for (int i = 0; i < $n_caches; i++) for (int j = 0; j < $cache_size; j++)
    caches[c][i][j] = 0.0f;
  now = 0;
  rng_state = (unsigned long long)seed;
  temperature_now = temperature;
  top_k_now = top_k == 0 ? VOCAB : top_k;
  for (int i = 0; i < n; i++) step(sequence[i], i);
  length = prompt_length = n;
  return n;
}

int gen_step(void) {
  if (length == 0 || length >= BLOCK_SIZE) return -1;
  int token = pick(logits, temperature_now, top_k_now);
  sequence[length] = token;
  length += 1;
  if (length < BLOCK_SIZE) step(token, length - 1);
  return token;
}
"""


def wasm_generator_source(model: GPT, bpe: BPE, name: str = "gpt") -> str:
    """The C file: the step for target wasm, the tokenizer, the sampler and the entry points."""
    if bpe.vocab_size != model.vocab_size:
        raise ValueError(f"wasm_generator: the tokenizer has {bpe.vocab_size} tokens but the model's "
                         f"vocab_size is {model.vocab_size}")
    head_dim = model.tok_emb.weight.shape[1] // model.n_heads
    cache_shape = (1, model.n_heads, model.block_size, head_dim)
    token = Tensor(np.zeros((1, 1), dtype=np.int32))
    position = Tensor(np.zeros(1, dtype=np.int32))
    caches = [Tensor(np.zeros(cache_shape, dtype=np.float32)) for _ in range(2 * len(model.blocks))]
    program = export_c(decoding_step(model), token, position, *caches, name=name, target="wasm", embed=True)
    tokenizer = _tokenizer(bpe)
    printer = tokenizer.index("static void print_token(")
    tokenizer = tokenizer[:printer]  # stdio has no place in a libc-free module
    n = len(program.inputs) - 2
    entry = ENTRY.replace("$sampler", SAMPLER.replace("SAMPLER_EXP(", "wasm_exp2(1.4426950408889634 * "))
    for key, value in {"$vocab": model.vocab_size, "$block_size": model.block_size, "$n_caches": n,
                       "$cache_size": int(np.prod(cache_shape)), "$text_bytes": TEXT_BYTES,
                       "${name}": program.name,
                       "$reads": ", ".join(f"caches[now][{i}]" for i in range(n)),
                       "$writes": ", ".join(f"caches[1 - now][{i}]" for i in range(n))}.items():
        entry = entry.replace(key, str(value))
    return "\n".join([program.source, tokenizer, entry])


def build_wasm_generator(model: GPT, bpe: BPE, path: str | os.PathLike, name: str = "gpt") -> Path:
    """Write PATH (.wasm) and its C beside it (.c), compiled by clang and wasm-ld for wasm32."""
    path = Path(path)
    source = path.with_suffix(".c")
    source.write_text(wasm_generator_source(model, bpe, name))
    target = TARGETS["wasm"]()
    command = [*target.compiler, *WASM_EXPORT_FLAGS, str(source), "-o", str(path)]
    try:
        result = subprocess.run(command, capture_output=True, text=True)
    except FileNotFoundError:
        raise RuntimeError(missing_tool_hint(target, target.compiler[0])) from None
    if result.returncode != 0:
        raise RuntimeError(f"wasm_generator: clang failed:\n{result.stderr.strip()[:4000]}")
    return path


ERRORS = {-1: "the prompt is empty; type a few characters",
          -2: "the prompt is longer than the model's block_size tokens (or {cap} bytes); shorten it",
          -3: "temperature must be a finite number >= 0 and top_k in 0..vocab (0 = all), seed >= 0"}


def run_wasm_generator(path: str | os.PathLike, prompt: bytes, new_tokens: int, temperature: float = 0.0,
                       top_k: int = 0, seed: int = 0) -> list[int]:
    """The prompt's tokens and up to `new_tokens` new ones from the module, through wasmtime: what the
    text page does in a browser. It stops early, as the page does, when block_size is full."""
    import wasmtime

    store = wasmtime.Store()
    module = wasmtime.Module.from_file(store.engine, str(path))
    exports = wasmtime.Instance(store, module, []).exports(store)
    if len(prompt) > exports["gen_text_capacity"](store):
        raise ValueError("wasm_generator: " + ERRORS[-2].format(cap=TEXT_BYTES))
    exports["memory"].write(store, prompt, exports["gen_text"](store))
    n = exports["gen_start"](store, len(prompt), float(temperature), int(top_k), float(seed))
    if n < 0:
        raise ValueError("wasm_generator: " + ERRORS[n].format(cap=TEXT_BYTES))
    for _ in range(new_tokens):
        if exports["gen_step"](store) < 0:
            break
    return [exports["gen_token"](store, k) for k in range(n + new_tokens)
            if exports["gen_token"](store, k) >= 0]


__all__ = ["wasm_generator_source", "build_wasm_generator", "run_wasm_generator", "ERRORS",
           "TEXT_BYTES"]
