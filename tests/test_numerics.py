"""Numbers you can trust: every op at the edges of float32, against PyTorch, on every device.

The first half replays each wrong result that issue 13 reported, as a test that would have caught
it. The second half sweeps every elementwise op over extreme values (|x| up to 1e4, zeros of both
signs, tiny values, the kinks of relu, abs, clamp...), forward and backward, and wants NaN and inf
exactly where float32 PyTorch has them (tests/torch_edges.py says how values are compared).
"""

from __future__ import annotations

import tracemalloc
from typing import Any, Callable

import numpy as np
import pytest

from tests.test_ops import backends, device  # noqa: F401 - device: the fixture that runs each test on every device
from tests.torch_edges import check_edges
from tinyedu import Device, Tensor, dtypes
from tinyedu.core.dtype import cast_array

torch = pytest.importorskip("torch")
F = torch.nn.functional
nan, inf = float("nan"), float("inf")


# ---- the reported wrong results, one test each ----
SATURATING = {
    "tanh": (torch.tanh, lambda x: x.tanh()), "sigmoid": (torch.sigmoid, lambda x: x.sigmoid()),
    "silu": (F.silu, lambda x: x.silu()), "gelu": (F.gelu, lambda x: x.gelu()),
    "gelu_tanh": (lambda x: F.gelu(x, approximate="tanh"), lambda x: x.gelu(approximate="tanh")),
    "softplus": (F.softplus, lambda x: x.softplus()), "mish": (F.mish, lambda x: x.mish()),
}


@pytest.mark.parametrize("name", SATURATING)
@backends()
def test_saturating_activations_have_finite_gradients(name: str) -> None:
    """exp overflowed into inf * 0 = NaN in the backward for large |x| (tanh(-100) gave NaN)."""
    torch_fn, ours = SATURATING[name]
    check_edges(torch_fn, ours, [np.array([-1e4, -100, -50, -17, 17, 50, 100, 1e4], np.float32)])


def test_tanh_of_tiny_values() -> None:
    """2 sigmoid(2x) - 1 cancelled to 0: tanh(1e-8) must be 1e-8 (relative accuracy, not absolute)."""
    tiny = np.array([1e-8, -1e-8, 1e-30, 1e-4, 3e-4, -2e-3], np.float32)
    check_edges(lambda x: x.tanh(), None, [tiny], atol=0, rtol=1e-6)
    check_edges(lambda x: x.expm1(), None, [tiny], atol=0, rtol=1e-6)
    check_edges(lambda x: x.log1p(), None, [tiny], atol=0, rtol=1e-6)
    check_edges(lambda x: x.sinh(), None, [tiny], atol=0, rtol=1e-6)


def test_signed_zero_constants_are_not_shared() -> None:
    """Caches compared 0.0 == -0.0: 1/(a*-0.0) reused the kernel of 1/(a*0.0) on C and PYTHON."""
    a = Tensor([1.0, -1.0])
    assert (1 / (a * 0.0)).tolist() == [inf, -inf]
    assert (1 / (a * -0.0)).tolist() == [-inf, inf]
    assert (1 / Tensor.full((2,), -0.0)).tolist() == [-inf, -inf]
    b = Tensor([-0.0, 0.0])
    assert (1 / (b + 0.0)).tolist() == [inf, inf]   # -0.0 + 0.0 is +0.0: x + 0.0 is not folded to x
    assert (1 / (b - 0.0)).tolist() == [-inf, inf]  # x - 0.0 is x
    n = Tensor([nan, 1.0]) * nan  # NaN constants dedup (they are equal to themselves by bits)
    assert np.isnan(n.numpy()).all()


def test_trunc_does_not_go_through_int32() -> None:
    """trunc was a cast to int32: Tensor([3e9, inf]).trunc() gave [-2.1e9, -2.1e9]."""
    values = [3e9, inf, -inf, nan, -3e9, 2.5, -2.5, -0.5, 8388609.0]
    for name in ("trunc", "floor", "ceil", "round"):
        check_edges(lambda x, n=name: getattr(x, n)(), None, [np.array(values, np.float32)])


def test_pow_edges_and_promotion() -> None:
    assert (Tensor([-2.0]) ** 1e10).tolist() == [inf]  # an even power, as in PyTorch (it was NaN)
    assert (Tensor([-2.0]) ** 3.0).tolist() == [-8.0]
    assert (Tensor([2, 3]) ** 2.0).dtype == dtypes.float32  # int ** float is float (it stayed int32)
    assert (Tensor([2, 3]) ** 2).dtype == dtypes.int32
    x = Tensor([0.0, 1.0], requires_grad=True)
    (x ** 2.5).sum().backward()
    assert x.grad.tolist() == [0.0, 2.5]  # it was NaN at 0


def test_to_device_is_differentiable() -> None:
    """.to(device) silently detached: x.grad was None after a backward through x.to('NUMPY')."""
    x = Tensor([1.0, 2.0], requires_grad=True)
    (x.to("NUMPY") * 3).sum().backward()
    assert x.grad is not None and x.grad.tolist() == [3.0, 3.0] and x.grad.device == x.device


def test_bitwise_ops_on_integers() -> None:
    """~, &, |, ^ were logical on integer tensors: ~Tensor([1, 2, 6]) gave [False False False]."""
    assert (~Tensor([1, 2, 6])).tolist() == [-2, -3, -7]
    assert (Tensor([12, 10]) & Tensor([10, 6])).tolist() == [8, 2]
    assert (Tensor([12, 10]) | 3).tolist() == [15, 11]
    assert (Tensor([12, 10]) ^ Tensor([10, 6])).tolist() == [6, 12]
    assert (~Tensor([True, False])).tolist() == [False, True]
    assert (~Tensor(np.array([0, 250], np.uint8))).tolist() == [255, 5]
    assert (Tensor([7, -7]) // 2).tolist() == [3, -4] and (Tensor([7.0, -7.0]) // 2).tolist() == [3.0, -4.0]
    with pytest.raises(TypeError, match="bitwise_and: only integer and bool tensors"):
        Tensor([1.0]) & Tensor([1.0])


@pytest.mark.parametrize("name, torch_fn, ours, values", [
    ("abs", lambda x: x.abs(), None, [0.0, -0.0, 2.0, -2.0]),
    ("l1_loss", lambda x: F.l1_loss(x, torch.zeros_like(x)), lambda x: x.l1_loss(Tensor.zeros(*x.shape)),
     [0.0, 1.0, -1.0]),
    ("relu", lambda x: x.relu(), None, [0.0, -0.0, 1.0, -1.0]),
    ("sign", lambda x: x.sign(), None, [0.0, 2.0, -3.0]),
    ("pow0", lambda x: x ** 0, None, [0.0, nan, 2.0]),
    ("softplus", lambda x: F.softplus(x), lambda x: x.softplus(), [0.0, -17.0, 17.0, 30.0]),
    ("bce_logits", lambda x: F.binary_cross_entropy_with_logits(x, torch.ones_like(x), reduction="sum"),
     lambda x: x.binary_cross_entropy_with_logits(Tensor.ones(*x.shape), reduction="sum"),
     [0.0, -100.0, 50.0]),
    ("clamp", lambda x: x.clamp(-1, 1), None, [-1.0, 1.0, 0.5, 2.0, nan]),
    ("hardtanh", lambda x: F.hardtanh(x), lambda x: x.hardtanh(), [-1.0, 1.0, 0.5, 2.0, nan]),
    ("maximum", lambda x: x.maximum(torch.zeros_like(x)), lambda x: x.maximum(0), [0.0, 1.0, -1.0]),
])
@backends()
def test_gradients_at_kinks(name: str, torch_fn: Callable, ours: Any, values: list) -> None:
    """abs and l1_loss had gradient 1 at 0 (PyTorch 0), softplus -0.5 at 0 (PyTorch +0.5), sign and
    x ** 0 could not be part of a graph (PyTorch: gradient 0)."""
    check_edges(torch_fn, ours, [np.array(values, np.float32)])


def test_softplus_of_negative_values_is_not_zero() -> None:
    assert Tensor([-17.0]).softplus().numpy()[0] == pytest.approx(4.1399377e-08, rel=1e-5)


def test_nan_comparisons_are_false() -> None:
    n = Tensor([nan, 0.0, 1.0])
    for op in ("__lt__", "__le__", "__gt__", "__ge__", "__eq__", "__ne__"):
        expected = getattr(torch.tensor([nan, 0.0, 1.0]), op)(0.0).tolist()
        assert getattr(n, op)(0.0).tolist() == expected, op
        assert getattr(n, op)(n).tolist() == getattr(torch.tensor([nan, 0.0, 1.0]), op)(
            torch.tensor([nan, 0.0, 1.0])).tolist(), op
    assert np.isnan(Tensor([nan]).relu().numpy()[0])  # it was 0


def test_division_backward_does_not_square_the_divisor() -> None:
    """y * y underflowed to 0: (0 / y) at y = 1e-30 had gradient NaN (PyTorch -0)."""
    check_edges(lambda x, y: x / y, None, [np.array([0.0, 1.0, -3.0], np.float32),
                                          np.array([1e-30, 1e-30, 1e-20], np.float32)])


def test_cos_of_large_arguments() -> None:
    """cos was sin(pi/2 - x): cos(9740.8) was off by 4.6e-4."""
    x = np.array([9740.8, 1e4, -31415.9], np.float32)
    np.testing.assert_allclose(Tensor(x).cos().numpy(), np.cos(x.astype(np.float64)), atol=2e-7)


def test_constructors_refuse_integers_that_do_not_fit() -> None:
    """Tensor(2**40) gave 0 and full(..., 2**40, dtype=int32) gave zeros; PyTorch raises."""
    with pytest.raises(OverflowError, match="Tensor: value 1099511627776 does not fit in int32"):
        Tensor(2**40)
    with pytest.raises(OverflowError, match="full: value 1099511627776 does not fit in int32"):
        Tensor.full((2,), 2**40, dtype="int32")
    with pytest.raises(OverflowError, match="Tensor"):
        Tensor([2**40])
    with pytest.raises(OverflowError, match="full: value 300 does not fit in uint8"):
        Tensor.full((1,), 300, dtype="uint8")
    with pytest.raises(OverflowError, match="full: value inf"):
        Tensor.full((1,), inf, dtype="int32")
    assert (Tensor(np.array([250], np.uint8)) + 10).tolist() == [4]  # operators still wrap, like torch


def test_host_data_is_dropped_after_realize() -> None:
    """A tensor made from numpy kept its host copy after realize: 4 MiB of data held 8 MiB."""
    data = np.ones(1 << 20, np.float32)  # 4 MiB
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        t = Tensor(data).realize()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert t.lazydata.base.arg is None
    assert held < 6 * 2**20, f"holding {held / 2**20:.1f} MiB for 4 MiB of data"
    assert t.numpy()[:2].tolist() == [1.0, 1.0]


# ---- casts: one rule on every device ----
CAST_VALUES = np.array([3e9, -3e9, 1e10, inf, -inf, nan, 2147483520.0, -2147483648.0, 2147483648.0, 300.7,
                        -300.7, 255.9, 256.0, -1.5, -0.5, 0.0, 99.9], np.float32)


@pytest.mark.parametrize("dtype", ["int32", "uint8", "bool"])
@backends()
def test_float_to_int_casts_match_pytorch(dtype: str) -> None:
    """Out of range, NaN and inf: x86-64's answer (PyTorch's and numpy's there), on every device."""
    ours = Tensor(CAST_VALUES).cast(dtype).numpy()
    theirs = torch.tensor(CAST_VALUES).to(getattr(torch, dtype)).numpy()
    np.testing.assert_array_equal(ours, theirs)
    np.testing.assert_array_equal(ours, cast_array(CAST_VALUES, dtypes.from_any(dtype)))


# ---- every elementwise op at the edges, forward and backward ----
EDGE_VALUES = np.array([-1e4, -300, -88.8, -50, -17, -3, -1, -0.5, -1e-3, -1e-8, -1e-30, -0.0, 0.0, 1e-30,
                        1e-8, 1e-3, 0.5, 1, 3, 17, 50, 88.8, 300, 1e4], np.float32)


def _t(name: str) -> Callable:
    """torch.nn.functional.name, or the tensor method of that name."""
    return lambda x: getattr(F, name)(x) if hasattr(F, name) else getattr(x, name)()


EDGE_OPS: dict[str, tuple[Callable, Callable | None]] = {
    **{name: (lambda x, n=name: getattr(x, n)(), None) for name in [
        "neg", "relu", "abs", "sigmoid", "tanh", "exp", "exp2", "log", "log2", "log10", "sqrt", "rsqrt",
        "sin", "cos", "tan", "reciprocal", "square", "expm1", "log1p", "sinh", "cosh", "asinh", "acosh",
        "atanh", "trunc", "floor", "ceil", "round", "sign"]},
    **{name: (_t(name), lambda x, n=name: getattr(x, n)()) for name in [
        "silu", "gelu", "softplus", "elu", "celu", "selu", "mish", "hardswish", "hardsigmoid", "relu6",
        "hardtanh", "softsign", "logsigmoid"]},
    "gelu_tanh": (lambda x: F.gelu(x, approximate="tanh"), lambda x: x.gelu(approximate="tanh")),
    "leaky_relu": (lambda x: F.leaky_relu(x, 0.1), lambda x: x.leaky_relu(0.1)),
    "softplus_beta": (lambda x: F.softplus(x, 3.0, 10.0), lambda x: x.softplus(3.0, 10.0)),
    "clamp": (lambda x: x.clamp(-1, 1e-8), None),
    "pow_2.5": (lambda x: x ** 2.5, None),
    "pow_-1.5": (lambda x: x ** -1.5, None),
    "pow_3": (lambda x: x ** 3, None),
    "pow_-2": (lambda x: x ** -2, None),
    "rpow": (lambda x: 2 ** x, None),
    "mod": (lambda x: x % 1.5, None),
    "rmod": (lambda x: 1.5 % x, None),
    "floordiv": (lambda x: torch.div(x, 0.7, rounding_mode="floor"), lambda x: x // 0.7),
    "rdiv": (lambda x: 1 / x, None),
    "maximum": (lambda x: x.maximum(torch.full_like(x, 0.5)), lambda x: x.maximum(0.5)),
    "minimum": (lambda x: x.minimum(torch.full_like(x, 0.5)), lambda x: x.minimum(0.5)),
}


@pytest.mark.parametrize("name", EDGE_OPS)
@backends()
def test_edge_values(name: str) -> None:
    torch_fn, ours = EDGE_OPS[name]
    check_edges(torch_fn, ours, [EDGE_VALUES])


def test_edge_values_of_binary_ops() -> None:
    """Every pair of a few edge values, for the binary primitives and pow."""
    v = np.array([-1e4, -2.5, -1.0, -0.0, 0.0, 1e-30, 1.0, 3.0, 1e4, inf, -inf, nan], np.float32)
    x, y = (a.ravel() for a in np.meshgrid(v, v))
    for fn in (lambda a, b: a + b, lambda a, b: a - b, lambda a, b: a * b, lambda a, b: a / b,
               lambda a, b: a.maximum(b), lambda a, b: a.minimum(b), lambda a, b: a ** b):
        check_edges(fn, None, [x, y], grad=False)
    positive = np.abs(x) + 0.5
    check_edges(lambda a, b: a ** b, None, [positive, np.clip(y, -30, 30)], rtol=1e-3)


def test_devices_agree_bit_for_bit_on_casts_and_rounding() -> None:
    """NUMPY is the oracle; every other device must give the same bits (signed zeros included). The
    sign bit of a NaN made by an invalid operation (inf - inf) is the hardware's own: negative on
    x86-64, positive on aarch64 (NEON), so it is not compared."""
    if Device.DEFAULT == "NUMPY":
        pytest.skip("compares the other devices with NUMPY")
    for fn in (lambda x: x.int(), lambda x: x.cast("uint8"), lambda x: x.round(), lambda x: x.floor(),
               lambda x: x.trunc(), lambda x: x // 0.7, lambda x: x.sign()):
        ours = fn(Tensor(CAST_VALUES)).numpy()
        oracle = fn(Tensor(CAST_VALUES, device="NUMPY")).numpy()
        np.testing.assert_array_equal(ours, oracle)
        numbers = ~np.isnan(oracle) if oracle.dtype.kind == "f" else slice(None)
        np.testing.assert_array_equal(np.signbit(ours[numbers]), np.signbit(oracle[numbers]))


def test_maximum_and_minimum_return_the_first_operand_on_a_tie() -> None:
    """PyTorch's maximum(-0.0, 0.0) is -0.0 (np.maximum's is 0.0); NaN wins either way."""
    a, b = [-0.0, 0.0, nan, 1.0], [0.0, -0.0, 1.0, nan]
    for name in ("maximum", "minimum"):
        ours = (1 / getattr(Tensor(a), name)(Tensor(b))).tolist()
        theirs = (1 / getattr(torch.tensor(a), name)(torch.tensor(b))).tolist()
        assert str(ours) == str(theirs), name


def test_a_gcc_12_miscompilation() -> None:
    """GCC 12 at -O2 -march=native folded this 2-element kernel to a constant store (0.693 for every
    input: the value at x = 0). Found by the PyTorch fuzz; ops_c compiles with -fno-thread-jumps."""
    for values in ([-1e4, 2.0], [0.0, 0.0], [3.0, -0.0]):
        x = np.array(values, np.float32)
        expected = np.log1p(np.cos(np.sign(x).astype(np.float64)))
        np.testing.assert_allclose(Tensor(x).sign().cos().log1p().numpy(), expected, rtol=1e-6)


def test_log1p_and_expm1_of_huge_values() -> None:
    """log1p(1.1e38) is 87.6: Goldberg's log(u) * x / (u - 1) overflowed in log(u) * x (fuzz)."""
    values = np.array([1.1e38, 3e38, -0.999999, 88.0, -88.0, 1e-30], np.float32)
    check_edges(lambda x: x.log1p(), None, [np.abs(values)])
    check_edges(lambda x: x.expm1(), None, [np.clip(values, -100, 88)])
