"""Datasets: small generated sets for the early stages, and MNIST.

Every loader returns numpy arrays `(X, y)` with one sample per row of `X` and one int64 label per
entry of `y`. Generated sets (float64 points) take a `seed`, so a notebook draws the same points on
every machine. MNIST gives uint8 images of shape (n, 28, 28), read from the IDX files of the
original distribution: from a folder you name, from `$MNIST_PATH`, or downloaded once into a
cache folder and checked against the published checksums.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import os
import shutil
import tempfile
import urllib.error
import urllib.request
import zlib
from pathlib import Path
from typing import Any, Callable

import numpy as np

# ---------------------------------------------------------------------------------------------
# Generated 2-D sets (stage 0): small enough for scalar autograd, not linearly separable.
# ---------------------------------------------------------------------------------------------


def make_moons(n_samples: int = 100, noise: float = 0.1, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Two interleaving half circles, the classic "a line cannot separate this" toy problem.

    Returns `X` of shape (n_samples, 2) and labels `y` of shape (n_samples,) in {0, 1}: 0 for the
    upper moon (centred at (0, 0)), 1 for the lower one (centred at (1, 0.5) and flipped). These
    are the same conventions as scikit-learn's `make_moons`; for a hinge loss, which wants
    labels in {-1, +1}, use `2 * y - 1`. Gaussian noise with standard deviation `noise` is added
    to every coordinate, then the rows are shuffled, all from `np.random.default_rng(seed)`.
    """
    if not isinstance(n_samples, int) or isinstance(n_samples, bool) or n_samples < 2:
        raise ValueError(f"make_moons: n_samples must be an int >= 2 (one point per moon at least), "
                         f"got {n_samples!r}")
    if not noise >= 0:
        raise ValueError(f"make_moons: noise is a standard deviation and must be >= 0, got {noise!r}")
    rng = np.random.default_rng(seed)
    n_upper = n_samples // 2
    n_lower = n_samples - n_upper
    t_upper = np.linspace(0.0, np.pi, n_upper)
    t_lower = np.linspace(0.0, np.pi, n_lower)
    upper = np.stack([np.cos(t_upper), np.sin(t_upper)], axis=1)
    lower = np.stack([1.0 - np.cos(t_lower), 0.5 - np.sin(t_lower)], axis=1)
    X = np.concatenate([upper, lower]) + rng.normal(0.0, noise, size=(n_samples, 2))
    y = np.concatenate([np.zeros(n_upper, dtype=np.int64), np.ones(n_lower, dtype=np.int64)])
    order = rng.permutation(n_samples)
    return X[order], y[order]


# ---------------------------------------------------------------------------------------------
# MNIST: 28x28 grey-scale digits, 60,000 for training and 10,000 for testing, in IDX files.
# ---------------------------------------------------------------------------------------------
# --8<-- [start:mnist-files]
MNIST_FILES = {  # split -> (images file, labels file)
    "train": ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"),
    "test": ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"),
}
# The MD5 sums published with the files (and checked by torchvision's MNIST the same way).
MNIST_MD5 = {
    "train-images-idx3-ubyte.gz": "f68b3c2dcbeaaa9fbdd348bbdeb94873",
    "train-labels-idx1-ubyte.gz": "d53e105ee54ea40749a09fcbcd1e9432",
    "t10k-images-idx3-ubyte.gz": "9fb629c4189551a2d022fa330f9573f3",
    "t10k-labels-idx1-ubyte.gz": "ec29112dd5afa0611ce80d1b7f02629c",
}
MNIST_URL = "https://ossci-datasets.s3.amazonaws.com/mnist/"  # a mirror of yann.lecun.com/exdb/mnist
# --8<-- [end:mnist-files]


# --8<-- [start:mnist]
def mnist(path: str | os.PathLike | None = None, split: str = "test", url: str | None = None,
          cache_dir: str | os.PathLike | None = None) -> tuple[np.ndarray, np.ndarray]:
    """MNIST images (n, 28, 28) uint8 and labels (n,) int64 of one split ('train' or 'test').

    Where the files come from, first match wins:
    1. `path`: a folder holding the IDX files (gzipped or not), e.g. `train-images-idx3-ubyte.gz`;
    2. the environment variable `MNIST_PATH`, a folder like that (the tests and CI set it);
    3. a download from `url` (default MNIST_URL) into `cache_dir` (default `$TINYEDU_DATA/mnist`, or
       `~/.cache/tinyedu-data/mnist`), checked against the published MD5 sums; later calls read the
       checked files from the cache.
    """
    if split not in MNIST_FILES:
        raise ValueError(f"mnist: split must be 'train' or 'test', got {split!r}")
    names = MNIST_FILES[split]
    folder = path if path is not None else os.environ.get("MNIST_PATH") or None
    if folder is not None:
        files = [_find_idx(Path(folder), name) for name in names]
    else:
        files = [download_mnist_file(name, url, cache_dir) for name in names]
    images, labels = read_idx(files[0]), read_idx(files[1])
    if images.ndim != 3 or labels.ndim != 1 or len(images) != len(labels):
        raise ValueError(f"mnist: {files[0]} holds an array of shape {images.shape} and {files[1]} one of "
                         f"shape {labels.shape}; expected images (n, 28, 28) and n labels")
    if labels.size and labels.max() > 9:
        raise ValueError(f"mnist: {files[1]} holds label {labels.max()}; digits are 0..9")
    return images, labels.astype(np.int64)


# --8<-- [end:mnist]
def _find_idx(folder: Path, name: str) -> Path:
    """`name` in `folder`, gzipped or not."""
    for candidate in (folder / name, folder / name.removesuffix(".gz")):
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(f"mnist: no {name} (or {name.removesuffix('.gz')}) in {folder}; the folder must "
                            f"hold the MNIST IDX files (MNIST_PATH={os.environ.get('MNIST_PATH')!r})")


def mnist_cache_dir(cache_dir: str | os.PathLike | None = None) -> Path:
    if cache_dir is not None:
        return Path(cache_dir)
    root = os.environ.get("TINYEDU_DATA") or Path.home() / ".cache" / "tinyedu-data"
    return Path(root) / "mnist"


def download_mnist_file(name: str, url: str | None = None,
                        cache_dir: str | os.PathLike | None = None) -> Path:
    """The MNIST file `name` in the cache folder, downloaded and checked first if it is not there yet."""
    if name not in MNIST_MD5:
        raise ValueError(f"mnist: unknown file {name!r}; the files are {', '.join(MNIST_MD5)}")
    folder = mnist_cache_dir(cache_dir)
    target = folder / name
    if target.is_file() and _md5(target) == MNIST_MD5[name]:
        return target
    folder.mkdir(parents=True, exist_ok=True)
    source = (url or MNIST_URL).rstrip("/") + "/" + name
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{name}-")
    try:
        with os.fdopen(fd, "wb") as out:
            try:
                with urllib.request.urlopen(source, timeout=60) as response:
                    shutil.copyfileobj(response, out)
            except (urllib.error.URLError, OSError) as e:
                raise ConnectionError(f"mnist: could not download {source} ({e}); if you have the files, "
                                      "pass mnist(path=folder) or set MNIST_PATH to that folder") from None
        digest = _md5(Path(tmp))
        if digest != MNIST_MD5[name]:
            raise ValueError(f"mnist: {source} has MD5 {digest}, but the published sum is {MNIST_MD5[name]}: "
                             "the download is damaged or the mirror serves another file; nothing was kept")
        os.replace(tmp, target)  # atomic: the cache never holds a half-written file
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return target


def _md5(path: Path) -> str:
    digest = hashlib.md5()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# --8<-- [start:idx]
IDX_TYPES = {0x08: np.uint8, 0x09: np.int8, 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}
MAX_DEFLATE_RATIO = 1032  # deflate's best: 258 bytes from one code of about 2 bits


def read_idx(path: str | os.PathLike) -> np.ndarray:
    """An IDX file (gzipped or not) as a numpy array.

    IDX: two zero bytes, a type code (0x08 = unsigned byte), the number of dimensions d, then d
    big-endian uint32 sizes, then the values in C order. MNIST images are (n, 28, 28) of type 0x08.
    The header is read first and its size checked against the file before the data is read; a gzip
    is inflated as a stream, only as far as the header says (a small file that would inflate to
    gigabytes is refused without inflating it).
    """
    with open(path, "rb") as file:
        gzipped = file.read(2) == b"\x1f\x8b"  # the gzip magic number, whatever the file is called
        file.seek(0)
        size = os.fstat(file.fileno()).st_size
        if not gzipped:
            return _read_idx_stream(file, path, functools.partial(_check_plain_size, path, size))
        check = functools.partial(_check_gzip_size, path, size, _gzip_trailer_size(file, path, size))
        try:
            with gzip.GzipFile(fileobj=file) as stream:
                return _read_idx_stream(stream, path, check)
        except (EOFError, OSError, zlib.error) as e:
            raise ValueError(f"read_idx: {path} is a damaged or truncated gzip file ({e})") from None


def _read_idx_stream(stream: Any, path: Any, check_size: Callable[[tuple, int], None]) -> np.ndarray:
    """Read the header, let `check_size` see the bytes it needs, then read exactly those."""
    head = stream.read(4)
    if len(head) < 4 or head[:2] != b"\0\0":
        raise ValueError(f"read_idx: {path} is not an IDX file (it must start with two zero bytes)")
    kind, ndim = head[2], head[3]
    if kind not in IDX_TYPES:
        raise ValueError(f"read_idx: {path} has unknown IDX type code 0x{kind:02x}")
    dims = stream.read(4 * ndim)
    if len(dims) < 4 * ndim:
        raise ValueError(f"read_idx: {path} is truncated inside its header ({4 + len(dims)} bytes)")
    shape = tuple(int(s) for s in np.frombuffer(dims, dtype=">u4"))
    dtype = np.dtype(IDX_TYPES[kind])
    header, data_size = 4 + 4 * ndim, int(np.prod(shape, dtype=object)) * dtype.itemsize
    check_size(shape, header + data_size)
    data = stream.read(data_size)
    if len(data) < data_size:
        raise ValueError(f"read_idx: {path} is truncated: shape {shape} needs {header + data_size} bytes, "
                         f"the data ends after {header + len(data)}")
    if stream.read(1):
        raise ValueError(f"read_idx: {path} is longer than its header says: shape {shape} needs "
                         f"{header + data_size} bytes, and more follow (nothing beyond them was read)")
    return np.frombuffer(data, dtype=dtype).reshape(shape).astype(dtype.newbyteorder("="))


def _check_plain_size(path: Any, size: int, shape: tuple, needed: int) -> None:
    if size != needed:
        problem = "truncated" if size < needed else "longer than its header says"
        raise ValueError(f"read_idx: {path} is {problem}: shape {shape} needs {needed} bytes, the file has "
                         f"{size}")


def _gzip_trailer_size(file: Any, path: Any, size: int) -> int:
    """The size the gzip stream says it inflates to (its last 4 bytes: the size modulo 2^32)."""
    if size < 18:  # a 10-byte gzip header and the 8-byte trailer at least
        raise ValueError(f"read_idx: {path} is a damaged or truncated gzip file ({size} bytes)")
    file.seek(size - 4)
    inflated = int.from_bytes(file.read(4), "little")
    file.seek(0)
    return inflated


def _check_gzip_size(path: Any, size: int, inflated: int, shape: tuple, needed: int) -> None:
    """Before inflating the data: can this gzip hold the bytes the header needs?"""
    if needed > MAX_DEFLATE_RATIO * size:
        raise ValueError(f"read_idx: {path}: shape {shape} needs {needed} bytes, more than a gzip file of "
                         f"{size} bytes can inflate to; the file is damaged or not an IDX file")
    if needed % 2**32 != inflated:
        raise ValueError(f"read_idx: {path} is a damaged or truncated gzip file, or not what its header "
                         f"says: shape {shape} needs {needed} bytes, the gzip trailer says the data inflates "
                         f"to {inflated} (modulo 2^32); nothing more was inflated")


# --8<-- [end:idx]
