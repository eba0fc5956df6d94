"""The Tensor API beyond stage 1's core: every op here against PyTorch, forward and backward, on every
device (the `device` fixture of test_ops runs each test once per device), plus tinygrad's names
and keyword forms. Shapes are small on purpose: PYTHON interprets every UOp.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tests.test_ops import _check_int_op, _distinct, _sample, backends, device, helper_test_op  # noqa: F401
from tests.torch_edges import check_edges
from tinyedu import Tensor, dtypes

torch = pytest.importorskip("torch")
F = torch.nn.functional


def _both(torch_fn: Any, ours: Any) -> Any:
    """torch_fn on torch tensors, ours on tinyedu's."""
    def fn(*xs: Any) -> Any:
        return ours(*xs) if isinstance(xs[0], Tensor) else torch_fn(*xs)

    return fn


# ---- activations and math with PyTorch's names ----
ACTIVATIONS = {
    "elu": (lambda x: F.elu(x), lambda x: x.elu()),
    "elu_alpha": (lambda x: F.elu(x, 0.5), lambda x: x.elu(0.5)),
    "celu": (lambda x: F.celu(x, 1.5), lambda x: x.celu(1.5)),
    "selu": (lambda x: F.selu(x), lambda x: x.selu()),
    "leakyrelu": (lambda x: F.leaky_relu(x, 0.2), lambda x: x.leakyrelu(0.2)),
    "relu6": (lambda x: F.relu6(x * 4), lambda x: (x * 4).relu6()),
    "hardtanh": (lambda x: F.hardtanh(x, -0.5, 1.0), lambda x: x.hardtanh(-0.5, 1.0)),
    "hardswish": (lambda x: F.hardswish(x * 3), lambda x: (x * 3).hardswish()),
    "hardsigmoid": (lambda x: F.hardsigmoid(x * 3), lambda x: (x * 3).hardsigmoid()),
    "mish": (lambda x: F.mish(x), lambda x: x.mish()),
    "softsign": (lambda x: F.softsign(x), lambda x: x.softsign()),
    "quick_gelu": (lambda x: x * torch.sigmoid(1.702 * x), lambda x: x.quick_gelu()),
    "swish": (lambda x: F.silu(x), lambda x: x.swish()),
    "logsigmoid": (lambda x: F.logsigmoid(x), lambda x: x.logsigmoid()),
    "softplus_threshold": (lambda x: F.softplus(x, 2.0, 1.0), lambda x: x.softplus(2.0, 1.0)),
    "tan": (lambda x: x.tan(), None),
    "sinh": (lambda x: x.sinh(), None),
    "cosh": (lambda x: x.cosh(), None),
    "asinh": (lambda x: x.asinh(), None),
    "atanh": (lambda x: (x * 0.3).atanh(), None),
    "acosh": (lambda x: (x.abs() + 1.1).acosh(), None),
    "expm1": (lambda x: x.expm1(), None),
    "log1p": (lambda x: (x.abs() - 0.5).log1p(), None),
    "log10": (lambda x: (x.abs() + 0.5).log10(), None),
}


@pytest.mark.parametrize("name", ACTIVATIONS)
@backends(name=["elu", "mish", "hardswish", "logsigmoid", "tan", "atanh", "expm1", "log1p"])
def test_activation(name: str) -> None:
    torch_fn, ours = ACTIVATIONS[name]
    helper_test_op([(2, 5)], torch_fn, ours, low=-3, high=3)


def test_sin_cos_of_large_arguments() -> None:
    """cos is a primitive: sin(pi/2 - x) rounds pi/2 - x to x's ulp (cos(9740.8) was off by 4.6e-4)."""
    values = np.array([9740.8, -1e4, 3141.59, 1e4, 123456.7, -7777.7], np.float32)
    for name in ("cos", "sin"):
        helper_test_op([values.shape], lambda x, n=name: getattr(x, n)(), arrays=[values], atol=1e-6,
                       numerical=False)


# ---- rounding, floor division, remainders, powers ----
ROUNDING = np.array([-3.5, -2.5, -1.5, -0.7, -0.5, -0.3, -0.0, 0.0, 0.3, 0.5, 0.7, 1.5, 2.5, 3.49, 8388607.5,
                     -8388609.0, 3e9, -1e10], np.float32)


@pytest.mark.parametrize("name", ["trunc", "floor", "ceil", "round", "sign", "frac_round"])
@backends()
def test_rounding(name: str) -> None:
    """Values (incl. -0.0 results, ties to even, |x| past 2^23 and int32) and a zero gradient."""
    fn = (lambda x: (x * 100).round() / 100) if name == "frac_round" else (lambda x: getattr(x, name)())
    helper_test_op([ROUNDING.shape], fn, arrays=[ROUNDING], numerical=False)
    ours = fn(Tensor(ROUNDING)).numpy()
    np.testing.assert_array_equal(np.signbit(ours), np.signbit(fn(torch.tensor(ROUNDING)).numpy()))


def test_round_decimals() -> None:
    values = np.array([1.25, -2.375, 1234.5, 0.125, 2.5, -0.0625], np.float32)  # exact: ties are ties
    for decimals in (1, 2, -1):
        helper_test_op([(4,)], lambda x, d=decimals: x.round(decimals=d), arrays=[values], numerical=False)


def test_floor_divide_and_remainder() -> None:
    a = np.array([7, -7, 7, -7, 1, 0.5, -0.0, 5, np.inf, 3], np.float32)
    b = np.array([2, 2, -2, -2, 0.1, 0.1, 3, 0, 2, np.inf], np.float32)
    helper_test_op([(10,), (10,)], lambda x, y: torch.div(x, y, rounding_mode="floor"),
                   lambda x, y: x // y, arrays=[a, b], numerical=False)
    exact = b != np.float32(0.1)  # 1 / 0.1 is 9.99999985 in float64 but 10 in float32: trunc differs
    helper_test_op([(8,), (8,)], lambda x, y: x.div(y, rounding_mode="trunc"), arrays=[a[exact], b[exact]],
                   grad=False)
    helper_test_op([(10,), (10,)], lambda x, y: torch.fmod(x, y), lambda x, y: x.fmod(y), arrays=[a, b],
                   grad=False)
    helper_test_op([(10,), (10,)], lambda x, y: torch.remainder(x, y), lambda x, y: x.remainder(y),
                   arrays=[a, b], grad=False)
    ints, divisors = np.array([7, -7, 7, -7, 0, 9], np.int32), np.array([2, 2, -2, -2, 3, -4], np.int32)
    _check_int_op(lambda x, y: x // y, lambda x, y: x // y, ints, divisors)
    _check_int_op(lambda x, y: torch.div(x, y, rounding_mode="trunc"),
                  lambda x, y: x.div(y, rounding_mode="trunc"), ints, divisors)
    _check_int_op(lambda x: 7 // x, lambda x: 7 // x, divisors)
    _check_int_op(lambda x: x % 3, lambda x: x % 3, ints)


def test_integer_division_by_zero_is_zero() -> None:
    """A kernel cannot raise, so x // 0 is 0 for integers (PyTorch raises ZeroDivisionError)."""
    assert (Tensor([7, -7]) // Tensor([0, 0])).tolist() == [0, 0]


POW_BASES = np.array([-2, -1, -0.5, -0.0, 0.0, 0.5, 1, 2, 3, np.inf, -np.inf, np.nan], np.float32)
POW_EXPONENTS = np.array([-np.inf, -3, -2.5, -1, -0.5, 0, 0.5, 1, 2, 2.5, 3, 1e10, np.inf, np.nan],
                         np.float32)


def test_pow_special_cases() -> None:
    """Every base against every exponent, C's pow table: signs of zeros, infinities, NaN."""
    x, y = np.meshgrid(POW_BASES, POW_EXPONENTS)
    x, y = x.ravel(), y.ravel()
    helper_test_op([x.shape, y.shape], lambda a, b: a ** b, arrays=[x, y], grad=False)
    ours, theirs = (Tensor(x) ** Tensor(y)).numpy(), (torch.tensor(x) ** torch.tensor(y)).numpy()
    signed = ~np.isnan(theirs)  # (a NaN's sign bit means nothing)
    np.testing.assert_array_equal(np.signbit(ours[signed]), np.signbit(theirs[signed]))


@pytest.mark.parametrize("exponent", [0, 0.5, -0.5, 1, 2, 3, -1, -2, 2.5, -1.5, 1e10, 7, 8, 9])
@backends(exponent=[0.5, -1.5, 3, 1e10])
def test_pow_scalar_exponent(exponent: float) -> None:
    values = np.array([-2.0, -1.5, -0.0, 0.0, 1e-20, 0.5, 1.0, 3.0, 1e4, -1e4], np.float32)
    check_edges(lambda x: x ** exponent, None, [values])


def test_pow_tensor_gradients() -> None:
    helper_test_op([(2, 3), (2, 3)], lambda x, y: x ** y, low=(0.1, -2), high=(2, 2))
    helper_test_op([(4,), (4,)], lambda x, y: x ** y, numerical=False,  # x = 0: torch's 0 gradients
                   arrays=[np.array([0, 0, 0, 2], np.float32), np.array([2.5, 0, 3, 0], np.float32)])


def test_integer_powers() -> None:
    ints = np.array([-3, -2, -1, 0, 1, 2, 3, 7], np.int32)
    for exponent in (0, 1, 2, 3, 5, 13):
        _check_int_op(lambda x, e=exponent: x ** e, lambda x, e=exponent: x ** e, ints)
    _check_int_op(lambda x: x ** 2.0, lambda x: x ** 2.0, ints)  # int ** float is float
    _check_int_op(lambda x: 2 ** x, lambda x: 2 ** x, np.array([0, 1, 5, 30], np.int32))
    exponents = np.array([3, 2, 5, 0, 9, 7, 4, 3], np.int32)
    _check_int_op(lambda x, y: x ** y, lambda x, y: x ** y, ints, exponents)
    _check_int_op(lambda x: x ** 2, lambda x: x ** 2, np.array([200, 3], np.uint8))  # wraps, as torch
    with pytest.raises(ValueError, match="negative integer powers"):
        Tensor([2, 3]) ** -1


# ---- bitwise ----
@pytest.mark.parametrize("dtype", ["int32", "uint8", "bool"])
@backends()
def test_bitwise(dtype: str) -> None:
    a, b = _sample(dtype, (3, 4), seed=1), _sample(dtype, (3, 4), seed=2)
    if dtype == "int32":
        a[0, :] = [-2**31, 2**31 - 1, -1, 0]
    for fn in (lambda x, y: x & y, lambda x, y: x | y, lambda x, y: x ^ y, lambda x, y: ~x,
               lambda x, y: x.bitwise_and(y), lambda x, y: x.bitwise_xor(y) if isinstance(x, Tensor)
               else torch.bitwise_xor(x, y), lambda x, y: x.logical_xor(y)):
        _check_int_op(fn, fn, a, b)


def test_shifts() -> None:
    ints = np.array([-9, -1, 0, 1, 5, 2**30, -2**31], np.int32)
    for bits in (0, 1, 3, 31):
        _check_int_op(lambda x, k=bits: x << k, lambda x, k=bits: x << k, ints)
        _check_int_op(lambda x, k=bits: x >> k, lambda x, k=bits: x >> k, ints)
    _check_int_op(lambda x: x >> 3, lambda x: x >> 3, np.array([0, 9, 255], np.uint8))


# ---- reductions and scans ----
@pytest.mark.parametrize("shape, dim", [((5,), 0), ((3, 4), 1), ((3, 4), 0), ((2, 3, 2), -2), ((0, 3), 1),
                                        ((1, 70), 1)], ids=str)
@backends(dim=[-2])
def test_cumsum(shape: tuple, dim: int) -> None:
    helper_test_op([shape], lambda x: x.cumsum(dim), atol=1e-4)
    helper_test_op([shape], lambda x: x.cumsum(dim=dim), atol=1e-4, layout="flipped", numerical=False)


def test_cumsum_ints_and_default_axis() -> None:
    _check_int_op(lambda x: x.cumsum(0), lambda x: x.cumsum(), _sample("int32", (4, 3)))
    _check_int_op(lambda x: x.cumsum(1), lambda x: x.cumsum(1), _sample("bool", (2, 5)))


@pytest.mark.parametrize("axis", [None, 0, 1, (0, 1)])
@backends(axis=[1])
def test_prod(axis: Any) -> None:
    def fn(x: Any) -> Any:
        if isinstance(x, Tensor):
            return x.prod(axis)
        if axis is None:
            return x.prod()
        for a in sorted(axis if isinstance(axis, tuple) else (axis,), reverse=True):
            x = x.prod(a)
        return x

    helper_test_op([(3, 3)], fn, low=0.5, high=1.5, numerical=axis == 1)
    helper_test_op([(0, 2)], fn)


def test_reductions_take_dim_and_axis() -> None:
    helper_test_op([(3, 4)], lambda x: x.sum(dim=1, keepdim=True))
    helper_test_op([(3, 4)], _both(lambda x: x.amax(dim=0), lambda x: x.max(axis=0)))
    helper_test_op([(3, 4)], lambda x: x.softmax(dim=0))
    helper_test_op([(3, 4)], lambda x: x.mean(dim=(0, 1)))
    helper_test_op([(3, 4)], lambda x: x.amin(dim=1))
    helper_test_op([(3, 4)], lambda x: x.argmax(dim=1))
    with pytest.raises(TypeError, match="give the axis once"):
        Tensor.ones(2, 2).sum(0, dim=1)


# ---- triangles, masks, one-hot ----
@pytest.mark.parametrize("diagonal", [0, 1, -1, 5, -5])
@pytest.mark.parametrize("name", ["tril", "triu"])
@backends(diagonal=[1])
def test_triangles(name: str, diagonal: int) -> None:
    helper_test_op([(3, 4)], lambda x: getattr(x, name)(diagonal))
    helper_test_op([(2, 4, 3)], lambda x: getattr(x, name)(diagonal=diagonal), numerical=False)
    _check_int_op(lambda x: getattr(x, name)(diagonal), lambda x: getattr(x, name)(k=diagonal),
                  _sample("bool", (3, 3)))


def test_masked_fill() -> None:
    mask = np.array([[True, False, True], [False, False, True]])
    helper_test_op([(2, 3)], _both(lambda x: x.masked_fill(torch.tensor(mask), -2.5),
                                   lambda x: x.masked_fill(Tensor(mask), -2.5)))
    _check_int_op(lambda x: x.masked_fill(torch.tensor(mask), 7.9),
                  lambda x: x.masked_fill(Tensor(mask), 7.9), _sample("int32"))


def test_one_hot() -> None:
    labels = np.array([[0, 3], [1, 1]], np.int32)
    _check_int_op(lambda x: F.one_hot(x.long(), 5), lambda x: x.one_hot(5), labels)
    _check_int_op(lambda x: F.one_hot(x.long()), lambda x: x.one_hot(), labels)
    with pytest.raises(ValueError, match="one_hot: class values must be smaller than num_classes=3, got 3"):
        Tensor(labels).one_hot(3)
    with pytest.raises(ValueError, match="non-negative"):
        Tensor([-1]).one_hot(3)


# ---- movement: keyword forms, padding forms, movedim ----
def test_movement_keywords() -> None:
    helper_test_op([(2, 3, 4)], lambda x: x.reshape(shape=(4, 6)))
    helper_test_op([(2, 3, 4)], lambda x: x.permute(dims=(2, 0, 1)))
    helper_test_op([(2, 3, 4)], _both(lambda x: x.permute(2, 0, 1), lambda x: x.permute(order=(2, 0, 1))))
    helper_test_op([(3, 1)], lambda x: x.expand(size=(2, 3, 4)))
    helper_test_op([(3, 1)], _both(lambda x: x.expand(2, 3, 4), lambda x: x.expand(shape=(2, 3, 4))))
    helper_test_op([(2, 3)], lambda x: x.flip(dims=(0, 1)))
    helper_test_op([(2, 3)], lambda x: x.flip(0, 1))
    helper_test_op([(1, 3, 1)], lambda x: x.squeeze((0, 2)))
    helper_test_op([(2, 3, 4)], lambda x: x.movedim(0, -1))
    helper_test_op([(2, 3, 4)], lambda x: x.movedim((0, 1), (2, 0)))
    index = np.array([[0, 2], [1, 0]])
    for ours in (lambda x: x.gather(1, Tensor(index)), lambda x: x.gather(dim=1, index=Tensor(index)),
                 lambda x: x.gather(Tensor(index), 1), lambda x: x.gather(idx=Tensor(index), dim=1)):
        helper_test_op([(2, 3)], lambda x: x.gather(1, torch.tensor(index)), ours)
    with pytest.raises(TypeError, match="reshape: unexpected keyword argument 'size'"):
        Tensor.ones(4).reshape(size=(2, 2))


@pytest.mark.parametrize("padding", [(1, 2), (0, 0, 1, 0), (-1, 1), (-1, -1, 2, -1), (1, 1, 1, 1)], ids=str)
@backends(padding=[(-1, -1, 2, -1)])
def test_pad_flat_and_negative(padding: tuple) -> None:
    """F.pad's flat form (last axis first), negative amounts crop."""
    helper_test_op([(3, 4)], lambda x: F.pad(x, padding), lambda x: x.pad(padding))
    helper_test_op([(3, 4)], lambda x: F.pad(x, padding, value=1.5), lambda x: x.pad2d(padding, 1.5))
    pairs = ((0, 0),) * (2 - len(padding) // 2) + tuple(
        (padding[i], padding[i + 1]) for i in range(0, len(padding), 2))[::-1]
    helper_test_op([(3, 4)], lambda x: F.pad(x, padding), lambda x: x.pad(pairs))


# ---- convolution, transposed convolution, pooling: 1, 2 and 3-d ----
CONV_ND = [  # input shape, weight shape, bias, keyword arguments
    ((2, 2, 7), (3, 2, 3), True, {"stride": 2, "padding": 1}),
    ((1, 4, 6), (4, 2, 2), False, {"groups": 2, "dilation": 2}),
    ((2, 5), (2, 2, 3), True, {"padding": "same"}),
    ((1, 1, 4, 4), (1, 1, 3, 3), False, {"padding": (1, 2, 0, 1)}),       # tinygrad's 4-sided (l, r, t, b)
    ((1, 2, 5, 5), (2, 2, 2, 2), True, {"padding": (-1, 0, 1, -1)}),      # negative padding crops
    ((1, 2, 4, 5), (4, 1, 2, 2), True, {"groups": 2, "stride": (2, 1), "dilation": (1, 2)}),
    ((1, 2, 3, 3, 4), (2, 2, 2, 2, 2), True, {"padding": 1, "stride": (1, 2, 2)}),
    ((2, 3, 3, 3), (2, 1, 1, 2, 2), False, {"groups": 2, "dilation": (1, 1, 2)}),
]


def _torch_conv(x: Any, w: Any, b: Any = None, **kwargs: Any) -> Any:
    """torch refuses 4-sided and negative padding: pad (or crop) first with F.pad, then convolve."""
    padding = kwargs.pop("padding", 0)
    nd = w.ndim - 2
    if isinstance(padding, tuple) and len(padding) == 2 * nd:
        x, padding = F.pad(x, padding), 0
    return getattr(F, f"conv{nd}d")(x, w, b, padding=padding, **kwargs)


@pytest.mark.parametrize("case", CONV_ND, ids=str)
@backends(case=[CONV_ND[i] for i in (0, 4, 6)])
def test_conv_nd(case: tuple) -> None:
    x_shape, w_shape, bias, kwargs = case
    shapes = [x_shape, w_shape] + ([(w_shape[0],)] if bias else [])
    name = f"conv{len(w_shape) - 2}d"
    helper_test_op(shapes, lambda *a: _torch_conv(*a, **dict(kwargs)),
                   lambda x, *rest: getattr(x, name)(*rest, **kwargs), atol=1e-4, grad_atol=1e-4)


CONV_TRANSPOSE = [  # input shape, weight shape (C_in, C_out/groups, *k), bias, keyword arguments
    ((1, 2, 4), (2, 3, 3), True, {"stride": 2, "padding": 1, "output_padding": 1}),
    ((2, 4, 3), (4, 1, 2), False, {"groups": 2, "dilation": 2}),
    ((1, 2, 3, 3), (2, 2, 3, 3), True, {}),
    ((1, 2, 3, 4), (2, 1, 2, 3), True, {"stride": (2, 3), "padding": (1, 0), "output_padding": (1, 2)}),
    ((2, 4, 3, 2), (4, 2, 2, 2), False, {"groups": 2, "stride": 2, "dilation": (2, 1), "padding": 1}),
    ((2, 3, 3), (2, 2, 3, 2), False, {"stride": 2, "padding": 2}),          # padding > (k-1)*d: a crop
    ((1, 2, 2, 2, 3), (2, 1, 2, 2, 2), True, {"stride": (1, 2, 1), "padding": (0, 1, 0)}),
]


@pytest.mark.parametrize("case", CONV_TRANSPOSE, ids=str)
@backends(case=[CONV_TRANSPOSE[i] for i in (0, 4)])
def test_conv_transpose_nd(case: tuple) -> None:
    x_shape, w_shape, bias, kwargs = case
    shapes = [x_shape, w_shape] + ([(w_shape[1] * kwargs.get("groups", 1),)] if bias else [])
    name = f"conv_transpose{len(w_shape) - 2}d"
    helper_test_op(shapes, lambda *a: getattr(F, name)(*a, **kwargs),
                   lambda x, *rest: getattr(x, name)(*rest, **kwargs), atol=1e-4, grad_atol=1e-4)


POOL_ND = [  # dimensions, input shape, kernel, keyword arguments
    (1, (2, 7), 3, {"stride": 2, "padding": 1}),
    (1, (1, 2, 7), 2, {"ceil_mode": True}),
    (2, (1, 1, 5, 6), (2, 3), {"stride": (2, 2), "padding": (1, 1), "ceil_mode": True}),
    (2, (1, 2, 5, 5), 3, {"stride": 2, "ceil_mode": True}),
    (2, (3, 4, 4), 2, {}),
    (3, (1, 1, 4, 5, 5), 2, {"stride": (1, 2, 2), "padding": 1}),
]


@pytest.mark.parametrize("case", POOL_ND, ids=str)
@backends(case=[POOL_ND[2]])
def test_max_pool_nd(case: tuple) -> None:
    nd, shape, kernel, kwargs = case
    name = f"max_pool{nd}d"
    helper_test_op([shape], lambda x: getattr(F, name)(x, kernel, **kwargs),
                   lambda x: getattr(x, name)(kernel, **kwargs), arrays=[_distinct(shape)])


@pytest.mark.parametrize("include", [True, False])
@pytest.mark.parametrize("case", POOL_ND, ids=str)
@backends(case=[POOL_ND[5]])
def test_avg_pool_nd(case: tuple, include: bool) -> None:
    nd, shape, kernel, kwargs = case
    name = f"avg_pool{nd}d"
    helper_test_op([shape], lambda x: getattr(F, name)(x, kernel, count_include_pad=include, **kwargs),
                   lambda x: getattr(x, name)(kernel, count_include_pad=include, **kwargs))


def test_pool_dilation_and_divisor() -> None:
    helper_test_op([(1, 1, 6, 6)], lambda x: F.max_pool2d(x, 2, 2, 1, dilation=2, ceil_mode=True),
                   lambda x: x.max_pool2d(2, 2, 1, dilation=2, ceil_mode=True),
                   arrays=[_distinct((1, 1, 6, 6))])
    helper_test_op([(1, 1, 5, 5)], lambda x: F.avg_pool2d(x, 3, 2, 1, divisor_override=4),
                   lambda x: x.avg_pool2d(3, 2, 1, divisor_override=4))
    helper_test_op([(1, 1, 4, 4)], lambda x: F.max_pool2d(x, 2), lambda x: x.max_pool2d(),  # default 2
                   arrays=[_distinct((1, 1, 4, 4))])


# ---- matmul family and attention ----
def test_dot_mm_bmm() -> None:
    helper_test_op([(4,), (4,)], lambda x, y: x.dot(y))
    helper_test_op([(2, 3), (3, 4)], lambda x, y: x.mm(y))
    helper_test_op([(2, 2, 3), (2, 3, 1)], lambda x, y: x.bmm(y))
    with pytest.raises(ValueError, match="dot: expects two 1-d tensors.*use matmul"):
        Tensor.ones(2, 3).dot(Tensor.ones(3, 2))
    with pytest.raises(ValueError, match="bmm"):
        Tensor.ones(2, 2, 3).bmm(Tensor.ones(3, 3, 1))


SDPA = [((2, 3, 4), (2, 5, 4), (2, 5, 2), {}),
        ((1, 2, 3, 4), (1, 2, 3, 4), (1, 2, 3, 3), {"is_causal": True}),
        ((3, 4), (5, 4), (5, 2), {"scale": 0.3}),
        ((2, 3, 4), (2, 5, 4), (2, 5, 2), {"mask": "bool"}),
        ((2, 3, 4), (1, 5, 4), (1, 5, 2), {"mask": "float"})]


@pytest.mark.parametrize("case", SDPA, ids=str)
@backends(case=[SDPA[i] for i in (1, 3)])
def test_scaled_dot_product_attention(case: tuple) -> None:
    q, k, v, kwargs = case
    kwargs = dict(kwargs)
    mask_kind = kwargs.pop("mask", None)
    rng = np.random.default_rng(5)
    mask = None
    if mask_kind == "bool":
        mask = rng.uniform(size=(3, 5)) > 0.3
        mask[:, 0] = True  # every query may attend to something
    elif mask_kind == "float":
        mask = rng.standard_normal((3, 5)).astype(np.float32)

    def fn(q: Any, k: Any, v: Any) -> Any:
        if isinstance(q, Tensor):
            m = None if mask is None else Tensor(mask)
            return q.scaled_dot_product_attention(k, v, attn_mask=m, **kwargs)
        m = None if mask is None else torch.tensor(mask if mask.dtype == bool else mask.astype(np.float64))
        return F.scaled_dot_product_attention(q, k, v, attn_mask=m, **kwargs)

    helper_test_op([q, k, v], fn, atol=1e-4)


def test_attention_row_with_nothing_to_attend_to_is_nan() -> None:
    q = Tensor.ones(2, 3)
    mask = Tensor([[False, False], [True, False]])
    out = q.scaled_dot_product_attention(Tensor.ones(2, 3), Tensor.ones(2, 1), attn_mask=mask).numpy()
    assert np.isnan(out[0]).all() and out[1].tolist() == [1.0]


# ---- losses with tinygrad's names ----
def test_tinygrad_loss_names() -> None:
    target = (np.random.default_rng(3).uniform(0, 1, (3, 4)) > 0.5).astype(np.float32)
    helper_test_op([(3, 4)], lambda x: F.binary_cross_entropy_with_logits(x, torch.tensor(target).double()),
                   lambda x: x.binary_crossentropy_logits(Tensor(target)), low=-4, high=4)
    helper_test_op([(3, 4)], lambda x: F.binary_cross_entropy(x, torch.tensor(target).double()),
                   lambda x: x.binary_crossentropy(Tensor(target)), low=0.05, high=0.95)
    labels = np.array([[0, 2], [1, -1]])  # -1 is ignored (tinygrad's default ignore_index)

    def sparse(x: Any) -> Any:
        if isinstance(x, Tensor):
            return x.sparse_categorical_crossentropy(Tensor(labels))
        return F.cross_entropy(x.permute(0, 2, 1), torch.tensor(labels), ignore_index=-1)

    helper_test_op([(2, 2, 3)], sparse)


def test_binary_cross_entropy_with_logits_at_zero() -> None:
    """softplus'(0) = 0.5: target 1 at logit 0 has gradient -0.5, as in PyTorch."""
    helper_test_op([(2,)], lambda x: F.binary_cross_entropy_with_logits(x, torch.ones(2).double()),
                   lambda x: x.binary_cross_entropy_with_logits(Tensor.ones(2)),
                   arrays=[np.zeros(2, np.float32)], numerical=False)
    helper_test_op([(3,)], lambda x: F.l1_loss(x, torch.zeros(3).double()),
                   lambda x: x.l1_loss(Tensor.zeros(3)),
                   arrays=[np.array([0.0, 1.0, -1.0], np.float32)], numerical=False)


# ---- creation ----
def test_multinomial() -> None:
    Tensor.manual_seed(1)
    weights = Tensor([[0.1, 0.0, 0.6, 0.3], [1.0, 1.0, 0.0, 2.0]])
    draws = weights.multinomial(4000, replacement=True).numpy()
    assert draws.shape == (2, 4000) and draws.dtype == np.int32
    for row, w in zip(draws, weights.numpy(), strict=True):
        freq = np.bincount(row, minlength=4) / row.size
        np.testing.assert_allclose(freq, w / w.sum(), atol=0.03)
        assert freq[w == 0].sum() == 0  # a weight of 0 is never drawn
    unique = Tensor([1.0, 2.0, 0.0, 3.0, 4.0]).multinomial(4)
    assert sorted(unique.tolist()) == [0, 1, 3, 4]  # without replacement: distinct, never the zero
    assert Tensor([0.0, 5.0]).multinomial().tolist() == [1]
    with pytest.raises(ValueError, match="multinomial: cannot take 3 samples from 2"):
        Tensor([1.0, 1.0]).multinomial(3)
    with pytest.raises(ValueError, match="multinomial: the weights must be finite"):
        Tensor([1.0, -1.0]).multinomial()


def test_tinygrad_creation_and_sizes() -> None:
    Tensor.manual_seed(0)
    u = Tensor.scaled_uniform(10, 10).numpy()
    assert np.abs(u).max() <= 0.1 and u.std() > 0.03
    n = Tensor.kaiming_normal(64, 16).numpy()
    assert abs(n.std() - np.sqrt(2 / (1 + 0.01**2)) / 4) < 0.03
    np.testing.assert_allclose(Tensor.linspace(0, 1, 5).numpy(), np.linspace(0, 1, 5))
    t = Tensor.ones(3, 4, dtype=dtypes.uint8)
    assert t.element_size() == 1 and t.nbytes == 12 and t.dim() == 2 and not t.is_floating_point()
    assert Tensor([1.0, -2.0]).sequential([lambda x: x * 2, Tensor.relu]).tolist() == [2.0, 0.0]
    x = Tensor([[1.0, 2.0], [3.0, 5.0]])
    np.testing.assert_allclose(x.layernorm().numpy(), F.layer_norm(torch.tensor(x.numpy()), (2,)).numpy(),
                               rtol=1e-5, atol=1e-5)
    mean, invstd = Tensor([1.0, 2.0]), Tensor([0.5, 2.0])
    out = x.batchnorm(Tensor([2.0, 1.0]), Tensor([0.0, 1.0]), mean, invstd)
    np.testing.assert_allclose(out.numpy(), (x.numpy() - [1, 2]) * [2, 1] * [0.5, 2] + [0, 1])


# ---- einsum, lerp, NaN tests ----
EINSUM = [("ij,jk->ik", [(2, 3), (3, 4)]), ("ij,jk", [(2, 3), (3, 4)]), ("ii->i", [(3, 3)]), ("ii", [(3, 3)]),
          ("bij,bjk->bik", [(2, 3, 4), (2, 4, 2)]), ("...ij,...jk->...ik", [(2, 1, 3, 4), (5, 4, 2)]),
          ("i,j->ij", [(3,), (4,)]), ("iij->j", [(2, 2, 3)]), ("ij->", [(2, 3)]), ("ji", [(2, 3)])]


@pytest.mark.parametrize("formula, shapes", EINSUM, ids=str)
@backends(formula=["ii->i", "...ij,...jk->...ik"])
def test_einsum(formula: str, shapes: list) -> None:
    def fn(*xs: Any) -> Any:
        return Tensor.einsum(formula, *xs) if isinstance(xs[0], Tensor) else torch.einsum(formula, *xs)

    helper_test_op(shapes, fn, atol=1e-4, numerical=len(shapes) == 1)


def test_einsum_errors() -> None:
    with pytest.raises(ValueError, match="einsum: the formula 'ij,jk' names 2 operands, got 1"):
        Tensor.einsum("ij,jk", Tensor.ones(2, 2))
    with pytest.raises(ValueError, match="einsum: letter 'j' is 3 in one operand and 4"):
        Tensor.einsum("ij,jk->ik", Tensor.ones(2, 3), Tensor.ones(4, 2))


def test_lerp_and_nan_tests() -> None:
    helper_test_op([(2, 3), (2, 3)], lambda x, y: x.lerp(y, 0.3))
    helper_test_op([(2, 3), (2, 3), (2, 3)], lambda x, y, w: x.lerp(y, w))
    values = np.array([np.nan, np.inf, -np.inf, 0.0, -1.5], np.float32)
    for name in ("isnan", "isinf", "isfinite"):
        _check_int_op(lambda x, n=name: getattr(x, n)(), lambda x, n=name: getattr(x, n)(), values)
