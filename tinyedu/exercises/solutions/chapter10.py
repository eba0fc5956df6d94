"""Chapter 10 (an LSTM and a ResNet): reference solutions, and typical mistakes with the hint they get."""

from __future__ import annotations

from tinyedu.exercises.registry import Mistake
from tinyedu.models.resnet import BasicBlock
from tinyedu.tensor import Tensor


# --8<-- [start:lstm_cell]
def lstm_cell(gates_x: Tensor, h: Tensor, c: Tensor, weight_hh: Tensor,
              bias_hh: Tensor) -> tuple[Tensor, Tensor]:
    gates = gates_x + h.linear(weight_hh, bias_hh)   # the input's part and the previous output's part
    i, f, g, o = gates.chunk(4, dim=-1)              # PyTorch's order: input, forget, candidate, output
    c = f.sigmoid() * c + i.sigmoid() * g.tanh()     # forget some of the memory, write some
    h = o.sigmoid() * c.tanh()                       # show some
    return h, c
# --8<-- [end:lstm_cell]


# --8<-- [start:basic_block]
basic_block = BasicBlock.__call__
# --8<-- [end:basic_block]


def _cell(order: str = "ifgo", forget: bool = True, tanh_c: bool = True, new_c: bool = True,
          recurrent: bool = True):
    def lstm_cell(gates_x, h, c, weight_hh, bias_hh):
        gates = gates_x + h.linear(weight_hh, bias_hh) if recurrent else gates_x
        parts = dict(zip(order, gates.chunk(4, dim=-1), strict=True))
        i, f, g, o = parts["i"], parts["f"], parts["g"], parts["o"]
        c_new = (f.sigmoid() * c if forget else 0) + i.sigmoid() * g.tanh()
        shown = c_new if new_c else c
        return o.sigmoid() * (shown.tanh() if tanh_c else shown), c_new
    return lstm_cell


def _block(relu_after_add: bool = True, final_relu: bool = True, shortcut: bool = True):
    def basic_block(self, x):
        out = self.bn2(self.conv2(self.bn1(self.conv1(x)).relu()))
        skip = self.downsample[1](self.downsample[0](x)) if self.downsample else x
        if not shortcut:
            return out.relu()
        if not relu_after_add:
            return out.relu() + skip
        return (out + skip).relu() if final_relu else out + skip
    return basic_block


def _block_ignoring_downsample(self, x):
    return (self.bn2(self.conv2(self.bn1(self.conv1(x)).relu())) + x).relu()


def _block_testing_none(self, x):
    """Takes a missing downsample for None (it is the empty list)."""
    out = self.bn2(self.conv2(self.bn1(self.conv1(x)).relu()))
    shortcut = x if self.downsample is None else self.downsample[1](self.downsample[0](x))
    return (out + shortcut).relu()


MISTAKES = [
    Mistake("10.lstm_cell", _cell(tanh_c=False), "you left out the tanh of the cell"),
    Mistake("10.lstm_cell", _cell(new_c=False), "must use the new cell c"),
    Mistake("10.lstm_cell", _cell(forget=False), "the forget gate is missing"),
    Mistake("10.lstm_cell", _cell(order="ifog"), "PyTorch's order i, f, g, o"),
    Mistake("10.lstm_cell", _cell(order="figo"), "i and f are swapped"),
    Mistake("10.lstm_cell", _cell(recurrent=False), "also depend on the previous h"),
    Mistake("10.lstm_cell", lambda gates_x, h, c, w, b: h, "return the pair (h, c)"),
    Mistake("10.basic_block", _block(relu_after_add=False), "the relu belongs after the addition"),
    Mistake("10.basic_block", _block(final_relu=False), "the sum needs a relu"),
    Mistake("10.basic_block", _block(shortcut=False), "the shortcut is missing"),
    Mistake("10.basic_block", _block_ignoring_downsample, "use the downsample on the shortcut"),
    Mistake("10.basic_block", _block_testing_none, "the empty list [], not None"),
]
