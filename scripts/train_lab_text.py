"""Train the text page's GPT (docs/lab_text.md) and write its small checkpoint and tokenizer.

Chapter 13's model and recipe (notebooks/13_language_model.ipynb): the byte-level BPE of 512 tokens
(255 merges inside the pre-split's pieces, then `<|endoftext|>`) learned on the training part of the
course's corpus (tinyedu.text.corpus_split: 35 modules of Python's standard library, the last 5 held
out), every module's tokens followed by `<|endoftext|>`; the chapter's "large" GPT (512 tokens, 64
positions, RoPE, 4 heads, 3 layers of width 96, 384,864 parameters) trained by `train_gpt` with the
chapter's recipe (windows of 65 tokens, batches of 16, AdamW at 3e-3 with 50 warmup steps, a cosine
down to a tenth, gradients clipped to norm 1) for 1,500 steps where the chapter takes 500: three times
the compute, which brings the validation loss from about 3.5 to about 3.0 nats per token. Seeded
(Tensor.manual_seed(0), train_gpt's seed 0), so a rerun gives the same model up to the float rounding
of the machine's kernels.

It writes, all committed so that building the site trains nothing:
- docs/lab/text_gpt.safetensors: the weights (about 1.5 MB);
- docs/lab/text_bpe.json: the tokenizer (BPE.save; train_bpe is deterministic, but loading it takes
  no time where learning it again takes seconds at every site build);
- docs/lab/text_gpt.json: the model's shape and what the page quotes (the validation loss, bits per
  byte, the training tokens).

    PYTHONPATH=. THREADS=1 python scripts/train_lab_text.py      (about 3 minutes on one core)
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import numpy as np

from tinyedu import Tensor
from tinyedu.models import GPT
from tinyedu.models.gpt import train_gpt
from tinyedu.nn.state import get_parameters, get_state_dict, safe_save
from tinyedu.tensor_api.grad_mode import no_grad
from tinyedu.text import BPE, END_OF_TEXT, corpus_split, train_bpe
from tinyedu.text.corpus import split_modules

OUT = Path(__file__).resolve().parents[1] / "docs" / "lab"
VOCAB, BLOCK, DIM, HEADS, LAYERS = 512, 64, 96, 4, 3  # chapter 13's "large" model
STEPS, BATCH, LR = 1500, 16, 3e-3


def encode_modules(bpe: BPE, text: bytes) -> np.ndarray:
    """Every module's tokens with <|endoftext|> after each, as chapter 13 encodes the corpus."""
    eot = bpe.special_tokens[END_OF_TEXT]
    chunks = [np.append(bpe.encode(chunk), eot) for _, chunk in split_modules(text)]
    return np.concatenate(chunks).astype(np.int32)


def new_model() -> GPT:
    Tensor.manual_seed(0)
    return GPT(VOCAB, BLOCK, dim=DIM, n_heads=HEADS, n_layers=LAYERS, positions="rope")


def validation_loss(model: GPT, val_ids: np.ndarray, batch: int = 16) -> float:
    """The mean loss over every non-overlapping window of the validation ids (the chapter's val_loss)."""
    starts = np.arange(0, len(val_ids) - BLOCK - 1, BLOCK)
    starts = starts[:len(starts) // batch * batch]
    data = np.stack([val_ids[s:s + BLOCK + 1] for s in starts]).astype(np.int32)
    with no_grad():
        losses = [model.loss(Tensor(data[i:i + batch])).item() for i in range(0, len(data), batch)]
    return float(np.mean(losses))


def main() -> None:
    began = time.perf_counter()
    train_text, val_text = corpus_split()
    bpe = train_bpe(train_text, VOCAB, special_tokens=[END_OF_TEXT])
    train_ids, val_ids = encode_modules(bpe, train_text), encode_modules(bpe, val_text)
    model = new_model()
    train_gpt(model, train_ids, steps=STEPS, batch=BATCH, lr=LR, seed=0, warmup_steps=50, min_lr=LR / 10,
              clip=1.0)
    loss = validation_loss(model, val_ids)
    OUT.mkdir(parents=True, exist_ok=True)
    safe_save(get_state_dict(model), OUT / "text_gpt.safetensors")
    bpe.save(OUT / "text_bpe.json")
    facts = {"vocab_size": VOCAB, "block_size": BLOCK, "dim": DIM, "n_heads": HEADS, "n_layers": LAYERS,
             "positions": "rope", "parameters": sum(p.numel() for p in get_parameters(model)),
             "steps": STEPS, "batch": BATCH, "train_tokens": len(train_ids),
             "validation_tokens": len(val_ids),
             "validation_loss": round(loss, 4),
             "bits_per_byte": round(loss * len(val_ids) / len(val_text) / math.log(2), 4),
             "source": "tinyedu.text.corpus_split(): 35 modules of CPython 3.11.7's Lib/ to train, "
                       "5 held out"}
    (OUT / "text_gpt.json").write_text(json.dumps(facts, indent=1) + "\n")
    print(f"validation loss {loss:.3f} nats per token ({facts['bits_per_byte']:.3f} bits per byte) after "
          f"{STEPS} steps; {time.perf_counter() - began:.0f} s; wrote {OUT}")
    print(bpe.decode_text(model.generate(bpe.encode("def "), 48)))


if __name__ == "__main__":
    main()
