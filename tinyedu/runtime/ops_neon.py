"""The NEON device: C with ARM NEON intrinsics (tinyedu/renderer/neon.py), on any machine.

- On an arm64 machine (Apple silicon, Raspberry Pi, AWS Graviton) the source is compiled by the
  system compiler into a shared library and called with ctypes, exactly like the C device.
- On x86-64 it is cross-compiled for aarch64 Linux with `aarch64-linux-gnu-gcc`, and run by a
  harness program under qemu-user (see tinyedu/runtime/qemu.py). Slower, but the same aarch64
  instructions run, so NEON is tested on every Linux machine.

Compiled libraries share the C device's disk cache (`$TINYEDU_CACHE`); the cache key includes the
compiler, so aarch64 and x86-64 libraries never mix. NEON registers are 128 bits: the device's
vector width is 4 float32 lanes. Threads: OpenMP, when the (cross) compiler has it (under qemu
each guest thread is a host thread). `TINYEDU_SANITIZE` does not apply to NEON. Running the
compiler, probing its flags, compiling with a readable error and objdump are shared with the C device
(tinyedu/runtime/toolchain.py); the flags, the cache key and the harness are NEON's own.

Needs, on x86-64 Linux: `gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user` (Debian/Ubuntu
package names). Override the tools with `NEON_CC`, `NEON_QEMU` and `NEON_SYSROOT`. `DEBUG=4` prints
the intrinsics source, `DEBUG=6` the aarch64 disassembly (`aarch64-linux-gnu-objdump`).
"""

from __future__ import annotations

import atexit
import ctypes
import functools
import os
import platform
import shutil
from pathlib import Path

from tinyedu.launch import LaunchDims
from tinyedu.renderer.neon import NEON_LANES, render_neon
from tinyedu.runtime.compile_cache import CachedFile, LoadedLRU, cached_build, dlclose
from tinyedu.runtime.device import Backend, Buffer, DeviceUnavailable, cpu_only, thread_count
from tinyedu.runtime.qemu import HARNESS_SOURCE, Harness
from tinyedu.runtime.toolchain import (
    BASE_FLAGS,
    CompileError,
    accepts_flag,
    compile_library,
    compiler_version,
    cpu_signature,
    disassemble,
    numbered,
    openmp_available,
    run_compiler,
)

INSTALL_HINT = (
    "On Debian/Ubuntu: sudo apt-get install gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user "
    "(or run scripts/ensure_system_tools.sh). On macOS: an Apple silicon Mac runs NEON natively (it "
    "needs only the Xcode command line tools: xcode-select --install); an Intel Mac has no qemu-user, so "
    "run tinyedu in a Linux container or VM there (or use DEVICE=C)."
)
HARNESS_SLOTS = 4096  # the harness's table of loaded kernels (LoadedLRU keeps far fewer loaded)


def is_arm64() -> bool:
    return platform.machine().lower() in ("arm64", "aarch64")


@functools.cache
def neon_toolchain() -> tuple[str, str | None, str | None]:
    """(compiler, qemu, sysroot): native (qemu None) on arm64, else the cross tools. Raises
    DeviceUnavailable naming what is missing and how to install it."""
    if is_arm64():
        compiler = os.environ.get("NEON_CC") or os.environ.get("CC") or next(
            (c for c in ("cc", "clang", "gcc") if shutil.which(c)), None)
        if compiler is None:
            raise DeviceUnavailable(f"NEON device: no C compiler found on this arm64 machine. {INSTALL_HINT}")
        return compiler, None, None
    compiler = os.environ.get("NEON_CC") or "aarch64-linux-gnu-gcc"
    qemu = os.environ.get("NEON_QEMU") or "qemu-aarch64"
    sysroot = os.environ.get("NEON_SYSROOT") or "/usr/aarch64-linux-gnu"
    missing = [name for name in (compiler, qemu) if shutil.which(name.split()[0]) is None]
    if not Path(sysroot, "lib").is_dir():
        missing.append(f"the aarch64 C library in {sysroot}")
    if missing:
        raise DeviceUnavailable(f"NEON device: this {platform.machine()} machine runs NEON kernels by "
                                f"cross-compiling them for aarch64 and running them under qemu-user, and "
                                f"it is missing {', '.join(missing)}. {INSTALL_HINT}")
    return compiler, qemu, sysroot


# --8<-- [start:compiler]
class NEONCompiler:
    """NEON source -> a shared library (aarch64 when cross-compiling), through the verified disk cache
    (tinyedu/runtime/compile_cache.py). `build(source)` gives the cache entry."""

    def __init__(self, compiler: str, native: bool):
        self.compiler, self.native = compiler, native
        flags = BASE_FLAGS
        # No auto-vectorization: the vectors that run are the intrinsics in the source, nothing the
        # compiler adds. (Also, GCC 12's SLP vectorizer for aarch64 miscompiles `sum += (int)(a != b)`
        # under -fwrapv: it adds the -1 masks of `cmeq` instead of 1s.)
        if accepts_flag(compiler, "-fno-tree-vectorize"):
            flags += ("-fno-tree-vectorize",)
        if native and accepts_flag(compiler, "-mcpu=native"):
            flags += ("-mcpu=native",)
        if openmp_available(compiler):
            flags += ("-fopenmp",)
        self.flags = flags

    def signature(self) -> str:
        """Everything besides the source that changes the library (the CPU only when native)."""
        parts = [self.compiler, compiler_version(self.compiler), *self.flags]
        return "\0".join(parts + ([cpu_signature()] if self.native else ["cross-compiled for aarch64"]))

    def build(self, source: str) -> CachedFile:
        return CachedFile(f"{source}\0{self.signature()}", ".so", lambda path: self.compile(source, path))

    def compile(self, source: str, path: Path) -> None:
        compile_library("NEON", self.compiler, self.flags, source, path)


# --8<-- [end:compiler]


def build_harness(compiler: str) -> Path:
    """The harness program, cross-compiled once into the cache (and checked like every entry)."""
    def build(path: Path) -> None:
        result = run_compiler(compiler, ["-O2", "-x", "c", "-", "-o", str(path), "-ldl"], HARNESS_SOURCE)
        if result.returncode != 0:
            raise CompileError(f"NEON device: {compiler} failed to build the qemu harness:\n"
                               f"{numbered(HARNESS_SOURCE)}\n--- compiler output ---\n"
                               f"{result.stderr.strip()}")
        path.chmod(0o755)

    key = f"{HARNESS_SOURCE}\0{compiler}\0{compiler_version(compiler)}"
    return cached_build(key, ".harness", build)


class NEONProgram:
    """A compiled NEON kernel: `program([out, *inputs])` runs it (natively, or in the qemu harness)."""

    def __init__(self, device: "NEONDevice", name: str, library: CachedFile):
        self.device, self.name, self.library, self.path = device, name, library, library.file

    def load_native(self) -> ctypes.CDLL:
        return ctypes.CDLL(str(self.library.path()))

    def __call__(self, buffers: list[Buffer]) -> None:
        """Load the library if it is not loaded (checking the cache entry first), then call it."""
        arrays = [b.as_numpy() for b in buffers]
        if self.device.native:
            library = self.device.loaded.get(self.path, self.load_native)
            function = getattr(library, self.name)
            function.restype = None
            function(*(ctypes.c_void_p(a.ctypes.data) for a in arrays))
            return
        entry = f"{self.name}_entry"
        load = lambda: self.device.load_in_harness(self.library.path(), entry)  # noqa: E731
        slot = self.device.loaded.get(self.path, load)
        self.device.harness.run(slot, self.path, entry, arrays)

    def disassemble(self) -> str:
        return disassemble(self.path, self.name, (self.device.objdump,),
                           "install binutils-aarch64-linux-gnu to see the aarch64 disassembly")


class NEONDevice(Backend):
    """NEON intrinsics source in, a program out: native on arm64, in the qemu harness elsewhere."""

    name = "NEON"
    renderer = staticmethod(render_neon)
    vector_width = NEON_LANES

    def __init__(self) -> None:
        super().__init__()
        self.compiler_name, self.qemu, self.sysroot = neon_toolchain()
        self.native = self.qemu is None
        self.objdump = "objdump" if self.native else self.compiler_name.replace("gcc", "objdump")
        self.compiler = NEONCompiler(self.compiler_name, self.native)
        self._harness: Harness | None = None
        self.free_slots = list(range(HARNESS_SLOTS))
        # at most MAX_LOADED kernel libraries loaded at once (in the harness: slot numbers)
        self.loaded: LoadedLRU = LoadedLRU(self.unload)

    @property
    def harness(self) -> Harness:
        """The qemu harness, started on first use (one per device)."""
        if self._harness is None:
            assert self.qemu is not None and self.sysroot is not None
            self._harness = Harness(self.qemu, self.sysroot, build_harness(self.compiler_name))
            atexit.register(self._harness.close)
        return self._harness

    def load_in_harness(self, path: Path, entry: str) -> int:
        slot = self.free_slots.pop()
        try:
            self.harness.load(slot, path, entry)
        except Exception:
            self.free_slots.append(slot)
            raise
        return slot

    def unload(self, loaded: ctypes.CDLL | int) -> None:
        """Unload an evicted kernel library: dlclose natively, `unload` in the harness."""
        if isinstance(loaded, int):
            self.harness.unload(loaded)
            self.free_slots.append(loaded)
        else:
            dlclose(loaded._handle)

    def runtime(self, name: str, library: CachedFile, launch: LaunchDims | None = None) -> NEONProgram:
        cpu_only("NEON", name, launch)
        return NEONProgram(self, name, library)

    def threads(self) -> int:
        return thread_count() if "-fopenmp" in self.compiler.flags else 1


def create_device() -> NEONDevice:
    return NEONDevice()
