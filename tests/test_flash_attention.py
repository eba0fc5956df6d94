"""Fused attention (Tensor.flash_attention, tinyedu/function_attention.py) against the unfused attention
and PyTorch's scaled_dot_product_attention in float64, forward and backward, and a check that no
(..., T, T) buffer is ever allocated."""

from __future__ import annotations

import numpy as np
import pytest

from tinyedu import Tensor
from tinyedu.core.errors import ShapeError
from tinyedu.core.helpers import GlobalCounters

try:
    import torch
except ImportError:
    torch = None


def _devices() -> list[str]:
    devices = ["C", "NUMPY", "PYTHON"]
    try:
        Tensor([1.0], device="GPU").numpy()
        devices.append("GPU")
    except Exception:  # noqa: BLE001 - no OpenCL here: the GPU cases are skipped
        pass
    return devices


def _attend(arrays: list[np.ndarray], grad: np.ndarray, fused: bool, device: str,
            **kwargs) -> list[np.ndarray]:
    """The output and dq, dk, dv of tinyedu's attention, fused or not."""
    q, k, v = (Tensor(a, device=device, requires_grad=True) for a in arrays)
    if fused:
        out = q.flash_attention(k, v, **kwargs)
    else:
        kwargs.pop("block_size", None)
        out = q.scaled_dot_product_attention(k, v, **kwargs)
    (out * Tensor(grad, device=device)).sum().backward()
    return [out.numpy(), q.grad.numpy(), k.grad.numpy(), v.grad.numpy()]


def _inputs(shape_q, shape_k, dv=None, spread=1.0, seed=0, dtype=np.float64):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal(shape_q) * spread
    k = rng.standard_normal(shape_k) * spread
    v = rng.standard_normal((*shape_k[:-1], dv or shape_k[-1]))
    out = (*shape_q[:-1], v.shape[-1])
    return [a.astype(dtype) for a in (q, k, v)], rng.standard_normal(out).astype(dtype)


CASES = [  # (q shape, k shape, block): T not a multiple of the block, T = 1, heads and batch axes
    ((2, 3, 7, 5), (2, 3, 7, 5), 3),
    ((1, 4), (1, 4), 4),
    ((10, 4), (10, 4), 4),
    ((2, 9, 3), (2, 9, 3), 16),
    ((3, 6, 4), (3, 11, 4), 5),
]


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape_q,shape_k,block", CASES)
def test_matches_unfused_and_torch(shape_q, shape_k, block, causal):
    arrays, grad = _inputs(shape_q, shape_k)
    fused = _attend(arrays, grad, True, "C", is_causal=causal, block_size=block)
    plain = _attend(arrays, grad, False, "C", is_causal=causal)
    for a, b in zip(fused, plain, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
    if torch is None:
        return
    q, k, v = (torch.tensor(a, requires_grad=True) for a in arrays)
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
    (out * torch.tensor(grad)).sum().backward()
    for a, b in zip(fused, [out, q.grad, k.grad, v.grad], strict=True):
        np.testing.assert_allclose(a, b.detach().numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("device", _devices())
def test_devices_float32(device):
    arrays, grad = _inputs((2, 6, 3), (2, 6, 3), dv=2, dtype=np.float32)
    fused = _attend(arrays, grad, True, device, is_causal=True, block_size=4)
    expected = _attend([a.astype(np.float64) for a in arrays], grad.astype(np.float64), False, "NUMPY",
                       is_causal=True)
    for a, b in zip(fused, expected, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("causal", [False, True])
def test_extreme_logits_stay_finite(causal):
    """|q · k| up to 1e4: exp of a raw score would overflow; the running max keeps every exp <= 1."""
    arrays, grad = _inputs((2, 9, 4), (2, 9, 4), spread=50.0, seed=3)
    scores = np.abs(arrays[0] @ np.swapaxes(arrays[1], -1, -2)) / 2
    assert scores.max() > 5e3
    fused = _attend(arrays, grad, True, "C", is_causal=causal, block_size=4)
    plain = _attend(arrays, grad, False, "NUMPY", is_causal=causal)
    for a, b in zip(fused, plain, strict=True):
        assert np.isfinite(a).all()
        np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-8)


@pytest.mark.skipif(torch is None, reason="needs torch")
def test_float16_runs_in_float32():
    """Halves: the scores and running sums in float32, the output rounded to float16 once."""
    arrays, _ = _inputs((2, 9, 8), (2, 9, 8), spread=3.0, dtype=np.float32)
    q, k, v = (Tensor(a).cast("float16") for a in arrays)
    out = q.flash_attention(k, v, is_causal=True, block_size=4)
    assert out.dtype.name == "float16"
    half = [torch.tensor(a).half().double() for a in arrays]
    expected = torch.nn.functional.scaled_dot_product_attention(*half, is_causal=True).numpy()
    np.testing.assert_allclose(out.numpy().astype(np.float64), expected, rtol=2e-3, atol=2e-3)


def _peak_bytes(length: int, fused: bool) -> int:
    """The most memory live at once while attention runs forward and backward (inputs excluded)."""
    rng = np.random.default_rng(0)
    q, k, v = (Tensor(rng.standard_normal((1, length, 8)).astype(np.float32), requires_grad=True)
               for _ in range(3))
    for t in (q, k, v):
        t.realize()
    GlobalCounters.mem_peak = base = GlobalCounters.mem_used
    out = q.scaled_dot_product_attention(k, v, is_causal=True, fused=fused)
    out.sum().backward()
    for t in (out, q.grad, k.grad, v.grad):
        t.realize()
    return GlobalCounters.mem_peak - base


def test_no_t_by_t_buffer():
    """At T = 1024 fused attention never holds T x T floats (4 MiB), forward or backward; the unfused
    one does (which shows the measure sees it)."""
    square = 1024 * 1024 * 4
    fused = _peak_bytes(1024, fused=True)
    assert fused < square / 2, f"fused attention peaked at {fused} bytes; T x T is {square}"
    assert _peak_bytes(1024, fused=False) >= square


def test_matches_sdpa_fused_flag():
    arrays, grad = _inputs((2, 5, 3), (2, 5, 3))
    q, k, v = (Tensor(a) for a in arrays)
    np.testing.assert_allclose(q.scaled_dot_product_attention(k, v, is_causal=True, fused=True).numpy(),
                               q.scaled_dot_product_attention(k, v, is_causal=True).numpy(), rtol=1e-12)


def test_clear_errors():
    q = Tensor(np.zeros((2, 4, 3)))
    with pytest.raises(ShapeError, match="flash_attention"):
        q.flash_attention(Tensor(np.zeros((2, 4, 5))), Tensor(np.zeros((2, 4, 3))))
    with pytest.raises(ShapeError, match="batch axes"):
        q.flash_attention(Tensor(np.zeros((1, 4, 3))), Tensor(np.zeros((1, 4, 3))))
    with pytest.raises(ValueError, match="block_size"):
        q.flash_attention(q, q, block_size=0)
    with pytest.raises(Exception, match="fused=True"):
        q.scaled_dot_product_attention(q, q, attn_mask=Tensor(np.ones((4, 4), dtype=bool)), fused=True)
