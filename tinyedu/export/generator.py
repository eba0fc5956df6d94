"""A GPT and its tokenizer as one C program that writes text: `export_generator(model, bpe, "gpt.c")`.

    cc -O2 gpt.c -o gpt -lm && ./gpt "def main(" 40

export_c (program.py) turns a forward pass of fixed shapes into C. Generation is a loop around one
such pass, the decoding step: the step reads one token, its position and every layer's KV cache
(block_size positions, the ones not yet written hidden by the causal mask) and returns the logits
and the caches with this position's keys and values written in. export_c lowers that step like any
model; this file writes the loop around it in C: the byte-level BPE encoder (the pre-split of
tinyedu/text/split.py as a hand-written scanner, the merges as a table), the prompt fed through
the step one position at a time (prefill), greedy decoding (argmax of the logits) or sampling with
a temperature, top-k and seed by the portable rule of tinyedu/models/portable_sampling.py (SplitMix64;
tinyedu repeats it token for token), and the bytes
of every token printed as it comes. The program needs no Python.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from string import Template
from typing import Callable

import numpy as np

from tinyedu.core.dtype import dtypes
from tinyedu.export.model import ExportedProgram
from tinyedu.export.program import export_c
from tinyedu.models.gpt import GPT
from tinyedu.tensor import Tensor
from tinyedu.text.bpe import BPE

DEFAULT_NEW_TOKENS = 64


@dataclass
class StepCache:
    """One layer's keys and values as the step's inputs: what GPTAttention reads from a KVCache."""

    k: Tensor
    v: Tensor


# --8<-- [start:step]
def decoding_step(model: GPT) -> Callable[..., tuple[Tensor, ...]]:
    """One decoding step as a function of tensors: (token (1, 1), position (1,), k0, v0, k1, v1, ...)
    -> (logits (vocab,), k0', v0', ...). Every shape is fixed whatever the position: the caches hold
    block_size positions and the mask hides those after `position`, so export_c can take it."""
    def step(token: Tensor, position: Tensor, *caches: Tensor) -> tuple[Tensor, ...]:
        layers = [StepCache(k, v) for k, v in zip(caches[0::2], caches[1::2], strict=True)]
        logits, writes = model._forward(token, position, layers)
        return (logits.reshape(-1), *(written for _, written in writes))
    return step


def export_step(model: GPT, name: str = "gpt") -> ExportedProgram:
    """The decoding step as an ExportedProgram: inputs token, position, caches; outputs logits, caches."""
    head_dim = model.tok_emb.weight.shape[1] // model.n_heads
    cache_shape = (1, model.n_heads, model.block_size, head_dim)
    token = Tensor(np.zeros((1, 1), dtype=np.int32))
    position = Tensor(np.zeros(1, dtype=np.int32))
    caches = [Tensor(np.zeros(cache_shape, dtype=np.float32)) for _ in range(2 * len(model.blocks))]
    # the weights in the file whatever their size or PORT says: the driver is main, and it reads no sidecar
    return export_c(decoding_step(model), token, position, *caches, name=name, embed=True)
# --8<-- [end:step]


def merge_rules(bpe: BPE) -> list[tuple[int, int, int]]:
    """(left, right, merged token) in the order the tokenizer learned them: merge k makes token 256 + k."""
    return [(a, b, 256 + k) for k, (a, b) in enumerate(bpe.merges)]


def export_generator(model: GPT, bpe: BPE, path: str | os.PathLike, name: str = "gpt") -> Path:
    """Write the generator's C file to `path`: the exported step and the driver around it. `bpe` is the
    tokenizer the model was trained with (tinyedu.text); `name` names the C forward function."""
    if bpe.vocab_size != model.vocab_size:
        raise ValueError(f"export_generator: the tokenizer has {bpe.vocab_size} tokens (256 bytes + "
                         f"{len(bpe.merges)} merges) but the model's vocab_size is {model.vocab_size}")
    program = export_step(model, name)
    body = program.source[program.source.index("*/") + 2:]  # export_c's header describes its own main
    source = "\n".join([_header(program, model), "#define TINYEDU_NO_MAIN  /* the driver below is main */",
                        body, _tokenizer(bpe), _driver(program, model)])
    path = Path(path)
    path.write_text(source)
    return path


def _header(program: ExportedProgram, model: GPT) -> str:
    name, stats = program.name, program.stats
    return "\n".join([
        f"/* {name}.c: a tinyedu GPT that writes text, as a standalone C program (no Python).",
        f"   Build: cc -O2 {name}.c -o {name} -lm",
        f"   Run:   ./{name} \"PROMPT\" [NEW_TOKENS [TEMPERATURE TOP_K SEED]]",
        "     encodes the prompt with the byte-level BPE below, runs it through the decoding step one",
        "     position at a time, then picks the likeliest token (greedy; or samples it with TEMPERATURE,",
        "     TOP_K and SEED as tinyedu.models.portable_sampling does) NEW_TOKENS times (default: as",
        f"     many as fit, at most {DEFAULT_NEW_TOKENS}); it refuses (exit 1) a prompt and NEW_TOKENS past",
        f"     block_size = {model.block_size} positions; prints the prompt's and the new tokens' bytes.",
        f"   The step: {stats['kernels']} kernel calls ({stats['functions']} functions, rendered by "
        f"tinyedu); weights {stats['weight_bytes']} bytes;",
        f"   scratch memory {stats['scratch_bytes']} bytes. */"])


def _c_ints(values: list[int]) -> str:
    return ",\n  ".join(", ".join(str(v) for v in values[i:i + 16]) for i in range(0, len(values), 16))


# --8<-- [start:tokenizer]
TOKENIZER = Template(r"""
/* ---- the tokenizer: the pre-split, then byte-level BPE inside each piece ---- */
#define N_MERGES $n_merges
#define PRE_SPLIT $pre_split  /* 1: merges only inside the pieces of pre_split (tinyedu/text/split.py) */
static const int merges[$rows][3] = {  /* left, right, merged token: in the order they were learned */
  $merges
};
static const unsigned char piece_bytes[$n_bytes] = {  /* every token's bytes, one after another */
  $bytes
};
static const int piece_start[$n_starts] = {  /* token t is piece_bytes[piece_start[t] .. piece_start[t+1]) */
  $starts
};

/* the four byte classes of the pre-split; every byte is in exactly one */
static int is_space(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }
static int is_letter(unsigned char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c >= 0x80;
}
static int is_digit(unsigned char c) { return c >= '0' && c <= '9'; }
static int is_other(unsigned char c) { return !is_space(c) && !is_letter(c) && !is_digit(c); }

/* where the piece that starts at text[i] ends: the pattern's alternatives, tried in order */
static int piece_end(const unsigned char* t, int n, int i) {
  if (!PRE_SPLIT) return n;
  if (t[i] == '\'' && i + 1 < n) {  /* a contraction: 's 'd 'm 't 'll 've 're */
    unsigned char c = t[i + 1], d = i + 2 < n ? t[i + 2] : 0;
    if (c == 's' || c == 'd' || c == 'm' || c == 't') return i + 2;
    if ((c == 'l' && d == 'l') || (c == 'v' && d == 'e') || (c == 'r' && d == 'e')) return i + 3;
  }
  int j = (t[i] == ' ' && i + 1 < n) ? i + 1 : i;  /* at most one space before a word */
  int (*const classes[3])(unsigned char) = {is_letter, is_digit, is_other};
  for (int k = 0; k < 3; k++)
    if (classes[k](t[j])) {  /* a word, a number or a run of punctuation */
      while (j < n && classes[k](t[j])) j++;
      return j;
    }
  j = i;  /* whitespace: to the end, or all but the last byte before a non-space (it joins the word) */
  while (j < n && is_space(t[j])) j++;
  return (j == n || j - 1 == i) ? j : j - 1;
}

/* the earliest rule that merges (left, right), or N_MERGES when none does */
static int rule_of(int left, int right) {
  for (int r = 0; r < N_MERGES; r++)
    if (merges[r][0] == left && merges[r][1] == right) return r;
  return N_MERGES;
}

/* one piece's n tokens in ids, merged in place; their new count: apply the earliest rule that
   matches a pair, at every occurrence left to right, until no rule matches */
static int bpe_merge(int* ids, int n) {
  for (;;) {
    int best = N_MERGES;
    for (int i = 0; i + 1 < n; i++) {
      int r = rule_of(ids[i], ids[i + 1]);
      if (r < best) best = r;
    }
    if (best == N_MERGES) return n;
    int kept = 0;
    for (int i = 0; i < n; i++) {
      if (i + 1 < n && ids[i] == merges[best][0] && ids[i + 1] == merges[best][1]) {
        ids[kept++] = merges[best][2];
        i++;
      } else ids[kept++] = ids[i];
    }
    n = kept;
  }
}

/* text[0..n) as tokens in ids (room for n), their count: each piece's bytes, merged. Special tokens'
   text ("<|endoftext|>") is ordinary text here, as in BPE.encode without allowed_special */
static int bpe_encode(const unsigned char* text, int n, int* ids) {
  int count = 0;
  for (int i = 0; i < n;) {
    int end = piece_end(text, n, i);
    for (int j = i; j < end; j++) ids[count + j - i] = text[j];
    count += bpe_merge(ids + count, end - i);
    i = end;
  }
  return count;
}

static void print_token(int id) {
  size_t length = (size_t)(piece_start[id + 1] - piece_start[id]);
  fwrite(piece_bytes + piece_start[id], 1, length, stdout);
  fflush(stdout);
}
""")
# --8<-- [end:tokenizer]


def _tokenizer(bpe: BPE) -> str:
    """The tokenizer's tables and its encoder in C."""
    rules, pieces = merge_rules(bpe), bpe.vocab
    starts = np.cumsum([0] + [len(p) for p in pieces]).tolist()
    merges = ",\n  ".join(", ".join(f"{{{a}, {b}, {c}}}" for a, b, c in rules[i:i + 6])
                          for i in range(0, len(rules), 6))
    return TOKENIZER.substitute(n_merges=len(rules), pre_split=int(bpe.split), rows=max(len(rules), 1),
                                merges=merges or "{0, 0, 0}",
                                n_bytes=starts[-1], bytes=_c_ints(list(b"".join(pieces))),
                                n_starts=len(starts), starts=_c_ints(starts))


# --8<-- [start:driver]
# argmax and the portable sampler: the native driver and the wasm one (export/wasm_generator.py) share it
SAMPLER = r"""
static int argmax(const float* x, int n) {  /* the first of equal maxima, as numpy's */
  int best = 0;
  for (int i = 1; i < n; i++) if (x[i] > x[best]) best = i;
  return best;
}

/* sampling that tinyedu repeats (tinyedu/models/portable_sampling.py): SplitMix64, then the top_k
   largest logits (largest first, ties by the smaller id) weighted exp((logit - largest) / temperature),
   and the first token whose running sum of weights exceeds one uniform draw times their sum */
static unsigned long long rng_state;
static double next_uniform(void) {  /* SplitMix64's output, top 53 bits, in [0, 1) */
  unsigned long long z = (rng_state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  z ^= z >> 31;
  return (double)(z >> 11) * (1.0 / 9007199254740992.0);
}

static int order[VOCAB];
static double weights[VOCAB];
static int pick(const float* x, double temperature, int top_k) {
  if (temperature == 0.0 || top_k == 1) return argmax(x, VOCAB);
  for (int i = 0; i < VOCAB; i++) order[i] = i;
  for (int i = 0; i < top_k; i++) {  /* selection: the i-th largest into place i */
    int best = i;
    for (int j = i + 1; j < VOCAB; j++)
      if (x[order[j]] > x[order[best]] || (x[order[j]] == x[order[best]] && order[j] < order[best]))
        best = j;
    int swap = order[i]; order[i] = order[best]; order[best] = swap;
  }
  double largest = x[order[0]], total = 0.0;
  for (int i = 0; i < top_k; i++) {
    weights[i] = SAMPLER_EXP(((double)x[order[i]] - largest) / temperature);
    total += weights[i];
  }
  double threshold = next_uniform() * total, running = 0.0;
  for (int i = 0; i < top_k; i++) {
    running += weights[i];
    if (running > threshold) return order[i];
  }
  return order[top_k - 1];  /* u * total rounded up to the total: the last one */
}

"""

DRIVER = Template(r"""
/* ---- the generator: prefill, then greedy or sampled decoding ---- */
#include <math.h>
#include <time.h>
#define VOCAB $vocab
#define BLOCK_SIZE $block_size
#define DEFAULT_NEW_TOKENS $default_new
/* two sets of caches: a step reads one and writes the other (the forward's inputs and outputs may not
   overlap), then they swap; all zeros at first, which the mask hides until they are written */
static _Alignas(64) float caches[2][$n_caches][$cache_size];
static _Alignas(64) float logits[VOCAB];
static int now = 0;

/* one position through the model: the logits of the token after it */
static void step(int token, int position) {
  ${name}_forward(&token, &position, $reads, logits, $writes);
  now = 1 - now;
}

$sampler
static int parse_long(const char* text, long* out) {
  char* end = NULL;
  *out = strtol(text, &end, 10);
  return end != text && !*end;
}

int main(int argc, char** argv) {
  long wanted = DEFAULT_NEW_TOKENS, top_k = VOCAB, seed = 0;
  double temperature = 0.0;
  int ok = (argc == 2 || argc == 3 || argc == 6) && argv[1][0];
  if (ok && argc >= 3) ok = parse_long(argv[2], &wanted) && wanted >= 0;
  if (ok && argc == 6) {
    char* end = NULL;
    temperature = strtod(argv[3], &end);
    ok = end != argv[3] && !*end && temperature >= 0.0 && temperature < 1e30
         && parse_long(argv[4], &top_k) && top_k >= 0 && top_k <= VOCAB
         && parse_long(argv[5], &seed) && seed >= 0;
    if (top_k == 0) top_k = VOCAB;  /* 0: no cut-off */
  }
  if (!ok) {
    fprintf(stderr, "usage: %s \"PROMPT\" [NEW_TOKENS [TEMPERATURE TOP_K SEED]]  (a non-empty prompt; "
            "NEW_TOKENS >= 0, default %d; TEMPERATURE >= 0, 0 = greedy (the default); TOP_K in 0..%d, "
            "0 = all; SEED >= 0)\n", argv[0], DEFAULT_NEW_TOKENS, VOCAB);
    return 2;
  }
  rng_state = (unsigned long long)seed;
  int n_bytes = (int)strlen(argv[1]);
  int* ids = malloc(sizeof(int) * (size_t)n_bytes);
  if (!ids) { fprintf(stderr, "%s: out of memory\n", argv[0]); return 1; }
  int n = bpe_encode((const unsigned char*)argv[1], n_bytes, ids);
  if (n > BLOCK_SIZE) {
    fprintf(stderr, "%s: the prompt is %d tokens; the model has %d positions (block_size)\n",
            argv[0], n, BLOCK_SIZE);
    return 1;
  }
  if (argc == 2 && wanted > BLOCK_SIZE - n) wanted = BLOCK_SIZE - n;  /* the default: as many as fit */
  if (wanted > BLOCK_SIZE - n) {  /* no position beyond block_size: refuse, as tinyedu's generate does */
    fprintf(stderr, "%s: asked for %ld new tokens, but the prompt takes %d of the model's %d positions "
            "(block_size), which leaves room for %d; ask for at most that many\n", argv[0], wanted, n,
            BLOCK_SIZE, BLOCK_SIZE - n);
    free(ids);
    return 1;
  }
  clock_t start = clock();
  for (int i = 0; i < n; i++) {  /* prefill: the prompt's keys and values go into the caches */
    print_token(ids[i]);
    step(ids[i], i);
  }
  for (int i = 0; i < wanted; i++) {  /* decoding: the picked token, fed back in */
    int token = pick(logits, temperature, (int)top_k);
    print_token(token);
    if (i + 1 < wanted) step(token, n + i);
  }
  double seconds = (double)(clock() - start) / CLOCKS_PER_SEC;
  long steps = n + (wanted > 0 ? wanted - 1 : 0);
  fprintf(stderr, "\n%d prompt + %ld new tokens: %ld steps in %.4f s (%.0f steps/s)\n", n, wanted, steps,
          seconds, steps / (seconds > 0 ? seconds : 1e-9));
  free(ids);
  return 0;
}
""")
# --8<-- [end:driver]


def _driver(program: ExportedProgram, model: GPT) -> str:
    """main and the step around the exported forward pass, for this program's inputs and outputs."""
    if [dt for _, dt in program.inputs[:2]] != [dtypes.int32, dtypes.int32]:
        raise ValueError(f"export_generator: the step's token and position must be int32, got "
                         f"{[dt.name for _, dt in program.inputs[:2]]}")
    n_caches = len(program.inputs) - 2
    return DRIVER.substitute(sampler=SAMPLER.replace("SAMPLER_EXP", "exp"),
                             vocab=model.vocab_size, block_size=model.block_size,
                             default_new=DEFAULT_NEW_TOKENS, n_caches=n_caches,
                             cache_size=int(np.prod(program.inputs[2][0])), name=program.name,
                             reads=", ".join(f"caches[now][{i}]" for i in range(n_caches)),
                             writes=", ".join(f"caches[1 - now][{i}]" for i in range(n_caches)))


__all__ = ["export_generator", "export_step", "decoding_step", "merge_rules", "StepCache",
           "DEFAULT_NEW_TOKENS", "TOKENIZER", "DRIVER", "SAMPLER"]
