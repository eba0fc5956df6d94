"""Lowering: from a kernel AST to a program a device runs, one visible step at a time.

    ast ──Kernel──▶ loop shape ──opts──▶ optimized loops ──linearize──▶ UOps
        ──render──▶ source ──compile──▶ binary ──runtime──▶ program([out, *inputs])

Stage 3 is `Kernel` and `linearize` (tinyedu/codegen), stage 4 the renderer and compiler of a
device, stage 5 the opts: hand-coded heuristics (tinyedu/codegen/heuristics.py) by default, a
BEAM search that times candidates on the device with `BEAM=n`, none with `NOOPT=1`. A device
supplies only the renderer, the compiler and the runtime (see tinyedu/runtime/device.py). NUMPY
has no renderer: it interprets the AST itself, sharing nothing with these steps, which is what
makes it the oracle. PYTHON's "source" is the UOps list, which it runs one UOp at a time.

Programs are cached per process in each device's `programs` (by AST and every setting that
changes the program); compiled libraries are also cached on disk by the C device, and BEAM's
choices by the search.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from tinyedu.codegen import heuristics
from tinyedu.codegen.kernel import Kernel
from tinyedu.codegen.linearizer import linearize
from tinyedu.codegen.opts import Opt, apply_opts
from tinyedu.codegen.uops import UOp, launch_dims, uops_listing
from tinyedu.engine.beam import beam_opts
from tinyedu.helpers import debug_level, getenv, prod
from tinyedu.ops import LazyOp
from tinyedu.runtime.device import Device, Runner, install_lowering


@dataclass
class Program:
    """One lowered kernel: what each step produced, and the runner that executes it."""

    name: str
    device: str
    ast: LazyOp
    runner: Runner
    kernel: Kernel | None = None      # None on NUMPY, which interprets the AST
    uops: list[UOp] | None = None
    source: Any = None                # C source; on PYTHON the UOps; None on NUMPY
    seconds: dict[str, float] = field(default_factory=dict)  # time spent in each lowering step
    runs: int = 0                     # how often the realizer ran it (DEBUG=2 shows setup on the first)

    @property
    def opts(self) -> list[Opt]:
        return self.kernel.applied_opts if self.kernel is not None else []


def optimization_mode() -> str:
    """'none' (NOOPT=1), 'beam' (BEAM=n > 0) or 'heuristics' (the default)."""
    if getenv("NOOPT", 0):
        return "none"
    return "beam" if int(getenv("BEAM", 0)) > 0 else "heuristics"


def settings_key(device: str) -> tuple:
    """Everything besides the AST that changes the program a device gets."""
    backend = Device[device]
    compiler = backend.compiler
    return (optimization_mode(), int(getenv("BEAM", 0)), backend.threads(),
            None if compiler is None else (compiler.compiler, compiler.flags))


# --8<-- [start:lower]
def lower(device: str, ast: LazyOp) -> Program:
    """The program that runs `ast` on `device` (cached in the device's `programs`)."""
    backend, seconds = Device[device], {}
    key = (ast, settings_key(device))
    found = backend.programs.get(key)  # one lookup: comparing a step's fresh AST with the cached one
    if found is not None:              # walks both DAGs, which is the cost of a cache hit
        return found
    if backend.renderer is None:  # NUMPY: the AST is the program
        program = Program(device, device, ast, backend.runtime(device, ast, None))
    else:
        start = time.perf_counter()
        kernel = Kernel(ast)                                    # 1. one loop shape for every buffer
        choose_opts(kernel, device)                             # 2. opts: heuristics, BEAM or none
        seconds["opts"] = time.perf_counter() - start
        uops = linearize(kernel, backend.vector_width)          # 3. the UOps
        seconds["linearize"] = time.perf_counter() - start - seconds["opts"]
        source = backend.renderer(kernel.name, uops)            # 4. the source
        seconds["render"] = time.perf_counter() - start - sum(seconds.values())
        compiler = backend.compiler
        binary = compiler.build(source) if compiler is not None else source  # 5. compile (cached)
        seconds["compile"] = time.perf_counter() - start - sum(seconds.values())
        runner = backend.runtime(kernel.name, binary, launch_dims(uops))  # 6. a callable on buffers
        program = Program(kernel.name, device, ast, runner, kernel, uops, source, seconds)
    backend.programs[key] = program
    return program
# --8<-- [end:lower]


def choose_opts(kernel: Kernel, device: str) -> None:
    """Apply the opts the current mode picks: none, the heuristics', or the BEAM search's (not for
    small kernels, which the heuristics leave as written: a search would cost more than they run)."""
    mode = optimization_mode()
    if mode == "none":
        return
    backend = Device[device]
    if mode == "beam" and prod(kernel.full_shape) >= heuristics.SMALL_KERNEL:  # small kernels: no search
        opts = beam_opts(kernel.ast, device, int(getenv("BEAM", 0)))
    else:
        opts = heuristics.hand_coded_optimizations(kernel, backend.vector_width, backend.threads())
    apply_opts(kernel, opts)




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


install_lowering(lower)
