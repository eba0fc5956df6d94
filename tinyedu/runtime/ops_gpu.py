"""The GPU device: OpenCL C (tinyedu/renderer/opencl.py) compiled and run through pyopencl.

OpenCL is a standard way to run kernels on a GPU (or any other "compute device"): the host program
hands the driver the kernel's source, the driver compiles it for the device, and the host then
launches it over a grid of threads. `DEVICE=GPU` (or its alias `CL`) uses the first GPU any OpenCL
platform offers, else the first device of any kind. On a machine without a GPU that is PoCL, the
Portable Computing Language, which runs OpenCL kernels on the CPU: the whole GPU stage (workgroups,
shared memory, barriers) is tested on every machine.

The steps, each visible below:
1. compile: `cl.Program(context, source).build(options)`: once per source in this process
   (pyopencl and PoCL also keep compiled binaries on disk, so a second run of the suite is fast);
2. memory: each Buffer gets a device copy (`CLMemory`) the first time a kernel uses it, uploaded
   only when the host copy changed, and downloaded only when `as_numpy()` needs it
   (Buffer.device_copy in runtime/device.py);
3. launch: `kernel(queue, global_size, local_size, *buffers)`, where global size = workgroups x
   threads per workgroup (from the kernel's LaunchDims). A kernel with no SPECIAL (a CPU-style
   kernel) runs as one thread in one workgroup, doing all its loops.

Build options: `-cl-fp32-correctly-rounded-divide-sqrt` (OpenCL allows float `/` and `sqrt` a few
ulp of error by default; the other devices round correctly). `DEBUG=4` prints the OpenCL source.
Needs `pip install pyopencl` and an OpenCL platform (Debian/Ubuntu: `apt-get install
pocl-opencl-icd ocl-icd-libopencl1`).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from tinyedu.launch import GPULimits, LaunchDims
from tinyedu.renderer.opencl import render_opencl
from tinyedu.runtime.device import Backend, Buffer, DeviceUnavailable
from tinyedu.runtime.toolchain import CompileError, numbered

INSTALL_HINT = ("pip install pyopencl (or: pip install 'tinyedu[gpu]'), and an OpenCL platform: on "
                "Debian/Ubuntu sudo apt-get install pocl-opencl-icd ocl-icd-libopencl1 (PoCL runs OpenCL "
                "on the CPU; or run scripts/ensure_system_tools.sh); on macOS OpenCL comes with the system")
BUILD_OPTIONS = ["-cl-fp32-correctly-rounded-divide-sqrt"]


@functools.cache
def opencl() -> tuple[Any, Any]:
    """pyopencl and the OpenCL device to use: the first GPU of any platform, else the first device."""
    try:
        import pyopencl as cl
    except ImportError:
        raise DeviceUnavailable(f"GPU device: needs the pyopencl package, which is not installed: "
                                f"{INSTALL_HINT}") from None
    try:
        devices = [d for platform in cl.get_platforms() for d in platform.get_devices()]
    except cl.Error as error:  # no ICD loader configured, or no platform at all
        raise DeviceUnavailable(f"GPU device: no OpenCL platform ({error}): {INSTALL_HINT}") from None
    if not devices:
        raise DeviceUnavailable(f"GPU device: no OpenCL device on this machine: {INSTALL_HINT}")
    gpus = [d for d in devices if d.type & cl.device_type.GPU]
    return cl, (gpus or devices)[0]


def _device_info(device: Any, *names: str, default: int = 1) -> int:
    """The first of these device properties the platform answers (vendor extensions may be missing)."""
    for name in names:
        try:
            return int(getattr(device, name))
        except Exception:  # pyopencl raises LogicError/AttributeError for a query the device lacks
            continue
    return default


class CLMemory:
    """A buffer's copy in the OpenCL device's memory (Buffer.device_memory)."""

    def __init__(self, device: "GPUDevice", nbytes: int):
        self.cl, self.queue = device.cl, device.queue
        self.buffer = self.cl.Buffer(device.context, self.cl.mem_flags.READ_WRITE, nbytes)

    def upload(self, host: np.ndarray) -> None:
        if host.nbytes:
            self.cl.enqueue_copy(self.queue, self.buffer, host)

    def download(self, host: np.ndarray) -> None:
        if host.nbytes:
            self.cl.enqueue_copy(self.queue, host, self.buffer)  # blocking: the host array is ready after


class GPUCompiler:
    """OpenCL C -> a built cl.Program, once per source (the driver keeps binaries on disk)."""

    def __init__(self, device: "GPUDevice"):
        self.device = device
        self.compiler = f"OpenCL: {device.device.platform.name.strip()}, {device.device.name.strip()}"
        self.flags = tuple(BUILD_OPTIONS)
        self.built: dict[str, Any] = {}

    def build(self, source: str) -> Any:
        if source not in self.built:
            cl = self.device.cl
            try:
                self.built[source] = cl.Program(self.device.context, source).build(options=BUILD_OPTIONS)
            except cl.RuntimeError as error:
                raise CompileError(f"GPU device: the OpenCL compiler rejected this kernel:\n"
                                   f"{numbered(source)}\n--- build log ---\n{error}") from None
        return self.built[source]


class GPUProgram:
    """An OpenCL kernel: `program([out, *inputs])` launches it and returns when it is done."""

    def __init__(self, device: "GPUDevice", name: str, program: Any, launch: LaunchDims | None):
        self.device, self.name, self.program = device, name, program
        self.launch = launch if launch is not None else LaunchDims()  # a CPU-style kernel: one thread
        self.kernel = device.cl.Kernel(program, name)
        device.check_launch(name, self.launch)

    def __call__(self, buffers: list[Buffer]) -> None:
        memory = [b.device_copy(self.device.allocate) for b in buffers]  # uploads what changed
        self.kernel.set_args(*(m.buffer for m in memory))
        event = self.device.cl.enqueue_nd_range_kernel(self.device.queue, self.kernel,
                                                       self.launch.global_size, self.launch.local)
        event.wait()
        buffers[0].written_on_device()


class GPUDevice(Backend):
    """OpenCL C in, run on the OpenCL device (a GPU, or the CPU through PoCL)."""

    name = "GPU"
    renderer = staticmethod(render_opencl)
    vector_width = 1  # a thread computes with scalars (codegen/gpu_vectors.py makes its float4 moves)

    def __init__(self) -> None:
        super().__init__()
        self.cl, self.device = opencl()  # fails early, with the install hint, when OpenCL is missing
        self.context = self.cl.Context([self.device])
        self.queue = self.cl.CommandQueue(self.context)
        self.compiler = GPUCompiler(self)
        self.max_workgroup_size = int(self.device.max_work_group_size)
        self.max_local_sizes = tuple(int(n) for n in self.device.max_work_item_sizes[:3])
        self.local_memory_bytes = int(self.device.local_mem_size)
        # the threads that run in lockstep: NVIDIA's warp, AMD's wavefront, else what the device prefers
        self.warp_size = _device_info(self.device, "warp_size_nv", "wavefront_width_amd",
                                      "preferred_work_group_size_multiple")
        # a CPU device (PoCL) runs neighbouring work-items as one core's SIMD lanes (see GPULimits)
        on_cpu = bool(int(self.device.type) & self.cl.device_type.CPU)
        # what the GPU opts are checked against (OpenCL's grid has no per-dimension group limit of its own)
        self.limits = GPULimits(self.max_workgroup_size, self.max_local_sizes, (2**31 - 1,) * 3,
                                self.local_memory_bytes, self.warp_size, threads_are_simd_lanes=on_cpu)

    def allocate(self, nbytes: int) -> CLMemory:
        return CLMemory(self, nbytes)

    def check_launch(self, name: str, launch: LaunchDims) -> None:
        """A launch the device cannot run is a clear error here, not an OpenCL error code later."""
        too_big = [n > limit for n, limit in zip(launch.local, self.max_local_sizes, strict=True)]
        if launch.threads_per_group > self.max_workgroup_size or any(too_big):
            raise ValueError(f"GPU: kernel {name} asks for {launch.local} threads per workgroup; "
                             f"{self.device.name.strip()} runs at most {self.max_workgroup_size} "
                             f"(at most {self.max_local_sizes} along each dimension)")

    def runtime(self, name: str, program: Any, launch: LaunchDims | None = None) -> GPUProgram:
        return GPUProgram(self, name, program, launch)

    def threads(self) -> int:
        return 1  # the parallelism comes from the launch, not from CPU threads


def create_device() -> GPUDevice:
    return GPUDevice()
