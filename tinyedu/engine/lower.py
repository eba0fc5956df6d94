"""Lowering: from a kernel AST to a program a device runs, one visible step at a time.

    ast ──Kernel──▶ loop shape ──opts──▶ optimized loops ──linearize──▶ UOps
        ──render──▶ source ──compile──▶ binary ──runtime──▶ program([out, *inputs])

Stage 3 is `Kernel` and `linearize` (tinyedu/codegen), stage 4 the renderer and compiler of a
device, stage 5 the opts: hand-coded heuristics (tinyedu/codegen/heuristics.py) by default, a
BEAM search that times candidates on the device with `BEAM=n`, none with `NOOPT=1`. A device
supplies only the renderer, the compiler and the runtime (see tinyedu/runtime/device.py). NUMPY
has no renderer: it interprets the AST itself, sharing nothing with these steps, which is what
makes it the oracle. PYTHON's "source" is the UOps list, which it runs one UOp at a time.

`lower` is the one place these steps are written: the realizer calls it for every kernel, BEAM
for each candidate, the export for its portable C, the drawings for the stages they show.
Programs are cached per process in each device's `programs` (by AST and every setting that
changes the program); compiled libraries are also cached on disk by the compiling devices, and
BEAM's choices by the search. `lower_ahead` lowers the new kernels of a schedule on a few threads
before it runs, so that their compiler processes run side by side.
"""

from __future__ import annotations

import math
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from tinyedu.codegen import heuristics
from tinyedu.codegen.kernel import Kernel
from tinyedu.codegen.launch import launch_dims
from tinyedu.codegen.linearizer import linearize
from tinyedu.codegen.opts import Opt, OptError, apply_opts
from tinyedu.codegen.search import SearchResult, beam_search
from tinyedu.core.helpers import SETTINGS, debug_level, getenv, prod
from tinyedu.core.ops import LazyOp
from tinyedu.core.uops import UOp, uops_listing
from tinyedu.engine import beam
from tinyedu.runtime.device import Device, Runner


class Renders(Protocol):
    """What the lowering needs of a device up to the source: an export target has just this."""

    name: str
    renderer: Callable[[str, list[UOp]], Any]
    vector_width: int


@dataclass
class Program:
    """One lowered kernel: what each step produced, and the runner that executes it."""

    name: str
    device: str
    ast: LazyOp
    runner: Runner | None             # None when lowered only to the source (compile=False)
    kernel: Kernel | None = None      # None on NUMPY, which interprets the AST
    uops: list[UOp] | None = None
    source: Any = None                # C source; on PYTHON the UOps; None on NUMPY
    seconds: dict[str, float] = field(default_factory=dict)  # time spent in each lowering step
    runs: int = 0                     # how often the realizer ran it (DEBUG=2 shows setup on the first)
    flops: int | None = None          # the realizer's count for one run (counted on the first)
    label: str = ""                   # the schedule's name for the kernel (kept on the first run)

    @property
    def opts(self) -> list[Opt]:
        return self.kernel.applied_opts if self.kernel is not None else []


def optimization_mode(beam: int | None = None) -> str:
    """'none' (NOOPT=1), 'beam' (BEAM=n > 0) or 'heuristics' (the default); `beam`: BEAM, if read."""
    if getenv("NOOPT", 0):
        return "none"
    return "beam" if (int(getenv("BEAM", 0)) if beam is None else beam) > 0 else "heuristics"


def settings_key(device: str) -> tuple:
    """Everything besides the AST that changes the program a device gets.

    Read from the environment on every call (NOOPT, BEAM, THREADS, CC, TINYEDU_SANITIZE, ...), so
    that a test or a notebook that changes one sees its effect on the next realize; the realizer
    asks once per realize and device (lower_ahead). Inside a realize, while the environment is the
    one the last realizes saw (the `SETTINGS` snapshot of tinyedu/core/helpers.py is the same
    object), the answer of the last realize is given again: reading nine flags again would give the
    same values, and they cost a step about as much as its schedule's lookup. The device's limits
    are not in the environment: the answer is kept only while they are the very same object."""
    backend = Device[device]
    environ = SETTINGS.environ if SETTINGS.depth else None  # (None: outside a realize, or no snapshot)
    if environ is not None:
        kept = _LAST.get(device)
        if kept is not None and kept[0] is environ and kept[1] is backend and kept[2] is backend.limits:
            return kept[3]
    compiler = backend.compiler
    beam = int(getenv("BEAM", 0))
    settings = (optimization_mode(beam), beam, backend.threads(), backend.limits,
                None if compiler is None else (compiler.compiler, compiler.flags),
                getattr(backend, "renderer_choice", None))  # (a device that renders one AST in two ways)
    # One object per distinct settings: a program's key then compares its settings by identity (every
    # kernel of every realize is looked up with them), not element by element.
    settings = _SETTINGS.setdefault(settings, settings)
    if environ is not None:
        _LAST[device] = (environ, backend, backend.limits, settings)
    return settings


# device -> (the environment snapshot, backend and limits it was computed with, its settings key)
_LAST: dict[str, tuple] = {}
_SETTINGS: dict[tuple, tuple] = {}


# --8<-- [start:lower]
def lower(device: str | Renders, ast: LazyOp, opts: list[Opt] | None = None, *, name: str | None = None,
          vector_width: int | None = None, threads: int | None = None, compile: bool = True) -> Program:
    """The program that runs `ast` on `device`: every step of the lowering, in order.

    `opts=None` lets the current mode choose them (heuristics, BEAM or none) and caches the program
    in the device's `programs`; a list applies exactly those opts (BEAM's candidates, a notebook's
    experiment) and is not cached. The export writes portable code: it names the function (`name`),
    caps the vectors (`vector_width`) and runs on one thread (`threads`), and stops at the source
    (`compile=False`; the Program then has no runner); its target (tinyedu/export/targets.py) stands in
    for the device: it has a renderer and a vector width, and nothing to compile or run with.
    """
    backend = Device[device] if isinstance(device, str) else device
    default = isinstance(device, str) and opts is None and name is None and vector_width is None and \
        threads is None and compile
    key = (ast, settings_key(device)) if default else None
    found = backend.programs.get(key) if default else None  # comparing a fresh AST with the cached one
    if found is not None:                                     # walks both DAGs: the cost of a cache hit
        return found
    if backend.renderer is None:  # NUMPY: the AST is the program
        program = Program(backend.name, backend.name, ast, backend.runtime(backend.name, ast, None))
    else:
        program = _lower_kernel(backend, ast, opts, name, vector_width, threads, compile, may_search=default)
    if default:
        backend.programs[key] = program
    return program


# --8<-- [start:ahead]
# Devices whose compile step is a compiler *process* (cc, or the aarch64 cross-compiler): while one
# thread waits for it, another thread lowers the next kernel. (LLVM compiles in this process and GPU
# runtimes compile through their drivers: neither is lowered ahead.)
COMPILES_IN_A_PROCESS = {"C", "NEON"}


def compile_threads() -> int:
    """COMPILE_THREADS=n (default: the number of cores): kernels of one schedule lowered at once."""
    return max(1, int(getenv("COMPILE_THREADS", os.cpu_count() or 1)))


def lower_ahead(kernels: list[tuple[str, LazyOp]]) -> list[Program | None]:
    """The programs of a schedule's kernels (device, AST), in their order, before it runs: those
    lowered before are looked up (with each device's settings read once), the new ones lowered
    several at once.

    A fresh process pays for its first step mostly in compiling: one compiler process per kernel,
    tens of milliseconds each. The kernels of a schedule do not depend on each other until they run,
    so their compilers can run side by side. A kernel whose answer is None (lowered on a device
    that compiles in this process, or whose lowering failed on a thread) is lowered by the realizer
    when its turn comes, which raises any error then, in order. BEAM searches are not run ahead:
    they time candidates on the device, which other threads' compilers would disturb. (A list in
    the kernels' order, not a dict by kernel: a repeated step finds every program, and the realizer
    then takes them in order instead of hashing each kernel again.)
    """
    settings: dict[str, tuple] = {}
    programs: dict[str, dict] = {}  # (each device's programs, looked up by name once)
    found: list[Program | None] = []
    new: dict[tuple[str, LazyOp], None] = {}
    for device, ast in kernels:
        if device not in settings:
            settings[device], programs[device] = settings_key(device), Device[device].programs
        program = programs[device].get((ast, settings[device]))
        found.append(program)
        if program is None and Device.kind(device) in COMPILES_IN_A_PROCESS:
            new[(device, ast)] = None
    if len(new) >= 2 and optimization_mode() != "beam":  # (a repeated step has nothing new: no threads)
        threads = min(compile_threads(), len(new))
        if threads >= 2:
            lowered = _lower_in_parallel(list(new), threads)
            found = [lowered.get(kernel) if program is None else program
                     for kernel, program in zip(kernels, found, strict=True)]
    return found


def _lower_in_parallel(kernels: list[tuple[str, LazyOp]], threads: int) -> dict[tuple[str, LazyOp], Program]:
    """Lower `kernels` on `threads` threads; the ones whose lowering raised are left out."""
    start = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        futures = [pool.submit(lower, device, ast) for device, ast in kernels]
    lowered = {kernel: future.result() for kernel, future in zip(kernels, futures, strict=True)
               if future.exception() is None}
    if debug_level() >= 2:
        print(f"lowered {len(kernels)} new kernels ahead on {threads} threads in "
              f"{(time.perf_counter() - start) * 1e3:.2f} ms")
    return lowered
# --8<-- [end:ahead]


def _lower_kernel(backend: Renders, ast: LazyOp, opts: list[Opt] | None, name: str | None,
                  vector_width: int | None, threads: int | None, compile: bool, may_search: bool) -> Program:
    device, seconds, start = backend.name, {}, time.perf_counter()
    width = backend.vector_width if vector_width is None else vector_width
    kernel = new_kernel(ast, backend)                                       # 1. one loop shape
    if opts is None:                                                        # 2. opts: chosen or given
        opts = choose_opts(kernel, device, width, backend.threads() if threads is None else threads,
                           may_search)
    apply_opts(kernel, opts)
    seconds["opts"] = time.perf_counter() - start
    uops = linearize(kernel, width)                                         # 3. the UOps
    seconds["linearize"] = time.perf_counter() - start - seconds["opts"]
    source = backend.renderer(name or kernel.name, uops)                    # 4. the source
    seconds["render"] = time.perf_counter() - start - sum(seconds.values())
    if not compile:
        return Program(kernel.name, device, ast, None, kernel, uops, source, seconds)
    compiler = backend.compiler
    binary = compiler.build(source) if compiler is not None else source     # 5. compile (cached)
    seconds["compile"] = time.perf_counter() - start - sum(seconds.values())
    runner = backend.runtime(kernel.name, binary, launch_dims(uops))        # 6. a callable on buffers
    return Program(kernel.name, device, ast, runner, kernel, uops, source, seconds)
# --8<-- [end:lower]


def choose_opts(kernel: Kernel, device: str, vector_width: int, threads: int, may_search: bool) -> list[Opt]:
    """The opts the current mode picks: none (NOOPT=1), the heuristics', or BEAM's (when a search
    is allowed, and not for small kernels, which the heuristics leave as written: a search would
    cost more than they run)."""
    mode = optimization_mode()
    if mode == "none":
        return []
    if mode == "beam" and may_search and prod(kernel.full_shape) >= heuristics.SMALL_KERNEL:
        return search(kernel.ast, device, int(getenv("BEAM", 0))).opts
    return heuristic_opts(kernel, vector_width, threads)


def new_kernel(ast: LazyOp, backend: Renders) -> Kernel:
    """The Kernel of `ast`, carrying the device's GPU limits if it is a GPU (so GPU opts apply)."""
    kernel = Kernel(ast)
    kernel.gpu = getattr(backend, "limits", None)
    return kernel


def heuristic_opts(kernel: Kernel, vector_width: int, threads: int) -> list[Opt]:
    """The hand-coded heuristics' opts: a GPU's for a GPU kernel, else the CPU's."""
    if kernel.gpu is not None:
        return heuristics.gpu_optimizations(kernel)
    return heuristics.hand_coded_optimizations(kernel, vector_width, threads)


# --8<-- [start:beam]
def search(ast: LazyOp, device: str, width: int) -> SearchResult:
    """BEAM=n: the best opts for `ast` on `device`, from the disk cache or searched (then cached).

    Every candidate is lowered with `lower` above and timed on scratch buffers (tinyedu/engine/beam.py);
    the search itself is tinyedu/codegen/search.py."""
    found = beam.load_result(ast, device, width)
    if found is not None:
        return found
    backend = Device[device]
    buffers = beam.scratch_buffers(ast, device)

    def time_opts(opts: list[Opt]) -> float:
        try:
            return beam.time_runner(lower(device, ast, opts).runner, buffers)
        except (OptError, RuntimeError, ValueError):  # the compiler or the device rejected it
            return math.inf

    kernel = new_kernel(ast, backend)
    heuristic = heuristic_opts(kernel, backend.vector_width, backend.threads())
    prefixes = [heuristic[:n] for n in range(1, len(heuristic) + 1)]  # so the search can branch off them
    result = beam_search(kernel, time_opts, width, backend.threads(), start=prefixes,
                         budget=float(getenv("BEAM_BUDGET", 60.0)))
    beam.save_result(ast, device, width, kernel.name, result)
    return result
# --8<-- [end:beam]


def show(program: Program) -> None:
    """What DEBUG asks for: 3 the kernel and its opts, 4 the source, 5 the UOps, 6 the machine code."""
    level = debug_level()
    if level >= 3 and program.kernel is not None:
        print(program.kernel)
    if level >= 4 and program.source is not None:
        print(program.source if isinstance(program.source, str) else uops_listing(program.source))
    if level >= 5 and program.uops is not None and isinstance(program.source, str):
        print(uops_listing(program.uops))
    if level >= 6 and hasattr(program.runner, "disassemble"):
        print(program.runner.disassemble())

