"""Differential fuzzing against PyTorch: random chains of ops on extreme values, forward and backward.

Hypothesis draws an input (a small shape, values from the edges of float32: +-1e4, +-300, +-17, 0 and
-0.0, 1e-8, ...) and a chain of 1-5 steps (unary ops, binary ops with a second input that
broadcasts, reductions, movement). tinyedu runs it on C and on NUMPY, PyTorch in float32 and float64;
the outputs and the input gradients (of the sum of the output) must agree by the rules of
tests/torch_edges.py: NaN and inf exactly where float32 PyTorch has them, finite values close. The
run is derandomized, so CI sees the same examples every time; FUZZ_RANDOM=1 TORCH_FUZZ_EXAMPLES=500
explores further. test_new_ops_on_odd_shapes_match_pytorch runs the scans, sorting and statistics
(cumprod, cummax, sort, topk, isclose, std_mean, nll_loss...) on odd shapes up to 40,000 elements,
seeded, with edge values sprinkled in.

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


# ---- the scans, sorting and statistics on odd shapes up to 40k elements ----
ODD_SHAPES = [(199, 201), (40000,), (7, 1, 5713)]
# values that are hard on these ops: zeros of both signs, ties, infinities and NaN (for the products
# only finite ones: their gradient at +-inf and NaN is the chain rule's, see docs/numerics_and_semantics)
SPRINKLE = np.array([0.0, -0.0, 1.0, -1.0, 2.5, 2.5, 1e4, -1e4, np.inf, -np.inf, np.nan], np.float32)
TAME = np.array([0.0, -0.0, 1.0, -1.0, 1.25, 1.25, 0.5], np.float32)


def odd_input(shape: tuple[int, ...], seed: int, tame: bool) -> np.ndarray:
    """Random values (ties from rounding) with 2% of the elements replaced by edge values."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(0.5, 1.5, shape) if tame else np.round(rng.uniform(-20, 20, shape), 1)
    x = x.astype(np.float32).reshape(-1)
    at = rng.choice(x.size, max(x.size // 50, 3), replace=False)
    x[at] = rng.choice(TAME if tame else SPRINKLE, at.size)
    return x.reshape(shape)


def _sorted_pair(x: Any, dim: int, descending: bool, ours: bool) -> tuple[Any, Any]:
    if ours:
        return x.sort(dim, descending)
    return x.sort(dim=dim, descending=descending, stable=True)


def _topk_pair(x: Any, k: int, dim: int, largest: bool, ours: bool) -> tuple[Any, Any]:
    """torch.topk does not promise which of equal values it takes: the reference is the stable sort."""
    if ours:
        return x.topk(k, dim, largest)
    values, indices = _sorted_pair(x, dim, largest, ours)
    return values.narrow(dim, 0, k), indices.narrow(dim, 0, k)


def _nll(x: Any, ours: bool) -> Any:
    n, classes = x.shape
    rng = np.random.default_rng(3)
    target = rng.integers(0, classes, n)
    target[::17] = -100
    weight = rng.uniform(0, 2, classes).astype(np.float32)
    if ours:
        ours_target = Tensor(target.astype(np.int32), device=x.device)
        return x.nll_loss(ours_target, weight=Tensor(weight, device=x.device))
    return F.nll_loss(x, torch.tensor(target), weight=torch.tensor(weight, dtype=x.dtype))


# name: (fn(x, shape_index, ours) -> output or (values, indices), tame inputs)
ODD_OPS: dict[str, tuple[Callable, bool]] = {
    "cumprod": (lambda x, k, ours: x.cumprod((1, 0, 2)[k]), True),
    "cummax": (lambda x, k, ours: tuple(x.cummax((0, 0, -1)[k])), False),
    "cummin": (lambda x, k, ours: tuple(x.cummin((1, 0, 0)[k])), False),
    "logcumsumexp": (lambda x, k, ours: x.logcumsumexp((1, 0, 2)[k]), False),
    "sort": (lambda x, k, ours: _sorted_pair(x, (-1, None, 0)[k], k == 2, ours), False),
    "topk": (lambda x, k, ours: _topk_pair(x, (7, 0, 3)[k], (1, 0, 0)[k], k != 2, ours), False),
    "isclose": (lambda x, k, ours: x.isclose(x.flip(0) * 1.0001, 1e-3, 1e-2, k == 1), False),
    "std_mean": (lambda x, k, ours: (x.std(0, keepdim=k == 2), x.mean(0, keepdim=k == 2)) if not ours
                 else x.std_mean(0, keepdim=k == 2), False),
    "prod": (lambda x, k, ours: x.prod(0), True),
    "nll_loss": (lambda x, k, ours: _nll(x.reshape(-1, x.shape[-1]), ours), False),
}
SKIP = {("sort", 1), ("topk", 1)}  # sorting a row of 40,000 is 1.6e9 comparisons: ours refuses big rows


def _odd_run(name: str, k: int, data: np.ndarray, device: str | None,
             dtype: Any = None) -> tuple[list, list, np.ndarray]:
    """Outputs (the float ones, and the others: indices, bools) and the gradient of the sum of the
    float outputs; tinyedu on `device`, or PyTorch in `dtype` when device is None."""
    ours = device is not None
    x = Tensor(data, device=device, requires_grad=True) if ours else \
        torch.tensor(data, dtype=dtype, requires_grad=True)
    outs = ODD_OPS[name][0](x, k, ours)
    outs = list(outs) if isinstance(outs, tuple) else [outs]
    is_float = [o.dtype.is_float if ours else o.dtype.is_floating_point for o in outs]
    floats = [o for o, f in zip(outs, is_float, strict=True) if f]
    if floats and floats[0].requires_grad:
        sum(o.sum() for o in floats).backward()
    grad = x.grad.numpy() if x.grad is not None else np.zeros(data.shape, np.float32)
    values = [o.numpy() if ours else o.detach().numpy() for o in outs]
    return ([v for v, f in zip(values, is_float, strict=True) if f],
            [v for v, f in zip(values, is_float, strict=True) if not f], grad)


@pytest.mark.parametrize("name", list(ODD_OPS))
def test_new_ops_on_odd_shapes_match_pytorch(name: str) -> None:
    """Each op on (199, 201), (40000,) and (7, 1, 5713), seeded, with edge values sprinkled in: outputs,
    indices and input gradients agree with PyTorch (float32 and float64) on NUMPY and C."""
    for k, shape in enumerate(ODD_SHAPES):
        if (name, k) in SKIP:
            continue
        data = odd_input(shape, seed=k, tame=ODD_OPS[name][1])
        out32, index32, grad32 = _odd_run(name, k, data, None, torch.float32)
        out64, _, grad64 = _odd_run(name, k, data, None, torch.float64)
        for device in ("NUMPY", "C"):
            outs, indices, grad = _odd_run(name, k, data, device)
            what = f"{name} on {device}, shape {shape}"
            for ours, r32, r64 in zip(outs, out32, out64, strict=True):
                assert_edges_match(ours, r32, r64, f"output of {what}", "", rtol=2e-3, atol=1e-5)
            for ours, ref in zip(indices, index32, strict=True):
                np.testing.assert_array_equal(ours, ref.astype(ours.dtype), err_msg=f"indices of {what}")
            assert_edges_match(grad, grad32, grad64, f"gradient of {what}", "", rtol=1e-2, atol=1e-4)
