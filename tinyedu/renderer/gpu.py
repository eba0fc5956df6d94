"""UOps -> GPU C (OpenCL C or CUDA C++): the C renderer, with what a GPU kernel adds.

A GPU kernel is the C kernel's body run by many threads at once. The scalar part is the C
renderer's (tinyedu/renderer/cstyle.py): same names, same helpers, same numerics. What changes:

- the function is a kernel: its buffer arguments are pointers into the GPU's global memory;
- SPECIAL values say which thread this is: `int gid0 = get_group_id(0);` (the workgroup's index)
  and `int lid0 = get_local_id(0);` (the thread's index in its workgroup);
- DEFINE_SHARED is an array in the workgroup's shared memory, seen by all its threads;
- BARRIER waits for every thread of the workgroup (shared-memory writes before it are seen after);
- IF/ENDIF is `if (cond) { ... }`: only the threads where the condition holds run the block;
- DEFINE_LOCAL is a plain array (private to one thread), without C's cache-line alignment;
- float16 is stored as 16 bits and computed as float, like the C device; each language has its own
  way of converting (the subclasses' `load_half` / `store_half` and the `round_float16` helper).

OpenCL (renderer/opencl.py) and CUDA (renderer/cuda.py) differ only in spellings, each a class
attribute or a small method there:

| what                 | OpenCL C                              | CUDA C++                              |
| -------------------- | ------------------------------------- | ------------------------------------- |
| kernel               | `__kernel void k(...)`                | `extern "C" __global__ void k(...)`   |
| buffer argument      | `__global float* restrict data0`      | `float* __restrict__ data0`           |
| gidN / lidN          | `get_group_id(N)` / `get_local_id(N)` | `blockIdx.x` / `threadIdx.x` (y, z)   |
| shared array         | `__local float shared0[64];`          | `__shared__ float shared0[64];`       |
| BARRIER              | `barrier(CLK_LOCAL_MEM_FENCE);`       | `__syncthreads();`                    |
| helper function      | `static inline`                       | `static __device__ inline`            |
| math                 | overloaded: `exp2`, `sqrt`, `fma`     | C's: `exp2f`, `sqrtf`, `fmaf`         |
| float16 in memory    | `half`: `vload_half`, `vstore_half_rte` | `unsigned short`: PTX `cvt`         |
| 64-bit integers      | `long`, `ulong`                       | `long long` (as C)                    |
| float64              | `#pragma OPENCL EXTENSION cl_khr_fp64` | built in                             |
| a*b+c rounded twice  | `#pragma OPENCL FP_CONTRACT OFF`      | NVRTC option `--fmad=false`           |

The arithmetic is scalar (a GPU thread is one lane of its warp), but memory moves 16 bytes at a time
where it can: codegen/gpu_vectors.py merges four aligned neighbouring 4-byte LOADs or STOREs into
one of a vector of 4 (`float4`, `int4`), whose lanes are read with GEP and made with VECTORIZE:

| what                 | OpenCL C                              | CUDA C++                              |
| -------------------- | ------------------------------------- | ------------------------------------- |
| load 4 floats        | `vload4(0, data1+i)`                  | `*(const float4*)(data1+i)`           |
| store 4 floats       | `vstore4(v, 0, data0+i);`             | `*(float4*)(data0+i) = v;`            |
| a lane / 4 lanes     | `v.x` / `(float4)(a, b, c, d)`        | `v.x` / `make_float4(a, b, c, d)`     |
"""

from __future__ import annotations

from tinyedu.core.dtype import DType, dtypes
from tinyedu.core.ops import BinaryOps, UnaryOps
from tinyedu.core.uops import FusedOps, UOp, UOps, is_vector
from tinyedu.renderer.cstyle import CRenderer, _unwrap, _wrap, c_literal

# Signed overflow is undefined in OpenCL C and CUDA, and there is no -fwrapv: data arithmetic on
# int32/int64 goes through the unsigned type, which wraps, as numpy does.
WRAPPING = {BinaryOps.ADD: "+", BinaryOps.SUB: "-", BinaryOps.MUL: "*"}
UNSIGNED = {dtypes.int32: "unsigned int", dtypes.int64: "unsigned long long"}


def check_gpu_vector(backend: str, dtype) -> None:
    """Only the 4-lane vectors of codegen/gpu_vectors.py reach a GPU kernel (OpenCL, CUDA, WGSL)."""
    if dtype.count != 4 or dtype.scalar not in (dtypes.float32, dtypes.int32):
        raise NotImplementedError(f"{backend}: a vector of {dtype.count} {dtype.scalar.name}; GPU kernels "
                                  "move 4 float32 or int32 at a time, and compute with scalars")


class GPURenderer(CRenderer):
    """A C renderer for GPU kernels; a subclass fills in one language's spellings."""

    backend = "GPU renderer"
    kernel_prefix = ""           # before `void name(...)`
    pointer_prefix = ""          # before a buffer argument's element type
    restrict = ""                # the no-aliasing qualifier
    shared_prefix = ""           # before a shared-memory array
    barrier_statement = ""
    specials: dict[str, str] = {}  # "gid" / "lid" -> the expression, formatted with {dim} and {type}
    dimension_names = "012"      # how dimension 0, 1, 2 is written there
    function_prefix = ""         # before a helper function
    math: dict[str, str] = {}    # C math function -> this language's (if it differs)
    half_storage = ""            # the element type of a float16 buffer
    vector_load = "*(const {type}*)({buffer}+{index})"    # 4 elements from index on (aligned)
    vector_store = "*({type}*)({buffer}+{index}) = {value};"
    vector_make = "({type})({lanes})"                      # a vector of these lanes
    vector_align = ""            # after shared_prefix, for a shared array that vectors read or write
    pointer_offsets = False      # no -fwrapv here: the compiler folds `alu+1` into an address itself

    def __init__(self, name: str, uops: list[UOp]):
        super().__init__(name, uops)
        # index arithmetic (from loop counters, thread indices and constants) never overflows: it
        # stays plain; only values computed from data wrap through unsigned arithmetic
        self.index_values: set[UOp] = set()
        self.vector_arrays = {u.src[0] for u in uops if (u.op is UOps.LOAD and is_vector(u.dtype)) or
                              (u.op is UOps.STORE and is_vector(u.src[2].dtype))}
        for u in uops:
            if u.op in (UOps.RANGE, UOps.SPECIAL, UOps.CONST) or \
                    (u.op is UOps.ALU and all(s in self.index_values for s in u.src)):
                self.index_values.add(u)

    # ---- what a subclass supplies ----
    def load_half(self, buffer: str, index: str) -> str:
        """float16 element `index` of `buffer`, as a float."""
        raise NotImplementedError(f"{self.backend}: no float16 load")

    def store_half(self, buffer: str, index: str, value: str) -> str:
        """The statement that stores float `value` into float16 element `index`, rounded to nearest even."""
        raise NotImplementedError(f"{self.backend}: no float16 store")

    def prelude(self, body: str) -> list[str]:
        """Lines the source starts with (pragmas, defines), given the rest of the source."""
        return []

    # ---- the kernel function ----
    def storage_type(self, dtype: DType) -> str:
        return self.half_storage if dtype == dtypes.float16 else dtype.c_name

    def type_name(self, dtype) -> str:
        if is_vector(dtype):
            check_gpu_vector(self.backend, dtype)
            return f"{dtype.scalar.c_name}4"
        return super().type_name(dtype)

    # ---- vector loads and stores (codegen/gpu_vectors.py) ----
    def gep(self, u: UOp, vector: str) -> str:
        return f"{_wrap(vector)}.{'xyzw'[u.arg]}"

    def vectorize(self, u: UOp, *lanes: str) -> str:
        lanes_text = ", ".join(_unwrap(lane) for lane in lanes)
        return self.vector_make.format(type=self.type_name(u.dtype), lanes=lanes_text)

    def define_global(self, u: UOp) -> str:
        const = "" if u.arg == 0 else "const "
        element = self.storage_type(u.dtype)
        self.params.append(f"{self.pointer_prefix}{const}{element}* {self.restrict} data{u.arg}")
        return f"data{u.arg}"

    def define_local(self, u: UOp) -> str:  # private to the thread: in its registers or stack
        name = self.new_name("local")
        self.emit(f"{self.storage_type(u.dtype)} {name}[{u.arg}];")
        return name

    def open_loop(self, u: UOp, start: str, end: str) -> str:  # threads come from the launch, not OpenMP
        name = u.arg.name
        self.emit(f"for ({u.dtype.c_name} {name} = {start}; {name} < {end}; {name}++) {{")
        self.indent += 1
        return name

    def finish(self) -> str:
        signature = f"{self.kernel_prefix}void {self.function_name}({', '.join(self.params)}) {{"
        body = "\n".join([*self.helpers.values(), signature, *self.lines, "}"])
        return "\n".join([*self.prelude(body), body]) + "\n"

    # ---- the GPU UOps ----
    def special(self, u: UOp) -> str:
        name, _size = u.arg
        kind, dimension = name[:3], int(name[3:])
        expression = self.specials[kind].format(dim=self.dimension_names[dimension], type=u.dtype.c_name)
        self.emit(f"{u.dtype.c_name} {name} = {expression};")
        return name

    def define_shared(self, u: UOp) -> str:
        number, size = u.arg
        align = self.vector_align if u in self.vector_arrays else ""
        self.emit(f"{self.shared_prefix}{align} {self.storage_type(u.dtype)} shared{number}[{size}];")
        return f"shared{number}"

    def barrier(self, u: UOp) -> None:
        self.emit(self.barrier_statement)

    def open_if(self, u: UOp, condition: str) -> None:
        self.emit(f"if ({_unwrap(condition)}) {{")
        self.indent += 1

    def close_if(self, u: UOp, branch: None) -> None:
        self.indent -= 1
        self.emit("}")

    # ---- memory and math: float16 conversions, the language's math functions ----
    def load_expression(self, u: UOp, buffer: str, index: str, gate: str | None) -> str:
        if is_vector(u.dtype):
            t = self.type_name(u.dtype)
            read = self.vector_load.format(type=t, buffer=buffer, index=_unwrap(index))
            zero = self.vector_make.format(type=t, lanes=", ".join([c_literal(0, u.dtype.scalar)] * 4))
            return read if gate is None else f"{_wrap(gate)} ? {read} : {zero}"
        if u.dtype != dtypes.float16:
            return super().load_expression(u, buffer, index, gate)
        read = self.load_half(buffer, _unwrap(index))
        return read if gate is None else f"{_wrap(gate)} ? {read} : 0.0f"

    def store(self, u: UOp, buffer: str, index: str, value: str) -> None:
        if is_vector(u.src[2].dtype):
            self.emit(self.vector_store.format(type=self.type_name(u.src[2].dtype), buffer=buffer,
                                               index=_unwrap(index), value=_unwrap(value)))
        elif u.src[2].dtype == dtypes.float16:
            self.emit(self.store_half(buffer, _unwrap(index), _unwrap(value)))
        else:
            super().store(u, buffer, index, value)

    def use_helper(self, name: str, dtype) -> str:
        """C's helpers, as this language declares a function (its own round_float16)."""
        if name == "round_float16":
            self.helpers.setdefault(name, self.round_float16_helper())
            return name
        super().use_helper(name, dtype)
        self.helpers[name] = self.helpers[name].replace("static inline ", self.function_prefix, 1)
        return name

    def round_float16_helper(self) -> str:
        """x rounded to the nearest float16 (ties to even), as a float."""
        raise NotImplementedError(f"{self.backend}: no float16 rounding")

    def alu(self, u: UOp, *srcs: str) -> str:
        """C's expression, with the language's name for a math function; int32/int64 data arithmetic
        wraps; MULACC is fma in double for float64 (C's fmaf would round to float)."""
        wraps = u.dtype in UNSIGNED and u.arg in (*WRAPPING, UnaryOps.NEG) and u not in self.index_values
        if wraps:
            t, unsigned = u.dtype.c_name, UNSIGNED[u.dtype]
            a, *rest = (f"({unsigned}){_wrap(s)}" for s in srcs)
            return f"(({t})(0u-{a}))" if u.arg is UnaryOps.NEG else f"(({t})({a}{WRAPPING[u.arg]}{rest[0]}))"
        if u.arg is FusedOps.MULACC and u.dtype == dtypes.float64:
            return f"fma({', '.join(_unwrap(s) for s in srcs)})"
        expression = super().alu(u, *srcs)
        function, paren, rest = expression.partition("(")
        return self.math[function] + paren + rest if function in self.math else expression
