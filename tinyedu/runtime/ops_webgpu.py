"""The WEBGPU device: WGSL (tinyedu/renderer/wgsl.py) run through the `wgpu` package.

WebGPU is the GPU interface of the browsers, and `wgpu` (pip) is the same interface in Python, on
wgpu-native: it runs a kernel on whatever GPU the machine has, through Metal (macOS), Vulkan (Linux,
Windows, Android) or Direct3D 12 (Windows). On a machine without a GPU, Mesa's lavapipe is a Vulkan
driver that runs on the CPU (its adapter is called "llvmpipe"): the device is tested everywhere.

The steps, as in the GPU (OpenCL) device:
1. compile: `device.create_shader_module(code=wgsl)`, once per source; the compute pipeline (the
   shader with its buffer layout) once per kernel;
2. memory: each Buffer gets a storage buffer on the GPU (`WebGPUMemory`), written when the host copy
   changed and read back when `as_numpy()` needs it. A storage buffer holds 4-byte elements only:
   bool, int8, uint8, int16 and uint16 buffers are widened to u32/i32 there (converted as they are
   copied);
3. launch: one compute pass that binds the buffers (binding N is dataN) and dispatches
   `LaunchDims.groups` workgroups; the workgroup size is in the WGSL source (`@workgroup_size`).
   The call returns when the GPU is done, so the realizer's timings are the kernel's.

Mesa's llvmpipe stops every loop after 65535 iterations without a word; on lavapipe a kernel with
a longer loop (a one-thread kernel over a large buffer, NOOPT=1) is refused with an error instead.

The limits the GPU opts and heuristics read (threads per workgroup, shared memory, workgroups per
dimension) are the adapter's, asked for in full when the device is made. WebGPU does not tell the
width of the GPU's SIMD groups here, so `warp_size` is 32 (what the lockstep emulator counts with).
Needs `pip install wgpu` (or `pip install 'tinyedu[webgpu]'`) and a GPU driver; without a GPU on
Linux, `sudo apt-get install mesa-vulkan-drivers` (lavapipe).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from tinyedu.core.dtype import DType, dtypes
from tinyedu.core.uops import UOp, UOps
from tinyedu.launch import GPULimits, LaunchDims
from tinyedu.renderer.wgsl import render_wgsl
from tinyedu.runtime.device import Backend, Buffer, DeviceUnavailable
from tinyedu.runtime.toolchain import CompileError, numbered

INSTALL_HINT = ("pip install wgpu (or: pip install 'tinyedu[webgpu]'), and a GPU driver with Vulkan, Metal "
                "or Direct3D 12; on Linux without a GPU: sudo apt-get install mesa-vulkan-drivers "
                "(lavapipe runs Vulkan on the CPU), or run scripts/ensure_system_tools.sh")
# the adapter limits the device asks for in full (WebGPU's defaults are lower than most GPUs allow)
LIMITS = ("max-compute-invocations-per-workgroup", "max-compute-workgroup-size-x",
          "max-compute-workgroup-size-y", "max-compute-workgroup-size-z",
          "max-compute-workgroup-storage-size",
          "max-compute-workgroups-per-dimension", "max-storage-buffers-per-shader-stage",
          "max-storage-buffer-binding-size", "max-buffer-size")
# the element type a buffer has on the GPU (WGSL storage holds 4-byte scalars)
# Mesa's llvmpipe (lavapipe's compiler) stops every loop after this many iterations, silently
LLVMPIPE_LOOP_LIMIT = 65535
WIDENED = {dtypes.bool: np.uint32, dtypes.uint8: np.uint32, dtypes.uint16: np.uint32,
           dtypes.int8: np.int32, dtypes.int16: np.int32}


@functools.cache
def webgpu() -> tuple[Any, Any]:
    """The wgpu module and an adapter (the GPU, or lavapipe), or DeviceUnavailable saying what to install."""
    try:
        import wgpu
    except ImportError:
        raise DeviceUnavailable(f"WEBGPU device: needs the wgpu package, which is not installed: "
                                f"{INSTALL_HINT}") from None
    try:
        adapter = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
    except Exception as error:  # wgpu-native raises when no backend has an adapter
        raise DeviceUnavailable(f"WEBGPU device: no WebGPU adapter ({error}): {INSTALL_HINT}") from None
    if adapter is None:
        raise DeviceUnavailable(f"WEBGPU device: no WebGPU adapter on this machine: {INSTALL_HINT}")
    return wgpu, adapter


def adapter_name(adapter: Any) -> str:
    """E.g. 'llvmpipe (LLVM 15.0.6, 256 bits) (Vulkan)': the name to print beside every timing."""
    info = adapter.info
    name = info.get("device") or info.get("vendor") or "unknown adapter"
    return f"{name} ({info.get('backend_type', '?')})"


class WebGPUMemory:
    """A buffer's copy in the GPU's memory: a storage buffer of `size` elements (widened if narrow)."""

    def __init__(self, device: "WebGPUDevice", dtype: DType, size: int):
        self.device, self.dtype = device, dtype
        self.element = np.dtype(WIDENED.get(dtype, dtype.np))
        self.nbytes = max(size * self.element.itemsize, 4)
        usage = device.wgpu.BufferUsage
        if self.nbytes > device.max_binding:
            raise ValueError(f"WEBGPU: a buffer of {size} {dtype.name} ({self.nbytes} bytes on the GPU) is "
                             f"larger than {device.adapter_name} binds ({device.max_binding} bytes)")
        self.buffer = device.device.create_buffer(size=self.nbytes, usage=usage.STORAGE | usage.COPY_SRC |
                                                  usage.COPY_DST)

    def upload(self, host: np.ndarray) -> None:
        if host.size:
            self.device.device.queue.write_buffer(self.buffer, 0, np.ascontiguousarray(host, self.element))

    def download(self, host: np.ndarray) -> None:
        if host.size:
            data = np.frombuffer(self.device.device.queue.read_buffer(self.buffer), self.element)[:host.size]
            host[:] = data != 0 if host.dtype == np.bool_ else data.astype(host.dtype)  # narrow ints wrap


class WebGPUCompiler:
    """WGSL -> a shader module, once per source (the driver compiles it for the GPU)."""

    def __init__(self, device: "WebGPUDevice"):
        self.device = device
        self.compiler = f"WebGPU: {device.adapter_name}"
        self.flags: tuple[str, ...] = ()
        self.built: dict[str, Any] = {}

    def build(self, source: str) -> Any:
        if source not in self.built:
            try:
                self.built[source] = self.device.device.create_shader_module(code=source)
            except Exception as error:  # wgpu's GPUValidationError carries naga's message
                raise CompileError(f"WEBGPU device: the WGSL compiler rejected this kernel:\n"
                                   f"{numbered(source)}\n--- error ---\n{error}") from None
        return self.built[source]


class WebGPUProgram:
    """A compute pipeline: `program([out, *inputs])` binds the buffers, dispatches, waits for the GPU."""

    def __init__(self, device: "WebGPUDevice", name: str, module: Any, launch: LaunchDims | None):
        self.device, self.name = device, name
        self.launch = launch if launch is not None else LaunchDims()
        device.check_launch(name, self.launch)
        self.module = module
        self.pipelines: dict[int, tuple[Any, Any]] = {}  # by number of buffers: (pipeline, layout)

    def pipeline(self, count: int) -> tuple[Any, Any]:
        """The pipeline for `count` buffers: binding 0 written, the others read."""
        if count not in self.pipelines:
            wgpu, device = self.device.wgpu, self.device.device
            if count > self.device.max_buffers:
                raise ValueError(f"WEBGPU: kernel {self.name} uses {count} buffers; "
                                 f"{self.device.adapter_name} binds at most {self.device.max_buffers} "
                                 "storage buffers per kernel")
            entries = [{"binding": n, "visibility": wgpu.ShaderStage.COMPUTE,
                        "buffer": {"type": wgpu.BufferBindingType.storage if n == 0 else
                                   wgpu.BufferBindingType.read_only_storage}} for n in range(count)]
            layout = device.create_bind_group_layout(entries=entries)
            pipeline = device.create_compute_pipeline(
                layout=device.create_pipeline_layout(bind_group_layouts=[layout]),
                compute={"module": self.module, "entry_point": self.name})
            self.pipelines[count] = (pipeline, layout)
        return self.pipelines[count]

    def __call__(self, buffers: list[Buffer]) -> None:
        device = self.device.device
        memory = [b.device_copy(functools.partial(self.device.allocate_for, b)) for b in buffers]
        bound = [m.buffer for m in memory]
        encoder = device.create_command_encoder()
        if any(b is buffers[0] for b in buffers[1:]):  # an in-place write (assign) reads its own output:
            old = device.create_buffer(size=memory[0].nbytes, usage=self.device.wgpu.BufferUsage.STORAGE |
                                       self.device.wgpu.BufferUsage.COPY_DST)  # WebGPU cannot bind one
            encoder.copy_buffer_to_buffer(bound[0], 0, old, 0, memory[0].nbytes)  # buffer written and read:
            bound[1:] = [old if b is buffers[0] else m  # read a copy
                         for b, m in zip(buffers[1:], bound[1:], strict=True)]
        pipeline, layout = self.pipeline(len(buffers))
        group = device.create_bind_group(layout=layout, entries=[
            {"binding": n, "resource": {"buffer": b, "offset": 0, "size": b.size}}
            for n, b in enumerate(bound)])
        compute = encoder.begin_compute_pass()
        compute.set_pipeline(pipeline)
        compute.set_bind_group(0, group)
        compute.dispatch_workgroups(*self.launch.groups)
        compute.end()
        device.queue.submit([encoder.finish()])
        wait_for(device)
        buffers[0].written_on_device()


def wait_for(device: Any) -> None:
    """Return when the GPU has finished what was submitted (so the realizer times the kernel, not its
    queueing). wgpu 0.32's on_submitted_work_done_sync fails in wgpu-native (a callback signature
    mismatch); a blocking device poll does the same."""
    poll = getattr(device, "_poll_wait", None)
    poll() if poll is not None else device.queue.on_submitted_work_done_sync()


class WebGPUDevice(Backend):
    """WGSL in, run by WebGPU on the machine's GPU (or on the CPU through lavapipe)."""

    name = "WEBGPU"
    vector_width = 1  # a thread computes with scalars (codegen/gpu_vectors.py makes its float4 moves)

    def __init__(self) -> None:
        super().__init__()
        self.wgpu, self.adapter = webgpu()  # fails early, with the install hint, without an adapter
        self.adapter_name = adapter_name(self.adapter)
        limits = self.adapter.limits
        self.int64 = "shader-int64" in self.adapter.features  # wgpu-native's: i64/u64 in WGSL
        features = ["shader-int64"] if self.int64 else []
        self.device = self.adapter.request_device_sync(required_limits={n: limits[n] for n in LIMITS},
                                                       required_features=features)
        self.loop_limit = LLVMPIPE_LOOP_LIMIT if "llvmpipe" in self.adapter_name else None
        self.compiler = WebGPUCompiler(self)
        self.max_workgroup_size = int(limits["max-compute-invocations-per-workgroup"])
        self.max_local_sizes = tuple(int(limits[f"max-compute-workgroup-size-{axis}"]) for axis in "xyz")
        self.max_buffers = int(limits["max-storage-buffers-per-shader-stage"])
        self.max_binding = int(limits["max-storage-buffer-binding-size"])
        self.local_memory_bytes = int(limits["max-compute-workgroup-storage-size"])
        self.limits = GPULimits(self.max_workgroup_size, self.max_local_sizes,  # type: ignore[arg-type]
                                (int(limits["max-compute-workgroups-per-dimension"]),) * 3,
                                self.local_memory_bytes, 32)

    def renderer(self, name: str, uops: list[UOp]) -> str:
        """The kernel's WGSL; on lavapipe, a loop it would cut short is an error here, not a wrong result."""
        if self.loop_limit is not None:
            for u in uops:
                if u.op is UOps.RANGE and all(s.op is UOps.CONST for s in u.src) and \
                        u.src[1].arg - u.src[0].arg > self.loop_limit:
                    raise ValueError(
                        f"WEBGPU: kernel {name} has a loop of {u.src[1].arg - u.src[0].arg} iterations "
                        f"({u.arg.name}); {self.adapter_name} (Mesa's llvmpipe) stops every loop after "
                        f"{self.loop_limit}. Let the GPU opts split it over threads (no NOOPT=1), or run "
                        "it on a GPU's driver")
        return render_wgsl(name, uops, int64=self.int64)

    def allocate_for(self, buffer: Buffer, nbytes: int) -> WebGPUMemory:
        return WebGPUMemory(self, buffer.dtype, buffer.size)

    def check_launch(self, name: str, launch: LaunchDims) -> None:
        """A launch the adapter cannot run is a clear error here, not a validation error later."""
        too_big = [n > limit for n, limit in zip(launch.local, self.max_local_sizes, strict=True)]
        if launch.threads_per_group > self.max_workgroup_size or any(too_big):
            raise ValueError(f"WEBGPU: kernel {name} asks for {launch.local} threads per workgroup; "
                             f"{self.adapter_name} runs at most {self.max_workgroup_size} (at most "
                             f"{self.max_local_sizes} along each dimension)")
        if any(g > self.limits.max_groups[0] for g in launch.groups):
            raise ValueError(f"WEBGPU: kernel {name} asks for {launch.groups} workgroups; "
                             f"{self.adapter_name} dispatches at most {self.limits.max_groups[0]} along "
                             "each dimension")

    def runtime(self, name: str, module: Any, launch: LaunchDims | None = None) -> WebGPUProgram:
        return WebGPUProgram(self, name, module, launch)

    def threads(self) -> int:
        return 1  # the parallelism comes from the launch


def create_device() -> WebGPUDevice:
    return WebGPUDevice()
