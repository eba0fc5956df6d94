"""Training an MLP of Values: a loss and a plain stochastic-gradient-descent loop.

Kept apart from `nn.py` because it is the part a learner changes most (loss, learning rate,
regularization), and so the loop can be read top to bottom in one screen.
"""

from __future__ import annotations

import gc
from typing import Sequence

from tinyedu.scalar.nn import Module
from tinyedu.scalar.value import Value


# --8<-- [start:loss]
def hinge_loss(model: Module, X: Sequence[Sequence[float]], y: Sequence[int],
               alpha: float = 1e-4) -> tuple[Value, float]:
    """The SVM "max-margin" loss of `model` on (X, y), plus an L2 penalty; and the accuracy.

    `y` must hold labels -1 or +1. A sample costs nothing once its score has the right sign with
    a margin of at least 1, and costs linearly otherwise: `relu(1 - y * score)`. The L2 term
    `alpha * sum(p**2)` keeps the weights small, which keeps the decision boundary smooth.
    """
    if len(X) != len(y) or len(y) == 0:
        raise ValueError(f"hinge_loss: X and y must be non-empty and of equal length, got {len(X)} "
                         f"and {len(y)}")
    if any(label not in (-1, 1) for label in y):
        raise ValueError("hinge_loss: labels must be -1 or +1; convert 0/1 labels with y = 2 * y - 1")
    scores = [model([float(v) for v in x]) for x in X]
    margins = [(1 - int(label) * score).relu() for label, score in zip(y, scores, strict=True)]
    data_loss = sum(margins, Value(0.0)) / len(y)
    reg_loss = alpha * sum((p * p for p in model.parameters()), Value(0.0))
    accuracy = sum((score.data > 0) == (label > 0) for label, score in zip(y, scores, strict=True)) / len(y)
    return data_loss + reg_loss, accuracy
# --8<-- [end:loss]


# --8<-- [start:fit]
def fit(model: Module, X: Sequence[Sequence[float]], y: Sequence[int], steps: int = 50,
        learning_rate: float = 0.5, alpha: float = 1e-4) -> list[tuple[float, float]]:
    """Full-batch gradient descent on `hinge_loss`; returns (loss, accuracy) for every step.

    The learning rate decays linearly from `learning_rate` to a tenth of it, so that early steps
    move far and late steps settle. Each step is the whole recipe of training:
    forward (build the loss graph), zero the old gradients, backward, and nudge every parameter
    against its gradient.
    """
    history = []
    with _cycle_collector_paused():
        for step in range(steps):
            loss, accuracy = hinge_loss(model, X, y, alpha)  # forward: build the graph
            model.zero_grad()  # gradients accumulate, so clear last step's first
            loss.backward()
            lr = learning_rate * (1.0 - 0.9 * step / steps)
            for p in model.parameters():
                p.data -= lr * p.grad  # downhill: against the gradient
            history.append((loss.data, accuracy))
    return history
# --8<-- [end:fit]


# --8<-- [start:gc]
class _cycle_collector_paused:
    """Pause Python's cycle collector for a block; reference counting still frees memory.

    A Value graph has no reference cycles (a `_backward` closure points to its inputs, never to
    its output), so reference counting frees each step's graph as soon as the next replaces it.
    The cycle collector would find nothing to free, yet it rescans every live node each time
    enough objects are allocated, which costs about 5x the training step itself.
    """

    def __enter__(self) -> None:
        self.was_enabled = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc: object) -> None:
        if self.was_enabled:
            gc.enable()
# --8<-- [end:gc]
