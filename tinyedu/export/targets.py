"""Targets: which renderer writes an exported program's kernels, and how the file is compiled and run.

"c" is portable C, written by the C device's renderer: its 4-lane vector types become SSE on any
x86-64 and NEON on arm64, as the compiler chooses. "neon" is C with ARM NEON intrinsics, written by
the NEON device's renderer: every vector operation is named as the arm64 instruction it is. It runs
only on arm64; on another machine it is cross-compiled for aarch64 Linux and run under qemu-user,
as the NEON device does (tinyedu/runtime/ops_neon.py). "wasm" is C for wasm32, written by the WASM
device's renderer (SIMD128 vectors) and compiled by clang into one `.wasm` that a browser runs, with a
JavaScript module beside it (tinyedu/export/wasm.py).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable

from tinyedu.core.uops import UOp
from tinyedu.renderer.cstyle import render_c
from tinyedu.renderer.neon import NEON_LANES, render_neon
from tinyedu.renderer.wasm import WASM_LANES, render_wasm
from tinyedu.runtime.ops_neon import INSTALL_HINT, is_arm64


# --8<-- [start:target]
@dataclass(frozen=True)
class Target:
    """Where the program runs: which renderer writes the kernels, how the file is compiled and run."""

    name: str
    renderer: Callable[[str, list[UOp]], str]  # one kernel's source: a device's renderer (C, NEON)
    vector_width: int              # float32 lanes per vector: 4 = 128 bits, which every x86-64 and arm64 has
    compiler: tuple[str, ...]      # the command that compiles the file
    flags: tuple[str, ...]         # plain optimization, nothing machine-specific
    run_prefix: tuple[str, ...] = ()   # how to start the program (an emulator for another architecture)


C_TARGET = Target("c", render_c, 4, (os.environ.get("CC", "cc"),), ("-O2",))


def neon_target() -> Target:
    """ARM NEON intrinsics (the NEON device's renderer) for arm64. On an arm64 machine the file is
    compiled with its own compiler; elsewhere it is cross-compiled for aarch64 Linux, linked
    statically (so the program needs no aarch64 libraries beside it), and run under qemu-user."""
    if is_arm64():
        return Target("neon", render_neon, NEON_LANES, (os.environ.get("CC", "cc"),), ("-O2",))
    return Target("neon", render_neon, NEON_LANES, (os.environ.get("NEON_CC", "aarch64-linux-gnu-gcc"),),
                  ("-O2", "-static"), (os.environ.get("NEON_QEMU", "qemu-aarch64"),))


# wasm32 with SIMD128, no C library, no main (the host calls the forward pass), 1 MiB of C stack first
WASM_EXPORT_FLAGS = ("--target=wasm32", "-O2", "-msimd128", "-nostdlib", "-fno-builtin",
                     "-fvisibility=default", "-DTINYEDU_NO_MAIN", "-Wl,--no-entry", "-Wl,--export-dynamic",
                     "-Wl,--stack-first",
                     "-Wl,-z,stack-size=1048576")
WASM_TARGET = Target("wasm", render_wasm, WASM_LANES, (os.environ.get("WASM_CC", "clang"),),
                     WASM_EXPORT_FLAGS)

TARGETS: dict[str, Callable[[], Target]] = {"c": lambda: C_TARGET, "neon": neon_target,
                                             "wasm": lambda: WASM_TARGET}
# --8<-- [end:target]


def missing_tool_hint(target: Target, tool: str) -> str:
    """The error for a compiler or emulator that is not installed."""
    hint = f" {INSTALL_HINT}" if target.renderer is render_neon else ""
    if target.renderer is render_wasm:
        hint = " On Debian/Ubuntu: sudo apt-get install clang lld; pip install wasmtime runs it here."
    return f"export: {tool!r}, which target {target.name!r} needs, is not installed.{hint}"


__all__ = ["Target", "C_TARGET", "WASM_TARGET", "neon_target", "TARGETS", "missing_tool_hint"]
