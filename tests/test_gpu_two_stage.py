"""Two-stage full reductions on GPU devices (tinyedu/engine/two_stage.py): many workgroups reduce a
slice each into partials, then one workgroup reduces the partials. Checked against numpy in float64
(within float32 summation error) on PYTHON in lockstep, GPU and WEBGPU, at sizes no slice divides;
MAX keeps its NaN and inf; the emulator's counts show every workgroup of stage 1 at work; a CPU
device's kernels are left as they are. Under BEAM the number of workgroups is measured: its
candidates include "no split", the fastest is kept (and cached), and every candidate's result is
exact (sums of small integers, MAX) against numpy."""

from __future__ import annotations

import numpy as np
import pytest

from tests.gpu_devices import GPUS
from tinyedu import Tensor
from tinyedu.codegen.launch import launch_dims
from tinyedu.core.ops import LoadOps
from tinyedu.engine import two_stage
from tinyedu.engine.lower import lower
from tinyedu.engine.realize import run_schedule
from tinyedu.engine.schedule import create_schedule
from tinyedu.engine.two_stage import grid, search_split, split_choices, split_full_reduces, two_stages
from tinyedu.launch import GPULimits
from tinyedu.runtime.device import Buffer, Device


@pytest.fixture(autouse=True)
def python_as_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHON_GPU", "1")


def kernels(t: Tensor) -> list:
    return [i for i in create_schedule([t.lazydata]) if not isinstance(i.ast.op, LoadOps)]


def close_to_float64(got: float, x: np.ndarray, f=lambda v: v) -> None:
    """float32 summation error: a few ulps of sum(|f(x)|) (the float64 sum is the oracle)."""
    exact = f(x.astype(np.float64))
    assert abs(float(got) - exact.sum()) <= 4e-6 * np.abs(exact).sum() + 1e-30, (got, exact.sum())


@pytest.mark.parametrize("n", [1, 2**11, 2**13, 10**6, 2**20 + 7, 2**31])
def test_the_grid_covers_the_input_in_whole_workgroups(n):
    limits = GPULimits()
    split = grid(n, limits)
    if n < 2 * 256 * 16:
        assert split is None  # one workgroup's worth: nothing to split
        return
    groups, length = split
    assert groups * length >= n > (groups - 1) * length  # every slice holds something
    assert length % 256 == 0 and 2 <= groups <= min(256 * 16, limits.max_groups[0])


def test_the_grid_follows_the_device_limits():
    small = GPULimits(max_workgroup_size=64, max_groups=(100, 1, 1))
    groups, length = grid(10**6 + 3, small)
    assert groups <= 100 and length % 64 == 0 and groups * length >= 10**6 + 3


@pytest.mark.parametrize("n", [1, 3, 2**13 + 1])
def test_sum_max_and_fused_ops_on_python_in_lockstep(n):
    x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
    close_to_float64(Tensor(x, device="PYTHON").sum().numpy(), x)
    close_to_float64(Tensor(x, device="PYTHON").exp().sum().numpy(), x, np.exp)
    assert Tensor(x, device="PYTHON").max().numpy() == x.max()
    assert Tensor(x, device="PYTHON").exp().max().numpy() == Tensor(x, device="PYTHON").exp().numpy().max()


@pytest.mark.parametrize("device", GPUS)
@pytest.mark.parametrize("n", [1, 3, 2**20 + 7, 2**22])
def test_sum_max_and_fused_ops_on_gpus(device, n):
    x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
    close_to_float64(Tensor(x, device=device).sum().numpy(), x)
    close_to_float64((Tensor(x, device=device) * 2 + 1).exp().sum().numpy(), x, lambda v: np.exp(v * 2 + 1))
    assert Tensor(x, device=device).max().numpy() == x.max()
    assert (-Tensor(x, device=device)).max().numpy() == (-x).max()  # the padding is -inf, not 0


@pytest.mark.parametrize("device", ["PYTHON", *GPUS])
def test_max_keeps_nan_and_inf(device, monkeypatch):
    # (a size the one-stage kernel can GROUP too: a prime one is one loop, past lavapipe's limit)
    n = 2**13 + 256 if device == "PYTHON" else 2**20 + 256
    x = np.full(n, -np.inf, dtype=np.float32)
    assert Tensor(x, device=device).max().numpy() == -np.inf  # all -inf: the identity is no value
    x[n // 2] = np.inf
    assert Tensor(x, device=device).max().numpy() == np.inf
    x[n - 1] = np.nan  # in the last, padded slice
    two = Tensor(x, device=device).max().numpy()
    monkeypatch.setenv("SPLIT_REDUCE", "0")
    one = Tensor(x, device=device).max().numpy()
    assert np.array_equal(two, one, equal_nan=True)  # whatever the device's MAX does with NaN, unchanged


def test_int_sum_is_exact():
    x = np.arange(2**13 + 5, dtype=np.int32) - 5000
    assert Tensor(x, device="PYTHON").sum().numpy() == x.sum()


def test_a_full_reduce_becomes_two_kernels_and_others_stay_one():
    x = Tensor(np.ones(2**13 + 5, dtype=np.float32), device="PYTHON")
    (item,) = kernels(x.exp().sum().sqrt())
    first, second = two_stages(item, GPULimits())
    groups, length = grid(2**13 + 5, GPULimits())
    assert first.out.shape == (groups,) and second.inputs[0] is first.out
    assert first.inputs == item.inputs and second.out is item.out
    (rows,) = kernels(Tensor(np.ones((4, 8192), dtype=np.float32), device="PYTHON").sum(axis=1))
    assert two_stages(rows, GPULimits()) == [rows]  # four outputs: not a full reduce
    (short,) = kernels(Tensor(np.ones(1000, dtype=np.float32), device="PYTHON").sum())
    assert two_stages(short, GPULimits()) == [short]


def test_a_cpu_device_keeps_its_kernels(monkeypatch):
    monkeypatch.delenv("PYTHON_GPU")  # PYTHON without GPU limits is a CPU device
    items = kernels(Tensor(np.ones(2**16, dtype=np.float32), device="PYTHON").sum())
    assert split_full_reduces(list(items)) == items


def test_the_counts_show_every_workgroup_at_work():
    """One-stage: one workgroup (one barrier executed in all). Stage 1: each of its workgroups
    GROUPs a slice (a barrier each), and its partials are the one-stage result's pieces."""
    n = 2**13 + 256  # (a length the one-stage kernel GROUPs over its one workgroup's 256 threads)
    x = np.random.default_rng(1).standard_normal(n).astype(np.float32)
    (item,) = kernels(Tensor(x, device="PYTHON").sum())
    first, second = two_stages(item, GPULimits())
    groups, _ = grid(n, GPULimits())

    def run(ast, size, inputs):
        program = lower("PYTHON", ast)
        out = Buffer("PYTHON", size, first.out.dtype)
        program.runner([out, *inputs])
        return program, out.as_numpy().copy()

    data = Buffer("PYTHON", n, first.out.dtype).copyin(x)
    one, total = run(item.ast, 1, [data])
    stage1, partials = run(first.ast, groups, [data])
    assert launch_dims(one.uops).groups == (1, 1, 1) and one.runner.traffic.barriers == 1
    assert launch_dims(stage1.uops).groups[0] == groups and stage1.runner.traffic.barriers == groups
    close_to_float64(partials.sum(), x)
    close_to_float64(total[0], x)


@pytest.mark.parametrize("device", GPUS)
def test_views_and_fused_ops_below_the_reduce(device):
    """A transposed, strided or broadcast input, and ops after the reduce (mean's scale)."""
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((1031, 1027)).astype(np.float32), rng.standard_normal(1027).astype(np.float32)
    big, row = Tensor(a, device=device), Tensor(b, device=device)
    close_to_float64(big.T.sum().numpy(), a.T)
    close_to_float64(big[::2, 3:].sum().numpy(), a[::2, 3:])
    close_to_float64((big * row).sum().numpy(), a, lambda v: v * b)
    close_to_float64(big.mean().numpy() * a.size, a)


# ---- BEAM chooses how many workgroups ----
def test_split_choices_follow_the_limits():
    webgpu_like = GPULimits(max_workgroup_size=256, max_groups=(65535, 65535, 65535))
    for limits in (GPULimits(), webgpu_like):
        choices = split_choices(2**20 + 7, limits)
        assert choices[0] == 1 and grid(2**20 + 7, limits)[0] in choices and len(choices) == 4
    small = GPULimits(max_workgroup_size=64, max_groups=(100, 1, 1))
    assert split_choices(10**6, small) == [1, 25, 100]  # four times 100 is past the grid's 100
    assert split_choices(1000, GPULimits()) == [1]  # one workgroup's worth: nothing to choose


def beam_on(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setenv("TINYEDU_CACHE", str(tmp_path))
    monkeypatch.setenv("BEAM", "1")


def test_beam_keeps_the_fastest_split_and_caches_it(monkeypatch, tmp_path):
    """A made-up clock that rewards the most partials (and fails the unsplit kernel): the realizer's
    schedule gets that split, and a second search reads it from the disk."""
    beam_on(monkeypatch, tmp_path)
    x = Tensor(np.ones(2**13 + 256, dtype=np.float32), device="PYTHON").realize()
    (item,) = kernels(x.sum())
    choices = split_choices(2**13 + 256, GPULimits())

    def fake_time(items):
        return np.inf if len(items) == 1 else 1.0 / items[0].out.shape[0]
    monkeypatch.setattr(two_stage, "time_stages", fake_time)
    first, second = split_full_reduces([item])
    assert first.out.shape == (max(choices),) and second.out is item.out
    again = search_split(item, GPULimits(), 1)
    assert again.cached and again.groups == max(choices) and sorted(again.seconds) == choices


def run_variant(item, groups: int, monkeypatch) -> float:
    """The item's result with `groups` partials (1: unsplit), run as the realizer runs it."""
    monkeypatch.setenv("SPLIT_REDUCE", "0")  # (run exactly these kernels)
    monkeypatch.delenv("BEAM")
    run_schedule(two_stages(item, Device[item.out.device].limits, groups))
    monkeypatch.setenv("BEAM", "1")
    monkeypatch.delenv("SPLIT_REDUCE")
    return item.out.realized.as_numpy()[0]


@pytest.mark.parametrize("device", ["PYTHON", *GPUS])
def test_beam_times_split_and_unsplit_and_each_is_exact(device, monkeypatch, tmp_path):
    """Real times on the device: the candidates are no split and several splits, the kept one is the
    fastest, and each candidate that runs sums small integers (exact in any order) and takes MAX
    exactly. (On lavapipe the unsplit MAX of 2**20 + 7 is one thread's loop, past llvmpipe's limit:
    the device refuses it, and the search times it as inf.)"""
    beam_on(monkeypatch, tmp_path)
    n = 2**13 + 256 if device == "PYTHON" else 2**20 + 7
    x = np.random.default_rng(3).integers(-8, 9, n).astype(np.float32)
    t = Tensor(x, device=device).realize()
    cases = [(t.sum(), x.sum())]
    if device != "PYTHON":  # (the emulator is slow: one reduce is enough there)
        cases.append(((-t).max(), (-x).max()))
    for reduced, expected in cases:
        (item,) = kernels(reduced)
        choice = search_split(item, Device[device].limits, 1)
        assert 1 in choice.seconds and len(choice.seconds) >= 3 and np.isfinite(choice.seconds[choice.groups])
        assert choice.groups == min(choice.seconds, key=choice.seconds.get)
        assert all(np.isfinite(seconds) for groups, seconds in choice.seconds.items() if groups > 1)
        for groups in (g for g, seconds in choice.seconds.items() if np.isfinite(seconds)):
            assert run_variant(item, groups, monkeypatch) == expected, groups
