"""The PYTHON device running GPU-style UOps (tinyedu/runtime/lockstep.py), on kernels built by hand.

Oracles: numpy (float32 sums in the kernel's own order, so the comparison is exact), and the scalar
interpreter running the same per-element computation as a CPU-style loop (bit for bit). Then the
teaching checks: races on shared memory, barriers only some threads reach, out-of-bounds indices.
"""

from __future__ import annotations

import re
from typing import Callable

import numpy as np
import pytest

from tinyedu.core.dtype import DType, dtypes, to_storage
from tinyedu.core.ops import BinaryOps, TernaryOps, UnaryOps
from tinyedu.core.uops import FusedOps, Loop, UOp, UOpBuilder, UOps, VectorDType
from tinyedu.launch import LaunchDims
from tinyedu.runtime.device import Buffer
from tinyedu.runtime.lockstep import (
    BarrierDivergenceError,
    DivergentLoopError,
    GPUOutOfBoundsError,
    GPURaceError,
)
from tinyedu.runtime.ops_python import PythonProgram

F32, I32 = dtypes.float32, dtypes.int32


def run(uops: list[UOp], out: tuple[int, DType], *inputs: np.ndarray, dtypes_in: list[DType] | None = None):
    """Run a UOp list on the PYTHON device; return the output buffer's contents (storage bits for bf16)."""
    buffers = [Buffer("PYTHON", out[0], out[1])]
    for k, x in enumerate(inputs):
        dtype = dtypes_in[k] if dtypes_in else dtypes.from_numpy(x.dtype)
        buffers.append(Buffer("PYTHON", x.size, dtype).copyin(x))
    PythonProgram(uops)(buffers)
    return buffers[0].as_numpy().copy()


def globals_(b: UOpBuilder, *dtype_list: DType) -> list[UOp]:
    return [b.emit(UOps.DEFINE_GLOBAL, dtype, (), k) for k, dtype in enumerate(dtype_list)]


def thread_index(b: UOpBuilder, groups: int, local: int) -> tuple[UOp, UOp, UOp]:
    """gid0, lid0 and the global index gid0*local + lid0."""
    gid, lid = b.special("gid0", groups), b.special("lid0", local)
    return gid, lid, b.alu(BinaryOps.ADD, b.alu(BinaryOps.MUL, gid, b.const(local, I32)), lid)


def position(uops: list[UOp], op: UOps, nth: int = 0) -> int:
    """The position of the nth UOp of kind `op` in the list."""
    return [i for i, u in enumerate(uops) if u.op is op][nth]


# ---- results ----
def test_elementwise_over_a_grid_matches_numpy():
    groups, local = 16, 64
    b = UOpBuilder()
    out, a, c = globals_(b, F32, F32, F32)
    _, _, i = thread_index(b, groups, local)
    x, y = b.emit(UOps.LOAD, F32, (a, i)), b.emit(UOps.LOAD, F32, (c, i))
    b.emit(UOps.STORE, None, (out, i, b.alu(BinaryOps.ADD, b.alu(BinaryOps.MUL, x, x), y)), hoist=False)
    rng = np.random.default_rng(0)
    xs, ys = rng.standard_normal((2, groups * local), dtype=np.float32)
    got = run(b.uops, (groups * local, F32), xs, ys)
    np.testing.assert_array_equal(got, xs * xs + ys)


def test_two_dimensional_grid_and_workgroup_place_threads_x_fastest():
    """out[row, col] = row * 100 + col, with (gid1, lid1) giving the row and (gid0, lid0) the column."""
    b = UOpBuilder()
    (out,) = globals_(b, I32)
    g0, g1, l0, l1 = b.special("gid0", 3), b.special("gid1", 2), b.special("lid0", 4), b.special("lid1", 5)
    col = b.alu(BinaryOps.ADD, b.alu(BinaryOps.MUL, g0, b.const(4, I32)), l0)
    row = b.alu(BinaryOps.ADD, b.alu(BinaryOps.MUL, g1, b.const(5, I32)), l1)
    value = b.alu(BinaryOps.ADD, b.alu(BinaryOps.MUL, row, b.const(100, I32)), col)
    b.emit(UOps.STORE, None, (out, b.alu(BinaryOps.ADD, b.alu(BinaryOps.MUL, row, b.const(12, I32)), col),
                              value), hoist=False)
    got = run(b.uops, (10 * 12, I32)).reshape(10, 12)
    np.testing.assert_array_equal(got, np.arange(10)[:, None] * 100 + np.arange(12))


def workgroup_sum(groups: int, local: int, barrier: bool = True) -> list[UOp]:
    """Each thread puts its element in shared memory; thread 0 adds them up in order and stores."""
    b = UOpBuilder()
    out, a = globals_(b, F32, F32)
    gid, lid, i = thread_index(b, groups, local)
    shared = b.define_shared(local, F32)
    b.emit(UOps.STORE, None, (shared, lid, b.emit(UOps.LOAD, F32, (a, i))), hoist=False)
    if barrier:
        b.barrier()
    b.open_if(b.alu(BinaryOps.CMPEQ, lid, b.const(0, I32)))
    acc = b.define_acc(0.0, F32)
    j = b.open_range("j", local)
    total = b.assign(acc, b.alu(BinaryOps.ADD, acc, b.load_shared(shared, j, F32)))
    b.close_range()
    b.emit(UOps.STORE, None, (out, gid, total), hoist=False)
    b.close_if()
    return b.uops


def in_order_sums(xs: np.ndarray) -> np.ndarray:
    """Row sums in float32, added left to right (the kernel's order, so the comparison is exact)."""
    total = np.zeros(xs.shape[0], dtype=np.float32)
    for column in xs.T:
        total = total + column
    return total


def test_workgroup_sum_through_shared_memory_matches_numpy():
    xs = np.random.default_rng(1).standard_normal((8, 32), dtype=np.float32)
    got = run(workgroup_sum(8, 32), (8, F32), xs.reshape(-1))
    np.testing.assert_array_equal(got, in_order_sums(xs))
    np.testing.assert_allclose(got, xs.astype(np.float64).sum(axis=1), rtol=1e-5, atol=1e-5)


def tree_sum(groups: int, local: int, barrier_in_loop: bool = True) -> list[UOp]:
    """The classic reduction: `stride` halves each step; threads below it add the element `stride` on."""
    b = UOpBuilder()
    out, a = globals_(b, F32, F32)
    gid, lid, i = thread_index(b, groups, local)
    shared = b.define_shared(local, F32)
    b.emit(UOps.STORE, None, (shared, lid, b.emit(UOps.LOAD, F32, (a, i))), hoist=False)
    b.barrier()
    stride = b.define_acc(local // 2, I32)
    b.open_range("step", local.bit_length() - 1)
    b.open_if(b.alu(BinaryOps.CMPLT, lid, stride))
    mine = b.load_shared(shared, lid, F32)
    theirs = b.load_shared(shared, b.alu(BinaryOps.ADD, lid, stride), F32)
    b.emit(UOps.STORE, None, (shared, lid, b.alu(BinaryOps.ADD, mine, theirs)), hoist=False)
    b.close_if()
    if barrier_in_loop:
        b.barrier()
    b.assign(stride, b.alu(BinaryOps.DIV, stride, b.const(2, I32)))
    b.close_range()
    b.open_if(b.alu(BinaryOps.CMPEQ, lid, b.const(0, I32)))
    b.emit(UOps.STORE, None, (out, gid, b.load_shared(shared, b.const(0, I32), F32)), hoist=False)
    b.close_if()
    return b.uops


def tree_order_sums(xs: np.ndarray) -> np.ndarray:
    while xs.shape[1] > 1:
        half = xs.shape[1] // 2
        xs = xs[:, :half] + xs[:, half:]
    return xs[:, 0]


def test_tree_reduction_with_barriers_in_a_loop_matches_numpy():
    xs = np.random.default_rng(2).standard_normal((4, 64), dtype=np.float32)
    got = run(tree_sum(4, 64), (4, F32), xs.reshape(-1))
    np.testing.assert_array_equal(got, tree_order_sums(xs))
    np.testing.assert_allclose(got, xs.astype(np.float64).sum(axis=1), rtol=1e-5, atol=1e-5)


def test_nested_ifs_and_a_loop_inside_an_if():
    """Threads 16..47 sum k * x over k < 4 (an accumulator per thread); the others store -1."""
    b = UOpBuilder()
    out, a = globals_(b, F32, F32)
    _, lid, i = thread_index(b, 2, 64)
    x = b.emit(UOps.LOAD, F32, (a, i))
    b.emit(UOps.STORE, None, (out, i, b.const(-1.0, F32)), hoist=False)
    b.open_if(b.alu(BinaryOps.CMPLT, lid, b.const(48, I32)))
    b.open_if(b.alu(UnaryOps.NEG, b.alu(BinaryOps.CMPLT, lid, b.const(16, I32))))
    acc = b.define_acc(0.0, F32)
    k = b.open_range("k", 4)
    total = b.assign(acc, b.alu(BinaryOps.ADD, acc, b.alu(BinaryOps.MUL, x, b.emit(UOps.CAST, F32, (k,)))))
    b.close_range()
    b.emit(UOps.STORE, None, (out, i, total), hoist=False)
    b.close_if()
    b.close_if()
    xs = np.random.default_rng(3).standard_normal(128, dtype=np.float32)
    expected = np.full(128, -1.0, dtype=np.float32)
    inside = (np.arange(128) % 64 >= 16) & (np.arange(128) % 64 < 48)
    expected[inside] = ((xs * 0 + xs * 1) + xs * 2 + xs * 3)[inside]
    np.testing.assert_array_equal(run(b.uops, (128, F32), xs), expected)


def test_private_arrays_are_per_thread_and_gated_loads_skip_bad_indices():
    """Each thread writes its own 3-element private array, reads it back reversed; a gated LOAD with
    an index outside the buffer reads 0 and raises nothing."""
    b = UOpBuilder()
    out, a = globals_(b, F32, F32)
    _, lid, i = thread_index(b, 1, 8)
    mine = b.define_local(3, F32)
    for k in range(3):
        value = b.emit(UOps.LOAD, F32, (a, b.alu(BinaryOps.ADD, b.alu(BinaryOps.MUL, i, b.const(3, I32)),
                                                 b.const(k, I32))))
        b.emit(UOps.STORE, None, (mine, b.const(k, I32), value), hoist=False)
    first = b.emit(UOps.LOAD, F32, (mine, b.const(2, I32)), hoist=False)
    outside = b.alu(BinaryOps.ADD, i, b.const(1000, I32))
    gated = b.emit(UOps.LOAD, F32, (a, outside, b.alu(BinaryOps.CMPLT, lid, b.const(0, I32))))
    b.emit(UOps.STORE, None, (out, i, b.alu(BinaryOps.ADD, first, gated)), hoist=False)
    xs = np.arange(24, dtype=np.float32)
    np.testing.assert_array_equal(run(b.uops, (8, F32), xs), xs.reshape(8, 3)[:, 2])


# ---- bit for bit the scalar interpreter's semantics ----
def twins(compute: Callable[..., UOp], inputs: list[np.ndarray], in_dtypes: list[DType], out_dtype: DType):
    """The same per-element computation as a CPU-style loop (scalar interpreter) and with one GPU
    thread per element (lockstep, 2 workgroups); both outputs (compare them with same_bits)."""
    n = inputs[0].size
    results = []
    for gpu in (False, True):
        b = UOpBuilder()
        out, *ins = globals_(b, out_dtype, *in_dtypes)
        i = thread_index(b, 2, n // 2)[2] if gpu else b.open_range("i", n)
        value = compute(b, *(b.emit(UOps.LOAD, d, (buf, i)) for buf, d in zip(ins, in_dtypes, strict=True)))
        b.emit(UOps.STORE, None, (out, i, value), hoist=False)
        if not gpu:
            b.close_range()
        results.append(run(b.uops, (n, out_dtype), *inputs, dtypes_in=in_dtypes))
    return results


def same_bits(got: np.ndarray, expected: np.ndarray) -> None:
    """Equal bit for bit (so -0.0 differs from 0.0), except that a NaN's sign and payload are free:
    IEEE 754 leaves open which NaN an op with two NaN operands returns, and numpy's scalar ADD keeps
    the second operand's where its array ADD keeps the first's."""
    got_nan = np.isnan(got) if got.dtype.kind == "f" else np.zeros(got.shape, dtype=bool)
    expected_nan = np.isnan(expected) if expected.dtype.kind == "f" else got_nan
    np.testing.assert_array_equal(got_nan, expected_nan)
    np.testing.assert_array_equal(got[~got_nan].view(np.uint8), expected[~got_nan].view(np.uint8))


F32_EDGES = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 1e-45, -3e-39, 1e4, -1e4, 3.4e38, 0.1,
                      2.5, -7.0, 1.0000001], dtype=np.float32)
I32_EDGES = np.array([0, 1, -1, 7, -7, 2**31 - 1, -2**31, 3, -3, 0, 100, -2**31, 5, -5, 2, 9], dtype=np.int32)
I64_EDGES = np.array([0, 1, -1, 7, -2**63, 2**63 - 1, -2**63, 3, -3, 0, 10**12, 5], dtype=np.int64)
BINARY = [BinaryOps.ADD, BinaryOps.SUB, BinaryOps.MUL, BinaryOps.DIV, BinaryOps.MOD, BinaryOps.MAX,
          BinaryOps.CMPLT, BinaryOps.CMPEQ]


@pytest.mark.parametrize("op", BINARY)
@pytest.mark.parametrize("dtype, edges", [(F32, F32_EDGES), (I32, I32_EDGES), (dtypes.int64, I64_EDGES),
                                          (dtypes.uint8, I32_EDGES.astype(np.uint8)),
                                          (dtypes.float64, F32_EDGES.astype(np.float64))])
def test_binary_ops_match_the_scalar_interpreter_bit_for_bit(op, dtype, edges):
    a = np.repeat(edges, len(edges))
    b = np.tile(edges, len(edges))
    out = dtypes.bool if op in (BinaryOps.CMPLT, BinaryOps.CMPEQ) else dtype
    scalar, lockstep = twins(lambda bld, x, y: bld.alu(op, x, y), [a, b], [dtype, dtype], out)
    same_bits(lockstep, scalar)


@pytest.mark.parametrize("op", [UnaryOps.NEG, UnaryOps.RECIP, UnaryOps.SQRT, UnaryOps.EXP2, UnaryOps.LOG2,
                                UnaryOps.SIN, UnaryOps.COS])
def test_float_unary_ops_match_the_scalar_interpreter_bit_for_bit(op):
    xs = np.concatenate([F32_EDGES, np.random.default_rng(4).standard_normal(48, dtype=np.float32) * 30])
    scalar, lockstep = twins(lambda b, x: b.alu(op, x), [xs], [F32], F32)
    same_bits(lockstep, scalar)


@pytest.mark.parametrize("dtype, edges", [(I32, I32_EDGES), (dtypes.bool, I32_EDGES % 2 == 0)])
@pytest.mark.parametrize("op", [UnaryOps.NEG, UnaryOps.RECIP, BinaryOps.AND, BinaryOps.OR, BinaryOps.XOR,
                                BinaryOps.ADD, BinaryOps.MUL, BinaryOps.SUB, BinaryOps.CMPLT, BinaryOps.MAX])
def test_int_and_bool_ops_match_the_scalar_interpreter(op, dtype, edges):
    a, b = np.repeat(edges, len(edges)), np.tile(edges, len(edges))
    out = dtypes.bool if op is BinaryOps.CMPLT else dtype
    if isinstance(op, UnaryOps):
        scalar, lockstep = twins(lambda bld, x: bld.alu(op, x), [a], [dtype], out)
    else:
        scalar, lockstep = twins(lambda bld, x, y: bld.alu(op, x, y), [a, b], [dtype, dtype], out)
    same_bits(lockstep, scalar)


def test_mulacc_and_where_match_the_scalar_interpreter():
    """MULACC (float32 only) rounds once: random magnitudes make the float64 sum inexact in many lanes."""
    dtype = F32
    rng = np.random.default_rng(5)
    a, b = (rng.standard_normal(64) * 10.0 ** rng.integers(-8, 8, 64)).astype(dtype.np).reshape(2, 32)
    c = np.concatenate([F32_EDGES, (rng.standard_normal(16) * 1e7)]).astype(dtype.np)

    def mulacc_or_neg(bld, x, y, z):
        fused = bld.emit(UOps.ALU, dtype, (x, y, z), FusedOps.MULACC)
        return bld.alu(TernaryOps.WHERE, bld.alu(BinaryOps.CMPLT, x, y), fused, bld.alu(UnaryOps.NEG, z))
    scalar, lockstep = twins(mulacc_or_neg, [a, b, c], [dtype] * 3, dtype)
    same_bits(lockstep, scalar)


@pytest.mark.parametrize("src, dst", [(F32, I32), (F32, dtypes.uint8), (F32, dtypes.bool),
                                      (F32, dtypes.float16), (F32, dtypes.bfloat16), (I32, dtypes.float16),
                                      (dtypes.bool, F32), (dtypes.float64, F32), (I32, dtypes.int8)])
def test_casts_match_the_scalar_interpreter(src, dst):
    edges = F32_EDGES if src.is_float else I32_EDGES
    with np.errstate(over="ignore"):
        xs = np.concatenate([edges, edges * 3.5 if src.is_float else edges // 3]).astype(src.np)
    scalar, lockstep = twins(lambda b, x: b.emit(UOps.CAST, dst, (x,)), [xs], [src], dst)
    same_bits(lockstep, scalar)


@pytest.mark.parametrize("dtype", [dtypes.float16, dtypes.bfloat16])
def test_half_precision_loads_compute_in_float32_and_store_rounded(dtype):
    values = np.random.default_rng(6).standard_normal((2, 32), dtype=np.float32) * 100
    stored = [to_storage(v, dtype) for v in values]

    def mul_div(b, x, y):
        return b.alu(BinaryOps.DIV, b.alu(BinaryOps.MUL, x, y), b.alu(BinaryOps.ADD, x, b.const(3.0, dtype)))
    scalar, lockstep = twins(mul_div, stored, [dtype, dtype], dtype)
    same_bits(lockstep, scalar)


def vector_twins(compute: Callable[..., UOp], inputs: list[np.ndarray], dtype: DType, width: int = 4):
    """As `twins`, each thread (or loop iteration) handling `width` consecutive elements as one vector."""
    rows = inputs[0].size // width
    results = []
    for gpu in (False, True):
        b = UOpBuilder()
        out, *ins = globals_(b, dtype, *[dtype] * len(inputs))
        i = thread_index(b, 2, rows // 2)[2] if gpu else b.open_range("i", rows)
        start = b.alu(BinaryOps.MUL, i, b.const(width, I32))
        vectors = [b.emit(UOps.LOAD, VectorDType(dtype, width), (buf, start)) for buf in ins]
        b.emit(UOps.STORE, None, (out, start, compute(b, *vectors)), hoist=False)
        if not gpu:
            b.close_range()
        results.append(run(b.uops, (inputs[0].size, dtype), *inputs))
    return results


def vector_mix(b: UOpBuilder, x: UOp, y: UOp) -> UOp:
    """Vector ALU ops, a WHERE on a vector mask, lanes taken apart (GEP) and put back reversed
    (VECTORIZE), a BROADCAST, and a vector accumulator in a loop inside each thread."""
    vec = x.dtype
    mixed = b.alu(TernaryOps.WHERE, b.alu(BinaryOps.CMPLT, x, y), b.alu(BinaryOps.DIV, x, y),
                  b.alu(BinaryOps.MAX, b.alu(UnaryOps.NEG, x), y))
    lanes = tuple(b.emit(UOps.GEP, vec.scalar, (mixed,), k) for k in (3, 2, 1, 0))
    reverse = b.emit(UOps.VECTORIZE, vec, lanes)
    first = b.emit(UOps.BROADCAST, vec, (b.emit(UOps.GEP, vec.scalar, (x,), 0),))
    acc = b.define_acc(0, vec)
    b.open_range("k", 3)
    fused = b.emit(UOps.ALU, vec, (x, y, acc), FusedOps.MULACC) if vec.is_float else None
    added = fused if fused is not None else b.alu(BinaryOps.ADD, acc, b.alu(BinaryOps.MUL, x, y))
    total = b.assign(acc, added)
    b.close_range()
    return b.alu(BinaryOps.ADD, b.alu(BinaryOps.ADD, reverse, first), total)


@pytest.mark.parametrize("dtype", [F32, I32])
def test_vector_uops_match_the_scalar_interpreter_bit_for_bit(dtype):
    rng = np.random.default_rng(7)
    if dtype == F32:
        a = np.concatenate([F32_EDGES, rng.standard_normal(48, dtype=np.float32) * 1e3])
    else:
        a = np.concatenate([I32_EDGES, rng.integers(-1000, 1000, 48, dtype=np.int32)])
    scalar, lockstep = vector_twins(vector_mix, [a, np.roll(a, 5)], dtype)
    same_bits(lockstep, scalar)


def test_overlapping_vector_stores_to_shared_memory_are_a_race():
    """Thread t stores a 4-wide vector at shared[2t]: threads 0 and 1 both write shared[2]."""
    b = UOpBuilder()
    (out,) = globals_(b, F32)
    _, lid, _ = thread_index(b, 1, 4)
    shared = b.define_shared(16, F32)
    ones = b.emit(UOps.BROADCAST, VectorDType(F32, 4), (b.const(1.0, F32),))
    b.emit(UOps.STORE, None, (shared, b.alu(BinaryOps.MUL, lid, b.const(2, I32)), ones), hoist=False)
    with pytest.raises(GPURaceError, match=r"race on shared0\[2\].*thread 0 and thread 1 both write it"):
        run(b.uops, (4, F32))


def test_a_cpu_style_list_still_runs_on_the_scalar_interpreter():
    b = UOpBuilder()
    out, a = globals_(b, F32, F32)
    i = b.open_range("i", 10)
    doubled = b.alu(BinaryOps.MUL, b.emit(UOps.LOAD, F32, (a, i)), b.const(2.0, F32))
    b.emit(UOps.STORE, None, (out, i, doubled), hoist=False)
    b.close_range()
    program = PythonProgram(b.uops)
    assert program.lockstep is None
    xs = np.arange(10, dtype=np.float32)
    buffers = [Buffer("PYTHON", 10, F32), Buffer("PYTHON", 10, F32).copyin(xs)]
    program(buffers)
    np.testing.assert_array_equal(buffers[0].as_numpy(), xs * 2)


# ---- the teaching checks ----
def uop_text(uops: list[UOp], pc: int) -> str:
    return f"UOp {pc} ({uops[pc].op.name}"


def test_workgroup_sum_without_the_barrier_is_a_read_after_write_race():
    uops = workgroup_sum(2, 8, barrier=False)
    xs = np.ones(16, dtype=np.float32)
    with pytest.raises(GPURaceError) as error:
        run(uops, (2, F32), xs)
    message = str(error.value)
    read, write = position(uops, UOps.LOAD, 1), position(uops, UOps.STORE, 0)
    assert "race on shared0[1] in workgroup (0, 0, 0)" in message
    assert f"thread 0 reads it at {uop_text(uops, read)}" in message
    assert f"thread 1 wrote it at {uop_text(uops, write)}" in message
    assert "no BARRIER between; put a BARRIER after the write" in message


def test_tree_reduction_without_the_loop_barrier_is_a_race_in_its_second_step():
    uops = tree_sum(1, 16, barrier_in_loop=False)
    with pytest.raises(GPURaceError) as error:
        run(uops, (1, F32), np.ones(16, dtype=np.float32))
    message = str(error.value)
    theirs, store = position(uops, UOps.LOAD, 2), position(uops, UOps.STORE, 1)
    # step 2: thread 0 adds shared[4], which thread 4 wrote in step 1
    assert "race on shared0[4]" in message
    assert f"thread 0 reads it at {uop_text(uops, theirs)}" in message
    assert f"thread 4 wrote it at {uop_text(uops, store)}" in message
    assert "an earlier iteration of the loop" in message


def shift_kernel(local: int, second_barrier: bool) -> list[UOp]:
    """shared[lid] = x; BARRIER; y = shared[(lid + 1) % local]; [BARRIER;] shared[lid] = y * 2; out = y."""
    b = UOpBuilder()
    out, a = globals_(b, F32, F32)
    _, lid, i = thread_index(b, 1, local)
    shared = b.define_shared(local, F32)
    b.emit(UOps.STORE, None, (shared, lid, b.emit(UOps.LOAD, F32, (a, i))), hoist=False)
    b.barrier()
    neighbour = b.alu(BinaryOps.MOD, b.alu(BinaryOps.ADD, lid, b.const(1, I32)), b.const(local, I32))
    y = b.load_shared(shared, neighbour, F32)
    if second_barrier:
        b.barrier()
    b.emit(UOps.STORE, None, (shared, lid, b.alu(BinaryOps.MUL, y, b.const(2.0, F32))), hoist=False)
    b.emit(UOps.STORE, None, (out, i, y), hoist=False)
    return b.uops


def test_writing_an_element_another_thread_read_is_a_write_after_read_race():
    xs = np.arange(8, dtype=np.float32)
    np.testing.assert_array_equal(run(shift_kernel(8, True), (8, F32), xs), np.roll(xs, -1))
    uops = shift_kernel(8, False)
    with pytest.raises(GPURaceError) as error:
        run(uops, (8, F32), xs)
    message = str(error.value)
    assert "race on shared0[0]" in message
    assert f"thread 0 writes it at {uop_text(uops, position(uops, UOps.STORE, 1))}" in message
    assert f"thread 7 read it at {uop_text(uops, position(uops, UOps.LOAD, 1))}" in message
    assert "put a BARRIER between the read and the write" in message


def test_two_threads_writing_one_shared_element_is_a_write_write_race():
    b = UOpBuilder()
    (out,) = globals_(b, F32)
    _, lid, i = thread_index(b, 1, 4)
    shared = b.define_shared(4, F32)
    half = b.alu(BinaryOps.DIV, lid, b.const(2, I32))
    b.emit(UOps.STORE, None, (shared, half, b.const(1.0, F32)), hoist=False)
    with pytest.raises(GPURaceError, match=r"shared0\[0\].*threads? 0 and thread 1 both write it at UOp"):
        run(b.uops, (4, F32))
    b = UOpBuilder()
    (out,) = globals_(b, F32)
    _, lid, i = thread_index(b, 1, 4)
    shared = b.define_shared(4, F32)
    b.emit(UOps.STORE, None, (shared, lid, b.const(1.0, F32)), hoist=False)
    shifted = b.alu(BinaryOps.MOD, b.alu(BinaryOps.ADD, lid, b.const(1, I32)), b.const(4, I32))
    b.emit(UOps.STORE, None, (shared, shifted, b.const(2.0, F32)), hoist=False)
    with pytest.raises(GPURaceError, match=r"shared0\[1\].*thread 0 writes it at .*thread 1 wrote it at"):
        run(b.uops, (4, F32))


def barrier_in_if(condition: Callable[[UOpBuilder, UOp, UOp], UOp]) -> list[UOp]:
    b = UOpBuilder()
    out, a = globals_(b, F32, F32)
    gid, lid, i = thread_index(b, 2, 8)
    b.open_if(condition(b, gid, lid))
    b.barrier()
    b.close_if()
    b.emit(UOps.STORE, None, (out, i, b.emit(UOps.LOAD, F32, (a, i))), hoist=False)
    return b.uops


def test_a_barrier_inside_a_divergent_if_is_an_error_naming_both_sets_of_threads():
    uops = barrier_in_if(lambda b, gid, lid: b.alu(BinaryOps.CMPLT, lid, b.const(3, I32)))
    with pytest.raises(BarrierDivergenceError) as error:
        run(uops, (16, F32), np.zeros(16, dtype=np.float32))
    message = str(error.value)
    assert f"BARRIER at UOp {position(uops, UOps.BARRIER)} (BARRIER) in workgroup (0, 0, 0)" in message
    assert "reached by threads 0, 1, 2 but not by threads 3, 4, 5, 6, 7" in message
    assert f"the IF at {uop_text(uops, position(uops, UOps.IF))}" in message


@pytest.mark.parametrize("threshold", [100, 1])
def test_a_barrier_inside_an_if_true_or_false_for_a_whole_workgroup_is_fine(threshold):
    """gid0 < 100: every thread enters; gid0 < 1: all of workgroup 0 enters, none of workgroup 1."""
    uops = barrier_in_if(lambda b, gid, lid: b.alu(BinaryOps.CMPLT, gid, b.const(threshold, I32)))
    xs = np.arange(16, dtype=np.float32)
    np.testing.assert_array_equal(run(uops, (16, F32), xs), xs)


def test_loop_bounds_that_differ_between_threads_are_an_error():
    b = UOpBuilder()
    out, bounds = globals_(b, F32, I32)
    _, _, i = thread_index(b, 1, 4)
    end = b.emit(UOps.LOAD, I32, (bounds, i))
    loop = UOp(UOps.RANGE, I32, (b.const(0, I32), end), Loop("k"))
    body = UOp(UOps.STORE, None, (out, i, b.const(1.0, F32)))
    uops = [*b.uops, loop, body, UOp(UOps.ENDRANGE, None, (loop,))]
    with pytest.raises(DivergentLoopError, match=r"different end in thread 0 \(2\) and thread 2 \(3\)"):
        run(uops, (4, F32), np.array([2, 2, 3, 3], dtype=np.int32))


@pytest.mark.parametrize("where", ["global", "shared", "private"])
def test_out_of_bounds_loads_and_stores_name_the_buffer_the_index_and_the_size(where):
    b = UOpBuilder()
    out, a = globals_(b, F32, F32)
    _, lid, i = thread_index(b, 1, 8)
    past = b.alu(BinaryOps.ADD, lid, b.const(1, I32))
    if where == "global":
        b.emit(UOps.STORE, None, (out, i, b.emit(UOps.LOAD, F32, (a, past))), hoist=False)
        expected = r"thread 7 reads index 8 of data1, which has 8 elements \(valid: 0 to 7\)"
    elif where == "shared":
        b.emit(UOps.STORE, None, (b.define_shared(8, F32), past, b.const(1.0, F32)), hoist=False)
        expected = r"thread 7 writes index 8 of shared0, which has 8 elements"
    else:
        mine = b.define_local(4, F32)
        b.emit(UOps.STORE, None, (mine, b.alu(BinaryOps.SUB, b.const(3, I32), lid), b.const(1.0, F32)),
               hoist=False)
        expected = r"thread 4 writes index -1 of a private array, which has 4 elements"
    with pytest.raises(GPUOutOfBoundsError, match=r"out of bounds at UOp \d+ \((LOAD|STORE).*" + expected):
        run(b.uops, (8, F32), np.zeros(8, dtype=np.float32))
    assert issubclass(GPUOutOfBoundsError, IndexError)


def test_a_launch_that_does_not_match_the_specials_is_refused():
    uops = barrier_in_if(lambda b, gid, lid: b.alu(BinaryOps.CMPLT, gid, b.const(9, I32)))
    assert PythonProgram(uops, LaunchDims((2, 1, 1), (8, 1, 1))).lockstep is not None
    with pytest.raises(ValueError, match=re.escape("does not match the kernel's SPECIALs")):
        PythonProgram(uops, LaunchDims((4, 1, 1), (8, 1, 1)))


def test_a_thread_reading_back_its_own_shared_write_needs_no_barrier():
    b = UOpBuilder()
    out, a = globals_(b, F32, F32)
    _, lid, i = thread_index(b, 2, 8)
    shared = b.define_shared(8, F32)
    b.emit(UOps.STORE, None, (shared, lid, b.emit(UOps.LOAD, F32, (a, i))), hoist=False)
    mine = b.load_shared(shared, lid, F32)
    b.emit(UOps.STORE, None, (shared, lid, b.alu(BinaryOps.ADD, mine, mine)), hoist=False)
    b.emit(UOps.STORE, None, (out, i, b.load_shared(shared, lid, F32)), hoist=False)
    xs = np.arange(16, dtype=np.float32)
    np.testing.assert_array_equal(run(b.uops, (16, F32), xs), xs + xs)


def test_threads_of_a_two_dimensional_workgroup_are_named_by_their_lid_triple():
    """A 4 x 2 workgroup where each thread reads its right-hand neighbour's element unsynchronized."""
    b = UOpBuilder()
    (out,) = globals_(b, F32)
    l0, l1 = b.special("lid0", 4), b.special("lid1", 2)
    shared = b.define_shared(8, F32)
    mine = b.alu(BinaryOps.ADD, b.alu(BinaryOps.MUL, l1, b.const(4, I32)), l0)
    b.emit(UOps.STORE, None, (shared, mine, b.const(1.0, F32)), hoist=False)
    right = b.alu(BinaryOps.MOD, b.alu(BinaryOps.ADD, mine, b.const(1, I32)), b.const(8, I32))
    b.emit(UOps.STORE, None, (out, mine, b.load_shared(shared, right, F32)), hoist=False)
    expected = re.escape("race on shared0[1] in workgroup (0, 0, 0): thread (0, 0, 0) reads it")
    with pytest.raises(GPURaceError, match=expected + r".*thread \(1, 0, 0\) wrote it"):
        run(b.uops, (8, F32))


def test_a_write_after_the_writer_and_others_read_the_element_is_a_race():
    """Thread 0 reads shared[0] first, then every thread reads it, then thread 0 overwrites it: the
    race is with the other readers (the record keeps a second reader for this)."""
    b = UOpBuilder()
    out, a = globals_(b, F32, F32)
    _, lid, i = thread_index(b, 1, 4)
    shared = b.define_shared(4, F32)
    b.emit(UOps.STORE, None, (shared, lid, b.emit(UOps.LOAD, F32, (a, i))), hoist=False)
    b.barrier()
    zero = b.const(0, I32)
    b.open_if(b.alu(BinaryOps.CMPEQ, lid, zero))
    b.load_shared(shared, zero, F32)
    b.close_if()
    b.emit(UOps.STORE, None, (out, i, b.load_shared(shared, zero, F32)), hoist=False)
    b.open_if(b.alu(BinaryOps.CMPEQ, lid, zero))
    b.emit(UOps.STORE, None, (shared, zero, b.const(5.0, F32)), hoist=False)
    b.close_if()
    with pytest.raises(GPURaceError, match=r"shared0\[0\].*thread 0 writes it at .*thread [123] read it at"):
        run(b.uops, (4, F32), np.arange(4, dtype=np.float32))


def test_an_assign_inside_a_divergent_if_changes_only_the_threads_inside():
    b = UOpBuilder()
    out, a = globals_(b, F32, F32)
    _, lid, i = thread_index(b, 2, 8)
    acc = b.define_acc(-1.0, F32)
    x = b.emit(UOps.LOAD, F32, (a, i))
    b.open_if(b.alu(BinaryOps.CMPLT, lid, b.const(3, I32)))
    total = b.assign(acc, b.alu(BinaryOps.ADD, acc, x))
    b.close_if()
    b.emit(UOps.STORE, None, (out, i, total), hoist=False)
    xs = np.arange(16, dtype=np.float32)
    np.testing.assert_array_equal(run(b.uops, (16, F32), xs), np.where(np.arange(16) % 8 < 3, xs - 1, -1))


def tiled_matmul(n: int, tile: int, barriers: tuple[bool, bool] = (True, True)) -> list[UOp]:
    """C = A @ B (n x n), one thread per element of C, in tile x tile workgroups: for each tile step,
    the workgroup copies a tile of A and of B into shared memory, BARRIER, each thread adds its row of
    the A tile times its column of the B tile, BARRIER (before the next step overwrites the tiles)."""
    b = UOpBuilder()
    out, a, bm = globals_(b, F32, F32, F32)
    tx, ty = b.special("lid0", tile), b.special("lid1", tile)
    col = b.alu(BinaryOps.ADD, b.alu(BinaryOps.MUL, b.special("gid0", n // tile), b.const(tile, I32)), tx)
    row = b.alu(BinaryOps.ADD, b.alu(BinaryOps.MUL, b.special("gid1", n // tile), b.const(tile, I32)), ty)
    a_tile, b_tile = b.define_shared(tile * tile, F32), b.define_shared(tile * tile, F32)

    def at(r: UOp, c: UOp, width: int) -> UOp:
        return b.alu(BinaryOps.ADD, b.alu(BinaryOps.MUL, r, b.const(width, I32)), c)
    acc = b.define_acc(0.0, F32)
    step = b.open_range("t", n // tile)
    offset = b.alu(BinaryOps.MUL, step, b.const(tile, I32))
    b.emit(UOps.STORE, None, (a_tile, at(ty, tx, tile), b.emit(UOps.LOAD, F32, (a, at(row, b.alu(
        BinaryOps.ADD, offset, tx), n)))), hoist=False)
    b.emit(UOps.STORE, None, (b_tile, at(ty, tx, tile), b.emit(UOps.LOAD, F32, (bm, at(b.alu(
        BinaryOps.ADD, offset, ty), col, n)))), hoist=False)
    if barriers[0]:
        b.barrier()
    k = b.open_range("k", tile)
    a_k, b_k = b.load_shared(a_tile, at(ty, k, tile), F32), b.load_shared(b_tile, at(k, tx, tile), F32)
    product = b.alu(BinaryOps.MUL, a_k, b_k)
    total = b.assign(acc, b.alu(BinaryOps.ADD, acc, product))
    b.close_range()
    if barriers[1]:
        b.barrier()
    b.close_range()
    b.emit(UOps.STORE, None, (out, at(row, col, n), total), hoist=False)
    return b.uops


def test_tiled_matmul_through_shared_memory_matches_numpy_and_needs_both_barriers():
    n, tile = 8, 4
    rng = np.random.default_rng(8)
    a, bm = rng.standard_normal((2, n, n), dtype=np.float32)
    expected = np.zeros((n, n), dtype=np.float32)
    for k in range(n):  # the kernel's order of additions, so the comparison is exact
        expected = expected + a[:, k:k + 1] * bm[k:k + 1, :]
    got = run(tiled_matmul(n, tile), (n * n, F32), a.reshape(-1), bm.reshape(-1)).reshape(n, n)
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_allclose(got, a.astype(np.float64) @ bm.astype(np.float64), rtol=1e-5, atol=1e-5)
    # thread (1, 0, 0) multiplies A-tile element 0, which thread (0, 0, 0) copied in
    read_early = re.escape("race on shared0[0] in workgroup (0, 0, 0): thread (1, 0, 0) reads it")
    with pytest.raises(GPURaceError, match=read_early + r" at UOp \d+ \(LOAD.* thread \(0, 0, 0\) wrote it"):
        run(tiled_matmul(n, tile, (False, True)), (n * n, F32), a.reshape(-1), bm.reshape(-1))
    # the next step's copy overwrites element 0, which thread (3, 0, 0) read in the step before
    write_early = re.escape("race on shared0[0] in workgroup (0, 0, 0): thread (0, 0, 0) writes it")
    with pytest.raises(GPURaceError, match=write_early + r".*thread \(3, 0, 0\) read it.*earlier iteration"):
        run(tiled_matmul(n, tile, (True, False)), (n * n, F32), a.reshape(-1), bm.reshape(-1))


def test_an_if_without_its_endif_is_refused_when_the_program_is_made():
    b = UOpBuilder()
    (out,) = globals_(b, F32)
    _, lid, i = thread_index(b, 1, 4)
    condition = b.alu(BinaryOps.CMPLT, lid, b.const(2, I32))
    uops = [*b.uops, UOp(UOps.IF, None, (condition,))]
    with pytest.raises(ValueError, match=r"the IF at UOp \d+ has no ENDIF"):
        PythonProgram(uops)
