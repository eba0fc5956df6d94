"""Stage 5 pieces: which vector UOps an opt produces, their C, fused multiply-add bit for bit, the
renderer's inlining rule, aligned buffers, and the lowering steps of the engine."""

from __future__ import annotations

import ctypes
import re
import struct
from fractions import Fraction

import numpy as np
import pytest

from tinyedu import Tensor
from tinyedu.codegen.kernel import Kernel
from tinyedu.codegen.linearizer import linearize
from tinyedu.codegen.opts import Opt, OptOps, apply_opts
from tinyedu.core.dtype import dtypes
from tinyedu.core.ops import BinaryOps, BufferOps, LazyOp, MemBuffer, ReduceOps, UnaryOps
from tinyedu.core.uops import FusedOps, UOps, is_vector
from tinyedu.engine.lower import lower
from tinyedu.renderer.cstyle import render_c
from tinyedu.runtime.device import Buffer
from tinyedu.runtime.ops_c import Compiler
from tinyedu.runtime.ops_python import fused_multiply_add
from tinyedu.shape import ShapeTracker

F32 = dtypes.float32


def load(idx: int, st: ShapeTracker) -> LazyOp:
    return LazyOp(BufferOps.LOAD, (), MemBuffer(idx, F32, st))


def store(value: LazyOp, shape: tuple[int, ...]) -> LazyOp:
    return LazyOp(BufferOps.STORE, (value,), MemBuffer(0, F32, ShapeTracker.from_shape(shape)))


def uops_for(ast: LazyOp, opts: list[Opt]):
    kernel = apply_opts(Kernel(ast), opts)
    return kernel, linearize(kernel)


def test_upcast_of_a_contiguous_axis_is_a_vector_load_and_store():
    st = ShapeTracker.from_shape((4, 32))
    ast = store(LazyOp(BinaryOps.ADD, (load(1, st), load(2, st.permute((0, 1))))), (4, 32))
    kernel, uops = uops_for(ast, [Opt(OptOps.UPCAST, 1, 8)])
    loads = [u for u in uops if u.op is UOps.LOAD]
    stores = [u for u in uops if u.op is UOps.STORE]
    assert {u.dtype.name for u in loads} == {"float32x8"} and len(stores) == 1
    assert stores[0].src[2].dtype.name == "float32x8"
    source = render_c(kernel.name, uops)
    assert "typedef float floatx8 __attribute__((vector_size(32), aligned(4)));" in source
    assert "*(const floatx8*)(data1+" in source and "*(floatx8*)(data0+" in source


def test_a_broadcast_input_is_one_scalar_load_and_a_strided_one_is_gathered():
    # out[i, j] = a[i] * b[j, i] (b read down a column: stride 4 along j)
    a = ShapeTracker.from_shape((4, 1)).expand((4, 8))
    b = ShapeTracker.from_shape((8, 4)).permute((1, 0))
    ast = store(LazyOp(BinaryOps.MUL, (load(1, a), load(2, b))), (4, 8))
    _, uops = uops_for(ast, [Opt(OptOps.UPCAST, 1, 8)])
    by_buffer = {n: [u for u in uops if u.op is UOps.LOAD and u.src[0].arg == n] for n in (1, 2)}
    assert [u.dtype.name for u in by_buffer[1]] == ["float32"]          # stride 0: loaded once ...
    assert any(u.op is UOps.BROADCAST for u in uops)                     # ... and broadcast
    assert [u.dtype.name for u in by_buffer[2]] == ["float32"] * 8      # stride 4: one load per lane
    assert any(u.op is UOps.VECTORIZE and len(u.src) == 8 for u in uops)


def test_a_padded_axis_loads_each_lane_behind_its_own_gate():
    padded = ShapeTracker.from_shape((2, 6)).pad(((0, 0), (1, 1)))  # (2, 8), lanes 0 and 7 are padding
    ast = store(LazyOp(UnaryOps.NEG, (load(1, padded),)), (2, 8))
    _, uops = uops_for(ast, [Opt(OptOps.UPCAST, 1, 8)])
    loads = [u for u in uops if u.op is UOps.LOAD]
    assert len(loads) == 6 and all(not is_vector(u.dtype) for u in loads)  # 2 padding lanes are constants


def test_an_unrolled_vector_reduce_ends_with_a_horizontal_sum():
    ast = store(LazyOp(ReduceOps.SUM, (load(1, ShapeTracker.from_shape((64,))),), (0,)), (1,))
    kernel, uops = uops_for(ast, [Opt(OptOps.UNROLL, 0, 16), Opt(OptOps.UNROLL, 0, 2)])
    accs = [u for u in uops if u.op is UOps.DEFINE_ACC]
    assert [u.dtype.name for u in accs] == ["float32x16"] * 2   # two vector accumulators
    assert sum(u.op is UOps.GEP for u in uops) == 16            # then every lane, summed pairwise
    assert re.search(r"alu\d+\[15\]", render_c(kernel.name, uops))


def test_a_sum_of_products_accumulates_with_mulacc_only_when_optimized():
    a, b = ShapeTracker.from_shape((4, 16)), ShapeTracker.from_shape((4, 16))
    ast = store(LazyOp(ReduceOps.SUM, (LazyOp(BinaryOps.MUL, (load(1, a), load(2, b))),), (1,)), (4, 1))
    _, plain = uops_for(ast, [])
    assert not any(u.arg is FusedOps.MULACC for u in plain)
    kernel, fused = uops_for(ast, [Opt(OptOps.UNROLL, 1, 16)])
    assert [u.dtype.name for u in fused if u.arg is FusedOps.MULACC] == ["float32x16"]
    assert "fma_floatx16(" in render_c(kernel.name, fused)


def test_threads_become_an_openmp_pragma_and_the_partials_a_local_array():
    ast = store(LazyOp(ReduceOps.SUM, (load(1, ShapeTracker.from_shape((64,))),), (0,)), (1,))
    kernel, uops = uops_for(ast, [Opt(OptOps.THREAD, 0, 4)])
    source = render_c(kernel.name, uops)
    assert "#pragma omp parallel for num_threads(4) schedule(guided)" in source
    assert "float local0[4];" in source
    assert "data0[0] = (val1+val2)+(val3+val4);" in source  # the partials, in a fixed order


# ---- fused multiply-add: PYTHON's exact arithmetic against C's fmaf, bit for bit ----
def _float32(bits: int) -> np.float32:
    return np.array([bits], np.uint32).view(np.float32)[0]


def _fma_cases() -> np.ndarray:
    rng = np.random.default_rng(0)
    scales = np.float32(2.0) ** rng.integers(-30, 30, (3, 300))
    random = rng.standard_normal((3, 300)).astype(np.float32) * scales
    one = np.float32(1 + 2**-12)
    tricky = np.array([[one, one, one, 1e30, 3e38, -0.0, 0.0, np.inf, np.nan, 1e-38, 2**-75],
                       [one, -one, one, 1e30, 2.0, 0.0, -0.0, 0.0, 1.0, 1e-38, 2**-75],
                       [-(1 + 2**-11), 1.0, -1.0, -1e30, -3e38, -0.0, -0.0, 1.0, 0.0, 0.0, -2**-149]],
                      np.float32)
    # just below a float32 halfway point: 1 + 2^-23 + 2^-24 - 2^-70 rounds (in float64) to the halfway
    # point, which then rounds to even, up; rounded once, the exact value rounds down
    up, half = np.float32(1 + 2**-23), np.float32(2**-24 * (1 - 2**-23))
    double_rounding = np.array([[up, -up, half], [half, half, -up], [up, -up, up]], np.float32)
    a = np.array([_float32(0x3F800001 + k) for k in range(40)], np.float32)
    near_halfway = np.stack([a, a, -(a * a)]).astype(np.float32)
    return np.concatenate([random, tricky, double_rounding, near_halfway], axis=1).astype(np.float32)


def test_python_fused_multiply_add_is_the_exact_sum_rounded_once_and_matches_c():
    a, b, c = _fma_cases()
    library = Compiler().load("#include <math.h>\nvoid f(float* restrict out, const float* restrict a, "
                              "const float* restrict b, const float* restrict c, int n) {\n"
                              "  for (int i = 0; i < n; i++) out[i] = fmaf(a[i], b[i], c[i]);\n}\n")
    out = np.zeros_like(a)
    library.f(*(ctypes.c_void_p(x.ctypes.data) for x in (out, a, b, c)), ctypes.c_int(len(a)))
    python = np.array([fused_multiply_add(x, y, z) for x, y, z in zip(a, b, c, strict=True)], np.float32)
    nan = np.isnan(out)
    assert np.array_equal(np.isnan(python), nan)
    assert np.array_equal(python[~nan].view(np.uint32), out[~nan].view(np.uint32))
    for x, y, z, got in zip(a, b, c, python, strict=True):
        if np.isfinite([x, y, z]).all() and np.isfinite(got):
            exact = Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z))
            below, above = np.nextafter(got, np.float32(-np.inf)), np.nextafter(got, np.float32(np.inf))
            error = abs(Fraction(float(got)) - exact)
            assert error <= abs(Fraction(float(below)) - exact)
            assert error <= abs(Fraction(float(above)) - exact)


# ---- the renderer ----
def test_a_value_hoisted_out_of_a_loop_is_not_inlined_back_into_it():
    """exp2 of a[i] does not depend on the reduce loop: computed once per row, before the loop."""
    a = ShapeTracker.from_shape((4, 1)).expand((4, 16))
    b = ShapeTracker.from_shape((4, 16))
    product = LazyOp(BinaryOps.MUL, (LazyOp(UnaryOps.EXP2, (load(1, a),)), load(2, b)))
    ast = store(LazyOp(ReduceOps.SUM, (product,), (1,)), (4, 1))
    kernel = Kernel(ast)
    source = render_c(kernel.name, linearize(kernel))
    lines = source.splitlines()
    exp_line = next(i for i, line in enumerate(lines) if "exp2f(" in line)
    loop_line = next(i for i, line in enumerate(lines) if "for (int ridx0" in line)
    assert exp_line < loop_line, source


# ---- buffers and the engine ----
def test_buffers_are_aligned_to_a_cache_line():
    for size in (1, 3, 17, 1000):
        for dtype in (dtypes.float32, dtypes.uint8):
            assert Buffer("C", size, dtype).as_numpy().ctypes.data % 64 == 0


def test_lowering_records_each_step_and_noopt_skips_the_opts(monkeypatch: pytest.MonkeyPatch):
    x = Tensor(np.ones((64, 256), np.float32)).realize()
    from tinyedu.core.ops import LoadOps
    from tinyedu.engine.schedule import create_schedule

    ast = next(i.ast for i in create_schedule([(x * 2).lazydata]) if not isinstance(i.ast.op, LoadOps))
    program = lower("C", ast)
    assert program.opts and set(program.seconds) == {"opts", "linearize", "render", "compile"}
    assert "floatx16" in program.source or "floatx8" in program.source or "floatx4" in program.source
    monkeypatch.setenv("NOOPT", "1")
    plain = lower("C", ast)
    assert plain.opts == [] and "typedef" not in plain.source
    monkeypatch.setenv("DEBUG", "3")


def test_debug_prints_the_opts(monkeypatch: pytest.MonkeyPatch, capsys):
    x = Tensor(np.ones((64, 256), np.float32)).realize()
    monkeypatch.setenv("DEBUG", "3")
    (x * 3).realize()
    out = capsys.readouterr().out
    assert "opts [Opt(UPCAST" in out and "applied opts: [Opt(UPCAST" in out


def test_struct_float_helper_round_trips():
    assert struct.unpack("f", struct.pack("f", float(_float32(0x3F800001))))[0] == float(_float32(0x3F800001))
