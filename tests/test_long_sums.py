"""Long float sums stay exact: blocks of partial sums on every device, the same with any thread count.

One float32 accumulator stops growing at 2^24 (10^8 ones summed one by one give 16777216). The
Kernel splits a long float SUM into blocks (tinyedu/codegen/sum_blocks.py): levels of partial sums
that each add few values. These tests check the sums the issue reported (10^8 ones, the mean of
46341^2 ones, a (10000, 15000) tensor on LLVM), the error of a sum of 2^27 uniform values against
a float64 sum and against torch, bit-identical results with THREADS=1, 2, 4, 8, sums along one axis
of 2-d tensors, and that the blocks are visible in the kernel and its UOps. PYTHON and NEON (an
interpreter, an emulator) run the blocks at small sizes, with smaller blocks patched in.
"""

from __future__ import annotations

import numpy as np
import pytest

from tinyedu import Device, Tensor
from tinyedu.codegen import sum_blocks
from tinyedu.codegen.kernel import AxisKind, Kernel
from tinyedu.codegen.linearizer import linearize
from tinyedu.codegen.opts import Opt, OptError, OptOps, apply_opt
from tinyedu.codegen.search import candidate_opts
from tinyedu.core.helpers import prod
from tinyedu.core.uops import UOps
from tinyedu.engine.schedule import create_schedule
from tinyedu.runtime.device import DeviceUnavailable

try:
    import torch
except ImportError:
    torch = None


def need(device: str) -> None:
    try:
        Device[device].check_runnable()  # CUDA compiles anywhere, runs only on a GPU
    except DeviceUnavailable as missing:
        pytest.skip(str(missing))


def kernel_of(t: Tensor) -> Kernel:
    """The Kernel of the (one) compute kernel that realizes `t`."""
    items = [si for si in create_schedule([t.lazydata]) if si.ast.op.name == "STORE"]
    assert len(items) == 1
    return Kernel(items[0].ast)


def ulp(x: float) -> float:
    return float(np.spacing(np.float32(abs(x))))


@pytest.fixture
def small_blocks(monkeypatch: pytest.MonkeyPatch):
    """Blocks of 16 elements and levels of 4 (so that a few thousand elements use several levels);
    programs lowered with other blocks are forgotten before and after."""
    def forget() -> None:
        for name in ("C", "PYTHON", "NEON", "LLVM"):
            try:
                Device[name].programs.clear()
            except DeviceUnavailable:
                pass
    forget()
    monkeypatch.setattr(sum_blocks, "SUM_BLOCK", 16)
    monkeypatch.setattr(sum_blocks, "SUM_FAN", 4)
    yield
    forget()


# ---- the plan ----
@pytest.mark.parametrize("sizes", [(10**8,), (46341 * 46341,), (10000, 15000), (512, 3, 3), (4097,),
                                   (16777259,), (2**31 - 1,), (67, 5000), (3, 2**20), (2 * 4099,)])
def test_plan_covers_the_sum_in_small_levels(sizes: tuple[int, ...]) -> None:
    plans = sum_blocks.plan(sizes)
    assert plans is not None and len(plans) == len(sizes)
    for size, axis in zip(sizes, plans, strict=True):
        assert prod(axis.pieces) == axis.size >= size
        assert axis.size - size <= max(size // 16, sum_blocks.SUM_BLOCK)  # padding adds little
        assert all(piece <= sum_blocks.SUM_BLOCK for piece in axis.pieces)
    block = prod(p for axis in plans for p in axis.pieces[axis.levels:])
    assert block <= sum_blocks.SUM_BLOCK
    levels = [p for axis in plans for p in axis.pieces[:axis.levels]]
    assert prod(levels) * block == prod(axis.size for axis in plans)


def test_short_sums_and_max_are_not_blocked() -> None:
    assert sum_blocks.plan((sum_blocks.SUM_BLOCK,)) is None
    assert AxisKind.BLOCK not in kernel_of(Tensor.ones(512, 512).sum(1)).kinds    # a matmul-sized reduce
    assert AxisKind.BLOCK not in kernel_of(Tensor.ones(10**6).max()).kinds       # MAX is exact in any order
    k = kernel_of(Tensor.ones(10**8).sum())
    assert k.kinds == [AxisKind.BLOCK] * 3 + [AxisKind.REDUCE] and k.full_shape == (50, 25, 25, 3200)
    assert k.loop_names == ["bidx0", "bidx1", "bidx2", "ridx0"]


def test_each_level_has_its_accumulator_in_the_uops() -> None:
    uops = linearize(kernel_of(Tensor.ones(10**8).sum()))
    ranges = [u.arg.name for u in uops if u.op is UOps.RANGE]
    assert ranges == ["bidx0", "bidx1", "bidx2", "ridx0"]
    depth, accs_at = 0, []
    for u in uops:
        depth += (u.op is UOps.RANGE) - (u.op is UOps.ENDRANGE)
        if u.op is UOps.DEFINE_ACC:
            accs_at.append(depth)
    assert accs_at == [1, 2, 3]  # bidx0's partials are a local array; then one accumulator per level


# ---- the sums of the issue ----
@pytest.mark.parametrize("device", ["C", "NUMPY", "LLVM"])
def test_sum_and_mean_of_1e8_ones(device: str) -> None:
    need(device)
    assert Tensor.ones(100_000_000, device=device).sum().numpy() == 1e8
    assert Tensor.ones(100_000_000, device=device).mean().numpy() == 1.0


def test_mean_of_46341_squared_ones() -> None:
    """2147488281 ones (past 2^31: 64-bit indices, a padded last block): the mean is 1.0 as in torch."""
    assert Tensor.ones(46341 * 46341).mean().numpy() == 1.0


def test_sum_of_a_10000_by_15000_tensor_on_llvm() -> None:
    """The issue's `Tensor(np.ones((10000, 15000), np.float32)).sum()` on LLVM (134217728 with one
    accumulator per lane); the buffer of ones is made on the device, which is faster than copying
    600 MB in, and the sum kernel is the same."""
    need("LLVM")
    ones = Tensor.ones(10000, 15000, device="LLVM").contiguous().realize()
    assert kernel_of(ones.sum()).full_shape == (50, 50, 4, 5, 3000)
    assert ones.sum().numpy() == 1.5e8


@pytest.mark.skipif(torch is None, reason="needs torch")
def test_error_of_2_27_uniform_values_against_float64_and_torch() -> None:
    """2^27 values in [0, 1): the error is within 4 ulp of the float64 sum, and within a small factor
    of torch's (whose cascade sum is within about one rounding of it). The worst case of the blocked
    order (tinyedu/codegen/sum_blocks.py), 148 * 2^-24 relative here, is far larger, but the
    roundings of 2^27 additions are independent and cancel: the sum of 2^27 such values is within a
    few units of the last place of the float32 result."""
    x = np.random.default_rng(27).random(2**27, dtype=np.float32)
    exact = float(np.sum(x, dtype=np.float64))
    ours = float(Tensor(x).sum().numpy())
    theirs = float(torch.from_numpy(x).sum())
    assert abs(ours - exact) <= 4 * ulp(exact)
    assert abs(ours - exact) <= max(8 * abs(theirs - exact), 2 * ulp(exact))
    assert float(Tensor(x).mean().numpy()) == pytest.approx(exact / x.size, rel=2**-21)


# ---- threads ----
def test_a_sum_is_bit_identical_with_any_thread_count(monkeypatch: pytest.MonkeyPatch) -> None:
    """The blocks do not depend on THREADS: threads share the outermost level's blocks, whose totals
    are combined after the loop in one fixed order."""
    x = np.random.default_rng(22).standard_normal(2**22).astype(np.float32)
    sums = set()
    for threads in (1, 2, 4, 8):
        monkeypatch.setenv("THREADS", str(threads))
        sums.add(Tensor(x).sum().numpy().tobytes())
    assert len(sums) == 1
    assert abs(np.frombuffer(sums.pop(), np.float32)[0] - np.sum(x, dtype=np.float64)) < 1e-3


# ---- along one axis, keepdim, mean, backward ----
@pytest.mark.parametrize("device", ["C", "NUMPY", "LLVM"])
@pytest.mark.parametrize("shape, axis", [((3, 2**20), 1), ((2**20, 3), 0), ((5, 2**19 + 7), 1),
                                         ((2**19 + 7, 5), 0)])
def test_a_long_axis_next_to_a_short_one(device: str, shape: tuple[int, int], axis: int) -> None:
    """One accumulator over 2^20 positive values is off by about 1e-5 relative; blocks by about 1e-7."""
    need(device)
    x = np.random.default_rng(1).random(shape, dtype=np.float32)
    exact = np.sum(x, axis=axis, dtype=np.float64)
    for keepdim in (False, True):
        got = Tensor(x, device=device).sum(axis, keepdim=keepdim).numpy()
        assert got.shape == np.sum(x, axis=axis, keepdims=keepdim).shape
        np.testing.assert_allclose(got.reshape(-1), exact, rtol=1e-6)
    np.testing.assert_allclose(Tensor(x, device=device).mean(axis).numpy(), exact / shape[axis], rtol=1e-6)
    np.testing.assert_allclose(Tensor(x, device=device).sum(1 - axis).numpy(),
                               np.sum(x, axis=1 - axis, dtype=np.float64), rtol=1e-6)


def test_sum_backward_is_unaffected() -> None:
    x = np.random.default_rng(2).random((4, 2**18), dtype=np.float32)
    w = np.random.default_rng(3).random((4, 2**18), dtype=np.float32)
    a, b = Tensor(x, requires_grad=True), Tensor(w, requires_grad=True)
    (a * b).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), w)
    c = Tensor(x, requires_grad=True)
    c.mean(1).sum().backward()
    np.testing.assert_allclose(c.grad.numpy(), np.full(x.shape, 1 / 2**18, np.float32))


# ---- the interpreter and the emulator, with small blocks ----
@pytest.mark.parametrize("device", ["PYTHON", "C", "NEON"])
def test_small_blocks_on_every_renderer(device: str, small_blocks, monkeypatch: pytest.MonkeyPatch) -> None:
    """With blocks of 16 and levels of 4, rows of 1000 values (padded to 1024) run through four
    levels (PYTHON as written and with opts); the results agree with float64 and do not depend on
    THREADS."""
    need(device)
    x = np.random.default_rng(4).random((3, 1000), dtype=np.float32)
    assert AxisKind.BLOCK in kernel_of(Tensor(x).sum()).kinds
    results = set()
    for threads in (1, 2):
        monkeypatch.setenv("THREADS", str(threads))
        total = Tensor(x, device=device).sum().numpy()
        np.testing.assert_allclose(total, np.sum(x, dtype=np.float64), rtol=1e-6)
        results.add(total.tobytes())
        np.testing.assert_allclose(Tensor(x, device=device).sum(1).numpy(),
                                   np.sum(x, axis=1, dtype=np.float64), rtol=1e-6)
    assert len(results) == 1
    if device == "PYTHON":
        monkeypatch.setenv("NOOPT", "1")
        total = Tensor(x, device=device).sum().numpy()
        np.testing.assert_allclose(total, np.sum(x, dtype=np.float64), rtol=1e-6)


def test_noopt_sums_in_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """The kernel as written (no opts) has the blocks too: they are part of the Kernel, not an opt."""
    monkeypatch.setenv("NOOPT", "1")
    assert Tensor.ones(30_000_000).sum().numpy() == 3e7


def test_threads_share_the_outermost_level_and_nothing_else() -> None:
    """THREAD on a long sum takes the outermost BLOCK loop as it is (no split by the thread count);
    on any other axis of it, it is refused with a clear error."""
    k = kernel_of(Tensor.ones(2**22).sum())
    assert Opt(OptOps.THREAD, 0, 3) in candidate_opts(k, threads=3)
    apply_opt(k, Opt(OptOps.THREAD, 0, 3))
    assert k.full_shape == (64, 16, 4096) and k.kinds[0] is AxisKind.THREAD and k.threads == 3
    other = kernel_of(Tensor.ones(2**22).sum())
    with pytest.raises(OptError, match="outermost BLOCK loop"):
        apply_opt(other, Opt(OptOps.THREAD, 2, 2))
