"""Linear, and the two optimizers every course starts with: SGD (with momentum) and Adam.

A layer is a callable holding Tensors; its parameters are the Tensors that require a gradient.
An optimizer step computes every new value lazily and realizes them all in one schedule: one call
into the engine, one kernel per tensor it updates. Then each tensor takes its new value.

tinyedu.nn's Linear and Optimizer are subclasses of these: Linear makes its weights through the
class attribute `tensor`, and the full Optimizer fills `updates` and `write` (in place).
"""

from __future__ import annotations

import math

from .lazy import realize
from .tensor import Tensor


# --8<-- [start:linear]
class Linear:
    """y = x @ W.T + b, initialized as PyTorch does: uniform in ±1/sqrt(in_features)."""

    tensor = Tensor  # the class the weights are made with: the full library's Linear sets tinyedu.Tensor

    def __init__(self, in_features: int, out_features: int, bias: bool = True):
        bound = 1 / math.sqrt(in_features)
        uniform = self.tensor.uniform
        self.weight = uniform(out_features, in_features, low=-bound, high=bound, requires_grad=True)
        self.bias = uniform(out_features, low=-bound, high=bound, requires_grad=True) if bias else None

    def __call__(self, x: Tensor) -> Tensor:
        y = x @ self.weight.T
        return y + self.bias if self.bias is not None else y

    def parameters(self) -> list[Tensor]:
        return [self.weight] + ([self.bias] if self.bias is not None else [])
# --8<-- [end:linear]


class Optimizer:
    def __init__(self, params: list[Tensor], lr: float):
        self.params, self.lr = [p for p in params if p.requires_grad], lr

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    # --8<-- [start:step]
    def step(self) -> None:
        """New values for every parameter (and state), then written."""
        self.write(self.updates())  # [(tensor to overwrite, its new value)]

    def write(self, updates: list[tuple[Tensor, Tensor]]) -> None:
        """The new values, realized together (one schedule), then swapped in. The seam where the full
        library writes in place instead (Tensor.assign_all), so views and TinyJit see the update."""
        realize([new.lazydata for _, new in updates])
        for target, new in updates:
            target.lazydata = new.lazydata
    # --8<-- [end:step]

    def updates(self) -> list[tuple[Tensor, Tensor]]:
        """[(tensor to overwrite, its new value)]: what each optimizer says."""
        raise NotImplementedError


class SGD(Optimizer):
    """p -= lr * g, or with momentum: v = momentum * v + g; p -= lr * v (PyTorch's form)."""

    def __init__(self, params: list[Tensor], lr: float = 0.001, momentum: float = 0.0):
        super().__init__(params, lr)
        self.momentum = momentum
        self.v = [Tensor.zeros(p.shape, device=p.device) for p in self.params]

    def updates(self) -> list[tuple[Tensor, Tensor]]:
        out = []
        for p, v in zip(self.params, self.v, strict=True):
            g = p.grad.detach()
            if self.momentum:
                g = self.momentum * v + g
                out.append((v, g))
            out.append((p, p.detach() - self.lr * g))
        return out


class Adam(Optimizer):
    """Adam (Kingma & Ba): running means of g and g², corrected for their start at zero."""

    def __init__(self, params: list[Tensor], lr: float = 0.001, b1: float = 0.9, b2: float = 0.999,
                 eps: float = 1e-8):
        super().__init__(params, lr)
        self.b1, self.b2, self.eps, self.t = b1, b2, eps, 0
        self.m = [Tensor.zeros(p.shape, device=p.device) for p in self.params]
        self.v = [Tensor.zeros(p.shape, device=p.device) for p in self.params]

    def updates(self) -> list[tuple[Tensor, Tensor]]:
        self.t += 1
        out = []
        for p, m, v in zip(self.params, self.m, self.v, strict=True):
            g = p.grad.detach()
            m_new = self.b1 * m + (1 - self.b1) * g
            v_new = self.b2 * v + (1 - self.b2) * g * g
            m_hat = m_new / (1 - self.b1 ** self.t)
            v_hat = v_new / (1 - self.b2 ** self.t)
            out += [(m, m_new), (v, v_new), (p, p.detach() - self.lr * m_hat / (v_hat.sqrt() + self.eps))]
        return out
