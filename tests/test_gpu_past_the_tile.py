"""The GPU heuristics past the first tile (tinyedu/codegen/heuristics.py, gpu_optimizations): a block
of outputs per thread for a large matmul, and column reductions whose threads read neighbouring
columns; checked against numpy on every GPU device here and, in lockstep, by the emulator's counts."""

from __future__ import annotations

import numpy as np
import pytest

from tests.gpu_devices import GPUS
from tinyedu import Tensor
from tinyedu.codegen.heuristics import gpu_optimizations
from tinyedu.codegen.kernel import Kernel
from tinyedu.codegen.opts import OptOps, apply_opts
from tinyedu.core.dtype import dtypes
from tinyedu.core.ops import LazyOp, LoadOps
from tinyedu.engine.lower import lower
from tinyedu.engine.schedule import create_schedule
from tinyedu.launch import GPULimits
from tinyedu.runtime.device import Buffer, Device, DeviceUnavailable


def ast_of(t: Tensor) -> LazyOp:
    return [i.ast for i in create_schedule([t.lazydata]) if not isinstance(i.ast.op, LoadOps)][-1]


def planned(ast: LazyOp) -> Kernel:
    kernel = Kernel(ast)
    kernel.gpu = GPULimits()
    return apply_opts(kernel, gpu_optimizations(kernel))


RNG = np.random.default_rng(0)
A = RNG.standard_normal((512, 512)).astype(np.float32)
B = RNG.standard_normal((512, 512)).astype(np.float32)


def test_a_512_matmul_gives_each_thread_a_4x4_block_of_outputs():
    kernel = planned(ast_of(Tensor(A) @ Tensor(B)))
    upcasts = [o for o in kernel.applied_opts if o.op is OptOps.UPCAST]
    assert [o.amount for o in upcasts] == [4, 4]
    threads = np.prod(kernel.launch.groups) * kernel.launch.threads_per_group
    assert threads == 512 * 512 // 16  # 16 outputs per thread
    assert any(o.op is OptOps.PACK for o in kernel.applied_opts)  # and still the shared tiles


def test_a_small_matmul_keeps_one_output_per_thread():
    kernel = planned(ast_of(Tensor(A[:64, :64]) @ Tensor(B[:64, :64])))
    assert not any(o.op is OptOps.UPCAST for o in kernel.applied_opts)


@pytest.mark.parametrize("device", GPUS)
def test_the_register_blocked_matmul_gives_numpy_s_answer(device: str):
    got = (Tensor(A, device=device) @ Tensor(B, device=device)).numpy()
    np.testing.assert_allclose(got, A.astype(np.float64) @ B, rtol=1e-4, atol=1e-4)
    program = lower(device, ast_of(Tensor(A, device=device) @ Tensor(B, device=device)))
    assert any(o.op is OptOps.UPCAST for o in program.opts)


def test_a_column_sum_reads_neighbouring_columns(monkeypatch: pytest.MonkeyPatch):
    """sum(0) of a 256 x 256 array: no GROUP of 256 threads each reading a row of the column (4 KB
    apart, a sector per thread, then a 256-step combine by one thread); the threads take neighbouring
    columns, and 4 of them share each column (a 4-step combine)."""
    monkeypatch.setenv("PYTHON_GPU", "1")
    x = RNG.standard_normal((256, 256)).astype(np.float32)
    ast = ast_of(Tensor(x).sum(0))
    program = lower("PYTHON", ast)
    groups = [o for o in program.opts if o.op is OptOps.GROUP]
    assert [o.amount for o in groups] == [4]
    out = Buffer("PYTHON", 256, dtypes.float32)
    program.runner([out, Buffer("PYTHON", x.size, dtypes.float32).copyin(x)])
    np.testing.assert_allclose(out.as_numpy(), x.astype(np.float64).sum(0), rtol=1e-5, atol=1e-5)
    traffic = program.runner.traffic
    assert traffic.sectors_per_request == pytest.approx(4.0, abs=0.05)  # coalesced: 4 sectors per warp
    assert traffic.efficiency == pytest.approx(1.0)
    row = lower("PYTHON", ast_of(Tensor(x).sum(1)))  # a row sum still GROUPs its contiguous reduce
    assert [o.amount for o in row.opts if o.op is OptOps.GROUP] == [256]


@pytest.mark.parametrize("device", GPUS)
def test_column_sums_give_numpy_s_answer(device: str):
    x = RNG.standard_normal((1024, 384)).astype(np.float32)
    got = Tensor(x, device=device).sum(0).numpy()
    np.testing.assert_allclose(got, x.astype(np.float64).sum(0), rtol=1e-4, atol=1e-4)


def beam_devices() -> list[str]:
    """Every GPU device whose limits are known here (CUDA's without a GPU too, from NVRTC's target)."""
    found = []
    for device in ("GPU", "CUDA", "WEBGPU"):
        try:
            if Device[device].limits is not None:
                found.append(device)
        except DeviceUnavailable:
            pass
    return found


@pytest.mark.parametrize("device", beam_devices())
def test_beam_proposes_every_rung_of_the_ladder(device: str):
    """At every step of the register-blocked plan (4 x 4 outputs per thread, so float4 loads and
    stores; 16-wide shared tiles, padded by stage_tile) BEAM's candidates include the next opt, so
    the search can climb to it on every GPU device; and it starts from the heuristics' own plan."""
    from tinyedu.codegen.search import candidate_opts
    from tinyedu.engine.lower import heuristic_opts, new_kernel

    ast = ast_of(Tensor(A) @ Tensor(B))
    backend = Device[device]
    plan = heuristic_opts(new_kernel(ast, backend), backend.vector_width, backend.threads())
    assert [o.op for o in plan].count(OptOps.UPCAST) == 2 and OptOps.PACK in [o.op for o in plan]
    kernel = new_kernel(ast, backend)
    for opt in plan:
        assert opt in candidate_opts(kernel, backend.threads()), (opt, kernel.applied_opts)
        apply_opts(kernel, [opt])
    column = new_kernel(ast_of(Tensor(A).sum(0)), backend)  # the coalesced column reduce's GROUP
    for opt in heuristic_opts(column, backend.vector_width, backend.threads()):
        assert opt in candidate_opts(column, backend.threads()), (opt, column.applied_opts)
        apply_opts(column, [opt])
