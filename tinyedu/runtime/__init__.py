"""Devices: where buffers live and how kernels run on them.

`Device["C"]` is a device by name and `Buffer` memory on it (device.py). A device gives the engine's
lowering (tinyedu/engine/lower.py) a renderer, a compiler and a runtime, one module each:

- ops_numpy.py: NUMPY interprets a kernel AST with numpy, whole arrays at a time (the oracle);
- ops_python.py: PYTHON runs a kernel's UOps one at a time, in plain Python;
- ops_c.py: C, the default, compiles generated C into a shared library (cached on disk by
  compile_cache.py);
- ops_neon.py: NEON compiles C with ARM NEON intrinsics, run natively on arm64 and under qemu-user
  on x86-64 (qemu.py);
- ops_llvm.py: LLVM compiles LLVM IR in the process with llvmlite;
- ops_gpu.py, ops_cuda.py, ops_webgpu.py: the GPU devices, OpenCL C (GPU), CUDA C and WGSL (WEBGPU);
- ops_wasm.py: WASM compiles C for wasm32 (SIMD128) with clang and wasm-ld, and runs it in the
  process with wasmtime: the code a browser runs.

probe.py measures the machine (copy bandwidth, peak FMA rate) to read kernel speeds against.
"""

from tinyedu.runtime.device import Buffer, Device

__all__ = ["Buffer", "Device"]
