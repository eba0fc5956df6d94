"""The CUDA device (tinyedu/runtime/ops_cuda.py): NVRTC compiles CUDA C to PTX on every machine; the
driver runs it where there is an NVIDIA GPU.

- Compiling: hand-written kernels (threads, shared memory and barriers, 64-bit indices, doubles), the
  GPU UOps (SPECIAL, DEFINE_SHARED, BARRIER, IF) in the hand-built lists of tests/test_gpu.py, and
  every kernel of a broad sample of Tensor ops (each dtype, reduces, movement, casts, matmul, softmax,
  odd shapes, an index past 2^31), lowered for CUDA and compiled by NVRTC; a bad kernel shows its
  numbered source and NVRTC's log; PTX is cached on disk.
- The driver calls, against a stand-in libcuda behind the same C calling convention (every machine).
- Running (skipped, saying so, where there is no GPU and driver): the hand-written kernels, the GPU
  UOp lists and the op sample against numpy and the NUMPY device (the oracle), and buffers copied to
  the GPU only when they changed.
- Without NVRTC or without a driver: clear errors saying what is missing.
"""

from __future__ import annotations

import ctypes
import functools
from typing import Callable

import numpy as np
import pytest

from tinyedu import Tensor, dtypes
from tinyedu.codegen.kernel import Kernel
from tinyedu.codegen.launch import launch_dims
from tinyedu.codegen.linearizer import linearize
from tinyedu.core.dtype import DType
from tinyedu.core.ops import LazyOp, LoadOps, UnaryOps
from tinyedu.core.uops import UOp
from tinyedu.engine.lower import lower, show
from tinyedu.engine.schedule import create_schedule
from tinyedu.launch import LaunchDims
from tinyedu.renderer.cuda import render_cuda
from tinyedu.runtime import ops_cuda
from tinyedu.runtime.device import Buffer, DeviceUnavailable
from tinyedu.runtime.ops_cuda import CUDACompileError, CUDADevice, check_launch, parse_arch

from .test_gpu import elementwise, padded_copy, row_sum, workgroup_sum  # hand-built GPU UOp lists


def nvrtc_or_skip() -> None:
    try:
        ops_cuda.nvrtc()
    except DeviceUnavailable as missing:
        pytest.skip(str(missing))


def gpu_or_skip() -> None:
    """Skip, saying why, unless an NVIDIA GPU and its driver are here (and NVRTC to compile for it)."""
    nvrtc_or_skip()
    found = ops_cuda.driver_or_reason()
    if isinstance(found, str):
        pytest.skip(f"no GPU to run CUDA kernels on: {found}")


@pytest.fixture(scope="module")
def cuda() -> CUDADevice:
    nvrtc_or_skip()
    return ops_cuda.create_device()


# ---- hand-written kernels ----
ADD = """extern "C" __global__ void add(float* out, const float* a, const float* b) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < 10) out[i] = a[i] + b[i];
}"""

# one block per row: each thread sums a stride of the row, then the block halves the partial sums
ROW_SUM = """extern "C" __global__ void row_sum(float* out, const float* x) {
  __shared__ float partial[256];
  int row = blockIdx.x, t = threadIdx.x;
  float acc = 0.0f;
  for (int i = t; i < 1000; i += 256) acc += x[row * 1000 + i];
  partial[t] = acc;
  __syncthreads();
  for (int half = 128; half > 0; half /= 2) {
    if (t < half) partial[t] += partial[t + half];
    __syncthreads();
  }
  if (t == 0) out[row] = partial[0];
}"""

WIDE = """extern "C" __global__ void wide(double* out, const double* x) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x + 2147483648LL;
  out[i - 2147483648LL] = sqrt(x[i - 2147483648LL]) * 2.0;
}"""


@pytest.mark.parametrize("name, source", [("add", ADD), ("row_sum", ROW_SUM), ("wide", WIDE)])
def test_hand_written_kernels_compile_to_ptx(cuda: CUDADevice, name: str, source: str):
    binary = cuda.compiler.build(source)
    assert binary.has_entry(name) and f".visible .entry {name}(" in binary.text
    assert f".target sm_{cuda.arch}" in binary.text
    if name == "row_sum":
        assert ".shared" in binary.text and "bar.sync" in binary.text
    assert cuda.runtime(name, binary, LaunchDims((3, 1, 1), (4, 1, 1))).disassemble() == binary.text


def test_no_fused_multiply_add(cuda: CUDADevice):
    """--fmad=false: a*b+c stays a rounded multiply and a rounded add, as on the CPU devices."""
    source = 'extern "C" __global__ void mad(float* o, const float* a) { o[0] = a[0] * a[1] + a[2]; }'
    text = cuda.compiler.build(source).text
    assert "fma.rn.f32" not in text and "mul.rn.f32" in text and "add.rn.f32" in text


def test_a_compile_error_shows_the_numbered_source_and_nvrtc_log(cuda: CUDADevice):
    with pytest.raises(CUDACompileError) as error:
        cuda.compiler.build(ADD.replace("a[i] + b[i]", "a[i] + c[i]"))
    message = str(error.value)
    assert "NVRTC" in message and "--fmad=false" in message
    assert '   3    if (i < 10) out[i] = a[i] + c[i];' in message
    assert "--- NVRTC log ---" in message and 'identifier "c" is undefined' in message


def test_ptx_is_cached_on_disk(cuda: CUDADevice, monkeypatch: pytest.MonkeyPatch, tmp_path):
    monkeypatch.setenv("TINYEDU_CACHE", str(tmp_path))
    first = cuda.compiler.build(ADD)
    assert first.path.parent == tmp_path and first.path.suffix == ".ptx"
    monkeypatch.setattr(ops_cuda, "compile_cuda", lambda *_: pytest.fail("compiled again"))
    assert cuda.compiler.build(ADD).text == first.text                       # from the cache
    other_arch = ops_cuda.NVRTCCompiler(cuda.arch + 1)
    assert other_arch.key(ADD) != cuda.compiler.key(ADD)                      # the arch is in the key
    assert ops_cuda.nvrtc_version() in cuda.compiler.key(ADD)                  # and NVRTC's version


def test_a_damaged_cache_entry_is_compiled_again(cuda: CUDADevice, monkeypatch: pytest.MonkeyPatch, tmp_path):
    monkeypatch.setenv("TINYEDU_CACHE", str(tmp_path))
    path = cuda.compiler.build(ADD).path
    path.write_text(path.read_text()[:100])  # truncated
    assert cuda.compiler.build(ADD).has_entry("add")


def test_a_sm_target_gives_ptx_and_a_cubin(monkeypatch: pytest.MonkeyPatch, tmp_path):
    """With a GPU the compiler targets it (sm_XY) and keeps the machine code beside the PTX."""
    nvrtc_or_skip()
    monkeypatch.setenv("TINYEDU_CACHE", str(tmp_path))
    binary = ops_cuda.NVRTCCompiler(ops_cuda.DEFAULT_ARCH, real=True).build(ADD)
    assert binary.has_entry("add") and binary.cubin is not None and binary.cubin.startswith(b"\x7fELF")
    assert binary.image() == binary.cubin


@pytest.mark.parametrize("text, arch", [("86", 86), ("sm_86", 86), ("compute_90", 90), ("8.6", 86)])
def test_cuda_arch_spellings(text: str, arch: int):
    assert parse_arch(text) == arch


def test_a_bad_cuda_arch_is_a_clear_error(monkeypatch: pytest.MonkeyPatch):
    nvrtc_or_skip()
    with pytest.raises(ValueError, match="CUDA_ARCH='ampere'.*such as 86"):
        parse_arch("ampere")
    monkeypatch.setenv("CUDA_ARCH", "11")
    with pytest.raises(ValueError, match=r"CUDA_ARCH=11: NVRTC .* compiles for .*75"):
        ops_cuda.create_device()


def test_launches_over_the_limits_are_clear_errors():
    with pytest.raises(ValueError, match="2048 threads per block .* at most 1024"):
        check_launch("k", LaunchDims((1, 1, 1), (32, 64, 1)), 1024)
    with pytest.raises(ValueError, match="block dimension z must be between 1 and 64"):
        check_launch("k", LaunchDims((1, 1, 1), (1, 1, 128)), 1024)
    with pytest.raises(ValueError, match="grid dimension y must be between 1 and 65535"):
        check_launch("k", LaunchDims((1, 70000, 1), (1, 1, 1)), 1024)


def test_the_limits_without_a_gpu(cuda: CUDADevice):
    if cuda.cuda is None:
        assert (cuda.max_workgroup_size, cuda.local_memory_bytes, cuda.warp_size) == (1024, 48 * 1024, 32)
    assert cuda.vector_width == 1 and cuda.threads() == 1


# ---- a broad sample of Tensor ops, lowered for CUDA ----
def values(shape: tuple[int, ...], dtype: type = np.float32, seed: int = 0) -> np.ndarray:
    """Random values with edge values mixed in (0, -0.0, +-inf, NaN, a denormal, large magnitudes)."""
    rng = np.random.default_rng(seed)
    if dtype in (np.int32,):
        return rng.integers(-1000, 1000, shape).astype(dtype)
    if dtype is np.bool_:
        return rng.random(shape) < 0.5
    x = (rng.standard_normal(shape) * 3).astype(dtype)
    edges = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, 1e4, -1e4], dtype=dtype)
    flat = x.reshape(-1)
    flat[:min(len(edges), flat.size)] = edges[:flat.size]
    return x


def arange_triu(x: Tensor) -> Tensor:
    return (x + Tensor.arange(12, device=x.device).reshape(3, 4)).triu(1)


Make = Callable[[np.ndarray], Tensor]  # numpy values -> a Tensor on the device under test
SAMPLE: dict[str, Callable[[Make], Tensor]] = {
    # unary and composite float32 ops
    "neg_exp_log": lambda t: (-t(values((3, 5)))).exp() + t(values((3, 5), seed=1)).abs().log(),
    "sqrt_sin_exp2_log2": lambda t: t(values((7,))).abs().sqrt().sin() + t(values((7,))).exp2().log2(),
    "reciprocal_relu_sigmoid": lambda t: t(values((4, 4))).reciprocal().relu() + t(values((4, 4))).sigmoid(),
    "tanh_gelu": lambda t: t(values((5, 3))).tanh() * t(values((5, 3), seed=2)).gelu(),
    # binary and ternary
    "add_sub_mul_div": lambda t: (t(values((6,))) - t(values((6,), seed=1))) * 3 / t(values((6,), seed=2)),
    "maximum_pow": lambda t: t(values((3, 4))).maximum(t(values((3, 4), seed=1))) ** 2,
    "compare_where": lambda t: (t(values((5,))) < t(values((5,), seed=1))).where(t(values((5,))), 0.5),
    "mulacc": lambda t: t(values((8,))) * t(values((8,), seed=1)) + t(values((8,), seed=2)),
    # other dtypes
    "float16": lambda t: (t(values((9,), np.float16)) + 1).exp(),
    "float64": lambda t: (t(values((9,), np.float64)) * 1.5).abs().sqrt(),
    "int32": lambda t: (t(values((11,), np.int32)) * 7 + 3) // 5 % 13,
    "int32_shift": lambda t: (t(values((11,), np.int32)) << 2) ^ t(values((11,), np.int32, 1)),
    "bool": lambda t: (t(values((6,), np.bool_)) & ~t(values((6,), np.bool_, 1))).cast(dtypes.float32),
    # casts
    "float_to_int": lambda t: t(np.array([1.5, -2.7, 0, -0.0, 3e3, -1e4, 2.5, 1e-40], np.float32)).cast(
        dtypes.int32),
    "int_to_float16": lambda t: t(values((5,), np.int32)).cast(dtypes.float16),
    "float64_to_float32": lambda t: t(values((5,), np.float64)).cast(dtypes.float32),
    "float_to_bool": lambda t: t(values((5,))).cast(dtypes.bool),
    # reduces
    "sum_axis0": lambda t: t(values((7, 13))).sum(0),
    "sum_axis1_mean": lambda t: t(values((7, 13), seed=3)).mean(1),
    "max_all": lambda t: t(values((3, 5, 7), seed=4)).max(),
    "sum_float16": lambda t: t(values((33,), np.float16, 5)).sum(),
    "sum_int32": lambda t: t(values((5, 9), np.int32)).sum(1),
    "argmax": lambda t: t(values((4, 6), seed=6)).argmax(1),
    # movement
    "permute": lambda t: t(values((2, 3, 4))).permute(2, 0, 1).contiguous(),
    "flip_pad_shrink": lambda t: t(values((5, 6))).flip(1).pad(((1, 2), (0, 1)))[1:5, 2:6] + 1,
    "expand": lambda t: t(values((3, 1))).expand(3, 4) * t(values((1, 4))),
    "strided": lambda t: t(values((9, 8)))[::2, 1::3] * 2,
    # bigger pieces
    "matmul": lambda t: t(values((17, 33))) @ t(values((33, 9), seed=1)),
    "batched_matmul": lambda t: t(values((2, 5, 3))) @ t(values((2, 3, 4), seed=1)),
    "softmax": lambda t: t(values((3, 37))).softmax(-1),
    "log_softmax": lambda t: t(values((2, 1, 19))).log_softmax(-1),
    "one_element": lambda t: t(values((1,))) * 2 + 1,
    "conv2d": lambda t: t(values((1, 2, 7, 6))).conv2d(t(values((3, 2, 3, 3), seed=1)), padding=1),
    "max_pool2d": lambda t: t(values((1, 2, 6, 5))).max_pool2d(2),
    "cumsum": lambda t: t(values((3, 11))).cumsum(1),
    "layer_norm": lambda t: t(values((4, 10))).layer_norm((10,)),
    "var_std": lambda t: t(values((5, 6))).var(1) + t(values((5, 6), seed=1)).std(0).sum(),
    "logsumexp_clamp": lambda t: t(values((3, 8))).logsumexp(1).clamp(-1, 1),
    "gather": lambda t: t(values((4, 5))).gather(1, t(np.array([[0, 4], [1, 1], [3, 2], [4, 0]], np.int32))),
    "erf_sign_atan": lambda t: t(values((7,))).erf() + t(values((7,), seed=1)).sign()
    * t(values((7,), seed=2)).atan(),
    "int64_uint8": lambda t: t(values((6,), np.int32)).cast(dtypes.int64) * 3_000_000_000
    + t(np.arange(6, dtype=np.uint8) * 50).cast(dtypes.int64),
    "bfloat16": lambda t: t(values((6,))).cast(dtypes.bfloat16) * 3,
    "arange_triu": lambda t: arange_triu(t(values((3, 4)))),
}
FINITE = {"matmul", "batched_matmul", "softmax", "log_softmax", "sum_axis0", "sum_axis1_mean", "conv2d",
          "cumsum", "layer_norm", "var_std", "logsumexp_clamp"}  # no edge values: see build


def build(case: str, make: Make) -> Tensor:
    """The sample case; cases that mix edge values into long sums get finite inputs (a NaN would hide
    every other value of the result)."""
    def finite_make(a: np.ndarray) -> Tensor:
        return make(np.nan_to_num(a, nan=0.5, posinf=2.0, neginf=-2.0).clip(-30, 30))
    return SAMPLE[case](finite_make if case in FINITE else make)


def wide_index() -> Tensor:
    """A sum whose index passes 2^31 (40000 * 60000 elements): 64-bit indices (only compiled here)."""
    return Tensor.empty(40000, 60000, dtype=dtypes.uint8).sum(1)


def kernel_asts(t: Tensor) -> list[LazyOp]:
    return [item.ast for item in create_schedule([t.lazydata]) if not isinstance(item.ast.op, LoadOps)]


def cuda_source(ast: LazyOp) -> tuple[str, str]:
    """(name, CUDA C) of one kernel, as the lowering makes it with no opts (one thread runs the loops)."""
    kernel = Kernel(ast)
    return kernel.name, render_cuda(kernel.name, linearize(kernel, max_vector=1))


@functools.cache
def sample_sources() -> tuple[tuple[str, str], ...]:
    tensors = [build(case, Tensor) for case in SAMPLE] + [wide_index()]
    found = {cuda_source(ast) for t in tensors for ast in kernel_asts(t)}
    return tuple(sorted(found))


def test_every_kernel_of_the_op_sample_compiles_to_ptx(cuda: CUDADevice):
    sources = sample_sources()
    assert len(sources) >= len(SAMPLE)
    for name, source in sources:
        binary = cuda.compiler.build(source)
        assert f".visible .entry {name}(" in binary.text, source
    wide = [source for _, source in sources if "long long" in source]
    assert wide, "the 40000 x 60000 sum needs 64-bit indices"
    assert any("unsigned short" in source for _, source in sources)  # float16 storage


def test_the_lowering_gives_cuda_source_and_ptx_without_a_gpu(monkeypatch: pytest.MonkeyPatch, capsys):
    """Device["CUDA"] lowers a kernel anywhere: CUDA C (DEBUG=4) and its PTX (DEBUG=6)."""
    nvrtc_or_skip()
    (ast,) = kernel_asts(Tensor(values((4, 5))).exp().sum(1))
    program = lower("CUDA", ast)
    assert 'extern "C" __global__ void' in program.source
    assert f".visible .entry {program.name}(" in program.runner.disassemble()
    monkeypatch.setenv("DEBUG", "6")
    show(program)
    printed = capsys.readouterr().out
    assert program.source in printed and ".address_size 64" in printed


# ---- what is missing, said clearly ----
def test_running_without_a_driver_says_what_is_missing(cuda: CUDADevice, monkeypatch: pytest.MonkeyPatch):
    """On any machine: as if there were no driver (the real case runs below where that is true)."""
    monkeypatch.setattr(ops_cuda, "driver_or_reason", lambda: "no NVIDIA driver was found (libcuda.so.1 ...)")
    program = cuda.runtime("add", cuda.compiler.build(ADD), LaunchDims((3, 1, 1), (4, 1, 1)))
    buffers = [Buffer("CUDA", 10, dtypes.float32) for _ in range(3)]
    for run in (program.prepare, lambda: program(buffers), cuda.check_runnable):
        with pytest.raises(DeviceUnavailable, match="no NVIDIA driver.*Running needs an NVIDIA GPU and"):
            run()


def test_a_cuda_tensor_without_a_gpu_is_a_clear_error():
    nvrtc_or_skip()
    if not isinstance(ops_cuda.driver_or_reason(), str):
        pytest.skip("this machine has an NVIDIA driver and GPU: the run tests cover it")
    with pytest.raises(DeviceUnavailable, match="cannot run kernels here: .*(no NVIDIA driver|no usable)"):
        (Tensor([1.0, 2.0], device="CUDA") * 2).numpy()


def test_missing_nvrtc_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path):
    """On any machine: as if NVRTC were not installed."""
    monkeypatch.setenv("TINYEDU_CACHE", str(tmp_path))
    monkeypatch.setattr(ops_cuda, "nvrtc_candidates", lambda: [str(tmp_path / "libnvrtc.so.12")])
    monkeypatch.setattr(ops_cuda, "nvrtc", functools.cache(ops_cuda.nvrtc.__wrapped__))
    monkeypatch.setattr(ops_cuda, "nvrtc_version", lambda: "unknown")
    compiler = ops_cuda.NVRTCCompiler(ops_cuda.DEFAULT_ARCH)
    with pytest.raises(DeviceUnavailable, match="NVRTC .* was not found; pip install nvidia-cuda-nvrtc-cu12"):
        compiler.build(ADD)


def test_nvrtc_really_missing_is_a_clear_error():
    try:
        ops_cuda.nvrtc()
        pytest.skip("NVRTC is installed here (the test above covers its absence)")
    except DeviceUnavailable:
        pass
    with pytest.raises(DeviceUnavailable, match="pip install nvidia-cuda-nvrtc-cu12"):
        ops_cuda.create_device().compiler.build(ADD)


# ---- running on a GPU (each test skips, saying so, where there is none) ----
def on_gpu(a: np.ndarray) -> Buffer:
    return Buffer("CUDA", a.size, dtypes.from_numpy(a.dtype)).copyin(a)


def test_a_hand_written_kernel_runs_over_a_grid_of_blocks(cuda: CUDADevice):
    gpu_or_skip()
    a, b = values((10,)), values((10,), seed=1)
    out = on_gpu(np.zeros(10, np.float32))
    cuda.run_source("add", ADD, [out, on_gpu(a), on_gpu(b)], LaunchDims((3, 1, 1), (4, 1, 1)))
    np.testing.assert_array_equal(out.as_numpy(), a + b)  # inf - inf and NaN included


def test_shared_memory_and_barriers_run(cuda: CUDADevice):
    gpu_or_skip()
    x = values((5, 1000), seed=2).clip(-100, 100)
    x[~np.isfinite(x)] = 1.0
    out = on_gpu(np.zeros(5, np.float32))
    cuda.run_source("row_sum", ROW_SUM, [out, on_gpu(x)], LaunchDims((5, 1, 1), (256, 1, 1)))
    np.testing.assert_allclose(out.as_numpy(), x.astype(np.float64).sum(1), rtol=1e-5, atol=1e-3)


def test_64_bit_indices_and_doubles_run(cuda: CUDADevice):
    gpu_or_skip()
    x = np.abs(values((64,), np.float64, seed=3))
    out = on_gpu(np.zeros(64, np.float64))
    cuda.run_source("wide", WIDE, [out, on_gpu(x)], LaunchDims((2, 1, 1), (32, 1, 1)))
    np.testing.assert_array_equal(out.as_numpy(), np.sqrt(x) * 2)


def test_buffers_are_copied_only_when_they_changed(cuda: CUDADevice, monkeypatch: pytest.MonkeyPatch):
    gpu_or_skip()
    copies: list[str] = []

    def counted(way: str) -> Callable:
        copy = getattr(ops_cuda.CUDAMemory, way)
        return lambda memory, host: (copies.append(way), copy(memory, host))

    for way in ("upload", "download"):
        monkeypatch.setattr(ops_cuda.CUDAMemory, way, counted(way))
    out, a = on_gpu(np.zeros(10, np.float32)), on_gpu(np.ones(10, np.float32))
    b = on_gpu(np.arange(10, dtype=np.float32))
    program = cuda.runtime("add", cuda.compiler.build(ADD), LaunchDims((3, 1, 1), (4, 1, 1)))
    program([out, a, b])
    assert copies == ["upload"] * 3
    program([out, a, b])                   # nothing changed: nothing copied
    assert copies == ["upload"] * 3
    np.testing.assert_array_equal(out.as_numpy(), np.arange(10) + 1)
    assert copies[3:] == ["download"]
    a.copyin(np.full(10, 2, np.float32))   # an input changed on the host: it goes up again
    program([out, a, b])
    assert copies[4:] == ["upload", "upload"]  # a, and out (as_numpy let the caller write into it)
    np.testing.assert_array_equal(out.as_numpy(), np.arange(10) + 2)


def test_the_limits_and_target_come_from_the_gpu(cuda: CUDADevice):
    gpu_or_skip()
    assert cuda.max_workgroup_size >= 1024 and cuda.warp_size == 32 and cuda.local_memory_bytes >= 48 * 1024
    gpu = cuda.cuda.compute_capability()
    assert cuda.arch <= gpu and cuda.compiler.real == (cuda.arch == gpu)


def oracle(case: str) -> np.ndarray:
    return build(case, lambda a: Tensor(a, device="NUMPY")).numpy()


@pytest.mark.parametrize("case", list(SAMPLE))
def test_the_op_sample_runs_on_the_gpu(case: str):
    """Each sample case on the GPU, through the whole pipeline, against the NUMPY device."""
    gpu_or_skip()
    got, expected = build(case, lambda a: Tensor(a, device="CUDA")).numpy(), oracle(case)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    if got.dtype.kind in "biu":
        np.testing.assert_array_equal(got, expected)
    else:
        tolerance = {np.float16: 2e-3, np.float32: 2e-5, np.float64: 1e-12}[got.dtype.type]
        np.testing.assert_allclose(got, expected, rtol=tolerance, atol=tolerance)


# ---- the driver calls, checked against a stand-in for libcuda (on every machine) ----
class FakeLibcuda:
    """Just enough of libcuda to check how ops_cuda calls it, through the same C calling convention:
    each call is a C function pointer (a ctypes callback) with the argument types ops_cuda declares,
    so the stand-in sees what the real library would: addresses, 64-bit device pointers, ints.
    Memory is numpy arrays at made-up device addresses; a launch of `add` adds like ADD's threads."""

    ATTRIBUTES = {ops_cuda.MAX_THREADS_PER_BLOCK: 1024, ops_cuda.MAX_SHARED_MEMORY_PER_BLOCK: 49152,
                  ops_cuda.WARP_SIZE: 32, ops_cuda.COMPUTE_CAPABILITY_MAJOR: 7,
                  ops_cuda.COMPUTE_CAPABILITY_MINOR: 5}
    NAMES = {2: ctypes.c_char_p(b"CUDA_ERROR_OUT_OF_MEMORY")}

    def __init__(self) -> None:
        self.memory: dict[int, np.ndarray] = {}
        self.launches: list[tuple] = []
        self.fail_allocations = False
        for name, argtypes in ops_cuda.DRIVER_CALLS.items():  # calls not defined below do nothing
            method = getattr(self, "fake_" + name, lambda *args: 0)
            setattr(self, name, ctypes.CFUNCTYPE(ctypes.c_int, *argtypes)(method))

    def fake_cuDeviceGetAttribute(self, value: int, number: int, device: int) -> int:  # noqa: N802
        ctypes.c_int.from_address(value).value = self.ATTRIBUTES[number]
        return 0

    def fake_cuMemAlloc_v2(self, pointer: int, nbytes: int) -> int:  # noqa: N802
        if self.fail_allocations:
            return 2  # CUDA_ERROR_OUT_OF_MEMORY
        address = 4096 * (len(self.memory) + 1)
        self.memory[address] = np.zeros(nbytes, np.uint8)
        ctypes.c_uint64.from_address(pointer).value = address
        return 0

    def fake_cuMemcpyHtoD_v2(self, device: int, host: int, nbytes: int) -> int:  # noqa: N802
        ctypes.memmove(self.memory[device].ctypes.data, host, nbytes)
        return 0

    def fake_cuMemcpyDtoH_v2(self, host: int, device: int, nbytes: int) -> int:  # noqa: N802
        ctypes.memmove(host, self.memory[device].ctypes.data, nbytes)
        return 0

    def fake_cuLaunchKernel(self, function, gx, gy, gz, bx, by, bz, shared, stream, params, extra) -> int:  # noqa: N802
        pointers = (ctypes.c_void_p * 3).from_address(params)   # void** kernelParams: one per argument
        out, a, b = (self.memory[ctypes.c_uint64.from_address(p).value].view(np.float32) for p in pointers)
        threads = min(10, gx * bx)                              # ADD: thread i < 10 writes out[i]
        out[:threads] = (a + b)[:threads]
        self.launches.append(((gx, gy, gz), (bx, by, bz)))
        return 0

    def fake_cuGetErrorName(self, result: int, text: int) -> int:  # noqa: N802
        name = self.NAMES.get(result, ctypes.c_char_p(b"CUDA_ERROR_UNKNOWN"))
        ctypes.c_void_p.from_address(text).value = ctypes.cast(name, ctypes.c_void_p).value
        return 0


@pytest.fixture
def fake_gpu(monkeypatch: pytest.MonkeyPatch) -> tuple[CUDADevice, FakeLibcuda]:
    nvrtc_or_skip()
    library = FakeLibcuda()
    cuda = ops_cuda.CUDADriver(library)  # type: ignore[arg-type]
    monkeypatch.setattr(ops_cuda, "driver_or_reason", lambda: cuda)
    return ops_cuda.create_device(), library


def test_the_driver_calls_against_a_stand_in(fake_gpu: tuple[CUDADevice, FakeLibcuda]):
    cuda, library = fake_gpu
    assert cuda.arch == 75 and cuda.compiler.real and cuda.max_workgroup_size == 1024
    a, b = values((10,)), values((10,), seed=1)
    out = on_gpu(np.zeros(10, np.float32))
    cuda.run_source("add", ADD, [out, on_gpu(a), on_gpu(b)], LaunchDims((3, 1, 1), (4, 1, 1)))
    assert library.launches == [((3, 1, 1), (4, 1, 1))]                     # grid = groups, block = local
    np.testing.assert_array_equal(out.as_numpy(), a + b)                    # pointers in the right order
    cuda.run_source("add", ADD, [out, on_gpu(a), on_gpu(b)])                # no launch dims: one thread
    assert library.launches[-1] == ((1, 1, 1), (1, 1, 1))


def test_a_failed_driver_call_names_the_call_and_the_reason(fake_gpu: tuple[CUDADevice, FakeLibcuda]):
    cuda, library = fake_gpu
    library.fail_allocations = True
    with pytest.raises(ops_cuda.CUDAError, match="cannot allocate 40 bytes on .*cuMemAlloc_v2 failed: "
                                                "CUDA_ERROR_OUT_OF_MEMORY"):
        cuda.run_source("add", ADD, [on_gpu(np.zeros(10, np.float32))] * 3, LaunchDims((3, 1, 1), (4, 1, 1)))


# ---- the GPU UOps (SPECIAL, DEFINE_SHARED, BARRIER, IF), hand-built in tests/test_gpu.py, as CUDA ----
def gpu_uop_kernels() -> dict[str, list[UOp]]:
    return {"workgroup_sum": workgroup_sum(5, 24), "row_sum": row_sum(3, 7), "padded_copy": padded_copy(5, 2),
            "sqrt_float64": elementwise(4, UnaryOps.SQRT, dtypes.float64),
            "neg_float16": elementwise(12, UnaryOps.NEG, dtypes.float16),
            "int64_index": elementwise(4, UnaryOps.EXP2, index_dtype=dtypes.int64)}


def test_gpu_uops_compile_to_ptx(cuda: CUDADevice):
    for name, uops in gpu_uop_kernels().items():
        text = cuda.compiler.build(render_cuda(name, uops)).text
        assert f".visible .entry {name}(" in text
    text = cuda.compiler.build(render_cuda("k", workgroup_sum(5, 24))).text
    assert "%ctaid.x" in text and "%tid.x" in text and ".shared" in text and "bar.sync" in text
    assert "cvt.rn.f16.f32" in cuda.compiler.build(render_cuda("k", gpu_uop_kernels()["neg_float16"])).text


def run_uops(cuda: CUDADevice, uops: list[UOp], out: tuple[int, DType], *inputs: np.ndarray) -> np.ndarray:
    buffers = [Buffer("CUDA", *out)] + [on_gpu(a) for a in inputs]
    cuda.runtime("k", cuda.compiler.build(render_cuda("k", uops)), launch_dims(uops))(buffers)
    return buffers[0].as_numpy().copy()


def test_gpu_uops_run(cuda: CUDADevice):
    gpu_or_skip()
    x = values((5, 24), seed=7).clip(-100, 100)
    x[~np.isfinite(x)] = 0.5
    sums = run_uops(cuda, workgroup_sum(5, 24), (5, dtypes.float32), x)
    np.testing.assert_allclose(sums, x.astype(np.float64).sum(1), rtol=1e-5, atol=1e-4)
    y = np.arange(1, 6, dtype=np.float32)
    np.testing.assert_array_equal(run_uops(cuda, padded_copy(5, 2), (9, dtypes.float32), y), np.pad(y, 2))
    d = np.array([2.0, 1e-300, 1e300, np.inf], dtype=np.float64)
    np.testing.assert_array_equal(run_uops(cuda, gpu_uop_kernels()["sqrt_float64"], (4, dtypes.float64), d),
                                  np.sqrt(d))
    h = np.array([0.0, -0.0, 1.0 + 2**-11, 65504.0, 6e-8, -np.inf, np.nan, 1e-5, 3.0, -2.5, 1.0, 2.0],
                 dtype=np.float16)
    negated = run_uops(cuda, gpu_uop_kernels()["neg_float16"], (12, dtypes.float16), h)
    np.testing.assert_array_equal(negated, -h)
