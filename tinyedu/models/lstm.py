"""An LSTM whose cell is a handful of Tensor ops, with PyTorch's weight names and gate order.

A recurrent network reads a sequence one step at a time and carries a state forward. The LSTM
(Hochreiter & Schmidhuber, 1997) carries two: a cell c, changed only by gated addition, so that
information and gradients can travel many steps, and an output h = o * tanh(c). At each step:

    i, f, g, o = split(x @ W_ihᵀ + b_ih + h @ W_hhᵀ + b_hh, 4)    four gates from input and state
    c = sigmoid(f) * c + sigmoid(i) * tanh(g)                      forget some, write some
    h = sigmoid(o) * tanh(c)                                       show some

`LSTM` holds `weight_ih_l0`, `weight_hh_l0`, `bias_ih_l0`, `bias_hh_l0` (then `_l1`, ...) exactly as
`torch.nn.LSTM(batch_first=True)`, so PyTorch's state dict loads unchanged, and the tests check
outputs and gradients against it. Unrolled over T steps, the lazy graph is T copies of the cell:
backward runs backpropagation through time with no code of its own.
"""

from __future__ import annotations

import math

from tinyedu.nn import Linear
from tinyedu.tensor import Tensor


# --8<-- [start:cell]
def lstm_cell(gates_x: Tensor, h: Tensor, c: Tensor, weight_hh: Tensor,
              bias_hh: Tensor) -> tuple[Tensor, Tensor]:
    """One step, given the input's share of the gates `gates_x` = x @ W_ihᵀ + b_ih (B, 4H)."""
    gates = gates_x + h.linear(weight_hh, bias_hh)
    i, f, g, o = gates.chunk(4, dim=-1)  # PyTorch's order: input, forget, cell candidate, output
    c = f.sigmoid() * c + i.sigmoid() * g.tanh()
    h = o.sigmoid() * c.tanh()
    return h, c
# --8<-- [end:cell]


class LSTMCell:
    """One step of an LSTM, as torch.nn.LSTMCell: `h, c = cell(x, (h, c))`."""

    def __init__(self, input_size: int, hidden_size: int):
        _check_positive("LSTMCell", input_size=input_size, hidden_size=hidden_size)
        self.hidden_size = hidden_size
        self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh = _lstm_weights(input_size, hidden_size)

    def __call__(self, x: Tensor, state: tuple[Tensor, Tensor] | None = None) -> tuple[Tensor, Tensor]:
        h, c = state if state is not None else _zero_state(x.shape[0], self.hidden_size, x.device)
        return lstm_cell(x.linear(self.weight_ih, self.bias_ih), h, c, self.weight_hh, self.bias_hh)


# --8<-- [start:lstm]
class LSTM:
    """A stack of LSTM layers over (batch, time, features) input, as torch.nn.LSTM(batch_first=True).

    Returns the last layer's h at every step (B, T, H) and the final (h, c) of every layer, each
    (num_layers, B, H).
    """

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1):
        _check_positive("LSTM", input_size=input_size, hidden_size=hidden_size, num_layers=num_layers)
        self.hidden_size, self.num_layers = hidden_size, num_layers
        for layer in range(num_layers):
            weights = _lstm_weights(input_size if layer == 0 else hidden_size, hidden_size)
            for name, w in zip(("weight_ih", "weight_hh", "bias_ih", "bias_hh"), weights, strict=True):
                setattr(self, f"{name}_l{layer}", w)

    def __call__(self, x: Tensor, state: tuple[Tensor, Tensor] | None = None
                 ) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        if x.ndim != 3:
            raise ValueError(f"LSTM: expected input (batch, time, features), got shape {x.shape}")
        batch, steps, _ = x.shape
        finals_h, finals_c = [], []
        for layer in range(self.num_layers):
            w_ih, w_hh, b_ih, b_hh = (getattr(self, f"{n}_l{layer}") for n in
                                      ("weight_ih", "weight_hh", "bias_ih", "bias_hh"))
            if x.shape[-1] != w_ih.shape[1]:
                raise ValueError(f"LSTM: layer {layer} expects {w_ih.shape[1]} features, the input has "
                                 f"{x.shape[-1]} (shape {x.shape})")
            if state is None:
                h, c = _zero_state(batch, self.hidden_size, x.device)
            else:
                h, c = state[0][layer], state[1][layer]
            gates_x = x.linear(w_ih, b_ih)  # the input's part of every step's gates, in one matmul
            outputs = []
            for t in range(steps):
                h, c = lstm_cell(gates_x[:, t], h, c, w_hh, b_hh)
                outputs.append(h)
            x = Tensor.stack(outputs, dim=1)  # (B, T, H): the next layer's input
            finals_h.append(h)
            finals_c.append(c)
        return x, (Tensor.stack(finals_h), Tensor.stack(finals_c))
# --8<-- [end:lstm]


class LSTMRegressor:
    """An LSTM that reads a sequence and predicts one number from its last hidden state."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1):
        self.lstm = LSTM(input_size, hidden_size, num_layers)
        self.head = Linear(hidden_size, 1)

    def __call__(self, x: Tensor) -> Tensor:
        outputs, _ = self.lstm(x)
        return self.head(outputs[:, -1]).reshape(x.shape[0])


def _lstm_weights(input_size: int, hidden_size: int) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """W_ih (4H, I), W_hh (4H, H), b_ih (4H,), b_hh (4H,), all from U(-1/√H, 1/√H) as in PyTorch."""
    bound = 1 / math.sqrt(hidden_size)

    def draw(*shape: int) -> Tensor:
        return Tensor.uniform(*shape, low=-bound, high=bound, requires_grad=True)

    four = 4 * hidden_size
    return draw(four, input_size), draw(four, hidden_size), draw(four), draw(four)


def _zero_state(batch: int, hidden_size: int, device: str) -> tuple[Tensor, Tensor]:
    return Tensor.zeros(batch, hidden_size, device=device), Tensor.zeros(batch, hidden_size, device=device)


def _check_positive(layer: str, **sizes: int) -> None:
    for name, size in sizes.items():
        if not isinstance(size, int) or isinstance(size, bool) or size < 1:
            raise ValueError(f"{layer}: {name} must be a positive int, got {size!r}")


__all__ = ["lstm_cell", "LSTMCell", "LSTM", "LSTMRegressor"]
