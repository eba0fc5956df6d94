"""The WASM device: C for wasm32 (tinyedu/renderer/wasm.py) -> a `.wasm` module -> run by wasmtime.

The same kernel a browser would run, run here in the Python process:

1. compile: `clang --target=wasm32 -O2 -msimd128 -nostdlib` compiles the kernel's C, and wasm-ld
   (clang calls it) links it into a module that exports the kernel and imports its memory
   (`--import-memory`). Nothing else is linked: the libm functions kernels call are in the header
   `tinyedu_wasm.h` (tinyedu/renderer/wasm_math.py). The `.wasm` goes into the C device's disk cache
   (tinyedu/runtime/compile_cache.py), and so does the machine code wasmtime's compiler (Cranelift)
   makes of it, so a kernel is compiled twice only once.
2. run: a WebAssembly module sees nothing but its *linear memory*, one array of bytes addressed by
   32-bit offsets. So each program has a memory of its own (a `wasmtime.Memory`); a call copies the
   input buffers into it (numpy memory -> linear memory), calls the kernel with their offsets as the
   pointers, and copies the output buffer back. The C stack sits first in the memory
   (`--stack-first`), so a stack overflow runs below offset 0 and traps instead of writing over data.

What wasm32 cannot do is refused with the reason: more than 4 GiB of memory for one kernel's buffers
(32-bit offsets), THREAD opts and float16 (see the renderer). A trap (an out-of-bounds access, which
would be a bug in the renderer) is raised as an error naming the kernel.

Needs `clang` and `wasm-ld` (Debian/Ubuntu: `apt-get install clang lld`) and the `wasmtime` package
(`pip install wasmtime`, or `pip install 'tinyedu[wasm]'`). `WASM_CC` picks another clang. `DEBUG=4`
prints the kernel's C, `DEBUG=6` the WebAssembly instructions (`llvm-objdump`).
"""

from __future__ import annotations

import ctypes
import functools
import os
import shutil
import tempfile
from importlib.metadata import version
from pathlib import Path
from typing import Any

from tinyedu.core.errors import UnsupportedError
from tinyedu.launch import LaunchDims
from tinyedu.renderer.wasm import HEADER_NAME, WASM_LANES, render_wasm
from tinyedu.renderer.wasm_math import WASM_MATH_HEADER
from tinyedu.runtime.compile_cache import CachedFile, LoadedLRU
from tinyedu.runtime.device import Backend, Buffer, DeviceUnavailable, cpu_only
from tinyedu.runtime.toolchain import (
    CompileError,
    compiler_version,
    cpu_signature,
    disassemble,
    numbered,
    run_compiler,
)

INSTALL_HINT = ("On Debian/Ubuntu: sudo apt-get install clang lld (or run scripts/ensure_system_tools.sh), "
                "and pip install wasmtime (or pip install 'tinyedu[wasm]'); on macOS: brew install llvm, "
                "then put "
                "its bin folder on PATH")
PAGE = 65536                # bytes in one WebAssembly memory page
MAX_MEMORY = 1 << 32        # wasm32: 32-bit offsets address at most 4 GiB
STACK_BYTES = 1 << 20       # the C stack of a kernel (local arrays live there)
ALIGN = 64                  # buffers start on a cache line, as on the C device
KEEP_MEMORY = 64 << 20      # a program whose memory grew past this gives it back after each call
# -fwrapv, -ffp-contract=off, -fno-math-errno: the C device's reasons (tinyedu/runtime/toolchain.py).
# -fno-builtin: clang must not turn a loop into a call to memset/memcpy, which nothing here defines;
# -fvisibility=default: wasm-ld exports (--export-dynamic) only what is visible, and clang hides all.
FLAGS = ("--target=wasm32", "-O2", "-msimd128", "-nostdlib", "-fwrapv", "-ffp-contract=off",
         "-fno-math-errno", "-fno-builtin", "-fvisibility=default", "-Wl,--no-entry", "-Wl,--export-dynamic",
         "-Wl,--import-memory",
         "-Wl,--stack-first", f"-Wl,-z,stack-size={STACK_BYTES}", "-Wl,--export=__heap_base")


def wasmtime_module() -> Any:
    """The wasmtime package (raises DeviceUnavailable, with the install hint, when it is missing)."""
    try:
        import wasmtime
    except ImportError:
        raise DeviceUnavailable(f"WASM device: needs the wasmtime package, which is not installed. "
                                f"{INSTALL_HINT}") from None
    return wasmtime


@functools.cache
def wasm_compiler() -> str:
    """The clang that builds wasm32 modules: $WASM_CC or clang, checked by linking a small module."""
    compiler = os.environ.get("WASM_CC") or "clang"
    if shutil.which(compiler.split()[0]) is None:
        raise DeviceUnavailable(f"WASM device: no {compiler} on PATH to compile kernels for wasm32. "
                                f"{INSTALL_HINT}")
    with tempfile.TemporaryDirectory() as tmp:
        result = run_compiler(compiler, [*FLAGS, "-x", "c", "-", "-o", str(Path(tmp) / "probe.wasm")],
                              "void probe(float* x) { x[0] = 1.0f; }\n")
    if result.returncode != 0:
        raise DeviceUnavailable(f"WASM device: {compiler} could not build a wasm32 module (it needs clang's "
                                f"WebAssembly target and the wasm-ld linker, in the lld package): "
                                f"{result.stderr.strip()[:400]}. {INSTALL_HINT}")
    return compiler


class WASMCompiler:
    """wasm32 C source -> a `.wasm` module in the disk cache. `build(source)` gives the cache entry."""

    def __init__(self, compiler: str):
        self.compiler, self.flags = compiler, FLAGS

    def signature(self) -> str:
        """Everything besides the source that changes the module: clang, its flags, the math header."""
        return "\0".join([self.compiler, compiler_version(self.compiler), *self.flags, WASM_MATH_HEADER])

    def build(self, source: str) -> CachedFile:
        return CachedFile(f"{source}\0{self.signature()}", ".wasm", lambda path: self.compile(source, path))

    def compile(self, source: str, path: Path) -> None:
        with tempfile.TemporaryDirectory() as include:
            Path(include, HEADER_NAME).write_text(WASM_MATH_HEADER)
            arguments = [*self.flags, "-I", include, "-x", "c", "-", "-o", str(path)]
            result = run_compiler(self.compiler, arguments, source)
        if result.returncode != 0:
            raise CompileError(f"WASM device: {self.compiler} failed to compile this kernel for wasm32 "
                               f"(flags {' '.join(self.flags)}):\n{numbered(source)}\n"
                               f"--- compiler output ---\n{result.stderr.strip()}")


class Instance:
    """One program's module, instantiated with a linear memory of its own."""

    def __init__(self, device: "WASMDevice", module: Any):
        wasmtime = device.wasmtime
        self.store = wasmtime.Store(device.engine)
        pages = wasmtime.MemoryType(wasmtime.Limits(module_pages(module), None))
        self.memory = wasmtime.Memory(self.store, pages)
        self.instance = wasmtime.Instance(self.store, module, [self.memory])
        self.exports = self.instance.exports(self.store)
        # the first free byte, after the stack and the module's data
        self.heap_base = self.exports["__heap_base"].value(self.store)

    def ensure(self, nbytes: int) -> int:
        """Grow the memory to at least `nbytes`; the address of its first byte in this process."""
        have = self.memory.size(self.store) * PAGE
        if nbytes > have:
            self.memory.grow(self.store, -(-(nbytes - have) // PAGE))
        return ctypes.addressof(self.memory.data_ptr(self.store).contents)


def module_pages(module: Any) -> int:
    """The memory pages the module asks for (its stack and data)."""
    for imported in module.imports:
        if imported.name == "memory":
            return imported.type.limits.min
    return 1


class WASMProgram:
    """A compiled kernel: `program([out, *inputs])` copies the buffers in, calls the kernel, copies out."""

    def __init__(self, device: "WASMDevice", name: str, module_file: CachedFile, machine_code: CachedFile):
        self.device, self.name, self.module_file, self.machine_code = device, name, module_file, machine_code
        self.path = module_file.file

    def _instantiate(self) -> Instance:
        wasmtime, path = self.device.wasmtime, str(self.machine_code.path())
        module = wasmtime.Module.deserialize_file(self.device.engine, path)
        return Instance(self.device, module)

    def prepare(self) -> None:
        """Instantiate the module now, so that DEBUG=2 times loading apart from running."""
        self.device.loaded.get(self.path, self._instantiate)

    def layout(self, buffers: list[Buffer], start: int) -> tuple[list[int], int]:
        """Where each buffer goes in linear memory (64-byte aligned from `start`), and the end."""
        offsets, end = [], start
        for b in buffers:
            end = -(-end // ALIGN) * ALIGN
            offsets.append(end)
            end += max(b.nbytes, 1)
        if end > MAX_MEMORY:
            sizes = ", ".join(f"{b.nbytes:,}" for b in buffers)
            raise UnsupportedError(f"WASM device: kernel {self.name} needs {end:,} bytes of linear memory "
                                   f"for its buffers ({sizes} bytes) and wasm32 addresses at most 4 GiB "
                                   f"({MAX_MEMORY:,} bytes); split the work into smaller tensors, or run it "
                                   "on DEVICE=C")
        return offsets, end

    def __call__(self, buffers: list[Buffer]) -> None:
        instance = self.device.loaded.get(self.path, self._instantiate)
        offsets, end = self.layout(buffers, instance.heap_base)
        base = instance.ensure(end)
        for b, offset in zip(buffers[1:], offsets[1:], strict=True):  # inputs (kernels write only data0)
            ctypes.memmove(base + offset, b.host_address(), b.nbytes)
        try:
            instance.exports[self.name](instance.store, *offsets)
        except self.device.wasmtime.Trap as trap:
            raise RuntimeError(f"WASM device: kernel {self.name} trapped (a bug in the renderer): "
                               f"{trap}") from None
        ctypes.memmove(buffers[0].host_address(), base + offsets[0], buffers[0].nbytes)
        if end > KEEP_MEMORY:  # do not hold on to a large memory between calls
            self.device.loaded.items.pop(self.path, None)

    def disassemble(self) -> str:
        return disassemble(self.path, self.name, ("llvm-objdump", "llvm-objdump-14", "llvm-objdump-15"),
                           "install llvm (llvm-objdump) to see the WebAssembly instructions")


class WASMDevice(Backend):
    """C source for wasm32 in, a wasmtime instance out."""

    name = "WASM"
    renderer = staticmethod(render_wasm)
    vector_width = WASM_LANES

    def __init__(self) -> None:
        super().__init__()
        self.wasmtime = wasmtime_module()
        self.compiler = WASMCompiler(wasm_compiler())
        self.engine = self.wasmtime.Engine()
        self.loaded: LoadedLRU[Instance] = LoadedLRU(lambda instance: None, limit=64)

    def runtime(self, name: str, module_file: CachedFile, launch: LaunchDims | None = None) -> WASMProgram:
        cpu_only("WASM", name, launch)
        return WASMProgram(self, name, module_file, self.machine_code(module_file))

    def machine_code(self, module_file: CachedFile) -> CachedFile:
        """Cranelift's machine code for a module, cached beside it (keyed by module, wasmtime, CPU)."""
        wasm = module_file.path().read_bytes()
        # Cranelift compiles for this CPU's features, and wasmtime refuses code made for others
        key = f"{wasm.hex()}\0wasmtime {version('wasmtime')}\0{cpu_signature()}"

        def build(path: Path) -> None:
            path.write_bytes(self.wasmtime.Module(self.engine, wasm).serialize())

        return CachedFile(key, ".cwasm", build)

    def threads(self) -> int:
        return 1  # one module instance runs on the thread that calls it


def create_device() -> WASMDevice:
    return WASMDevice()
