"""LLVM IR's types and constants, and the ops that take LLVM more than one instruction.

The LLVM renderer (tinyedu/renderer/llvmir.py) writes most UOps as one instruction looked up in
the tables below. A few ops need several, because LLVM's instruction does something else at the
edges than numpy (and every tinyedu device) does: MAX of floats (NaN and -0.0), integer division
(by zero and INT_MIN / -1, which trap in hardware), float -> int conversion (out of range: poison,
a value LLVM may assume anything about). Each is a recipe here: a list of instructions, the last of
which sets `name`; the helper values are named `name.something`.
"""

from __future__ import annotations

import math
import struct

from tinyedu.core.dtype import DType, dtypes
from tinyedu.core.ops import BinaryOps
from tinyedu.core.uops import FusedOps, VectorDType, is_vector, scalar_of

INT32_MIN = -(2**31)


def llvm_type(dtype: DType | VectorDType) -> str:
    """float32 -> `float`, float64 -> `double`, int32 -> `i32`, uint8 -> `i8`, bool -> `i1`; vectors
    `<4 x float>`. float16 and bfloat16 values are `float`s in registers (their ops compute in float32)."""
    if is_vector(dtype):
        return f"<{dtype.count} x {llvm_type(dtype.scalar)}>"
    if dtype.is_float:
        return "double" if dtype == dtypes.float64 else "float"
    return "i1" if dtype == dtypes.bool else f"i{8 * dtype.itemsize}"


def memory_type(dtype: DType | VectorDType) -> str:
    """How a value is kept in memory: like llvm_type, except a bool is a byte (numpy's bool_), a
    float16 a `half`, and a bfloat16 the `i16` top half of a float32."""
    return {dtypes.bool: "i8", dtypes.float16: "half", dtypes.bfloat16: "i16"}.get(dtype, None) or \
        llvm_type(dtype)


def llvm_literal(value: float | int | bool, dtype: DType) -> str:
    """A constant of `dtype`: `1.5`, `-0.0`, `0x7FF0000000000000` (inf), `-7`, `true`."""
    if dtype == dtypes.bool:
        return "true" if value else "false"
    if not dtype.is_float:  # as the signed number with the same bits (uint8 255 is i8 -1)
        bits = 8 * dtype.itemsize
        wrapped = int(value) % (1 << bits)
        return str(wrapped - (1 << bits) if wrapped >= 1 << (bits - 1) else wrapped)
    if not math.isfinite(value):  # LLVM writes a float constant as the hex of the same double
        return "0x" + struct.pack(">d", value).hex().upper()
    text = repr(float(value))
    if "e" in text and "." not in text.split("e")[0]:
        text = text.replace("e", ".0e")
    return text


# --8<-- [start:ops]
# op -> instruction, for float, signed int (int32/int64), unsigned int (uint8) and bool operands
FLOAT_OPS = {BinaryOps.ADD: "fadd", BinaryOps.SUB: "fsub", BinaryOps.MUL: "fmul", BinaryOps.DIV: "fdiv",
             BinaryOps.MOD: "frem", BinaryOps.CMPLT: "fcmp olt", BinaryOps.CMPEQ: "fcmp oeq"}
INT_OPS = {BinaryOps.ADD: "add", BinaryOps.SUB: "sub", BinaryOps.MUL: "mul", BinaryOps.CMPLT: "icmp slt",
           BinaryOps.CMPEQ: "icmp eq"}
UINT_OPS = {**INT_OPS, BinaryOps.CMPLT: "icmp ult"}
BOOL_OPS = {BinaryOps.ADD: "or", BinaryOps.MUL: "and", BinaryOps.MAX: "or", BinaryOps.CMPLT: "icmp ult",
            BinaryOps.CMPEQ: "icmp eq"}
# Math functions are LLVM intrinsics named like the op (`@llvm.exp2.f32`, `@llvm.cos.f32`), which become
# one instruction or a libm call; MULACC is `@llvm.fma`. Bitwise ops are the instruction of their name
# (`and`, `or`, `xor`: bitwise on integers, logical on i1 bools).
MATH_FUNCTIONS = ("EXP2", "LOG2", "SIN", "COS", "SQRT")
BITWISE = ("AND", "OR", "XOR")


def intrinsic_name(op) -> str | None:
    """`exp2` for EXP2, `fma` for MULACC; None for an op that is not an intrinsic."""
    if op is FusedOps.MULACC:
        return "fma"
    return op.name.lower() if op.name in MATH_FUNCTIONS else None
# --8<-- [end:ops]


# --8<-- [start:max]
def float_max(name: str, t: str, a: str, b: str) -> list[str]:
    """The instructions that set `name` to max(a, b) of type `t` (`float` or `<4 x float>`) as
    np.maximum does: a NaN in either wins, and when a == b the result is b (so max(0.0, -0.0) is
    -0.0). `fcmp ogt` is false when either is NaN ("ordered"), `fcmp uno a, a` true only if a is
    NaN; a NaN in b is picked by the select's "else"."""
    mask = t.replace("double", "i1").replace("float", "i1")  # i1, or <4 x i1> for a vector
    return [f"{name}.gt = fcmp ogt {t} {a}, {b}",
            f"{name}.nan = fcmp uno {t} {a}, {a}",
            f"{name}.pick = or {mask} {name}.gt, {name}.nan",
            f"{name} = select {mask} {name}.pick, {t} {a}, {t} {b}"]
# --8<-- [end:max]


def signed(dtype: DType) -> bool:
    """int32 and int64 are signed; uint8 and bool are not."""
    return dtype.name.startswith("int")


def intrinsic_suffix(dtype: DType | VectorDType) -> str:
    """The type suffix of an intrinsic: `f32`, `v4f32`."""
    lane = scalar_of(dtype)
    base = ("f64" if lane == dtypes.float64 else "f32") if lane.is_float else f"i{8 * lane.itemsize}"
    return f"v{dtype.count}{base}" if is_vector(dtype) else base


# --8<-- [start:divide]
def int_divide(name: str, op, lane: DType, t: str, a: str, b: str,
               by_positive_constant: bool = False) -> list[str]:
    """Integer a / b (or a % b) with tinyedu's rules: x / 0 and x % 0 are 0, and INT_MIN / -1 (which
    traps in hardware) is -INT_MIN, wrapped: INT_MIN. Index math divides by positive constants,
    which need no guard. An exercise of chapter 07 plugs in here (as `llvmir.int_divide`, the name
    the renderer calls)."""
    is_signed = signed(lane)
    instruction = ("sdiv" if op is BinaryOps.DIV else "srem") if is_signed else \
        ("udiv" if op is BinaryOps.DIV else "urem")
    if by_positive_constant:
        return [f"{name} = {instruction} {t} {a}, {b}"]
    lines = [f"{name}.zero = icmp eq {t} {b}, 0"]
    bad = f"{name}.zero"
    if is_signed:
        lines += [f"{name}.minus1 = icmp eq {t} {b}, -1", f"{name}.bad = or i1 {name}.zero, {name}.minus1"]
        bad = f"{name}.bad"
    lines += [f"{name}.safe = select i1 {bad}, {t} 1, {t} {b}",  # never divide by 0 or -1
              f"{name}.q = {instruction} {t} {a}, {name}.safe"]
    if op is BinaryOps.MOD or not is_signed:  # x % 0, x % -1 are 0; unsigned: only x / 0 is special
        return lines + [f"{name} = select i1 {bad}, {t} 0, {t} {name}.q"]
    return lines + [f"{name}.neg = sub {t} 0, {a}",
                    f"{name}.q1 = select i1 {name}.minus1, {t} {name}.neg, {t} {name}.q",
                    f"{name} = select i1 {name}.zero, {t} 0, {t} {name}.q1"]
# --8<-- [end:divide]

# --8<-- [start:cast]
def cast_instructions(name: str, src: DType, dst: DType, value: str) -> list[str]:
    """`name` = value converted from src to dst, with numpy's (and the C device's) answers where C's
    conversion is undefined (tinyedu.core.dtype.float_to_int): a float that does not fit int32 (or NaN,
    inf) becomes INT32_MIN on its way to int32 and narrower ints, INT64_MIN on its way to int64 and
    uint32; uint64 from 2^63 on converts x - 2^63 and sets the top bit again."""
    x = f"{llvm_type(src)} {value}"
    if src.is_float and dst == dtypes.bool:
        return [f"{name} = fcmp une {x}, 0.0"]  # NaN is true, as in C and numpy
    if src.is_float and dst.is_int:
        return float_to_int(name, src, dst, value)
    if dst.is_half:  # through float32 (as PyTorch does), then rounded to 16 bits, kept in a float
        lines = [] if llvm_type(src) == "float" and src.is_float else \
            cast_instructions(f"{name}.f32", src, dtypes.float32, value)
        single = value if not lines else f"{name}.f32"
        return lines + round_half(name, dst, single)
    if dst.is_float:
        if src.is_float:  # float <-> double (a half is a float already)
            kind = "fpext" if dst == dtypes.float64 else "fptrunc"
            return [f"{name} = {kind} {x} to {llvm_type(dst)}"]
        return [f"{name} = {'sitofp' if signed(src) else 'uitofp'} {x} to {llvm_type(dst)}"]
    if dst == dtypes.bool:
        return [f"{name} = icmp ne {x}, 0"]
    if dst.itemsize < src.itemsize:
        return [f"{name} = trunc {x} to {llvm_type(dst)}"]
    return [f"{name} = {'sext' if signed(src) else 'zext'} {x} to {llvm_type(dst)}"]


def _to_int_or_min(name: str, x: str, bits: int) -> list[str]:
    """`name` (i`bits`) = x truncated if it fits in a signed `bits` int, else INT_MIN (x86-64's answer)."""
    low, high = ("0xC1E0000000000000", "0x41E0000000000000") if bits == 32 else \
        ("0xC3E0000000000000", "0x43E0000000000000")  # -2^31, 2^31 / -2^63, 2^63 (as double hex)
    return [f"{name}.low = fcmp oge {x}, {low}", f"{name}.high = fcmp olt {x}, {high}",
            f"{name}.fits = and i1 {name}.low, {name}.high",
            f"{name}.int = fptosi {x} to i{bits}",  # poison when it does not fit: the select avoids it
            f"{name} = select i1 {name}.fits, i{bits} {name}.int, i{bits} {-(2 ** (bits - 1))}"]


def float_to_int(name: str, src: DType, dst: DType, value: str) -> list[str]:
    t, x = llvm_type(src), f"{llvm_type(src)} {value}"
    if dst == dtypes.uint64:
        return [*_to_int_or_min(f"{name}.lo", x, 64),
                f"{name}.shifted = fsub {t} {value}, 0x43E0000000000000",
                *_to_int_or_min(f"{name}.hi", f"{t} {name}.shifted", 64),
                f"{name}.top = xor i64 {name}.hi, {-(2 ** 63)}",
                f"{name}.big = fcmp oge {x}, 0x43E0000000000000",
                f"{name} = select i1 {name}.big, i64 {name}.top, i64 {name}.lo"]
    bits = 64 if dst in (dtypes.int64, dtypes.uint32) else 32
    if 8 * dst.itemsize == bits:
        return _to_int_or_min(name, x, bits)
    narrow = f"{name} = trunc i{bits} {name}.wide to {llvm_type(dst)}"
    return _to_int_or_min(f"{name}.wide", x, bits) + [narrow]


def round_half(name: str, dst: DType, value: str) -> list[str]:
    """A float rounded to the nearest float16 (fptrunc, then back) or bfloat16 (ties to even on the
    bits, as tinyedu.core.dtype.round_to_bfloat16; NaN becomes PyTorch's NaN), still a float."""
    if dst == dtypes.float16:
        return [f"{name}.half = fptrunc float {value} to half", f"{name} = fpext half {name}.half to float"]
    return [f"{name}.bits = bitcast float {value} to i32", f"{name}.top = lshr i32 {name}.bits, 16",
            f"{name}.odd = and i32 {name}.top, 1", f"{name}.up = add i32 {name}.bits, 32767",
            f"{name}.up2 = add i32 {name}.up, {name}.odd", f"{name}.cut = and i32 {name}.up2, -65536",
            f"{name}.nan = fcmp uno float {value}, 0.0",
            f"{name}.r = select i1 {name}.nan, i32 2143289344, i32 {name}.cut",
            f"{name} = bitcast i32 {name}.r to float"]
# --8<-- [end:cast]
