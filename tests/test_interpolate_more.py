"""interpolate's modes 'nearest-exact' and 'trilinear', and uint8 images resized to uint8 as PyTorch's
CPU kernel rounds them. Forward and backward against PyTorch with tests/test_ops.py's helper (on every
device; NEON and LLVM run the cases marked `backends`), at float32's edge values, and bit-exact for
uint8.

PyTorch refuses uint8 for 'linear' and 'trilinear'; tinyedu blends each axis as bilinear does, so
those are checked against PyTorch's bilinear applied one axis at a time (an axis whose size does not
change is left alone by both).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tests import test_ops
from tests.test_ops import backends, device  # noqa: F401 - device: the autouse fixture
from tinyedu import Device, Tensor
from tinyedu.core.errors import UnsupportedError

try:
    import torch
    import torch.nn.functional as F
except ImportError:  # helper_test_op still checks against numerical gradients
    torch = F = None

needs_torch = pytest.mark.skipif(torch is None, reason="compares with PyTorch")
INF, NAN = float("inf"), float("nan")
EDGES = np.array([0.0, -0.0, INF, -INF, NAN, 1.5, -2.25, 3e4, -1e-4, 7.0, 7.0, 2.0], np.float32)


def helper_test_op(*args: Any, **kwargs: Any) -> list[np.ndarray]:
    """tests/test_ops.py's helper, with finite differences only when PyTorch is missing (fast)."""
    return test_ops.helper_test_op(*args, numerical=torch is None, **kwargs)


# ---- float32: forward and backward ----
FLOAT_CASES = [((2, 3, 13), dict(size=9, mode="nearest-exact")),
               ((2, 3, 9), dict(size=13, mode="nearest-exact")),
               ((1, 2, 13, 10), dict(size=(9, 11), mode="nearest-exact")),
               ((1, 2, 5, 2, 8), dict(size=(3, 6, 4), mode="nearest-exact")),
               ((1, 1, 7), dict(scale_factor=0.6, mode="nearest-exact")),
               ((1, 1, 4, 3), dict(scale_factor=(1.7, 2.5), mode="nearest-exact")),
               ((1, 2, 5, 2, 8), dict(size=(3, 6, 4), mode="trilinear")),
               ((1, 2, 5, 2, 8), dict(size=(3, 6, 4), mode="trilinear", align_corners=True)),
               ((1, 2, 3, 4, 2), dict(size=(7, 1, 5), mode="trilinear", align_corners=True)),
               ((1, 1, 2, 3, 4), dict(scale_factor=(1.5, 0.7, 2.0), mode="trilinear")),
               ((1, 1, 3, 1, 2), dict(scale_factor=2, mode="trilinear", recompute_scale_factor=True))]


@pytest.mark.parametrize("shape, kwargs", FLOAT_CASES, ids=str)
@backends(kwargs=[FLOAT_CASES[2][1], FLOAT_CASES[6][1]])
def test_interpolate_float(shape: tuple, kwargs: dict) -> None:
    helper_test_op([shape], lambda x: F.interpolate(x, **kwargs), lambda x: x.interpolate(**kwargs))


@pytest.mark.parametrize("mode", ["nearest-exact", "trilinear"])
def test_interpolate_edge_values(mode: str) -> None:
    """inf, -inf, NaN and -0.0 travel as PyTorch's: nearest-exact copies them (sign of zero too),
    trilinear blends them (inf * 0 weight is NaN in both)."""
    shape, size = (1, 2, 2, 3, 2), (3, 4, 3)
    arrays = [np.resize(EDGES, shape).astype(np.float32)]
    helper_test_op([shape], lambda x: F.interpolate(x, size=size, mode=mode),
                   lambda x: x.interpolate(size=size, mode=mode), arrays=arrays, grad=mode != "trilinear")


# ---- uint8: bit-exact with PyTorch ----
def _uint8_images(shape: tuple, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, shape).astype(np.uint8)


UINT8_BILINEAR = [((1, 3, 29, 2), dict(size=(12, 4))), ((1, 1, 5, 7), dict(size=(11, 3))),
                  ((1, 2, 6, 6), dict(size=(6, 13))), ((1, 1, 9, 4), dict(size=(1, 1))),
                  ((1, 4, 7, 5), dict(scale_factor=(1.7, 0.6))), ((1, 1, 3, 3), dict(size=(8, 8)))]


@needs_torch
@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("shape, kwargs", UINT8_BILINEAR, ids=str)
def test_uint8_bilinear_rounds_as_torch(shape: tuple, kwargs: dict, align_corners: bool) -> None:
    x = _uint8_images(shape)
    expected = F.interpolate(torch.from_numpy(x), mode="bilinear", align_corners=align_corners, **kwargs)
    ours = Tensor(x).interpolate(mode="bilinear", align_corners=align_corners, **kwargs)
    assert ours.dtype.name == "uint8"
    np.testing.assert_array_equal(ours.numpy(), expected.numpy())


@needs_torch
def test_uint8_as_tinygrad_tests_it() -> None:
    """tinygrad's TestOpsUint8 case: (10 * x).relu() of uniform(-1.5, 1.5) cast to uint8, values 0..15
    with many ties, 64x64 to 10x10. On the default device only (the smaller cases run everywhere)."""
    if Device.DEFAULT != "C":
        pytest.skip("a large case, run on C; the smaller ones cover every device")
    x = (10 * np.random.default_rng(3).uniform(-1.5, 1.5, (2, 3, 64, 64))).clip(0).astype(np.uint8)
    for mode in ("bilinear", "nearest", "nearest-exact"):
        expected = F.interpolate(torch.from_numpy(x), size=(10, 10), mode=mode)
        ours = Tensor(x).interpolate(size=(10, 10), mode=mode)
        assert ours.dtype.name == "uint8", mode
        np.testing.assert_array_equal(ours.numpy(), expected.numpy(), err_msg=mode)
    x = np.random.default_rng(4).integers(0, 256, (2, 3, 64, 64)).astype(np.uint8)
    for align_corners in (False, True):
        kw = dict(size=(10, 10), mode="bilinear", align_corners=align_corners)
        expected, ours = F.interpolate(torch.from_numpy(x), **kw), Tensor(x).interpolate(**kw)
        np.testing.assert_array_equal(ours.numpy(), expected.numpy())


@needs_torch
def test_uint8_linear_is_bilinear_along_one_axis() -> None:
    x = _uint8_images((2, 3, 17))
    ours = Tensor(x).interpolate(size=6, mode="linear")
    expected = F.interpolate(torch.from_numpy(x)[:, :, None], size=(1, 6), mode="bilinear")[:, :, 0]
    assert ours.dtype.name == "uint8"
    np.testing.assert_array_equal(ours.numpy(), expected.numpy())


@needs_torch
@pytest.mark.parametrize("align_corners", [False, True])
def test_uint8_trilinear_is_bilinear_then_the_depth_axis(align_corners: bool) -> None:
    (n, c, d, h, w), (d2, h2, w2) = (1, 2, 5, 4, 6), (3, 7, 4)
    x = _uint8_images((n, c, d, h, w))
    ours = Tensor(x).interpolate(size=(d2, h2, w2), mode="trilinear", align_corners=align_corners)
    kw = dict(mode="bilinear", align_corners=align_corners)
    hw = F.interpolate(torch.from_numpy(x).reshape(n, c * d, h, w), size=(h2, w2), **kw)  # the last two first
    dhw = F.interpolate(hw.reshape(n, c, d, h2 * w2), size=(d2, h2 * w2), **kw)  # then depth
    np.testing.assert_array_equal(ours.numpy(), dhw.reshape(n, c, d2, h2, w2).numpy())


def test_uint8_nearest_exact_keeps_values() -> None:
    x = _uint8_images((1, 1, 4, 4))
    ours = Tensor(x).interpolate(size=(8, 2), mode="nearest-exact")
    assert ours.dtype.name == "uint8"
    np.testing.assert_array_equal(ours.numpy(), x[:, :, np.arange(8) // 2][:, :, :, [1, 3]])


# ---- errors ----
def test_interpolate_errors() -> None:
    with pytest.raises(ValueError, match="align_corners only applies to the modes linear, bilinear and tri"):
        Tensor.ones(1, 1, 4).interpolate(size=3, mode="nearest-exact", align_corners=True)
    with pytest.raises(UnsupportedError, match=r"mode 'trilinear' expects a 5-d input .*\(1, 1, 4, 4\)"):
        Tensor.ones(1, 1, 4, 4).interpolate(size=3, mode="trilinear")
    with pytest.raises(NotImplementedError, match="one of nearest, nearest-exact, linear, bilinear, tril"):
        Tensor.ones(1, 1, 4).interpolate(size=3, mode="bicubic")


# ---- the C renderer bug uint8 bilinear uncovered ----
def test_int_gather_with_upcast_keeps_values() -> None:
    """An int32 kernel that broadcasts both an int and a bool to one vector width (a gather of int32,
    upcast by the optimizer): the bool's broadcast must be a -1 mask, not the int's (which made 0/1
    of every value when both shared one helper name)."""
    rng = np.random.default_rng(1)
    x = rng.integers(0, 256, (3, 29, 4)).astype(np.int32)
    idx = rng.integers(0, 29, (12,)).astype(np.int32)
    np.testing.assert_array_equal(Tensor(x)[:, Tensor(idx)].numpy(), x[:, idx])
    np.testing.assert_array_equal(((Tensor(x) + 1)[:, Tensor(idx)] - 1).numpy(), x[:, idx])
