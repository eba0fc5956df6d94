"""The compile cache checks what it loads, and loaded kernels are bounded: on C, NEON and LLVM.

The repros of the issue, each in fresh processes sharing one cache folder, as a user would meet
them: a cached library truncated to half (the next run died with SIGBUS), its code overwritten
(SIGILL), two same-named kernels whose files were swapped (wrong answers, no error). Each must be
rebuilt, never run. Then: thousands of distinct kernels in one process must not run out of memory
maps (each loaded library costs five; Linux allows about 65,000).
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from tinyedu import Device
from tinyedu.runtime import compile_cache
from tinyedu.runtime.compile_cache import CachedFile, LoadedLRU, cached_build, manifest_path, verified
from tinyedu.runtime.device import DeviceUnavailable

REPO = Path(__file__).resolve().parents[1]
SUFFIX = {"C": ".so", "NEON": ".so", "LLVM": ".o"}

RUN = textwrap.dedent("""
    import sys
    import numpy as np
    sys.path.insert(0, {repo!r})
    from tinyedu import Tensor
    x = Tensor(np.arange(30, dtype=np.float32), device={device!r})
    print((x * {value} + 1).numpy().tolist())
""")


@pytest.fixture(params=["C", "NEON", "LLVM"])
def device(request: pytest.FixtureRequest) -> str:
    try:
        Device[request.param].check_runnable()  # CUDA compiles anywhere, runs only on a GPU
    except DeviceUnavailable as missing:
        pytest.skip(str(missing))
    return request.param


def run(device: str, cache: Path, value: float) -> list[float]:
    """One fresh process computing x * value + 1 on `device` with the cache folder `cache`."""
    env = {**os.environ, "TINYEDU_CACHE": str(cache), "NOOPT": "1", "PYTHONPATH": str(REPO)}
    result = subprocess.run([sys.executable, "-c", RUN.format(repo=str(REPO), device=device, value=value)],
                            env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"the run died ({result.returncode}): {result.stderr[-1500:]}"
    return eval(result.stdout.strip().splitlines()[-1])  # noqa: S307 - our own printed list


def expected(value: float) -> list[float]:
    return (np.arange(30, dtype=np.float32) * np.float32(value) + 1).tolist()


def kernel_files(cache: Path, device: str) -> list[Path]:
    return sorted(p for p in cache.iterdir()
                  if p.name.endswith(SUFFIX[device]) and not p.name.startswith("."))


def only_new(before: list[Path], after: list[Path]) -> Path:
    new = [p for p in after if p not in before]
    assert len(new) == 1, f"expected one new cache entry, got {new}"
    return new[0]


def test_a_truncated_library_is_rebuilt_not_run(device: str, tmp_path: Path):
    assert run(device, tmp_path, 2.0) == expected(2.0)
    library = kernel_files(tmp_path, device)[-1]
    data = library.read_bytes()
    library.write_bytes(data[:len(data) // 2])  # a full disk, a crash in the middle of a copy...
    assert run(device, tmp_path, 2.0) == expected(2.0)  # was: killed by SIGBUS
    assert library.read_bytes() == data


def text_section(data: bytes) -> tuple[int, int]:
    """(file offset, size) of the machine code of a 64-bit little-endian ELF: its `.text` section,
    or `.ltext` (LLVM's JIT code uses the large code model)."""
    if data[:4] != b"\x7fELF":
        pytest.skip("overwrites the code of an ELF file (Linux); this library is not one")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQ", data, shoff + n * shentsize) for n in range(shnum)]
    names = sections[shstrndx][4]  # the offset of the section-name strings
    def name_of(start: int) -> bytes:
        return data[names + start:data.index(b"\0", names + start)]

    code = [(offset, size) for name, _, _, _, offset, size in sections
            if name_of(name) in (b".text", b".ltext") and size]
    assert code, "no code section"
    return max(code, key=lambda section: section[1])


def test_overwritten_code_is_rebuilt_not_run(device: str, tmp_path: Path):
    assert run(device, tmp_path, 3.0) == expected(3.0)
    library = kernel_files(tmp_path, device)[-1]
    data = bytearray(library.read_bytes())
    offset, size = text_section(bytes(data))
    data[offset:offset + size] = b"\xff" * size  # every instruction: was SIGILL when the kernel ran
    library.write_bytes(bytes(data))
    assert run(device, tmp_path, 3.0) == expected(3.0)


def test_swapped_libraries_of_same_named_kernels_are_rebuilt(device: str, tmp_path: Path):
    """x*2+1 and x*5+1 are both kernel E_30: swap their files, and each must still give its own
    answer (was: the other kernel's, silently)."""
    first = kernel_files(tmp_path, device)
    assert run(device, tmp_path, 2.0) == expected(2.0)
    doubled = only_new(first, kernel_files(tmp_path, device))
    assert run(device, tmp_path, 5.0) == expected(5.0)
    times_five = only_new(first + [doubled], kernel_files(tmp_path, device))
    a, b = doubled.read_bytes(), times_five.read_bytes()
    doubled.write_bytes(b)
    times_five.write_bytes(a)
    assert run(device, tmp_path, 2.0) == expected(2.0)
    assert run(device, tmp_path, 5.0) == expected(5.0)
    assert doubled.read_bytes() == a and times_five.read_bytes() == b


# ---- the cache entry, piece by piece ----
def test_an_entry_is_used_only_when_key_and_bytes_match(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("TINYEDU_CACHE", str(tmp_path))
    builds: list[Path] = []

    def build(path: Path) -> None:
        builds.append(path)
        path.write_bytes(b"compiled from source A")

    entry = CachedFile("source A", ".bin", build)
    path = entry.file
    assert verified(path, "source A") and not verified(path, "source B") and len(builds) == 1
    assert entry.path() == path and len(builds) == 1  # checked, and intact: no rebuild
    path.write_bytes(b"compiled from source B")        # swapped in from elsewhere
    assert not verified(path, "source A")
    assert entry.path().read_bytes() == b"compiled from source A" and len(builds) == 2
    manifest_path(path).unlink()                       # a library without its manifest
    cached_build("source A", ".bin", build)
    assert len(builds) == 3 and verified(path, "source A")
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name, manifest_path(path).name]  # no temps


def test_a_folder_in_an_entrys_place_is_replaced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("TINYEDU_CACHE", str(tmp_path))
    path = CachedFile("source A", ".bin", lambda p: p.write_bytes(b"A")).file
    for place in (path, manifest_path(path)):          # a folder where the library or its manifest goes
        place.unlink()
        place.mkdir()
        (place / "inside").write_text("left here")
        assert not verified(path, "source A")
        built = cached_build("source A", ".bin", lambda p: p.write_bytes(b"A"))
        assert built.read_bytes() == b"A" and manifest_path(path).is_file() and verified(path, "source A")


def test_a_cache_folder_that_is_a_file_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    (tmp_path / "cache").write_text("not a folder")
    monkeypatch.setenv("TINYEDU_CACHE", str(tmp_path / "cache"))
    with pytest.raises(NotADirectoryError, match="is a file, not a folder; set TINYEDU_CACHE to a folder"):
        cached_build("source A", ".bin", lambda p: p.write_bytes(b"A"))


def test_the_least_recently_used_is_unloaded():
    unloaded: list[str] = []
    lru: LoadedLRU[str] = LoadedLRU(unloaded.append, limit=2)
    assert lru.get("a", lambda: "A") == "A" and lru.get("b", lambda: "B") == "B"
    lru.get("a", lambda: "never")       # a is used again: b is now the oldest
    lru.get("c", lambda: "C")
    assert unloaded == ["B"] and len(lru) == 2
    assert lru.get("b", lambda: "B again") == "B again" and unloaded == ["B", "A"]


@pytest.mark.slow
def test_thousands_of_distinct_kernels_do_not_run_out_of_memory_maps(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch):
    """13,200 distinct kernel libraries, each loaded and called: without a bound they would need
    66,000 memory maps (5 each) and dlopen fails near 65,530 ("failed to map segment"). They are
    copies of one compiled kernel, each a separate cache entry (compiling 13,200 kernels would take
    minutes), called through the C device's CProgram, so the real load/evict path runs."""
    from tinyedu.core.dtype import dtypes
    from tinyedu.runtime import ops_c
    from tinyedu.runtime.device import Buffer

    if sys.platform != "linux":
        pytest.skip("counts memory maps in /proc/self/maps (Linux)")
    monkeypatch.setenv("TINYEDU_CACHE", str(tmp_path))
    template = ops_c.Compiler().build("void k(float* restrict data0) { data0[0] += 1.0f; }\n").file
    ops_c.LOADED.clear()
    maps_before = len(Path("/proc/self/maps").read_text().splitlines())
    out = Buffer("C", 1, dtypes.float32).copyin(np.zeros(1, np.float32))
    count = 13_200
    for n in range(count):
        entry = CachedFile(f"kernel number {n}", ".so", lambda path: shutil.copyfile(template, path))
        ops_c.CProgram("k", entry)([out])
        assert len(ops_c.LOADED) <= compile_cache.MAX_LOADED
    maps_after = len(Path("/proc/self/maps").read_text().splitlines())
    assert out.as_numpy()[0] == count  # every one of them ran
    assert maps_after - maps_before <= 5 * compile_cache.MAX_LOADED + 64
    assert ops_c.LOADED.evictions >= count - compile_cache.MAX_LOADED
    ops_c.LOADED.clear()


def test_an_evicted_kernel_runs_again_after_a_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A program whose library was unloaded loads it again; if the file was damaged meanwhile, it is
    rebuilt first (the check happens at every load, not only at compile time)."""
    from tinyedu.core.dtype import dtypes
    from tinyedu.runtime import ops_c
    from tinyedu.runtime.device import Buffer

    monkeypatch.setenv("TINYEDU_CACHE", str(tmp_path))
    monkeypatch.setattr(compile_cache, "MAX_LOADED", 1)
    ops_c.LOADED.clear()
    compiler = ops_c.Compiler()
    sources = [f"void k(float* restrict data0) {{ data0[0] = {n}.0f; }}\n" for n in range(3)]
    programs = [ops_c.CProgram("k", compiler.build(source)) for source in sources]
    out = Buffer("C", 1, dtypes.float32)
    for n, program in enumerate(programs):
        program([out])
        assert out.as_numpy()[0] == n
    first = programs[0].library.file
    first.write_bytes(first.read_bytes()[:100])  # damaged while it was not loaded
    programs[0]([out])                           # loads it again: checked, rebuilt, run
    assert out.as_numpy()[0] == 0 and verified(first, programs[0].library.key)
    ops_c.LOADED.clear()
