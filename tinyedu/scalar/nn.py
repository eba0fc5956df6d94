"""Neuron, Layer and MLP built from scalar Values: a neural network is just a big expression.

Nothing here knows about gradients. A network is a function that builds a graph of Values; the
`backward()` of stage 0 does the rest. This is why stage 0 stops at an MLP: once you can
differentiate any expression, a network is a matter of writing the expression down.
"""

from __future__ import annotations

import random
from typing import Sequence

from tinyedu.scalar.value import Value

NONLINEARITIES = ("relu", "tanh")


# --8<-- [start:module]
class Module:
    """What every network part shares: a list of parameters and a way to reset their gradients."""

    def parameters(self) -> list[Value]:
        return []

    def zero_grad(self) -> None:
        """Reset every parameter's `.grad` to 0. Call it before each `backward()`: grads accumulate."""
        for p in self.parameters():
            p.grad = 0.0
# --8<-- [end:module]


def _check_nonlinearity(nonlinearity: str | None) -> None:
    if nonlinearity is not None and nonlinearity not in NONLINEARITIES:
        raise ValueError(f"nonlinearity must be one of {NONLINEARITIES} or None (linear), "
                         f"got {nonlinearity!r}")


# --8<-- [start:neuron]
class Neuron(Module):
    """out = nonlinearity(w . x + b), with one weight per input.

    Weights start uniform in [-1, 1] from `rng` (so the same seed gives the same network); the
    bias starts at 0. `nonlinearity=None` makes the neuron linear, which the last layer of an
    MLP needs so its output can be any real number (a score), not just a positive one.
    """

    def __init__(self, n_inputs: int, nonlinearity: str | None = "relu", rng: random.Random | None = None):
        _check_nonlinearity(nonlinearity)
        rng = rng if rng is not None else random.Random(0)
        self.w = [Value(rng.uniform(-1.0, 1.0)) for _ in range(n_inputs)]
        self.b = Value(0.0)
        self.nonlinearity = nonlinearity

    def __call__(self, x: Sequence[Value | float]) -> Value:
        if len(x) != len(self.w):
            raise ValueError(f"Neuron: expected {len(self.w)} inputs, got {len(x)}; the input size "
                             "must match n_inputs given when the neuron was made.")
        act = sum((wi * xi for wi, xi in zip(self.w, x, strict=True)), self.b)
        if self.nonlinearity == "relu":
            return act.relu()
        if self.nonlinearity == "tanh":
            return act.tanh()
        return act

    def parameters(self) -> list[Value]:
        return self.w + [self.b]

    def __repr__(self) -> str:
        kind = self.nonlinearity.capitalize() if self.nonlinearity else "Linear"
        return f"{kind}Neuron({len(self.w)})"
# --8<-- [end:neuron]


# --8<-- [start:mlp]
class Layer(Module):
    """`n_outputs` independent neurons that all read the same inputs."""

    def __init__(self, n_inputs: int, n_outputs: int, nonlinearity: str | None = "relu",
                 rng: random.Random | None = None):
        rng = rng if rng is not None else random.Random(0)  # one rng, shared: neurons must differ
        self.neurons = [Neuron(n_inputs, nonlinearity, rng) for _ in range(n_outputs)]

    def __call__(self, x: Sequence[Value | float]) -> list[Value]:
        return [neuron(x) for neuron in self.neurons]

    def parameters(self) -> list[Value]:
        return [p for neuron in self.neurons for p in neuron.parameters()]

    def __repr__(self) -> str:
        return f"Layer of [{', '.join(str(n) for n in self.neurons)}]"


class MLP(Module):
    """A multi-layer perceptron: layers applied one after another; the last one is linear.

    `MLP(2, [16, 16, 1])` maps 2 inputs through two hidden layers of 16 to 1 output. With a single
    output, calling the MLP returns that Value; with several, it returns the list.
    """

    def __init__(self, n_inputs: int, layer_sizes: Sequence[int], nonlinearity: str = "relu",
                 rng: random.Random | None = None):
        _check_nonlinearity(nonlinearity)
        if not layer_sizes:
            raise ValueError("MLP: layer_sizes is empty; give at least the output size, e.g. [1].")
        rng = rng if rng is not None else random.Random(0)
        sizes = [n_inputs, *layer_sizes]
        last = len(layer_sizes) - 1
        self.layers = [Layer(sizes[i], sizes[i + 1], nonlinearity if i != last else None, rng)
                       for i in range(len(layer_sizes))]

    def __call__(self, x: Sequence[Value | float]) -> Value | list[Value]:
        for layer in self.layers:
            x = layer(x)
        return x[0] if len(x) == 1 else x

    def parameters(self) -> list[Value]:
        return [p for layer in self.layers for p in layer.parameters()]

    def __repr__(self) -> str:
        return f"MLP of [{', '.join(str(layer) for layer in self.layers)}]"
# --8<-- [end:mlp]
