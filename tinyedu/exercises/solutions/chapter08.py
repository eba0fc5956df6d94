"""Chapter 08 (training on MNIST): reference solutions, and typical mistakes with the hint they get."""

from __future__ import annotations

from typing import Any

from tinyedu import Tensor, jit
from tinyedu.engine.realize import Fill, HostCopy
from tinyedu.exercises.registry import Mistake
from tinyedu.jit import ItemFacts, JitItem
from tinyedu.nn.optim import SGD, Optimizer

# --8<-- [start:new_kernels]
# Each new lr is a literal in the kernels that compute p - lr * grad. With plain SGD that update fuses
# after the reduce that computes the parameter's gradient: one kernel for the weight, one for the bias.
# Everything else (forward, loss, backward) is the same AST as in the first step: cached.
new_kernels = 8  # 4 steps x 2 kernels
# --8<-- [end:new_kernels]


# --8<-- [start:MomentumSGD]
class MomentumSGD(Optimizer):
    """SGD with momentum: b = momentum * b + g, then p = p - lr * b, with b starting at zero."""

    def __init__(self, params: Any, lr: float, momentum: float):
        super().__init__(params, lr)
        self.momentum = momentum
        self.velocity = {id(p): self._zeros_like(p) for p in self.params}  # one buffer per parameter

    def update(self, p: Tensor, g: Tensor) -> list[tuple[Tensor, Tensor]]:
        b = self.velocity[id(p)]
        new_b = self.momentum * b + g
        return [(p, p - self.lr * new_b), (b, new_b)]  # step() assigns both, in place
# --8<-- [end:MomentumSGD]


# --8<-- [start:replay_can_skip]
# the same data (constant), into memory nobody outside the step sees (made_in_step), that no other
# program overwrites (writers == 1) and that is not handed back as fresh memory (not returned)
replay_can_skip = jit.replay_can_skip
# --8<-- [end:replay_can_skip]


# ---- typical mistakes -------------------------------------------------------------------------------
class _ForgetsBuffer(MomentumSGD):
    def update(self, p: Tensor, g: Tensor) -> list[tuple[Tensor, Tensor]]:
        b = self.velocity[id(p)]
        return [(p, p - self.lr * (self.momentum * b + g))]  # the buffer is never written


class _OldBuffer(MomentumSGD):
    def update(self, p: Tensor, g: Tensor) -> list[tuple[Tensor, Tensor]]:
        b = self.velocity[id(p)]
        return [(p, p - self.lr * (b + g)), (b, self.momentum * b + g)]


class _PythonLearningRate(MomentumSGD):
    def __init__(self, params: Any, lr: float, momentum: float):
        super().__init__(params, lr, momentum)
        self.fixed_lr = lr

    def update(self, p: Tensor, g: Tensor) -> list[tuple[Tensor, Tensor]]:
        b = self.velocity[id(p)]
        new_b = self.momentum * b + g
        return [(p, p - self.fixed_lr * new_b), (b, new_b)]


class _WrongSign(MomentumSGD):
    def update(self, p: Tensor, g: Tensor) -> list[tuple[Tensor, Tensor]]:
        b = self.velocity[id(p)]
        new_b = self.momentum * b + g
        return [(p, p + self.lr * new_b), (b, new_b)]


class _RebindsBuffer(MomentumSGD):
    """Keeps the new buffer by rebinding a Python attribute instead of returning it to be assigned."""

    def update(self, p: Tensor, g: Tensor) -> list[tuple[Tensor, Tensor]]:
        new_b = self.momentum * self.velocity[id(p)] + g
        self.velocity[id(p)] = new_b  # a new lazy tensor each step; a replay runs no Python to do this
        return [(p, p - self.lr * new_b)]


class _ReturnsNewValue(MomentumSGD):
    def update(self, p: Tensor, g: Tensor) -> Any:
        b = self.velocity[id(p)]
        return p - self.lr * (self.momentum * b + g)  # a tensor, not (tensor, new value) pairs


class _InheritsSGD(SGD):
    def __init__(self, params: Any, lr: float, momentum: float):
        super().__init__(params, lr=lr, momentum=momentum)


def _momentum_sgd_function(params: Any, lr: float, momentum: float) -> Optimizer:
    return MomentumSGD(params, lr, momentum)


def _skip_nothing(item: JitItem, facts: ItemFacts) -> bool:
    return False


def _skip_every_constant(item: JitItem, facts: ItemFacts) -> bool:
    return isinstance(item.program, (HostCopy, Fill))


def _skip_ignoring_writers(item: JitItem, facts: ItemFacts) -> bool:
    return facts.constant and facts.made_in_step and not facts.returned


def _skip_ignoring_returned(item: JitItem, facts: ItemFacts) -> bool:
    return facts.constant and facts.made_in_step and facts.writers == 1


def _skip_as_text(item: JitItem, facts: ItemFacts) -> Any:
    return "yes" if replay_can_skip(item, facts) else ""  # a truthy string is not a bool


MISTAKES = [
    Mistake("08.new_kernels", 0, "keyed by the kernel's AST, literal included",
            "a Python learning rate is free"),
    Mistake("08.new_kernels", 4, "the weight *and* of the bias", "one new kernel per step"),
    Mistake("08.new_kernels", 4 * 10, "Count only the kernels that compute",
            "every kernel of the step is new"),
    Mistake("08.new_kernels", 8.0, "as an int"),
    Mistake("08.momentum_sgd", _ForgetsBuffer, "never carries over"),
    Mistake("08.momentum_sgd", _OldBuffer, "with the *new* buffer"),
    Mistake("08.momentum_sgd", _PythonLearningRate, "ignores the new values"),
    Mistake("08.momentum_sgd", _WrongSign, "check the sign"),
    Mistake("08.momentum_sgd", _RebindsBuffer, "keep all state in tensors that update() returns"),
    Mistake("08.momentum_sgd", _ReturnsNewValue, "a list of (tensor, new value) pairs"),
    Mistake("08.momentum_sgd", _InheritsSGD, "subclass Optimizer itself"),
    Mistake("08.momentum_sgd", _momentum_sgd_function, "not an instance or a function",
            "a function, not a class"),
    Mistake("08.replay_can_skip", _skip_nothing, "can be skipped"),
    Mistake("08.replay_can_skip", _skip_every_constant, "memory from before the step"),
    Mistake("08.replay_can_skip", _skip_ignoring_writers, "another program also writes this buffer"),
    Mistake("08.replay_can_skip", _skip_ignoring_returned, "the step returns this buffer"),
    Mistake("08.replay_can_skip", _skip_as_text, "must return True or False"),
]
