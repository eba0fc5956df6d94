"""Random graphs against an independent oracle: every realize of a random DAG of tensor ops must give
what the same program gives in float64 numpy.

One seeded random *program* is a list of nodes: inputs, then ops that read earlier nodes (the newest
one mostly, else any older one, so a node is often read by two later ops: shared subexpressions). The ops are
matmul; elementwise (unary, binary with broadcasting, where, comparisons, casts); reductions (sum,
max, mean over random axes, keepdim or not); movement (reshape merging and splitting axes, permute,
expand, pad, shrink with steps, flip); `contiguous`; and `realize` in the middle of a program. The
same program is run by three interpreters (`evaluate` with a numpy, a tinyedu or a torch library),
so nothing of tinyedu is in the oracle.

Conditioning. The generator evaluates each candidate op in float64 as it builds the program and
keeps it only when the result is well-conditioned: magnitudes stay below MAX_ABS, and no element
sits within MARGIN of a kink or a decision (relu and abs near 0, maximum and comparisons of nearly
equal values, a cast near an integer, a max over nearly tied values). Every value tinyedu returns
is compared with the float64 result with a tolerance of the float32 kind: FLOOR times the node's
magnitude (1e-5 is about 80 float32 epsilons: the rounding of a dozen ops and of a sum added in
another order, far below the O(1) error of a wrong index or a lost term), plus SLACK times the
error the same program makes in float32 numpy (which measures how much float32 rounding this node
amplifies; tinyedu rounds at the same points, in another order).

Each test runs its own seeds on one device and setting: NUMPY (which interprets the kernel ASTs, so
it checks the scheduler and the views) runs the most programs; C (the default device) fewer, as it
compiles every new kernel: with the default opts, with the heuristics' opts on every kernel however
small, with NOOPT=1, with FUSION=0 and with ASYNC=1 (kernels queued to a launcher thread); PYTHON
(which runs the UOps) some too. Gradients: the backward of a random weighted sum of the outputs,
against torch in float64 (torch in float32 gives the conditioning) when torch is installed, else
central finite differences of the float64 program.
RANDOM_GRAPHS=n runs n programs in every test instead of its default (thousands find rarer bugs).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import pytest

from tinyedu import Device, Tensor, dtypes
from tinyedu.codegen import heuristics
from tinyedu.runtime.device import DeviceUnavailable

try:
    import torch
    import torch.nn.functional as F
except ImportError:  # the gradients are then checked with finite differences
    torch = F = None

GRAPHS = int(os.environ.get("RANDOM_GRAPHS", "0"))  # 0: each test's own default, sized for CI
MAX_SIZE = 256      # elements per node
MAX_ABS = 1e3       # magnitude of every value
MARGIN = 1e-3       # relative distance kept from every kink and decision
FLOOR, SLACK = 1e-5, 10.0

Node = tuple[str, tuple[int, ...], Any]  # (op, sources, argument); ("input", (), k) is input k


@dataclass
class Program:
    inputs: list[np.ndarray]   # float32 data
    nodes: list[Node]
    outputs: list[int]         # the nodes realized together at the end: those no other node reads

    def __str__(self) -> str:
        shapes = ", ".join(str(x.shape) for x in self.inputs)
        lines = [f"  {i}: {op}{list(srcs)} {arg}" for i, (op, srcs, arg) in enumerate(self.nodes)]
        return f"inputs {shapes}; outputs {self.outputs}\n" + "\n".join(lines)


# ---- the ops, in each library: numpy (the oracle), tinyedu, torch ----
UNARY: dict[str, Callable] = {
    "neg": lambda x: -x, "relu": lambda x: x.relu(), "abs": lambda x: x.abs(), "exp": lambda x: x.exp(),
    "sin": lambda x: x.sin(), "cos": lambda x: x.cos(), "tanh": lambda x: x.tanh(),
    "sigmoid": lambda x: x.sigmoid(), "sqrt": lambda x: (x * x + 0.5).sqrt(),
    "log": lambda x: (x * x + 0.5).log(), "recip": lambda x: 1 / (x * x + 0.5), "square": lambda x: x * x,
}
UNARY_NP: dict[str, Callable] = {
    "neg": np.negative, "relu": lambda x: np.maximum(x, 0), "abs": np.abs, "exp": np.exp, "sin": np.sin,
    "cos": np.cos, "tanh": np.tanh, "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "sqrt": lambda x: np.sqrt(x * x + 0.5), "log": lambda x: np.log(x * x + 0.5),
    "recip": lambda x: 1 / (x * x + 0.5), "square": lambda x: x * x,
}
BINARY: dict[str, Callable] = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "div": lambda a, b: a / (b * b + 1), "maximum": lambda a, b: a.maximum(b),
}
BINARY_NP: dict[str, Callable] = {**BINARY, "maximum": np.maximum}
COMPARE = ("lt", "eq")
REDUCE = ("sum", "max", "mean")


@np.errstate(all="ignore")  # a candidate op may overflow: the generator refuses what is not finite
def apply_numpy(op: str, xs: list, arg: Any) -> np.ndarray:
    x = xs[0]
    if op in UNARY_NP:
        return UNARY_NP[op](x)
    if op in BINARY_NP:
        return BINARY_NP[op](x, xs[1])
    table = {
        "lt": lambda: (x < xs[1]).astype(x.dtype), "eq": lambda: (x == xs[1]).astype(x.dtype),
        "where": lambda: np.where(x > 0, xs[1], xs[2]), "trunc": lambda: np.trunc(x),
        "nonzero": lambda: (x != 0).astype(x.dtype), "matmul": lambda: x @ xs[1],
        "sum": lambda: x.sum(arg[0], keepdims=arg[1]), "max": lambda: x.max(arg[0], keepdims=arg[1]),
        "mean": lambda: x.mean(arg[0], keepdims=arg[1]), "reshape": lambda: x.reshape(arg),
        "permute": lambda: x.transpose(arg), "expand": lambda: np.broadcast_to(x.reshape(arg[0]), arg[1]),
        "pad": lambda: np.pad(x, arg), "shrink": lambda: x[tuple(slice(*b) for b in arg)],
        "flip": lambda: np.flip(x, arg), "contiguous": lambda: x, "realize": lambda: x,
    }
    return np.asarray(table[op](), dtype=x.dtype)


def apply_tensor(op: str, xs: list, arg: Any) -> Any:
    """tinyedu and torch share these spellings (a torch tensor is passed by apply_torch)."""
    x = xs[0]
    if op in UNARY:
        return UNARY[op](x)
    if op in BINARY:
        return BINARY[op](x, xs[1])
    table = {
        "matmul": lambda: x @ xs[1], "reshape": lambda: x.reshape(arg), "permute": lambda: x.permute(arg),
        "expand": lambda: x.reshape(arg[0]).expand(arg[1]), "flip": lambda: x.flip(arg),
        "shrink": lambda: x[tuple(slice(*b) for b in arg)], "contiguous": lambda: x.contiguous(),
    }
    return table[op]()


def apply_tinyedu(op: str, xs: list, arg: Any) -> Tensor:
    x = xs[0]
    table = {
        "lt": lambda: (x < xs[1]).float(), "eq": lambda: (x == xs[1]).float(),
        "where": lambda: (x > 0).where(xs[1], xs[2]), "trunc": lambda: x.cast(dtypes.int32).float(),
        "nonzero": lambda: x.cast(dtypes.bool).float(), "sum": lambda: x.sum(arg[0], keepdim=arg[1]),
        "max": lambda: x.max(arg[0], keepdim=arg[1]), "mean": lambda: x.mean(arg[0], keepdim=arg[1]),
        "pad": lambda: x.pad(arg), "realize": lambda: x.realize(),
    }
    return table[op]() if op in table else apply_tensor(op, xs, arg)


def apply_torch(op: str, xs: list, arg: Any) -> Any:
    x = xs[0]
    table = {
        "lt": lambda: (x < xs[1]).to(x.dtype), "eq": lambda: (x == xs[1]).to(x.dtype),
        "where": lambda: torch.where(x > 0, xs[1], xs[2]), "trunc": lambda: x.to(torch.int32).to(x.dtype),
        "nonzero": lambda: x.bool().to(x.dtype), "sum": lambda: x.sum(arg[0], keepdim=arg[1]),
        "max": lambda: x.amax(arg[0], keepdim=arg[1]), "mean": lambda: x.mean(arg[0], keepdim=arg[1]),
        "pad": lambda: F.pad(x, [p for pair in reversed(arg) for p in pair]), "realize": lambda: x,
    }
    return table[op]() if op in table else apply_tensor(op, xs, arg)


def evaluate(program: Program, make_input: Callable, apply: Callable) -> list:
    """Every node's value: make_input(k) for input k, apply(op, sources, arg) for an op."""
    values: list = []
    for op, srcs, arg in program.nodes:
        values.append(make_input(arg) if op == "input" else apply(op, [values[s] for s in srcs], arg))
    return values


def numpy_values(program: Program, dtype: type = np.float64) -> list[np.ndarray]:
    return evaluate(program, lambda k: program.inputs[k].astype(dtype), apply_numpy)


# ---- drawing a program ----
class _Generator:
    """Draws ops one at a time, keeping the well-conditioned ones (see the module docstring)."""

    def __init__(self, rng: np.random.Generator):
        self.rng = rng
        self.program = Program([], [], [])
        self.values: list[np.ndarray] = []  # float64 value of every node

    def pick(self, ndim_at_least: int = 0) -> int | None:
        """A node to read: the newest one mostly, else any (so nodes get shared)."""
        fits = [i for i, v in enumerate(self.values) if v.ndim >= ndim_at_least]
        if not fits:
            return None
        return fits[-1] if self.rng.random() < 0.6 else int(self.rng.choice(fits))

    def new_input(self, shape: tuple[int, ...]) -> int:
        data = self.rng.uniform(-2, 2, shape).astype(np.float32)
        self.program.inputs.append(data)
        return self.add(("input", (), len(self.program.inputs) - 1), data.astype(np.float64))

    def add(self, node: Node, value: np.ndarray) -> int:
        self.program.nodes.append(node)
        self.values.append(value)
        return len(self.values) - 1

    def partner(self, shape: tuple[int, ...]) -> int:
        """A node that broadcasts with `shape`: an existing one, or a new input."""
        if self.rng.random() < 0.5:
            for i in self.rng.permutation(len(self.values)):
                if _broadcasts(shape, self.values[i].shape):
                    return int(i)
        other = [1 if self.rng.random() < 0.3 else s for s in shape]
        drop = int(self.rng.integers(0, len(other) + 1)) if self.rng.random() < 0.2 else 0  # leading axes
        return self.new_input(tuple(other[drop:]))

    def try_op(self) -> bool:
        """Draw one op; add it when it is valid and well-conditioned."""
        drawn = list(DRAW)[self.rng.choice(len(DRAW), p=CHANCES)](self)
        if drawn is None:
            return False
        op, srcs, arg = drawn
        xs = [self.values[s] for s in srcs]
        try:
            out = apply_numpy(op, xs, arg)
        except ValueError:  # shapes that do not go together (a matmul's batch axes, ...)
            return False
        if not (0 < out.size <= MAX_SIZE and np.all(np.isfinite(out)) and np.abs(out).max() <= MAX_ABS):
            return False
        if not well_conditioned(op, xs, arg):
            return False
        self.add((op, srcs, arg), out)
        return True


def _broadcasts(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    try:
        return int(np.prod(np.broadcast_shapes(a, b))) <= MAX_SIZE
    except ValueError:
        return False


def _draw_elementwise(g: _Generator) -> Node | None:
    a = g.pick()
    roll = g.rng.random()
    if roll < 0.4:
        return (str(g.rng.choice(sorted(UNARY) + ["trunc", "nonzero"])), (a,), None)
    b = g.partner(g.values[a].shape)
    a, b = (a, b) if g.rng.random() < 0.5 else (b, a)
    if roll < 0.8:
        return (str(g.rng.choice(sorted(BINARY))), (a, b), None)
    if roll < 0.9:
        return (str(g.rng.choice(COMPARE)), (a, b), None)
    return ("where", (a, b, g.partner(g.values[a].shape)), None)


def _draw_matmul(g: _Generator) -> Node | None:
    a = g.pick(ndim_at_least=1)
    if a is None:
        return None
    k = g.values[a].shape[-1]
    others = [i for i, v in enumerate(g.values) if (v.ndim >= 2 and v.shape[-2] == k) or v.shape == (k,)]
    if others and g.rng.random() < 0.5:
        return ("matmul", (a, int(g.rng.choice(others))), None)
    return ("matmul", (a, g.new_input((k, int(g.rng.integers(1, 5))))), None)


def _draw_reduce(g: _Generator) -> Node | None:
    x = g.pick(ndim_at_least=1)
    if x is None:
        return None
    ndim = g.values[x].ndim
    n = 1 if g.rng.random() < 0.6 else int(g.rng.integers(1, ndim + 1))  # mostly one axis
    axes = tuple(int(a) for a in sorted(g.rng.choice(ndim, n, replace=False)))
    return (str(g.rng.choice(REDUCE)), (x,), (axes, bool(g.rng.random() < 0.5)))


def _draw_reshape(g: _Generator) -> Node | None:
    x = g.pick()
    shape = list(g.values[x].shape)
    roll = g.rng.random()
    if roll < 0.5 and len(shape) >= 2:  # merge two neighbouring axes
        i = int(g.rng.integers(0, len(shape) - 1))
        shape[i:i + 2] = [shape[i] * shape[i + 1]]
    elif roll < 0.8:  # split an axis into two (or add a size-1 axis)
        i = int(g.rng.integers(0, len(shape) + 1))
        size = shape[i] if i < len(shape) else 1
        factor = int(g.rng.choice([f for f in range(1, size + 1) if size % f == 0]))
        shape[i:i + 1] = [factor, size // factor]
    else:  # any shape with the same size
        shape = _random_factors(g.rng, int(np.prod(shape)))
    return ("reshape", (x,), tuple(shape)) if len(shape) <= 5 else None


def _random_factors(rng: np.random.Generator, size: int) -> list[int]:
    shape = []
    while size > 1 and len(shape) < 3:
        factor = int(rng.choice([f for f in range(2, size + 1) if size % f == 0]))
        shape.append(factor)
        size //= factor
    return shape + ([size] if size > 1 else []) + ([1] if rng.random() < 0.3 else [])


def _draw_movement(g: _Generator) -> Node | None:
    x = g.pick(ndim_at_least=1)
    if x is None:
        return None
    shape, rng = g.values[x].shape, g.rng
    kind = rng.choice(["permute", "expand", "pad", "shrink", "flip"])
    if kind == "permute":
        return ("permute", (x,), tuple(int(a) for a in rng.permutation(len(shape))))
    if kind == "expand":
        at = int(rng.integers(0, len(shape) + 1))
        unsqueezed = shape[:at] + (1,) + shape[at:]
        expanded = tuple(int(rng.integers(2, 4)) if s == 1 else s for s in unsqueezed)
        return ("expand", (x,), (unsqueezed, expanded))
    if kind == "pad":
        return ("pad", (x,), tuple((int(rng.integers(0, 3)), int(rng.integers(0, 3))) for _ in shape))
    if kind == "shrink":
        bounds = [sorted(int(b) for b in rng.choice(s + 1, 2, replace=False)) if s > 1 else [0, 1]
                  for s in shape]
        return ("shrink", (x,), tuple((lo, hi, int(rng.choice([1, 1, 2]))) for lo, hi in bounds))
    axes = rng.choice(len(shape), int(rng.integers(1, len(shape) + 1)), replace=False)
    return ("flip", (x,), tuple(sorted(int(a) for a in axes)))


def _draw_boundary(g: _Generator) -> Node | None:
    return (str(g.rng.choice(["contiguous", "realize"])), (g.pick(),), None)


# How to draw each kind of op, and how often (elementwise ops are often refused as ill-conditioned).
DRAW = {_draw_elementwise: 8, _draw_matmul: 2, _draw_reduce: 3, _draw_reshape: 3, _draw_movement: 4,
        _draw_boundary: 1}
CHANCES = np.array(list(DRAW.values())) / sum(DRAW.values())


# ---- conditioning ----
def _apart(a: np.ndarray, b: Any) -> bool:
    """Every pair is equal or at least MARGIN apart (relative to the values' size)."""
    gap = np.abs(a - b)
    return bool(np.all((gap == 0) | (gap > MARGIN * (1 + np.abs(a) + np.abs(b)))))


def _ties_apart(x: np.ndarray, axes: tuple[int, ...]) -> bool:
    """No value within MARGIN below the max of its reduction, unless exactly equal to it."""
    return _apart(x, x.max(axes, keepdims=True))


def well_conditioned(op: str, xs: list[np.ndarray], arg: Any) -> bool:
    x = xs[0]
    if op in ("relu", "abs", "nonzero", "where"):
        return _apart(x, 0)
    if op in ("maximum", "lt", "eq"):
        return _apart(x, xs[1])
    if op == "trunc":
        return _apart(x, np.round(x))
    if op in ("sin", "cos"):
        return bool(np.abs(x).max() <= 100)
    if op == "max":
        return _ties_apart(x, arg[0])
    return True


def random_program(seed: int, ops: int = 12) -> Program:
    """A program of `ops` ops on 1 to 3 inputs of 0 to 4 axes (mostly 2 or 3; sizes 1 to 5), from a seed."""
    g = _Generator(np.random.default_rng(seed))
    for _ in range(int(g.rng.integers(1, 4))):
        ndim = int(g.rng.choice(5, p=[0.05, 0.15, 0.3, 0.3, 0.2]))
        g.new_input(tuple(int(s) for s in g.rng.integers(1, 6, ndim)))
    added = tries = 0
    while added < ops and tries < 20 * ops:
        added, tries = added + g.try_op(), tries + 1
    read = {s for _, srcs, _ in g.program.nodes for s in srcs}
    sinks = [i for i, (op, _, _) in enumerate(g.program.nodes) if i not in read and op != "input"]
    g.program.outputs = sinks or [len(g.values) - 1]
    return g.program


# ---- running and comparing ----
def run_tinyedu(program: Program, device: str, grad_weights: list[np.ndarray] | None = None
                ) -> tuple[list[np.ndarray], list[np.ndarray] | None]:
    """The outputs' values (realized together) and, given weights, d(sum(w * output))/d(input)."""
    inputs = [Tensor(x, device=device, requires_grad=grad_weights is not None) for x in program.inputs]
    values = evaluate(program, lambda k: inputs[k], apply_tinyedu)
    outs = [values[i] for i in program.outputs]
    Tensor.realize_all(*outs)
    got = [o.numpy() for o in outs]
    if grad_weights is None:
        return got, None
    loss = sum((o * Tensor(w, device=device)).sum() for o, w in zip(outs, grad_weights, strict=True))
    if loss.requires_grad:  # else no output depends on an input differentiably: every gradient is 0
        loss.backward()
    return got, [np.zeros(x.shape, np.float32) if x.grad is None else x.grad.numpy() for x in inputs]


def tolerance(exact: np.ndarray, float32: np.ndarray) -> float:
    """Absolute tolerance for a float32 computation of `exact` (module docstring: Conditioning)."""
    magnitude = float(np.abs(exact).max(initial=0))
    return FLOOR * (1 + magnitude) + SLACK * float(np.abs(float32 - exact).max(initial=0))


def assert_close(got: np.ndarray, exact: np.ndarray, float32: np.ndarray, what: str) -> None:
    assert got.shape == exact.shape, f"{what}: shape {got.shape}, expected {exact.shape}"
    np.testing.assert_allclose(got, exact, rtol=FLOOR, atol=tolerance(exact, float32), err_msg=what)


def check_forward(seed: int, device: str) -> None:
    program = random_program(seed)
    exact, single = numpy_values(program), numpy_values(program, np.float32)
    got, _ = run_tinyedu(program, device)
    for i, value in zip(program.outputs, got, strict=True):
        assert_close(value, exact[i], single[i], f"seed {seed} on {device}, node {i} of\n{program}")


def count(default: int) -> int:
    return GRAPHS or default


# ---- the tests ----
@pytest.mark.parametrize("device", ["C", "NUMPY"])
def test_random_graphs_match_float64(device: str):
    for seed in range(count(16 if device == "C" else 300)):  # C compiles each new kernel
        check_forward(seed, device)


def test_random_graphs_on_wasm():
    """WASM compiles each new kernel twice (clang, then wasmtime's Cranelift): a few graphs, with opts."""
    try:
        Device["WASM"]
    except DeviceUnavailable as missing:
        pytest.skip(str(missing))
    for seed in range(count(8)):
        check_forward(20_000 + seed, "WASM")


def test_random_graphs_on_python():
    for seed in range(count(60)):
        check_forward(10_000 + seed, "PYTHON")


@pytest.fixture
def opts_on_every_kernel():
    """The heuristics' opts even on kernels they would leave as written (these graphs are small)."""
    saved = heuristics.SMALL_KERNEL, heuristics.THREAD_MIN_WORK
    heuristics.SMALL_KERNEL = heuristics.THREAD_MIN_WORK = 0
    Device["C"].programs.clear()  # programs lowered without these opts must not be reused
    yield
    heuristics.SMALL_KERNEL, heuristics.THREAD_MIN_WORK = saved
    Device["C"].programs.clear()


def test_random_graphs_with_opts_on_every_kernel(opts_on_every_kernel):
    for seed in range(count(8)):
        check_forward(20_000 + seed, "C")


@pytest.mark.parametrize("flag", ["NOOPT", "FUSION"])
def test_random_graphs_without_opts_or_fusion(flag: str, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(flag, "1" if flag == "NOOPT" else "0")
    for seed in range(count(6)):
        check_forward(30_000 + seed, "C")


def test_random_graphs_with_kernels_queued(monkeypatch: pytest.MonkeyPatch):
    """ASYNC=1 (tinyedu/runtime/launch_queue.py): realizes in the middle of a program, shared inputs
    and results read while later kernels are queued."""
    monkeypatch.setenv("ASYNC", "1")
    for seed in range(count(8)):
        check_forward(50_000 + seed, "C")


def torch_gradients(program: Program, weights: list[np.ndarray], dtype: Any) -> list[np.ndarray]:
    """d(sum(w * output))/d(input), by torch in `dtype`."""
    inputs = [torch.tensor(x, dtype=dtype, requires_grad=True) for x in program.inputs]
    values = evaluate(program, lambda k: inputs[k], apply_torch)
    loss = sum((values[i] * torch.tensor(w, dtype=dtype)).sum()
               for i, w in zip(program.outputs, weights, strict=True))
    if not loss.requires_grad:
        return [np.zeros(x.shape) for x in program.inputs]
    grads = torch.autograd.grad(loss, inputs, allow_unused=True)
    return [np.zeros(x.shape) if g is None else g.double().numpy()
            for x, g in zip(inputs, grads, strict=True)]


def finite_differences(program: Program, weights: list[np.ndarray], h: float = 1e-6) -> list[np.ndarray]:
    def loss(inputs: list[np.ndarray]) -> float:
        values = evaluate(program, lambda k: inputs[k], apply_numpy)
        return sum(float((values[i] * w).sum()) for i, w in zip(program.outputs, weights, strict=True))

    base = [x.astype(np.float64) for x in program.inputs]
    grads = []
    for k, x in enumerate(base):
        grad = np.zeros(x.shape)
        for index in np.ndindex(x.shape):
            shifted = [b.copy() for b in base]
            shifted[k][index] += h
            up = loss(shifted)
            shifted[k][index] -= 2 * h
            grad[index] = (up - loss(shifted)) / (2 * h)
        grads.append(grad)
    return grads


def test_random_graph_gradients():
    """Against torch in float64 (torch in float32 measures the conditioning), else finite differences."""
    for seed in range(40_000, 40_000 + count(6)):
        program = random_program(seed, ops=8)
        rng = np.random.default_rng(seed)
        weights = [rng.uniform(-1, 1, np.shape(numpy_values(program)[i])).astype(np.float32)
                   for i in program.outputs]
        _, got = run_tinyedu(program, "C", weights)
        if torch is not None:
            exact, single = torch_gradients(program, weights, torch.float64), torch_gradients(
                program, weights, torch.float32)
        else:  # no float32 twin: allow 100 times the floor
            exact = finite_differences(program, weights)
            single = [e * (1 + 100 * FLOOR) for e in exact]
        for k, (g, e, s) in enumerate(zip(got, exact, single, strict=True)):
            assert_close(g, e, s, f"seed {seed}: gradient of input {k} of\n{program}")


# ---- what the random graphs found, kept as plain tests ----
@pytest.mark.parametrize("shape", [(2, 4, 2), (2, 7, 2), (3, 16, 2), (2, 4, 3)])
def test_the_sum_of_a_tensor_flipped_along_a_short_last_axis(shape: tuple[int, ...]):
    """GCC 12.2 vectorized this sum wrongly (128 for (2, 4, 2), not 120): tinyedu/runtime/ops_c.py."""
    data = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    for device in ("C", "NUMPY"):
        assert Tensor(data, device=device).flip(-1).sum().item() == data.sum()
        np.testing.assert_array_equal(Tensor(data, device=device).flip(-1).sum(-1).numpy(), data.sum(-1))
