"""The NEON renderer: UOps -> C with ARM NEON intrinsics for the vector UOps.

The scalar part of a kernel is exactly the C renderer's (tinyedu/renderer/cstyle.py): same names,
same helpers, same semantics. Only vectors change. The C renderer writes vectors with the GCC/Clang
vector extensions (`a + b` on `floatx4`) and lets the compiler pick instructions; here every vector
operation is the intrinsic of one AArch64 instruction, from `<arm_neon.h>`, so the source says which
instruction runs:

| vector UOp            | float32x4_t (int32x4_t)               | instruction         |
| --------------------- | ------------------------------------- | ------------------- |
| LOAD / STORE          | `vld1q_f32(p)` / `vst1q_f32(p, v)`    | ldr q / str q       |
| BROADCAST             | `vdupq_n_f32(x)`                      | dup                 |
| GEP (one lane)        | `vgetq_lane_f32(v, 2)`                | mov s, v.s[2]       |
| ADD SUB MUL DIV       | `vaddq_f32` `vsubq_f32` `vmulq_f32` `vdivq_f32` | fadd fsub fmul fdiv |
| MULACC(a, b, c)       | `vfmaq_f32(c, a, b)` (c + a*b, one rounding) | fmla         |
| CMPLT / CMPEQ         | `vcltq_f32` / `vceqq_f32`: a uint32x4_t mask | fcmgt / fcmeq |
| AND OR XOR (int32)    | `vandq_s32` `vorrq_s32` `veorq_s32`   | and orr eor         |
| WHERE(m, a, b)        | `vbslq_f32(m, a, b)` (bit select)     | bsl                 |
| sum of the 4 lanes    | `vaddvq_f32(v)`: ((v0+v1) + (v2+v3))   | faddp, faddp        |

Names: the `q` marks a 128-bit register (4 lanes of 32 bits); without it the same intrinsic works on
a 64-bit register (2 lanes: `float32x2_t`, `vadd_f32`). A q-register holds 4 float32, so the NEON
device tells the optimizer its vector width is 4: no vector is wider (a wider UPCAST is written out
lane by lane by the linearizer, see `Linearizer._vector_axis`).

Two places where the obvious instruction would break "every device agrees with NUMPY":
- `vmaxq_f32` (fmax) gives +0.0 for max(0.0, -0.0) where np.maximum gives -0.0 (the second one when
  equal), so MAX is a bit select like the C renderer's: `a > b or a is NaN ? a : b`, lane by lane.
- the sum of the lanes at the end of a reduce is written by the linearizer as ((v0+v1) + (v2+v3)),
  which is exactly what `faddp` computes, so that tree becomes `vaddvq_f32(v)` (no change in rounding).
"""

from __future__ import annotations

from tinyedu.core.dtype import DType, dtypes
from tinyedu.core.ops import BinaryOps, TernaryOps, UnaryOps
from tinyedu.core.uops import FusedOps, UOp, UOps, VectorDType, is_vector
from tinyedu.renderer.cstyle import CRenderer, _unwrap, _wrap, c_literal, c_type

NEON_LANES = 4  # float32 lanes in one 128-bit q-register


# --8<-- [start:types]
def neon_type(dtype: VectorDType) -> str:
    """`float32x4_t`, `int32x2_t`; a bool vector is a mask: `uint32x4_t` (all bits set where true)."""
    lane = {dtypes.float32: "float32", dtypes.int32: "int32", dtypes.bool: "uint32"}.get(dtype.scalar)
    if lane is None or dtype.count not in (2, 4):
        raise NotImplementedError(f"NEON renderer: no NEON register holds {dtype.count} lanes of "
                                  f"{dtype.scalar.name}; NEON vectors are 2 or 4 lanes of float32/int32 "
                                  f"(linearize with max_vector={NEON_LANES}, the NEON device's vector_width)")
    return f"{lane}x{dtype.count}_t"


def intrinsic(name: str, dtype: VectorDType) -> str:
    """The intrinsic `name` for this vector type: intrinsic('add', float32x4) is `vaddq_f32`."""
    neon_type(dtype)  # checks that the type exists
    suffix = {dtypes.float32: "f32", dtypes.int32: "s32", dtypes.bool: "u32"}[dtype.scalar]
    q = "q" if dtype.count == 4 else ""
    if name in ("dup_n", "get_lane"):  # vdupq_n_f32, vgetq_lane_f32: the q goes in the middle
        first, rest = name.split("_")
        return f"v{first}{q}_{rest}_{suffix}"
    return f"v{name}{q}_{suffix}"
# --8<-- [end:types]


# --8<-- [start:ops]
# vector ALU op -> the intrinsic's name (float32 lanes; int32 lanes where the op exists for them)
NEON_BINARY = {BinaryOps.ADD: "add", BinaryOps.SUB: "sub", BinaryOps.MUL: "mul", BinaryOps.DIV: "div",
               BinaryOps.CMPLT: "clt", BinaryOps.CMPEQ: "ceq"}
NEON_BITWISE = {BinaryOps.AND: "and", BinaryOps.OR: "orr", BinaryOps.XOR: "eor"}  # integer lanes only
NEON_UNARY = {UnaryOps.NEG: "neg", UnaryOps.SQRT: "sqrt"}


def vector_op(op, dtype: VectorDType, args: list[str]) -> str:
    """The NEON intrinsic call for one vector ALU op on `args` (the operands, as C expressions).

    `dtype` is the operands' vector type (for WHERE: the type of the values picked from). An
    exercise of chapter 07 plugs into this function.
    """
    if op is FusedOps.MULACC:  # MULACC(a, b, c) = a*b + c; vfmaq_f32(c, a, b) computes c + a*b
        return f"{intrinsic('fma', dtype)}({args[2]}, {args[0]}, {args[1]})"
    if op is TernaryOps.WHERE:  # bit select: the mask's set bits take a, the others b
        return f"{intrinsic('bsl', dtype)}({', '.join(args)})"
    if op is BinaryOps.MAX:
        if dtype.scalar == dtypes.int32:
            return f"{intrinsic('max', dtype)}({args[0]}, {args[1]})"
        return f"{max_helper(dtype)[0]}({args[0]}, {args[1]})"
    if op is UnaryOps.RECIP:  # exactly 1/x (vrecpeq_f32 is an 8-bit estimate)
        return f"{intrinsic('div', dtype)}({intrinsic('dup_n', dtype)}(1.0f), {args[0]})"
    name = NEON_UNARY.get(op) or NEON_BINARY.get(op)
    if dtype.scalar == dtypes.int32:  # the bit operations exist for integer lanes only
        name = name or NEON_BITWISE.get(op)
    if name is None:
        raise NotImplementedError(f"NEON renderer: no intrinsic for vector {op.name} on {dtype.name}")
    return f"{intrinsic(name, dtype)}({', '.join(args)})"


def max_helper(dtype: VectorDType) -> tuple[str, str]:
    """MAX of float vectors as np.maximum does it: a where a > b or a is NaN, else b (so max(0, -0) is
    -0, the second), lane by lane. fmax would give +0 there."""
    t, name = neon_type(dtype), f"max_{neon_type(dtype)[:-2]}"
    mask = VectorDType(dtypes.bool, dtype.count)
    greater, equal = intrinsic("cgt", dtype), intrinsic("ceq", dtype)
    either, invert, select = intrinsic("orr", mask), intrinsic("mvn", mask), intrinsic("bsl", dtype)
    body = f"return {select}({either}({greater}(a, b), {invert}({equal}(a, a))), a, b);"
    return name, f"static inline {t} {name}({t} a, {t} b) {{ {body} }}  /* NaN wins; when equal, b */"
# --8<-- [end:ops]


class NEONRenderer(CRenderer):
    """The C renderer with its vector methods written as NEON intrinsics: `NEONRenderer(name, uops).render()`.

    The source ends with an entry point `name_entry(void** args)` that calls the kernel with its
    buffers taken from one array: the qemu harness (tinyedu/runtime/qemu.py) calls every kernel
    that way, whatever its number of buffers.
    """

    backend = "NEON renderer"

    def type_name(self, dtype: DType | VectorDType) -> str:
        return neon_type(dtype) if is_vector(dtype) else c_type(dtype)  # a half value is a float

    def splat(self, dtype: VectorDType, scalar: str) -> str:
        lane = self._mask_lane(scalar) if dtype.scalar == dtypes.bool else scalar
        return f"{intrinsic('dup_n', dtype)}({lane})"

    def load_expression(self, u: UOp, buffer: str, index: str, gate: str | None) -> str:
        """vld1q_f32(data1+i) for a vector (any alignment); gated, it reads zeros where the gate is false."""
        if not is_vector(u.dtype):
            return super().load_expression(u, buffer, index, gate)
        read = f"{intrinsic('ld1', u.dtype)}({buffer}+{_unwrap(index)})"
        if gate is not None:
            return f"{_wrap(gate)} ? {read} : {self.splat(u.dtype, _unwrap(c_literal(0, u.dtype.scalar)))}"
        return read

    def store(self, u: UOp, buffer: str, index: str, value: str) -> None:
        if not is_vector(u.src[2].dtype):
            return super().store(u, buffer, index, value)
        self.emit(f"{intrinsic('st1', u.src[2].dtype)}({buffer}+{_unwrap(index)}, {_unwrap(value)});")

    def gep(self, u: UOp, vector: str) -> str:
        lane = f"{intrinsic('get_lane', u.src[0].dtype)}({_unwrap(vector)}, {u.arg})"
        return f"({lane} != 0)" if u.dtype == dtypes.bool else lane

    def vectorize(self, u: UOp, *lanes: str) -> str:
        is_mask = u.dtype.scalar == dtypes.bool
        values = [self._mask_lane(lane) if is_mask else _unwrap(lane) for lane in lanes]
        return f"({self.type_name(u.dtype)}){{{', '.join(values)}}}"

    def vector_alu(self, u: UOp, op, srcs: list[str], src_dtype: VectorDType) -> str:
        """One NEON intrinsic per vector op (see vector_op); MAX of floats calls a small helper."""
        expr = vector_op(op, src_dtype, [_unwrap(s) for s in srcs])
        if op is BinaryOps.MAX and src_dtype.scalar.is_float:
            name, source = max_helper(src_dtype)
            self.helpers.setdefault(name, source)
        return expr

    def alu(self, u: UOp, *srcs: str) -> str:
        vector = self._horizontal_sum_of(u)
        if vector is not None:  # the pairwise sum of every lane: faddp, in one intrinsic
            return f"{intrinsic('addv', vector.dtype)}({_unwrap(self.value(vector))})"
        return super().alu(u, *srcs)

    @staticmethod
    def _mask_lane(value: str) -> str:
        """A bool as a mask lane: all 32 bits set for true."""
        return f"{_wrap(value)} ? 0xffffffffu : 0u"

    def includes(self) -> list[str]:
        vectors = any(is_vector(u.dtype) for u in self.uops if u.dtype is not None)
        return super().includes() + (["#include <arm_neon.h>"] if vectors else [])

    def finish(self) -> str:
        call = ", ".join(f"args[{n}]" for n in range(len(self.params)))
        return super().finish() + (
            "/* the qemu harness calls every kernel the same way: its buffers as one array */\n"
            f"void {self.function_name}_entry(void** args) {{ {self.function_name}({call}); }}\n")

    # --8<-- [start:horizontal]
    def _horizontal_sum_of(self, u: UOp) -> UOp | None:
        """The vector v if u is ((v[0] + v[1]) + (v[2] + v[3])) (or v[0] + v[1] for 2 lanes), else None."""
        if u.arg is not BinaryOps.ADD or u.dtype not in (dtypes.float32, dtypes.int32):
            return None
        lanes = _pairwise_lanes(u)
        if lanes is None:
            return None
        vector = lanes[0].src[0]
        if is_vector(vector.dtype) and vector.dtype.count == len(lanes) and \
                all(g.src[0] is vector and g.arg == n for n, g in enumerate(lanes)):
            return vector
        return None


def _pairwise_lanes(u: UOp, levels: int = 2) -> list[UOp] | None:
    """The GEPs summed by u, left to right, if u is a balanced tree of ADDs over GEPs at most `levels`
    deep (4 lanes: 2 levels), else None. (Bounded: a long chain of ADDs is not looked into.)"""
    if u.op is UOps.GEP:
        return [u]
    if u.op is not UOps.ALU or u.arg is not BinaryOps.ADD or levels == 0:
        return None
    left, right = (_pairwise_lanes(s, levels - 1) for s in u.src)
    if left is None or right is None or len(left) != len(right):
        return None
    return left + right


# --8<-- [end:horizontal]


def render_neon(name: str, uops: list[UOp]) -> str:
    """The NEON C source of one kernel: `void name(T* data0, ...)` plus `name_entry(void** args)`."""
    return NEONRenderer(name, uops).render()
