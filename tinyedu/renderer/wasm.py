"""The WASM renderer: UOps -> C for wasm32, the C renderer's source with a header of its own.

WebAssembly runs the same C: clang compiles it for `--target=wasm32` (tinyedu/runtime/ops_wasm.py).
Three things differ from the C device, and each is handled here:

- Vectors: the C renderer writes them with the GCC/Clang vector extensions (`floatx4 a + b`), and with
  `-msimd128` clang turns each 4-lane float32/int32 operation into one SIMD128 instruction
  (`f32x4.add`, `i32x4.mul`, `v128.bitselect`, ...). A v128 register holds 4 float32, so the WASM device
  tells the optimizer its vector width is 4, as NEON does.
- No C library: the kernels run with nothing linked (`-nostdlib`), so `#include <math.h>` becomes
  `#include "tinyedu_wasm.h"`, which writes out the few libm functions kernels call
  (tinyedu/renderer/wasm_math.py).
- What wasm32 cannot do is refused while rendering, with the reason: float16 (clang has no `_Float16`
  for wasm32), and THREAD loops (a WebAssembly module runs on the one thread that calls it).
"""

from __future__ import annotations

from tinyedu.core.dtype import dtypes
from tinyedu.core.errors import DTypeError, UnsupportedError
from tinyedu.core.ops import UnaryOps
from tinyedu.core.uops import FusedOps, UOp, VectorDType, is_vector
from tinyedu.renderer.cstyle import CRenderer, _unwrap, c_type

WASM_LANES = 4  # float32 lanes in one 128-bit v128 register
HEADER_NAME = "tinyedu_wasm.h"


class WASMRenderer(CRenderer):
    """The C renderer for wasm32: `WASMRenderer(name, uops).render()` gives the kernel's source."""

    backend = "WASM renderer"
    pointer_offsets = False  # wasm32 addresses are 32 bits: no sign extension to save (cstyle.py)

    def __init__(self, name: str, uops: list[UOp]):
        for u in uops:
            dtype = u.dtype.scalar if is_vector(u.dtype) else u.dtype
            if dtype == dtypes.float16:
                raise DTypeError(f"WASM device: kernel {name} uses float16, and clang has no _Float16 for "
                                 "wasm32; compute in float32 (.float()) or bfloat16, or run it on DEVICE=C")
        super().__init__(name, uops)

    def open_loop(self, u: UOp, start: str, end: str) -> str:
        if u.arg.threads > 1:
            raise UnsupportedError(f"WASM device: kernel {self.function_name} asks for {u.arg.threads} "
                                   "threads (a THREAD opt), and a WebAssembly module runs on the one thread "
                                   "that calls it; drop the THREAD opt (the WASM device reports threads() "
                                   "= 1)")
        return super().open_loop(u, start, end)

    def vector_alu(self, u: UOp, op, srcs: list[str], src_dtype: VectorDType) -> str:
        """MULACC and SQRT of a vector through a helper that names each lane (see the module docstring)."""
        if op not in (FusedOps.MULACC, UnaryOps.SQRT):
            return super().vector_alu(u, op, srcs, src_dtype)
        t, n = self.type_name(src_dtype), src_dtype.count
        if op is FusedOps.MULACC:
            name, args = f"fma_{c_type(src_dtype)}", f"{t} a, {t} b, {t} c"
            lanes = ", ".join(f"fmaf(a[{i}], b[{i}], c[{i}])" for i in range(n))
        else:
            name, args = f"sqrt_{c_type(src_dtype)}", f"{t} a"
            lanes = ", ".join(f"sqrtf(a[{i}])" for i in range(n))
        self.helpers.setdefault(name, f"static inline {t} {name}({args}) {{ return ({t}){{{lanes}}}; }}")
        return f"{name}({', '.join(_unwrap(s) for s in srcs)})"

    def includes(self) -> list[str]:
        return [f'#include "{HEADER_NAME}"  /* libm for wasm32: tinyedu/renderer/wasm_math.py */']


def render_wasm(name: str, uops: list[UOp]) -> str:
    """The wasm32 C source of one kernel: a function `void name(T* data0, const T* data1, ...)`."""
    return WASMRenderer(name, uops).render()

