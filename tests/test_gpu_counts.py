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
    """A 16 x 16 tile copied column by column, a sector (8 floats) of each of 4 columns per warp
    (lane l writes row l % 8, column l // 8): row-major, rows 16 words apart put rows r and r + 2 in
    one bank (4 passes); padded to 17 or 18 words some rows still meet; padded to 20, the warp's 32
    words are in 32 banks. Copied along its rows it stays as it is."""
    down = [(0, 2, 8), (1, 16, 1), (0, 8, 1)]  # (axis, size, scale): a sector of rows, a column, a row
    assert tile_layout([16, 16], down, 256, vector=False) == [20, 1, 16 * 20]
    assert tile_layout([16, 16], [(0, 16, 1), (1, 16, 1)], 256, vector=False) == [16, 1, 256]
    lanes = np.arange(32)
    assert bank_passes(lanes, lanes % 8 * 16 + lanes // 8, 4) == (1, 3)
    assert bank_passes(lanes, lanes % 8 * 20 + lanes // 8, 4) == (1, 0)
    # rows read as float4 (a register block): only paddings that keep them aligned, 0 or 4
    assert tile_layout([16, 16, 4], [(0, 2, 8), (1, 16, 1), (2, 4, 1), (0, 8, 1)], 256, vector=True) == \
        [68, 4, 1, 16 * 68]


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


def test_the_register_blocked_matmul_moves_float4s_without_bank_conflicts():
    """The heuristics' plan for a large matmul (4 x 4 outputs per thread, 16-wide shared tiles), at
    n = 128: every global access is a float4 (each thread copies 4 neighbouring elements of each
    tile, and stores 4 rows of 4 outputs), so a warp request moves 16 sectors, all of them used; the
    A tile is stored transposed with rows of 64 + 4 floats, B as it is, so every read of a thread's 4
    rows or 4 columns is one aligned float4 and no shared access has a bank conflict."""
    a = np.random.default_rng(0).standard_normal((128, 128)).astype(np.float32)
    b = np.random.default_rng(1).standard_normal((128, 128)).astype(np.float32)
    opts = [Opt(OptOps.UPCAST, 0, 4), Opt(OptOps.UPCAST, 1, 4), Opt(OptOps.GLOBAL, 0, 0),
            Opt(OptOps.GLOBAL, 1, 0), Opt(OptOps.LOCAL, 0, 16), Opt(OptOps.LOCAL, 1, 16),
            Opt(OptOps.TILE, 4, 16), Opt(OptOps.PACK, 5, 1), Opt(OptOps.PACK, 5, 2)]
    traffic, out = counts(Tensor(a) @ Tensor(b), opts, a, b)
    np.testing.assert_allclose(out.reshape(128, 128), a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
    assert traffic.bank_conflicts == 0
    workgroups, tiles, warps = 4, 8, 8
    # per tile and warp: A's copy 4 scalar stores (transposed), B's one float4 store, 16 float4
    # reads of each tile
    assert traffic.shared_requests == workgroups * tiles * warps * (4 + 1 + 2 * 16)
    # per tile and warp one float4 load of each input; at the end 4 float4 stores per warp
    assert traffic.global_requests == workgroups * warps * (tiles * 2 + 4)
    assert traffic.sectors_per_request == 16.0 and traffic.efficiency == 1.0
