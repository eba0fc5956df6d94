"""Tensors past 2^31 elements: index arithmetic in 64 bits where a buffer needs it, on every device.

A 32-bit `int` index wraps around at 2^31 = 2,147,483,648: a kernel over more elements than that
computes negative indices (reading and writing outside its buffers) or loops zero times. The
linearizer uses 64-bit indices for a kernel whose buffers or loops need them (and 32-bit ones
otherwise, which read better and run as fast), and every device renders them: C, NEON and LLVM
as 64-bit integers, PYTHON by wrapping its index values at 64 bits instead of 32.

uint8 keeps the tensors at about 2 GB each. C (and NEON on an arm64 machine) runs whole kernels
over 2^31 + 64 elements (elementwise, sum) and reads a (40000, 60000) tensor; PYTHON (an
interpreter) and NEON under qemu (an emulator) would take minutes to hours for that. Every device
runs kernels of a few iterations at offsets past 2^31 in a buffer of 2^31 + 64 elements, which
need the same 64-bit indices, and the sources of the wide kernels are checked on every renderer
(`long long` loops in C and NEON, `i64` phis in LLVM IR): the loops are the linearizer's, the same
for every device. Each test is skipped, saying so, when this machine has too little free memory.
"""

from __future__ import annotations

import os
import re

import numpy as np
import pytest

from tinyedu import Device, Tensor, dtypes
from tinyedu.codegen.index import index_dtype, largest_value
from tinyedu.codegen.kernel import Kernel
from tinyedu.codegen.linearizer import linearize
from tinyedu.core.ops import LoadOps
from tinyedu.core.uops import UOps
from tinyedu.engine.schedule import create_schedule
from tinyedu.renderer.cstyle import render_c
from tinyedu.renderer.llvmir import render_llvm
from tinyedu.renderer.neon import render_neon
from tinyedu.runtime.device import DeviceUnavailable
from tinyedu.shape import MulNode, NumNode, SumNode, Variable

N = 2**31 + 64
GiB = 1 << 30


def available_memory() -> int:
    """Bytes this process can still allocate without swapping (MemAvailable on Linux)."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")


def need(gib: float, device: str, whole_kernels: bool = False) -> None:
    """Skip unless `device` runs here (and, for kernels over 2^31 elements, runs them natively)
    and about `gib` GiB of memory are free."""
    try:
        Device[device].check_runnable()  # CUDA compiles anywhere, runs only on a GPU
    except DeviceUnavailable as missing:
        pytest.skip(str(missing))
    if whole_kernels and emulated(device):
        pytest.skip(f"{device} runs under an emulator here: test_offsets_past_2_31 covers it")
    free = available_memory()
    if free < gib * GiB:
        pytest.skip(f"needs about {gib} GiB of free memory for tensors past 2^31 elements; this machine has "
                    f"{free / GiB:.1f} GiB available")


def emulated(device: str) -> bool:
    """PYTHON interprets UOps; NEON on a non-arm64 machine runs under qemu: both far too slow for
    kernels over 2^31 elements."""
    return device == "PYTHON" or (device == "NEON" and not Device["NEON"].native)


def ones_at_the_end() -> Tensor:
    """N uint8: zeros, then 64 ones (padding writes the zeros: no host array of 2 GB)."""
    return Tensor.ones(64, dtype=dtypes.uint8).pad(((N - 64, 0),)).contiguous().realize()


@pytest.mark.slow
@pytest.mark.parametrize("device", ["C", "NEON"])
def test_elementwise_and_sum_past_2_31_elements(device: str, monkeypatch: pytest.MonkeyPatch):
    """Was: zeros for the elementwise op and 0 for the sum (the loop bound wrapped negative)."""
    need(5, device, whole_kernels=True)
    monkeypatch.setenv("DEVICE", device)
    x = ones_at_the_end()
    assert x.shape == (N,)
    y = (x + 1).realize()
    assert y[N - 65:].numpy().tolist() == [1] + [2] * 64  # the last 64 elements are past 2^31
    assert y[:4].numpy().tolist() == [1, 1, 1, 1]
    assert x.sum().item() == 64
    assert y.max().item() == 2
    del y


def row_sums(rows: int, cols: int, modulus: int) -> np.ndarray:
    """sum over c < cols of (r + c) % modulus, for every row r (exactly, without the big array)."""
    r = np.arange(rows, dtype=np.int64)
    full, rest = divmod(cols, modulus)
    total = np.full(rows, full * modulus * (modulus - 1) // 2, dtype=np.int64)
    for c in range(rest):
        total += (r + full * modulus + c) % modulus
    return total


@pytest.mark.slow
@pytest.mark.parametrize("device", ["C", "NEON"])
def test_reading_a_40000_by_60000_tensor(device: str, monkeypatch: pytest.MonkeyPatch):
    """Was: a crash (rows from 35792 on start past 2^31: gidx0*60000 wrapped negative)."""
    need(4, device, whole_kernels=True)
    monkeypatch.setenv("DEVICE", device)
    rows, cols = 40000, 60000
    x = ((Tensor.arange(rows).reshape(rows, 1) + Tensor.arange(cols).reshape(1, cols)) % 251)
    x = x.cast(dtypes.uint8).contiguous().realize()
    np.testing.assert_array_equal(x.sum(1).numpy(), row_sums(rows, cols, 251))
    corner = x[rows - 3:, cols - 4:].numpy()
    expected = (np.arange(rows - 3, rows)[:, None] + np.arange(cols - 4, cols)[None, :]) % 251
    np.testing.assert_array_equal(corner, expected)


@pytest.mark.slow
@pytest.mark.parametrize("device", ["C", "LLVM", "NEON", "PYTHON"])
def test_offsets_past_2_31(device: str):
    """A few elements on each side of 2^31, read from a buffer of 2^31 + 64 elements, on every
    device (the buffer is made on C and copied, which runs no kernel)."""
    need(7 if device == "NEON" else 5, device)
    big = Tensor.ones(64, dtype=dtypes.uint8, device="C").pad(((N - 64, 0),)).contiguous().realize()
    x = big.to(device).realize()
    del big
    window = x[N - 68:N - 60]  # 4 zeros, then 4 of the ones: indices 2^31 - 4 ... 2^31 + 3
    assert (window + 1).numpy().tolist() == [1, 1, 1, 1, 2, 2, 2, 2]
    assert window.sum().item() == 4
    assert x[N - 1:].numpy().tolist() == [1]  # the very last element


# ---- which kernels get 64-bit indices (no big memory needed: kernels are only built) ----
def kernel_of(t: Tensor) -> Kernel:
    items = [i for i in create_schedule([t.lazydata]) if not isinstance(i.ast.op, LoadOps)]
    return Kernel(items[-1].ast)


@pytest.mark.parametrize("build, wide", [
    (lambda: Tensor.ones(64, dtype=dtypes.uint8).contiguous().pad(((N - 64, 0),)).contiguous(), True),
    (lambda: Tensor.empty(40000, 60000, dtype=dtypes.uint8).sum(1), True),   # gidx0*60000 passes 2^31
    (lambda: Tensor.empty(30000, 60000, dtype=dtypes.uint8).sum(1), False),  # 1.8e9 elements: fits
    (lambda: Tensor.empty(1).expand(3 * 10**9).max(), True),                 # a reduce loop of 3e9 (a
    # float sum that long is split into blocks, tinyedu/codegen/sum_blocks.py: its loops are short)
    (lambda: Tensor.empty(1000, 1000) @ Tensor.empty(1000, 1000), False),
], ids=["pad", "40000x60000", "30000x60000", "expand", "matmul"])
def test_index_dtype_is_int64_only_where_needed(build, wide: bool):
    kernel = kernel_of(build())
    assert index_dtype(kernel) == (dtypes.int64 if wide else dtypes.int32)
    uops = linearize(kernel)
    loops = [u for u in uops if u.op is UOps.RANGE]
    assert loops and all(u.dtype == index_dtype(kernel) for u in loops)
    if wide:
        assert "for (long long " in render_c(kernel.name, uops)
        assert "for (long long " in render_neon(kernel.name, uops)
        counters = re.findall(r"%[gr]idx\d+ = phi (\w+)", render_llvm(kernel.name, uops))
        assert counters and set(counters) == {"i64"}  # every loop counter of the LLVM IR


def test_partial_sums_count_toward_the_index_width():
    """2*a + 2^31 - 2*a never exceeds 2^31 itself, but its first partial sum can: int64."""
    a = Variable("a", 0, 2**29)
    total = SumNode([MulNode(a, 2), NumNode(2**31 - 1), MulNode(a, -2)])
    assert total.max <= 2**31 - 1 + 2**30  # the whole is bounded...
    assert largest_value(total) > 2**31 - 1  # ...but some partial sum is not
