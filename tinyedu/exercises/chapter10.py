"""Chapter 10 (notebook 10: an LSTM and a ResNet): the exercises and their checkers.

Implement-this: `10.lstm_cell` (plugged in as `tinyedu.models.lstm.lstm_cell`, which LSTM calls at
every time step) and `10.basic_block` (plugged in as `BasicBlock.__call__`).
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable

import numpy as np

from tinyedu.exercises.checking import need_function
from tinyedu.exercises.hooks import plug
from tinyedu.exercises.registry import exercise
from tinyedu.models import lstm
from tinyedu.models.resnet import BasicBlock, ResNet
from tinyedu.models.tasks import adding_problem
from tinyedu.nn.optim import SGD
from tinyedu.nn.state import get_parameters
from tinyedu.tensor import Tensor


def _pair(out: Any, call: str) -> tuple[np.ndarray, np.ndarray]:
    if not (isinstance(out, tuple) and len(out) == 2 and all(isinstance(t, Tensor) for t in out)):
        raise AssertionError(f"{call} returned {type(out).__name__}; return the pair (h, c) of Tensors")
    return out[0].numpy(), out[1].numpy()


# -- exercise: the LSTM cell -------------------------------------------------------------------------
def _lstm_hint(got_h: np.ndarray, got_c: np.ndarray, parts: dict[str, np.ndarray], c0: np.ndarray) -> str:
    sig = lambda z: 1 / (1 + np.exp(-z))  # noqa: E731
    i, f, g, o = (parts[k] for k in "ifgo")
    c = sig(f) * c0 + sig(i) * np.tanh(g)
    if np.allclose(got_c, c, atol=1e-5):
        if np.allclose(got_h, sig(o) * c, atol=1e-5):
            return "the new c is right; h = sigmoid(o) * tanh(c): you left out the tanh of the cell"
        if np.allclose(got_h, sig(o) * np.tanh(c0), atol=1e-5):
            return "h must use the new cell c, not the one passed in"
        return "the new c is right; h is sigmoid(o) * tanh(c)"
    if np.allclose(got_c, sig(i) * np.tanh(g), atol=1e-5):
        return "the forget gate is missing: the new c keeps sigmoid(f) * (old c)"
    swapped = sig(f) * c0 + sig(i) * np.tanh(o)
    if np.allclose(got_c, swapped, atol=1e-5):
        return "the gates are in PyTorch's order i, f, g, o: the candidate g is the third chunk, o the fourth"
    if np.allclose(got_c, sig(i) * c0 + sig(f) * np.tanh(g), atol=1e-5):
        return "i and f are swapped: the first chunk is the input gate, the second the forget gate"
    no_recurrence = sig(parts["f_x"]) * c0 + sig(parts["i_x"]) * np.tanh(parts["g_x"])
    if np.allclose(got_c, no_recurrence, atol=1e-5):
        return "the gates must also depend on the previous h: add h.linear(weight_hh, bias_hh) to gates_x"
    return ("gates = gates_x + h.linear(weight_hh, bias_hh), split with chunk(4, dim=-1) into i, f, g, o; "
            "c = sigmoid(f) * c + sigmoid(i) * tanh(g); h = sigmoid(o) * tanh(c)")


@exercise("10.lstm_cell", answer="lstm_cell", title="One step of an "
                                                    "LSTM", hook="tinyedu.models.lstm.lstm_cell")
def check_lstm_cell(lstm_cell: Callable[..., tuple[Tensor, Tensor]]) -> str:
    need_function(lstm_cell, "lstm_cell", "lstm_cell(gates_x, h, c, weight_hh, bias_hh) returning (h, c)")
    rng = np.random.default_rng(0)
    hidden = 3
    gates_x, h0, c0 = (rng.standard_normal(s).astype(np.float32) for s in ((2, 4 * hidden), (2, hidden),
                                                                             (2, hidden)))
    w_hh = rng.standard_normal((4 * hidden, hidden)).astype(np.float32)
    b_hh = rng.standard_normal(4 * hidden).astype(np.float32)
    args = [Tensor(a) for a in (gates_x, h0, c0, w_hh, b_hh)]
    got_h, got_c = _pair(lstm_cell(*args), "lstm_cell(...)")
    want_h, want_c = _pair(lstm.lstm_cell(*args), "the library's cell")
    if got_h.shape != want_h.shape or got_c.shape != want_c.shape:
        raise AssertionError(f"lstm_cell: h and c must have shape {want_h.shape} (batch, hidden), got "
                             f"{got_h.shape} and {got_c.shape}")
    if not (np.allclose(got_h, want_h, atol=1e-5) and np.allclose(got_c, want_c, atol=1e-5)):
        gates = gates_x + h0 @ w_hh.T + b_hh
        parts = dict(zip("ifgo", np.split(gates, 4, axis=-1), strict=True))
        parts.update({f"{k}_x": v for k, v in zip("ifgo", np.split(gates_x, 4, axis=-1), strict=True)})
        raise AssertionError("one step differs from the LSTM's. Hint: "
                             f"{_lstm_hint(got_h, got_c, parts, c0)}.")
    # plugged in: a few training steps of the adding-problem LSTM give the library's losses
    losses = {}
    for plugged_in in (False, True):
        Tensor.manual_seed(0)
        model = lstm.LSTMRegressor(2, 6)
        opt = SGD(get_parameters(model), lr=0.5, momentum=0.9)
        data = np.random.default_rng(1)
        losses[plugged_in] = []
        with plug(lstm, "lstm_cell", lstm_cell) if plugged_in else contextlib.nullcontext() as plugged:
            for _ in range(3):
                x, y = adding_problem(8, 6, data)
                opt.zero_grad()
                loss = ((model(Tensor(x)) - Tensor(y)) ** 2).mean().backward()
                opt.step()
                losses[plugged_in].append(loss.item())
        if plugged_in:
            plugged.require_called("lstm_cell")
    if not np.allclose(losses[True], losses[False], rtol=1e-4):
        raise AssertionError(f"training with your cell gave the losses {np.round(losses[True], 5)}, the "
                             "library "
                             f"{np.round(losses[False], 5)}: build h and c only from Tensor ops on the "
                             "inputs")
    return "one step matches the LSTM's; plugged into LSTM, three training steps through time agree."


# -- exercise: the residual block ----------------------------------------------------------------------
def _block_variants(block: BasicBlock, x: Tensor) -> dict[str, np.ndarray]:
    """What typical wrong blocks compute, to name the mistake."""
    out = block.bn1(block.conv1(x)).relu()
    out = block.bn2(block.conv2(out))
    shortcut = block.downsample[1](block.downsample[0](x)) if block.downsample else x
    return {
        "the relu belongs after the addition: relu(F(x) + shortcut), not relu(F(x)) + shortcut":
            (out.relu() + shortcut).numpy(),
        "the sum needs a relu at the end: relu(F(x) + shortcut)": (out + shortcut).numpy(),
        "the shortcut is missing: add x (or the downsample of x) to F(x)": out.relu().numpy(),
    }


@exercise("10.basic_block", answer="basic_block", title="The residual block", hook="BasicBlock.__call__")
def check_basic_block(basic_block: Callable[[BasicBlock, Tensor], Tensor]) -> str:
    need_function(basic_block, "basic_block", "basic_block(self, x) returning a Tensor")
    rng = np.random.default_rng(0)
    for stride, channels in ((1, 4), (2, 6)):
        Tensor.manual_seed(stride)
        block = BasicBlock(4, channels, stride)
        x = Tensor(rng.standard_normal((3, 4, 8, 8)).astype(np.float32))
        for training in (True, False):
            with Tensor.train(training):
                want = BasicBlock.__call__(block, x).numpy()
                try:
                    got = basic_block(block, x)
                except (IndexError, TypeError) as error:
                    if block.downsample:
                        raise
                    raise AssertionError(f"the block 4->{channels} keeps the shape, so it has no downsample "
                                         f"and your code failed with {type(error).__name__}: {error}. Hint: "
                                         "self.downsample is then the empty list [], not None: test "
                                         "`if self.downsample:` and use x itself as the shortcut") from None
                except ValueError as error:
                    if not (block.downsample and "broadcast" in str(error)):
                        raise
                    raise AssertionError(f"the block 4->{channels} with stride {stride} changes the shape, "
                                         "so x "
                                         f"cannot be added as it is ({error}). Hint: use the downsample on "
                                         "the "
                                         "shortcut: self.downsample[1](self.downsample[0](x))") from None
                if not isinstance(got, Tensor):
                    raise AssertionError(f"basic_block returned {type(got).__name__}; return a Tensor")
                if got.shape != want.shape:
                    raise AssertionError(f"basic_block: a block {4}->{channels} with stride {stride} gives "
                                         "shape "
                                         f"{want.shape}, yours {got.shape}: use the downsample on the "
                                         "shortcut "
                                         "when the block has one")
                if not np.allclose(got.numpy(), want, rtol=1e-4, atol=1e-4):
                    hint = next((h for h, v in _block_variants(block, x).items() if v.shape == want.shape
                                 and np.allclose(got.numpy(), v, rtol=1e-4, atol=1e-4)),
                                "conv1, bn1, relu, conv2, bn2, + shortcut (x, or "
                                "downsample[1](downsample[0](x))), "
                                "relu")
                    mode = "training" if training else "eval"
                    raise AssertionError(f"the block {4}->{channels} (stride {stride}) in {mode} mode "
                                         "differs from "
                                         f"BasicBlock's. Hint: {hint}.")
    # plugged in: a ResNet's training step gives the library's loss and gradients
    x = Tensor(rng.standard_normal((4, 1, 28, 28)).astype(np.float32))
    y = Tensor(np.array([1, 7, 3, 0], dtype=np.int32))
    grads = {}
    for plugged_in in (False, True):
        Tensor.manual_seed(5)
        model = ResNet(widths=(4, 8))
        hook = plug(BasicBlock, "__call__", basic_block) if plugged_in else contextlib.nullcontext()
        with hook as plugged, Tensor.train():
            model(x).cross_entropy(y).backward()
        if plugged_in:
            plugged.require_called("basic_block")
        grads[plugged_in] = [p.grad.numpy() for p in get_parameters(model)]
    pairs = zip(grads[True], grads[False], strict=True)
    if not all(np.allclose(a, b, rtol=1e-3, atol=1e-5) for a, b in pairs):
        raise AssertionError("with your block plugged into a ResNet, the gradients differ from the "
                             "library's: "
                             "build the output only from the block's layers and Tensor ops")
    return "matches BasicBlock with and without a downsample, training and eval; a ResNet's gradients agree."
