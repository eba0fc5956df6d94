"""Stages 4, 6 and 7: from UOps to source code, one renderer per language behind one seam.

The seam every renderer fills in is tinyedu/core/renderer.py; cstyle.py renders C (c_vector_math.py
adds the C device's vectorizable exp2); neon.py renders C with ARM NEON intrinsics; llvmir.py (with
llvm_ops.py and llvm_threads.py) LLVM IR; gpu.py the GPU kernels' shared C-style parts, opencl.py
OpenCL C, cuda.py CUDA C; wgsl.py WGSL for WebGPU; wasm.py (with wasm_math.py) C for wasm32.
"""
