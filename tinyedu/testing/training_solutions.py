"""Reference solutions for chapter 08's exercises (kept out of the notebook), and typical mistakes with
the hint each must get from its checker (tests/unit/test_checkers_training.py runs them all)."""

from __future__ import annotations

from typing import Any

from tinyedu import Tensor
from tinyedu.engine.jit import ItemFacts, JitItem
from tinyedu.engine.realize import Fill, HostCopy
from tinyedu.nn.optim import Optimizer


# --8<-- [start:momentum-sgd]
class MomentumSGD(Optimizer):
    """SGD with momentum: b = momentum * b + g, then p = p - lr * b, with b starting at zero."""

    def __init__(self, params: Any, lr: float, momentum: float):
        super().__init__(params, lr)
        self.momentum = momentum
        self.velocity = {id(p): self._zeros_like(p) for p in self.params}  # one buffer per parameter

    def update(self, p: Tensor, g: Tensor) -> list[tuple[Tensor, Tensor]]:
        b = self.velocity[id(p)]
        new_b = self.momentum * b + g
        return [(p, p - self.lr * new_b), (b, new_b)]
# --8<-- [end:momentum-sgd]


# --8<-- [start:replay-can-skip]
def replay_can_skip(item: JitItem, facts: ItemFacts) -> bool:
    return facts.constant and facts.made_in_step and facts.writers == 1 and not facts.returned
# --8<-- [end:replay-can-skip]


# ---- typical mistakes (each must fail its checker with the hint given next to it) ----
class ForgetsBuffer(MomentumSGD):
    def update(self, p: Tensor, g: Tensor) -> list[tuple[Tensor, Tensor]]:
        b = self.velocity[id(p)]
        return [(p, p - self.lr * (self.momentum * b + g))]  # the buffer is never written


class OldBuffer(MomentumSGD):
    def update(self, p: Tensor, g: Tensor) -> list[tuple[Tensor, Tensor]]:
        b = self.velocity[id(p)]
        return [(p, p - self.lr * (b + g)), (b, self.momentum * b + g)]


class PythonLearningRate(MomentumSGD):
    def __init__(self, params: Any, lr: float, momentum: float):
        super().__init__(params, lr, momentum)
        self.fixed_lr = lr

    def update(self, p: Tensor, g: Tensor) -> list[tuple[Tensor, Tensor]]:
        b = self.velocity[id(p)]
        new_b = self.momentum * b + g
        return [(p, p - self.fixed_lr * new_b), (b, new_b)]


class WrongSign(MomentumSGD):
    def update(self, p: Tensor, g: Tensor) -> list[tuple[Tensor, Tensor]]:
        b = self.velocity[id(p)]
        new_b = self.momentum * b + g
        return [(p, p + self.lr * new_b), (b, new_b)]


class RebindsBuffer(MomentumSGD):
    """Keeps the new buffer by rebinding a Python attribute instead of returning it to be assigned."""

    def update(self, p: Tensor, g: Tensor) -> list[tuple[Tensor, Tensor]]:
        new_b = self.momentum * self.velocity[id(p)] + g
        self.velocity[id(p)] = new_b  # a new lazy tensor each step; a replay runs no Python to do this
        return [(p, p - self.lr * new_b)]


def skip_nothing(item: JitItem, facts: ItemFacts) -> bool:
    return False


def skip_every_constant(item: JitItem, facts: ItemFacts) -> bool:
    return isinstance(item.program, (HostCopy, Fill))


def skip_ignoring_writers(item: JitItem, facts: ItemFacts) -> bool:
    return facts.constant and facts.made_in_step and not facts.returned


def skip_ignoring_returned(item: JitItem, facts: ItemFacts) -> bool:
    return facts.constant and facts.made_in_step and facts.writers == 1


MOMENTUM_MISTAKES = [
    (ForgetsBuffer, "never carries over"),
    (OldBuffer, "with the \\*new\\* buffer"),
    (PythonLearningRate, "ignores the new values"),
    (WrongSign, "check the sign"),
    (RebindsBuffer, "keep all state in tensors that update\\(\\) returns"),
]
SKIP_MISTAKES = [
    (skip_nothing, "can be skipped"),
    (skip_every_constant, "memory from before the step"),
    (skip_ignoring_writers, "another program also writes this buffer"),
    (skip_ignoring_returned, "the step returns this buffer"),
]
