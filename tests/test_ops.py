"""Every Tensor op, forward and backward, on every device: against PyTorch (when it is installed)
and, whether or not it is, against numerical gradients (central differences).

`helper_test_op(shapes, torch_fn, tinyedu_fn)` does the work: it makes random float32 inputs of the
given shapes (optionally seen through a non-contiguous view: permuted, flipped, strided or padded),
runs both functions, compares the outputs, back-propagates the same random cotangent through both
and compares the input gradients, then checks tinyedu's gradients against finite differences.
When torch_fn and tinyedu_fn are the same code (same method names), pass only one.

The autouse `device` fixture runs every test once per device in `Device.known` (or only on $DEVICE
when it is set). Finite differences run on the NUMPY device, the oracle; on the other devices the
reference is torch, or the NUMPY device when torch is missing.

NEON, LLVM, GPU and CUDA run a representative part of the cases. Each pays for every new kernel
(NEON is cross-compiled and, on x86-64, run under qemu; LLVM is compiled in the process; GPU's
OpenCL is compiled by PoCL or the GPU's driver; CUDA's by NVRTC), and every case on them would add
half again to the suite, for kernels that mostly differ from the ones already run in shape only.
So on these devices a test without cases (only the device) runs as everywhere, and
a parametrized test runs the cases its `@pytest.mark.backends(...)` marker names: `name=["cos",
"exp"]` picks the cases whose `name` is one of those (several keywords must all match, several
markers any; the values are compared as `str`), `backends()` every case, no marker none. The
choice covers every primitive, every family of ops, edge values and each dtype; every primitive
at its edge values and every opt (the vector paths) run on NEON and LLVM in test_backends.py.
`pytest --every-device`, or DEVICE=NEON (LLVM, GPU, CUDA), runs every case on them (tests/conftest.py).
"""

from __future__ import annotations

import contextlib
import math
import os
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import pytest

from tinyedu import Device, Tensor, dtypes, no_grad
from tinyedu.exercises.gradcheck import check_tensor_grads
from tinyedu.runtime.device import DeviceUnavailable

try:
    import torch
    import torch.nn.functional as F
except ImportError:  # the file still runs: numerical gradients need no torch
    torch = F = None


# torch warns about var/std with n - correction <= 0; the NaN it returns is what we compare against
pytestmark = pytest.mark.filterwarnings("ignore:.*degrees of freedom:UserWarning")


# Every known device by default; DEVICE=C pytest tests/test_ops.py runs just one.
DEVICES = (Device.DEFAULT,) if os.environ.get("DEVICE") else Device.known
# run the cases marked `backends` (see the module docstring)
SAMPLED = ("NEON", "LLVM", "GPU", "CUDA", "WEBGPU", "WASM")
backends = pytest.mark.backends


def _device_param(name: str) -> Any:
    if name in SAMPLED and len(DEVICES) > 1:
        return pytest.param(name, marks=pytest.mark.sampled_device)
    return name


@pytest.fixture(autouse=True, params=[_device_param(d) for d in DEVICES])
def device(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    try:
        Device[request.param].check_runnable()  # CUDA compiles anywhere, runs only on a GPU
    except DeviceUnavailable as missing:  # e.g. NEON without its cross compiler, LLVM without llvmlite
        pytest.skip(str(missing))
    monkeypatch.setenv("DEVICE", request.param)
    return request.param


# ---- the helper ----
LAYOUTS = ("contiguous", "permuted", "flipped", "strided", "padded")


def _base_shape(shape: tuple[int, ...], layout: str) -> tuple[int, ...]:
    """The shape to create so that the `layout` view of it has `shape`."""
    if layout == "permuted":
        return shape[::-1]
    if layout == "strided":
        return tuple(2 * s for s in shape)
    if layout == "padded":
        return tuple(s - 1 for s in shape)
    return shape


def _view(x: Any, layout: str) -> Any:
    """The same non-contiguous view in both frameworks (x is a torch tensor or a tinyedu Tensor)."""
    is_torch = not isinstance(x, Tensor)
    nd = x.ndim
    if layout == "contiguous" or nd == 0:
        return x
    if layout == "permuted":
        return x.permute(*reversed(range(nd)))
    if layout == "flipped":
        return x.flip(list(range(nd))) if is_torch else x.flip(tuple(range(nd)))
    if layout == "strided":
        return x[(slice(None, None, 2),) * nd] if is_torch else x._stride((2,) * nd)
    if layout == "padded":  # one element of 0.5 before each axis (a masked view, then a where)
        return F.pad(x, [1, 0] * nd, value=0.5) if is_torch else x.pad(((1, 0),) * nd, value=0.5)
    raise ValueError(layout)


def _as_list(out: Any) -> list:
    return list(out) if isinstance(out, (tuple, list)) else [out]


ORACLE = "NUMPY"  # every other device must agree with it (DESIGN.md); it also runs the numerical checks


@contextlib.contextmanager
def _on_device(name: str) -> Iterator[None]:
    previous = os.environ.get("DEVICE")
    os.environ["DEVICE"] = name
    try:
        yield
    finally:
        os.environ.pop("DEVICE") if previous is None else os.environ.update(DEVICE=previous)


Arrays = list[np.ndarray]


def _run(fn: Callable, arrays: Arrays, layout: str, grad: bool,
         cotangents: Arrays | None = None) -> tuple[Arrays, Arrays, Arrays]:
    """tinyedu's outputs, and the input gradients of sum(output * cotangent) (random unless given;
    no gradients when an output is not a float or does not depend on the inputs)."""
    leaves = [Tensor(a, requires_grad=grad) for a in arrays]
    outs = _as_list(fn(*(_view(t, layout) for t in leaves)))
    results = [o.numpy() for o in outs]
    if cotangents is None:
        rng = np.random.default_rng(len(results))
        cotangents = [rng.standard_normal(r.shape).astype(np.float32) for r in results]
    if not (grad and all(o.dtype.is_float for o in outs) and any(o.requires_grad for o in outs)):
        return results, [], cotangents
    loss = sum((o * Tensor(c)).sum() for o, c in zip(outs, cotangents, strict=True) if o.requires_grad)
    loss.backward()
    grads = [np.zeros_like(a) if t.grad is None else t.grad.numpy()
             for t, a in zip(leaves, arrays, strict=True)]
    for g, a in zip(grads, arrays, strict=True):
        assert g.shape == a.shape and g.dtype == np.float32, f"gradient {g.shape} {g.dtype} for {a.shape}"
    return results, grads, cotangents


def _torch_run(fn: Callable, arrays: Arrays, layout: str, grad: bool,
               cotangents: Arrays) -> tuple[Arrays, Arrays]:
    """The same in torch, in float64 (the exact answer, as far as float32 inputs allow)."""
    leaves = [torch.tensor(a, dtype=torch.float64, requires_grad=grad) for a in arrays]
    outs = _as_list(fn(*(_view(t, layout) for t in leaves)))
    pairs = [(o, torch.tensor(c, dtype=torch.float64)) for o, c in zip(outs, cotangents, strict=True)
             if o.requires_grad]
    if pairs:
        torch.autograd.backward([o for o, _ in pairs], [c for _, c in pairs])
    grads = [np.zeros(a.shape) if t.grad is None else t.grad.numpy()
             for t, a in zip(leaves, arrays, strict=True)]
    return [o.detach().numpy() for o in outs], grads


def _assert_close(ours: Arrays, expected: Arrays, atol: float, rtol: float, what: str) -> None:
    assert len(ours) == len(expected), f"{len(ours)} {what}, expected {len(expected)}"
    for k, (a, b) in enumerate(zip(ours, expected, strict=True)):
        assert a.shape == b.shape, f"{what} {k}: shape {a.shape}, expected {b.shape}"
        if b.dtype.kind == "f":
            np.testing.assert_allclose(a, b, atol=atol, rtol=rtol, equal_nan=True, err_msg=f"{what} {k}")
        else:
            np.testing.assert_array_equal(a, b, err_msg=f"{what} {k}")


def helper_test_op(shapes: Sequence[tuple[int, ...]], torch_fn: Callable, tinyedu_fn: Callable | None = None,
                   *, low: float | Sequence[float] = -2.0, high: float | Sequence[float] = 2.0,
                   arrays: Arrays | None = None, layout: str = "contiguous", atol: float = 1e-5,
                   rtol: float = 1e-4, grad_atol: float = 1e-4, grad_rtol: float = 1e-3, grad: bool = True,
                   numerical: bool = True, seed: int = 0) -> list[np.ndarray]:
    """Check tinyedu_fn on random inputs, forward and backward; returns tinyedu's outputs.

    References: torch_fn in float64 when torch is installed (else, on other devices, the NUMPY
    device), and on the NUMPY device always finite differences of the gradients too.
    """
    tinyedu_fn = tinyedu_fn or torch_fn
    if arrays is None:
        rng = np.random.default_rng(seed)
        lows = low if isinstance(low, Sequence) else [low] * len(shapes)
        highs = high if isinstance(high, Sequence) else [high] * len(shapes)
        arrays = [rng.uniform(lo, hi, _base_shape(tuple(s), layout)).astype(np.float32)
                  for s, lo, hi in zip(shapes, lows, highs, strict=True)]
    results, grads, cotangents = _run(tinyedu_fn, arrays, layout, grad)
    if torch is not None:
        expected, expected_grads = _torch_run(torch_fn, arrays, layout, grad, cotangents)
    elif Device.DEFAULT != ORACLE:
        with _on_device(ORACLE):
            expected, expected_grads, _ = _run(tinyedu_fn, arrays, layout, grad, cotangents)
    else:
        expected, expected_grads = results, grads
    _assert_close(results, expected, atol, rtol, "output")
    if grads:
        _assert_close(grads, expected_grads, grad_atol, grad_rtol, "gradient of input")
    if grads and numerical and Device.DEFAULT == ORACLE:
        def loss_of(*values: np.ndarray) -> float:
            with no_grad():
                outs = _as_list(tinyedu_fn(*(_view(Tensor(v), layout) for v in values)))
            pairs = zip(outs, cotangents, strict=True)
            return sum(float((o.numpy().astype(np.float64) * c).sum()) for o, c in pairs)

        check_tensor_grads(loss_of, arrays, grads, seed=seed)
    return results


def _distinct(shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    """Values at least 0.05 apart, for max-like ops: finite differences must not cross a tie."""
    n = math.prod(shape)
    return ((np.random.default_rng(seed).permutation(n) - n / 2) * 0.05).astype(np.float32).reshape(shape)


def _check_int_op(torch_fn: Callable, tinyedu_fn: Callable, *arrays: np.ndarray) -> None:
    """Forward only, for integer and bool data: values and dtype must match torch (torch's int64 may read
    as int32, tinyedu's default int: argmax and ints made from Python numbers; sums are int64 in both)."""
    torch = pytest.importorskip("torch")
    ours = tinyedu_fn(*(Tensor(a) for a in arrays))
    theirs = torch_fn(*(torch.tensor(a) for a in arrays))
    expected = theirs.numpy()
    expected_dtype = np.int32 if expected.dtype == np.int64 and ours.dtype != dtypes.int64 else expected.dtype
    assert ours.dtype.np == expected_dtype, f"dtype {ours.dtype.name}, torch gives {theirs.dtype}"
    np.testing.assert_allclose(ours.numpy(), expected.astype(expected_dtype), rtol=1e-6, atol=1e-6)


# ---- unary ops (and binary ops with a Python scalar) ----
# name: (torch_fn, tinyedu_fn or None when the same code works for both, low, high)
UNARY = {
    "neg": (lambda x: -x, None, -2, 2),
    "reciprocal": (lambda x: x.reciprocal(), None, 0.5, 2),
    "reciprocal_negative": (lambda x: x.reciprocal(), None, -2, -0.5),
    "sin": (lambda x: x.sin(), None, -3, 3),
    "cos": (lambda x: x.cos(), None, -3, 3),
    "exp": (lambda x: x.exp(), None, -2, 2),
    "exp2": (lambda x: x.exp2(), None, -2, 2),
    "log": (lambda x: x.log(), None, 0.3, 3),
    "log2": (lambda x: x.log2(), None, 0.3, 3),
    "sqrt": (lambda x: x.sqrt(), None, 0.3, 3),
    "rsqrt": (lambda x: x.rsqrt(), None, 0.3, 3),
    "square": (lambda x: x.square(), None, -2, 2),
    "relu": (lambda x: x.relu(), None, -2, 2),
    "abs": (lambda x: x.abs(), None, -2, 2),
    "sigmoid": (lambda x: x.sigmoid(), None, -4, 4),
    "tanh": (lambda x: x.tanh(), None, -3, 3),
    "gelu": (lambda x: F.gelu(x), lambda x: x.gelu(), -3, 3),
    "gelu_tanh": (lambda x: F.gelu(x, approximate="tanh"), lambda x: x.gelu(approximate="tanh"), -3, 3),
    "silu": (lambda x: F.silu(x), lambda x: x.silu(), -3, 3),
    "leaky_relu": (lambda x: F.leaky_relu(x, 0.1), lambda x: x.leaky_relu(0.1), -2, 2),
    "softplus": (lambda x: F.softplus(x, beta=2.0), lambda x: x.softplus(2.0), -3, 3),
    "clamp": (lambda x: x.clamp(-0.5, 1.0), None, -2, 2),
    "clamp_min": (lambda x: x.clamp(min=0.3), None, -2, 2),
    "clip_max": (lambda x: x.clip(max=-0.2), None, -2, 2),
    "add_scalar": (lambda x: x + 1.5, None, -2, 2),
    "radd_scalar": (lambda x: 1.5 + x, None, -2, 2),
    "rsub_scalar": (lambda x: 3 - x, None, -2, 2),
    "mul_scalar": (lambda x: x * -3, None, -2, 2),
    "div_scalar": (lambda x: x / 4, None, -2, 2),
    "rdiv_scalar": (lambda x: 2 / x, None, 0.5, 2),
    "pow_2": (lambda x: x**2, None, -2, 2),
    "pow_3": (lambda x: x**3, None, -2, 2),
    "pow_0": (lambda x: x**0, None, -2, 2),
    "pow_-2": (lambda x: x**-2, None, 0.5, 2),
    "pow_half": (lambda x: x**0.5, None, 0.3, 2),
    "pow_2.5": (lambda x: x**2.5, None, 0.3, 2),
    "pow_-1.5": (lambda x: x**-1.5, None, 0.5, 2),
    "rpow": (lambda x: 2**x, None, -2, 2),
    "mod_scalar": (lambda x: x % 1.5, None, -3, 3),
}


@pytest.mark.parametrize("name", UNARY)
@backends(name=["cos", "sin", "exp2", "log2", "sqrt", "reciprocal_negative", "relu", "abs", "sigmoid",
                "gelu", "softplus", "clamp", "pow_2.5", "mod_scalar"])
def test_unary(name: str) -> None:
    torch_fn, tinyedu_fn, low, high = UNARY[name]
    helper_test_op([(2, 3)], torch_fn, tinyedu_fn, low=low, high=high)


@pytest.mark.parametrize("shape", [(), (0,), (1, 3, 1)], ids=str)
@pytest.mark.parametrize("name", ["neg", "exp", "log", "relu", "sigmoid", "gelu", "pow_3", "rdiv_scalar"])
@backends(name=["exp", "relu"])
def test_unary_edge_shapes(name: str, shape: tuple[int, ...]) -> None:
    torch_fn, tinyedu_fn, low, high = UNARY[name]
    helper_test_op([shape], torch_fn, tinyedu_fn, low=low, high=high)


@pytest.mark.parametrize("layout", LAYOUTS[1:])
@pytest.mark.parametrize("name", ["exp", "relu", "gelu", "rdiv_scalar"])
@backends(name=["gelu"])
def test_unary_non_contiguous(name: str, layout: str) -> None:
    torch_fn, tinyedu_fn, low, high = UNARY[name]
    helper_test_op([(2, 3)], torch_fn, tinyedu_fn, low=low, high=high, layout=layout)


@pytest.mark.parametrize("name, fn", [("sign", lambda x: x.sign()), ("trunc", lambda x: x.trunc())])
@backends()
def test_unary_without_gradient(name: str, fn: Callable) -> None:
    """sign and trunc are flat almost everywhere; tinyedu's results are not part of the graph."""
    arrays = [np.array([-2.5, -1.0, -0.3, 0.0, 0.3, 1.7], dtype=np.float32)]
    helper_test_op([(6,)], fn, arrays=arrays, grad=False)


# ---- binary ops, with broadcasting ----
BINARY = {
    "add": (lambda x, y: x + y, None, (-2, -2), (2, 2)),
    "sub": (lambda x, y: x - y, None, (-2, -2), (2, 2)),
    "mul": (lambda x, y: x * y, None, (-2, -2), (2, 2)),
    "div": (lambda x, y: x / y, None, (-2, 0.5), (2, 2)),
    "maximum": (lambda x, y: x.maximum(y), None, (-2, -2), (2, 2)),
    "minimum": (lambda x, y: x.minimum(y), None, (-2, -2), (2, 2)),
    "pow": (lambda x, y: x**y, None, (0.5, -2), (2, 2)),
    "mod": (lambda x, y: x % y, None, (-3, 1), (3, 2)),
}
COMPARE = {
    "lt": lambda x, y: x < y, "gt": lambda x, y: x > y, "le": lambda x, y: x <= y, "ge": lambda x, y: x >= y,
    "eq": lambda x, y: x == y, "ne": lambda x, y: x != y,
}
BROADCAST_SHAPES = [((3,), (3,)), ((2, 3), (3,)), ((3, 1), (1, 4)), ((), (2, 3)), ((2, 1, 3), (4, 1)),
                    ((0, 3), (1, 3)), ((2, 1), (2, 0))]


@pytest.mark.parametrize("shapes", BROADCAST_SHAPES, ids=str)
@pytest.mark.parametrize("name", BINARY)
@backends(shapes=[BROADCAST_SHAPES[2]])  # every op on one broadcast
@backends(name=["add"])  # one op on every broadcast
def test_binary(name: str, shapes: tuple) -> None:
    torch_fn, tinyedu_fn, low, high = BINARY[name]
    helper_test_op(shapes, torch_fn, tinyedu_fn, low=low, high=high)


@pytest.mark.parametrize("layout", LAYOUTS[1:])
@pytest.mark.parametrize("name", ["add", "mul", "div", "maximum"])
@backends(layout=["padded"])
@backends(name=["maximum"])
def test_binary_non_contiguous(name: str, layout: str) -> None:
    torch_fn, tinyedu_fn, low, high = BINARY[name]
    helper_test_op([(3, 2), (3, 2)], torch_fn, tinyedu_fn, low=low, high=high, layout=layout)


@pytest.mark.parametrize("shapes", [BROADCAST_SHAPES[2], BROADCAST_SHAPES[3]], ids=str)
@pytest.mark.parametrize("name", COMPARE)
@backends(shapes=[BROADCAST_SHAPES[2]])
def test_comparison(name: str, shapes: tuple) -> None:
    rng = np.random.default_rng(1)
    arrays = [rng.integers(-2, 3, s).astype(np.float32) for s in shapes]  # small ints, so ties happen
    helper_test_op(shapes, COMPARE[name], arrays=arrays)


def test_maximum_tie_splits_the_gradient() -> None:
    helper_test_op([(3,), (3,)], lambda x, y: x.maximum(y), arrays=[np.array([1, 2, 3], np.float32)] * 2,
                   numerical=False)


@pytest.mark.parametrize("shapes", [((2, 3),) * 3, ((3,), (2, 1), ()), ((1, 3), (2, 1), (3,))], ids=str)
@backends()
def test_where(shapes: tuple) -> None:
    def fn(c: Any, x: Any, y: Any) -> Any:
        return (c > 0).where(x, y) if isinstance(c, Tensor) else torch.where(c > 0, x, y)

    helper_test_op(shapes, fn)


def test_where_with_scalars() -> None:
    shapes = [(2, 3), (2, 3)]
    helper_test_op(shapes, lambda c, x: torch.where(c > 0, x, 2.5), lambda c, x: (c > 0).where(x, 2.5))
    helper_test_op(shapes, lambda c, x: torch.where(c > 0, -1.0, x), lambda c, x: (c > 0).where(-1.0, x))


# ---- dtypes: promotion and integer/bool ops, forward only, against torch ----
DTYPES = ["bool", "uint8", "int32", "float32"]


def _sample(dtype: str, shape: tuple[int, ...] = (2, 3), seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return rng.integers(0, 2, shape).astype(bool)
    if dtype == "uint8":
        return rng.integers(1, 9, shape).astype(np.uint8)
    if dtype == "int32":
        return rng.integers(-9, 10, shape).astype(np.int32)
    return rng.uniform(-3, 3, shape).astype(np.float32)


@pytest.mark.parametrize("op", ["add", "mul", "maximum", "lt", "eq", "div"])
@backends(op=["add", "lt"])
def test_dtype_promotion(op: str) -> None:
    """Every pair of dtypes: the result dtype (and values) must be torch's."""
    fn = {"add": lambda x, y: x + y, "mul": lambda x, y: x * y, "maximum": lambda x, y: x.maximum(y),
          "lt": lambda x, y: x < y, "eq": lambda x, y: x == y, "div": lambda x, y: x / y}[op]
    for a in DTYPES:
        for b in DTYPES:
            x, y = _sample(a, seed=1), _sample(b, (3,), seed=2)
            if op == "div" and b != "float32":
                y = np.where(y == 0, 1, y).astype(y.dtype)
            _check_int_op(fn, fn, x, y)


@pytest.mark.parametrize("scalar", [True, 2, 2.5, -3])
@pytest.mark.parametrize("dtype", DTYPES)
@backends(scalar=[2.5])
@backends(dtype=["uint8"])
def test_dtype_promotion_with_python_scalars(dtype: str, scalar: Any) -> None:
    # (uint8 with -3: the scalar wraps around to 253, as in torch and C)
    _check_int_op(lambda x: x + scalar, lambda x: x + scalar, _sample(dtype))
    _check_int_op(lambda x: x * scalar, lambda x: x * scalar, _sample(dtype))


@pytest.mark.parametrize("name, fn", [
    ("neg", lambda x: -x), ("abs", lambda x: x.abs()), ("sub", lambda x: x - 3), ("rsub", lambda x: 3 - x),
    ("mod", lambda x: x % 4), ("mod_negative", lambda x: x % -4), ("pow", lambda x: x**2),
    ("sum", lambda x: x.sum(1)),
    ("max", lambda x: x.amax(1) if not isinstance(x, Tensor) else x.max(1)),
    ("min", lambda x: x.amin(0) if not isinstance(x, Tensor) else x.min(0)),
    ("argmax", lambda x: x.argmax(1)), ("argmin", lambda x: x.argmin()), ("div", lambda x: x / 2),
    ("relu", lambda x: x.relu()), ("sign", lambda x: x.sign()), ("clamp", lambda x: x.clamp(-3, 4)),
    ("float", lambda x: x.float()), ("bool", lambda x: x.bool()), ("mean", lambda x: x.float().mean()),
])
@backends(name=["neg", "mod_negative", "div", "sum", "max", "argmax", "float", "clamp"])
def test_int32_ops(name: str, fn: Callable) -> None:
    _check_int_op(fn, fn, _sample("int32", (3, 4), seed=3))


@pytest.mark.parametrize("name, fn", [
    ("and", lambda x, y: x & y), ("or", lambda x, y: x | y), ("not", lambda x, y: ~x),
    ("logical_and", lambda x, y: x.logical_and(y)), ("logical_or", lambda x, y: x.logical_or(y)),
    ("logical_not", lambda x, y: x.logical_not()), ("eq", lambda x, y: x == y), ("ne", lambda x, y: x != y),
    ("sum", lambda x, y: x.sum()), ("any", lambda x, y: x.any(1)), ("all", lambda x, y: x.all(0)),
    ("any_all", lambda x, y: x.any()), ("int", lambda x, y: x.int()),
    ("where", lambda x, y: x.where(y, False)),
    ("max", lambda x, y: x.amax(0) if not isinstance(x, Tensor) else x.max(0)),
])
@backends(name=["and", "or", "not", "sum", "any", "int", "where", "max"])
def test_bool_ops(name: str, fn: Callable) -> None:
    _check_int_op(fn, fn, _sample("bool", (3, 4), seed=4), _sample("bool", (3, 4), seed=5))


@pytest.mark.parametrize("name, fn", [
    ("add", lambda x: x + 3), ("sum", lambda x: x.sum()), ("max", lambda x: x.max()),
    ("div", lambda x: x / 2), ("lt", lambda x: x < 4), ("abs", lambda x: x.abs()),
])
@backends()
def test_uint8_ops(name: str, fn: Callable) -> None:
    _check_int_op(fn, fn, _sample("uint8", (3, 4), seed=6))


# ---- reductions ----
def _torch_or(torch_name: str, ours: Callable) -> Callable:
    """Call torch's `torch_name` method on torch tensors and `ours` on tinyedu's (for max -> amax etc.)."""
    def fn(x: Any, *args: Any, **kwargs: Any) -> Any:
        return ours(x, *args, **kwargs) if isinstance(x, Tensor) else getattr(x, torch_name)(*args, **kwargs)

    return fn


def _all_axes(x: Any) -> tuple[int, ...]:
    return tuple(range(x.ndim))  # torch's logsumexp has no "all axes" default


REDUCE = {
    "sum": lambda x, axis, keepdim: x.sum(axis, keepdim=keepdim),
    "mean": lambda x, axis, keepdim: x.mean(axis, keepdim=keepdim),
    "max": _torch_or("amax", lambda x, axis, keepdim: x.max(axis, keepdim)),
    "min": _torch_or("amin", lambda x, axis, keepdim: x.min(axis, keepdim)),
    "var": lambda x, axis, keepdim: x.var(axis, keepdim=keepdim),
    "var_biased": lambda x, axis, keepdim: x.var(axis, keepdim=keepdim, correction=0),
    "std": lambda x, axis, keepdim: x.std(axis, keepdim=keepdim),
    "std_c2": lambda x, axis, keepdim: x.std(axis, keepdim=keepdim, correction=2),
    "logsumexp": lambda x, axis, keepdim: x.logsumexp(_all_axes(x) if axis is None else axis, keepdim),
}
REDUCE_CASES = [((2, 3, 2), None, False), ((2, 3, 2), 1, False), ((2, 3, 2), (-1, 0), True),
                ((1, 5), 0, False), ((3, 1), -1, True), ((), 0, True)]
EMPTY_CASES = [((0, 3), 1, False)]  # a size-0 axis that is kept (max is fine here)
EMPTY_REDUCE_CASES = [((2, 0), 1, False), ((0,), None, False)]  # reducing over nothing: sum 0, mean NaN


@pytest.mark.parametrize("shape, axis, keepdim", REDUCE_CASES + EMPTY_CASES, ids=str)
@pytest.mark.parametrize("name", REDUCE)
@backends(shape=[(2, 3, 2)], axis=[(-1, 0)])  # every reduction once
@backends(name=["max"])  # one on every shape
def test_reduce(name: str, shape: tuple, axis: Any, keepdim: bool) -> None:
    helper_test_op([shape], lambda x: REDUCE[name](x, axis, keepdim), atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("shape, axis, keepdim", EMPTY_REDUCE_CASES, ids=str)
@pytest.mark.parametrize("name", ["sum", "mean", "var", "logsumexp"])
@backends(name=["sum", "mean"])
def test_reduce_over_nothing(name: str, shape: tuple, axis: Any, keepdim: bool) -> None:
    helper_test_op([shape], lambda x: REDUCE[name](x, axis, keepdim))


@pytest.mark.parametrize("layout", LAYOUTS[1:])
@pytest.mark.parametrize("name", ["sum", "max", "std", "logsumexp"])
@backends(name=["sum"])
@backends(layout=["padded"])
def test_reduce_non_contiguous(name: str, layout: str) -> None:
    helper_test_op([(3, 4)], lambda x: REDUCE[name](x, 1, False), layout=layout)
    helper_test_op([(2, 3)], lambda x: REDUCE[name](x, None, False), layout=layout)


def test_max_ties_share_the_gradient() -> None:
    helper_test_op([(2, 3)], _torch_or("amax", lambda x, *a, **k: x.max(*a, **k)),
                   arrays=[np.array([[1, 5, 5], [2, 2, 0]], np.float32)], numerical=False)
    helper_test_op([(2, 3)], lambda x: x.amax() if not isinstance(x, Tensor) else x.max(),
                   arrays=[np.array([[1, 5, 5], [2, 2, 0]], np.float32)], numerical=False)


@pytest.mark.parametrize("axis", [None, 0, 1, -1])
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("name", ["argmax", "argmin"])
@backends(axis=[1], keepdim=[False])
def test_argmax_argmin(name: str, axis: Any, keepdim: bool) -> None:
    ties = np.array([[3, 1, 3, 0], [2, 2, 2, 2], [0, 5, 1, 5]], np.float32)  # first index wins on ties
    for array in (ties, ties.T.copy(), np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)):
        helper_test_op([array.shape], lambda x: getattr(x, name)(axis, keepdim=keepdim), arrays=[array])
    helper_test_op([(2, 3)], lambda x: getattr(x, name)(axis, keepdim=keepdim), layout="flipped")


def test_argmax_of_0d_and_nan() -> None:
    helper_test_op([()], lambda x: x.argmax())
    helper_test_op([()], lambda x: x.argmin(0))
    helper_test_op([(4,)], lambda x: x.argmax(), arrays=[np.array([1, np.nan, 3, np.nan], np.float32)])


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@backends(axis=[-1])
def test_softmax(name: str, axis: int) -> None:
    helper_test_op([(3, 4)], lambda x: getattr(x, name)(axis))
    helper_test_op([(2, 1, 3)], lambda x: getattr(x, name)(axis), layout="permuted")


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@backends()
def test_softmax_is_stable(name: str) -> None:
    """exp(1000) overflows; subtracting the max first keeps every value finite."""
    big = np.array([[1000.0, 1001.0, 999.0], [-1000.0, -1002.0, -1001.0]], np.float32)
    helper_test_op([big.shape], lambda x: getattr(x, name)(-1), arrays=[big], numerical=False)
    helper_test_op([()], lambda x: getattr(x, name)(0))
    helper_test_op([(0, 3)], lambda x: getattr(x, name)(1))


def test_logsumexp_with_infinities() -> None:
    inf = np.array([[-np.inf, -np.inf], [np.inf, 1.0], [-np.inf, 2.0]], np.float32)
    helper_test_op([inf.shape], lambda x: x.logsumexp(1), arrays=[inf], grad=False)


@pytest.mark.parametrize("axis", [None, 0, (0, 1), -1])
@pytest.mark.parametrize("name", ["any", "all"])
@backends(axis=[None])
def test_any_all(name: str, axis: Any) -> None:
    values = np.array([[0, 1, 2], [0, 0, 0], [3, 1, -1]], np.float32)
    if axis is None:
        helper_test_op([values.shape], lambda x: getattr(x, name)(), arrays=[values])
    else:
        helper_test_op([values.shape], lambda x: getattr(x, name)(axis, keepdim=True), arrays=[values])
    helper_test_op([(0, 2)], lambda x: getattr(x, name)())
    helper_test_op([(2,)], lambda x: getattr(x, name)(), arrays=[np.array([np.nan, 1], np.float32)])


# ---- movement ----
def _pad_torch(x: Any, padding: tuple, value: float = 0.0) -> Any:
    """tinyedu's ((before, after) per axis) padding as torch's flat list, last axis first."""
    return F.pad(x, [p for pair in reversed(padding) for p in pair], value=value)


MOVEMENT = {
    "reshape": ((2, 3, 4), lambda x: x.reshape(4, -1), None),
    "reshape_tuple": ((2, 3, 4), lambda x: x.reshape((6, 2, 2)), None),
    "reshape_0d": ((), lambda x: x.reshape(1, 1), None),
    "reshape_to_0d": ((1, 1), lambda x: x.reshape(()), None),
    "reshape_empty": ((0, 3), lambda x: x.reshape(3, 0, 5), None),
    "view": ((2, 3), lambda x: x.view(-1), None),
    "permute": ((2, 3, 4), lambda x: x.permute(2, 0, 1), None),
    "permute_negative": ((2, 3, 4), lambda x: x.permute(-1, 0, -2), None),
    "expand": ((3, 1), lambda x: x.expand(2, 3, 4), None),
    "expand_keep": ((3, 1), lambda x: x.expand(-1, 5), None),
    "expand_0": ((3, 1), lambda x: x.expand(3, 0), None),
    "pad": ((2, 3), lambda x: _pad_torch(x, ((0, 1), (2, 1))), lambda x: x.pad(((0, 1), (2, 1)))),
    "pad_value": ((2, 3), lambda x: _pad_torch(x, ((1, 1), (0, 0)), 2.5),
                  lambda x: x.pad(((1, 1), None), 2.5)),
    "pad_empty": ((0, 2), lambda x: _pad_torch(x, ((1, 0), (1, 1))), lambda x: x.pad(((1, 0), (1, 1)))),
    "shrink": ((3, 4), lambda x: x[1:3, 0:2], lambda x: x.shrink(((1, 3), (0, 2)))),
    "shrink_to_empty": ((3, 4), lambda x: x[1:1, :], lambda x: x.shrink(((1, 1), None))),
    "flip": ((3, 4), lambda x: x.flip(0), None),
    "flip_axes": ((2, 3, 4), lambda x: x.flip((0, -1)), None),
    "transpose": ((2, 3, 4), lambda x: x.transpose(0, -1), None),
    "T": ((2, 3), lambda x: x.T, None),
    "flatten": ((2, 3, 4), lambda x: x.flatten(), None),
    "flatten_range": ((2, 3, 4, 1), lambda x: x.flatten(1, 2), None),
    "flatten_0d": ((), lambda x: x.flatten(), None),
    "unflatten": ((2, 6), lambda x: x.unflatten(1, (3, 2)), None),
    "squeeze": ((1, 3, 1), lambda x: x.squeeze(), None),
    "squeeze_dim": ((1, 3, 1), lambda x: x.squeeze(-1), None),
    "squeeze_noop": ((2, 3), lambda x: x.squeeze(0), None),
    "unsqueeze": ((2, 3), lambda x: x.unsqueeze(-1), None),
    "unsqueeze_front": ((2, 3), lambda x: x.unsqueeze(0), None),
    "repeat": ((2, 3), lambda x: x.repeat(2, 1, 3), None),
    "repeat_zero": ((2, 3), lambda x: x.repeat(0, 2), None),
    "repeat_0d": ((), lambda x: x.repeat(3), None),
    "contiguous": ((2, 3), lambda x: x.contiguous(), None),
    "clone": ((2, 3), lambda x: x.clone(), None),
    "as_strided_windows": ((10,), lambda x: x.as_strided((4, 3), (2, 1)), None),
    "as_strided_overlap": ((3, 4), lambda x: x.as_strided((3, 3), (1, 1), 2), None),
    "as_strided_broadcast": ((6,), lambda x: x.as_strided((2, 2, 3), (0, 3, 1)), None),
    "as_strided_transpose": ((2, 3), lambda x: x.as_strided((3, 2), (1, 3)), None),
    "as_strided_0d": ((5,), lambda x: x.as_strided((), (), 4), None),
    "as_strided_empty": ((5,), lambda x: x.as_strided((0, 2), (1, 1)), None),
}


@pytest.mark.parametrize("name", MOVEMENT)
@backends(name=["reshape", "permute", "expand", "pad_value", "pad_empty", "shrink", "flip_axes",
                "repeat", "squeeze", "as_strided_overlap"])
def test_movement(name: str) -> None:
    shape, torch_fn, tinyedu_fn = MOVEMENT[name]
    helper_test_op([shape], torch_fn, tinyedu_fn)


@pytest.mark.parametrize("layout", LAYOUTS[1:])
@pytest.mark.parametrize("name", ["reshape", "pad_value", "flip_axes", "repeat"])
@backends(name=["pad_value"])
def test_movement_non_contiguous(name: str, layout: str) -> None:
    shape, torch_fn, tinyedu_fn = MOVEMENT[name]
    helper_test_op([shape], torch_fn, tinyedu_fn, layout=layout)


def test_detach_stops_the_gradient() -> None:
    """Finite differences see through detach, so only torch can say what the gradient should be."""
    helper_test_op([(2, 3)], lambda x: x.detach() * x, numerical=False)


def test_movement_is_a_view() -> None:
    x = Tensor.arange(24).reshape(2, 3, 4).realize()
    for moved in (x[1, ::-2], x.permute(2, 0, 1).flip(0), x.repeat(2, 1, 1), x.as_strided((3, 3), (1, 1))):
        assert moved.lazydata.base is x.lazydata.base


# ---- indexing ----
def _torch_getitem(x: Any, index: Any) -> Any:
    """torch refuses negative slice steps: take those axes with index_select first, then index the rest."""
    items = list(index) if isinstance(index, tuple) else [index]
    named = sum(i is not None and i is not Ellipsis for i in items)
    axis, rest = 0, []
    for item in items:
        if item is Ellipsis:
            axis += x.ndim - named
        elif isinstance(item, slice) and item.step is not None and item.step < 0:
            picks = torch.tensor(np.arange(x.shape[axis])[item].copy(), dtype=torch.int64)
            x = x.index_select(axis, picks)
            item = slice(None)
        if item is not None and item is not Ellipsis:
            axis += 1
        rest.append(torch.tensor(item) if isinstance(item, list) else item)
    return x[tuple(rest)]


def _index_tensors(index: Any, make: Callable) -> Any:
    items = index if isinstance(index, tuple) else (index,)
    out = tuple(make(i) if isinstance(i, np.ndarray) else i for i in items)
    return out if isinstance(index, tuple) else out[0]


I = np.array  # noqa: E741 - index arrays read best short
GETITEM = [
    0, -1, 2, (1, 2), (-2, -1, 0), slice(None), slice(1, 3), slice(None, None, 2), slice(None, None, -1),
    slice(3, 0, -2), slice(-1, -4, -1), slice(5, 1), slice(-100, 100, 3), (slice(None), 1), (Ellipsis, 0),
    (None, 1, Ellipsis, None), (slice(None, None, -1), None, slice(1, None, 2)),
    (1, Ellipsis, slice(None, None, -3)),
    I([0, 2]), I([-1, 0, 0]), I([[1], [2]]), (I([0, 1]), I([2, 0])), (slice(None), I([3, 0, 3])),
    (I([0, 1]), 0, I([0, 1])), (I([1, 0]), slice(None), I([2, 2])),
    (slice(None), I([[1], [2]]), I([0, 1, 2, 3])),
    (I([0, 2]), None, I([1, 1])), (I(1), slice(None), I([0, 2])), (Ellipsis, I([0, -1])), (1, 2, 3),
]


@pytest.mark.parametrize("index", GETITEM, ids=str)
@backends(index=[GETITEM[i] for i in (9, 15, 19, 21, 25, 29)])
def test_getitem(index: Any) -> None:
    helper_test_op([(3, 4, 4)], lambda x: _torch_getitem(x, _index_tensors(index, torch.tensor)),
                   lambda x: x[_index_tensors(index, Tensor)])


@pytest.mark.parametrize("index", [I([2, 0]), (slice(None, None, -1), 1), (slice(None), [1, 1, 0])], ids=str)
@pytest.mark.parametrize("layout", LAYOUTS[1:])
@backends(layout=["flipped"])
def test_getitem_non_contiguous(index: Any, layout: str) -> None:
    helper_test_op([(3, 2)], lambda x: _torch_getitem(x, _index_tensors(index, torch.tensor)),
                   lambda x: x[_index_tensors(index, Tensor)], layout=layout)


def test_getitem_with_lists_and_dtypes() -> None:
    x = Tensor([[1, 2, 3], [4, 5, 6]])
    assert x[[1, 0], [2, 2]].tolist() == [6, 3]
    assert x[1].dtype == dtypes.int32 and x[:, [True and 1]].tolist() == [[2], [5]]
    b = Tensor([[True, False], [False, True]])
    assert b[[1, 1]].tolist() == [[False, True], [False, True]] and b[[1, 1]].dtype == dtypes.bool
    u = Tensor(np.array([250, 7], np.uint8))
    assert u[Tensor(np.array([1, 0], np.uint8))].tolist() == [7, 250]
    nan = Tensor([np.nan, 1.0, np.inf])
    assert nan[[1, 2]].tolist() == [1.0, np.inf]  # a NaN elsewhere does not leak into the picks


def _gather(dim: int, index: np.ndarray) -> Callable:
    def fn(x: Any) -> Any:
        return x.gather(dim, Tensor(index) if isinstance(x, Tensor) else torch.tensor(index))

    return fn


GATHER = [(0, [[0, 1, 2], [2, 0, 0]]), (1, [[3, 0], [1, 1], [0, 2]]), (-1, [[0], [3], [1]]), (0, [[1]]),
          (1, np.zeros((3, 0), int))]


@pytest.mark.parametrize("dim, index", GATHER, ids=str)
@backends(dim=[1])
def test_gather(dim: int, index: Any) -> None:
    helper_test_op([(3, 4)], _gather(dim, np.array(index)))
    helper_test_op([(3, 4)], _gather(dim, np.array(index)), layout="flipped")


def test_gather_3d_and_0d() -> None:
    index = np.random.default_rng(0).integers(0, 3, (2, 2, 4))
    helper_test_op([(2, 3, 4)], _gather(1, index))
    helper_test_op([()], _gather(0, np.array(0)))


# ---- combining ----
CAT = [(((2, 3), (4, 3)), 0), (((2, 3), (2, 1), (2, 2)), -1), (((2, 3), (0, 3)), 0), (((3,), (2,)), 0),
       (((1, 2, 2), (1, 2, 2)), 1), (((2, 3), (0,)), 1)]


@pytest.mark.parametrize("shapes, dim", CAT, ids=str)
@backends(dim=[-1, 1])
def test_cat(shapes: tuple, dim: int) -> None:
    helper_test_op(shapes, lambda *xs: torch.cat(xs, dim), lambda *xs: Tensor.cat(*xs, dim=dim))
    helper_test_op(shapes, lambda *xs: torch.cat(xs, dim), lambda *xs: xs[0].cat(*xs[1:], dim=dim))


def test_cat_non_contiguous_and_dtypes() -> None:
    helper_test_op([(2, 3), (2, 3)], lambda x, y: torch.cat([x, y], 1),
                   lambda x, y: Tensor.cat([x, y], dim=1), layout="padded")
    ints, bools = _sample("int32"), _sample("bool")
    _check_int_op(lambda x, y: torch.cat([x, y]), lambda x, y: Tensor.cat([x, y]), ints, bools)
    _check_int_op(lambda x, y: torch.cat([x, y], 1), lambda x, y: x.cat(y, dim=1), bools, bools)


@pytest.mark.parametrize("shape, dim", [((3,), 0), ((3,), 1), ((2, 3), -1), ((2, 3), 1), ((), 0),
                                        ((0, 2), 0)], ids=str)
@backends(dim=[-1])
def test_stack(shape: tuple, dim: int) -> None:
    helper_test_op([shape] * 3, lambda *xs: torch.stack(xs, dim), lambda *xs: Tensor.stack(*xs, dim=dim))


@pytest.mark.parametrize("size, dim", [(2, 0), (3, 1), (1, -1), (5, 0), ([1, 3], 0), ([2, 0, 1], 1),
                                       ([4], 0)], ids=str)
@backends(dim=[1])
def test_split(size: Any, dim: int) -> None:
    helper_test_op([(4, 3)], lambda x: x.split(size, dim))
    helper_test_op([(4, 3)], lambda x: x.split(size, dim), layout="permuted")


@pytest.mark.parametrize("chunks, dim", [(2, 0), (3, 0), (4, 1), (5, 0), (1, -1)], ids=str)
@backends(dim=[1])
def test_chunk(chunks: int, dim: int) -> None:
    helper_test_op([(5, 4)], lambda x: x.chunk(chunks, dim))


def test_split_and_chunk_of_empty() -> None:
    helper_test_op([(0, 2)], lambda x: x.split(2))
    helper_test_op([(0, 2)], lambda x: x.chunk(3))


# ---- matmul, linear, convolution, pooling ----
MATMUL_SHAPES = [((3,), (3,)), ((3,), (3, 4)), ((2, 3), (3,)), ((2, 3), (3, 4)), ((2, 1, 2, 3), (3, 3, 2)),
                 ((0, 3), (3, 2)), ((2, 0), (0, 3)), ((4, 1, 3), (3, 2))]


@pytest.mark.parametrize("shapes", MATMUL_SHAPES, ids=str)
@backends(shapes=[MATMUL_SHAPES[i] for i in (0, 3, 4)])
def test_matmul(shapes: tuple) -> None:
    helper_test_op(shapes, lambda x, y: x @ y)
    helper_test_op(shapes, lambda x, y: x.matmul(y))


@pytest.mark.parametrize("layout", LAYOUTS[1:])
@backends(layout=["permuted"])
def test_matmul_non_contiguous(layout: str) -> None:
    helper_test_op([(2, 3), (3, 4)], lambda x, y: x @ y, layout=layout)


def test_dot() -> None:
    helper_test_op([(4,), (4,)], lambda x, y: x.dot(y))


@pytest.mark.parametrize("shapes", [((2, 3), (4, 3), (4,)), ((3,), (2, 3), (2,)), ((2, 2, 3), (1, 3), (1,))],
                         ids=str)
@backends(shapes=[((2, 3), (4, 3), (4,))])
def test_linear(shapes: tuple) -> None:
    helper_test_op(shapes, lambda x, w, b: F.linear(x, w, b), lambda x, w, b: x.linear(w, b))
    helper_test_op(shapes[:2], lambda x, w: F.linear(x, w), lambda x, w: x.linear(w))


CONV = [  # input shape, weight shape, bias, keyword arguments
    ((1, 1, 4, 4), (1, 1, 3, 3), False, {}),
    ((2, 2, 5, 5), (3, 2, 3, 3), True, {"stride": 2, "padding": 1}),
    ((1, 4, 5, 6), (4, 2, 2, 3), True, {"groups": 2, "dilation": (2, 1), "padding": (1, 0)}),
    ((2, 5, 5), (2, 2, 3, 3), False, {"padding": "same"}),
    ((1, 2, 4, 5), (2, 1, 2, 2), True, {"padding": "valid", "stride": (1, 2), "groups": 2}),
    ((1, 3, 3, 3), (6, 1, 1, 1), False, {"groups": 3}),
    ((1, 1, 5, 4), (1, 1, 2, 2), False, {"padding": "same", "dilation": 2}),
]


@pytest.mark.parametrize("case", CONV, ids=str)
@backends(case=CONV[1:3])
def test_conv2d(case: tuple) -> None:
    x_shape, w_shape, bias, kwargs = case
    shapes = [x_shape, w_shape] + ([(w_shape[0],)] if bias else [])
    helper_test_op(shapes, lambda *a: F.conv2d(*a, **kwargs), lambda x, *rest: x.conv2d(*rest, **kwargs),
                   atol=1e-4, grad_atol=1e-4)


# Large enough for the heuristics' convolution opts (tinyedu/codegen/heuristics.py): channels as
# vectors, the filter packed, register blocks along odd window sizes (7, 13, 5x5 windows, 1x1 with
# and without a stride).
CONV_OPTIMIZED = [
    ((1, 2, 7, 9), (16, 2, 3, 3), True, {}),
    ((2, 2, 9, 7), (8, 2, 3, 3), False, {"stride": 2, "padding": 1}),
    ((1, 4, 8, 9), (16, 2, 3, 3), True, {"dilation": 2, "groups": 2, "padding": 2}),
    ((2, 4, 6, 7), (32, 4, 1, 1), False, {}),
    ((2, 8, 9, 9), (16, 8, 1, 1), True, {"stride": 2}),
    ((1, 2, 7, 6), (16, 2, 5, 5), False, {"padding": 2}),
    ((1, 3, 6, 7), (6, 3, 3, 3), False, {"padding": 1}),
]


@pytest.mark.parametrize("case", CONV_OPTIMIZED, ids=str)
@backends(case=CONV_OPTIMIZED[:3])
def test_conv2d_optimized(case: tuple) -> None:
    x_shape, w_shape, bias, kwargs = case
    shapes = [x_shape, w_shape] + ([(w_shape[0],)] if bias else [])
    helper_test_op(shapes, lambda *a: F.conv2d(*a, **kwargs), lambda x, *rest: x.conv2d(*rest, **kwargs),
                   atol=1e-4, grad_atol=1e-3, numerical=False)


@pytest.mark.parametrize("layout", ["permuted", "padded"])
@backends(layout=["padded"])
def test_conv2d_non_contiguous(layout: str) -> None:
    helper_test_op([(1, 2, 4, 3), (2, 2, 2, 2)], lambda x, w: F.conv2d(x, w, padding=1),
                   lambda x, w: x.conv2d(w, padding=1), layout=layout, atol=1e-4)


POOL = [(2, None, 0, {}), (3, 2, 1, {}), ((2, 3), (1, 2), (1, 1), {}), (2, 1, 0, {}), (3, 1, 1, {})]


@pytest.mark.parametrize("kernel, stride, padding, kwargs", POOL, ids=str)
@backends(kernel=[3])
def test_max_pool2d(kernel: Any, stride: Any, padding: Any, kwargs: dict) -> None:
    helper_test_op([(2, 2, 5, 6)], lambda x: F.max_pool2d(x, kernel, stride, padding),
                   lambda x: x.max_pool2d(kernel, stride, padding), arrays=[_distinct((2, 2, 5, 6))])


def test_max_pool2d_dilation_and_unbatched() -> None:
    helper_test_op([(2, 6, 5)], lambda x: F.max_pool2d(x, 2, 1, 1, dilation=(2, 1)),
                   lambda x: x.max_pool2d(2, 1, 1, dilation=(2, 1)), arrays=[_distinct((2, 6, 5))])
    helper_test_op([(1, 1, 4, 4)], lambda x: F.max_pool2d(x, 2), lambda x: x.max_pool2d(2), layout="flipped")


AVG_POOL = POOL + [(3, 2, 1, {"count_include_pad": False}), (2, 1, 1, {"count_include_pad": False})]


@pytest.mark.parametrize("kernel, stride, padding, kwargs", AVG_POOL, ids=str)
@backends(kwargs=[{"count_include_pad": False}])
def test_avg_pool2d(kernel: Any, stride: Any, padding: Any, kwargs: dict) -> None:
    helper_test_op([(2, 2, 5, 6)], lambda x: F.avg_pool2d(x, kernel, stride, padding, **kwargs),
                   lambda x: x.avg_pool2d(kernel, stride, padding, **kwargs))


def test_pool_int_input() -> None:
    ints = _sample("int32", (1, 4, 4))
    _check_int_op(lambda x: F.max_pool2d(x.float(), 2).int(), lambda x: x.max_pool2d(2), ints)


# ---- normalization and dropout ----
@pytest.mark.parametrize("shape, normalized", [((2, 5), 5), ((2, 3, 4), (3, 4)), ((4,), [4])], ids=str)
@backends(shape=[(2, 3, 4)])
def test_layer_norm(shape: tuple, normalized: Any) -> None:
    ns = (normalized,) if isinstance(normalized, int) else tuple(normalized)
    helper_test_op([shape], lambda x: F.layer_norm(x, ns), lambda x: x.layer_norm(normalized), atol=1e-4)
    helper_test_op([shape, ns, ns], lambda x, w, b: F.layer_norm(x, ns, w, b, eps=1e-3),
                   lambda x, w, b: x.layer_norm(normalized, w, b, eps=1e-3), atol=1e-4)


def test_layer_norm_non_contiguous() -> None:
    helper_test_op([(3, 4)], lambda x: F.layer_norm(x, (4,)), lambda x: x.layer_norm(4), layout="permuted",
                   atol=1e-4)


@pytest.mark.parametrize("shape", [(4, 3), (2, 3, 2, 2)], ids=str)
@backends(shape=[(2, 3, 2, 2)])
def test_batch_norm(shape: tuple) -> None:
    c = (shape[1],)
    helper_test_op([shape, c, c], lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True),
                   lambda x, w, b: x.batch_norm(weight=w, bias=b, training=True), atol=1e-4)
    rng = np.random.default_rng(1)  # running statistics are not differentiable in torch: constants
    mean, var = rng.uniform(-1, 1, c).astype(np.float32), rng.uniform(0.5, 2, c).astype(np.float32)
    t_mean, t_var = (torch.tensor(v).double() for v in (mean, var)) if torch is not None else (None, None)
    helper_test_op([shape, c], lambda x, w: F.batch_norm(x, t_mean, t_var, w),
                   lambda x, w: x.batch_norm(Tensor(mean), Tensor(var), w), atol=1e-4)


def test_dropout_only_while_training() -> None:
    x = Tensor.ones(200, 10, requires_grad=True)
    assert x.dropout(0.5) is x and not Tensor.training
    Tensor.manual_seed(3)
    with Tensor.train():
        assert Tensor.training
        out = x.dropout(0.25)
        with Tensor.train(False):
            assert x.dropout(0.25) is x
        assert Tensor.training
    assert not Tensor.training
    values = out.numpy()
    assert set(np.unique(values)) == {0.0, np.float32(1 / 0.75)}
    assert abs((values == 0).mean() - 0.25) < 0.03  # about a quarter is dropped
    out.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), values)  # the gradient flows where the values survived
    Tensor.manual_seed(3)
    with Tensor.train():
        np.testing.assert_array_equal(x.dropout(0.25).numpy(), values)  # seeded: runs repeat
        assert x.dropout(0.0) is x and not x.dropout(1.0).numpy().any()


@Tensor.train()
def test_train_works_as_a_decorator() -> None:
    assert Tensor.training


# ---- losses ----
def _targets(shape: tuple, classes: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, classes, shape)


CROSS_ENTROPY = [((4, 5), (4,), {}), ((4, 5), (4,), {"reduction": "sum"}),
                 ((4, 5), (4,), {"reduction": "none"}), ((4, 5), (4,), {"label_smoothing": 0.2}),
                 ((5,), (), {}), ((2, 3, 2, 2), (2, 2, 2), {}),
                 ((3, 4), (3,), {"ignore_index": 1}),
                 ((3, 4), (3,), {"label_smoothing": 0.1, "reduction": "none"})]


@pytest.mark.parametrize("shape, target_shape, kwargs", CROSS_ENTROPY, ids=str)
@backends(kwargs=[{"label_smoothing": 0.2}, {"ignore_index": 1}])
def test_cross_entropy(shape: tuple, target_shape: tuple, kwargs: dict) -> None:
    target = _targets(target_shape, shape[1] if len(shape) > 1 else shape[0])
    helper_test_op([shape], lambda x: F.cross_entropy(x, torch.tensor(target), **kwargs),
                   lambda x: x.cross_entropy(Tensor(target), **kwargs), low=-3, high=3)


def test_cross_entropy_with_probabilities_and_large_logits() -> None:
    probs = np.random.default_rng(1).dirichlet(np.ones(4), 3).astype(np.float32)
    for kwargs in ({}, {"label_smoothing": 0.3}, {"reduction": "sum"}):
        def fn(x: Any, kwargs: dict = kwargs) -> Any:
            if isinstance(x, Tensor):
                return x.cross_entropy(Tensor(probs), **kwargs)
            return F.cross_entropy(x, torch.tensor(probs, dtype=torch.float64), **kwargs)

        helper_test_op([(3, 4)], fn)
    big = np.array([[1000.0, 0.0, -1000.0], [5.0, 500.0, 5.0]], np.float32)
    target = np.array([2, 1])
    helper_test_op([big.shape], lambda x: F.cross_entropy(x, torch.tensor(target)),
                   lambda x: x.cross_entropy(Tensor(target)), arrays=[big], numerical=False)


def test_nll_loss() -> None:
    target = _targets((4,), 3)
    for kwargs in ({}, {"reduction": "sum"}, {"ignore_index": int(target[0])}):
        def fn(x: Any, kwargs: dict = kwargs) -> Any:
            if isinstance(x, Tensor):
                return x.log_softmax(1).nll_loss(Tensor(target), **kwargs)
            return F.nll_loss(x.log_softmax(1), torch.tensor(target), **kwargs)

        helper_test_op([(4, 3)], fn)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@backends(reduction=["mean"])
def test_binary_cross_entropy(reduction: str) -> None:
    target = np.random.default_rng(2).uniform(0, 1, (3, 4)).astype(np.float32)
    helper_test_op([(3, 4)], lambda p: F.binary_cross_entropy(p, torch.tensor(target, dtype=torch.float64),
                                                              reduction=reduction),
                   lambda p: p.binary_cross_entropy(Tensor(target), reduction=reduction), low=0.05, high=0.95)


def test_binary_cross_entropy_clamps_the_log() -> None:
    p, t = np.array([0.0, 1.0, 0.0, 1.0], np.float32), np.array([1.0, 0.0, 0.0, 1.0], np.float32)
    def fn(q: Any) -> Any:
        if isinstance(q, Tensor):
            return q.binary_cross_entropy(Tensor(t), reduction="none")
        return F.binary_cross_entropy(q, torch.tensor(t).double(), reduction="none")

    out = helper_test_op([(4,)], fn, arrays=[p], grad=False)
    np.testing.assert_allclose(out[0], [100, 100, 0, 0])
    x = Tensor(p, requires_grad=True)
    x.binary_cross_entropy(Tensor(t)).backward()
    assert np.isfinite(x.grad.numpy()).all()  # finite even where p is exactly 0 or 1


@pytest.mark.parametrize("kwargs", [{}, {"reduction": "sum"}, {"reduction": "none"}, {"pos_weight": True}],
                         ids=str)
@backends(kwargs=[{"pos_weight": True}])
def test_binary_cross_entropy_with_logits(kwargs: dict) -> None:
    target = (np.random.default_rng(3).uniform(0, 1, (3, 4)) > 0.5).astype(np.float32)
    weight = np.array([0.5, 1.0, 2.0, 3.0], np.float32)

    def fn(x: Any) -> Any:
        if isinstance(x, Tensor):
            extra = {**kwargs, "pos_weight": Tensor(weight)} if "pos_weight" in kwargs else kwargs
            return x.binary_cross_entropy_with_logits(Tensor(target), **extra)
        extra = {**kwargs, "pos_weight": torch.tensor(weight).double()} if "pos_weight" in kwargs else kwargs
        return F.binary_cross_entropy_with_logits(x, torch.tensor(target).double(), **extra)

    helper_test_op([(3, 4)], fn, low=-4, high=4)
    huge = np.array([[-500.0, 500.0, 80.0, -80.0]] * 3, np.float32)
    helper_test_op([(3, 4)], fn, arrays=[huge], numerical=False)  # no overflow for huge logits


@pytest.mark.parametrize("name", ["mse_loss", "l1_loss"])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@backends(reduction=["mean"])
def test_regression_losses(name: str, reduction: str) -> None:
    helper_test_op([(3, 4), (3, 4)], lambda x, y: getattr(F, name)(x, y, reduction=reduction),
                   lambda x, y: getattr(x, name)(y, reduction=reduction))
    helper_test_op([(2, 3), (2, 3)], lambda x, y: getattr(F, name)(x, y, reduction=reduction),
                   lambda x, y: getattr(x, name)(y, reduction=reduction), layout="strided")


# ---- creation ----
@pytest.mark.parametrize("name, torch_fn, tinyedu_fn", [
    ("zeros", lambda: torch.zeros(2, 3), lambda: Tensor.zeros(2, 3)),
    ("ones_tuple", lambda: torch.ones((2, 0)), lambda: Tensor.ones((2, 0))),
    ("full_int", lambda: torch.full((2,), 7, dtype=torch.int32), lambda: Tensor.full((2,), 7)),
    ("full_bool", lambda: torch.full((1, 2), True), lambda: Tensor.full((1, 2), True)),
    ("full_float", lambda: torch.full((), 2.5), lambda: Tensor.full((), 2.5)),
    ("zeros_int", lambda: torch.zeros(3, dtype=torch.int32), lambda: Tensor.zeros(3, dtype="int32")),
    ("arange", lambda: torch.arange(5, dtype=torch.int32), lambda: Tensor.arange(5)),
    ("arange_step", lambda: torch.arange(2, 11, 3, dtype=torch.int32), lambda: Tensor.arange(2, 11, 3)),
    ("arange_negative", lambda: torch.arange(5, -3, -2, dtype=torch.int32), lambda: Tensor.arange(5, -3, -2)),
    ("arange_float", lambda: torch.arange(0.0, 1.0, 0.25), lambda: Tensor.arange(0.0, 1.0, 0.25)),
    ("arange_empty", lambda: torch.arange(3, 3, dtype=torch.int32), lambda: Tensor.arange(3, 3)),
    ("eye", lambda: torch.eye(3), lambda: Tensor.eye(3)),
    ("eye_rect", lambda: torch.eye(2, 4), lambda: Tensor.eye(2, 4)),
    ("zeros_like", lambda: torch.zeros_like(torch.ones(2, dtype=torch.int32)),
     lambda: Tensor.ones(2, dtype=int).zeros_like()),
    ("ones_like", lambda: torch.ones_like(torch.zeros(2, 1)), lambda: Tensor.zeros(2, 1).ones_like()),
    ("full_like", lambda: torch.full_like(torch.zeros(3), 4.5), lambda: Tensor.zeros(3).full_like(4.5)),
])
@backends(name=["arange_negative", "arange_float", "eye", "full_bool", "zeros_like"])
def test_creation(name: str, torch_fn: Callable, tinyedu_fn: Callable) -> None:
    _check_int_op(lambda: torch_fn(), lambda: tinyedu_fn())


def test_empty_has_the_shape_and_dtype() -> None:
    t = Tensor.empty(2, 3, dtype="int32")
    assert t.shape == (2, 3) and t.dtype == dtypes.int32 and t.numpy().shape == (2, 3)


@pytest.mark.parametrize("name", ["rand", "randn", "uniform", "normal", "kaiming_uniform", "glorot_uniform"])
@backends(name=["rand", "randn"])
def test_random_is_seeded(name: str) -> None:
    Tensor.manual_seed(7)
    first = getattr(Tensor, name)(3, 4).numpy()
    Tensor.manual_seed(7)
    again = getattr(Tensor, name)(3, 4).numpy()
    np.testing.assert_array_equal(first, again)
    assert first.dtype == np.float32 and first.shape == (3, 4) and len(np.unique(first)) == 12


def test_random_ranges() -> None:
    Tensor.manual_seed(0)
    assert 0 <= Tensor.rand(1000).numpy().min() and Tensor.rand(1000).numpy().max() < 1
    u = Tensor.uniform(1000, low=-3, high=-2).numpy()
    assert -3 <= u.min() and u.max() < -2
    r = Tensor.randint(2, 5, size=(1000,)).numpy()
    assert set(np.unique(r)) == {2, 3, 4} and r.dtype == np.int32
    n = Tensor.randn(4000).numpy()
    assert abs(n.mean()) < 0.1 and abs(n.std() - 1) < 0.1
    bound = math.sqrt(6 / (4 + 3))
    assert np.abs(Tensor.glorot_uniform(3, 4).numpy()).max() <= bound
    like = Tensor.zeros(2, 3).rand_like()
    assert like.shape == (2, 3) and Tensor.zeros(2).randn_like().shape == (2,)


# ---- autograd rules the ops rely on ----
def test_only_floats_carry_gradients() -> None:
    x = Tensor([1.0, -2.0, 3.0], requires_grad=True)
    for out in (x > 0, x == 1, x.argmax(), x.int(), x.any()):
        assert not out.requires_grad
    with pytest.raises(RuntimeError, match="does not require grad"):
        (x > 0).float().sum().backward()
    (x * (x > 0)).sum().backward()
    assert x.grad.tolist() == [1.0, 0.0, 1.0]


def test_gradient_accumulates_through_reused_tensors() -> None:
    helper_test_op([(3,)], lambda x: x * x + x.exp() * x)
    helper_test_op([(2, 3)], lambda x: x[0] * x[1] + x.sum(0) + x.T @ x[:, :1])


# ---- printing ----
def test_repr_prints_like_numpy() -> None:
    expected = f"Tensor([1. , 2. , 3.5], shape=(3,), dtype=float32, device={Device.DEFAULT})"
    assert repr(Tensor([1.0, 2.0, 3.5])) == expected
    assert repr(Tensor(3)).startswith("Tensor(3, shape=(), dtype=int32")
    two_d = repr(Tensor([[1, 2], [3, 4]]))
    assert "[[1, 2],\n        [3, 4]]" in two_d
    assert "requires_grad=True" in repr(Tensor([1.0], requires_grad=True))
    assert repr(Tensor.zeros(0, 3)).startswith("Tensor([], shape=(0, 3)")
    assert "True" in repr(Tensor([True, False]))


def test_repr_summarizes_large_tensors() -> None:
    text = repr(Tensor.arange(1000))
    assert "..." in text and "997, 998, 999" in text and "0,   1,   2" in text and len(text) < 200
    big = repr(Tensor.ones(50, 50))
    assert big.count("\n") < 12 and "..." in big
