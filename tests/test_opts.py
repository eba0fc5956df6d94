"""Stage 5: every opt, on many kernels, gives what the NUMPY oracle gives, on C and on PYTHON.

Each case is a Tensor expression whose one compute kernel is taken from the scheduler; inputs come
in odd sizes, with size-1 axes, padded, strided, flipped and permuted views, edge values (NaN, inf,
-0.0) and empty shapes. Opt lists are random walks through `candidate_opts` (every opt that applies
at each step, the BEAM search's action space), so each kind of opt is tried on each kernel, alone
and combined; the heuristics' own choices are checked too, with THREADS=1 and 2. Elementwise
kernels must match bit for bit (vectors compute exactly what scalars do); reductions within a
tolerance (opts change the order of a sum, and optimized sums of products use fused multiply-add).
"""

from __future__ import annotations

import random

import numpy as np
import pytest

import tinyedu.core.function as F
from tinyedu import Tensor, dtypes
from tinyedu.codegen import heuristics
from tinyedu.codegen.kernel import Kernel
from tinyedu.codegen.linearizer import linearize
from tinyedu.codegen.opts import Opt, OptError, OptOps, apply_opts
from tinyedu.codegen.search import candidate_opts
from tinyedu.core.ops import LoadOps
from tinyedu.engine.schedule import create_schedule
from tinyedu.renderer.cstyle import render_c
from tinyedu.runtime.device import Buffer
from tinyedu.runtime.ops_c import Compiler, CProgram
from tinyedu.runtime.ops_numpy import NumpyProgram
from tinyedu.runtime.ops_python import PythonProgram

EDGE = np.array([0.0, -0.0, np.nan, np.inf, -np.inf, 1e-38, -3.5, 2.0], np.float32)


def data(shape, seed=0, dtype=np.float32, edges=False) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dtype == np.float32:
        x = rng.standard_normal(shape).astype(np.float32)
        if edges and x.size:
            flat = x.reshape(-1)
            flat[:min(len(EDGE), flat.size)] = EDGE[:flat.size]
        return x
    if dtype == np.bool_:
        return rng.integers(0, 2, shape).astype(np.bool_)
    low, high = (0, 256) if dtype == np.uint8 else (-50, 50)
    return rng.integers(low, high, shape).astype(dtype)


def t(x: np.ndarray) -> Tensor:
    return Tensor(x).realize()


# name -> a function building the expression (inputs realized, so the expression is one kernel)
CASES = {
    "chain": lambda: (t(data((6, 20))) * t(data((6, 20), 1)) + 0.5).relu() - t(data((6, 20), 2)),
    "edges max/where": lambda: t(data((4, 16), edges=True)).maximum(t(data((4, 16), 3, edges=True)))
    + (t(data((4, 16), 4)) < 0).where(t(data((4, 16), edges=True)), -0.0),
    "permuted": lambda: t(data((12, 8))).permute(1, 0) * 2 + t(data((8, 12), 1)),
    "flipped": lambda: t(data((5, 16))).flip((0, 1)) + t(data((5, 16), 1)),
    "strided": lambda: t(data((10, 32)))._stride((2, 2)) * t(data((5, 16), 1)),
    "padded": lambda: t(data((6, 14))).pad(((1, 1), (1, 1))) * 3 + 1,
    "size-1 axes": lambda: t(data((1, 8, 1, 4))) + t(data((3, 1, 1, 4), 1)),
    "sum size-1 axes": lambda: t(data((1, 16, 1, 3))).sum((1, 2)),
    "exp": lambda: (t(data((4, 8))) * 0.3).exp() + t(data((4, 8), 1)).abs().sqrt(),
    "int": lambda: t(data((6, 16), dtype=np.int32)) * 3 - t(data((6, 16), 1, np.int32)).maximum(0),
    # integer division (x/0 is 0): no vector form, so lane by lane
    "int div": lambda: t(data((4, 8), dtype=np.int32))._apply(F.Div, t(data((4, 8), 1, np.int32))),
    "uint8": lambda: t(data((4, 16), dtype=np.uint8)) + t(data((4, 16), 1, np.uint8)),
    "bool": lambda: t(data((4, 16), dtype=np.bool_)) * t(data((4, 16), 1, np.bool_)),
    "cast": lambda: t(data((4, 16), dtype=np.int32)).cast(dtypes.float32) * 0.25,
    # bitwise ops on int32: vector ops (`&` on intx4, vandq_s32, `and <4 x i32>`)
    "bitwise": lambda: (t(data((4, 16), dtype=np.int32)) & t(data((4, 16), 1, np.int32)))
    ^ (t(data((4, 16), 2, np.int32)) | -6),
    # float -> int32 (INT32_MIN where it does not fit: NaN, inf, 3e9) and -> uint8: lane by lane
    "float to int": lambda: (t(data((4, 16), edges=True)) * 3e9).cast(dtypes.int32)
    ^ (t(data((4, 16), 1, edges=True)) * 300).cast(dtypes.uint8).cast(dtypes.int32),
    "cos": lambda: (t(data((4, 16), edges=True)) * 1e4).cos(),
    "signed constants": lambda: 1 / (t(data((4, 16), edges=True)) * -0.0)
    + (t(data((4, 16), 1)) < 0.5).where(float("inf"), -0.0),
    "sum rows": lambda: t(data((6, 32))).sum(1),
    "sum cols": lambda: t(data((24, 16))).sum(0),
    "sum all": lambda: t(data((96,))).sum(),
    "max rows edges": lambda: t(data((4, 16), edges=True)).max(1),
    "sum padded": lambda: t(data((5, 12))).pad(((0, 0), (2, 2))).exp().sum(1),
    "sum int": lambda: t(data((8, 16), dtype=np.int32)).sum(1),
    "matmul": lambda: t(data((8, 12))) @ t(data((12, 32), 1)),
    "matmul odd": lambda: t(data((5, 7))) @ t(data((7, 9), 1)),
    "matmul bias relu": lambda: (t(data((4, 16))) @ t(data((16, 16), 1)) + t(data((16,), 2))).relu(),
    # two reduce loops, and a value added after the sum (a gradient accumulated into its old value)
    "sum two axes plus": lambda: (t(data((3, 5, 8))).unsqueeze(-1) * t(data((3, 5, 16), 1)).unsqueeze(-2))
    .sum((0, 1)) + t(data((8, 16), 2)),
    "conv": lambda: t(data((1, 2, 6, 6))).conv2d(t(data((4, 2, 3, 3), 1)), padding=1),
    "empty": lambda: t(data((0, 8))) * 2,
    "sum empty": lambda: t(data((3, 0))).sum(1),
}


def kernel_item(name: str):
    items = [i for i in create_schedule([CASES[name]().lazydata]) if not isinstance(i.ast.op, LoadOps)]
    assert len(items) == 1, f"{name}: {len(items)} kernels"
    return items[0]


def run(item, device: str, opts: list[Opt] | None = None) -> np.ndarray:
    out = Buffer(device, int(np.prod(item.out.shape)), item.out.dtype)
    buffers = [out, *(x.realized for x in item.inputs)]
    if device == "NUMPY":
        NumpyProgram(item.ast)(buffers)
        return out.as_numpy().copy()
    kernel = apply_opts(Kernel(item.ast), opts or [])
    uops = linearize(kernel)
    if device == "C":
        CProgram(kernel.name, Compiler().build(render_c(kernel.name, uops)))(buffers)
    else:
        PythonProgram(uops)(buffers)
    return out.as_numpy().copy()


def assert_matches(got: np.ndarray, expected: np.ndarray, exact: bool, message: str) -> None:
    if got.dtype.kind == "f" and not exact:
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5, equal_nan=True, err_msg=message)
    else:
        np.testing.assert_array_equal(got, expected, err_msg=message)
        if got.dtype.kind == "f":
            assert np.array_equal(np.signbit(got), np.signbit(expected)), f"-0.0 differs: {message}"


def random_walks(kernel: Kernel, seed: int, walks: int, threads: int = 2) -> list[list[Opt]]:
    """Opt lists of length 1..4, each opt drawn from what applies after the ones before it."""
    rng, found = random.Random(seed), []
    for _ in range(walks):
        k, opts = kernel.copy(), []
        for _ in range(rng.randint(1, 4)):
            choices = candidate_opts(k, threads)
            if not choices:
                break
            opt = rng.choice(choices)
            apply_opts(k, [opt])
            opts.append(opt)
        if opts:
            found.append(opts)
    return found


APPROXIMATE = ("exp", "sum padded", "cos")  # exp2f/cosf in libm and numpy may differ by an ulp


def check(name: str, item, opts: list[Opt]) -> None:
    """C and PYTHON with `opts` against NUMPY; an elementwise kernel also bit for bit against itself
    without opts (vectors and unrolling compute exactly what the scalar loop does)."""
    expected = run(item, "NUMPY")
    elementwise = Kernel(item.ast).reduceop is None
    plain = {device: run(item, device) for device in ("C", "PYTHON")} if elementwise else {}
    for device in ("C", "PYTHON"):
        got = run(item, device, opts)
        exact = elementwise and name not in APPROXIMATE
        assert_matches(got, expected, exact, f"{name} on {device} with {opts}")
        if elementwise:
            assert_matches(got, plain[device], True, f"{name} on {device} with {opts} vs without opts")


@pytest.mark.parametrize("name", list(CASES))
def test_random_opts_match_numpy_on_c_and_python(name: str):
    item = kernel_item(name)
    for opts in random_walks(Kernel(item.ast), seed=len(name), walks=6, threads=2 + len(name) % 2):
        check(name, item, opts)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("name", list(CASES))
def test_heuristic_opts_match_numpy(name: str, threads: int, monkeypatch: pytest.MonkeyPatch):
    """The heuristics' opts, even on these small kernels (the size thresholds are lowered)."""
    monkeypatch.setattr(heuristics, "SMALL_KERNEL", 0)
    monkeypatch.setattr(heuristics, "THREAD_MIN_WORK", 0)
    item = kernel_item(name)
    check(name, item, heuristics.hand_coded_optimizations(Kernel(item.ast), 16, threads))


# ---- what each opt does to the kernel ----
def matmul_kernel() -> Kernel:
    return Kernel(kernel_item("matmul").ast)  # (8, 12) @ (12, 32): full shape (8, 32, 12)


def test_upcast_is_a_split_and_a_move_of_every_view():
    k = matmul_kernel()
    assert k.full_shape == (8, 32, 12) and k.first_reduce == 2
    apply_opts(k, [Opt(OptOps.UPCAST, 1, 16)])
    assert k.full_shape == (8, 2, 12, 16)
    assert [kind.value for kind in k.kinds] == ["loop", "loop", "reduce", "upcast"]
    # B (12, 32) read as (i, j0, k, j1): j = j0*16 + j1, so strides (0, 16, 32, 1)
    assert k.sts[2].views[-1].strides == (0, 16, 32, 1)
    assert k.sts[0].shape == (8, 2, 1, 16)  # the output keeps size 1 on the reduce axis
    text = str(k)
    assert "expanded in the loop body: upcast16 (axis 3)" in text
    assert "applied opts: [Opt(UPCAST, axis=1, amount=16)]" in text


def test_the_first_upcast_stays_innermost():
    """Split 16 off j first, then 2 off what is left: j = j0*32 + u*16 + v, so v is contiguous."""
    opts = [Opt(OptOps.UPCAST, 1, 16), Opt(OptOps.UPCAST, 1, 2), Opt(OptOps.UPCAST, 0, 4)]
    k = apply_opts(matmul_kernel(), opts)
    assert k.full_shape == (2, 12, 4, 2, 16)
    assert k.sts[2].views[-1].strides == (0, 32, 0, 16, 1)


def test_thread_moves_the_loop_outermost_and_splits_a_reduce():
    k = apply_opts(matmul_kernel(), [Opt(OptOps.THREAD, 1, 2)])
    assert k.full_shape == (32, 8, 12) and k.kinds[0].value == "thread" and k.threads == 2
    assert "tidx0<32 (2 threads)" in str(k)
    full = Kernel(kernel_item("sum all").ast)
    apply_opts(full, [Opt(OptOps.THREAD, 0, 4)])
    assert full.full_shape == (4, 24) and full.first_reduce == 0  # 4 parts of 24, one per thread


def test_swap_tile_and_pack():
    k = apply_opts(matmul_kernel(), [Opt(OptOps.SWAP, 0, 1)])
    assert k.full_shape == (32, 8, 12)
    k = apply_opts(matmul_kernel(), [Opt(OptOps.TILE, 1, 8)])
    assert k.full_shape == (4, 8, 8, 12)  # j's tile index outermost, then i, then j within the tile
    opts = [Opt(OptOps.UPCAST, 1, 16), Opt(OptOps.SWAP, 0, 1), Opt(OptOps.PACK, 1, 2)]
    k = apply_opts(matmul_kernel(), opts)
    assert "(packed before gidx1)" in str(k)
    source = render_c(k.name, linearize(k))
    assert "_Alignas(64) float local0[192];" in source  # B's tile: 12 rows of 16


ERRORS = [
    ([Opt(OptOps.UPCAST, 1, 5)], "amount must be an int >= 2 that divides the axis size 32"),
    ([Opt(OptOps.UPCAST, 2, 4)], "axis 2 is a reduce axis, UPCAST needs a loop axis"),
    ([Opt(OptOps.UNROLL, 0, 4)], "axis 0 is a loop axis, UNROLL needs a reduce axis"),
    ([Opt(OptOps.THREAD, 0, 2), Opt(OptOps.THREAD, 1, 2)], "only one THREAD opt per kernel"),
    ([Opt(OptOps.THREAD, 2, 2)], "a reduce loop can run on threads only in a kernel with no output loops"),
    ([Opt(OptOps.UPCAST, 7, 2)], "axis must be an int in 0..2"),
    ([Opt(OptOps.SWAP, 0, 2)], "SWAP exchanges two loops of the same kind"),
    ([Opt(OptOps.PACK, 1, 2)], "buffer 2 changes with loop gidx1"),
    ([Opt(OptOps.PACK, 1, 0)], "PACK's second number is the buffer's position in kernel.bufs"),
    ([Opt(OptOps.PACK, 1, 1), Opt(OptOps.UPCAST, 1, 2)], "PACK must come last"),
    ([Opt(OptOps.UPCAST, 1, 16), Opt(OptOps.UPCAST, 1, 2), Opt(OptOps.UPCAST, 0, 8),
      Opt(OptOps.UNROLL, 0, 12)], "would hold 3072 copies of each scalar value"),
    ([Opt(OptOps.TILE, 1, 32)], "a tile as large as the axis moves nothing"),
]


@pytest.mark.parametrize("opts, message", ERRORS, ids=[e[1][:40] for e in ERRORS])
def test_illegal_opts_name_the_opt_the_kernel_and_what_is_valid(opts: list[Opt], message: str):
    with pytest.raises(OptError) as error:
        apply_opts(matmul_kernel(), opts)
    text = str(error.value)
    assert message in text and "r_8_32_12" in text and "The kernel's axes are" in text
    assert repr(opts[-1]) in text


def test_a_buffer_read_after_the_reduce_is_packed_outside_its_loops():
    """PACK copies a tile before a loop. The value added after a sum is read when the reduce's loops
    have closed: its tile may be copied before the outermost reduce loop, not inside the reduce
    (the linearizer then had no block to put the read in, an IndexError that a BEAM search met on a
    GPT's gradient). Every PACK of every buffer at every axis, after some UPCASTs, is an OptError or
    runs and matches numpy."""
    item = kernel_item("sum two axes plus")  # full shape (8, 16, 3, 5): reduce loops at axes 2 and 3
    expected = run(item, "NUMPY")
    tried = 0
    for upcasts in ([], [Opt(OptOps.UPCAST, 1, 4)], [Opt(OptOps.UPCAST, 1, 4), Opt(OptOps.UPCAST, 0, 2)]):
        k = apply_opts(Kernel(item.ast), upcasts)
        for axis in range(len(k.full_shape)):
            for position in range(1, len(k.bufs)):
                opts = [*upcasts, Opt(OptOps.PACK, axis, position)]
                try:
                    apply_opts(Kernel(item.ast), opts)
                except OptError:
                    continue
                tried += 1
                assert_matches(run(item, "C", opts), expected, False, f"{opts}")
    assert tried >= 6
    inner = [Opt(OptOps.UPCAST, 1, 4), Opt(OptOps.PACK, 3, 3)]  # buffer 3 is read after the reduce
    with pytest.raises(OptError, match="is read after the reduce"):
        apply_opts(Kernel(item.ast), inner)
    outer = [Opt(OptOps.UPCAST, 1, 4), Opt(OptOps.PACK, 2, 3)]
    assert_matches(run(item, "C", outer), expected, False, f"{outer}")


def test_no_opts_after_linearizing_and_none_on_an_empty_axis():
    k = matmul_kernel()
    linearize(k)
    with pytest.raises(OptError, match="already linearized"):
        apply_opts(k, [Opt(OptOps.UPCAST, 1, 2)])
    with pytest.raises(OptError, match="the axis is empty"):
        apply_opts(Kernel(kernel_item("empty").ast), [Opt(OptOps.UPCAST, 0, 2)])


def test_without_openmp_the_same_kernel_runs_on_one_thread(tmp_path):
    """A compiler without OpenMP (here: TINYEDU_NO_OPENMP=1) ignores the pragma; the kernel is the same
    and still correct, and the heuristics no longer ask for threads."""
    import os
    import subprocess
    import sys
    import textwrap
    from pathlib import Path

    script = textwrap.dedent("""
        import numpy as np
        from tinyedu import Tensor
        from tinyedu.runtime.device import Device
        from tinyedu.runtime.ops_c import Compiler
        assert "-fopenmp" not in Compiler().flags and Device["C"].threads() == 1
        X = np.random.default_rng(0).standard_normal((512, 512)).astype(np.float32)
        got = (Tensor(X) @ Tensor(X)).numpy()
        np.testing.assert_allclose(got, X @ X, rtol=1e-3, atol=1e-3)
        print("ok")
    """)
    repo = Path(__file__).resolve().parents[1]
    env = {**os.environ, "TINYEDU_NO_OPENMP": "1", "TINYEDU_CACHE": str(tmp_path), "PYTHONPATH": str(repo)}
    result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0 and "ok" in result.stdout, result.stderr[-2000:]
    # and the C of an explicit THREAD opt, compiled without -fopenmp, runs (the pragma is ignored)
    item = kernel_item("matmul")
    source = render_c("r", linearize(apply_opts(Kernel(item.ast), [Opt(OptOps.THREAD, 0, 2)])))
    assert "#pragma omp parallel for" in source
    plain = Compiler()
    plain.flags = tuple(f for f in plain.flags if f != "-fopenmp")
    out = Buffer("C", 8 * 32, item.out.dtype)
    CProgram("r", plain.build(source))([out, *(x.realized for x in item.inputs)])
    np.testing.assert_allclose(out.as_numpy(), run(item, "NUMPY"), rtol=1e-5, atol=1e-5)
