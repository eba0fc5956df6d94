"""The C device: C source (from tinyedu/renderer/cstyle.py) -> shared library -> called with ctypes.

The engine (tinyedu/engine/lower.py) turns a kernel AST into C source; this device compiles it
with the system compiler and calls the function with the buffers' memory.

Compiling takes a C compiler a few dozen milliseconds, so compiled kernels are cached twice: in
memory (per process, keyed by the AST) and on disk (keyed by a hash of the source, the compiler,
its flags and the processor, since `-march=native` builds for this CPU), under `$TINYEDU_CACHE` or
`~/.cache/tinyedu`. The disk cache (tinyedu/runtime/compile_cache.py) is safe to share and checks
what it loads: a library is written under a temporary name and renamed into place, so two
processes compiling the same kernel at once each see a whole file, and a manifest beside it holds
the hash of what it was built from and of its bytes, so a truncated, overwritten or swapped
library is compiled again instead of loaded. At most MAX_LOADED libraries stay loaded; the least
recently used is unloaded (dlclose) and loaded again if its kernel runs again.

Environment:
- `CC` picks the compiler, e.g. `CC=clang` or `CC="ccache gcc"` (default: the first of cc, gcc,
  clang on PATH).
- `TINYEDU_SANITIZE=1` compiles with AddressSanitizer and UBSan. Python itself is not built with
  ASan, so the ASan runtime must be loaded first: run python with
  `LD_PRELOAD=$(gcc -print-file-name=libasan.so) ASAN_OPTIONS=detect_leaks=0`.
- `THREADS=n` (default: the number of cores) lets kernels use n threads, with OpenMP
  (`-fopenmp`, when the compiler accepts it; without it a THREAD loop runs on one thread). A child
  process made by fork() runs its kernels on one thread (see `one_thread_after_fork`).
- `DEBUG=4` prints each kernel's source, `DEBUG=5` its UOps, `DEBUG=6` its disassembly.

Flags beyond the base ones are probed (the compiler must accept them): `-march=native` (this
CPU's vector instructions), `-mprefer-vector-width=512` (so gcc turns the lane-by-lane fused
multiply-add of a vector into one AVX-512 instruction, not two 256-bit halves) and `-fopenmp`.
"""

from __future__ import annotations

import ctypes
import functools
import os
import platform
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from tinyedu.codegen.uops import LaunchDims
from tinyedu.helpers import getenv
from tinyedu.renderer.cstyle import render_c
from tinyedu.runtime.compile_cache import CachedFile, LoadedLRU, cache_dir, dlclose, key_digest
from tinyedu.runtime.device import Backend, Buffer, cpu_only, thread_count

# --8<-- [start:flags]
# -fwrapv: int32 overflow wraps as in numpy; -ffp-contract=off: no fused multiply-add (numpy rounds
# a*b before adding c); -fno-math-errno: sqrtf can be one instruction (errno is never read).
# -O2, measured against the others on optimized kernels: -O1 does not turn the lane-by-lane fmaf of
# a vector into one instruction (a 512x512 matmul runs 50x slower), -O3 compiles no faster and made
# the register-blocked matmul 1.5x slower (its extra unrolling spills registers).
BASE_FLAGS = ("-O2", "-shared", "-fPIC", "-fwrapv", "-ffp-contract=off", "-fno-math-errno")
# --8<-- [end:flags]
SANITIZE_FLAGS = ("-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer",
                  "-g")
LIBRARIES = ("-lm",)  # sinf, exp2f, ... (after the source, where linkers look for them)


class CompileError(RuntimeError):
    """The compiler rejected generated source: a bug in the renderer (or a broken compiler)."""


def run_compiler(compiler: str, args: list[str], source: str | None = None) -> subprocess.CompletedProcess:
    """Run the compiler (`CC` may hold several words) with `args`, `source` on its stdin.

    LD_PRELOAD is dropped, so that a sanitizer runtime preloaded into python is not also loaded
    into (and slowing down) every compiler process.
    """
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    return subprocess.run([*shlex.split(compiler), *args], input=source, capture_output=True, text=True,
                          env=env)


def find_compiler() -> str:
    """$CC, else the first of cc, gcc, clang on PATH."""
    return os.environ.get("CC") or _default_compiler(os.environ.get("PATH", ""))


@functools.cache
def _default_compiler(path: str) -> str:
    """The first of cc, gcc, clang on this PATH (looked up once per PATH: it runs for every kernel)."""
    for name in ("cc", "gcc", "clang"):
        if shutil.which(name, path=path):
            return name
    raise RuntimeError("C device: no C compiler found; install gcc or clang, or set CC to one "
                       "(or use DEVICE=NUMPY)")


# --8<-- [start:probed-flags]
@functools.cache
def compiler_flags(compiler: str, sanitize: bool) -> tuple[str, ...]:
    """The flags this compiler gets: the base flags, the probed ones it accepts, sanitizers if asked."""
    flags = BASE_FLAGS + (SANITIZE_FLAGS if sanitize else ())
    for flag in ("-march=native", "-mprefer-vector-width=512"):
        if _accepts(compiler, flag):
            flags += (flag,)
    if openmp_available(compiler):
        flags += ("-fopenmp",)
    # GCC 12 (Debian 12's default) miscompiles some vectorized loops at -O2 -march=native when it
    # threads jumps: a 2-element log1p(cos(sign(x))) kernel became a constant store (clang is right;
    # tests/test_numerics.py::test_a_gcc_12_miscompilation). Jump threading is a small optimization.
    if _accepts(compiler, "-fno-thread-jumps"):
        flags += ("-fno-thread-jumps",)
    # GCC 12.2 (Debian 12's) also miscompiles a sum whose innermost loop reads 2 elements backwards:
    # unrolled, the pair becomes a reversed vector load whose reduction it gets wrong (the sum of
    # Tensor.arange(16).reshape(2, 4, 2).flip(2) was 128, not 120: tests/test_random_graphs.py).
    # Not unrolling such loops completely avoids it; -fno-tree-loop-vectorize would too, but made a
    # 512x512 matmul 100x slower.
    if _accepts(compiler, "--param=max-completely-peel-times=1"):
        flags += ("--param=max-completely-peel-times=1",)
    # C says a cast rounds; GCC's GNU mode lets `(float)(_Float16)x` keep x unrounded when the half
    # value stays in a register (a fused x.half().float() in a matmul skipped the rounding to half).
    # Standard excess precision makes every cast round. float and double have no excess precision on
    # x86-64 and arm64, so this changes nothing else.
    if _accepts(compiler, "-fexcess-precision=standard"):
        flags += ("-fexcess-precision=standard",)
    return flags
# --8<-- [end:probed-flags]


@functools.cache
def _accepts(compiler: str, flag: str) -> bool:
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "probe.c"
        src.write_text("int probe(void) { return 0; }\n")
        result = run_compiler(compiler, [flag, "-c", str(src), "-o", str(Path(tmp) / "probe.o")])
        return result.returncode == 0 and "warning" not in result.stderr


@functools.cache
def openmp_available(compiler: str) -> bool:
    """Whether `compiler -fopenmp` builds a shared library with a parallel loop (it needs libgomp)."""
    if getenv("TINYEDU_NO_OPENMP", 0):
        return False
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "probe.c"
        src.write_text("void probe(int* x) {\n#pragma omp parallel for\n"
                       "  for (int i = 0; i < 64; i++) x[i] = i;\n}\n")
        library = str(Path(tmp) / "probe.so")
        result = run_compiler(compiler, ["-fopenmp", "-shared", "-fPIC", str(src), "-o", library])
        return result.returncode == 0


@functools.cache
def native_vector_width(compiler: str | None = None) -> int:
    """float32 lanes of the widest vector registers `-march=native` gives: 16 with AVX-512, 8 with
    AVX, else 4 (SSE, NEON), read from the compiler's predefined macros."""
    compiler = compiler or find_compiler()
    march = ["-march=native"] if _accepts(compiler, "-march=native") else []
    result = run_compiler(compiler, [*march, "-dM", "-E", "-x", "c", "-"], "")
    macros = result.stdout
    if "__AVX512F__" in macros:
        return 16
    if "__AVX__" in macros:
        return 8
    return 4


@functools.cache
def _compiler_version(compiler: str) -> str:
    """Part of the cache key: a new compiler version must not reuse old libraries."""
    result = run_compiler(compiler, ["--version"])
    return (result.stdout or result.stderr).strip()


def sanitize_enabled() -> bool:
    return getenv("TINYEDU_SANITIZE", 0) != 0


@functools.cache
def cpu_signature() -> str:
    """Part of the cache key: `-march=native` code may use instructions another CPU lacks, so a
    cache shared between machines (a network home folder) must not mix their libraries."""
    parts = [platform.machine(), platform.system()]
    try:
        with open("/proc/cpuinfo") as cpuinfo:  # Linux: the model and its instruction-set flags
            parts += sorted({line.strip() for line in cpuinfo
                             if line.startswith(("model name", "flags", "Features", "CPU part"))})
    except OSError:
        result = subprocess.run(["sysctl", "-n", "machdep.cpu.brand_string"], capture_output=True, text=True)
        parts.append(result.stdout.strip() or platform.processor())  # macOS
    return "\n".join(parts)


def numbered(source: str) -> str:
    return "\n".join(f"{n:4d}  {line}" for n, line in enumerate(source.splitlines(), start=1))


class Compiler:
    """Turns C source into a loaded shared library, through the disk cache."""

    def __init__(self, compiler: str | None = None, sanitize: bool | None = None):
        self.compiler = compiler or find_compiler()
        self.flags = compiler_flags(self.compiler, sanitize_enabled() if sanitize is None else sanitize)

    def signature(self) -> str:
        """Everything besides the source that changes the library: compiler, version, flags, CPU."""
        return "\0".join([self.compiler, _compiler_version(self.compiler), *self.flags, cpu_signature()])

    # --8<-- [start:cache]
    def key(self, source: str) -> str:
        """What a library is built from: the source, and everything in `signature`."""
        return f"{source}\0{self.signature()}"

    def library_path(self, source: str) -> Path:
        """Where the library for `source` lives in the cache (whether or not it is there yet)."""
        return cache_dir() / f"{key_digest(self.key(source))[:32]}.so"

    def build(self, source: str) -> CachedFile:
        """The library built from `source`: a verified cache entry, compiled if it is missing or damaged
        (see tinyedu/runtime/compile_cache.py)."""
        return CachedFile(self.key(source), ".so", lambda path: self.compile(source, path))

    def load(self, source: str) -> ctypes.CDLL:
        """The library built from `source`, loaded (for direct use: programs load theirs through the
        C device's bounded set of loaded libraries)."""
        return ctypes.CDLL(str(self.build(source).path()))

    def compile(self, source: str, path: Path) -> None:
        """Compile `source` into the shared library `path` (a temporary name the cache renames)."""
        compile_library("C", self.compiler, self.flags, source, path)


def compile_library(device: str, compiler: str, flags: tuple[str, ...] | list[str], source: str,
                    path: Path) -> None:
    """Run `compiler` on C `source` into the library `path`; a failure shows the numbered source."""
    result = run_compiler(compiler, [*flags, "-x", "c", "-", "-o", str(path), *LIBRARIES], source)
    if result.returncode != 0:
        raise CompileError(f"{device} device: {compiler} failed to compile this kernel "
                           f"(flags {' '.join(flags)}):\n{numbered(source)}\n"
                           f"--- compiler output ---\n{result.stderr.strip()}")
# --8<-- [end:cache]


# --8<-- [start:program]
# At most MAX_LOADED libraries stay loaded (compile_cache.py says why); an evicted one is dlclose'd.
LOADED: LoadedLRU[ctypes.CDLL] = LoadedLRU(lambda library: dlclose(library._handle))


class CProgram:
    """A compiled kernel: `program([out, *inputs])` calls the C function on the buffers' memory.

    It holds its cache entry, not a loaded library: the library is loaded (checked first) when the
    program runs and is not loaded any more, and may be unloaded again to make room for others.
    """

    def __init__(self, name: str, library: CachedFile, launch: LaunchDims | None = None):
        cpu_only("C", name, launch)
        self.name, self.library, self.path = name, library, library.file

    @property
    def function(self) -> Any:
        """The C function (a ctypes object), its library loaded now if it is not. Call it right away:
        the library may be unloaded later to make room for others, and the function with it."""
        loaded = LOADED.get(self.library.file, lambda: ctypes.CDLL(str(self.library.path())))
        function = getattr(loaded, self.name)
        function.restype = None
        return function

    def prepare(self) -> None:
        """Load (and check) the library now, so that DEBUG=2 times loading apart from running."""
        _ = self.function

    def __call__(self, buffers: list[Buffer]) -> None:
        self.function(*(ctypes.c_void_p(b.as_numpy().ctypes.data) for b in buffers))

    def disassemble(self) -> str:
        return disassemble(self.path, self.name)
# --8<-- [end:program]


def disassemble(path: Path, symbol: str) -> str:
    """The machine code of one function, from objdump (or a note saying why there is none)."""
    objdump = shutil.which("objdump") or shutil.which("llvm-objdump")
    if objdump is None:
        return "DEBUG=6: no objdump on PATH; install binutils (or llvm) to see the disassembly"
    for args in (["-d", f"--disassemble={symbol}"], ["-d", f"--disassemble-symbols={symbol}"],
                 ["-d", f"--disassemble-symbols=_{symbol}"], ["-d"]):
        result = subprocess.run([objdump, "--no-show-raw-insn", *args, str(path)],
                                capture_output=True, text=True)
        if result.returncode == 0 and symbol in result.stdout:
            lines = result.stdout.splitlines()
            heads = (f"<{symbol}>:", f"<_{symbol}>:")  # macOS prefixes C symbols with _
            start = next((i for i, line in enumerate(lines) if line.endswith(heads)), 0)
            end = next((i for i in range(start, len(lines)) if not lines[i].strip()), len(lines))
            return "\n".join(lines[start:end])
    return f"DEBUG=6: {objdump} could not disassemble {path}"


class CDevice(Backend):
    """C source in, a loaded shared library out (see the lowering in tinyedu/engine/lower.py)."""

    name = "C"
    renderer = staticmethod(render_c)
    runtime = CProgram

    @property
    def compiler(self) -> Compiler:
        return Compiler()  # a new one each time: TINYEDU_SANITIZE may have changed

    @property
    def vector_width(self) -> int:
        return native_vector_width(find_compiler())

    def threads(self) -> int:
        """THREADS (default: every core) when OpenMP is there, else 1."""
        return thread_count() if openmp_available(find_compiler()) else 1


# --8<-- [start:fork]
# OpenMP libraries a kernel may have loaded (gcc's libgomp, LLVM's libomp, Intel's), on Linux and macOS.
OPENMP_LIBRARIES = ("libgomp.so.1", "libomp.so.5", "libomp.so", "libiomp5.so", "libgomp.1.dylib",
                    "libomp.dylib")


def one_thread_after_fork() -> None:
    """Run in a child process right after fork(): kernels run their parallel loops on the calling thread.

    fork() copies only the thread that called it. gcc's OpenMP runtime (libgomp) keeps the threads of
    its pool in that thread's state, so the child's first parallel loop would wait forever for threads
    that were not copied. Each threaded kernel enters its parallel loop only while
    `omp_get_max_threads() > 1` (see `open_loop` in renderer/cstyle.py); setting it to 1 here makes the
    child run the same kernels, with the same results, on one thread. (A process started with spawn or
    forkserver begins without threads and uses THREADS as usual.)
    """
    for name in OPENMP_LIBRARIES:
        try:  # RTLD_NOLOAD: only a library this process has loaded (one that never ran is harmless)
            library = ctypes.CDLL(name, mode=os.RTLD_NOLOAD | os.RTLD_NOW)
        except OSError:
            continue
        library.omp_set_num_threads(1)


if hasattr(os, "register_at_fork"):  # (not on Windows, which has no fork)
    os.register_at_fork(after_in_child=one_thread_after_fork)
# --8<-- [end:fork]


def create_device() -> CDevice:
    return CDevice()
