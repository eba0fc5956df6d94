"""The GPU lowering: GLOBAL, LOCAL, GROUP and shared tiles (TILE + PACK) on GPU kernels, against numpy.

Every kernel runs on the PYTHON device with PYTHON_GPU=1 (GPU-style UOps in lockstep, which fail on
a race or a divergent barrier: no GPU needed), and on the OpenCL device when this machine has one
(PoCL on a CPU). Bad opts are clear errors that say what would be valid.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.gpu_devices import GPUS
from tinyedu import Device, Tensor
from tinyedu.codegen.heuristics import gpu_optimizations
from tinyedu.codegen.kernel import Kernel
from tinyedu.codegen.opts import Opt, OptError, OptOps, apply_opts
from tinyedu.core.dtype import dtypes
from tinyedu.core.ops import LazyOp, LoadOps
from tinyedu.core.uops import UOps
from tinyedu.engine.lower import lower
from tinyedu.engine.schedule import create_schedule
from tinyedu.launch import GPULimits
from tinyedu.runtime.device import Buffer
from tinyedu.runtime.lockstep import GPURaceError

DEVICES = ["PYTHON", *GPUS]


@pytest.fixture(autouse=True)
def python_as_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHON_GPU", "1")  # the PYTHON device lowers GPU-style, with GPULimits()


def ast_of(t: Tensor) -> LazyOp:
    return [i.ast for i in create_schedule([t.lazydata]) if not isinstance(i.ast.op, LoadOps)][-1]


def gpu_kernel(ast: LazyOp, limits: GPULimits | None = None) -> Kernel:
    kernel = Kernel(ast)
    kernel.gpu = limits or GPULimits()
    return kernel


def run(device: str, ast: LazyOp, opts: list[Opt] | None, *inputs: np.ndarray) -> np.ndarray:
    """Lower `ast` for `device` (these opts, or the GPU heuristics') and run it on the inputs."""
    program = lower(device, ast, opts)
    out = Buffer(device, ast.arg.st.size, ast.arg.dtype)
    program.runner([out, *(Buffer(device, x.size, dtypes.from_numpy(x.dtype)).copyin(x) for x in inputs)])
    return out.as_numpy().copy()


RNG = np.random.default_rng(0)
A = RNG.standard_normal((48, 40)).astype(np.float32)
B = RNG.standard_normal((40, 36)).astype(np.float32)
ROWS = RNG.standard_normal((6, 300)).astype(np.float32)


@pytest.mark.parametrize("device", DEVICES)
def test_tiled_matmul_through_shared_memory(device: str):
    ast = ast_of(Tensor(A) @ Tensor(B))
    opts = [Opt(OptOps.GLOBAL, 0, 0), Opt(OptOps.GLOBAL, 1, 0), Opt(OptOps.LOCAL, 0, 8),
            Opt(OptOps.LOCAL, 1, 12), Opt(OptOps.TILE, 4, 8), Opt(OptOps.PACK, 5, 1), Opt(OptOps.PACK, 5, 2)]
    program = lower(device, ast, opts)
    assert [u.op for u in program.uops].count(UOps.BARRIER) == 3  # after each copy, after the tiles' use
    assert sum(u.op is UOps.DEFINE_SHARED for u in program.uops) == 2
    got = run(device, ast, opts, A, B).reshape(48, 36)
    np.testing.assert_allclose(got, A.astype(np.float64) @ B, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op", ["sum", "max"])
def test_group_splits_a_reduce_across_a_workgroup(device: str, op: str):
    ast = ast_of(getattr(Tensor(ROWS), op)(1))
    for amount in (2, 4, 100, 300):  # 300: every element of a row is a thread's
        opts = [Opt(OptOps.GROUP, 1, amount), Opt(OptOps.GLOBAL, 0, 0)]
        got = run(device, ast, opts, ROWS)
        want = ROWS.astype(np.float64).sum(1) if op == "sum" else ROWS.max(1)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_group_inside_an_output_loop_needs_its_second_barrier(device: str):
    """Outputs left as a loop around a GROUP reduce: each iteration reuses the shared slots, so the
    linearizer ends it with a barrier (without it the emulator reports the race)."""
    ast = ast_of(Tensor(ROWS).sum(1))
    got = run(device, ast, [Opt(OptOps.GROUP, 1, 30)], ROWS)
    np.testing.assert_allclose(got, ROWS.astype(np.float64).sum(1), rtol=1e-5, atol=1e-5)
    uops = lower("PYTHON", ast, [Opt(OptOps.GROUP, 1, 30)]).uops
    barriers = [i for i, u in enumerate(uops) if u.op is UOps.BARRIER]
    assert len(barriers) == 2
    without = [u for i, u in enumerate(uops) if i != barriers[1]]
    out, inp = Buffer("PYTHON", 6, dtypes.float32), Buffer("PYTHON", ROWS.size, dtypes.float32).copyin(ROWS)
    launch = lower("PYTHON", ast, [Opt(OptOps.GROUP, 1, 30)]).kernel.launch
    with pytest.raises(GPURaceError, match="shared0"):
        Device["PYTHON"].runtime("r", without, launch)([out, inp])


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


CASES = {  # what the GPU heuristics lower (tiles, GROUP, LOCAL) against float64 numpy
    "matmul": (lambda d: Tensor(A, device=d) @ Tensor(B, device=d), A.astype(np.float64) @ B),
    "softmax": (lambda d: Tensor(A, device=d).softmax(1), _softmax(A.astype(np.float64))),
    "sum_all": (lambda d: Tensor(ROWS, device=d).sum(), ROWS.astype(np.float64).sum()),
    "argmax": (lambda d: Tensor(ROWS, device=d).argmax(1), ROWS.argmax(1)),
    "int_sum": (lambda d: Tensor(np.arange(-500, 502, dtype=np.int32), device=d).sum(), np.int32(501)),
    "f64_sum": (lambda d: Tensor(ROWS.astype(np.float64), device=d).sum(1), ROWS.astype(np.float64).sum(1)),
    "odd": (lambda d: (Tensor(A[:47, :37], device=d) * 2).sum(0),
            (A[:47, :37].astype(np.float64) * 2).sum(0)),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", CASES)
def test_the_gpu_heuristics_give_numpy_s_answer(device: str, case: str):
    if device == "WEBGPU" and case == "f64_sum":
        pytest.skip("WGSL has no float64 (tests/test_webgpu.py checks the error)")
    make, want = CASES[case]
    np.testing.assert_allclose(make(device).numpy(), want, rtol=1e-5, atol=1e-5)


def test_the_heuristics_choose_tiles_for_matmul_and_group_for_long_rows():
    matmul = gpu_kernel(ast_of(Tensor(A) @ Tensor(B)))
    ops = [o.op for o in gpu_optimizations(matmul)]
    assert ops.count(OptOps.GLOBAL) == 2 and ops.count(OptOps.LOCAL) == 2 and ops.count(OptOps.PACK) == 2
    rows = gpu_kernel(ast_of(Tensor(ROWS).sum(1)))
    assert [o.op for o in gpu_optimizations(rows)][0] is OptOps.GROUP
    small = gpu_kernel(ast_of(Tensor(np.ones(7, np.float32)) + 1))  # a GPU kernel always gets threads
    assert [o.op for o in gpu_optimizations(small)] == [OptOps.GLOBAL, OptOps.LOCAL]


def test_launch_dims_and_names():
    kernel = apply_opts(gpu_kernel(ast_of(Tensor(A) @ Tensor(B))),
                        [Opt(OptOps.GLOBAL, 0, 0), Opt(OptOps.GLOBAL, 1, 0), Opt(OptOps.LOCAL, 0, 8),
                         Opt(OptOps.LOCAL, 1, 12)])
    assert kernel.launch.groups == (3, 6, 1) and kernel.launch.local == (12, 8, 1)  # dimension 0: innermost
    assert kernel.loop_names[:4] == ["gid1", "gid0", "lid1", "lid0"]
    assert "launch: groups (3, 6, 1) x local (12, 8, 1)" in str(kernel)


@pytest.mark.parametrize("opts, message", [
    ([Opt(OptOps.LOCAL, 0, 4)], "LOCAL needs a global axis"),
    ([Opt(OptOps.GROUP, 0, 4)], "GROUP needs a reduce axis"),
    ([Opt(OptOps.GLOBAL, 0, 0), Opt(OptOps.LOCAL, 0, 48), Opt(OptOps.GROUP, 2, 40)],
     "over this GPU's limit of 1024"),
    ([Opt(OptOps.GLOBAL, 0, 0), Opt(OptOps.LOCAL, 0, 5)], "divides the axis size 48"),
    ([Opt(OptOps.THREAD, 0, 2)], "THREAD is a CPU opt"),
    ([Opt(OptOps.GLOBAL, 0, 0), Opt(OptOps.LOCAL, 0, 8), Opt(OptOps.PACK, 0, 1)],
     "a tile is copied before a loop"),
])
def test_bad_gpu_opts_are_clear_errors(opts: list[Opt], message: str):
    kernel = gpu_kernel(ast_of(Tensor(A) @ Tensor(B)))
    with pytest.raises(OptError, match=message):
        apply_opts(kernel, opts)


def test_gpu_opts_need_a_gpu_and_fit_its_limits():
    ast = ast_of(Tensor(A) @ Tensor(B))
    with pytest.raises(OptError, match="this kernel is for a CPU device"):
        apply_opts(Kernel(ast), [Opt(OptOps.GLOBAL, 0, 0)])
    tiny = GPULimits(max_workgroup_size=64, max_local=(8, 8, 8), shared_memory_bytes=512,
                     max_groups=(4, 4, 4))
    with pytest.raises(OptError, match="grid dimension 0 would have 36 workgroups, over this GPU's limit"):
        apply_opts(gpu_kernel(ast, tiny), [Opt(OptOps.GLOBAL, 1, 0)])  # more than LOCAL could divide
    roomy = GPULimits(max_workgroup_size=64, max_local=(64, 64, 64), max_groups=(4, 4, 4))
    kernel = apply_opts(gpu_kernel(ast, roomy), [Opt(OptOps.GLOBAL, 1, 0)])  # LOCAL may still divide it ...
    with pytest.raises(OptError, match="grid dimension 0 would have 12 workgroups"):
        apply_opts(kernel, [Opt(OptOps.LOCAL, 0, 3)])                      # ... but must, within the limit
    opts = [Opt(OptOps.GLOBAL, 0, 0), Opt(OptOps.GLOBAL, 1, 0), Opt(OptOps.LOCAL, 0, 4),
            Opt(OptOps.LOCAL, 1, 4), Opt(OptOps.PACK, 4, 1)]
    with pytest.raises(OptError, match="640 bytes of shared memory, over this GPU's 512"):
        apply_opts(gpu_kernel(ast, GPULimits(shared_memory_bytes=512)), opts)
