"""tinyedu's errors are caught by the `except RuntimeError:` of code ported from PyTorch.

Each case is a call PyTorch refuses with a RuntimeError (or its subclass NotImplementedError).
tinyedu refuses it with its own message as an error class from tinyedu/core/errors.py, which must be an
instance of RuntimeError AND of the class tinyedu raised before (ValueError or TypeError), so both
`except RuntimeError` and `except ValueError` keep working. The PyTorch half of each case is the
oracle that says RuntimeError is right; it is skipped without torch.
"""

from __future__ import annotations

from typing import Any, Callable

import pytest

from tinyedu import Tensor, dtypes
from tinyedu.core.errors import ArgumentError, DeviceError, DTypeError, ShapeError, UnsupportedError

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    torch = F = None

T = Tensor.ones
i32 = dtypes.int32


def tt(*shape: int, dtype: Any = None) -> Any:
    return torch.ones(*shape, dtype=dtype)


def ti(*values: int) -> Any:
    return torch.tensor(values)


# (name, tinyedu call, torch call, the class tinyedu raised before these classes, the class it raises now)
CASES: list[tuple[str, Callable, Callable, type, type]] = [
    # shapes that do not fit
    ("matmul", lambda: T(2, 4) @ T(1, 3), lambda: tt(2, 4) @ tt(1, 3), ValueError, ShapeError),
    ("matmul_0d", lambda: Tensor(3.0) @ T(3, 3), lambda: torch.tensor(3.0) @ tt(3, 3),
     ValueError, ShapeError),
    ("dot", lambda: T(2).dot(T(3)), lambda: tt(2).dot(tt(3)), ValueError, ShapeError),
    ("mm", lambda: T(2).mm(T(2, 3)), lambda: tt(2).mm(tt(2, 3)), ValueError, ShapeError),
    ("bmm", lambda: T(2, 2, 3).bmm(T(3, 3, 2)), lambda: tt(2, 2, 3).bmm(tt(3, 3, 2)), ValueError, ShapeError),
    ("linear", lambda: T(2, 3).linear(T(4, 4)), lambda: F.linear(tt(2, 3), tt(4, 4)), ValueError, ShapeError),
    ("broadcast", lambda: T(2, 3) + T(2), lambda: tt(2, 3) + tt(2), ValueError, ShapeError),
    ("reshape_two_minus_ones", lambda: T(3, 4).reshape((-1, -1, 2)), lambda: tt(3, 4).reshape((-1, -1, 2)),
     ValueError, ShapeError),
    ("reshape_count", lambda: T(2, 3).reshape(4, 2), lambda: tt(2, 3).reshape(4, 2), ValueError, ShapeError),
    ("permute", lambda: T(3, 4, 5, 6).permute((0, 2)), lambda: tt(3, 4, 5, 6).permute((0, 2)),
     ValueError, ShapeError),
    ("permute_repeated", lambda: T(2, 3).permute(0, 0), lambda: tt(2, 3).permute(0, 0),
     ValueError, ShapeError),
    ("expand", lambda: T(2, 3).expand(3, 3), lambda: tt(2, 3).expand(3, 3), ValueError, ShapeError),
    ("flip_repeated", lambda: T(3, 4).flip((0, 0)), lambda: tt(3, 4).flip((0, 0)), ValueError, ShapeError),
    ("flip_repeated_negative", lambda: T(3, 4).flip((1, -1)), lambda: tt(3, 4).flip((1, -1)),
     ValueError, ShapeError),
    ("sum_repeated_axis", lambda: T(2, 3).sum((0, 0)), lambda: tt(2, 3).sum((0, 0)), ValueError, ShapeError),
    ("flatten", lambda: T(2, 3, 4).flatten(2, 1), lambda: tt(2, 3, 4).flatten(2, 1), ValueError, ShapeError),
    ("movedim", lambda: T(2, 3, 4).movedim((0, 0), (1, 2)), lambda: tt(2, 3, 4).movedim((0, 0), (1, 2)),
     ValueError, ShapeError),
    ("repeat_few", lambda: T(2, 3).repeat(2), lambda: tt(2, 3).repeat(2), ValueError, ShapeError),
    ("cat_shapes", lambda: T(2, 3).cat(T(3, 2)), lambda: torch.cat([tt(2, 3), tt(3, 2)]),
     ValueError, ShapeError),
    ("cat_0d", lambda: Tensor(1.0).cat(Tensor(2.0)), lambda: torch.cat([torch.tensor(1.0)] * 2),
     ValueError, ShapeError),
    ("stack", lambda: T(2).stack(T(3)), lambda: torch.stack([tt(2), tt(3)]), ValueError, ShapeError),
    ("split_0d", lambda: Tensor(1.0).split(1), lambda: torch.tensor(1.0).split(1), ValueError, ShapeError),
    ("gather_rank", lambda: T(4, 5, 6).gather(0, Tensor([1])), lambda: tt(4, 5, 6).gather(0, ti(1)),
     ValueError, ShapeError),
    ("tril_1d", lambda: T(3).tril(), lambda: tt(3).tril(), ValueError, ShapeError),
    ("conv2d_kernel_too_large", lambda: T(1, 1, 6, 7).conv2d(T(6, 1, 3, 3), dilation=3),
     lambda: F.conv2d(tt(1, 1, 6, 7), tt(6, 1, 3, 3), dilation=3), ValueError, ShapeError),
    ("conv2d_channels", lambda: T(1, 3, 3, 3).conv2d(T(1, 2, 2, 2)),
     lambda: F.conv2d(tt(1, 3, 3, 3), tt(1, 2, 2, 2)), ValueError, ShapeError),
    ("conv2d_bias", lambda: T(1, 1, 3, 3).conv2d(T(2, 1, 2, 2), T(3)),
     lambda: F.conv2d(tt(1, 1, 3, 3), tt(2, 1, 2, 2), tt(3)), ValueError, ShapeError),
    ("conv_transpose2d_channels", lambda: T(1, 3, 3, 3).conv_transpose2d(T(2, 1, 2, 2)),
     lambda: F.conv_transpose2d(tt(1, 3, 3, 3), tt(2, 1, 2, 2)), ValueError, ShapeError),
    ("max_pool2d_input", lambda: T(4).max_pool2d(2), lambda: F.max_pool2d(tt(4), 2), ValueError, ShapeError),
    ("layer_norm", lambda: T(2, 3).layer_norm((4,)), lambda: F.layer_norm(tt(2, 3), (4,)),
     ValueError, ShapeError),
    ("item", lambda: T(2, 3).item(), lambda: tt(2, 3).item(), ValueError, ShapeError),
    ("meshgrid_2d", lambda: T(2, 2).meshgrid(T(2)), lambda: torch.meshgrid(tt(2, 2), tt(2), indexing="ij"),
     ValueError, ShapeError),
    ("negative_size", lambda: Tensor.ones(-1), lambda: torch.ones(-1), ValueError, ShapeError),
    ("einsum_operand_size", lambda: Tensor.einsum("ij,ij->i", T(2, 3), T(2, 4)),
     lambda: torch.einsum("ij,ij->i", tt(2, 3), tt(2, 4)), ValueError, ShapeError),
    # an op the dtype does not have
    ("and_float", lambda: T(2) & T(2), lambda: tt(2) & tt(2), TypeError, DTypeError),
    ("or_float", lambda: T(2) | T(2), lambda: tt(2) | tt(2), TypeError, DTypeError),
    ("xor_float", lambda: T(2) ^ T(2), lambda: tt(2) ^ tt(2), TypeError, DTypeError),
    ("bitwise_not_float", lambda: T(2).bitwise_not(), lambda: tt(2).bitwise_not(), TypeError, DTypeError),
    ("lshift_float", lambda: T(2) << 1, lambda: tt(2) << 1, TypeError, DTypeError),
    ("neg_bool", lambda: -T(2, dtype=dtypes.bool), lambda: -tt(2, dtype=torch.bool), TypeError, DTypeError),
    ("sub_bool", lambda: T(2, dtype=dtypes.bool) - T(2, dtype=dtypes.bool),
     lambda: tt(2, dtype=torch.bool) - tt(2, dtype=torch.bool), TypeError, DTypeError),
    ("requires_grad_int", lambda: T(2, dtype=i32).requires_grad_(),
     lambda: tt(2, dtype=torch.int32).requires_grad_(), TypeError, DTypeError),
    ("one_hot_float", lambda: T(3).one_hot(), lambda: F.one_hot(tt(3)), TypeError, DTypeError),
    ("masked_fill_float_mask", lambda: T(2).masked_fill(T(2), 1.0), lambda: tt(2).masked_fill(tt(2), 1.0),
     TypeError, DTypeError),
    ("gather_float_index", lambda: T(3).gather(0, T(1)), lambda: tt(3).gather(0, tt(1)),
     TypeError, DTypeError),
    ("linspace_bool", lambda: Tensor.linspace(5, 10, 3, dtype="bool"),
     lambda: torch.linspace(5, 10, 3, dtype=torch.bool), TypeError, DTypeError),
    # argument values the op refuses
    ("clip_no_bounds", lambda: T(3).clip(None, None), lambda: tt(3).clip(None, None),
     ValueError, ArgumentError),
    ("arange_step_0", lambda: Tensor.arange(0, 5, 0), lambda: torch.arange(0, 5, 0),
     ValueError, ArgumentError),
    ("linspace_negative_steps", lambda: Tensor.linspace(1, 2, -1), lambda: torch.linspace(1, 2, -1),
     ValueError, ArgumentError),
    ("randint_empty_range", lambda: Tensor.randint(5, 5, (3,)), lambda: torch.randint(5, 5, (3,)),
     ValueError, ArgumentError),
    ("div_rounding_mode", lambda: T(2).div(T(2), rounding_mode="x"),
     lambda: torch.div(tt(2), tt(2), rounding_mode="x"), ValueError, ArgumentError),
    ("gelu_approximate", lambda: T(2).gelu(approximate="x"), lambda: F.gelu(tt(2), approximate="x"),
     ValueError, ArgumentError),
    ("pow_int_negative", lambda: Tensor([2]) ** -1, lambda: ti(2) ** -1, ValueError, ArgumentError),
    ("chunk_0", lambda: T(3).chunk(0), lambda: tt(3).chunk(0), ValueError, ArgumentError),
    ("split_sizes", lambda: T(2, 3).split([1, 1], 1), lambda: tt(2, 3).split([1, 1], 1),
     ValueError, ArgumentError),
    ("one_hot_negative", lambda: Tensor([-1]).one_hot(3), lambda: F.one_hot(ti(-1), 3),
     ValueError, ArgumentError),
    ("conv2d_stride_0", lambda: T(1, 1, 3, 3).conv2d(T(1, 1, 2, 2), stride=0),
     lambda: F.conv2d(tt(1, 1, 3, 3), tt(1, 1, 2, 2), stride=0), ValueError, ArgumentError),
    ("conv2d_groups_0", lambda: T(1, 2, 3, 3).conv2d(T(2, 2, 2, 2), groups=0),
     lambda: F.conv2d(tt(1, 2, 3, 3), tt(2, 2, 2, 2), groups=0), ValueError, ArgumentError),
    ("pad_odd_length", lambda: T(2, 3).pad((1,)), lambda: F.pad(tt(2, 3), (1,)), ValueError, ArgumentError),
    ("roll_shifts_dims", lambda: T(2, 3).roll((1, 2), (0,)), lambda: tt(2, 3).roll((1, 2), (0,)),
     ValueError, ArgumentError),
    ("repeat_interleave_negative", lambda: T(2).repeat_interleave(-1), lambda: tt(2).repeat_interleave(-1),
     ValueError, ArgumentError),
    ("meshgrid_indexing", lambda: T(2).meshgrid(T(2), indexing="bad"),
     lambda: torch.meshgrid(tt(2), tt(2), indexing="bad"), ValueError, ArgumentError),
    ("multinomial_too_many", lambda: T(3).multinomial(5), lambda: tt(3).multinomial(5),
     ValueError, ArgumentError),
    ("scatter_reduce_mode", lambda: T(3).scatter_reduce(0, Tensor([0]), T(1), reduce="x"),
     lambda: tt(3).scatter_reduce(0, ti(0), tt(1), reduce="x"), ValueError, ArgumentError),
    ("batch_norm_no_running_stats", lambda: T(2, 3).batch_norm(training=False),
     lambda: F.batch_norm(tt(2, 3), None, None, training=False), ValueError, ArgumentError),
    # a mode that does not exist: PyTorch says NotImplementedError, a RuntimeError
    ("pad_mode_typo", lambda: T(3, 3, 3).pad((3, 0), mode="typo"),
     lambda: F.pad(tt(3, 3, 3), (3, 0), mode="typo"), ValueError, UnsupportedError),
    ("interpolate_rank", lambda: T(1, 2, 3).interpolate(size=4, mode="bilinear"),
     lambda: F.interpolate(tt(1, 2, 3), size=4, mode="bilinear"), ValueError, UnsupportedError),
]


@pytest.mark.parametrize("name, tinyedu_fn, torch_fn, old, new", CASES, ids=[c[0] for c in CASES])
def test_error_is_also_a_runtime_error(name: str, tinyedu_fn: Callable, torch_fn: Callable, old: type,
                                       new: type) -> None:
    with pytest.raises(Exception) as got:
        tinyedu_fn()
    assert type(got.value) is new, f"{name}: {type(got.value).__name__}: {got.value}"
    assert isinstance(got.value, RuntimeError) and isinstance(got.value, old)
    assert str(got.value).split(":")[0].strip() != "", "the message still names the op"
    if torch is not None:
        with pytest.raises(RuntimeError):
            torch_fn()


def test_the_classes_keep_both_bases() -> None:
    assert issubclass(ShapeError, ValueError) and issubclass(ShapeError, RuntimeError)
    assert issubclass(ArgumentError, ValueError) and issubclass(ArgumentError, RuntimeError)
    assert issubclass(DeviceError, ValueError) and issubclass(DeviceError, RuntimeError)
    assert issubclass(DTypeError, TypeError) and issubclass(DTypeError, RuntimeError)
    assert issubclass(UnsupportedError, ValueError) and issubclass(UnsupportedError, NotImplementedError)


def test_except_runtime_error_catches_a_shape_error() -> None:
    """The point of the classes: a PyTorch-style handler catches tinyedu's error, message intact."""
    try:
        T(2, 4) @ T(1, 3)
    except RuntimeError as e:
        assert "matmul" in str(e) and "(2, 4)" in str(e) and "(1, 3)" in str(e)
    else:
        pytest.fail("matmul of shapes that do not line up must raise")


def test_devices_that_differ() -> None:
    """Tensors on two devices meeting in one op: PyTorch's "Expected all tensors to be on the same
    device" is a RuntimeError (no second device here to show it with torch)."""
    a, b = T(2), T(2, device="NUMPY")
    if a.device == b.device:
        pytest.skip("the default device is NUMPY")
    for call in (lambda: a + b, lambda: a.cat(b), lambda: a.gather(0, b.int())):
        with pytest.raises(DeviceError, match="NUMPY") as got:
            call()
        assert isinstance(got.value, ValueError) and isinstance(got.value, RuntimeError)


def test_index_out_of_bounds_says_so() -> None:
    """Worded as PyTorch's 'index 3 is out of bounds for dimension 1 with size 3'; still an IndexError."""
    words = r"index 3 is out of bounds for axis 1 of size 3 .*valid indices are -3..2"
    with pytest.raises(IndexError, match=words):
        T(4, 3)[1, 3]
    with pytest.raises(IndexError, match="index -4 is out of bounds for axis 1"):
        T(4, 3)[1, -4]
    if torch is not None:
        with pytest.raises(IndexError, match="out of bounds"):
            tt(4, 3)[1, 3]


def test_arguments_of_the_wrong_type_stay_type_errors() -> None:
    """As in PyTorch: a string where a number goes is a TypeError, not a RuntimeError."""
    with pytest.raises(TypeError) as got:
        T(2) + "a"
    assert not isinstance(got.value, RuntimeError)
