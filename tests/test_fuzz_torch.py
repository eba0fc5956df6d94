"""Differential fuzzing against PyTorch: random chains of ops on extreme values, forward and backward.

Hypothesis draws an input (a small shape, values from the edges of float32: +-1e4, +-300, +-17, 0 and
-0.0, 1e-8, ...) and a chain of 1-5 steps (unary ops, binary ops with a second input that
broadcasts, reductions, movement). tinyedu runs it on C and on NUMPY, PyTorch in float32 and float64;
the outputs and the input gradients (of the sum of the output) must agree by the rules of
tests/torch_edges.py: NaN and inf exactly where float32 PyTorch has them, finite values close. The
run is derandomized, so CI sees the same examples every time; FUZZ_RANDOM=1 TORCH_FUZZ_EXAMPLES=500
explores further.

Some chains are ill-conditioned: a gradient that is 0 in exact arithmetic comes out as an ulp of
rounding noise (softmax's gradients sum to 0), and a later 1/1e-8 magnifies the noise to ~1 (or
1/0 to inf). Two correct float32 programs then differ, since their ulps differ. So a result also
counts as right when it matches what PyTorch gives for the input moved by one ulp (up or down):
PyTorch itself cannot tell those inputs apart. Zeros do not move, so the kinks at 0 stay exact.
Discontinuous ops (floor, %, comparisons) and periodic ones (sin of a large number) magnify any
difference, so they only come first, on the exact inputs.
"""

from __future__ import annotations

import os
from typing import Any, Callable

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.torch_edges import assert_edges_match
from tinyedu import Tensor

torch = pytest.importorskip("torch")
F = torch.nn.functional

EXAMPLES = int(os.environ.get("TORCH_FUZZ_EXAMPLES", "30"))
RANDOM = bool(os.environ.get("FUZZ_RANDOM"))
EDGES = [-1e4, -300.0, -17.0, -3.0, -1.0, -0.5, -1e-3, -1e-8, -0.0, 0.0, 1e-8, 1e-3, 0.5, 1.0, 2.5, 17.0,
         300.0, 1e4]

# name: (tinyedu, torch); the same code where the names agree
UNARY: dict[str, tuple[Callable, Callable]] = {
    **{name: (lambda x, n=name: getattr(x, n)(),) * 2 for name in [
        "neg", "relu", "abs", "sigmoid", "tanh", "exp", "log", "sqrt", "sin", "cos", "square", "reciprocal",
        "expm1", "log1p", "floor", "round", "sign", "trunc", "ceil", "asinh", "sinh"]},
    **{name: (lambda x, n=name: getattr(x, n)(), lambda x, n=name: getattr(F, n)(x)) for name in [
        "gelu", "silu", "softplus", "elu", "hardswish", "mish", "softsign", "relu6", "hardtanh",
        "logsigmoid"]},
    "leaky_relu": (lambda x: x.leaky_relu(0.2), lambda x: F.leaky_relu(x, 0.2)),
    "clamp": (lambda x: x.clamp(-2, 3),) * 2,
    "pow_2.5": (lambda x: x ** 2.5,) * 2,
    "pow_3": (lambda x: x ** 3,) * 2,
    "mod": (lambda x: x % 1.5,) * 2,
    "scale": (lambda x: x * 1e-3,) * 2,
}
BINARY: dict[str, tuple[Callable, Callable]] = {
    "add": (lambda x, y: x + y,) * 2, "sub": (lambda x, y: x - y,) * 2, "mul": (lambda x, y: x * y,) * 2,
    "div": (lambda x, y: x / y,) * 2, "maximum": (lambda x, y: x.maximum(y),) * 2,
    "minimum": (lambda x, y: x.minimum(y),) * 2, "pow": (lambda x, y: x.abs() ** (y * 0.01),) * 2,
    "where": (lambda x, y: (x > y).where(x, y * 2), lambda x, y: torch.where(x > y, x, y * 2)),
    "le_mul": (lambda x, y: (x <= y).float() * x, lambda x, y: (x <= y).float() * x),
}
# discontinuous ops, and periodic ones (sin(4.7e6) turns an ulp of its argument into any value)
JUMPS = {"floor", "round", "sign", "trunc", "ceil", "mod", "where", "le_mul", "sin", "cos"}
Step = tuple[Any, ...]


@st.composite
def programs(draw: st.DrawFn) -> tuple[np.ndarray, list[Step]]:
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=2)))
    values = st.one_of(st.sampled_from(EDGES), st.floats(-5, 5, width=32))
    data = np.array(draw(st.lists(values, min_size=int(np.prod(shape)), max_size=int(np.prod(shape)))),
                    np.float32).reshape(shape)
    steps: list[Step] = []
    ndim = len(shape)
    after_max = False
    for k in range(draw(st.integers(1, 5))):
        kind = draw(st.sampled_from(["unary", "unary", "binary", "reduce", "movement"]))
        # a jump (floor, x % 1.5, x > y...) turns an ulp of difference upstream into any difference
        # downstream; they are checked exactly at the edges in test_numerics, and here on exact inputs.
        # PyTorch's max of +0.0 and -0.0 depends on its reduction order, so after a max nothing that
        # tells the zeros apart (1/x) follows.
        skip = (set() if k == 0 else JUMPS) | ({"reciprocal", "div"} if after_max else set())
        if kind == "unary":
            steps.append(("unary", draw(st.sampled_from(sorted(set(UNARY) - skip)))))
        elif kind == "binary":
            other = draw(st.lists(values, min_size=shape[-1], max_size=shape[-1]))
            steps.append(("binary", draw(st.sampled_from(sorted(set(BINARY) - skip))), tuple(other)))
        elif kind == "reduce" and ndim:
            steps.append(("reduce", draw(st.sampled_from(["sum", "max", "mean", "softmax", "logsumexp"])),
                          draw(st.integers(0, ndim - 1))))
            after_max = after_max or steps[-1][1] == "max"
            if steps[-1][1] in ("sum", "max", "mean", "logsumexp"):
                shape = tuple(s for i, s in enumerate(shape) if i != steps[-1][2])
                ndim = len(shape)
                if not ndim:
                    break
        elif kind == "movement" and ndim == 2:
            steps.append(("transpose",))
            shape = shape[::-1]
        else:
            steps.append(("flip", draw(st.integers(0, ndim - 1))))
    return data, steps


def run(x: Any, steps: list[Step], ours: bool) -> Any:
    for step in steps:
        if step[0] == "unary":
            x = UNARY[step[1]][0 if ours else 1](x)
        elif step[0] == "binary":
            other = np.array(step[2], np.float32)
            y = Tensor(other, device=x.device) if ours else torch.tensor(other, dtype=x.dtype)
            x = BINARY[step[1]][0 if ours else 1](x, y)
        elif step[0] == "reduce":
            name, axis = step[1], step[2]
            if name == "max" and not ours:
                x = x.amax(axis)
            elif name == "softmax":
                x = x.softmax(axis)
            else:
                x = getattr(x, name)(axis)
        elif step[0] == "transpose":
            x = x.transpose(0, 1)
        else:
            x = x.flip(step[1]) if ours else x.flip((step[1],))
    return x


def _matches_any(ours: np.ndarray, references: list[tuple[np.ndarray, np.ndarray]], what: str, rtol: float,
                 atol: float) -> None:
    """Passes if `ours` matches one of the (float32, float64) references; else reports the first."""
    errors = []
    for ref32, ref64 in references:
        try:
            assert_edges_match(ours, ref32, ref64, what, "", rtol=rtol, atol=atol)
            return
        except AssertionError as e:
            errors.append(e)
    raise errors[0]


def torch_run(data: np.ndarray, steps: list[Step], dtype: torch.dtype) -> tuple[np.ndarray, np.ndarray]:
    x = torch.tensor(data, dtype=dtype, requires_grad=True)
    out = run(x, steps, ours=False)
    out.sum().backward()
    return out.detach().numpy(), x.grad.numpy()


@settings(max_examples=EXAMPLES, deadline=None, derandomize=not RANDOM,
          suppress_health_check=list(HealthCheck))
@given(programs())
def test_random_chains_match_pytorch(program: tuple[np.ndarray, list[Step]]) -> None:
    data, steps = program
    out32, grad32 = torch_run(data, steps, torch.float32)
    out64, grad64 = torch_run(data, steps, torch.float64)
    outs, grads = [(out32, out64)], [(grad32, grad64)]
    for away in (True, False):  # PyTorch on the input moved by one ulp (see the module doc)
        target = np.where((data > 0) == away, np.float32(np.inf), np.float32(-np.inf))
        moved = np.nextafter(data, target).astype(np.float32)
        moved_out, moved_grad = torch_run(np.where(data == 0, data, moved), steps, torch.float32)
        outs.append((moved_out, moved_out))
        grads.append((moved_grad, moved_grad))
    for device in ("NUMPY", "C"):
        x = Tensor(data, device=device, requires_grad=True)
        out = run(x, steps, ours=True)
        what = f"{device}, input {data.tolist()}, steps {steps}"
        _matches_any(out.numpy(), outs, f"output on {what}", rtol=2e-3, atol=1e-5)
        out.sum().backward()
        _matches_any(x.grad.numpy(), grads, f"gradient on {what}", rtol=1e-2, atol=1e-4)
