"""The C device: C source (from tinyedu/renderer/cstyle.py) -> shared library -> called with ctypes.

The engine (tinyedu/engine/lower.py) turns a kernel AST into C source; this device compiles it
with the system compiler and calls the function with the buffers' memory. What it shares with the
NEON device (finding the compiler, probing its flags, compiling with a readable error, objdump) is in
tinyedu/runtime/toolchain.py; this file holds the C device's own choices: its flags, its cache key,
and how a kernel is loaded and called.

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
  process made by fork() runs its kernels on one thread (see `one_thread_after_fork` in
  toolchain.py). How idle OpenMP threads wait is yours to choose (OMP_WAIT_POLICY; toolchain.py's
  WAIT_SETTINGS says why passive waiting helps on a busy machine); tinyedu never sets it.
- `ASYNC=1` queues the kernels to a launcher thread instead of calling them, so they run while Python
  goes on (tinyedu/runtime/launch_queue.py).
- `DEBUG=4` prints each kernel's source, `DEBUG=5` its UOps, `DEBUG=6` its disassembly.

Flags beyond the base ones are probed (the compiler must accept them): `-march=native` (this
CPU's vector instructions), `-mprefer-vector-width=512` (so gcc turns the lane-by-lane fused
multiply-add of a vector into one AVX-512 instruction, not two 256-bit halves) and `-fopenmp`.
"""

from __future__ import annotations

import ctypes
import functools
from pathlib import Path
from typing import Any

from tinyedu.core.helpers import getenv
from tinyedu.launch import LaunchDims
from tinyedu.renderer.c_vector_math import render_c_vector_math
from tinyedu.renderer.cstyle import render_c
from tinyedu.runtime.compile_cache import CachedFile, LoadedLRU, cache_dir, dlclose, key_digest
from tinyedu.runtime.device import Backend, Buffer, cpu_only, thread_count
from tinyedu.runtime.launch_queue import QUEUE
from tinyedu.runtime.toolchain import (
    BASE_FLAGS,
    accepts_flag,
    compile_library,
    compiler_version,
    cpu_signature,
    disassemble,
    find_compiler,
    native_vector_width,
    openmp_available,
)

SANITIZE_FLAGS = ("-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer",
                  "-g")


# --8<-- [start:probed-flags]
@functools.cache
def compiler_flags(compiler: str, sanitize: bool) -> tuple[str, ...]:
    """The flags this compiler gets: the base flags, the probed ones it accepts, sanitizers if asked."""
    flags = BASE_FLAGS + (SANITIZE_FLAGS if sanitize else ())
    for flag in ("-march=native", "-mprefer-vector-width=512"):
        if accepts_flag(compiler, flag):
            flags += (flag,)
    if openmp_available(compiler):
        flags += ("-fopenmp",)
    # GCC 12 (Debian 12's default) miscompiles some vectorized loops at -O2 -march=native when it
    # threads jumps: a 2-element log1p(cos(sign(x))) kernel became a constant store (clang is right;
    # tests/test_numerics.py::test_a_gcc_12_miscompilation). Jump threading is a small optimization.
    if accepts_flag(compiler, "-fno-thread-jumps"):
        flags += ("-fno-thread-jumps",)
    # GCC 12.2 (Debian 12's) also miscompiles a sum whose innermost loop reads 2 elements backwards:
    # unrolled, the pair becomes a reversed vector load whose reduction it gets wrong (the sum of
    # Tensor.arange(16).reshape(2, 4, 2).flip(2) was 128, not 120: tests/test_random_graphs.py).
    # Not unrolling such loops completely avoids it; -fno-tree-loop-vectorize would too, but made a
    # 512x512 matmul 100x slower.
    if accepts_flag(compiler, "--param=max-completely-peel-times=1"):
        flags += ("--param=max-completely-peel-times=1",)
    # C says a cast rounds; GCC's GNU mode lets `(float)(_Float16)x` keep x unrounded when the half
    # value stays in a register (a fused x.half().float() in a matmul skipped the rounding to half).
    # Standard excess precision makes every cast round. float and double have no excess precision on
    # x86-64 and arm64, so this changes nothing else.
    if accepts_flag(compiler, "-fexcess-precision=standard"):
        flags += ("-fexcess-precision=standard",)
    return flags
# --8<-- [end:probed-flags]


def sanitize_enabled() -> bool:
    return getenv("TINYEDU_SANITIZE", 0) != 0


class Compiler:
    """Turns C source into a loaded shared library, through the disk cache."""

    def __init__(self, compiler: str | None = None, sanitize: bool | None = None):
        self.compiler = compiler or find_compiler()
        self.flags = compiler_flags(self.compiler, sanitize_enabled() if sanitize is None else sanitize)

    def signature(self) -> str:
        """Everything besides the source that changes the library: compiler, version, flags, CPU."""
        return "\0".join([self.compiler, compiler_version(self.compiler), *self.flags, cpu_signature()])

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
# --8<-- [end:cache]


# --8<-- [start:program]
# At most MAX_LOADED libraries stay loaded (compile_cache.py says why); an evicted one is dlclose'd,
# after the queued kernels ran (ASYNC=1: one of them may be in it).
LOADED: LoadedLRU[ctypes.CDLL] = LoadedLRU(lambda library: (QUEUE.drain(), dlclose(library._handle)))


class CProgram:
    """A compiled kernel: `program([out, *inputs])` calls the C function on the buffers' memory.

    It holds its cache entry, not a loaded library: the library is loaded (checked first) when the
    program runs and is not loaded any more, and may be unloaded again to make room for others.
    """

    def __init__(self, name: str, library: CachedFile, launch: LaunchDims | None = None):
        cpu_only("C", name, launch)
        self.name, self.library, self.path = name, library, library.file
        self._key = str(library.file)  # its key in LOADED (a str hashes in C; a Path's hash is a Python call)
        self._loaded: ctypes.CDLL | None = None  # the library `_function` was looked up in
        self._function: Any = None
        self._address = 0  # where `_function` starts (what ASYNC=1 queues)
        self._arity: int | None = None  # how many pointers `_function` was declared to take

    def _load(self) -> ctypes.CDLL:
        return ctypes.CDLL(str(self.library.path()))

    @property
    def function(self) -> Any:
        """The C function (a ctypes object), its library loaded now if it is not. Call it right away:
        the library may be unloaded later to make room for others, and the function with it.

        The function is looked up again only when its library was loaded anew (after an eviction):
        a repeated step calls the same few programs, and the lookup would cost more than the call."""
        loaded = LOADED.get(self._key, self._load)
        if loaded is not self._loaded:
            function = getattr(loaded, self.name)
            function.restype = None
            self._loaded, self._function, self._arity = loaded, function, None
            self._address = ctypes.cast(function, ctypes.c_void_p).value
        return self._function

    def prepare(self) -> None:
        """Load (and check) the library now, so that DEBUG=2 times loading apart from running."""
        _ = self.function

    def __call__(self, buffers: list[Buffer]) -> None:
        function = self.function
        if self._arity != len(buffers):  # declared once: every argument is a pointer, and ctypes then
            function.argtypes = (ctypes.c_void_p,) * len(buffers)  # converts the addresses in C
            self._arity = len(buffers)
        function(*[b.host_address() for b in buffers])

    def submit(self, buffers: list[Buffer]) -> bool:
        """Queue the call instead (ASYNC=1: tinyedu/runtime/launch_queue.py); False if it cannot be."""
        self.function  # noqa: B018 - (loads the library if it was unloaded, and keeps `_address` current)
        return QUEUE.submit(self._address, buffers)

    def disassemble(self) -> str:
        return disassemble(self.path, self.name, ("objdump", "llvm-objdump"),
                           "install binutils (or llvm) to see the disassembly")
# --8<-- [end:program]


class CDevice(Backend):
    """C source in, a loaded shared library out (see the lowering in tinyedu/engine/lower.py)."""

    name = "C"
    runtime = CProgram

    @property
    def renderer_choice(self) -> str:
        """Which renderer `renderer` uses now (part of the key of the programs cached in memory)."""
        return "c" if getenv("TINYEDU_NO_VECTOR_MATH", 0) else "c_vector_math"

    def renderer(self, name: str, uops: list) -> str:
        """C source, its loops of exp2 vectorized (tinyedu/renderer/c_vector_math.py; TINYEDU_NO_VECTOR_MATH=1
        renders every exp2 as a call of the C library's exp2f or exp2, one element at a time)."""
        return (render_c if self.renderer_choice == "c" else render_c_vector_math)(name, uops)

    @property
    def compiler(self) -> Compiler:
        """The compiler that $CC and TINYEDU_SANITIZE ask for now: both are read on every call, so a
        change takes effect at the next kernel (the lowering asks once per realize)."""
        return _compiler(find_compiler(), sanitize_enabled())

    @property
    def vector_width(self) -> int:
        return native_vector_width(find_compiler())

    def threads(self) -> int:
        """THREADS (default: every core) when OpenMP is there, else 1."""
        return thread_count() if openmp_available(find_compiler()) else 1


@functools.cache
def _compiler(compiler: str, sanitize: bool) -> Compiler:
    """One Compiler per (compiler, sanitizers): making one probes nothing twice (its flags are cached)
    but still costs more than the rest of looking up a program that was lowered before."""
    return Compiler(compiler, sanitize)


def create_device() -> CDevice:
    return CDevice()
