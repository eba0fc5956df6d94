"""Train the digit page's CNN (docs/lab_digits.md) and write its small checkpoint.

Chapter 08's CNN (tinyedu.models.MnistCNN), trained as notebook 11 trains it: MNIST's 10,000-image
test file split by `mnist_split` into 8,000 training digits and 2,000 held out, two passes of Adam
with a cosine learning rate over batches of 64, each image shifted by up to one pixel. The weights go
to docs/lab/digits_cnn.safetensors (about 20 KB, committed, so building the site trains nothing), and
the held-out accuracy to docs/lab/digits_cnn.json, which the page quotes.

    PYTHONPATH=. MNIST_PATH=/path/to/mnist python scripts/train_lab_digits.py
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from tinyedu import Tensor, TinyJit
from tinyedu.datasets import mnist
from tinyedu.models import MnistCNN
from tinyedu.models.tasks import mnist_split, normalize_mnist, shift_images
from tinyedu.nn.optim import Adam
from tinyedu.nn.state import get_parameters, get_state_dict, safe_save

OUT = Path(__file__).resolve().parents[1] / "docs" / "lab"


def main() -> None:
    Tensor.manual_seed(0)
    images, labels = mnist()
    train_idx, test_idx = mnist_split(images)
    x = normalize_mnist(images)
    cnn = MnistCNN()
    opt = Adam(get_parameters(cnn), lr=3e-3)

    @TinyJit
    def train_step(batch: Tensor, y: Tensor) -> Tensor:
        with Tensor.train():
            opt.zero_grad()
            loss = cnn(batch).cross_entropy(y).backward()
            opt.step()
        return loss

    per_pass = len(train_idx) // 64
    rng, steps = np.random.default_rng(1), 2 * per_pass
    for k in range(steps):
        if k % per_pass == 0:
            order = train_idx[rng.permutation(len(train_idx))]
        idx = order[(k % per_pass) * 64:(k % per_pass + 1) * 64]
        opt.lr.assign(3e-3 * 0.5 * (1 + math.cos(math.pi * k / steps)))
        train_step(Tensor(shift_images(x[idx], rng, float(x.min())).reshape(-1, 1, 28, 28)),
                   Tensor(labels[idx].astype(np.int32)))
    predicted = np.concatenate([cnn(Tensor(x[test_idx[s:s + 500]].reshape(-1, 1, 28, 28))).argmax(1).numpy()
                                for s in range(0, len(test_idx), 500)])
    accuracy = float((predicted == labels[test_idx]).mean())
    OUT.mkdir(parents=True, exist_ok=True)
    safe_save(get_state_dict(cnn), OUT / "digits_cnn.safetensors")
    facts = {"train_digits": len(train_idx), "held_out_digits": len(test_idx), "held_out_accuracy": accuracy,
             "source": "MNIST t10k file, split by tinyedu.models.tasks.mnist_split (seed 0)"}
    (OUT / "digits_cnn.json").write_text(json.dumps(facts, indent=1) + "\n")
    print(f"held-out accuracy {accuracy:.4f} on {len(test_idx)} digits; wrote {OUT}")


if __name__ == "__main__":
    main()
