"""The NEON and LLVM devices: semantics at the edges, every opt, what the sources look like, the qemu
harness (start, death, restart, bounded loads) and clear errors when a tool is missing.

The op suite (test_ops.py) and the differential test (test_differential.py) run on NEON and LLVM
too; this file checks what is particular to them. Every result is compared with the NUMPY oracle.
A test of a device this machine cannot run (no aarch64 cross compiler or qemu-user, no llvmlite)
is skipped with the reason and the install command.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from tinyedu import Device, Tensor
from tinyedu.codegen import heuristics
from tinyedu.codegen.kernel import Kernel
from tinyedu.codegen.linearizer import linearize
from tinyedu.codegen.opts import Opt, apply_opts
from tinyedu.core.dtype import dtypes
from tinyedu.core.ops import BinaryOps, BufferOps, LazyOp, MemBuffer
from tinyedu.renderer.llvmir import render_llvm
from tinyedu.renderer.neon import render_neon
from tinyedu.runtime import compile_cache
from tinyedu.runtime.device import Buffer, DeviceUnavailable
from tinyedu.runtime.ops_numpy import NumpyProgram
from tinyedu.shape import ShapeTracker

from .test_c_backend import APPROXIMATE, CASES, run_ast
from .test_opts import APPROXIMATE as APPROXIMATE_KERNELS
from .test_opts import CASES as OPT_CASES
from .test_opts import kernel_item, random_walks

REPO = Path(__file__).resolve().parents[1]
BACKENDS = ("NEON", "LLVM")


def require(device: str) -> None:
    try:
        Device[device].check_runnable()  # CUDA compiles anywhere, runs only on a GPU
    except DeviceUnavailable as missing:
        pytest.skip(str(missing))


@pytest.fixture(params=BACKENDS)
def device(request: pytest.FixtureRequest) -> str:
    require(request.param)
    return request.param


def assert_same_bits(got: np.ndarray, expected: np.ndarray, message: str = "") -> None:
    """Equal values, and the same sign of zero. (Not of NaN: IEEE 754 leaves a NaN's sign to the
    hardware; x86 makes -nan where ARM makes +nan.)"""
    np.testing.assert_array_equal(got, expected, err_msg=message)
    if expected.dtype == np.float32:
        numbers = ~np.isnan(expected)
        same_signs = np.array_equal(np.signbit(got[numbers]), np.signbit(expected[numbers]))
        assert same_signs, f"-0.0 and 0.0 differ: {message}"


# ---- semantics: every (op, dtype) at its edge values, exactly as NUMPY ----
@pytest.mark.parametrize("name, make", CASES, ids=[name for name, _ in CASES])
def test_edge_values_match_numpy(device: str, name: str, make):
    ast, inputs = make()
    expected = run_ast("NUMPY", ast, inputs)
    got = run_ast(device, ast, inputs)
    if name.split("-")[0] in APPROXIMATE:
        np.testing.assert_allclose(got, expected, rtol=2e-7, atol=0, equal_nan=True)
    else:
        assert_same_bits(got, expected, name)


def test_int_min_division(device: str):
    """x/0 is 0 and INT_MIN / -1 wraps to INT_MIN instead of trapping (SIGFPE on x86, not on ARM)."""
    a = np.array([-2**31, -2**31, -2**31, -2**31, 1, 7], np.int32)
    b = np.array([2, -1, 3, 0, -2**31, -2**31], np.int32)
    st = ShapeTracker.from_shape((len(a),))
    for op, expected in ((BinaryOps.DIV, [-2**30, -2**31, -715827882, 0, 0, 0]),
                         (BinaryOps.MOD, [0, 0, -2, 0, 1, 7])):
        leaves = tuple(LazyOp(BufferOps.LOAD, (), MemBuffer(i, dtypes.int32, st)) for i in (1, 2))
        ast = LazyOp(BufferOps.STORE, (LazyOp(op, leaves),), MemBuffer(0, dtypes.int32, st))
        assert run_ast(device, ast, [a, b]).tolist() == expected


# ---- every opt, on NEON and LLVM, against NUMPY ----
def run_with_opts(item, device: str, opts: list[Opt]) -> np.ndarray:
    """Lower one kernel by hand with these opts, for this device's vector width, and run it."""
    out = Buffer(device, int(np.prod(item.out.shape)), item.out.dtype)
    buffers = [out, *(x.realized for x in item.inputs)]
    if device == "NUMPY":
        NumpyProgram(item.ast)(buffers)
        return out.as_numpy().copy()
    backend = Device[device]
    kernel = apply_opts(Kernel(item.ast), opts)
    source = backend.renderer(kernel.name, linearize(kernel, backend.vector_width))
    backend.runtime(kernel.name, backend.compiler.build(source))(buffers)
    return out.as_numpy().copy()


def check_opts(name: str, device: str, opts: list[Opt]) -> None:
    item = kernel_item(name)
    expected = run_with_opts(item, "NUMPY", [])
    got = run_with_opts(item, device, opts)
    exact = Kernel(item.ast).reduceop is None and name not in APPROXIMATE_KERNELS
    if exact:  # elementwise: vectors compute exactly what scalars do
        assert_same_bits(got, expected, f"{name} on {device} with {opts}")
    else:
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5, equal_nan=True,
                                   err_msg=f"{name} on {device} with {opts}")


@pytest.mark.parametrize("name", list(OPT_CASES))
def test_random_opts_match_numpy(device: str, name: str):
    """Random walks through every opt that applies (UPCAST, UNROLL, THREAD, SWAP, TILE, PACK)."""
    for opts in random_walks(Kernel(kernel_item(name).ast), seed=len(name), walks=3, threads=2):
        check_opts(name, device, opts)


@pytest.mark.parametrize("name", list(OPT_CASES))
def test_heuristic_opts_match_numpy(device: str, name: str, monkeypatch: pytest.MonkeyPatch):
    """What the heuristics choose for this device (its vector width and threads), even on these
    small kernels (the size thresholds are lowered)."""
    monkeypatch.setattr(heuristics, "SMALL_KERNEL", 0)
    monkeypatch.setattr(heuristics, "THREAD_MIN_WORK", 0)
    backend = Device[device]
    opts = heuristics.hand_coded_optimizations(Kernel(kernel_item(name).ast), backend.vector_width, 2)
    check_opts(name, device, opts)


# ---- NEON: the source and the harness ----
def vector_kernel(opts: list[Opt]) -> tuple[Kernel, list]:
    item = kernel_item("sum rows")  # (6, 32) summed along rows
    kernel = apply_opts(Kernel(item.ast), opts)
    return kernel, linearize(kernel, 4)


def test_neon_source_uses_intrinsics_for_vectors():
    from tinyedu.codegen.opts import OptOps

    kernel, uops = vector_kernel([Opt(OptOps.UNROLL, 1, 4)])
    source = render_neon(kernel.name, uops)
    for intrinsic in ("#include <arm_neon.h>", "float32x4_t", "vld1q_f32(", "vaddq_f32(", "vaddvq_f32("):
        assert intrinsic in source, f"{intrinsic} missing from\n{source}"
    assert "floatx4" not in source and "__attribute__" not in source  # no GCC vector extensions
    assert f"void {kernel.name}_entry(void** args)" in source


def test_neon_scalar_source_is_the_c_source():
    item = kernel_item("chain")
    kernel = Kernel(item.ast)
    uops = linearize(kernel, 4)
    from tinyedu.renderer.cstyle import render_c

    neon = render_neon(kernel.name, uops)
    assert "arm_neon.h" not in neon  # including it costs the compiler 0.15 s
    assert neon.startswith(render_c(kernel.name, uops).rsplit("}", 1)[0])


def test_neon_refuses_vectors_wider_than_a_register():
    from tinyedu.codegen.opts import OptOps

    kernel, _ = vector_kernel([Opt(OptOps.UNROLL, 1, 8)])
    with pytest.raises(NotImplementedError, match="NEON vectors are 2 or 4 lanes"):
        render_neon(kernel.name, linearize(kernel, 8))


def test_neon_bool_sum_is_not_miscompiled():
    """GCC 12's SLP vectorizer for aarch64 turns `sum += (int)(x != -100)` into a sum of -1 masks
    under -fwrapv; the NEON device compiles without auto-vectorization, so this must be 8."""
    require("NEON")
    x = Tensor(np.arange(8, dtype=np.int32).reshape(2, 2, 2), device="NEON")
    assert (x != -100).sum().item() == 8


def neon_library(source: str) -> Path:
    return Device["NEON"].compiler.build(source).path()


def test_harness_death_is_a_clear_error_and_it_restarts():
    require("NEON")
    backend = Device["NEON"]
    if backend.native:
        pytest.skip("runs natively on this arm64 machine: there is no harness")
    crash = neon_library("void crash(float* data0) { *(volatile float*)0 = data0[0]; }\n"
                         "void crash_entry(void** args) { crash(args[0]); }\n")
    out = np.zeros(4, np.float32)
    deaths = backend.harness.deaths
    with pytest.raises(RuntimeError, match="killed by signal 11 during `run`.*next call starts a new one"):
        backend.harness.run(backend.load_in_harness(crash, "crash_entry"), crash, "crash_entry", [out])
    assert backend.harness.deaths == deaths + 1
    x = Tensor(np.arange(4, dtype=np.float32), device="NEON")
    np.testing.assert_array_equal((x * 2).numpy(), [0, 2, 4, 6])  # a new harness runs it


def test_harness_reports_a_bad_library():
    require("NEON")
    backend = Device["NEON"]
    if backend.native:
        pytest.skip("runs natively on this arm64 machine: there is no harness")
    with pytest.raises(RuntimeError, match="dlopen"):
        backend.load_in_harness(Path("/nonexistent/kernel.so"), "k_entry")


def test_loaded_kernels_are_bounded(device: str, monkeypatch: pytest.MonkeyPatch):
    """With at most 3 loaded, 8 distinct kernels evict (dlclose / drop) and reload, with right answers."""
    monkeypatch.setattr(compile_cache, "MAX_LOADED", 3)
    backend = Device[device]
    backend.loaded.clear()
    x = Tensor(np.arange(6, dtype=np.float32), device=device).realize()
    for _ in range(2):  # the second round reloads what the first evicted
        for k in range(8):
            np.testing.assert_array_equal((x * (k + 0.5)).numpy(), np.arange(6, dtype=np.float32) * (k + 0.5))
            assert len(backend.loaded) <= 3
    assert backend.loaded.evictions >= 8


# ---- LLVM: the IR ----
def test_llvm_ir_has_phi_nodes_for_loops_and_accumulators():
    item = kernel_item("sum rows")
    kernel = Kernel(item.ast)
    ir = render_llvm(kernel.name, linearize(kernel))
    assert "%gidx0 = phi i32 [ 0, %entry ], [ %gidx0.next, %ridx0.exit ]" in ir
    assert "%acc0.ridx0 = phi float [ 0.0, %gidx0.body ], [ %alu" in ir
    assert "br i1 %ridx0.more, label %ridx0.body, label %ridx0.exit" in ir


def test_llvm_gated_load_is_a_branch_around_the_load():
    item = kernel_item("padded")
    kernel = Kernel(item.ast)
    ir = render_llvm(kernel.name, linearize(kernel))
    assert "br i1 %" in ir and ".read:" in ir and ".done:" in ir
    read_block = ir.split(".read:")[1].split(".done:")[0]
    assert "load float" in read_block  # the load happens only on the branch where the gate is true
    assert "select" not in ir.split(".read:")[0].split("\n")[-2]


# ---- the primitives of issue 13 (COS, AND, OR, XOR, the float -> int rule), scalar and vector ----
def test_bitwise_ops_on_int32_lanes_are_vector_instructions():
    """Upcast by 4, AND/OR/XOR on int32 lanes are one vector op each: `&` on intx4 (C), vandq_s32 /
    vorrq_s32 / veorq_s32 (NEON), `and <4 x i32>` (LLVM); every device gives NUMPY's bits."""
    from tinyedu.codegen.opts import OptOps
    from tinyedu.renderer.cstyle import render_c

    item, opts = kernel_item("bitwise"), [Opt(OptOps.UPCAST, 1, 4)]
    kernel = apply_opts(Kernel(item.ast), opts)
    uops = linearize(kernel, 4)
    expected = {render_c: ("typedef int intx4", "&", "|", "^"),
                render_neon: ("vandq_s32(", "vorrq_s32(", "veorq_s32(", "vld1q_s32("),
                render_llvm: ("= and <4 x i32>", "= or <4 x i32>", "= xor <4 x i32>")}
    for render, pieces in expected.items():
        source = render(kernel.name, uops)
        for piece in pieces:
            assert piece in source, f"{piece} missing from\n{source}"
        assert "extractelement" not in source and "vgetq_lane" not in source  # no lane by lane
    for device in BACKENDS:
        require(device)
        check_opts("bitwise", device, opts)


def test_cos_and_float_to_int_render_the_rule_of_every_device():
    """COS is cosf (C, NEON) and @llvm.cos (LLVM); float -> int32 is C's float_to_int32 helper and, in
    LLVM, an fptosi whose result is used only where the value fits (else INT32_MIN); bitwise ops on
    bools are logical (`xor i1`). Upcast, each runs lane by lane on the vector's lanes."""
    from tinyedu.codegen.opts import OptOps

    opts = [Opt(OptOps.UPCAST, 1, 4)]
    for name, neon_pieces, llvm_pieces in (
            ("cos", ("cosf(vgetq_lane_f32(",), ("call float @llvm.cos.f32(float",)),
            ("float to int", ("float_to_int32(", "(unsigned char)float_to_int32("),
             ("fcmp oge float", "fptosi float", "select i1", "i32 -2147483648", "trunc i32"))):
        kernel = apply_opts(Kernel(kernel_item(name).ast), opts)
        uops = linearize(kernel, 4)
        neon, ir = render_neon(kernel.name, uops), render_llvm(kernel.name, uops)
        for piece in neon_pieces:
            assert piece in neon, f"{piece} missing from\n{neon}"
        for piece in llvm_pieces:
            assert piece in ir, f"{piece} missing from\n{ir}"
    a = np.array([True, True, False, False])
    st = ShapeTracker.from_shape((4,))
    loads = tuple(LazyOp(BufferOps.LOAD, (), MemBuffer(i, dtypes.bool, st)) for i in (1, 2))
    b = a[::-1].copy()
    for op, expected in ((BinaryOps.XOR, a ^ b), (BinaryOps.AND, a & b), (BinaryOps.OR, a | b)):
        ast = LazyOp(BufferOps.STORE, (LazyOp(op, loads),), MemBuffer(0, dtypes.bool, st))
        assert f"= {op.name.lower()} i1 " in render_llvm("k", linearize(Kernel(ast)))
        for device in BACKENDS:
            require(device)
            assert run_ast(device, ast, [a, b]).tolist() == expected.tolist()


def test_llvm_compile_error_shows_numbered_ir():
    require("LLVM")
    from tinyedu.runtime.ops_llvm import LLVMCompileError

    with pytest.raises(LLVMCompileError, match=r"(?s)LLVM rejected.*   1  define void @broken.*LLVM says"):
        Device["LLVM"].compiler.build("define void @broken() {\nentry:\n  ret i32 0\n}\n")


def test_debug_levels_show_source_and_disassembly(device: str, monkeypatch: pytest.MonkeyPatch, capsys):
    monkeypatch.setenv("DEBUG", "6")
    x = Tensor(np.arange(96, dtype=np.float32) * 0.5 + 0.25, device=device)  # a fresh kernel: printed
    (x * 3.125).sum().realize()
    out = capsys.readouterr().out
    if device == "NEON":
        assert "void r_96(float* restrict data0" in out and ("fadd" in out or "no aarch64" in out)
    else:
        assert "define void @r_96(ptr noalias %data0" in out and "r_96:" in out  # IR, then assembly


# ---- gated loads never touch memory outside a buffer ----
GUARD_SCRIPT = textwrap.dedent("""
    import mmap, sys, numpy as np
    sys.path.insert(0, {repo!r})
    from tinyedu import Device
    from tinyedu.core.dtype import dtypes
    from tinyedu.engine.lower import lower
    from tinyedu.core.ops import BufferOps, LazyOp, MemBuffer
    from tinyedu.runtime.device import Buffer
    from tinyedu.shape import ShapeTracker

    # 16 floats that end exactly where an unreadable page starts: a read past them is a crash
    page = mmap.PAGESIZE
    memory = mmap.mmap(-1, 2 * page, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    import ctypes
    libc = ctypes.CDLL(None)
    base = ctypes.addressof(ctypes.c_char.from_buffer(memory))
    assert libc.mprotect(ctypes.c_void_p(base + page), page, 0) == 0
    x = np.frombuffer(memory, dtype=np.float32, count=16, offset=page - 64)
    x[:] = np.arange(16)
    st = ShapeTracker.from_shape((16,)).pad(((0, 1000),))   # reads past the end are padding
    load = LazyOp(BufferOps.LOAD, (), MemBuffer(1, dtypes.float32, st))
    ast = LazyOp(BufferOps.STORE, (load,), MemBuffer(0, dtypes.float32, ShapeTracker.from_shape((1016,))))
    out, inp = Buffer({device!r}, 1016, dtypes.float32), Buffer({device!r}, 16, dtypes.float32)
    inp._memory = x
    lower({device!r}, ast).runner([out, inp])
    got = out.as_numpy()
    assert got[:16].tolist() == list(range(16)) and not got[16:].any()
    print("no read outside the buffer")
""")


def run_guarded(device: str, script: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "NOOPT": "1"}
    return subprocess.run([sys.executable, "-c", script.format(repo=str(REPO), device=device)],
                          capture_output=True, text=True, env=env, timeout=300)


@pytest.mark.parametrize("name", ["C", "LLVM"])
def test_gated_loads_never_read_past_a_buffer(name: str):
    """A padded read whose invalid indices run 1000 elements past the buffer, which ends at an
    unreadable page: a load executed for padding would crash the process."""
    require(name)
    result = run_guarded(name, GUARD_SCRIPT)
    assert result.returncode == 0 and "no read outside" in result.stdout, result.stderr[-2000:]


def test_the_guard_page_catches_a_read_past_the_buffer():
    """The negative control: the same kernel without padding reads past the end, and crashes."""
    require("LLVM")
    unpadded = GUARD_SCRIPT.replace("ShapeTracker.from_shape((16,)).pad(((0, 1000),))",
                                    "ShapeTracker.from_shape((1016,))")
    assert run_guarded("LLVM", unpadded).returncode == -11  # SIGSEGV


# ---- a missing tool is a clear error, never a crash ----
def test_missing_neon_toolchain_names_the_packages(monkeypatch: pytest.MonkeyPatch):
    from tinyedu.runtime import ops_neon

    monkeypatch.setattr(ops_neon, "is_arm64", lambda: False)
    monkeypatch.setenv("NEON_CC", "no-such-aarch64-gcc")
    ops_neon.neon_toolchain.cache_clear()
    try:
        with pytest.raises(DeviceUnavailable) as error:
            ops_neon.create_device()
    finally:
        ops_neon.neon_toolchain.cache_clear()
    message = str(error.value)
    assert "no-such-aarch64-gcc" in message
    assert "gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user" in message and "Apple silicon" in message


def test_missing_llvmlite_says_how_to_install(monkeypatch: pytest.MonkeyPatch):
    from tinyedu.runtime import ops_llvm

    monkeypatch.setitem(sys.modules, "llvmlite.binding", None)  # import fails as if not installed
    ops_llvm.llvm.cache_clear()
    try:
        with pytest.raises(DeviceUnavailable, match=r"llvmlite.*pip install llvmlite"):
            ops_llvm.create_device()
    finally:
        ops_llvm.llvm.cache_clear()
