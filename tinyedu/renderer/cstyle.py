"""UOps -> C source: one function per kernel, one statement per line, names a reader can follow.

    void r_4_16(float* restrict data0, const float* restrict data1) {
      for (int gidx0 = 0; gidx0 < 4; gidx0++) {
        float acc0 = 0.0f;
        int alu0 = gidx0*16;
        for (int ridx0 = 0; ridx0 < 16; ridx0++) {
          float val0 = data1[alu0+ridx0];
          acc0 = acc0+val0;
        }
        data0[gidx0] = acc0;
      }
    }

The class is a subclass of the core's C renderer (tinyedu/core/cstyle.py), which writes the plain
scalar C of each UOp; this one overrides what it writes differently and calls the core's methods
where the C is the same (see `CRenderer`).

Names: `dataN` buffers, `gidxN`/`ridxN` loop indices, `accN` accumulators, `valN` loaded values,
`aluN`/`castN` computed values, `localN` local arrays. A value used exactly once is written inline
where it is used, unless it was computed in an outer loop (the UOps hoisted it out: inlining it
would move the work back into the loop).

Vectors (stage 5) use the GCC/Clang vector extensions, so one source is SIMD on x86-64 and arm64:
`typedef float floatx16 __attribute__((vector_size(64), aligned(4)));` is 16 floats that `+ - * /`
and comparisons work on lane by lane, and `v[3]` reads one lane. `aligned(4)` lets a pointer to it
point anywhere a float may be, so `*(floatx16*)(data1+i)` is an unaligned vector load. A
comparison of vectors gives an int vector mask (-1 where true, 0 where false); WHERE and MAX are
bit selections with it. MULACC is `fmaf` (one rounding) and SQRT `sqrtf`, lane by lane for
vectors: the compiler turns each such loop into one vector instruction. A THREAD loop gets
`#pragma omp parallel for` (OpenMP; compiled without it, the same loop runs on one thread).

C must give exactly what the NUMPY device gives (tinyedu/runtime/ops_numpy.py), and C's defaults
differ in a few places, each handled here or by a compiler flag (see tinyedu/runtime/ops_c.py):
- signed overflow is undefined in C, wraps in numpy: compile with `-fwrapv`;
- `a*b+c` may become one fused multiply-add, rounding once instead of twice: `-ffp-contract=off`;
- integer `x/0` crashes in C and gives 0 here, and INT_MIN/-1 traps: helper functions `div_int32`...;
- `fmaxf` ignores NaN, np.maximum returns it: `max_float32` checks for NaN (x != x only for NaN);
- arithmetic on ints narrower than `int` (int8, uint8, int16, uint16) happens in `int` in C: their
  results are stored in variables of their own type (never inlined), which wraps them like numpy;
- float -> int casts truncate in both, but a value outside int32 (or NaN, inf) is undefined
  behaviour in C: `float_to_int32` spells out tinyedu's rule (INT32_MIN, as x86-64 gives; see
  tinyedu.core.dtype.float_to_int), and float -> int8/uint8/int16/uint16 go through it;
  `float_to_int64` and `float_to_uint64` do the same for the 64-bit types (and uint32).
- float16 and bfloat16 values are `float`s inside a kernel (every op on them computes in float32,
  as in PyTorch; see tinyedu.core.dtype). float16 is stored as `_Float16`, so a load or store is a C
  conversion; a cast to float16 is `round_float16(x)`, `(float)(_Float16)x` made opaque to GCC
  (which folds the pair away inside a vector), rounding to nearest even. bfloat16 has
  no C type: it is stored as the `unsigned short` top half of a float32, and `round_bfloat16`,
  `bfloat16_to_float` and `float_to_bfloat16` round and convert.
Masked (padded) reads become `valid ? data1[index] : 0.0f`: C evaluates only the branch it takes,
so an out-of-range index is computed but never used to touch memory.

Offsets from one base (`pointer_offsets`): an upcast kernel reads `data1[alu20]`, `data1[alu20+1]`,
... `data1[alu20+7]`. Under `-fwrapv`, `alu20+1` is an `int` that must wrap at 2^31, so the compiler
cannot turn it into "the address of data1[alu20], plus 4 bytes": it computes each sum in 32 bits,
sign-extends it and keeps each address in a register of its own (and spills them in a big inner
loop). Pointer arithmetic has no such wrapping, so these reads are written `(data1+alu20)[1]`: one
base address, and the offset becomes the instruction's constant displacement. The value is the
same (indices fit in their type: the linearizer picks 64-bit ones where they would not). Only a
group of two or more reads or writes of one buffer around one base is written so, where the sum
would have been written inline.
"""

from __future__ import annotations

import math
import struct
from collections import Counter

from tinyedu.core import cstyle as core
from tinyedu.core.dtype import DType, dtypes
from tinyedu.core.ops import BinaryOps, TernaryOps, UnaryOps
from tinyedu.core.uops import INT32_MIN, FusedOps, UOp, UOps, VectorDType, is_vector, scalar_of


def c_literal(value: float | int | bool, dtype: DType) -> str:
    """A C literal of `dtype` with exactly this value (`2.5f`, `(-3)`, `INFINITY`, `true`)."""
    if dtype == dtypes.bool:
        return "true" if value else "false"
    if dtype.is_float:
        if math.isnan(value):
            return "NAN"
        if math.isinf(value):
            return "INFINITY" if value > 0 else "(-INFINITY)"
        # a double literal has no suffix; float16 and bfloat16 values are floats in kernels
        text = repr(float(value)) if dtype == dtypes.float64 else _shortest_float32(value) + "f"
        return f"({text})" if text.startswith("-") else text
    if value == INT32_MIN:
        return "(-2147483647-1)"  # 2147483648 alone does not fit in an int
    if value == -(2**63):
        return "(-9223372036854775807LL-1)"
    # a long long (64-bit index arithmetic, int64), an unsigned long long past 2^63 (uint64)
    suffix = "" if INT32_MIN <= value < -INT32_MIN else "LL" if value < 2**63 else "ULL"
    return f"({value}{suffix})" if value < 0 else f"{value}{suffix}"


def _shortest_float32(value: float) -> str:
    """The shortest decimal that reads back as the same float32 (like numpy's repr of a float32)."""
    for digits in range(1, 10):
        text = f"{value:.{digits}g}"
        if struct.unpack("f", struct.pack("f", float(text)))[0] == value:
            break
    if "e" not in text and "." not in text and "n" not in text:
        text += ".0"
    return text


# Small functions that some kernels need, written out once at the top of the source when used.
# --8<-- [start:helpers]
HELPERS = {
    # NaN wins, like np.maximum (a != a is true only for NaN); when equal, b (np.maximum(0., -0.) is -0.)
    "max_float32": "static inline float max_float32(float a, float b) { return (a > b || a != a) ? a : b; }",
    "div_int32": "static inline int div_int32(int a, int b) { return b == 0 ? 0 : b == -1 ? -a : a / b; }"
                 "  /* x/0 is 0; INT_MIN/-1 would trap */",
    "mod_int32": "static inline int mod_int32(int a, int b) { return (b == 0 || b == -1) ? 0 : a % b; }",
    # (int)x is undefined when x does not fit; tinyedu defines it as x86-64 does (NaN fails both tests).
    # The argument is a double, which holds every float exactly.
    "float_to_int32": "static inline int float_to_int32(double x) { return (x >= -2147483648.0 && "
                      "x < 2147483648.0) ? (int)x : (-2147483647-1); }",
    "float_to_int64": "static inline long long float_to_int64(double x) { return (x >= -9223372036854775808.0"
                      " && x < 9223372036854775808.0) ? (long long)x : (-9223372036854775807LL-1); }",
    # from 2^63 on: as int64 of x - 2^63, then the top bit set back (the code gcc emits on x86-64)
    "float_to_uint64": "static inline unsigned long long float_to_uint64(double x) { return x >= "
                       "9223372036854775808.0 ? (unsigned long long)float_to_int64(x - 9223372036854775808.0)"
                       " ^ 0x8000000000000000ULL : (unsigned long long)float_to_int64(x); }",
    # bfloat16 is the top half of a float32: round the float to nearest even there (NaN: torch's NaN)
    # float -> half -> float. `(float)(_Float16)x` alone is folded to x by GCC 12 when the lanes of a
    # vector are built from it (a fused x.half().float() in a matmul kept float32 values); the empty
    # asm (on the value in memory, which works on any architecture) makes it opaque, so it rounds.
    "round_float16": "static inline float round_float16(float x) { _Float16 h = (_Float16)x; "
                     "__asm__(\"\" : \"+m\"(h)); return (float)h; }",
    "round_bfloat16": "static inline float round_bfloat16(float x) { union { float f; unsigned int u; } v = "
                      "{x}; v.u = x != x ? 0x7FC00000u : (v.u + 0x7FFFu + ((v.u >> 16) & 1u)) & 0xFFFF0000u; "
                      "return v.f; }",
    "bfloat16_to_float": "static inline float bfloat16_to_float(unsigned short b) { union { unsigned int u;"
                         " float f; } v = {(unsigned int)b << 16}; return v.f; }",
    "float_to_bfloat16": "static inline unsigned short float_to_bfloat16(float x) { union { float f; "
                         "unsigned int u; } v = {x}; return (unsigned short)(v.u >> 16); }",
}
# Which helper a float -> int cast goes through (the rule is tinyedu.core.dtype.float_to_int).
FLOAT_TO_INT = {dtypes.int64: "float_to_int64", dtypes.uint32: "float_to_int64",
                dtypes.uint64: "float_to_uint64"}
# --8<-- [end:helpers]


def c_type(dtype: DType | VectorDType) -> str:
    """The C type of a UOp's dtype: `float`, `floatx16`, ...; a bool vector is an int mask vector."""
    if not is_vector(dtype):
        return "float" if dtype.is_half else dtype.c_name  # half values live in floats (tinyedu.core.dtype)
    lane = "int" if dtype.scalar == dtypes.bool else dtype.scalar.c_name
    return f"{lane}x{dtype.count}"


def vector_typedef(dtype: VectorDType) -> str:
    lane = "int" if dtype.scalar == dtypes.bool else dtype.scalar.c_name
    size = 4 * dtype.count  # only 4-byte lanes are vectors
    return f"typedef {lane} {c_type(dtype)} __attribute__((vector_size({size}), aligned(4)));"


# --8<-- [start:vector-helpers]
def _vector_helper(name: str, dtype: VectorDType) -> str:
    """Vector helpers: broadcast, MAX and WHERE as bit selections with a mask, MULACC lane by lane."""
    t, lane, n = c_type(dtype), scalar_of(dtype).c_name, dtype.count
    mask = f"intx{n}"
    if name.startswith("broadcast_"):
        if dtype.scalar == dtypes.bool:  # a bool becomes a mask: -1 (all bits) for true
            return f"static inline {t} {name}(bool x) {{ return ({t}){{{', '.join(['-(int)x'] * n)}}}; }}"
        return f"static inline {t} {name}({lane} x) {{ return ({t}){{{', '.join(['x'] * n)}}}; }}"
    select = f"({t})((m & ({mask})a) | (~m & ({mask})b))" if dtype.scalar.is_float else "(m & a) | (~m & b)"
    if name.startswith("where_"):
        return f"static inline {t} {name}({mask} m, {t} a, {t} b) {{ return {select}; }}"
    if name.startswith("max_"):  # NaN wins and, when equal, b: exactly max_float32, lane by lane
        nan = " | (a != a)" if dtype.scalar.is_float else ""
        return f"static inline {t} {name}({t} a, {t} b) {{ {mask} m = (a > b){nan}; return {select}; }}"
    if name.startswith("fma_"):
        return (f"static inline {t} {name}({t} a, {t} b, {t} c) {{ {t} r; "
                f"for (int i = 0; i < {n}; i++) r[i] = fmaf(a[i], b[i], c[i]); return r; }}")
    if name.startswith("sqrt_"):  # lane by lane: the compiler makes it one vector square root
        return (f"static inline {t} {name}({t} a) {{ {t} r; "
                f"for (int i = 0; i < {n}; i++) r[i] = sqrtf(a[i]); return r; }}")
    raise NotImplementedError(f"C renderer: no vector helper {name}")
# --8<-- [end:vector-helpers]


def _helper(name: str, dtype: DType | VectorDType) -> str:
    """The source of helper `name` (templated for the plainer types)."""
    if is_vector(dtype):
        return _vector_helper(name, dtype)
    if name in HELPERS:
        return HELPERS[name]
    c = dtype.c_name
    if name.startswith("max_"):  # for floats, NaN wins as in max_float32
        nan = " || a != a" if dtype.is_float else ""
        return f"static inline {c} {name}({c} a, {c} b) {{ return (a > b{nan}) ? a : b; }}"
    if dtype.kind == "i" and dtype.itemsize >= 4:  # INT_MIN / -1 traps: x / -1 is -x (wrapping)
        if name.startswith("div_"):
            return f"static inline {c} {name}({c} a, {c} b) {{ return b == 0 ? 0 : b == -1 ? -a : a / b; }}"
        return f"static inline {c} {name}({c} a, {c} b) {{ return (b == 0 || b == -1) ? 0 : a % b; }}"
    symbol = "/" if name.startswith("div_") else "%"
    return f"static inline {c} {name}({c} a, {c} b) {{ return b == 0 ? 0 : a {symbol} b; }}"


def _wrap(expr: str) -> str:
    """Parenthesize unless it already is one name, number or parenthesized group."""
    if expr.replace("_", "").isalnum() or (expr.startswith("(") and _closing_paren(expr) == len(expr) - 1):
        return expr
    return f"({expr})"


def _unwrap(expr: str) -> str:
    """Drop one pair of outer parentheses, for positions that need none (`data1[...]`, `x = ...;`)."""
    if expr.startswith("(") and _closing_paren(expr) == len(expr) - 1:
        return expr[1:-1]
    return expr


def _closing_paren(expr: str) -> int:
    depth = 0
    for i, ch in enumerate(expr):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth == 0:
            return i
    return -1


class CRenderer(core.CRenderer):
    """Renders one UOp list as C. `CRenderer(name, uops).render()` gives the whole source.

    A subclass of the core's C renderer (tinyedu/core/cstyle.py), which writes the plain scalar C of
    each UOp: the loops, loads, declarations, the function's signature and the table of op
    spellings are the core's. What this class adds overrides the core's methods and calls them
    where the C is the same: vectors and their typedefs, a value used once written inline (`bind`),
    helper functions (MAX with NaN, integer division, float -> int, float16/bfloat16), C literals of
    every dtype (`c_literal`), OpenMP threads. The NEON renderer is this class with its vector
    methods replaced by intrinsics.
    """

    pointer_offsets = True  # `(data1+alu20)[1]` for a group of offsets from one base (module docstring)

    def __init__(self, name: str, uops: list[UOp]):
        super().__init__(name, uops)
        self.uses = Counter(s for u in uops for s in u.src)
        self.offset_bases = _offset_bases(uops) if self.pointer_offsets else set()
        self.helpers: dict[str, str] = {}
        self.typedefs: dict[str, str] = {}
        # the loop depth of every UOp, and of the one UOp that uses it (for inlining, see bind)
        self.depth: dict[UOp, int] = {}
        depth = 0
        for u in uops:
            depth -= u.op is UOps.ENDRANGE
            self.depth[u] = depth
            depth += u.op is UOps.RANGE
        self.user_depth = {s: self.depth[u] for u in uops for s in u.src}

    def type_name(self, dtype: DType | VectorDType) -> str:
        """The C type, declaring a vector typedef the first time one is used."""
        if is_vector(dtype):
            self.typedefs.setdefault(c_type(dtype), vector_typedef(dtype))
        return c_type(dtype)

    def literal(self, value: float | int | bool, dtype: DType) -> str:
        return c_literal(value, dtype)

    # --8<-- [start:render]
    def bind(self, u: UOp, expression: str) -> str:
        """Inline a value used once, where it is used, unless it is computed in an outer loop (the UOps
        hoisted it out) or is an int narrower than `int` (C computes those in `int`: a variable of
        their own type is what wraps them like numpy)."""
        narrow = not is_vector(u.dtype) and u.dtype.is_int and u.dtype.itemsize < 4
        if self.uses[u] == 1 and not narrow and self.user_depth.get(u) == self.depth[u]:
            return expression
        return self.declare("alu" if u.op is not UOps.CAST else "cast", u.dtype, _unwrap(expression))

    def define_local(self, u: UOp) -> str:  # aligned to a cache line, on this thread's stack
        name = self.new_name("local")
        self.emit(f"_Alignas(64) {u.dtype.c_name} {name}[{u.arg}];")
        return name

    def open_loop(self, u: UOp, start: str, end: str) -> str:
        if u.arg.threads > 1:  # OpenMP shares the iterations among threads, unless this thread may use one
            self.emit("int omp_get_max_threads(void);")  # (1 in a child after fork(): see runtime/ops_c.py)
            self.emit(f"#pragma omp parallel for num_threads({u.arg.threads}) schedule(guided) "
                      "if(omp_get_max_threads() > 1)")
        return super().open_loop(u, start, end)

    def define_acc(self, u: UOp) -> str:
        init = _unwrap(c_literal(u.arg, scalar_of(u.dtype)))
        return self.declare("acc", u.dtype, self.splat(u.dtype, init) if is_vector(u.dtype) else init)

    def assign(self, u: UOp, acc: str, value: str) -> str:
        return super().assign(u, acc, _unwrap(value))

    def store(self, u: UOp, buffer: str, index: str, value: str) -> None:
        dtype = u.src[2].dtype
        if dtype == dtypes.bfloat16:  # the value is an exact bfloat16 in a float: keep its top half
            value = f"{self.use_helper('float_to_bfloat16', dtype)}({_unwrap(value)})"
        if is_vector(dtype):
            self.emit(f"*({self.type_name(dtype)}*)({buffer}+{_unwrap(index)}) = {_unwrap(value)};")
        else:
            super().store(u, *self.offset_from_base(u, buffer, _unwrap(index)), _unwrap(value))

    def offset_from_base(self, u: UOp, buffer: str, index: str) -> tuple[str, str]:
        """(buffer, index) for a scalar LOAD or STORE `u`: `(data1+alu20)` and `1` where its index
        `alu20+1` is one of a group of offsets from one base (see the module docstring), else as given."""
        at = u.src[1]
        if not _is_offset(at) or (u.src[0], at.src[0]) not in self.offset_bases or \
                self.values[at].isidentifier():  # a sum declared as a variable of its own is used by name
            return buffer, index
        # the base has two or more users, so it is a variable's name (`bind`); _wrap is for safety
        offset = at.src[1].arg if at.arg is BinaryOps.ADD else -at.src[1].arg
        return f"({buffer}+{_wrap(self.value(at.src[0]))})", str(offset)

    def declarations(self) -> list[str]:  # before the function: vector typedefs, then helpers
        return [*self.typedefs.values(), *self.helpers.values()]
    # --8<-- [end:render]

    def load_expression(self, u: UOp, buffer: str, index: str, gate: str | None) -> str:
        """buffer[index]; a vector reads from a pointer cast, a bfloat16 through a helper; a gated
        load reads 0 where the gate is false."""
        index, gate = _unwrap(index), None if gate is None else _wrap(gate)
        if not is_vector(u.dtype):
            buffer, index = self.offset_from_base(u, buffer, index)
        if not is_vector(u.dtype) and u.dtype != dtypes.bfloat16:
            return super().load_expression(u, buffer, index, gate)
        if is_vector(u.dtype):
            read = f"*(const {self.type_name(u.dtype)}*)({buffer}+{index})"
            zero = f"({self.type_name(u.dtype)}){{0}}"
        else:
            read = f"{self.use_helper('bfloat16_to_float', u.dtype)}({buffer}[{index}])"
            zero = c_literal(0, u.dtype)
        return read if gate is None else f"{gate} ? {read} : {zero}"

    # ---- values ----
    def cast(self, u: UOp, value: str) -> str:  # always scalar: the linearizer casts vectors lane by lane
        src, dst = u.src[0].dtype, u.dtype
        if src.is_float and dst.is_int:
            helper = FLOAT_TO_INT.get(dst, "float_to_int32")
            expr = f"{self.use_helper(helper, dst)}({_unwrap(value)})"
            return expr if dst in (dtypes.int32, dtypes.int64, dtypes.uint64) else f"({dst.c_name}){expr}"
        if dst.is_half:  # through float32, as PyTorch does, then rounded to 16 bits and back
            is_float = src in (dtypes.float32, dtypes.float16, dtypes.bfloat16)
            as_float = value if is_float else f"(float){_wrap(value)}"
            helper = "round_float16" if dst == dtypes.float16 else "round_bfloat16"
            return f"{self.use_helper(helper, dst)}({_unwrap(as_float)})"
        return super().cast(u, _wrap(value))

    def gep(self, u: UOp, vector: str) -> str:
        return f"{_wrap(vector)}[{u.arg}]"

    def vectorize(self, u: UOp, *lanes: str) -> str:
        return f"({self.type_name(u.dtype)}){{{', '.join(_unwrap(lane) for lane in lanes)}}}"

    def broadcast(self, u: UOp, value: str) -> str:
        return self.splat(u.dtype, _unwrap(value))

    def splat(self, dtype: VectorDType, scalar: str) -> str:
        """A vector with `scalar` in every lane. A bool vector is an intxN mask like an int vector,
        but its broadcast makes -1 of true, so it needs a helper of its own name."""
        kind = "broadcast_mask_" if dtype.scalar == dtypes.bool else "broadcast_"
        return f"{self.use_helper(kind + c_type(dtype), dtype)}({scalar})"

    def use_helper(self, name: str, dtype: DType | VectorDType) -> str:
        if is_vector(dtype):
            self.type_name(dtype)
            if name.startswith(("max_", "where_")) or dtype.scalar == dtypes.bool:
                self.type_name(VectorDType(dtypes.int32, dtype.count))  # the mask type these helpers use
        if name == "float_to_uint64":  # it calls float_to_int64, written out before it
            self.use_helper("float_to_int64", dtypes.int64)
        self.helpers.setdefault(name, _helper(name, dtype))
        return name

    def alu(self, u: UOp, *srcs: str) -> str:
        """The C expression of one ALU UOp, parenthesized."""
        op = u.arg
        src_dtype = u.src[0].dtype if op is not TernaryOps.WHERE else u.src[1].dtype
        if is_vector(src_dtype):
            return self.vector_alu(u, op, list(srcs), src_dtype)
        is_bool, is_float = src_dtype == dtypes.bool, src_dtype.is_float
        double = src_dtype == dtypes.float64  # the C math functions without the f suffix
        if op is FusedOps.MULACC:
            return f"fmaf({', '.join(_unwrap(s) for s in srcs)})"
        if op is UnaryOps.NEG and is_bool:
            return f"(!{srcs[0]})"
        if op in UNARY_FUNCTIONS:  # the core's exp2f(x); for a double, C's exp2(x)
            call = super().alu(u, _unwrap(srcs[0]))
            return call.replace("f(", "(", 1) if double else call
        if op is UnaryOps.RECIP and double:
            return f"(1.0/{srcs[0]})"
        if op is UnaryOps.RECIP and not is_float:
            return f"{self.use_helper('div_' + src_dtype.name, src_dtype)}(1, {_unwrap(srcs[0])})"
        if len(srcs) != 2:  # NEG, RECIP of floats, WHERE: the core's spelling
            return super().alu(u, *srcs)
        a, b = srcs
        if op is BinaryOps.MAX:
            return f"{self.use_helper('max_' + src_dtype.name, src_dtype)}({_unwrap(a)}, {_unwrap(b)})"
        if op in (BinaryOps.DIV, BinaryOps.MOD) and not is_float:
            divisor = u.src[1]
            if divisor.op is UOps.CONST and divisor.arg > 0:  # index math: no guard needed
                return f"({a}{'/' if op is BinaryOps.DIV else '%'}{b})"
            helper = ("div_" if op is BinaryOps.DIV else "mod_") + src_dtype.name
            return f"{self.use_helper(helper, src_dtype)}({_unwrap(a)}, {_unwrap(b)})"
        if op is BinaryOps.MOD:
            return f"{'fmod' if double else 'fmodf'}({_unwrap(a)}, {_unwrap(b)})"
        if op is BinaryOps.CMPLT and u.src[0].op is UOps.CONST and u.src[1].op is not UOps.CONST:
            return f"({b}>{a})"  # `3<gidx0` reads better as `gidx0>3`
        if op is BinaryOps.ADD and not is_float and not is_bool and u.src[1].op is UOps.CONST and \
                INT32_MIN < u.src[1].arg < 0:
            return f"({a}-{-u.src[1].arg})"
        if is_bool and op in BOOL_SYMBOLS:
            return f"({a}{BOOL_SYMBOLS[op]}{b})"
        return super().alu(u, a, b)  # the core's (a+b), (a<b), ...

    def vector_alu(self, u: UOp, op, srcs: list[str], src_dtype: VectorDType) -> str:
        """A vector op: the C operators work lane by lane; MAX, WHERE and MULACC are helpers."""
        helper = {BinaryOps.MAX: "max_", TernaryOps.WHERE: "where_", FusedOps.MULACC: "fma_",
                  UnaryOps.SQRT: "sqrt_"}.get(op)
        if helper is not None:
            name = self.use_helper(helper + c_type(src_dtype), src_dtype)
            return f"{name}({', '.join(_unwrap(s) for s in srcs)})"
        if op is UnaryOps.NEG:
            return f"(-{srcs[0]})"
        if op is UnaryOps.RECIP:
            return f"({self.splat(src_dtype, '1.0f')}/{srcs[0]})"
        return f"({srcs[0]}{BINARY_SYMBOLS[op]}{srcs[1]})"


def _offset_bases(uops: list[UOp]) -> set[tuple[UOp, UOp]]:
    """The (buffer, base) pairs that two or more scalar LOADs and STOREs index as `base` or
    `base ± constant`: the groups whose offsets are written from one base pointer."""
    members: Counter = Counter()
    for u in uops:
        if u.op not in (UOps.LOAD, UOps.STORE):
            continue
        if is_vector(u.src[2].dtype if u.op is UOps.STORE else u.dtype):
            continue
        at = u.src[1]
        members[(u.src[0], at.src[0] if _is_offset(at) else at)] += 1
    return {group for group, count in members.items() if count >= 2}


def _is_offset(index: UOp) -> bool:
    """Whether an index is `base + constant` or `base - constant` (a base that is not a constant)."""
    return index.op is UOps.ALU and index.arg in (BinaryOps.ADD, BinaryOps.SUB) and \
        index.src[1].op is UOps.CONST and index.src[0].op is not UOps.CONST


UNARY_FUNCTIONS = {UnaryOps.EXP2: "exp2f", UnaryOps.LOG2: "log2f", UnaryOps.SIN: "sinf",
                   UnaryOps.COS: "cosf", UnaryOps.SQRT: "sqrtf"}
BINARY_SYMBOLS = {BinaryOps.ADD: "+", BinaryOps.SUB: "-", BinaryOps.MUL: "*", BinaryOps.DIV: "/",
                  BinaryOps.CMPLT: "<", BinaryOps.CMPEQ: "==", BinaryOps.AND: "&", BinaryOps.OR: "|",
                  BinaryOps.XOR: "^"}
BOOL_SYMBOLS = {BinaryOps.ADD: "||", BinaryOps.MUL: "&&"}  # numpy: bool + is or, bool * is and


def render_c(name: str, uops: list[UOp]) -> str:
    """The C source of one kernel: a function `void name(T* data0, const T* data1, ...)`."""
    return CRenderer(name, uops).render()
