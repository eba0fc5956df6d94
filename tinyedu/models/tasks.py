"""The tasks the models train on: generated, so nothing needs a download, and each with a measurable target.

- Addition (Transformer): "123+045=" followed by the sum's digits, least significant first
  ("8610" for 168), the order a person adds in. Exact-match accuracy on problems held out from
  training: every digit of the answer right.
- The adding problem (LSTM; Hochreiter & Schmidhuber, 1997): a sequence of random numbers, two of
  them marked; predict the sum of the two marked ones. Always answering 1 gives a mean squared error
  of about 0.167; solving it means remembering the marked numbers across the whole sequence.
- MNIST (ResNet): the split chapter 08 uses (8,000 training and 2,000 held-out images from the
  10,000-image file), normalized the same way.
"""

from __future__ import annotations

import numpy as np

# ---------------------------------------------------------------------------------------------
# Addition
# ---------------------------------------------------------------------------------------------
# --8<-- [start:addition]
PLUS, EQUALS = 10, 11   # tokens 0..9 are the digits
ADDITION_VOCAB = 12
ADDITION_CHARS = "0123456789+="


class Addition:
    """n-digit addition problems as token sequences, with a fixed held-out set.

    A problem a + b is written as n digits of a, '+', n digits of b, '=', then the n + 1 digits of the
    sum reversed: with n = 3, 123 + 45 is "123+045=8610". The model reads the first 2n + 2 tokens
    and must produce the last n + 1.
    """

    def __init__(self, digits: int = 3, held_out: int = 1000, seed: int = 0):
        if not isinstance(digits, int) or not 1 <= digits <= 6:
            raise ValueError(f"Addition: digits must be an int in 1..6, got {digits!r}")
        self.digits = digits
        self.prompt_length = 2 * digits + 2            # "123+045="
        self.length = self.prompt_length + digits + 1  # and the answer "8610"
        count = 10 ** digits
        if not 0 < held_out <= count * count // 2:
            raise ValueError(f"Addition: held_out must be in 1..{count * count // 2}, got {held_out!r}")
        rng = np.random.default_rng(seed)
        # held-out problems, distinct; training draws from everything else
        codes = rng.choice(count * count, size=held_out, replace=False)
        self.test = np.stack([codes // count, codes % count], axis=1)
        self._held_out_codes = np.sort(codes)

    def encode(self, problems: np.ndarray) -> np.ndarray:
        """(n, 2) pairs of numbers -> (n, length) token sequences."""
        problems = np.asarray(problems, dtype=np.int64)
        a, b = problems[:, 0], problems[:, 1]
        columns = [_digits(a, self.digits), [np.full(len(a), PLUS)], _digits(b, self.digits),
                   [np.full(len(a), EQUALS)], _digits(a + b, self.digits + 1)[::-1]]
        return np.stack([c for part in columns for c in part], axis=1)

    def decode_answer(self, tokens: np.ndarray) -> np.ndarray:
        """The number written (reversed) in the answer tokens of (n, length) sequences."""
        answer = np.asarray(tokens)[:, self.prompt_length:self.length]
        return (answer * 10 ** np.arange(self.digits + 1)).sum(axis=1)

    def train_batch(self, batch: int, rng: np.random.Generator) -> np.ndarray:
        """`batch` random problems that are not in the held-out set, encoded."""
        count = 10 ** self.digits
        codes = rng.integers(0, count * count, size=2 * batch)
        codes = codes[~np.isin(codes, self._held_out_codes, assume_unique=False)][:batch]
        while len(codes) < batch:  # (only with a held-out set that is a large part of all problems)
            more = rng.integers(0, count * count, size=batch)
            codes = np.concatenate([codes, more[~np.isin(more, self._held_out_codes)]])[:batch]
        return self.encode(np.stack([codes // count, codes % count], axis=1))

    def text(self, tokens: np.ndarray) -> str:
        return "".join(ADDITION_CHARS[t] for t in tokens)
# --8<-- [end:addition]


def _digits(numbers: np.ndarray, width: int) -> list[np.ndarray]:
    """The `width` decimal digits of each number, most significant first (one array per position)."""
    return [(numbers // 10 ** (width - 1 - k)) % 10 for k in range(width)]


# ---------------------------------------------------------------------------------------------
# The adding problem
# ---------------------------------------------------------------------------------------------
# --8<-- [start:adding-problem]
def adding_problem(batch: int, length: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Inputs (batch, length, 2) float32 and targets (batch,) float32.

    Channel 0 holds numbers from U(0, 1); channel 1 is 1 at exactly two steps (one in each half of
    the sequence) and 0 elsewhere. The target is the sum of the two marked numbers.
    """
    if length < 2:
        raise ValueError(f"adding_problem: the sequence needs at least 2 steps, got length={length}")
    values = rng.random((batch, length)).astype(np.float32)
    half = length // 2
    first = rng.integers(0, half, batch)
    second = rng.integers(half, length, batch)
    marks = np.zeros((batch, length), dtype=np.float32)
    marks[np.arange(batch), first] = 1
    marks[np.arange(batch), second] = 1
    targets = (values * marks).sum(axis=1).astype(np.float32)
    return np.stack([values, marks], axis=2), targets
# --8<-- [end:adding-problem]


# ---------------------------------------------------------------------------------------------
# MNIST, split as chapter 08 splits it
# ---------------------------------------------------------------------------------------------
# --8<-- [start:mnist-split]
MNIST_MEAN, MNIST_STD = 0.1307, 0.3081  # over MNIST's training images, the usual constants


def mnist_split(images: np.ndarray, n_train: int = 8000, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Indices (train, held out) of a fixed shuffle of the images: chapter 08's split of the 10k file."""
    order = np.random.default_rng(seed).permutation(len(images))
    return order[:n_train], order[n_train:]


def normalize_mnist(images: np.ndarray) -> np.ndarray:
    """uint8 pixels -> float32 with about mean 0 and standard deviation 1."""
    return ((images.astype(np.float32) / 255 - MNIST_MEAN) / MNIST_STD).astype(np.float32)


def shift_images(batch: np.ndarray, rng: np.random.Generator, background: float) -> np.ndarray:
    """Each (28, 28) image moved by dy, dx in {-1, 0, 1}: the augmentation chapter 08 trains with."""
    n, height, width = batch.shape
    padded = np.pad(batch, ((0, 0), (1, 1), (1, 1)), constant_values=background)
    dy, dx = rng.integers(0, 3, (2, n))
    rows = (dy[:, None] + np.arange(height))[:, :, None]
    cols = (dx[:, None] + np.arange(width))[:, None, :]
    return padded[np.arange(n)[:, None, None], rows, cols]
# --8<-- [end:mnist-split]


__all__ = ["Addition", "ADDITION_VOCAB", "ADDITION_CHARS", "PLUS", "EQUALS", "adding_problem", "mnist_split",
           "normalize_mnist", "shift_images", "MNIST_MEAN", "MNIST_STD"]
