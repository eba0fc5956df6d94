"""Hostile or malformed input gets a clear error up front: no huge allocation, no hang, no crash, no guess.

(safetensors headers are tested in tests/test_state.py, the compile cache in tests/test_compile_cache.py.)
"""

from __future__ import annotations

import gzip
import shutil
import struct
import subprocess
import tracemalloc
import zlib
from pathlib import Path

import numpy as np
import pytest

from tinyedu import Tensor
from tinyedu.datasets import read_idx
from tinyedu.export import export_c
from tinyedu.nn import Linear

GIB = 1 << 30


def _idx_header(shape: tuple[int, ...]) -> bytes:
    return bytes([0, 0, 0x08, len(shape)]) + b"".join(s.to_bytes(4, "big") for s in shape)


def _gzip_of_zeros(head: bytes, zeros: int, claimed_size: int | None = None) -> bytes:
    """A gzip file of `head` then `zeros` zero bytes (a gigabyte fits in about a megabyte), made without
    holding the zeros: the deflate output of a flushed MiB of zeros is the same every time, so it is
    repeated. Its CRC is left 0 (a reader that stops where the header says never reaches it); its size
    field says `claimed_size` (default: the true size)."""
    mib = 1 << 20
    assert zeros % mib == 0
    deflate = zlib.compressobj(9, zlib.DEFLATED, -15)
    first = deflate.compress(head + bytes(mib)) + deflate.flush(zlib.Z_FULL_FLUSH)
    again = deflate.compress(bytes(mib)) + deflate.flush(zlib.Z_FULL_FLUSH)
    body = first + again * (zeros // mib - 1) + deflate.flush()
    size = len(head) + zeros if claimed_size is None else claimed_size
    return b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff" + body + struct.pack("<II", 0, size % 2**32)


def _refused_without_inflating(path: Path, match: str) -> None:
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match=match):
            read_idx(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 << 20, f"read_idx allocated {peak} bytes before refusing"


def test_a_gzip_that_inflates_past_its_header_is_refused_without_inflating_it(tmp_path: Path) -> None:
    """A megabyte that inflates to a gigabyte, with a header that claims 7,856 bytes: refused by the gzip
    trailer's size, or, when the trailer lies to match the header, after reading 7,857 bytes."""
    path = tmp_path / "bomb-idx3-ubyte.gz"
    path.write_bytes(_gzip_of_zeros(_idx_header((10, 28, 28)), GIB))
    assert path.stat().st_size < 1_200_000
    _refused_without_inflating(path, "needs 7856 bytes, the gzip trailer says the data inflates to 1073741")
    path.write_bytes(_gzip_of_zeros(_idx_header((10, 28, 28)), GIB, claimed_size=7856))
    _refused_without_inflating(path, "longer than its header says: shape \\(10, 28, 28\\) needs 7856 bytes")


def test_a_gzip_whose_size_does_not_match_its_header_is_refused_before_inflating(tmp_path: Path) -> None:
    path = tmp_path / "bomb.gz"
    path.write_bytes(_gzip_of_zeros(_idx_header((GIB + 4096,)), GIB))  # a claim the stream cannot meet
    _refused_without_inflating(path, "the gzip trailer says the data inflates to")
    path.write_bytes(_gzip_of_zeros(_idx_header((1 << 16, 1 << 16)), 1 << 20))  # 4 GiB from 1 KB
    _refused_without_inflating(path, "more than a gzip file of .* bytes can inflate to")


def test_a_corrupt_gzip_stream_names_the_file(tmp_path: Path) -> None:
    data = np.random.default_rng(0).integers(0, 256, 5000).astype(np.uint8)
    good = gzip.compress(_idx_header((5000,)) + data.tobytes())
    path = tmp_path / "labels-idx1-ubyte.gz"
    path.write_bytes(good)
    np.testing.assert_array_equal(read_idx(path), data)
    corrupt = bytearray(good)
    corrupt[len(good) // 2: len(good) // 2 + 16] = bytes(range(16))
    path.write_bytes(bytes(corrupt))
    with pytest.raises(ValueError, match=f"read_idx: {path} is a damaged or truncated gzip file"):
        read_idx(path)
    path.write_bytes(good[:40])
    with pytest.raises(ValueError, match=f"read_idx: {path} is a damaged or truncated gzip file"):
        read_idx(path)


def test_argmax_past_2_31_positions_is_a_clear_error_up_front() -> None:
    """Indices are int32; a stride-0 view has 2^31 positions without 2^31 elements of memory."""
    huge = Tensor.zeros(1).expand(2**31)
    for call, match in [(lambda: huge.argmax(), "argmax: the flattened tensor .* has 2147483648 positions"),
                        (lambda: huge.argmin(0), "argmin: axis 0 .* has 2147483648 positions"),
                        (lambda: Tensor.zeros(1, 1).expand(2**16, 2**15).argmax(), "int32"),
                        (lambda: Tensor.zeros(1, 1).expand(2, 2**31).argmax(1, keepdim=True), "axis 1")]:
        with pytest.raises(ValueError, match=match):
            call()
    assert Tensor.zeros(1, 1).expand(2**16, 2**15).argmax(0).shape == (2**15,)  # each axis fits


@pytest.mark.parametrize("name", ["C:7x", "C:", "C:01", "C:0:0", "C:-0", "numpy:00"])
def test_malformed_device_strings_are_refused(name: str) -> None:
    with pytest.raises(ValueError, match=f"device: '{name}' is not a valid device string; write"):
        Tensor([1.0], device=name)


def test_device_names_that_are_valid() -> None:
    for name, canonical in [("C", "C"), ("c", "C"), ("C:0", "C"), ("numpy:0", "NUMPY"), ("c:1", "C:1"),
                            ("python:12", "PYTHON:12")]:
        assert Tensor([1.0], device=name).device == canonical


def test_flip_refuses_a_dimension_given_twice() -> None:
    x = Tensor.ones(2, 3)
    for dims in [(0, 0), (1, -1), (0, 1, 0)]:
        with pytest.raises(ValueError, match="appears multiple times in the list of dims"):
            x.flip(*dims)
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError, match="dim 0 appears multiple times in the list of dims"):
        torch.ones(2, 3).flip(0, 0)


@pytest.fixture(scope="module")
def tiny_program(tmp_path_factory: pytest.TempPathFactory):
    if shutil.which("cc") is None:
        pytest.skip("no C compiler (cc) to build the exported program")
    Tensor.manual_seed(0)
    model = Linear(4, 2)
    program = export_c(model, Tensor.ones(1, 4), name="tiny")
    return program, program.compile(tmp_path_factory.mktemp("tiny")), model


@pytest.mark.parametrize("skip", ["-5", "abc", "12x", "", "1e3", "+4", " 4", "99999999999999999999",
                                  "1000000000000001", "18446744073709551617"])
def test_the_exported_program_refuses_a_bad_skip(tiny_program, skip: str) -> None:
    program, executable, _ = tiny_program
    done = subprocess.run(program.command(executable, "-s", skip), input=b"", capture_output=True)
    assert done.returncode == 2 and b"-s takes a number of bytes to skip (digits, 0 to 10^15)" in done.stderr
    assert done.stdout == b""


def test_the_exported_program_skips_a_header_and_refuses_a_short_input(tiny_program) -> None:
    program, executable, model = tiny_program
    x = np.arange(8, dtype=np.float32).reshape(2, 1, 4)
    done = subprocess.run(program.command(executable, "-s", "6"), input=b"header" + x.tobytes(),
                          capture_output=True)
    assert done.returncode == 0, done.stderr
    expected = np.stack([model(Tensor(b)).numpy() for b in x])
    np.testing.assert_allclose(np.frombuffer(done.stdout, np.float32).reshape(expected.shape), expected,
                               rtol=1e-6)
    short = subprocess.run(program.command(executable, "-s", "100"), input=b"\0" * 20, capture_output=True)
    assert short.returncode == 1
    assert b"the input has 20 bytes, fewer than the 100 that -s skips" in short.stderr
    missing = subprocess.run(program.command(executable, "-s"), input=b"", capture_output=True)
    assert missing.returncode == 2 and b"usage:" in missing.stderr
