"""UOps -> CUDA C++: the GPU renderer (renderer/gpu.py) with CUDA's spellings.

    extern "C" __global__ void E_64(float* __restrict__ data0, const float* __restrict__ data1) {
      int gid0 = blockIdx.x;
      int lid0 = threadIdx.x;
      data0[gid0*16+lid0] = exp2f(data1[gid0*16+lid0]);
    }

CUDA C++ is C++ with `__global__` (a kernel, launched from the host), `__device__` (a function
called from a kernel) and `__shared__` (workgroup memory; CUDA says "block"). `extern "C"` keeps the
kernel's name as written, so the runtime finds it by name in the PTX. The math functions are C's
(`exp2f`, `sqrtf`, `fmaf`), and so is `long long`. Differences from the C renderer's C:
- no headers: the source is compiled by NVRTC as it is, so `INFINITY` and `NAN` are defined here
  from their bits;
- float16 is stored as `unsigned short` bits, converted by the PTX instructions `cvt.f32.f16` and
  `cvt.rn.f16.f32` (round to nearest even), with no header needed;
- a*b+c must not become one fused multiply-add: NVRTC's option `--fmad=false` (runtime/ops_cuda.py).
"""

from __future__ import annotations

from tinyedu.core.uops import UOp
from tinyedu.renderer.gpu import GPURenderer

HALF_HELPERS = {
    "half_to_float": 'static __device__ inline float half_to_float(unsigned short h) { float f; '
                     'asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }',
    "float_to_half": 'static __device__ inline unsigned short float_to_half(float f) { unsigned short h; '
                     'asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }',
}

BITS_DEFINES = {"INFINITY": "#define INFINITY __int_as_float(0x7f800000)",
                "NAN": "#define NAN __int_as_float(0x7fc00000)"}


class CUDARenderer(GPURenderer):
    backend = "CUDA renderer"
    kernel_prefix = 'extern "C" __global__ '
    pointer_prefix = ""
    restrict = "__restrict__"
    shared_prefix = "__shared__"
    vector_align = " __align__(16)"  # a shared array read as float4 starts on 16 bytes
    barrier_statement = "__syncthreads();"
    specials = {"gid": "blockIdx.{dim}", "lid": "threadIdx.{dim}"}
    dimension_names = "xyz"
    function_prefix = "static __device__ inline "
    math: dict[str, str] = {}
    half_storage = "unsigned short"
    vector_make = "make_{type}({lanes})"

    def half_helper(self, name: str) -> str:
        self.helpers.setdefault(name, HALF_HELPERS[name])
        return name

    def load_half(self, buffer: str, index: str) -> str:
        return f"{self.half_helper('half_to_float')}({buffer}[{index}])"

    def store_half(self, buffer: str, index: str, value: str) -> str:
        return f"{buffer}[{index}] = {self.half_helper('float_to_half')}({value});"

    def round_float16_helper(self) -> str:
        self.half_helper("half_to_float"), self.half_helper("float_to_half")
        return ("static __device__ inline float round_float16(float x) { "
                "return half_to_float(float_to_half(x)); }")

    def prelude(self, body: str) -> list[str]:
        return [define for name, define in BITS_DEFINES.items() if name in body]


def render_cuda(name: str, uops: list[UOp]) -> str:
    """The CUDA source of one kernel: `extern "C" __global__ void name(float* __restrict__ data0, ...)`."""
    return CUDARenderer(name, uops).render()
