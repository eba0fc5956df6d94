"""UOps -> OpenCL C: the GPU renderer (renderer/gpu.py) with OpenCL's spellings.

    __kernel void E_64(__global float* restrict data0, __global const float* restrict data1) {
      int gid0 = get_group_id(0);
      int lid0 = get_local_id(0);
      data0[gid0*16+lid0] = exp2(data1[gid0*16+lid0]);
    }

OpenCL C is C99 with address spaces (`__global`, `__local`, private by default) and overloaded math
functions (`exp2` works on float and on double). Where it differs from the C renderer's C:
- 64-bit integers are `long` / `ulong` (`long long` is reserved), literals `5L` / `5UL`;
- float64 needs `#pragma OPENCL EXTENSION cl_khr_fp64 : enable`, written when a kernel has a double
  in it (float64 values, or C's float -> int helpers, which take a double: such a kernel needs a
  device with float64, as PoCL and most GPUs have);
- OpenCL C contracts `a*b+c` into one fused multiply-add unless told not to (`FP_CONTRACT OFF`):
  numpy rounds twice, and every device must agree;
- `half` is a storage type only: `vload_half` / `vstore_half_rte` convert (round to nearest even).
The device (runtime/ops_gpu.py) builds with `-cl-fp32-correctly-rounded-divide-sqrt`, so `/` and
`sqrt` round like the CPU's.
"""

from __future__ import annotations

import re

from tinyedu.core.uops import UOp
from tinyedu.renderer.gpu import GPURenderer


class OpenCLRenderer(GPURenderer):
    backend = "OpenCL renderer"
    kernel_prefix = "__kernel "
    pointer_prefix = "__global "
    restrict = "restrict"
    shared_prefix = "__local"
    barrier_statement = "barrier(CLK_LOCAL_MEM_FENCE);"
    specials = {"gid": "({type})get_group_id({dim})", "lid": "({type})get_local_id({dim})"}  # (a size_t)
    function_prefix = "static inline "
    math = {"exp2f": "exp2", "log2f": "log2", "sinf": "sin", "cosf": "cos", "sqrtf": "sqrt", "fmaf": "fma",
            "fmodf": "fmod"}
    half_storage = "half"
    vector_load = "vload4(0, {buffer}+{index})"
    vector_store = "vstore4({value}, 0, {buffer}+{index});"

    def load_half(self, buffer: str, index: str) -> str:
        return f"vload_half({index}, {buffer})"

    def store_half(self, buffer: str, index: str, value: str) -> str:
        return f"vstore_half_rte({value}, {index}, {buffer});"

    def round_float16_helper(self) -> str:  # through 16 bits of private memory and back
        return ("static inline float round_float16(float x) { ushort h; vstore_half_rte(x, 0, (half*)&h); "
                "return vload_half(0, (half*)&h); }")

    def prelude(self, body: str) -> list[str]:
        lines = ["#pragma OPENCL FP_CONTRACT OFF"]
        if "double" in body:
            lines.append("#pragma OPENCL EXTENSION cl_khr_fp64 : enable")
        return lines

    def finish(self) -> str:
        return opencl_64bit(super().finish())


def opencl_64bit(source: str) -> str:
    """C's 64-bit integer spellings (`long long`, `5LL`) in OpenCL C's (`long`, `5L`)."""
    source = source.replace("unsigned long long", "ulong").replace("long long", "long")
    return re.sub(r"\b(\d+|0x[0-9A-Fa-f]+)(U?)LL\b", r"\1\2L", source)


def render_opencl(name: str, uops: list[UOp]) -> str:
    """The OpenCL C source of one kernel: `__kernel void name(__global float* restrict data0, ...)`."""
    return OpenCLRenderer(name, uops).render()
