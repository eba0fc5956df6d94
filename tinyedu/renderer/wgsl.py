"""UOps -> WGSL, the WebGPU Shading Language: the GPU kernel every browser and laptop GPU runs.

    @group(0) @binding(0) var<storage, read_write> data0: array<f32>;
    @group(0) @binding(1) var<storage, read> data1: array<f32>;
    var<private> opaque_zero: u32;
    fn fence(x: f32) -> f32 { return bitcast<f32>(bitcast<u32>(x) ^ opaque_zero); }
    @compute @workgroup_size(16, 1, 1)
    fn E_64(@builtin(workgroup_id) gid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>,
        @builtin(num_workgroups) groups: vec3<u32>) {
      opaque_zero = groups.x >> 31u;
      let gid0: i32 = i32(gid.x);
      let lid0: i32 = i32(lid.x);
      data0[gid0*16+lid0] = data1[gid0*16+lid0]*fence(2.0f);
    }

The same UOps as OpenCL C and CUDA (renderer/gpu.py), in a language of its own. The C renderer's
walk is kept (names, one statement per line, a value used once written inline: CRenderer.bind); what
WGSL spells differently is here:

| what               | OpenCL C / CUDA                 | WGSL                                           |
| ------------------ | ------------------------------- | ---------------------------------------------- |
| buffer argument    | a pointer parameter             | `@binding(N) var<storage, read> dataN: array<f32>` |
| threads per group  | chosen when launching           | `@workgroup_size(x, y, z)`, in the source      |
| gidN / lidN        | get_group_id / blockIdx         | `@builtin(workgroup_id)` / `local_invocation_id` |
| shared array       | `__local float shared0[64];`    | `var<workgroup> shared0: array<f32, 64>;`      |
| BARRIER            | barrier / __syncthreads         | `workgroupBarrier();`                          |
| a value            | `float alu0 = ...;`             | `let alu0: f32 = ...;` (`var` if it changes)   |
| c ? a : b          | evaluates one side              | `select(b, a, c)` evaluates both               |
| ops round as written | FP_CONTRACT OFF / `--fmad=false` | `fence(x)` on constants and results (below) |

WGSL has f32, i32, u32 and bool, and a storage buffer cannot hold bool. So:
- a bool buffer (and an int8/uint8/int16/uint16 one) lives on the GPU as 32-bit integers, widened
  and narrowed by the device when it copies (runtime/ops_webgpu.py); a narrow int is computed in
  i32/u32 and wrapped back to its width after every op, as C's narrow variables wrap;
- int64 and uint64 are i64 and u64 where the adapter has wgpu-native's `shader-int64` feature
  (Vulkan and Metal GPUs, lavapipe; not the browsers); float64 (naga has no f64 math functions)
  and the 16-bit floats are a clear error naming the dtype.
Numerics, where WGSL's rules differ from numpy's:
- WGSL has no way to ask for exact float arithmetic, and a shader compiler may use the freedom
  (Mesa's, behind lavapipe, does): it folds `(v + 2^23) - 2^23` to v, `x * 0`, `x - x` and
  `x + (-x)` to +0, `1/(1/x)` to x; naga refuses `1.0/(-0.0)` (an infinite constant). tinyedu's
  rounding, signed zeros and inf/NaN rules rely on each op rounding as written, as in C. So every
  result of an op IEEE rounds exactly (+ - * / neg recip sqrt) and every float constant goes through
  `fence(x)`: x with its bits XORed with `opaque_zero`, a 0 the compiler cannot know (the number of
  workgroups shifted right by 31), so it cannot see which op made a value or what a constant is;
  the second x of `x - x` (or `x / x`, `x == x`) is `twin(x)`, x plus that zero, and a value that is
  only stored is left as it is. The cost is one integer op per fenced value;
- WGSL's f32 `%` is x - y*trunc(x/y), rounded twice: `fmod_f32` is C's exact fmod, on the bits;
- lavapipe's exp2 and log2 flush subnormals (exp2(-140) is 0, log2(1e-45) -127): `exp2_f32` and
  `log2_f32` scale them into the normal range first;
- integer `x / 0` is x in WGSL, 0 in tinyedu (`div_i32`); signed overflow wraps in both;
- `max` and `!=` may ignore NaN (lavapipe compiles `x != x` to false): NaN is tested on the bits;
- float -> int conversions clamp in WGSL; tinyedu's rule (out of range and NaN give INT32_MIN) is a
  helper, as in C;
- a gated load is an `if` around the read, so a masked (padded) index never touches memory.
Vector loads and stores (codegen/gpu_vectors.py: four aligned neighbouring 4-byte elements at once):
WGSL types an array once, so a buffer that the kernel only ever reads or writes four at a time is
declared `array<vec4<f32>>` (element i / 4 of it is elements i..i+3); a buffer also accessed one
element at a time stays `array<f32>`, and its vector accesses are written element by element (its
size need not be a multiple of 4). A shared array with any vector access is an array of vec4 (its
size is known), and its single elements are `shared0[i / 4][i % 4]`.
"""

from __future__ import annotations

import math

from tinyedu.codegen.launch import launch_dims
from tinyedu.core.dtype import DType, dtypes
from tinyedu.core.ops import BinaryOps, TernaryOps, UnaryOps
from tinyedu.core.uops import INT32_MIN, FusedOps, UOp, UOps, is_vector
from tinyedu.renderer.cstyle import BINARY_SYMBOLS, CRenderer, _shortest_float32, _unwrap, _wrap
from tinyedu.renderer.gpu import check_gpu_vector

# The type a dtype has inside a kernel, and in a storage buffer (where bool and narrow ints widen).
WGSL_TYPES = {dtypes.float32: "f32", dtypes.int32: "i32", dtypes.uint32: "u32", dtypes.bool: "bool",
              dtypes.int8: "i32", dtypes.int16: "i32", dtypes.uint8: "u32", dtypes.uint16: "u32"}
INT64_TYPES = {dtypes.int64: "i64", dtypes.uint64: "u64"}  # with wgpu-native's shader-int64 feature
STORAGE_TYPES = {**WGSL_TYPES, **INT64_TYPES, dtypes.bool: "u32"}
# how a narrow int computed in 32 bits is wrapped back to its width
NARROW = {dtypes.int8: "(({x} << 24u) >> 24u)", dtypes.int16: "(({x} << 16u) >> 16u)",
          dtypes.uint8: "({x} & 255u)", dtypes.uint16: "({x} & 65535u)"}
MISSING = {"float64": "WGSL has no 64-bit floats: cast to float32 first (x.float())",
           "int64": "this adapter has no 64-bit integers (WGSL's shader-int64 feature): use int32",
           "uint64": "this adapter has no 64-bit integers (WGSL's shader-int64 feature): use uint32",
           "float16": "WGSL's f16 needs an optional feature that not every GPU has: use float32",
           "bfloat16": "WGSL has no bfloat16: use float32"}

# 0 at run time (set from the number of workgroups, which is below 2^31), unknown when compiling
OPAQUE_ZERO = "var<private> opaque_zero: u32;"
HELPERS = {
    # x itself, as a value the shader compiler cannot see through: it cannot fold a constant into
    # the op that uses it, nor the op that made x with the one that uses x
    "fence": "fn fence(x: f32) -> f32 { return bitcast<f32>(bitcast<u32>(x) ^ opaque_zero); }",
    # x once more, for x - x and x / x: fence(fence(x)) would not do, as the compiler cancels two XORs
    "twin": "fn twin(x: f32) -> f32 { return bitcast<f32>(bitcast<u32>(x) + opaque_zero); }",
    "is_nan": "fn is_nan(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u; }",
    "max_f32": "fn max_f32(a: f32, b: f32) -> f32 { return select(b, a, a > b || is_nan(a)); }",
    "div_i32": "fn div_i32(a: i32, b: i32) -> i32 { return select(a / b, 0, b == 0); }",
    "mod_i32": "fn mod_i32(a: i32, b: i32) -> i32 { return select(a % b, 0, b == 0 || b == -1); }",
    "div_u32": "fn div_u32(a: u32, b: u32) -> u32 { return select(a / b, 0u, b == 0u); }",
    "mod_u32": "fn mod_u32(a: u32, b: u32) -> u32 { return select(a % b, 0u, b == 0u); }",
    "div_i64": "fn div_i64(a: i64, b: i64) -> i64 { return select(a / b, 0li, b == 0li); }",
    "mod_i64": "fn mod_i64(a: i64, b: i64) -> i64 { return select(a % b, 0li, b == 0li || b == -1li); }",
    "div_u64": "fn div_u64(a: u64, b: u64) -> u64 { return select(a / b, 0lu, b == 0lu); }",
    "mod_u64": "fn mod_u64(a: u64, b: u64) -> u64 { return select(a % b, 0lu, b == 0lu); }",
    # i32 -> i64 sign-extended by hand: lavapipe compares `i64(x)` of a computed negative i32 wrongly
    # (`i64(-v) < 0li` is false for v = 4, though the value stored is -4); a zero-extension from u32
    # and an arithmetic shift right give the same bits and compare right
    "i32_to_i64": "fn i32_to_i64(x: i32) -> i64 { "
                  "return (bitcast<i64>(u64(bitcast<u32>(x))) << 32u) >> 32u; }",
    "float_to_i64": "fn float_to_i64(x: f32) -> i64 { "
                    "return select(bitcast<i64>(0x8000000000000000lu), i64(x), "
                    "x >= -9223372036854775808.0 && x < 9223372036854775808.0); }",
    "float_to_u64": "fn float_to_u64(x: f32) -> u64 { if (x >= 9223372036854775808.0) { return "
                    "bitcast<u64>(float_to_i64(x - 9223372036854775808.0)) ^ 0x8000000000000000lu; } "
                    "return bitcast<u64>(float_to_i64(x)); }",
    # exp2 and log2 with subnormals, which lavapipe's own flush to zero (exp2(-140) is 0 there, and
    # log2(1e-45) -127): scaled by 2^64 (2^23) into the normal range, where the builtin is right
    "exp2_f32": "fn exp2_f32(x: f32) -> f32 { "
                "return select(exp2(x), exp2(x + 64.0f) * 0x1p-64f, x < -126.0f); }",
    "log2_f32": "fn log2_f32(x: f32) -> f32 { "
                "return select(log2(x), log2(x * 0x1p23f) - 23.0f, x < 0x1p-126f); }",
    # C's fmod, exact: x - n*y for the integer n = trunc(x/y), computed on the significands (WGSL's own
    # f32 % is x - y*trunc(x/y), rounded twice). |x| = mx * 2^ex and |y| = my * 2^ey (24-bit integer
    # significands, ex >= ey): mx * 2^(ex-ey) % my, 8 bits at a time, is exact in u32; the result is a
    # multiple of 2^ey below |y|, so a float: normalized, or subnormal, with the sign of x.
    "fmod_f32": "fn fmod_f32(x: f32, y: f32) -> f32 {\n"
                "  let bx = bitcast<u32>(x) & 0x7fffffffu; let by = bitcast<u32>(y) & 0x7fffffffu;\n"
                "  if (bx >= 0x7f800000u || by > 0x7f800000u || by == 0u) {\n"
                "    return bitcast<f32>(0x7fc00000u);\n"
                "  }\n"
                "  if (bx < by) { return x; }\n"
                "  let ex = max(i32(bx >> 23u), 1); let ey = max(i32(by >> 23u), 1);\n"
                "  let my = select(by & 0x7fffffu, (by & 0x7fffffu) | 0x800000u, by >= 0x800000u);\n"
                "  var r = select(bx & 0x7fffffu, (bx & 0x7fffffu) | 0x800000u, bx >= 0x800000u) % my;\n"
                "  var k = ex - ey;\n"
                "  for (; k >= 8; k -= 8) { r = (r << 8u) % my; }\n"
                "  r = (r << u32(k)) % my;\n"
                "  var bits = 0u;\n"
                "  if (r != 0u) {\n"
                "    let s = i32(countLeadingZeros(r)) - 8; let e = ey - s;\n"
                "    let normal = (u32(e) << 23u) | ((r << u32(s)) & 0x7fffffu);\n"
                "    bits = select(r << u32(ey - 1), normal, e >= 1);\n"
                "  }\n"
                "  return bitcast<f32>(bits | (bitcast<u32>(x) & 0x80000000u));\n"
                "}",
    # tinyedu's rule (tinyedu.core.dtype.float_to_int): out of range and NaN give INT32_MIN
    "float_to_i32": "fn float_to_i32(x: f32) -> i32 { return select(bitcast<i32>(0x80000000u), i32(x), "
                    "x >= -2147483648.0 && x < 2147483648.0); }",
    # as C's (uint32)float_to_int64(x): the low 32 bits of the truncated value, 0 past 2^63 and for NaN
    "float_to_u32": "fn float_to_u32(x: f32) -> u32 { let t = trunc(x); "
                    "if (t >= 0.0 && t < 4294967296.0) { return u32(t); } "
                    "if (t >= -2147483648.0 && t < 0.0) { return bitcast<u32>(i32(t)); } "
                    "if (abs(t) < 9223372036854775808.0) { "
                    "return u32(t - floor(t / 4294967296.0) * 4294967296.0); } "
                    "return 0u; }",
}


class WGSLRenderer(CRenderer):
    """A kernel's UOps as one WGSL compute shader (entry point: the kernel's name)."""

    backend = "WGSL renderer"

    def __init__(self, name: str, uops: list[UOp], int64: bool = False):
        super().__init__(name, uops)
        self.types = {**WGSL_TYPES, **(INT64_TYPES if int64 else {})}
        self.bindings: list[str] = []   # module-scope storage buffers
        self.shared: list[str] = []     # module-scope workgroup arrays
        self.launch = launch_dims(uops)
        # the values only stored: no op of the kernel uses them, so there is nothing to fence them from
        users: dict[UOp, set[UOps]] = {}
        for u in uops:
            for s in u.src:
                users.setdefault(s, set()).add(u.op)
        self.only_stored = {u for u, ops in users.items() if ops <= {UOps.STORE, UOps.VECTORIZE}}
        # the arrays every access of which is a vector of 4 (codegen/gpu_vectors.py): arrays of vec4
        widths: dict[UOp, set[bool]] = {}
        for u in uops:
            if u.op in (UOps.LOAD, UOps.STORE):
                value = u.dtype if u.op is UOps.LOAD else u.src[2].dtype
                widths.setdefault(u.src[0], set()).add(is_vector(value))
        self.vec4_arrays = {a for a, seen in widths.items() if (a.op is UOps.DEFINE_GLOBAL and seen == {True})
                            or (a.op is UOps.DEFINE_SHARED and True in seen and a.arg[1] % 4 == 0)}

    # ---- types and literals ----
    def type_name(self, dtype) -> str:
        if is_vector(dtype):
            check_gpu_vector(self.backend, dtype)
            return f"vec4<{self.types[dtype.scalar]}>"
        if dtype not in self.types:
            raise NotImplementedError(f"WEBGPU: dtype {dtype.name} is not supported in WGSL kernels: "
                                      f"{MISSING.get(dtype.name, 'use float32 or int32')}")
        return self.types[dtype]

    def const(self, u: UOp) -> str:
        literal = wgsl_literal(u.arg, u.dtype, self.type_name(u.dtype))
        return f"{self.use_helper('fence')}({_unwrap(literal)})" if u.dtype == dtypes.float32 else literal

    def use_helper(self, name: str, dtype=None) -> str:
        if name in ("max_f32", "float_to_u64"):
            self.use_helper("is_nan" if name == "max_f32" else "float_to_i64")
        if name in ("fence", "twin"):
            self.helpers.setdefault("opaque_zero", OPAQUE_ZERO)
        self.helpers.setdefault(name, HELPERS[name])
        return name

    # ---- memory ----
    def define_global(self, u: UOp) -> str:
        access = "read_write" if u.arg == 0 else "read"
        self.type_name(u.dtype)
        element = STORAGE_TYPES[u.dtype]
        element = f"vec4<{element}>" if u in self.vec4_arrays else element
        self.bindings.append(f"@group(0) @binding({u.arg}) var<storage, {access}> data{u.arg}: "
                             f"array<{element}>;")
        return f"data{u.arg}"

    def define_local(self, u: UOp) -> str:
        name = self.new_name("local")
        self.emit(f"var {name}: array<{self.type_name(u.dtype)}, {u.arg}>;")
        return name

    def define_shared(self, u: UOp) -> str:
        number, size = u.arg
        element = self.type_name(u.dtype)
        if u in self.vec4_arrays:
            element, size = f"vec4<{element}>", size // 4
        self.shared.append(f"var<workgroup> shared{number}: array<{element}, {size}>;")
        return f"shared{number}"

    def is_buffer(self, buffer: UOp) -> bool:
        return buffer.op is UOps.DEFINE_GLOBAL

    def element(self, array: UOp, buffer: str, index: str) -> str:
        """One element of an array (of scalars, or of vec4: a lane of one of them)."""
        if array in self.vec4_arrays:
            return f"{buffer}[{_wrap(index)} / 4][{_wrap(index)} % 4]"
        return f"{buffer}[{_unwrap(index)}]"

    def vector_at(self, u: UOp, buffer: str, index: str) -> tuple[str, list[str]]:
        """How a vector LOAD/STORE `u` reaches elements index..index+3: one element of an array of
        vec4 (the first string), else each element of an array of scalars (the list)."""
        if u.src[0] in self.vec4_arrays:
            return f"{buffer}[{_wrap(index)} / {self.const(UOp(UOps.CONST, u.src[1].dtype, (), 4))}]", []
        first = self.new_name("at")
        self.emit(f"let {first}: {self.type_name(u.src[1].dtype)} = {_unwrap(index)};")
        return "", [f"{buffer}[{first}{'' if lane == 0 else f' + {lane}'}]" for lane in range(4)]

    def load(self, u: UOp, buffer: str, index: str, gate: str | None = None) -> str:
        name, t = self.new_name("val"), self.type_name(u.dtype)
        read = self.element(u.src[0], buffer, index)
        if is_vector(u.dtype):
            whole, lanes = self.vector_at(u, buffer, index)
            read = whole or f"{t}({', '.join(lanes)})"
        if u.dtype == dtypes.bool and self.is_buffer(u.src[0]):
            read = f"({read} != 0u)"
        if gate is None:
            self.emit(f"let {name}: {t} = {_unwrap(read)};")
            return name
        zero = f"{t}()" if is_vector(u.dtype) else wgsl_literal(0, u.dtype, t)
        self.emit(f"var {name}: {t} = {zero};")  # padding reads 0; memory untouched
        self.emit(f"if ({_unwrap(gate)}) {{ {name} = {_unwrap(read)}; }}")
        return name

    def store(self, u: UOp, buffer: str, index: str, value: str) -> None:
        if is_vector(u.src[2].dtype):
            whole, lanes = self.vector_at(u, buffer, index)
            if whole:
                self.emit(f"{whole} = {_unwrap(value)};")
                return
            vector = self.new_name("vec")
            self.emit(f"let {vector}: {self.type_name(u.src[2].dtype)} = {_unwrap(value)};")
            for lane, target in enumerate(lanes):
                self.emit(f"{target} = {vector}.{'xyzw'[lane]};")
            return
        if u.src[2].dtype == dtypes.bool and self.is_buffer(u.src[0]):
            value = f"select(0u, 1u, {_unwrap(value)})"
        self.emit(f"{self.element(u.src[0], buffer, index)} = {_unwrap(value)};")

    def gep(self, u: UOp, vector: str) -> str:
        return f"{_wrap(vector)}.{'xyzw'[u.arg]}"

    def vectorize(self, u: UOp, *lanes: str) -> str:
        return f"{self.type_name(u.dtype)}({', '.join(_unwrap(lane) for lane in lanes)})"

    # ---- loops and accumulators ----
    def open_loop(self, u: UOp, start: str, end: str) -> str:
        name, t = u.arg.name, self.type_name(u.dtype)
        self.emit(f"for (var {name}: {t} = {_unwrap(start)}; {name} < {_unwrap(end)}; {name}++) {{")
        self.indent += 1
        return name

    def define_acc(self, u: UOp) -> str:
        name, t = self.new_name("acc"), self.type_name(u.dtype)
        self.emit(f"var {name}: {t} = {_unwrap(wgsl_literal(u.arg, u.dtype, t))};")
        return name

    def bind(self, u: UOp, expression: str) -> str:
        if self.uses[u] == 1 and self.user_depth.get(u) == self.depth[u]:
            return expression
        name = self.new_name("alu" if u.op is not UOps.CAST else "cast")
        self.emit(f"let {name}: {self.type_name(u.dtype)} = {_unwrap(expression)};")
        return name

    # ---- the GPU UOps ----
    def special(self, u: UOp) -> str:
        name, _size = u.arg
        builtin = "gid" if name.startswith("gid") else "lid"
        self.emit(f"let {name}: {self.type_name(u.dtype)} = i32({builtin}.{'xyz'[int(name[3:])]});")
        return name

    def barrier(self, u: UOp) -> None:
        self.emit("workgroupBarrier();")

    def open_if(self, u: UOp, condition: str) -> None:
        self.emit(f"if ({_unwrap(condition)}) {{")
        self.indent += 1

    def close_if(self, u: UOp, branch: None) -> None:
        self.indent -= 1
        self.emit("}")

    # ---- values ----
    def alu(self, u: UOp, *srcs: str) -> str:
        value = self.narrow(u.dtype, self.wgsl_alu(u, *srcs))
        if u.dtype == dtypes.float32 and u.arg in FENCED and u not in self.only_stored:  # (module docstring)
            return f"{self.use_helper('fence')}({_unwrap(value)})"
        return value

    def narrow(self, dtype: DType, expression: str) -> str:
        """A narrow int computed in 32 bits, wrapped back to its width (as C's narrow variables wrap)."""
        return NARROW[dtype].format(x=_wrap(expression)) if dtype in NARROW else expression

    def wgsl_alu(self, u: UOp, *srcs: str) -> str:
        op = u.arg
        dtype = u.src[1].dtype if op is TernaryOps.WHERE else u.src[0].dtype
        t = self.type_name(dtype)
        if op is FusedOps.MULACC:
            return f"fma({', '.join(_unwrap(s) for s in srcs)})"
        if op is TernaryOps.WHERE:
            return f"select({_unwrap(srcs[2])}, {_unwrap(srcs[1])}, {_unwrap(srcs[0])})"
        if op is UnaryOps.NEG:
            if t in ("u32", "u64"):
                return f"({wgsl_literal(0, dtype, t)}-{srcs[0]})"
            return f"(!{srcs[0]})" if t == "bool" else f"(-{srcs[0]})"
        if op in (UnaryOps.EXP2, UnaryOps.LOG2):
            return f"{self.use_helper(op.name.lower() + '_f32')}({_unwrap(srcs[0])})"
        if op in UNARY_FUNCTIONS:
            return f"{UNARY_FUNCTIONS[op]}({_unwrap(srcs[0])})"
        if op is UnaryOps.RECIP:
            if t == "f32":
                return f"(1.0f/{srcs[0]})"
            return f"{self.use_helper('div_' + t)}({wgsl_literal(1, dtype, t)}, {_unwrap(srcs[0])})"
        a, b = srcs
        if t == "f32" and u.src[0] is u.src[1]:  # x - x is NaN for inf: a compiler that sees one x makes it 0
            b = f"{self.use_helper('twin')}({_unwrap(b)})"
        if op is BinaryOps.MAX:
            if t == "bool":
                return f"({a}|{b})"
            if t == "f32":
                return f"{self.use_helper('max_f32')}({_unwrap(a)}, {_unwrap(b)})"
            return f"select({_unwrap(b)}, {_unwrap(a)}, {a}>{b})"
        if op is BinaryOps.MOD and t == "f32":
            return f"{self.use_helper('fmod_f32')}({_unwrap(a)}, {_unwrap(b)})"
        if op in (BinaryOps.DIV, BinaryOps.MOD) and t != "f32":
            divisor = u.src[1]
            if divisor.op is UOps.CONST and divisor.arg > 0:  # index math: no guard needed
                return f"({a}{'/' if op is BinaryOps.DIV else '%'}{b})"
            helper = self.use_helper(("div_" if op is BinaryOps.DIV else "mod_") + t)
            return f"{helper}({_unwrap(a)}, {_unwrap(b)})"
        if t == "bool":
            symbol = {BinaryOps.ADD: "|", BinaryOps.MUL: "&", BinaryOps.AND: "&", BinaryOps.OR: "|",
                      BinaryOps.XOR: "!=", BinaryOps.CMPEQ: "==", BinaryOps.SUB: "!="}.get(op)
            if op is BinaryOps.CMPLT:
                return f"((!{a})&{b})"
            if symbol is None:
                raise NotImplementedError(f"{self.backend}: no rule for {op.name} on bool")
            return f"({a}{symbol}{b})"
        if op is BinaryOps.ADD and t in ("i32", "i64") and u.src[1].op is UOps.CONST and \
                INT32_MIN < u.src[1].arg < 0:
            return f"({a}-{-u.src[1].arg})"
        return f"({a}{'%' if op is BinaryOps.MOD else BINARY_SYMBOLS[op]}{b})"

    def cast(self, u: UOp, value: str) -> str:
        src, dst = u.src[0].dtype, u.dtype
        s, d = self.type_name(src), self.type_name(dst)
        if d == "bool":
            return f"(!({_unwrap(value)} == {wgsl_literal(0, src, s)}))"  # NaN is true, as in numpy
        if s == "f32" and d != "f32":
            helper = self.use_helper(f"float_to_{d if d in ('u32', 'i64', 'u64') else 'i32'}")
            return self.narrow(dst, f"{helper}({_unwrap(value)})")
        if s == "i32" and d in ("i64", "u64"):
            wide = f"{self.use_helper('i32_to_i64')}({_unwrap(value)})"
            return wide if d == "i64" else f"bitcast<u64>({wide})"
        return self.narrow(dst, f"{d}({_unwrap(value)})")  # i32 <-> u32 keeps the bits, as in C

    # ---- the whole shader ----
    def finish(self) -> str:
        local = self.launch.local if self.launch is not None else (1, 1, 1)
        fenced = "opaque_zero" in self.helpers
        signature = (f"@compute @workgroup_size({', '.join(map(str, local))})\n"
                     f"fn {self.function_name}(@builtin(workgroup_id) gid: vec3<u32>, "
                     "@builtin(local_invocation_id) lid: vec3<u32>" +
                     (",\n    @builtin(num_workgroups) groups: vec3<u32>) {" if fenced else ") {"))
        start = ["  opaque_zero = groups.x >> 31u;"] if fenced else []
        lines = [*self.bindings, *self.shared, *self.helpers.values(), signature, *start, *self.lines, "}"]
        return "\n".join(lines) + "\n"


# the float ops IEEE rounds exactly (once, to nearest even): their results are fenced
FENCED = (BinaryOps.ADD, BinaryOps.SUB, BinaryOps.MUL, BinaryOps.DIV, UnaryOps.NEG, UnaryOps.RECIP,
          UnaryOps.SQRT)
UNARY_FUNCTIONS = {UnaryOps.SIN: "sin", UnaryOps.COS: "cos", UnaryOps.SQRT: "sqrt"}


def wgsl_literal(value: float | int | bool, dtype: DType, wgsl_type: str) -> str:
    """A WGSL literal of this type with exactly this value (`2.5f`, `(-3)`, `7u`, NaN from its bits)."""
    if wgsl_type == "bool":
        return "true" if value else "false"
    if wgsl_type == "f32":
        if math.isnan(value):
            return "bitcast<f32>(0x7fc00000u)"  # WGSL has no NaN or infinity literals
        if math.isinf(value):
            return "bitcast<f32>(0x7f800000u)" if value > 0 else "bitcast<f32>(0xff800000u)"
        text = _shortest_float32(value) + "f"
        return f"({text})" if text.startswith("-") else text
    if wgsl_type in ("u32", "u64"):
        return f"{int(value) % 2**64}{'u' if wgsl_type == 'u32' else 'lu'}"
    value, suffix = int(value), "li" if wgsl_type == "i64" else ""
    if value == -(2**63):
        return "bitcast<i64>(0x8000000000000000lu)"
    if value == INT32_MIN and not suffix:
        return "bitcast<i32>(0x80000000u)"  # 2147483648 alone does not fit in an i32
    return f"({value}{suffix})" if value < 0 else f"{value}{suffix}"


def render_wgsl(name: str, uops: list[UOp], int64: bool = False) -> str:
    """The WGSL source of one kernel: a compute shader whose entry point is `name` (`int64`: the
    adapter has wgpu-native's shader-int64 feature, so int64 and uint64 are i64 and u64)."""
    return WGSLRenderer(name, uops, int64).render()
