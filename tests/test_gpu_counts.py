"""The lockstep emulator's memory counts (tinyedu/runtime/gpu_counts.py), on kernels whose counts can
be worked out by hand: 32-byte sectors per warp (coalesced vs strided), shared-memory bank
conflicts (a tile stored transposed), barriers executed and idle threads."""

from __future__ import annotations

import numpy as np
import pytest

from tinyedu import Tensor
from tinyedu.codegen.gpu import tile_layout
from tinyedu.codegen.opts import Opt, OptOps
from tinyedu.core.dtype import dtypes
from tinyedu.core.ops import LazyOp, LoadOps
from tinyedu.engine.lower import lower
from tinyedu.engine.schedule import create_schedule
from tinyedu.runtime.device import Buffer
from tinyedu.runtime.gpu_counts import MemoryCounts, bank_passes, global_sectors


@pytest.fixture(autouse=True)
def python_as_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHON_GPU", "1")


def ast_of(t: Tensor) -> LazyOp:
    return [i.ast for i in create_schedule([t.lazydata]) if not isinstance(i.ast.op, LoadOps)][-1]


def counts(t: Tensor, opts: list[Opt], *inputs: np.ndarray) -> tuple[MemoryCounts, np.ndarray]:
    """Run `t`'s kernel on PYTHON in lockstep with these opts: its counts and its output."""
    ast = ast_of(t)
    program = lower("PYTHON", ast, opts)
    out = Buffer("PYTHON", ast.arg.st.size, ast.arg.dtype)
    program.runner([out, *(Buffer("PYTHON", x.size, dtypes.float32).copyin(x) for x in inputs)])
    return program.runner.traffic, out.as_numpy().copy()


def test_sectors_of_one_warp_request():
    threads = np.arange(32)
    assert global_sectors(threads, threads, 4) == (1, 4, 128)            # 128 consecutive bytes: 4 sectors
    assert global_sectors(threads, threads * 1024, 4) == (1, 32, 128)    # 4 KB apart: one sector each
    assert global_sectors(threads, threads * 2, 4) == (1, 8, 128)        # every other float: 2x the sectors
    assert global_sectors(threads, np.zeros(32, dtype=int), 4) == (1, 1, 4)  # one float for all
    assert global_sectors(np.arange(64), np.arange(64), 4) == (2, 8, 256)      # two warps


def test_bank_conflicts_of_one_warp_request():
    threads = np.arange(32)
    assert bank_passes(threads, threads, 4) == (1, 0)               # one word per bank
    assert bank_passes(threads, np.zeros(32, dtype=int), 4) == (1, 0)  # one word for all: broadcast
    assert bank_passes(threads, threads * 2, 4) == (1, 1)           # stride 2: two words in 16 banks
    assert bank_passes(threads, threads * 32, 4) == (1, 31)         # stride 32: every word in bank 0
    assert bank_passes(threads, threads * 33, 4) == (1, 0)          # padded to 33: all banks again


def test_a_coalesced_copy_and_a_transposing_one():
    x = np.arange(64 * 64, dtype=np.float32).reshape(64, 64)
    opts = [Opt(OptOps.GLOBAL, 0, 0), Opt(OptOps.GLOBAL, 1, 0), Opt(OptOps.LOCAL, 1, 32)]
    straight, out = counts(Tensor(x) * 2, opts, x)  # lid0 walks a row: neighbours are 4 bytes apart
    np.testing.assert_array_equal(out.reshape(64, 64), x * 2)
    # 64 x 2 workgroups of one warp; each warp loads and stores 32 consecutive floats: 4 sectors each
    assert (straight.global_requests, straight.global_sectors) == (2 * 128, 4 * 2 * 128)
    assert straight.efficiency == 1.0
    flipped, out = counts(Tensor(x).T * 2, opts, x)  # the loads walk a column: 256 bytes apart
    np.testing.assert_array_equal(out.reshape(64, 64), x.T * 2)
    assert flipped.global_sectors == 128 * 4 + 128 * 32   # stores coalesced, loads one sector per thread
    assert flipped.sectors_per_request == pytest.approx(18.0)


def test_a_tile_copied_down_its_columns_gets_padded_rows():
    """A 16 x 16 tile copied column by column (the warp's lane l writes row l % 16, column l // 16):
    row-major, the 16 rows of a column are words 0, 16, 32, ... in banks 0 and 16 only, 8 words each:
    8 passes. Rows padded to 17 words still put lanes 15 and 16 in one bank (15 * 17 = 255, 256);
    padded to 18, a column's words are the 16 even banks and the next column's the odd ones."""
    assert tile_layout([16, 16], [1, 0], [16, 16], 256) == [18, 1, 16 * 18]
    assert tile_layout([16, 16], [0, 1], [16, 16], 256) == [16, 1, 256]  # copied along its rows: as it is
    lanes = np.arange(32)
    assert bank_passes(lanes, lanes % 16 * 16 + lanes // 16, 4) == (1, 7)
    assert bank_passes(lanes, lanes % 16 * 18 + lanes // 16, 4) == (1, 0)


def test_the_tiled_matmul_has_no_bank_conflicts():
    """16 x 16 workgroups, a 16-wide reduce tile: the A tile is copied down its columns (padded, as
    above), B along its rows; the reads are broadcasts or consecutive words. A 32 x 32 x 32 matmul:
    4 workgroups, 2 tiles each, 3 barriers per tile."""
    a = np.random.default_rng(0).standard_normal((32, 32)).astype(np.float32)
    b = np.random.default_rng(1).standard_normal((32, 32)).astype(np.float32)
    opts = [Opt(OptOps.GLOBAL, 0, 0), Opt(OptOps.GLOBAL, 1, 0), Opt(OptOps.LOCAL, 0, 16),
            Opt(OptOps.LOCAL, 1, 16), Opt(OptOps.TILE, 4, 16), Opt(OptOps.PACK, 5, 1), Opt(OptOps.PACK, 5, 2)]
    traffic, out = counts(Tensor(a) @ Tensor(b), opts, a, b)
    np.testing.assert_allclose(out.reshape(32, 32), a @ b, rtol=1e-5, atol=1e-5)
    assert traffic.bank_conflicts == 0
    assert traffic.barriers == 4 * 2 * 3
    assert traffic.idle_steps == 0
    assert traffic.sectors_per_request == 4.0  # every global load and store coalesced


def test_a_group_reduce_leaves_threads_idle_while_one_combines():
    x = np.ones((4, 64), dtype=np.float32)
    traffic, out = counts(Tensor(x).sum(1), [Opt(OptOps.GROUP, 1, 64), Opt(OptOps.GLOBAL, 0, 0)], x)
    np.testing.assert_array_equal(out, [64] * 4)
    assert traffic.barriers == 4     # one per workgroup
    assert 0 < traffic.idle_steps < traffic.thread_steps
    # the combine runs in thread 0 only: 63 of 64 threads sit out each of its steps
    assert traffic.idle_steps % 63 == 0
