"""The GPU renderers (OpenCL C and CUDA) and the GPU device (OpenCL through pyopencl; PoCL on a CPU).

The renderer tests need nothing installed: they check the source text. The device tests build and
run kernels, hand-built UOp lists among them (a workgroup sum through shared memory, with a barrier
and one thread combining), against numpy; they skip, saying why, where pyopencl or an OpenCL
platform is missing. The op suite runs on GPU through tests/test_ops.py's device fixture.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

from tinyedu import Device, Tensor
from tinyedu.codegen.launch import launch_dims
from tinyedu.core.dtype import DType, dtypes
from tinyedu.core.ops import BinaryOps, UnaryOps
from tinyedu.core.uops import UOp, UOpBuilder, UOps
from tinyedu.launch import LaunchDims
from tinyedu.renderer.cstyle import render_c
from tinyedu.renderer.cuda import render_cuda
from tinyedu.renderer.llvmir import render_llvm
from tinyedu.renderer.opencl import render_opencl
from tinyedu.runtime import ops_gpu
from tinyedu.runtime.device import Buffer, DeviceUnavailable
from tinyedu.runtime.toolchain import CompileError


@pytest.fixture(scope="module")
def gpu():
    try:
        return Device["GPU"]
    except DeviceUnavailable as missing:
        pytest.skip(str(missing))


# ---- hand-built kernels ----
def elementwise(n: int, op=UnaryOps.EXP2, dtype: DType = dtypes.float32, index_dtype: DType = dtypes.int32,
                offset: int = 0) -> list[UOp]:
    """data0[i] = op(data1[i + offset]) for i < n, one loop (a CPU-style kernel)."""
    b = UOpBuilder(index_dtype)
    out, x = (b.emit(UOps.DEFINE_GLOBAL, dtype, (), k) for k in (0, 1))
    i = b.open_range("gidx0", n)
    value = b.emit(UOps.LOAD, dtype, (x, b.alu(BinaryOps.ADD, i, b.const(offset, index_dtype))))
    b.emit(UOps.STORE, None, (out, i, b.alu(op, value)), hoist=False)
    b.close_range()
    return b.uops


def row_sum(rows: int, n: int, dtype: DType = dtypes.float32) -> list[UOp]:
    """data0[r] = sum of row r of data1, one thread doing every row."""
    b = UOpBuilder()
    out, x = (b.emit(UOps.DEFINE_GLOBAL, dtype, (), k) for k in (0, 1))
    r = b.open_range("gidx0", rows)
    acc = b.define_acc(0.0, dtype)
    k = b.open_range("ridx0", n)
    index = b.alu(BinaryOps.ADD, b.alu(BinaryOps.MUL, r, b.const(n, dtypes.int32)), k)
    b.assign(acc, b.alu(BinaryOps.ADD, acc, b.emit(UOps.LOAD, dtype, (x, index))))
    b.close_range()
    b.emit(UOps.STORE, None, (out, r, acc), hoist=False)
    b.close_range()
    return b.uops


def padded_copy(n: int, pad: int) -> list[UOp]:
    """data0[i] = data1[i - pad] where 0 <= i - pad < n, else 0: a gated load (n + 2*pad outputs)."""
    b = UOpBuilder()
    out, x = (b.emit(UOps.DEFINE_GLOBAL, dtypes.float32, (), k) for k in (0, 1))
    i = b.open_range("gidx0", n + 2 * pad)
    inside = b.alu(BinaryOps.AND, b.alu(BinaryOps.CMPLT, b.const(pad - 1, dtypes.int32), i),
                   b.alu(BinaryOps.CMPLT, i, b.const(n + pad, dtypes.int32)))
    index = b.alu(BinaryOps.SUB, i, b.const(pad, dtypes.int32))
    value = b.emit(UOps.LOAD, dtypes.float32, (x, index, inside))
    b.emit(UOps.STORE, None, (out, i, value), hoist=False)
    b.close_range()
    return b.uops


def workgroup_sum(rows: int, n: int) -> list[UOp]:
    """One workgroup of n threads per row: each thread puts one element in shared memory, a barrier,
    then thread 0 adds them up and writes the row's sum."""
    b = UOpBuilder()
    out, x = (b.emit(UOps.DEFINE_GLOBAL, dtypes.float32, (), k) for k in (0, 1))
    row, lane = b.special("gid0", rows), b.special("lid0", n)
    shared = b.define_shared(n, dtypes.float32)
    index = b.alu(BinaryOps.ADD, b.alu(BinaryOps.MUL, row, b.const(n, dtypes.int32)), lane)
    b.emit(UOps.STORE, None, (shared, lane, b.emit(UOps.LOAD, dtypes.float32, (x, index))), hoist=False)
    b.barrier()
    b.open_if(b.alu(BinaryOps.CMPEQ, lane, b.const(0, dtypes.int32)))
    acc = b.define_acc(0.0, dtypes.float32)
    k = b.open_range("ridx0", n)
    b.assign(acc, b.alu(BinaryOps.ADD, acc, b.load_shared(shared, k, dtypes.float32)))
    b.close_range()
    b.emit(UOps.STORE, None, (out, row, acc), hoist=False)
    b.close_if()
    return b.uops


def run(gpu, uops: list[UOp], out: tuple[int, DType], *inputs: np.ndarray) -> np.ndarray:
    """Render, build and launch `uops` on the GPU device; the output as a numpy array."""
    program = gpu.runtime("k", gpu.compiler.build(render_opencl("k", uops)), launch_dims(uops))
    buffers = [Buffer("GPU", *out)]
    buffers += [Buffer("GPU", a.size, dtypes.from_numpy(a.dtype)).copyin(a) for a in inputs]
    program(buffers)
    return buffers[0].as_numpy().copy()


# ---- the renderers: source text ----
def test_elementwise_kernel_in_opencl_and_cuda():
    opencl, cuda = render_opencl("E_8", elementwise(8)), render_cuda("E_8", elementwise(8))
    assert "__kernel void E_8(__global float* restrict data0, __global const float* restrict data1)" in opencl
    assert "data0[gidx0] = exp2(val0);" in opencl
    assert 'extern "C" __global__ void E_8(float* __restrict__ data0, const float* __restrict__ data1' in cuda
    assert "data0[gidx0] = exp2f(val0);" in cuda
    assert "#pragma OPENCL FP_CONTRACT OFF" in opencl  # a*b+c is never fused into one rounding


def test_gpu_uops_render_as_each_language_spells_them():
    opencl, cuda = render_opencl("wsum", workgroup_sum(4, 32)), render_cuda("wsum", workgroup_sum(4, 32))
    for line in ("__local float shared0[32];", "int gid0 = (int)get_group_id(0);",
                 "int lid0 = (int)get_local_id(0);", "shared0[lid0] = val0;", "barrier(CLK_LOCAL_MEM_FENCE);",
                 "if (lid0==0) {", "float val1 = shared0[ridx0];", "data0[gid0] = acc0;"):
        assert line in opencl, line
    for line in ("__shared__ float shared0[32];", "int gid0 = blockIdx.x;", "int lid0 = threadIdx.x;",
                 "__syncthreads();", "if (lid0==0) {"):
        assert line in cuda, line
    assert opencl.index("barrier(") < opencl.index("if (lid0==0)") < opencl.index("data0[gid0] = acc0;")


def test_reduce_and_gated_load_render():
    assert "acc0 = acc0+val0;" in render_opencl("r", row_sum(3, 5))
    source = render_opencl("p", padded_copy(5, 2))
    assert "? data1[gidx0-2] : 0.0f" in source


def test_float64_enables_the_extension_in_opencl_only():
    opencl = render_opencl("d", elementwise(4, UnaryOps.SQRT, dtypes.float64))
    assert "#pragma OPENCL EXTENSION cl_khr_fp64 : enable" in opencl and "sqrt(val0)" in opencl
    assert "__global double* restrict data0" in opencl
    cuda = render_cuda("d", elementwise(4, UnaryOps.SQRT, dtypes.float64))
    assert "cl_khr_fp64" not in cuda and "sqrt(val0)" in cuda
    assert "cl_khr_fp64" not in render_opencl("f", elementwise(4))


def test_int64_indices_are_long_in_opencl():
    uops = elementwise(4, UnaryOps.NEG, index_dtype=dtypes.int64, offset=3_000_000_000)
    opencl, cuda = render_opencl("big", uops), render_cuda("big", uops)
    assert "for (long gidx0 = 0; gidx0 < 4; gidx0++)" in opencl and "3000000000L]" in opencl
    assert "long long" not in opencl and "LL" not in opencl
    assert "for (long long gidx0 = 0;" in cuda and "3000000000LL" in cuda


def test_float16_storage_in_each_language():
    uops = elementwise(4, UnaryOps.NEG, dtypes.float16)
    opencl, cuda = render_opencl("h", uops), render_cuda("h", uops)
    assert "__global half* restrict data0" in opencl and "vload_half(gidx0, data1)" in opencl
    assert "vstore_half_rte(" in opencl
    assert "unsigned short* __restrict__ data0" in cuda and "half_to_float(data1[gidx0])" in cuda
    assert "cvt.rn.f16.f32" in cuda  # round to nearest even, by the PTX instruction


def test_cpu_renderers_refuse_gpu_uops():
    with pytest.raises(NotImplementedError, match="C renderer: .* is a GPU UOp.*render it for GPU or CUDA"):
        render_c("wsum", workgroup_sum(2, 4))
    with pytest.raises(NotImplementedError, match="LLVM renderer: .* is a GPU UOp"):
        render_llvm("wsum", workgroup_sum(2, 4))


# ---- the device: hand-built kernels against numpy ----
def test_workgroup_sum_through_shared_memory(gpu):
    x = np.random.default_rng(0).standard_normal((5, 24)).astype(np.float32)
    uops = workgroup_sum(5, 24)
    assert launch_dims(uops) == LaunchDims((5, 1, 1), (24, 1, 1))
    np.testing.assert_allclose(run(gpu, uops, (5, dtypes.float32), x), x.sum(1), rtol=1e-5, atol=1e-5)


def test_reduce_gated_load_float64_and_int64_index(gpu):
    x = np.random.default_rng(1).standard_normal((3, 7)).astype(np.float32)
    sums = run(gpu, row_sum(3, 7), (3, dtypes.float32), x)
    np.testing.assert_allclose(sums, x.sum(1), rtol=1e-5, atol=1e-6)
    y = np.arange(1, 6, dtype=np.float32)
    np.testing.assert_array_equal(run(gpu, padded_copy(5, 2), (9, dtypes.float32), y), np.pad(y, 2))
    d = np.array([2.0, 1e-300, 1e300, np.inf], dtype=np.float64)  # out of float32's range
    roots = run(gpu, elementwise(4, UnaryOps.SQRT, dtypes.float64), (4, dtypes.float64), d)
    np.testing.assert_array_equal(roots, np.sqrt(d))
    w = np.arange(4, dtype=np.float32)  # 64-bit index arithmetic: +2^32 then -2^32 lands on the data
    b = UOpBuilder(dtypes.int64)
    out, x_ = (b.emit(UOps.DEFINE_GLOBAL, dtypes.float32, (), k) for k in (0, 1))
    i = b.open_range("gidx0", 4)
    far = b.alu(BinaryOps.ADD, i, b.const(2**32, dtypes.int64))
    far = b.alu(BinaryOps.ADD, far, b.const(-(2**32), dtypes.int64))
    b.emit(UOps.STORE, None, (out, i, b.emit(UOps.LOAD, dtypes.float32, (x_, far))), hoist=False)
    b.close_range()
    np.testing.assert_array_equal(run(gpu, b.uops, (4, dtypes.float32), w), w)


@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")
def test_float16_rounds_like_numpy(gpu):
    edges = np.array([0.0, -0.0, 1.0 + 2**-11, 1.0 + 3 * 2**-11, 65504.0, 65520.0, 6e-8, 3e-8, 1e-5, -np.inf,
                      np.nan, 2.0**-24 * 1.5], dtype=np.float32)
    out = run(gpu, elementwise(edges.size, UnaryOps.NEG, dtypes.float16), (edges.size, dtypes.float16),
              edges.astype(np.float16))
    np.testing.assert_array_equal(out, -edges.astype(np.float16))
    as_half = Tensor(edges, device="GPU").half().float().numpy()  # round_float16: a cast in a kernel
    np.testing.assert_array_equal(as_half, edges.astype(np.float16).astype(np.float32))


# ---- the device: memory, launches, errors ----
def test_device_copies_only_what_changed(gpu, monkeypatch: pytest.MonkeyPatch):
    uploads, downloads = [], []
    upload, download = ops_gpu.CLMemory.upload, ops_gpu.CLMemory.download
    monkeypatch.setattr(ops_gpu.CLMemory, "upload",
                        lambda self, host: (uploads.append(1), upload(self, host)))
    monkeypatch.setattr(ops_gpu.CLMemory, "download",
                        lambda self, host: (downloads.append(1), download(self, host)))
    uops = elementwise(6, UnaryOps.NEG)
    program = gpu.runtime("k", gpu.compiler.build(render_opencl("k", uops)), None)
    out, x = Buffer("GPU", 6, dtypes.float32), Buffer("GPU", 6, dtypes.float32).copyin(np.arange(6.0))
    program([out, x])
    program([out, x])
    assert len(uploads) == 2  # each buffer once: the second launch copies nothing
    np.testing.assert_array_equal(out.as_numpy(), -np.arange(6.0))
    np.testing.assert_array_equal(out.as_numpy(), -np.arange(6.0))
    assert len(downloads) == 1
    x.copyin(np.ones(6))
    program([out, x])
    assert len(uploads) == 4  # the changed input, and the output (as_numpy() may have written it)
    np.testing.assert_array_equal(out.as_numpy(), -np.ones(6))


def test_launch_limits_and_compile_errors_are_clear(gpu):
    uops = workgroup_sum(1, 4)
    binary = gpu.compiler.build(render_opencl("k", uops))
    too_many = LaunchDims((1, 1, 1), (gpu.max_workgroup_size * 2, 1, 1))
    with pytest.raises(ValueError, match="threads per workgroup.*at most"):
        gpu.runtime("k", binary, too_many)
    with pytest.raises(CompileError, match=r"(?s)rejected this kernel.*   1  __kernel.*build log"):
        gpu.compiler.build("__kernel void k(__global float* d) { d[0] = undefined_name; }")
    assert gpu.vector_width == 1 and gpu.threads() == 1 and gpu.local_memory_bytes > 0 and gpu.warp_size >= 1


def test_cl_is_an_alias_of_gpu():
    assert Device.canonicalize("cl") == Device.canonicalize("CL:0") == "GPU"


def test_missing_pyopencl_says_what_to_install(monkeypatch: pytest.MonkeyPatch):
    ops_gpu.opencl.cache_clear()
    monkeypatch.setitem(sys.modules, "pyopencl", None)  # `import pyopencl` now fails
    try:
        with pytest.raises(DeviceUnavailable, match="pip install pyopencl.*pocl-opencl-icd"):
            ops_gpu.opencl()
    finally:
        ops_gpu.opencl.cache_clear()


def test_signed_data_arithmetic_wraps_like_numpy(gpu):
    """OpenCL C has no -fwrapv: int32/int64 data go through unsigned arithmetic (index math stays plain)."""
    edges = {dtypes.int32: [2**31 - 1, -2**31, -1, 0], dtypes.int64: [2**63 - 1, -2**63, -1, 0]}
    with np.errstate(over="ignore"):
        for dtype, values in edges.items():
            x = np.array(values, dtype=dtype.np)
            t = Tensor(x, device="GPU")
            np.testing.assert_array_equal((t + 1).numpy(), x + 1)
            np.testing.assert_array_equal((t * 3 - 5).numpy(), x * 3 - 5)
            np.testing.assert_array_equal((-t).numpy(), -x)
    source = render_opencl("E_4", elementwise(4, UnaryOps.NEG, dtypes.int32))
    assert "data0[gidx0] = (int)(0u-(unsigned int)val0);" in source and "for (int gidx0 = 0;" in source
