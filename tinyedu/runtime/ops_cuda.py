"""The CUDA device: CUDA C (tinyedu/renderer/cuda.py) compiled to PTX by NVRTC, run by the CUDA driver.

Two NVIDIA libraries, both reached through ctypes (no CUDA toolkit install, no compiler on PATH):

- **NVRTC** (`libnvrtc.so.12`, from the pip wheel `nvidia-cuda-nvrtc-cu12`) compiles CUDA C in the
  process into PTX, NVIDIA's portable assembly. It needs no GPU, so every kernel can be compiled (and
  its PTX read: `DEBUG=6`) on any Linux machine. PTX is kept in the verified disk cache
  (tinyedu/runtime/compile_cache.py), keyed by the source, NVRTC's version and the flags.
- **The driver** (`libcuda.so.1`, installed with the NVIDIA driver, present only where there is one)
  loads the kernel's machine code, copies buffers to and from the GPU's
  memory, and launches a kernel as a grid of `LaunchDims.groups` blocks of `LaunchDims.local`
  threads. Without a driver or a GPU the device still renders and compiles; running a kernel raises
  DeviceUnavailable, saying what is missing.

Without a GPU, NVRTC targets a *virtual* architecture, `compute_XY` (X.Y a compute capability; default
7.5: such PTX runs on every GPU from 7.5 on, the driver compiling it when it loads it). With a GPU it
targets that GPU, `sm_XY`, and makes its machine code (a cubin) beside the PTX. `CUDA_ARCH=86` (or
`sm_86`, `compute_86`, `8.6`) chooses the architecture. `--fmad=false` keeps `a*b+c` two rounded
operations, as on the CPU devices, so results match them bit for bit where the math does.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import glob
import os
import sys
from pathlib import Path
from typing import Any, Callable

import numpy as np

from tinyedu.core.helpers import getenv
from tinyedu.launch import GPULimits, LaunchDims
from tinyedu.renderer.cuda import render_cuda
from tinyedu.runtime.compile_cache import cached_build
from tinyedu.runtime.device import Backend, Buffer, DeviceUnavailable
from tinyedu.runtime.toolchain import CompileError, numbered

NVRTC_HINT = "pip install nvidia-cuda-nvrtc-cu12 (NVIDIA's runtime compiler; it works without a GPU)"
DRIVER_HINT = "an NVIDIA GPU and its driver (libcuda.so.1 comes with the driver, not with pip)"
DEFAULT_ARCH = 75  # Turing (2018) and newer; NVRTC 12 warns that older targets are deprecated
DEFAULT_LIMITS = {"max_workgroup_size": 1024, "local_memory_bytes": 48 * 1024, "warp_size": 32}
MAX_BLOCK = (1024, 1024, 64)               # threads along x, y, z of one block, on every CUDA GPU
MAX_GRID = (2**31 - 1, 65535, 65535)       # blocks along x, y, z of a grid


class CUDACompileError(CompileError):
    """NVRTC rejected generated CUDA C: a bug in the renderer."""


class CUDAError(RuntimeError):
    """A CUDA driver call failed (the message names the call and the driver's reason)."""


# ---- NVRTC: CUDA C -> PTX ----
def nvrtc_candidates() -> list[str]:
    """Where libnvrtc may be: $CUDA_NVRTC, the pip wheel's folder in each site-packages, a toolkit's."""
    found = [os.environ["CUDA_NVRTC"]] if os.environ.get("CUDA_NVRTC") else []
    for folder in sys.path:
        found += sorted(glob.glob(os.path.join(folder, "nvidia", "cuda_nvrtc", "lib", "libnvrtc.so.*")))
    system = ctypes.util.find_library("nvrtc")
    return found + ([system] if system else [])


@functools.cache
def nvrtc() -> ctypes.CDLL:
    """libnvrtc, loaded (raises DeviceUnavailable, saying what to install, when there is none)."""
    for path in nvrtc_candidates():
        try:
            library = ctypes.CDLL(path)
        except OSError:
            continue
        library.nvrtcGetErrorString.restype = ctypes.c_char_p
        return library
    raise DeviceUnavailable(f"CUDA device: NVRTC (libnvrtc.so.12), which compiles CUDA C to PTX, was not "
                            f"found; {NVRTC_HINT}, or set CUDA_NVRTC to the library's path")


def nvrtc_check(result: int, call: str) -> None:
    if result != 0:
        reason = nvrtc().nvrtcGetErrorString(result).decode()
        raise CUDACompileError(f"CUDA device: {call} failed: {reason}")


@functools.cache
def nvrtc_version() -> str:
    major, minor = ctypes.c_int(), ctypes.c_int()
    nvrtc_check(nvrtc().nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)), "nvrtcVersion")
    return f"{major.value}.{minor.value}"


@functools.cache
def nvrtc_archs() -> tuple[int, ...]:
    """The compute capabilities this NVRTC compiles for (e.g. 75 for compute_75)."""
    count = ctypes.c_int()
    nvrtc_check(nvrtc().nvrtcGetNumSupportedArchs(ctypes.byref(count)), "nvrtcGetNumSupportedArchs")
    archs = (ctypes.c_int * count.value)()
    nvrtc_check(nvrtc().nvrtcGetSupportedArchs(archs), "nvrtcGetSupportedArchs")
    return tuple(archs)


def supported_archs() -> tuple[int, ...]:
    """nvrtc_archs(), or () when NVRTC is missing (compiling will say so; rendering needs no NVRTC)."""
    try:
        return nvrtc_archs()
    except DeviceUnavailable:
        return ()


def _program_output(program: ctypes.c_void_p, size_call: str, get_call: str) -> bytes:
    """The log, PTX or cubin of an NVRTC program (asked for its size first, as the C API wants); text
    comes without its closing NUL."""
    size = ctypes.c_size_t()
    nvrtc_check(getattr(nvrtc(), size_call)(program, ctypes.byref(size)), size_call)
    output = ctypes.create_string_buffer(size.value)
    nvrtc_check(getattr(nvrtc(), get_call)(program, output), get_call)
    return output.raw.removesuffix(b"\0") if get_call != "nvrtcGetCUBIN" else output.raw


# --8<-- [start:nvrtc]
def compile_cuda(source: str, flags: tuple[str, ...]) -> dict[str, bytes]:
    """Compile CUDA C `source` with NVRTC: {"ptx": ...}, and {"cubin": ...} (the GPU's machine code)
    when the flags name a real GPU (sm_XY). A failure shows the numbered source and NVRTC's log."""
    library, program = nvrtc(), ctypes.c_void_p()
    nvrtc_check(library.nvrtcCreateProgram(ctypes.byref(program), source.encode(), b"kernel.cu", 0, None,
                                           None), "nvrtcCreateProgram")
    try:
        options = (ctypes.c_char_p * len(flags))(*(flag.encode() for flag in flags))
        result = library.nvrtcCompileProgram(program, len(flags), options)
        if result != 0:
            log = _program_output(program, "nvrtcGetProgramLogSize", "nvrtcGetProgramLog").decode().strip()
            raise CUDACompileError(f"CUDA device: NVRTC {nvrtc_version()} failed to compile this kernel "
                                   f"(flags {' '.join(flags)}):\n{numbered(source)}\n"
                                   f"--- NVRTC log ---\n{log}")
        made = {"ptx": _program_output(program, "nvrtcGetPTXSize", "nvrtcGetPTX")}
        if any(flag.startswith("--gpu-architecture=sm_") for flag in flags):
            made["cubin"] = _program_output(program, "nvrtcGetCUBINSize", "nvrtcGetCUBIN")
        return made
    finally:
        library.nvrtcDestroyProgram(ctypes.byref(program))
# --8<-- [end:nvrtc]


class CUDABinary:
    """A compiled kernel, read from checked cache entries: its PTX text, the cubin when it was compiled
    for this machine's GPU, and the CUDA C it came from."""

    def __init__(self, source: str, flags: tuple[str, ...], ptx: Path, cubin: Path | None):
        self.source, self.flags, self.path, self.text = source, flags, ptx, ptx.read_text()
        self.cubin = cubin.read_bytes() if cubin is not None else None

    def image(self) -> bytes:
        """What the driver loads: the cubin (no compiling left), else the PTX (the driver compiles it)."""
        return self.cubin if self.cubin is not None else self.text.encode() + b"\0"

    def has_entry(self, name: str) -> bool:
        """Whether the PTX defines the kernel `name` (an `extern "C" __global__` function)."""
        return f".visible .entry {name}(" in self.text


class NVRTCCompiler:
    """CUDA C -> PTX (and a cubin for the GPU that is here), through the verified disk cache.

    Without a GPU, the target is the virtual architecture compute_XY: PTX only. With one, it is the
    GPU itself, sm_XY: NVRTC makes the PTX and the machine code (cubin), which the driver loads as
    is; a driver older than NVRTC could not compile NVRTC's newer PTX, but it runs the cubin."""

    compiler = "nvrtc"

    def __init__(self, arch: int, real: bool = False):
        self.arch, self.real = arch, real
        # --fmad=false: a*b+c is rounded twice, as numpy and the CPU devices do (NVRTC fuses by default)
        self.flags = (f"--gpu-architecture={'sm' if real else 'compute'}_{arch}", "--fmad=false")

    def signature(self) -> str:
        """What it compiles with: NVRTC's version and the flags (target architecture), for BEAM's cache."""
        return " ".join([f"NVRTC {nvrtc_version()}", *self.flags])

    def key(self, source: str) -> str:
        """Everything the PTX depends on: the source, NVRTC's version and the flags."""
        return "\0".join([source, f"NVRTC {nvrtc_version()}", *self.flags])

    def build(self, source: str) -> CUDABinary:
        made: dict[str, bytes] = {}  # one NVRTC run makes both files; each is checked on its own

        def build(suffix: str) -> Callable[[Path], None]:
            def write(path: Path) -> None:
                if not made:
                    made.update(compile_cuda(source, self.flags))
                path.write_bytes(made[suffix])
            return write

        ptx = cached_build(self.key(source), ".ptx", build("ptx"))
        cubin = cached_build(self.key(source) + "\0cubin", ".cubin", build("cubin")) if self.real else None
        return CUDABinary(source, self.flags, ptx, cubin)


def parse_arch(text: str) -> int:
    """CUDA_ARCH as a number: '86', 'sm_86', 'compute_86' and '8.6' all give 86."""
    digits = text.strip().lower().removeprefix("compute_").removeprefix("sm_").replace(".", "")
    if not digits.isdigit():
        raise ValueError(f"CUDA_ARCH={text!r}: expected a compute capability such as 86, sm_86, "
                         "compute_86 or 8.6")
    return int(digits)


# ---- the driver: memory, modules, launches ----
# (name, argument types) of the driver calls used here; CUdeviceptr is a 64-bit integer, handles pointers
_u64, _ptr, _int, _size = ctypes.c_uint64, ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t
DRIVER_CALLS: dict[str, list[Any]] = {
    "cuInit": [ctypes.c_uint], "cuDriverGetVersion": [_ptr], "cuDeviceGetCount": [_ptr],
    "cuDeviceGet": [_ptr, _int], "cuDeviceGetName": [ctypes.c_char_p, _int, _int],
    "cuDeviceGetAttribute": [_ptr, _int, _int], "cuDevicePrimaryCtxRetain": [_ptr, _int],
    "cuCtxSetCurrent": [_ptr], "cuCtxSynchronize": [],
    "cuMemAlloc_v2": [_ptr, _size], "cuMemFree_v2": [_u64],
    "cuMemcpyHtoD_v2": [_u64, _ptr, _size], "cuMemcpyDtoH_v2": [_ptr, _u64, _size],
    "cuModuleLoadData": [_ptr, ctypes.c_char_p], "cuModuleUnload": [_ptr],
    "cuModuleGetFunction": [_ptr, _ptr, ctypes.c_char_p],
    "cuLaunchKernel": [_ptr, *[ctypes.c_uint] * 6, ctypes.c_uint, _ptr, _ptr, _ptr],
    "cuGetErrorName": [_int, _ptr], "cuGetErrorString": [_int, _ptr],
}
# cuDeviceGetAttribute numbers (cuda.h's CUdevice_attribute)
MAX_THREADS_PER_BLOCK, MAX_SHARED_MEMORY_PER_BLOCK, WARP_SIZE = 1, 8, 10
COMPUTE_CAPABILITY_MAJOR, COMPUTE_CAPABILITY_MINOR = 75, 76


def driver_error(library: ctypes.CDLL, result: int) -> str:
    """The driver's name and description of an error code, e.g. 'CUDA_ERROR_OUT_OF_MEMORY: out of memory'."""
    name, text = ctypes.c_char_p(), ctypes.c_char_p()
    library.cuGetErrorName(result, ctypes.byref(name))
    library.cuGetErrorString(result, ctypes.byref(text))
    return f"{(name.value or b'error %d' % result).decode()}: {(text.value or b'').decode()}"


class CUDADriver:
    """libcuda through ctypes, on GPU number 0 and its primary context (the one the CUDA runtime and
    PyTorch use too, so their memory and ours live side by side)."""

    def __init__(self, library: ctypes.CDLL):
        self.library = library
        for name, argtypes in DRIVER_CALLS.items():
            getattr(library, name).argtypes = argtypes
        self.call("cuInit", 0)
        self.device, self.context = ctypes.c_int(), ctypes.c_void_p()
        self.call("cuDeviceGet", ctypes.byref(self.device), 0)
        self.call("cuDevicePrimaryCtxRetain", ctypes.byref(self.context), self.device)
        self.activate()

    def call(self, name: str, *args: Any) -> None:
        result = getattr(self.library, name)(*args)
        if result != 0:
            raise CUDAError(f"CUDA device: {name} failed: {driver_error(self.library, result)}")

    def activate(self) -> None:
        """Make our context the calling thread's current one (CUDA keeps one per thread)."""
        self.call("cuCtxSetCurrent", self.context)

    def attribute(self, number: int) -> int:
        value = ctypes.c_int()
        self.call("cuDeviceGetAttribute", ctypes.byref(value), number, self.device)
        return value.value

    def name(self) -> str:
        text = ctypes.create_string_buffer(256)
        self.call("cuDeviceGetName", text, 256, self.device)
        return text.value.decode()

    def version(self) -> str:
        """The CUDA version the driver supports, e.g. '12.4'."""
        value = ctypes.c_int()
        self.call("cuDriverGetVersion", ctypes.byref(value))
        return f"{value.value // 1000}.{value.value % 1000 // 10}"

    def compute_capability(self) -> int:
        return 10 * self.attribute(COMPUTE_CAPABILITY_MAJOR) + self.attribute(COMPUTE_CAPABILITY_MINOR)

    def allocate(self, nbytes: int) -> "CUDAMemory":
        return CUDAMemory(self, nbytes)


# --8<-- [start:driver]
def _load_driver() -> CUDADriver | str:
    """The driver, or why there is none (a sentence for DeviceUnavailable)."""
    try:
        library = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return "no NVIDIA driver was found (libcuda.so.1 cannot be loaded)"
    try:
        return CUDADriver(library)
    except CUDAError as error:  # e.g. CUDA_ERROR_NO_DEVICE: a driver with no GPU, or none visible
        return f"the NVIDIA driver found no usable GPU ({str(error).removeprefix('CUDA device: ')})"


@functools.cache
def driver_or_reason() -> CUDADriver | str:
    """Looked for once per process: the driver, or why there is none."""
    return _load_driver()


def driver() -> CUDADriver:
    """The CUDA driver, ready on GPU 0 (raises DeviceUnavailable, saying what is missing, without one)."""
    found = driver_or_reason()
    if isinstance(found, str):
        raise DeviceUnavailable(f"CUDA device: cannot run kernels here: {found}. Running needs "
                                f"{DRIVER_HINT}; without one the CUDA device still renders CUDA C and "
                                "compiles it to PTX (DEBUG=4 and DEBUG=6 show them)")
    return found
# --8<-- [end:driver]


class CUDAMemory:
    """A buffer's copy in the GPU's memory (see Buffer.device_copy: uploaded and downloaded only when the
    other side changed)."""

    def __init__(self, cuda: CUDADriver, nbytes: int):
        self.cuda, self.nbytes, self.pointer = cuda, nbytes, ctypes.c_uint64()
        cuda.activate()
        try:
            cuda.call("cuMemAlloc_v2", ctypes.byref(self.pointer), nbytes)
        except CUDAError as error:
            raise CUDAError(f"CUDA device: cannot allocate {nbytes} bytes on {cuda.name()}: "
                            f"{str(error).removeprefix('CUDA device: ')}") from None

    def upload(self, host: np.ndarray) -> None:
        self._check_size(host)
        self.cuda.activate()
        if host.nbytes:
            self.cuda.call("cuMemcpyHtoD_v2", self.pointer, host.ctypes.data, host.nbytes)

    def download(self, host: np.ndarray) -> None:
        self._check_size(host)
        self.cuda.activate()
        if host.nbytes:
            self.cuda.call("cuMemcpyDtoH_v2", host.ctypes.data, self.pointer, host.nbytes)

    def _check_size(self, host: np.ndarray) -> None:
        if host.nbytes > self.nbytes or not host.flags.c_contiguous:
            raise ValueError(f"CUDA device: a copy of {host.nbytes} bytes ({host.dtype}, contiguous: "
                             f"{host.flags.c_contiguous}) does not fit a device buffer of {self.nbytes} "
                             "bytes (copies need contiguous arrays)")

    def __del__(self) -> None:
        if self.pointer.value:  # (errors ignored: at exit the driver may already be shut down)
            self.cuda.library.cuCtxSetCurrent(self.cuda.context)  # (a buffer may die on another thread)
            self.cuda.library.cuMemFree_v2(self.pointer)


# ---- programs and the device ----
def check_launch(name: str, launch: LaunchDims, max_threads: int) -> None:
    """A launch the GPU would refuse is a clear error here, naming the limit (not a driver code later)."""
    for kind, sizes, limits in (("block", launch.local, MAX_BLOCK), ("grid", launch.groups, MAX_GRID)):
        for axis, size, limit in zip("xyz", sizes, limits, strict=True):
            if not 1 <= size <= limit:
                raise ValueError(f"CUDA device: kernel {name} asks for a {kind} of {sizes} ({launch}); "
                                 f"{kind} dimension {axis} must be between 1 and {limit}")
    if launch.threads_per_group > max_threads:
        raise ValueError(f"CUDA device: kernel {name} asks for {launch.threads_per_group} threads per block "
                         f"({launch}); this GPU allows at most {max_threads}")


class CUDAProgram:
    """A kernel on the GPU: `program([out, *inputs])` copies what changed to the GPU, launches the grid
    and waits for it. The kernel is loaded into the GPU's context on the first run."""

    def __init__(self, device: "CUDADevice", name: str, binary: CUDABinary, launch: LaunchDims | None = None):
        self.device, self.name, self.binary = device, name, binary
        self.launch = launch if launch is not None else LaunchDims()  # a CPU-style kernel: one thread
        if not binary.has_entry(name):
            raise CUDACompileError(f"CUDA device: the PTX of {name} has no kernel {name} (the CUDA C must "
                                   f'declare it extern "C" __global__):\n{numbered(binary.source)}')
        check_launch(name, self.launch, device.max_workgroup_size)
        self.module: ctypes.c_void_p | None = None
        self.function = ctypes.c_void_p()

    def prepare(self) -> None:
        """Load the kernel into the GPU's context (raises DeviceUnavailable without a GPU and driver)."""
        if self.module is not None:
            return
        cuda, module = driver(), ctypes.c_void_p()
        cuda.activate()
        try:
            cuda.call("cuModuleLoadData", ctypes.byref(module), self.binary.image())
        except CUDAError as error:
            raise CUDAError(f"{error}\n{self._load_hint(cuda)}") from None
        cuda.call("cuModuleGetFunction", ctypes.byref(self.function), module, self.name.encode())
        self.module = module

    def _load_hint(self, cuda: CUDADriver) -> str:
        made = "a cubin" if self.binary.cubin is not None else "PTX"
        flags = " ".join(self.binary.flags)
        return (f"(kernel {self.name}: {made} from NVRTC {nvrtc_version()} with {flags}; "
                f"this driver supports CUDA {cuda.version()} and the GPU, {cuda.name()}, is compute "
                f"{cuda.compute_capability()}. To load PTX the driver must be at least as new as NVRTC, and "
                "CUDA_ARCH no higher than the GPU's)")

    # --8<-- [start:launch]
    def __call__(self, buffers: list[Buffer]) -> None:
        self.prepare()
        cuda = driver()
        cuda.activate()
        pointers = [ctypes.c_uint64(b.device_copy(cuda.allocate).pointer.value) for b in buffers]
        arguments = (ctypes.c_void_p * len(pointers))(*(ctypes.addressof(p) for p in pointers))
        cuda.call("cuLaunchKernel", self.function, *self.launch.groups, *self.launch.local, 0, None,
                  arguments, None)
        cuda.call("cuCtxSynchronize")  # errors inside the kernel (a bad address) are reported here
        buffers[0].written_on_device()
    # --8<-- [end:launch]

    def disassemble(self) -> str:
        """The PTX (DEBUG=6): NVIDIA's portable assembly, which the driver compiles for the GPU."""
        return self.binary.text

    def __del__(self) -> None:
        if getattr(self, "module", None) is not None:
            found = driver_or_reason()
            if not isinstance(found, str):
                found.library.cuCtxSetCurrent(found.context)
                found.library.cuModuleUnload(self.module)


class CUDADevice(Backend):
    """CUDA C in, PTX out (compiled anywhere), run on an NVIDIA GPU where there is one.

    The limits the GPU heuristics read come from the GPU when there is one, else typical values."""

    name = "CUDA"
    renderer = staticmethod(render_cuda)
    vector_width = 1  # a GPU's width is its threads (codegen/gpu_vectors.py makes their float4 moves)

    def __init__(self) -> None:
        super().__init__()
        found = driver_or_reason()
        self.cuda = None if isinstance(found, str) else found
        self.arch = self.choose_arch(getenv("CUDA_ARCH", ""))
        gpu = self.cuda.compute_capability() if self.cuda is not None else None
        self.compiler = NVRTCCompiler(self.arch, real=self.arch == gpu)
        self.max_workgroup_size = self._limit(MAX_THREADS_PER_BLOCK, "max_workgroup_size")
        self.local_memory_bytes = self._limit(MAX_SHARED_MEMORY_PER_BLOCK, "local_memory_bytes")
        self.warp_size = self._limit(WARP_SIZE, "warp_size")
        self.limits = GPULimits(self.max_workgroup_size, MAX_BLOCK, MAX_GRID,
                                self.local_memory_bytes, self.warp_size)

    def _limit(self, attribute: int, name: str) -> int:
        return self.cuda.attribute(attribute) if self.cuda is not None else DEFAULT_LIMITS[name]

    def choose_arch(self, requested: str) -> int:
        """CUDA_ARCH if set; else the GPU's compute capability (the newest NVRTC knows, if the GPU is
        newer than NVRTC); else DEFAULT_ARCH."""
        known = supported_archs()
        if requested:
            arch = parse_arch(requested)
            if known and arch not in known:
                raise ValueError(f"CUDA_ARCH={requested}: NVRTC {nvrtc_version()} compiles for "
                                 f"{', '.join(map(str, known))}")
            return arch
        if self.cuda is None:
            return DEFAULT_ARCH
        gpu = self.cuda.compute_capability()
        return max((a for a in known if a <= gpu), default=gpu)

    def check_runnable(self) -> None:
        """Raise DeviceUnavailable, saying what is missing, unless kernels can run here (a GPU and its
        driver). Lowering and compiling work either way; a test or notebook asks before it runs."""
        driver()

    def runtime(self, name: str, binary: CUDABinary, launch: LaunchDims | None = None) -> CUDAProgram:
        return CUDAProgram(self, name, binary, launch)

    def threads(self) -> int:
        return 1  # (CPU threads: a kernel's parallelism is its launch dims)

    def run_source(self, name: str, source: str, buffers: list[Buffer],
                   launch: LaunchDims | None = None) -> None:
        """Compile CUDA C `source` and run its kernel `name` on `buffers` (for notebooks and tests)."""
        self.runtime(name, self.compiler.build(source), launch)(buffers)


def create_device() -> CUDADevice:
    return CUDADevice()
