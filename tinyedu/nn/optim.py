"""Optimizers: SGD (momentum, Nesterov, weight decay), Adam and AdamW, with PyTorch's update rules.

An optimizer holds the parameters and some state per parameter (a momentum buffer, Adam's two
moving averages). `zero_grad()` forgets the gradients; `step()` computes every new value (of the
parameters and of the state) and writes them all in place with one `Tensor.assign_all`, so that the
model, its views and a captured TinyJit step all see the update.

Which numbers are literals in the kernels, and which are kernel arguments: a Python number in a
Tensor expression becomes a literal in the generated C (`x * 0.9f`), so a number that changes
every step would compile a new kernel every step. So everything that changes during training
lives in a tensor in memory, which kernels read like any other input: the learning rate (change it
with `opt.lr.assign(new_lr)`, and nothing recompiles) and Adam's step-dependent factors beta^t.
Numbers that are fixed for the whole run (betas, eps, momentum, weight decay) stay literals, which
lets the compiler fold them.
"""

from __future__ import annotations

import math
from typing import Iterable

import numpy as np

import tinyedu.core.nn as core
from tinyedu.core.dtype import dtypes
from tinyedu.tensor import Tensor
from tinyedu.tensor_api.grad_mode import no_grad


# --8<-- [start:optimizer]
class Optimizer(core.Optimizer):
    """What every optimizer shares: the parameters, the learning rate tensor, zero_grad() and step().

    The core's Optimizer (tinyedu/core/nn.py) with more: zero_grad() and step() are the core's
    (step writes what `updates()` gives), and this class fills in its two seams: `updates()` asks
    each parameter's `update(p, g)` (and `step_state()`), and `write` assigns them all in place, at
    once. A subclass says how to update one parameter: `update(p, g)` returns the list of (tensor, new
    value) pairs for that parameter (the parameter itself and any state it keeps), built from p, its
    gradient g and the optimizer's tensors.
    """

    def __init__(self, params: Iterable[Tensor], lr: float):
        params = list(dict.fromkeys(params))  # in order, each once
        if not params:
            raise ValueError(f"{type(self).__name__}: got an empty parameter list")
        for p in params:
            if not isinstance(p, Tensor) or not p.requires_grad:
                what = type(p).__name__ if not isinstance(p, Tensor) else f"a tensor of shape {p.shape}"
                raise ValueError(f"{type(self).__name__}: every parameter must be a Tensor with "
                                 f"requires_grad=True, got {what}")
        _check_number(type(self).__name__, "lr", lr, 0.0)
        super().__init__(params, lr)  # (the core keeps them; below, lr becomes a tensor in memory)
        Tensor.realize_all(*self.params)
        for p in self.params:  # memory of their own (a constant like Tensor.ones has none), written in place
            p.lazydata = p.lazydata.writable()
        # in memory (not a literal): kernels read it, so a new value compiles nothing new
        self.lr = Tensor(np.array(lr, dtype=np.float32), device=self.params[0].device).realize()

    def updates(self) -> list[tuple[Tensor, Tensor]]:
        """What step() writes: update(p, g) of every parameter that has a gradient, and step_state()."""
        pairs = []
        with no_grad():
            for p in self.params:
                if p.grad is None:
                    continue  # not used by the loss: PyTorch leaves it alone too
                pairs += self.update(p, p.grad.detach())
            pairs += self.step_state()
        return pairs

    def write(self, updates: list[tuple[Tensor, Tensor]]) -> None:
        """In place, all at once (one assign_all), so views of a parameter and TinyJit see the update."""
        Tensor.assign_all([target for target, _ in updates], [value for _, value in updates])

    def update(self, p: Tensor, g: Tensor) -> list[tuple[Tensor, Tensor]]:
        raise NotImplementedError(f"{type(self).__name__}.update: return [(p, new value of p), ...]")

    def step_state(self) -> list[tuple[Tensor, Tensor]]:
        """State shared by all parameters that changes every step (Adam's beta^t); none by default."""
        return []

    def _zeros_like(self, p: Tensor) -> Tensor:
        """A state buffer in memory of its own (not a constant), so it can be assigned."""
        return Tensor.zeros(p.shape, dtype=p.dtype, device=p.device).contiguous().realize()
# --8<-- [end:optimizer]


# --8<-- [start:sgd]
class SGD(Optimizer):
    """Stochastic gradient descent, as torch.optim.SGD:

        g = grad + weight_decay * p
        b = momentum * b + (1 - dampening) * g      (b = g on the first step)
        g = g + momentum * b if nesterov else b     (when momentum != 0)
        p = p - lr * g
    """

    def __init__(self, params: Iterable[Tensor], lr: float = 0.001, momentum: float = 0.0,
                 dampening: float = 0.0, weight_decay: float = 0.0, nesterov: bool = False):
        super().__init__(params, lr)
        for name, value in (("momentum", momentum), ("dampening", dampening), ("weight_decay", weight_decay)):
            _check_number("SGD", name, value, 0.0)
        if nesterov and (momentum == 0 or dampening != 0):
            raise ValueError("SGD: Nesterov momentum needs momentum > 0 and dampening = 0")
        self.momentum, self.dampening, self.nesterov = momentum, dampening, nesterov
        self.weight_decay = weight_decay
        self.buffers = {id(p): self._zeros_like(p) for p in self.params} if momentum else {}
        # PyTorch's first step sets b = g. With a zero buffer, momentum * 0 + g already is g; only
        # dampening needs to know which step it is, so only then is there a tensor that says so.
        first_step = momentum and dampening
        self.first = Tensor(np.array(True), device=self.params[0].device).realize() if first_step else None

    def update(self, p: Tensor, g: Tensor) -> list[tuple[Tensor, Tensor]]:
        if self.weight_decay:
            g = g + self.weight_decay * p
        pairs = []
        if self.momentum:
            b = self.buffers[id(p)]
            new_b = self.momentum * b + (1 - self.dampening) * g
            if self.first is not None:
                new_b = self.first.where(g, new_b)
            pairs.append((b, new_b))
            g = g + self.momentum * new_b if self.nesterov else new_b
        return [(p, p - self.lr * g), *pairs]

    def step_state(self) -> list[tuple[Tensor, Tensor]]:
        if self.first is None:
            return []
        return [(self.first, Tensor.zeros((), dtype=dtypes.bool, device=self.first.device))]
# --8<-- [end:sgd]


# --8<-- [start:adam]
class Adam(Optimizer):
    """Adam, as torch.optim.Adam (L2 weight decay added to the gradient):

        m = beta1 * m + (1 - beta1) * g             v = beta2 * v + (1 - beta2) * g^2
        p = p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)

    beta1^t and beta2^t live in memory and are multiplied by beta each step on the device.
    """

    decoupled = False  # AdamW: weight decay shrinks p directly instead of entering the gradient

    def __init__(self, params: Iterable[Tensor], lr: float = 0.001, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.0):
        super().__init__(params, lr)
        name = type(self).__name__
        if not (isinstance(betas, (tuple, list)) and len(betas) == 2):
            raise ValueError(f"{name}: betas must be a pair (beta1, beta2), got {betas!r}")
        for i, beta in enumerate(betas):
            _check_number(name, f"betas[{i}]", beta, 0.0, 1.0)
        _check_number(name, "eps", eps, 0.0)
        _check_number(name, "weight_decay", weight_decay, 0.0)
        self.b1, self.b2, self.eps, self.weight_decay = betas[0], betas[1], eps, weight_decay
        self.m = {id(p): self._zeros_like(p) for p in self.params}
        self.v = {id(p): self._zeros_like(p) for p in self.params}
        device = self.params[0].device
        self.b1_t = Tensor(np.array(1.0, dtype=np.float32), device=device).realize()  # beta1^t, t steps done
        self.b2_t = Tensor(np.array(1.0, dtype=np.float32), device=device).realize()

    def step(self) -> None:
        self._factors = None  # this step's shared factors, made by the first update (see factors())
        try:
            super().step()
        finally:
            self._factors = None

    def factors(self) -> tuple[Tensor, Tensor, Tensor | None]:
        """What every parameter's update shares: lr / (1 - beta1^t), sqrt(1 - beta2^t) and AdamW's
        1 - lr * weight_decay (beta^t: this step's, the nodes step_state assigns). Made once a step:
        the graph would be the same per parameter anyway (equal nodes are shared), but building it
        twelve times is Python time."""
        if getattr(self, "_factors", None) is None:
            b1_t, b2_t = self.b1_t * self.b1, self.b2_t * self.b2
            shrink = 1 - self.lr * self.weight_decay if self.weight_decay and self.decoupled else None
            self._factors = (self.lr / (1 - b1_t), (1 - b2_t).sqrt(), shrink)
        return self._factors

    def update(self, p: Tensor, g: Tensor) -> list[tuple[Tensor, Tensor]]:
        step_size, root_b2, shrink = self.factors()
        new_p = p
        if shrink is not None:
            new_p = p * shrink
        elif self.weight_decay:
            g = g + self.weight_decay * p
        m, v = self.m[id(p)], self.v[id(p)]
        new_m = m + (1 - self.b1) * (g - m)  # = beta1 * m + (1 - beta1) * g, rounded as torch's lerp_
        new_v = self.b2 * v + (1 - self.b2) * g * g
        denominator = new_v.sqrt() / root_b2 + self.eps
        return [(p, new_p - step_size * (new_m / denominator)), (m, new_m), (v, new_v)]

    def step_state(self) -> list[tuple[Tensor, Tensor]]:
        return [(self.b1_t, self.b1_t * self.b1), (self.b2_t, self.b2_t * self.b2)]


class AdamW(Adam):
    """Adam with decoupled weight decay (torch.optim.AdamW): p = p * (1 - lr * weight_decay) before the
    Adam step, instead of adding weight_decay * p to the gradient. Default weight_decay = 0.01."""

    decoupled = True

    def __init__(self, params: Iterable[Tensor], lr: float = 0.001, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.01):
        super().__init__(params, lr, betas, eps, weight_decay)
# --8<-- [end:adam]


def _check_number(owner: str, name: str, value: object, low: float, high: float | None = None) -> None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value >= low
    if not ok or (high is not None and value >= high):
        bound = f"in [{low}, {high})" if high is not None else f">= {low}"
        raise ValueError(f"{owner}: {name} must be a number {bound}, got {value!r}")


# --8<-- [start:schedule]
class WarmupCosine:
    """The learning rate of nanoGPT and GPT-3: a linear warmup, then a cosine decay to `min_lr`.

        step t < warmup:      lr = max_lr * (t + 1) / warmup
        warmup <= t < total:  lr = min_lr + (max_lr - min_lr) * (1 + cos(pi * progress)) / 2,
                              progress = (t - warmup) / (total - warmup), from 0 to 1
        t >= total:           lr = min_lr

    Why: at the start Adam's moment estimates come from a handful of gradients and the weights are
    random, so full-size steps can throw the model somewhere it never recovers from; a few small steps
    first avoid that. Late in training, smaller steps settle into the minimum instead of bouncing around
    it. `step()` after each `opt.step()` moves
    to the next step's rate (as torch.optim.lr_scheduler); it writes `opt.lr` in place, so a TinyJit
    step reads the new rate and compiles nothing new.
    """

    def __init__(self, optimizer: Optimizer, max_lr: float, warmup_steps: int, total_steps: int,
                 min_lr: float = 0.0):
        for name, value, low in (("warmup_steps", warmup_steps, 0), ("total_steps", total_steps, 1)):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"WarmupCosine: {name} must be an int >= {low}, got {value!r}")
        if total_steps <= warmup_steps:
            raise ValueError(f"WarmupCosine: total_steps ({total_steps}) must be more than warmup_steps "
                             f"({warmup_steps}), or nothing is left to decay")
        self.optimizer, self.warmup_steps, self.total_steps = optimizer, warmup_steps, total_steps
        _check_number("WarmupCosine", "max_lr", max_lr, 0.0)
        _check_number("WarmupCosine", "min_lr", min_lr, 0.0)
        if min_lr > max_lr:
            raise ValueError(f"WarmupCosine: min_lr ({min_lr}) is above max_lr ({max_lr})")
        self.max_lr = float(max_lr)
        self.min_lr, self.last_step = float(min_lr), 0
        self._write(self.lr_at(0))

    def lr_at(self, step: int) -> float:
        """The learning rate of step `step` (counting from 0), in float64."""
        if step < self.warmup_steps:
            return self.max_lr * (step + 1) / self.warmup_steps
        if step >= self.total_steps:
            return self.min_lr
        progress = (step - self.warmup_steps) / (self.total_steps - self.warmup_steps)  # 0 -> 1
        return self.min_lr + (self.max_lr - self.min_lr) * 0.5 * (1.0 + math.cos(math.pi * progress))

    def step(self) -> None:
        """Move to the next step: write its learning rate into the optimizer."""
        self.last_step += 1
        self._write(self.lr_at(self.last_step))

    def _write(self, lr: float) -> None:
        self.optimizer.lr.assign(lr).realize()
# --8<-- [end:schedule]


# --8<-- [start:clip]
def clip_grad_norm(params: Iterable[Tensor], max_norm: float) -> Tensor:
    """Scale every gradient by min(1, max_norm / (norm + 1e-6)), as torch.nn.utils.clip_grad_norm_.

    `norm` is the 2-norm of all the gradients together, as one long vector. One unlucky batch can
    give a gradient many times the usual size; clipping keeps the step's direction and caps its
    length, so that batch cannot undo what training built. Returns that norm (before clipping), a
    one-element Tensor, worth logging: a norm that keeps hitting max_norm means the lr is too high.
    The new gradients are lazy: inside a TinyJit step, clipping costs no extra pass of its own.
    """
    _check_number("clip_grad_norm", "max_norm", max_norm, 0.0)
    grads = [p for p in dict.fromkeys(params) if p.grad is not None]
    if not grads:
        raise ValueError("clip_grad_norm: no parameter has a gradient; call loss.backward() first")
    with no_grad():
        total = sum((p.grad.detach().float().square().sum() for p in grads[1:]),
                    grads[0].grad.detach().float().square().sum()).sqrt()
        scale = (max_norm / (total + 1e-6)).minimum(1.0)
        for p in grads:
            p.grad = (p.grad.detach() * scale).cast(p.grad.dtype)
    return total
# --8<-- [end:clip]


__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "WarmupCosine", "clip_grad_norm"]
