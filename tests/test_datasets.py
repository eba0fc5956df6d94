"""MNIST: reading the real IDX files (from $MNIST_PATH), damaged files, and the checked download,
tested offline against a local HTTP server that serves the same files."""

from __future__ import annotations

import functools
import gzip
import hashlib
import http.server
import os
import shutil
import threading
from pathlib import Path
from typing import Iterator

import numpy as np
import pytest

from tinyedu.datasets import MNIST_FILES, MNIST_MD5, mnist, read_idx

MNIST_PATH = os.environ.get("MNIST_PATH", "")
TEST_FILES = MNIST_FILES["test"]


@pytest.mark.mnist
def test_the_real_test_set() -> None:
    images, labels = mnist(MNIST_PATH)
    assert images.shape == (10000, 28, 28) and images.dtype == np.uint8
    assert labels.shape == (10000,) and labels.dtype == np.int64
    assert labels[:10].tolist() == [7, 2, 1, 0, 4, 1, 4, 9, 5, 9]  # the well-known first test digits
    assert np.bincount(labels).tolist() == [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]
    assert images.max() == 255 and images.min() == 0
    for name in TEST_FILES:  # what was read is the published file
        digest = hashlib.md5((Path(MNIST_PATH) / name).read_bytes()).hexdigest()
        assert digest == MNIST_MD5[name]


@pytest.mark.mnist
def test_mnist_path_variable_and_uncompressed_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in TEST_FILES:
        raw = gzip.decompress((Path(MNIST_PATH) / name).read_bytes())
        (tmp_path / name.removesuffix(".gz")).write_bytes(raw)
    monkeypatch.setenv("MNIST_PATH", str(tmp_path))
    images, labels = mnist()
    reference_images, reference_labels = mnist(MNIST_PATH)
    np.testing.assert_array_equal(images, reference_images)
    np.testing.assert_array_equal(labels, reference_labels)


def test_missing_folder_and_bad_split(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no t10k-images-idx3-ubyte.gz"):
        mnist(tmp_path)
    with pytest.raises(ValueError, match="split must be 'train' or 'test'"):
        mnist(tmp_path, split="validation")


def _idx(shape: tuple[int, ...], values: np.ndarray | None = None) -> bytes:
    header = bytes([0, 0, 0x08, len(shape)]) + b"".join(s.to_bytes(4, "big") for s in shape)
    data = values if values is not None else np.arange(int(np.prod(shape)), dtype=np.uint8)
    return header + data.astype(np.uint8).tobytes()


def test_read_idx_and_damaged_files(tmp_path: Path) -> None:
    path = tmp_path / "x.idx"
    path.write_bytes(_idx((2, 3)))
    np.testing.assert_array_equal(read_idx(path), np.arange(6).reshape(2, 3))
    path.write_bytes(gzip.compress(_idx((4,))))            # gzip is recognised by its magic number
    np.testing.assert_array_equal(read_idx(path), np.arange(4))
    cases = [(_idx((2, 3))[:-1], "truncated: shape \\(2, 3\\) needs 18 bytes, the file has 17"),
             (_idx((2, 3)) + b"\0", "longer than its header says"),
             (_idx((5, 5))[:9], "truncated inside its header"),
             (b"\x01\x02\x08\x01", "not an IDX file"),
             (bytes([0, 0, 0x42, 1, 0, 0, 0, 1, 7]), "unknown IDX type code 0x42"),
             (gzip.compress(_idx((100,)))[:-12], "damaged or truncated gzip")]
    for raw, match in cases:
        path.write_bytes(raw)
        with pytest.raises(ValueError, match=match):
            read_idx(path)


def test_labels_must_be_digits(tmp_path: Path) -> None:
    (tmp_path / TEST_FILES[0]).write_bytes(gzip.compress(_idx((2, 28, 28))))
    (tmp_path / TEST_FILES[1]).write_bytes(gzip.compress(_idx((2,), np.array([3, 12]))))
    with pytest.raises(ValueError, match="holds label 12"):
        mnist(tmp_path)
    (tmp_path / TEST_FILES[1]).write_bytes(gzip.compress(_idx((3,))))
    with pytest.raises(ValueError, match="expected images \\(n, 28, 28\\) and n labels"):
        mnist(tmp_path)


@pytest.fixture
def mirror(tmp_path: Path) -> Iterator[tuple[str, Path, list[str]]]:
    """A local HTTP server over a folder (the test fills it), and the list of paths requested."""
    folder = tmp_path / "mirror"
    folder.mkdir()
    requests: list[str] = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            requests.append(self.path)

    handler = functools.partial(Handler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/", folder, requests
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.mnist
def test_download_checks_the_published_sums(mirror, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url, folder, requests = mirror
    for name in TEST_FILES:
        shutil.copy(Path(MNIST_PATH) / name, folder / name)
    monkeypatch.delenv("MNIST_PATH")
    cache = tmp_path / "cache"
    images, labels = mnist(url=url, cache_dir=cache)
    assert images.shape == (10000, 28, 28) and labels[0] == 7
    assert sorted(requests) == sorted(f"/{name}" for name in TEST_FILES)
    mnist(url=url, cache_dir=cache)                      # the second time, from the checked cache
    assert len(requests) == 2
    monkeypatch.setenv("TINYEDU_DATA", str(tmp_path / "data"))  # the default cache follows TINYEDU_DATA
    mnist(url=url)
    assert (tmp_path / "data" / "mnist" / TEST_FILES[0]).is_file()


def test_a_download_with_the_wrong_checksum_is_refused(mirror, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    url, folder, _ = mirror
    monkeypatch.delenv("MNIST_PATH", raising=False)
    for name in TEST_FILES:
        (folder / name).write_bytes(gzip.compress(_idx((1, 28, 28))))  # valid IDX, but not MNIST
    cache = tmp_path / "cache"
    with pytest.raises(ValueError, match="published sum is 9fb629c4189551a2d022fa330f9573f3"):
        mnist(url=url, cache_dir=cache)
    assert list(cache.iterdir()) == []                   # nothing damaged is kept


def test_an_unreachable_mirror_says_what_to_do(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MNIST_PATH", raising=False)
    with pytest.raises(ConnectionError, match="set MNIST_PATH"):
        mnist(url="http://127.0.0.1:9/", cache_dir=tmp_path)  # port 9 (discard): nothing listens
