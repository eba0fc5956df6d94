"""The C toolchain the C and NEON devices share: find a compiler, ask it what it accepts, build a library
with it, read the machine code back.

Both devices compile generated C with a system compiler (the NEON device on x86-64 with a cross
compiler for aarch64), so the pieces around the compiler are the same: running it (`run_compiler`),
probing a flag (`accepts_flag`) or OpenMP (`openmp_available`), the facts a cache key needs besides
the source (`compiler_version`, `cpu_signature`), compiling a kernel with an error that shows the
numbered source (`compile_library`), and objdump's listing of one function (`disassemble`, for
DEBUG=6). What each device does with them (its flags, its cache key, how it loads and calls a kernel)
stays in ops_c.py and ops_neon.py.

OpenMP also lives here: the settings that choose how its idle threads wait (WAIT_SETTINGS, which
tinyedu leaves to you), and a process that forks after a threaded kernel ran must make its child run
kernels on one thread (`one_thread_after_fork`), whichever device loaded the kernel.
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

from tinyedu.core.helpers import getenv

# --8<-- [start:flags]
# -fwrapv: int32 overflow wraps as in numpy; -ffp-contract=off: no fused multiply-add (numpy rounds
# a*b before adding c); -fno-math-errno: sqrtf can be one instruction (errno is never read).
# -O2, measured against the others on optimized kernels: -O1 does not turn the lane-by-lane fmaf of
# a vector into one instruction (a 512x512 matmul runs 50x slower), -O3 compiles no faster and made
# the register-blocked matmul 1.5x slower (its extra unrolling spills registers).
BASE_FLAGS = ("-O2", "-shared", "-fPIC", "-fwrapv", "-ffp-contract=off", "-fno-math-errno")
# --8<-- [end:flags]
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
    return getenv("CC", "") or _default_compiler(getenv("PATH", ""))


@functools.cache
def _default_compiler(path: str) -> str:
    """The first of cc, gcc, clang on this PATH (looked up once per PATH: it runs for every kernel)."""
    for name in ("cc", "gcc", "clang"):
        if shutil.which(name, path=path):
            return name
    raise RuntimeError("C device: no C compiler found; install gcc or clang, or set CC to one "
                       "(or use DEVICE=NUMPY)")


# ---- what the compiler accepts ----
@functools.cache
def accepts_flag(compiler: str, flag: str) -> bool:
    """Whether `compiler` compiles a small function with `flag`, without even a warning about it."""
    probe = "int probe(void) { return 0; }\n"
    result = run_compiler(compiler, [flag, "-x", "c", "-c", "-", "-o", os.devnull], probe)
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
    march = ["-march=native"] if accepts_flag(compiler, "-march=native") else []
    result = run_compiler(compiler, [*march, "-dM", "-E", "-x", "c", "-"], "")
    macros = result.stdout
    if "__AVX512F__" in macros:
        return 16
    if "__AVX__" in macros:
        return 8
    return 4


# ---- what a cache key needs besides the source ----
@functools.cache
def compiler_version(compiler: str) -> str:
    """Part of the cache key: a new compiler version must not reuse old libraries."""
    result = run_compiler(compiler, ["--version"])
    return (result.stdout or result.stderr).strip()


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


# ---- compiling, and reading the result back ----
# --8<-- [start:compile]
def numbered(source: str) -> str:
    """`source` with line numbers, so that a compiler's `<stdin>:12:5: error` points somewhere."""
    return "\n".join(f"{n:4d}  {line}" for n, line in enumerate(source.splitlines(), start=1))


def compile_library(device: str, compiler: str, flags: tuple[str, ...] | list[str], source: str,
                    path: Path) -> None:
    """Run `compiler` on C `source` into the library `path`; a failure shows the numbered source."""
    result = run_compiler(compiler, [*flags, "-x", "c", "-", "-o", str(path), *LIBRARIES], source)
    if result.returncode != 0:
        raise CompileError(f"{device} device: {compiler} failed to compile this kernel "
                           f"(flags {' '.join(flags)}):\n{numbered(source)}\n"
                           f"--- compiler output ---\n{result.stderr.strip()}")
# --8<-- [end:compile]


# objdump's ways of naming the one function to show (binutils, older llvm-objdump, macOS's leading _);
# a bare -d, the last resort, lists the whole library and the function is cut out of it.
OBJDUMP_ARGS = (["-d", "--disassemble={symbol}"], ["-d", "--disassemble-symbols={symbol}"],
                ["-d", "--disassemble-symbols=_{symbol}"], ["-d"])


def disassemble(path: Path, symbol: str, objdumps: tuple[str, ...], missing: str) -> str:
    """The machine code of one function, from the first of `objdumps` on PATH, or a note saying why
    there is none (`missing` says what to install when no objdump is there)."""
    objdump = next((found for name in objdumps if (found := shutil.which(name))), None)
    if objdump is None:
        return f"DEBUG=6: no {objdumps[0]} on PATH; {missing}"
    errors = ""
    for args in OBJDUMP_ARGS:
        result = subprocess.run([objdump, "--no-show-raw-insn", *(a.format(symbol=symbol) for a in args),
                                 str(path)], capture_output=True, text=True)
        listing = _function_listing(result.stdout, symbol) if result.returncode == 0 else None
        if listing is not None:
            return listing
        errors = errors or result.stderr.strip()
    return f"DEBUG=6: {objdump} could not disassemble {path}{': ' + errors if errors else ''}"


def _function_listing(listing: str, symbol: str) -> str | None:
    """The lines of `symbol`'s function in objdump's output: its heading to the blank line after it."""
    lines = listing.splitlines()
    heads = (f"<{symbol}>:", f"<_{symbol}>:")  # macOS prefixes C symbols with _
    start = next((i for i, line in enumerate(lines) if line.endswith(heads)), None)
    if start is None:
        return None
    end = next((i for i in range(start, len(lines)) if not lines[i].strip()), len(lines))
    return "\n".join(lines[start:end])


# OpenMP libraries a kernel may have loaded (gcc's libgomp, LLVM's libomp, Intel's), on Linux and macOS.
OPENMP_LIBRARIES = ("libgomp.so.1", "libomp.so.5", "libomp.so", "libiomp5.so", "libgomp.1.dylib",
                    "libomp.dylib")


def loaded_openmp_libraries() -> list[ctypes.CDLL]:
    """The OpenMP runtimes this process has loaded already (RTLD_NOLOAD: none is loaded by asking)."""
    found = []
    for name in OPENMP_LIBRARIES:
        try:
            found.append(ctypes.CDLL(name, mode=os.RTLD_NOLOAD | os.RTLD_NOW))
        except OSError:
            continue
    return found


# --8<-- [start:wait-policy]
# Settings with which a user chooses how OpenMP's idle threads wait. tinyedu never sets them: the
# runtime reads them from the process environment, which other libraries (PyTorch's OpenMP) share.
# By default libgomp keeps a finished loop's workers spinning for a while; on a machine whose cores
# are all busy, `OMP_WAIT_POLICY=passive` in your shell makes them sleep at once instead (a TinyJit
# step on two threads ran ten times slower spinning than on one thread with two other busy
# processes on 2 cores). `make test` sets it for the test suite's own processes.
WAIT_SETTINGS = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "KMP_BLOCKTIME")
# --8<-- [end:wait-policy]


# --8<-- [start:fork]


def one_thread_after_fork() -> None:
    """Run in a child process right after fork(): kernels run their parallel loops on the calling thread.

    fork() copies only the thread that called it. gcc's OpenMP runtime (libgomp) keeps the threads of
    its pool in that thread's state, so the child's first parallel loop would wait forever for threads
    that were not copied. Each threaded kernel enters its parallel loop only while
    `omp_get_max_threads() > 1` (see `open_loop` in renderer/cstyle.py); setting it to 1 here makes the
    child run the same kernels, with the same results, on one thread. (A process started with spawn or
    forkserver begins without threads and uses THREADS as usual.)
    """
    for library in loaded_openmp_libraries():  # (one that was never loaded is harmless)
        library.omp_set_num_threads(1)


if hasattr(os, "register_at_fork"):  # (not on Windows, which has no fork)
    os.register_at_fork(after_in_child=one_thread_after_fork)
# --8<-- [end:fork]
