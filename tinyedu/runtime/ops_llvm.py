"""The LLVM device: LLVM IR (tinyedu/renderer/llvmir.py) compiled in-process by llvmlite's MCJIT.

llvmlite (`pip install llvmlite`, or `pip install "tinyedu[llvm]"`) is a small Python binding to
LLVM, the compiler library under clang, Rust and Julia. The steps, each visible in the code below:

1. parse the IR text into an LLVM module and verify it (a renderer bug shows here, with the IR);
2. optimize it with LLVM's standard -O2 pipeline for this CPU (no fast-math: no reassociation);
3. generate machine code: an object file, kept in the verified disk cache
   (tinyedu/runtime/compile_cache.py) under `$TINYEDU_CACHE`, keyed by the IR, LLVM's version and
   the CPU;
4. load it into an MCJIT execution engine, which links it in memory (resolving `exp2f` and friends
   in the running process), and call the function through ctypes.

Each program gets its own execution engine, so that an evicted program (at most MAX_LOADED are
kept loaded) gives its memory back when its engine is dropped. `DEBUG=4` prints the IR, `DEBUG=6`
the machine code.

Threads: LLVM IR has no OpenMP pragma, so the renderer turns a THREAD loop into a worker function that
the kernel hands to gcc's OpenMP runtime, libgomp (`GOMP_parallel`; tinyedu/renderer/llvm_threads.py).
This device loads libgomp into the process and tells MCJIT where those functions are; it uses THREADS
threads like the C device (with the same passive waiting: runtime/toolchain.py) and one thread where
libgomp is not installed.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from pathlib import Path
from typing import Any

from tinyedu.launch import LaunchDims
from tinyedu.renderer.llvmir import render_llvm
from tinyedu.runtime.compile_cache import LoadedLRU, cached_build
from tinyedu.runtime.device import Backend, Buffer, DeviceUnavailable, cpu_only, thread_count
from tinyedu.runtime.toolchain import numbered

INSTALL_HINT = "pip install llvmlite (or: pip install 'tinyedu[llvm]')"


class LLVMCompileError(RuntimeError):
    """LLVM rejected the generated IR: a bug in the renderer."""


@functools.cache
def llvm() -> Any:
    """llvmlite.binding, initialized for this machine (raises DeviceUnavailable without llvmlite)."""
    try:
        import llvmlite.binding as binding
    except ImportError:
        raise DeviceUnavailable(f"LLVM device: needs the llvmlite package, which is not installed: "
                                f"{INSTALL_HINT}") from None
    binding.initialize_native_target()
    binding.initialize_native_asmprinter()
    _resolve_half_conversions(binding)
    return binding


def _resolve_half_conversions(binding: Any) -> None:
    """On an x86 CPU without F16C, LLVM turns the float <-> half conversions of float16 buffers into
    calls to libgcc's __truncsfhf2 and __extendhfsf2, which MCJIT finds only if told where they are
    (unresolved, the call would jump to address 0)."""
    path = ctypes.util.find_library("gcc_s")
    if path is None:
        return
    library = ctypes.CDLL(path)
    for name in ("__truncsfhf2", "__extendhfsf2"):
        if binding.address_of_symbol(name) is None and hasattr(library, name):
            binding.add_symbol(name, ctypes.cast(getattr(library, name), ctypes.c_void_p).value)


@functools.cache
def openmp() -> ctypes.CDLL | None:
    """libgomp, loaded into this process, with the two functions the THREAD loops' IR calls made known
    to MCJIT (the library a C kernel or PyTorch loaded, when there is one: the same runtime); None
    where libgomp is not installed (THREAD loops then run on one thread)."""
    path = ctypes.util.find_library("gomp")
    if path is None:
        return None
    try:
        library = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
    except OSError:
        return None
    for name in ("GOMP_parallel", "omp_get_max_threads"):
        llvm().add_symbol(name, ctypes.cast(getattr(library, name), ctypes.c_void_p).value)
    return library


def new_target_machine() -> Any:
    """LLVM's description of this CPU (like -march=native): its instructions and vector registers.

    A new one each time: an execution engine takes ownership of its target machine and destroys
    it with itself, so engines must never share one (or the compiler's)."""
    binding = llvm()
    target = binding.Target.from_default_triple()
    return target.create_target_machine(cpu=binding.get_host_cpu_name(),
                                        features=binding.get_host_cpu_features().flatten(), opt=2)


@functools.cache
def target_machine() -> Any:
    """The target machine the compiler uses (never given to an execution engine)."""
    return new_target_machine()


@functools.cache
def host_vector_width() -> int:
    """float32 lanes of the widest vector registers: 16 with AVX-512, 8 with AVX, else 4 (SSE, NEON)."""
    features = llvm().get_host_cpu_features()
    if features.get("avx512f"):
        return 16
    if features.get("avx"):
        return 8
    return 4


# --8<-- [start:compile]
class LLVMCompiler:
    """LLVM IR text -> an optimized object file for this CPU (through the verified disk cache)."""

    compiler = "llvmlite"

    def __init__(self) -> None:
        binding, machine = llvm(), target_machine()
        self.version = ".".join(map(str, binding.llvm_version_info))
        self.flags = ("-O2", f"-mcpu={binding.get_host_cpu_name()}")
        self.signature = "\0".join([f"LLVM {self.version}", binding.get_default_triple(), *self.flags,
                                    binding.get_host_cpu_features().flatten(), str(machine.target_data)])

    def optimized_module(self, ir: str) -> Any:
        """Parse, verify and optimize (-O2) the IR; the module, ready for code generation."""
        binding, machine = llvm(), target_machine()
        try:
            module = binding.parse_assembly(ir)
            module.verify()
        except RuntimeError as error:
            raise LLVMCompileError(f"LLVM device: LLVM rejected this kernel's IR:\n{numbered(ir)}\n"
                                   f"--- LLVM says ---\n{error}") from None
        module.triple, module.data_layout = binding.get_default_triple(), str(machine.target_data)
        tuning = binding.create_pipeline_tuning_options(speed_level=2)
        builder = binding.create_pass_builder(machine, tuning)
        builder.getModulePassManager().run(module, builder)
        return module

    def build(self, ir: str) -> "LLVMObject":
        def build(path: Path) -> None:
            path.write_bytes(target_machine().emit_object(self.optimized_module(ir)))

        path = cached_build(f"{ir}\0{self.signature}", ".o", build)
        return LLVMObject(path, path.read_bytes(), ir)
# --8<-- [end:compile]


class LLVMObject:
    """A compiled kernel: the object file's bytes (checked when read from the cache), and its IR."""

    def __init__(self, path: Path, data: bytes, ir: str):
        self.path, self.data, self.ir = path, data, ir


# --8<-- [start:program]
class LLVMProgram:
    """An LLVM kernel: `program([out, *inputs])` calls its machine code through ctypes."""

    def __init__(self, device: "LLVMDevice", name: str, obj: LLVMObject):
        self.device, self.name, self.object = device, name, obj

    def link(self) -> tuple[Any, int]:
        """An MCJIT engine with the object file linked in, and the address of the function."""
        binding = llvm()
        engine = binding.create_mcjit_compiler(binding.parse_assembly(""), new_target_machine())
        engine.add_object_file(binding.ObjectFileRef.from_data(self.object.data))
        engine.finalize_object()
        address = engine.get_function_address(self.name)
        if not address:
            raise LLVMCompileError(f"LLVM device: the object file of {self.name} has no function {self.name}")
        return engine, address

    def __call__(self, buffers: list[Buffer]) -> None:
        _, address = self.device.loaded.get(self.object.path, self.link)
        signature = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * len(buffers)))  # void f(void*, void*, ...)
        signature(address)(*(b.as_numpy().ctypes.data for b in buffers))

    def disassemble(self) -> str:
        """The machine code, as assembly text from LLVM's code generator."""
        return target_machine().emit_assembly(self.device.compiler.optimized_module(self.object.ir))
# --8<-- [end:program]


class LLVMDevice(Backend):
    """LLVM IR in, machine code run in this process."""

    name = "LLVM"
    renderer = staticmethod(render_llvm)

    def __init__(self) -> None:
        super().__init__()
        llvm()  # fails early, with the install hint, when llvmlite is missing
        openmp()  # before any kernel is linked: THREAD loops call into it
        self.compiler = LLVMCompiler()
        self.vector_width = host_vector_width()
        # at most MAX_LOADED engines at once; an evicted one is dropped (and frees its code memory)
        self.loaded: LoadedLRU = LoadedLRU(lambda engine_and_function: None)

    def runtime(self, name: str, obj: LLVMObject, launch: LaunchDims | None = None) -> LLVMProgram:
        cpu_only("LLVM", name, launch)
        return LLVMProgram(self, name, obj)

    def threads(self) -> int:
        """THREADS (default: every core) when libgomp is there, else 1."""
        return thread_count() if openmp() is not None else 1


def create_device() -> LLVMDevice:
    return LLVMDevice()
