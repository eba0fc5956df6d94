"""The disk cache of compiled kernels, checked before use, and a bound on the kernels kept loaded.

Compiling a kernel takes a compiler tens of milliseconds, so its output (a shared library, an
object file) is kept on disk under `$TINYEDU_CACHE` (default `~/.cache/tinyedu`), named by a hash
of everything it was built from: the source, the compiler and its version, the flags, the CPU.

A file on disk can be damaged after it was written: truncated by a full disk or a crash, overwritten
by another program, swapped with another entry. Loading a damaged library is not an error you can
catch: the process dies (SIGBUS on a truncated file, SIGILL on overwritten code), or, worse, runs
another kernel's code and gives wrong numbers. So every entry has a *manifest* beside it,

    3f2a...c1.so            the library
    3f2a...c1.so.manifest   `key <sha256 of what it was built from>` and `sha256 <of the file>`

and an entry is used only when both hashes match: the key (it is the entry for this source and
these flags) and the file's bytes (they are the bytes that were built). Anything else is rebuilt.
Files are written aside and renamed into place (`os.replace` is atomic), so a reader sees a whole
file or none, and two processes building the same kernel at once do not corrupt each other. The
cache owns the names in its folder: a folder found where an entry goes is removed before the rename.

Loaded kernels are bounded too: each loaded shared library costs the process a handful of memory
maps, and Linux allows about 65,000, so a process that compiles tens of thousands of distinct kernels
(a long training run with changing shapes, a BEAM search) would fail to load more. `LoadedLRU` keeps
at most `MAX_LOADED` loaded and unloads (dlclose) the least recently used; a program whose library
was unloaded loads it again (and checks it again) when it next runs.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Callable, Generic, Hashable, TypeVar

MAX_LOADED = 512  # kernel libraries kept loaded per device (a few memory maps each)


def cache_dir() -> Path:
    folder = Path(os.environ.get("TINYEDU_CACHE") or Path.home() / ".cache" / "tinyedu")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise NotADirectoryError(f"compile cache: {folder} (TINYEDU_CACHE, default ~/.cache/tinyedu) is a "
                                 "file, not a folder; set TINYEDU_CACHE to a folder") from None
    return folder


def key_digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def manifest_path(path: Path) -> Path:
    return path.with_name(path.name + ".manifest")


# --8<-- [start:verify]
def verified(path: Path, key: str) -> bool:
    """Whether the cache entry at `path` is intact and was built from `key` (see the module docstring)."""
    try:
        lines = manifest_path(path).read_text().splitlines()
        fields = dict(line.split(" ", 1) for line in lines if " " in line)
        return fields.get("key") == key_digest(key) and fields.get("sha256") == file_digest(path)
    except (OSError, ValueError):
        return False  # missing or unreadable: not a usable entry


def cached_build(key: str, suffix: str, build: Callable[[Path], None]) -> Path:
    """The file built from `key`: the cache entry if it is verified, else `build(path)` writes it anew.

    `key` must describe everything the output depends on (source, tool, version, flags, CPU).
    `build` is given a temporary path in the cache folder to write the output to.
    """
    path = cache_dir() / f"{key_digest(key)[:32]}{suffix}"
    if verified(path, key):
        return path
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}-", suffix=suffix)
    os.close(fd)
    try:
        build(Path(tmp))
        manifest = f"key {key_digest(key)}\nsha256 {file_digest(Path(tmp))}\n"
        fd, tmp_manifest = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}-", suffix=".manifest")
        with os.fdopen(fd, "w") as f:
            f.write(manifest)
        for place in (path, manifest_path(path)):
            _clear_place(place)
        os.replace(tmp, path)                          # the file first, then what vouches for it
        os.replace(tmp_manifest, manifest_path(path))
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path
# --8<-- [end:verify]


def _clear_place(path: Path) -> None:
    """A folder where a cache file goes (made by hand or by another tool) would make the rename fail; the
    cache owns its names, so the folder is removed (a link is left: the rename replaces the link)."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)


class CachedFile:
    """A cache entry, and how to build it again: `path()` checks the file before every use (a load)
    and rebuilds it if it was damaged since it was built. Programs hold one of these, not a path."""

    def __init__(self, key: str, suffix: str, build: Callable[[Path], None]):
        self.key, self.suffix, self.build = key, suffix, build
        self.file = cached_build(key, suffix, build)

    def path(self) -> Path:
        return cached_build(self.key, self.suffix, self.build)

    def __repr__(self) -> str:
        return f"<CachedFile {self.file.name}>"


T = TypeVar("T")


# --8<-- [start:lru]
class LoadedLRU(Generic[T]):
    """At most `limit` things loaded at once (libraries, JIT engines); the least recently used is
    unloaded to make room. `get(key, load)` gives the loaded thing, loading it if needed."""

    def __init__(self, unload: Callable[[T], None], limit: int | None = None):
        self.unload, self.limit = unload, limit
        self.items: OrderedDict[Hashable, T] = OrderedDict()
        self.lock = threading.Lock()
        self.loads = self.evictions = 0  # counters, for tests and curious readers

    def get(self, key: Hashable, load: Callable[[], T]) -> T:
        with self.lock:
            item = self.items.get(key)
            if item is not None:  # (one lookup: every kernel launch asks)
                self.items.move_to_end(key)
                return item
            limit = self.limit if self.limit is not None else MAX_LOADED
            while len(self.items) >= max(limit, 1):
                _, old = self.items.popitem(last=False)
                self.evictions += 1
                self.unload(old)
            item = load()
            self.loads += 1
            self.items[key] = item
            return item

    def __len__(self) -> int:
        return len(self.items)

    def clear(self) -> None:
        with self.lock:
            while self.items:
                self.unload(self.items.popitem(last=False)[1])
# --8<-- [end:lru]


def dlclose(handle: int) -> None:
    """Unload a shared library opened with ctypes (POSIX dlclose); the handle is invalid afterwards."""
    import _ctypes

    close = getattr(_ctypes, "dlclose", None) or getattr(_ctypes, "FreeLibrary", None)
    if close is not None:
        close(handle)
