"""GPU vector loads and stores (tinyedu/codegen/gpu_vectors.py): four aligned neighbouring 4-byte
accesses become one float4 / vec4<f32>, anything unproven stays scalar; every GPU device here and
the PYTHON emulator (lockstep, bounds-checked) give NUMPY's bits, and the emulator counts the
sectors and bank passes of the vector accesses."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from tests.gpu_devices import GPUS
from tinyedu import Tensor
from tinyedu.codegen.gpu_vectors import multiple_of, split_offset
from tinyedu.codegen.opts import Opt, OptOps
from tinyedu.core.dtype import dtypes
from tinyedu.core.ops import BinaryOps, LazyOp, LoadOps
from tinyedu.core.uops import UOp, UOps, VectorDType, is_vector
from tinyedu.engine.lower import lower
from tinyedu.engine.schedule import create_schedule
from tinyedu.runtime.device import Buffer, Device, DeviceUnavailable
from tinyedu.runtime.gpu_counts import bank_passes

RNG = np.random.default_rng(0)
X = RNG.standard_normal((64, 32)).astype(np.float32)
Y = RNG.standard_normal((64, 32)).astype(np.float32)
UPCAST_4 = [Opt(OptOps.UPCAST, 1, 4), Opt(OptOps.GLOBAL, 0, 0), Opt(OptOps.GLOBAL, 1, 0),
            Opt(OptOps.LOCAL, 1, 8)]


@pytest.fixture(autouse=True)
def python_as_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHON_GPU", "1")


@pytest.fixture
def gpu_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    """The GPU device with a GPU's limits even where OpenCL is a CPU's (PoCL, whose work-items are
    SIMD lanes and keep scalar accesses): the tests that read the float4 code a GPU gets."""
    gpu = Device["GPU"]
    monkeypatch.setattr(gpu, "limits", replace(gpu.limits, threads_are_simd_lanes=False))


def ast_of(t: Tensor) -> LazyOp:
    return [i.ast for i in create_schedule([t.lazydata]) if not isinstance(i.ast.op, LoadOps)][-1]


def vector_accesses(uops: list[UOp]) -> dict[int, list[str]]:
    """For each global buffer, the kinds of vector access to it ('LOAD' / 'STORE')."""
    found: dict[int, list[str]] = {}
    for u in uops:
        dtype = u.dtype if u.op is UOps.LOAD else u.src[2].dtype if u.op is UOps.STORE else None
        if dtype is not None and is_vector(dtype) and u.src[0].op is UOps.DEFINE_GLOBAL:
            assert dtype == VectorDType(dtype.scalar, 4)
            found.setdefault(u.src[0].arg, []).append(u.op.name)
    return found


def run(device: str, t: Tensor, opts: list[Opt], *inputs: np.ndarray) -> tuple[np.ndarray, object]:
    """`t`'s kernel on `device` with these opts: its output, and the program."""
    ast = ast_of(t)
    program = lower(device, ast, opts)
    out = Buffer(device, ast.arg.st.size, ast.arg.dtype)
    program.runner([out, *(Buffer(device, x.size, dtypes.from_numpy(x.dtype)).copyin(x.reshape(-1))
                           for x in inputs)])
    return out.as_numpy().copy(), program


def numpy_answer(t: Tensor, *inputs: np.ndarray) -> np.ndarray:
    return run("NUMPY", t, [], *inputs)[0]


def cases() -> dict[str, tuple[Tensor, tuple[np.ndarray, ...], dict[int, list[str]]]]:
    """name -> (tensor, inputs, the vector accesses expected) for kernels of full shape (64, 32)."""
    xi = (X * 100).astype(np.int32)
    wide = RNG.standard_normal((64, 33)).astype(np.float32)
    return {
        "elementwise": (Tensor(X) * 2 + Tensor(Y), (X, Y), {0: ["STORE"], 1: ["LOAD"], 2: ["LOAD"]}),
        "int32": (Tensor(xi) * 3 - Tensor(xi), (xi, xi), {0: ["STORE"], 1: ["LOAD"], 2: ["LOAD"]}),
        # rows of 33 floats, read from column 1 on: row r starts at 33r + 1, a multiple of 4 for no r
        # that the index can prove, so those loads stay scalar; the output is still written 4 at a time
        "offset view": (Tensor(wide)[:, 1:] + 1, (wide,), {0: ["STORE"]}),
        # padded: the lanes of a group are not all real elements (the gate moves with the lane)
        "padded": (Tensor(X[:, 2:30]).pad(((0, 0), (2, 2))) * 2, (np.ascontiguousarray(X[:, 2:30]),),
                   {0: ["STORE"]}),
    }


@pytest.mark.parametrize("name", list(cases()))
def test_the_lockstep_emulator_gives_numpy_s_bits_with_vector_accesses(name: str):
    t, inputs, expected = cases()[name]
    got, program = run("PYTHON", t, UPCAST_4, *inputs)  # (bounds-checked: an overrun is an error)
    np.testing.assert_array_equal(got, numpy_answer(t, *inputs))
    assert vector_accesses(program.uops) == expected


@pytest.mark.parametrize("device", GPUS)
def test_gpu_devices_give_numpy_s_bits_with_vector_accesses(device: str, gpu_threads: None):
    # a GPU's threads (forced on PoCL too, so the float4 code runs here): float4 moves
    for name, (t, inputs, expected) in cases().items():
        got, program = run(device, t, UPCAST_4, *inputs)
        np.testing.assert_array_equal(got, numpy_answer(t, *inputs), err_msg=name)
        assert vector_accesses(program.uops) == expected, name


@pytest.mark.parametrize("device", GPUS)
def test_a_cpu_s_simd_lanes_keep_scalar_accesses(device: str):
    """With the device's own limits: where work-items are a CPU core's SIMD lanes (OpenCL's CPU type,
    PoCL) every access stays scalar (a work-item's float4 would be a gather across lanes); a GPU
    gets its float4s. NUMPY's bits either way."""
    backend = Device[device]
    is_cpu = device == "GPU" and bool(int(backend.device.type) & backend.cl.device_type.CPU)
    assert Device[device].limits.threads_are_simd_lanes == is_cpu
    for name, (t, inputs, expected) in cases().items():
        got, program = run(device, t, UPCAST_4, *inputs)
        np.testing.assert_array_equal(got, numpy_answer(t, *inputs), err_msg=name)
        assert vector_accesses(program.uops) == ({} if is_cpu else expected), name


def test_each_renderer_spells_a_vector_access(gpu_threads: None):
    ast = ast_of(Tensor(X) * 2 + Tensor(Y))
    opencl = lower("GPU", ast, UPCAST_4, compile=False).source
    assert "float4 val0 = vload4(0, data1+" in opencl and "vstore4((float4)(" in opencl
    try:
        cuda = lower("CUDA", ast, UPCAST_4, compile=False).source
    except DeviceUnavailable:
        cuda = None
    if cuda is not None:
        assert "*(const float4*)(data1+" in cuda and "*(float4*)(data0+" in cuda and "make_float4(" in cuda
    wgsl = lower("WEBGPU", ast, UPCAST_4, compile=False).source if "WEBGPU" in GPUS else None
    if wgsl is not None:
        assert "var<storage, read> data1: array<vec4<f32>>" in wgsl and "data1[alu0 / 4]" in wgsl


def test_the_cuda_vector_kernel_compiles_to_ptx():
    try:
        cuda = Device["CUDA"]
        program = lower("CUDA", ast_of(Tensor(X) * 2 + Tensor(Y)), UPCAST_4)
    except DeviceUnavailable as missing:
        pytest.skip(str(missing))
    text = program.runner.disassemble()
    assert "ld.global.v4.f32" in text or "ld.global.nc.v4.f32" in text, text
    assert "st.global.v4.f32" in text
    assert cuda.name == "CUDA"


def test_a_warp_of_float4_loads_moves_whole_sectors():
    """8 threads x 16 bytes per workgroup (one warp each): 128 bytes, 4 sectors, all used."""
    got, program = run("PYTHON", Tensor(X) * 2 + Tensor(Y), UPCAST_4, X, Y)
    traffic = program.runner.traffic
    warps = 64 * 32 // 32  # workgroups of 8 threads, each 4 outputs
    assert traffic.global_requests == 3 * warps  # two loads and one store per warp, no more
    assert traffic.sectors_per_request == 4.0 and traffic.efficiency == 1.0


def test_float4_bank_conflicts_are_counted_per_quarter_warp():
    threads = np.arange(32)
    rows = threads[:, None] * 4 + np.arange(4)  # consecutive float4s: 512 bytes in 4 phases of 128
    assert bank_passes(threads, rows, 4) == (1, 0)
    rows = threads[:, None] * 8 + np.arange(4)  # every other float4: 2 words per bank in each phase
    assert bank_passes(threads, rows, 4) == (1, 4)


def test_alignment_is_proven_or_the_access_stays_scalar():
    b = UOp(UOps.SPECIAL, dtypes.int32, (), ("lid0", 8))
    four, three = UOp(UOps.CONST, dtypes.int32, (), 4), UOp(UOps.CONST, dtypes.int32, (), 3)
    times4 = UOp(UOps.ALU, dtypes.int32, (b, four), BinaryOps.MUL)
    assert multiple_of(times4, 4) and not multiple_of(b, 4)
    plus3 = UOp(UOps.ALU, dtypes.int32, (times4, three), BinaryOps.ADD)
    assert split_offset(plus3) == (times4, 3)
    assert not multiple_of(plus3, 4)
    assert multiple_of(UOp(UOps.ALU, dtypes.int32, (plus3, four), BinaryOps.MUL), 4)


def test_the_register_blocked_matmul_stores_its_rows_4_at_a_time(gpu_threads: None):
    a, b = (RNG.standard_normal((256, 256)).astype(np.float32) for _ in range(2))
    program = lower("GPU", ast_of(Tensor(a) @ Tensor(b)), compile=False)
    assert [o.amount for o in program.opts if o.op is OptOps.UPCAST] == [4, 4]
    assert vector_accesses(program.uops)[0] == ["STORE"] * 4  # 16 outputs: 4 rows of a float4


def test_the_register_blocked_matmul_moves_float4s_in_every_language(gpu_threads: None):
    """The copies into shared memory load float4s, B's tile is stored as float4s, every read of a
    tile is a float4; in WGSL every array is one of vec4 (A's transposed tile written lane by lane)."""
    a, b = (RNG.standard_normal((256, 256)).astype(np.float32) for _ in range(2))
    ast = ast_of(Tensor(a) @ Tensor(b))
    opencl = lower("GPU", ast, compile=False).source
    assert opencl.count("vload4(0, data") == 2 and opencl.count("vload4(0, shared") == 2
    assert opencl.count("vstore4(") == 1 + 4  # B's tile, and the 16 outputs
    if "WEBGPU" in GPUS:
        wgsl = lower("WEBGPU", ast, compile=False).source
        for n in range(3):
            assert f"data{n}: array<vec4<f32>>;" in wgsl
        assert "var<workgroup> shared0: array<vec4<f32>, 272>;" in wgsl  # 16 rows of 64 + 4 floats
        assert "shared0[alu9 / 4][alu9 % 4] = val0.x;" in wgsl


def test_stores_are_merged_only_when_no_other_store_can_overlap():
    """Four stores to base + 0..3 become one; a second store to base + 1 between them (which must
    stay the last write there) or a load of the array between them keeps them apart."""
    from tinyedu.codegen.gpu_vectors import combine_vector_accesses

    out = UOp(UOps.DEFINE_GLOBAL, dtypes.float32, (), 0)
    lid = UOp(UOps.SPECIAL, dtypes.int32, (), ("lid0", 8))
    base = UOp(UOps.ALU, dtypes.int32, (lid, UOp(UOps.CONST, dtypes.int32, (), 4)), BinaryOps.MUL)
    at = [base] + [UOp(UOps.ALU, dtypes.int32, (base, UOp(UOps.CONST, dtypes.int32, (), n)), BinaryOps.ADD)
                   for n in (1, 2, 3)]
    value = UOp(UOps.CONST, dtypes.float32, (), 1.0)
    stores = [UOp(UOps.STORE, None, (out, i, value)) for i in at]
    head = [out, lid, base, *at[1:], value]

    def vector_stores(middle: list[UOp]) -> int:
        uops = combine_vector_accesses(head + stores[:2] + middle + stores[2:])
        return sum(u.op is UOps.STORE and is_vector(u.src[2].dtype) for u in uops)

    assert vector_stores([]) == 1
    two = UOp(UOps.CONST, dtypes.float32, (), 2.0)
    assert vector_stores([two, UOp(UOps.STORE, None, (out, at[1], two))]) == 0
    assert vector_stores([UOp(UOps.LOAD, dtypes.float32, (out, at[3]))]) == 0
    eight = UOp(UOps.ALU, dtypes.int32, (base, UOp(UOps.CONST, dtypes.int32, (), 8)), BinaryOps.ADD)
    assert vector_stores([eight, UOp(UOps.STORE, None, (out, eight, value))]) == 1  # another element
