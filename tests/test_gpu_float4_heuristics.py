"""float4s from the GPU heuristics (tinyedu/codegen/heuristics.py, `_float4_outputs`): an elementwise
kernel or a reduce along a non-contiguous axis, UPCAST by 4 along its innermost output axis when
gpu_vectors.float4_view proves that every buffer moving along it moves as aligned float4s; none on a
device whose work-items are SIMD lanes, and none where alignment is unproven. Checked bit for bit
against NUMPY (which shares nothing with the code generator) in the PYTHON emulator (lockstep,
bounds-checked) and on WEBGPU (lavapipe), and by the emulator's sector counts."""

from __future__ import annotations

import numpy as np
import pytest

from tinyedu import Tensor
from tinyedu.codegen.gpu_vectors import float4_view
from tinyedu.codegen.heuristics import gpu_optimizations
from tinyedu.codegen.kernel import Kernel
from tinyedu.codegen.opts import Opt, OptOps
from tinyedu.core.dtype import dtypes
from tinyedu.core.ops import LazyOp, LoadOps
from tinyedu.engine.lower import lower
from tinyedu.engine.schedule import create_schedule
from tinyedu.launch import GPULimits
from tinyedu.runtime.device import Buffer, Device, DeviceUnavailable
from tinyedu.shape import ShapeTracker

RNG = np.random.default_rng(0)
X = RNG.standard_normal((64, 256)).astype(np.float32)
Y = RNG.standard_normal((64, 256)).astype(np.float32)
ROW = RNG.standard_normal(256).astype(np.float32)
INTS = RNG.integers(-8, 9, (128, 256)).astype(np.float32)  # sums of these are exact in any order


@pytest.fixture(autouse=True)
def python_as_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHON_GPU", "1")


def ast_of(t: Tensor) -> LazyOp:
    return [i.ast for i in create_schedule([t.lazydata]) if not isinstance(i.ast.op, LoadOps)][-1]


def plan(t: Tensor, limits: GPULimits | None = None) -> list[Opt]:
    kernel = Kernel(ast_of(t))
    kernel.gpu = limits or GPULimits()
    return gpu_optimizations(kernel)


def test_float4_view_proves_alignment_from_the_view():
    flat = ShapeTracker.from_shape((8, 12))
    assert float4_view(flat, 1)
    assert not float4_view(flat, 0)  # stride 12 along axis 0: not neighbours
    assert float4_view(flat.shrink(((0, 8), (4, 12))), 1)  # x[:, 4:]: the offset is a multiple of 4
    assert not float4_view(flat.shrink(((0, 8), (1, 9))), 1)  # x[:, 1:]: every float4 straddles two
    assert not float4_view(ShapeTracker.from_shape((8, 10)).shrink(((0, 8), (0, 8))), 1)  # rows 10 apart
    assert not float4_view(flat.pad(((0, 0), (4, 0))), 1)  # padding gates each lane
    assert float4_view(ShapeTracker.from_shape((1, 3, 4)).expand((2, 3, 4)), 2)  # broadcast


def test_the_heuristics_upcast_an_aligned_elementwise_kernel_first():
    x, y = Tensor(X), Tensor(Y)
    assert plan((x * y + 1).relu())[0] == Opt(OptOps.UPCAST, 1, 4)
    assert plan(x + Tensor(ROW))[0] == Opt(OptOps.UPCAST, 1, 4)  # a broadcast row moves along it too
    assert plan(Tensor(INTS).sum(0))[0] == Opt(OptOps.UPCAST, 0, 4)  # a column reduce of 128 rows
    simd_lanes = GPULimits(threads_are_simd_lanes=True)  # (PoCL: it vectorizes across work-items)
    for t in ((x * y + 1).relu(), x[:, 1:] + 1, x < y, Tensor(X[:, :6]) * 2):  # lanes, unaligned, bool, 6
        limits = simd_lanes if t.shape == (64, 256) and t.dtype == x.dtype else GPULimits()
        assert not any(o.op is OptOps.UPCAST for o in plan(t, limits)), t.shape
    long_columns = Tensor(RNG.standard_normal((512, 256)).astype(np.float32)).sum(0)
    assert not any(o.op is OptOps.UPCAST for o in plan(long_columns))  # GROUPed: its partials stay scalar


def cases() -> dict[str, tuple]:
    """name -> (build(device) -> Tensor, whether the plan has the float4 UPCAST)."""
    def on(a, device):
        return Tensor(a, device=device)
    return {
        "relu(x*y+1)": (lambda d: (on(X, d) * on(Y, d) + 1).relu(), True),
        "x + row": (lambda d: on(X, d) + on(ROW, d), True),
        "x[:, 4:] * 3": (lambda d: on(X, d)[:, 4:] * 3, True),
        "x[:, 1:] - 1 (unaligned)": (lambda d: on(X, d)[:, 1:] - 1, False),
        "int32 x * 3 + 1": (lambda d: on(INTS.astype(np.int32), d) * 3 + 1, True),
        "column sum": (lambda d: on(INTS, d).sum(0), True),
        "column max": (lambda d: on(X, d).max(0), True),
    }


def devices() -> list[str]:
    found = ["PYTHON"]
    try:
        Device["WEBGPU"].check_runnable()
        found.append("WEBGPU")
    except DeviceUnavailable:
        pass
    return found


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("name", list(cases()))
def test_float4_kernels_give_numpy_s_bits(device: str, name: str):
    build, upcast = cases()[name]
    program = lower(device, ast_of(build(device)))
    assert any(o.op is OptOps.UPCAST for o in program.opts) == upcast
    expected = build("NUMPY").numpy()
    assert np.array_equal(build(device).numpy(), expected), name


def test_webgpu_renders_vec4_loads_and_stores():
    """A contiguous elementwise kernel on WEBGPU (its limits as the adapter reports them), as WGSL."""
    if "WEBGPU" not in devices():
        pytest.skip("no WEBGPU device here (tests/test_webgpu.py says what it needs)")
    x, y = Tensor(X, device="WEBGPU"), Tensor(Y, device="WEBGPU")
    source = lower("WEBGPU", ast_of((x * y + 1).relu())).source
    assert "let val0: vec4<f32> = data1[" in source and "let val1: vec4<f32> = data2[" in source
    assert "data0[" in source and "] = vec4<f32>(" in source
    assert "array<vec4<f32>>" in source


def test_the_emulator_counts_a_quarter_of_the_requests():
    """The float4 kernel asks for the same sectors, all used, with a quarter of the warp requests."""
    ast = ast_of((Tensor(X) * Tensor(Y) + 1).relu())
    scalar = [Opt(OptOps.GLOBAL, 0, 0), Opt(OptOps.GLOBAL, 1, 0),
              Opt(OptOps.LOCAL, 0, 16), Opt(OptOps.LOCAL, 1, 16)]
    counts = {}
    for name, opts in (("scalar", scalar), ("float4", None)):  # (None: the heuristics' plan)
        program = lower("PYTHON", ast, opts)
        assert (program.opts[0] == Opt(OptOps.UPCAST, 1, 4)) == (name == "float4")
        buffers = [Buffer("PYTHON", X.size, dtypes.float32)]
        buffers += [Buffer("PYTHON", X.size, dtypes.float32).copyin(a.reshape(-1)) for a in (X, Y)]
        program.runner(buffers)
        counts[name] = program.runner.traffic
    scalar, float4 = counts["scalar"], counts["float4"]
    assert float4.global_sectors == scalar.global_sectors == 3 * X.nbytes // 32
    assert float4.efficiency == scalar.efficiency == 1.0
    assert float4.global_requests * 4 == scalar.global_requests
