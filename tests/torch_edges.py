"""Comparing with PyTorch at the edges of float32, where float64 is not the whole truth.

helper_test_op compares with PyTorch in float64, the exact answer as far as float32 inputs allow.
At extreme values that is not what float32 can hold: a gradient of -1/x^2 at x = 1e-20 is -1e40 in
float64 and -inf in float32. So here:

- NaN must appear exactly where float32 PyTorch has NaN, and +-inf exactly where it has +-inf
  (unless float32 PyTorch is the odd one out: where tinyedu gives float64 PyTorch's answer rounded
  to float32, float32 PyTorch's NaN or inf is an artifact of its float32 kernel; gelu(inf) is NaN
  there, inf in float64, and so is what follows from it);
- every finite value must be close to float64 PyTorch's, or at least as close as float32 PyTorch's
  (within twice its distance): where float32 PyTorch itself is far from the exact answer, the
  problem is ill-conditioned (log1p(-1 + 4e-8) changes by 40% if its input moves by an ulp), and
  tinyedu only has to be as accurate.

`check_edges(torch_fn, tinyedu_fn, arrays)` runs both forward and backward (the gradient of the sum
of the outputs) and applies these rules to the outputs and the input gradients.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np
import torch

from tinyedu import Tensor


def _torch(fn: Callable, arrays: Sequence[np.ndarray], dtype: torch.dtype) -> tuple[list, list]:
    leaves = [torch.tensor(a, dtype=dtype, requires_grad=True) for a in arrays]
    outs = fn(*leaves)
    outs = list(outs) if isinstance(outs, (tuple, list)) else [outs]
    differentiable = [o for o in outs if o.requires_grad]
    grads: list = []
    if differentiable:
        total = sum(o.sum() for o in differentiable)
        try:
            found = torch.autograd.grad(total, leaves, allow_unused=True)
            grads = [g.numpy() if g is not None else np.zeros(a.shape)
                     for g, a in zip(found, arrays, strict=True)]
        except RuntimeError:  # e.g. floor_divide has no derivative in PyTorch
            grads = []
    return [o.detach().numpy() for o in outs], grads


def _ours(fn: Callable, arrays: Sequence[np.ndarray], device: str | None) -> tuple[list, list]:
    leaves = [Tensor(a, device=device, requires_grad=True) for a in arrays]
    outs = fn(*leaves)
    outs = list(outs) if isinstance(outs, (tuple, list)) else [outs]
    values = [o.numpy() for o in outs]
    differentiable = [o for o in outs if o.requires_grad]
    if not differentiable:
        return values, []
    sum(o.sum() for o in differentiable).backward()
    return values, [t.grad.numpy() if t.grad is not None else np.zeros(a.shape, np.float32)
                    for t, a in zip(leaves, arrays, strict=True)]


def assert_edges_match(ours: np.ndarray, ref32: np.ndarray, ref64: np.ndarray, what: str, inputs: Any,
                       rtol: float = 1e-4, atol: float = 1e-6) -> None:
    """NaN and +-inf exactly where float32 PyTorch has them; finite values close to float64's."""
    ours = np.asarray(ours, dtype=np.float64)
    ref32, ref64 = np.asarray(ref32, dtype=np.float64), np.asarray(ref64, dtype=np.float64)
    assert ours.shape == ref32.shape, f"{what}: shape {ours.shape}, PyTorch {ref32.shape}"
    bad = np.isnan(ours) != np.isnan(ref32)
    infinite = ~np.isnan(ours) & ~np.isnan(ref32) & (np.isinf(ours) | np.isinf(ref32))
    bad |= infinite & (ours != ref32)
    with np.errstate(over="ignore"):
        exact = ref64.astype(np.float32).astype(np.float64)  # the exact answer, rounded to float32
    bad &= ~((np.isnan(ours) & np.isnan(ref64)) | (ours == exact))  # float32 PyTorch's artifact
    finite = np.isfinite(ours) & np.isfinite(ref32)
    with np.errstate(invalid="ignore", over="ignore"):
        close64 = np.abs(ours - ref64) <= atol + rtol * np.abs(ref64) + 2 * np.abs(ref32 - ref64)
        close32 = np.abs(ours - ref32) <= atol + rtol * np.abs(ref32)
    bad |= finite & ~close64 & ~close32
    if bad.any():
        at = np.argwhere(bad)[:6]
        rows = [f"  at {tuple(int(i) for i in k)}: tinyedu {ours[tuple(k)]!r}, PyTorch float32 "
                f"{ref32[tuple(k)]!r}, float64 {ref64[tuple(k)]!r}" for k in at]
        raise AssertionError(f"{what} differs from PyTorch at {int(bad.sum())} of {bad.size} positions "
                             f"(inputs {inputs}):\n" + "\n".join(rows))


def check_edges(torch_fn: Callable, tinyedu_fn: Callable | None, arrays: Sequence[np.ndarray],
                device: str | None = None, grad: bool = True, rtol: float = 1e-4, atol: float = 1e-6,
                grad_rtol: float = 1e-3, grad_atol: float = 1e-5) -> None:
    """Forward (and backward) of tinyedu_fn against torch_fn at float32's edges (see the module doc)."""
    tinyedu_fn = tinyedu_fn or torch_fn
    arrays = [np.asarray(a, dtype=np.float32) for a in arrays]
    values, grads = _ours(tinyedu_fn, arrays, device)
    values32, grads32 = _torch(torch_fn, arrays, torch.float32)
    values64, grads64 = _torch(torch_fn, arrays, torch.float64)
    short = [a.tolist() if a.size <= 8 else f"array of shape {a.shape}" for a in arrays]
    for k, (a, r32, r64) in enumerate(zip(values, values32, values64, strict=True)):
        assert_edges_match(a, r32, r64, f"output {k}", short, rtol, atol)
    if grad and grads32:
        assert grads, "tinyedu gives no gradient where PyTorch has one"
        for k, (a, r32, r64) in enumerate(zip(grads, grads32, grads64, strict=True)):
            assert_edges_match(a, r32, r64, f"gradient of input {k}", short, grad_rtol, grad_atol)
