"""OpenCL on a CPU (PoCL): its work-items are SIMD lanes of a core, not a GPU's threads
(GPULimits.threads_are_simd_lanes). The GPU device reads that from the device; the plan is the same
register-blocked one, but its shared tiles keep their axis order and every access stays scalar,
because such a device vectorizes across neighbouring work-items and a work-item's own float4 would
be a gather. The answers agree with float64 either way."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from tests.gpu_devices import GPUS
from tinyedu import Tensor
from tinyedu.codegen.gpu import layout_order
from tinyedu.codegen.heuristics import gpu_optimizations
from tinyedu.codegen.kernel import AxisKind, Kernel
from tinyedu.codegen.linearizer import linearize
from tinyedu.codegen.opts import OptOps, apply_opts
from tinyedu.core.ops import LazyOp, LoadOps
from tinyedu.core.uops import UOps, is_vector
from tinyedu.engine.lower import lower
from tinyedu.engine.schedule import create_schedule
from tinyedu.launch import GPULimits
from tinyedu.runtime.device import Device

RNG = np.random.default_rng(0)
A = RNG.standard_normal((256, 256)).astype(np.float32)
B = RNG.standard_normal((256, 256)).astype(np.float32)
ON_A_CPU = GPULimits(threads_are_simd_lanes=True)


def ast_of(t: Tensor) -> LazyOp:
    return [i.ast for i in create_schedule([t.lazydata]) if not isinstance(i.ast.op, LoadOps)][-1]


def planned(limits: GPULimits) -> Kernel:
    kernel = Kernel(ast_of(Tensor(A) @ Tensor(B)))
    kernel.gpu = limits
    return apply_opts(kernel, gpu_optimizations(kernel))


def vector_moves(kernel: Kernel) -> int:
    return sum(1 for u in linearize(kernel) if u.op in (UOps.LOAD, UOps.STORE)
               and is_vector(u.dtype if u.op is UOps.LOAD else u.src[2].dtype))


def test_the_gpu_device_reads_whether_its_work_items_are_cpu_lanes():
    if "GPU" not in GPUS:
        pytest.skip("no OpenCL device")
    gpu = Device["GPU"]
    assert gpu.limits.threads_are_simd_lanes == bool(int(gpu.device.type) & gpu.cl.device_type.CPU)
    assert not GPULimits().threads_are_simd_lanes  # the default (CUDA, WEBGPU, the emulator): a GPU


def test_cpu_lanes_keep_the_register_blocked_plan_with_scalar_accesses_and_tiles_in_axis_order():
    gpu_like, on_cpu = planned(GPULimits()), planned(ON_A_CPU)
    assert on_cpu.applied_opts == gpu_like.applied_opts  # the same plan: 4x4 outputs, shared tiles
    assert [o.amount for o in on_cpu.applied_opts if o.op is OptOps.UPCAST] == [4, 4]
    assert vector_moves(gpu_like) > 0 and vector_moves(on_cpu) == 0
    upcast = on_cpu.axes_of(AxisKind.UPCAST)
    packed = [o.axis for o in on_cpu.applied_opts if o.op is OptOps.PACK]
    assert packed
    tile = [a for a in range(len(on_cpu.full_shape)) if a not in (0,)]  # any tile: the order is kept
    assert layout_order(on_cpu, tile) == tile
    assert layout_order(gpu_like, tile)[-len(upcast):] == upcast  # a GPU: a thread's 4 side by side


@pytest.mark.parametrize("device", GPUS)
def test_the_device_s_own_plan_and_the_other_kind_agree_with_float64(device: str,
                                                                      monkeypatch: pytest.MonkeyPatch):
    """With its own limits and with the other kind of limits (scalar or float4 code): float64's
    answer, and the same float32 bits from both (the same sums in the same order)."""
    ast = ast_of(Tensor(A) @ Tensor(B))
    want, answers = A.astype(np.float64) @ B, []
    backend = Device[device]
    for lanes in (backend.limits.threads_are_simd_lanes, not backend.limits.threads_are_simd_lanes):
        monkeypatch.setattr(backend, "limits", replace(backend.limits, threads_are_simd_lanes=lanes))
        got = (Tensor(A, device=device) @ Tensor(B, device=device)).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=f"{device}, lanes={lanes}")
        assert any(o.op is OptOps.UPCAST for o in lower(device, ast).opts)
        answers.append(got)
    np.testing.assert_array_equal(answers[0], answers[1])
