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

from tinyedu.codegen.uops import FusedOps, VectorDType, is_vector, scalar_of
from tinyedu.dtype import DType, dtypes
from tinyedu.ops import BinaryOps

INT32_MIN = -(2**31)


# --8<-- [start:types]
def llvm_type(dtype: DType | VectorDType) -> str:
    """float32 -> `float`, int32 -> `i32`, uint8 -> `i8`, bool -> `i1`; vectors `<4 x float>`."""
    if is_vector(dtype):
        return f"<{dtype.count} x {llvm_type(dtype.scalar)}>"
    if dtype.is_float:
        return "float"
    return "i1" if dtype == dtypes.bool else f"i{8 * dtype.itemsize}"


def memory_type(dtype: DType | VectorDType) -> str:
    """How a value is kept in memory: like llvm_type, except a bool is a byte (numpy's bool_)."""
    return "i8" if dtype == dtypes.bool else llvm_type(dtype)


def llvm_literal(value: float | int | bool, dtype: DType) -> str:
    """A constant of `dtype`: `1.5`, `-0.0`, `0x7FF0000000000000` (inf), `-7`, `true`."""
    if dtype == dtypes.bool:
        return "true" if value else "false"
    if not dtype.is_float:
        return str(int(value))
    if not math.isfinite(value):  # LLVM writes a float constant as the hex of the same double
        return "0x" + struct.pack(">d", value).hex().upper()
    text = repr(float(value))
    if "e" in text and "." not in text.split("e")[0]:
        text = text.replace("e", ".0e")
    return text
# --8<-- [end:types]


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
    mask = t.replace("float", "i1")  # i1, or <4 x i1> for a vector
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
    base = "f32" if scalar_of(dtype).is_float else f"i{8 * scalar_of(dtype).itemsize}"
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
    conversion is undefined: a float that does not fit int32 (or NaN, inf) becomes INT32_MIN."""
    x = f"{llvm_type(src)} {value}"
    if src.is_float and dst == dtypes.bool:
        return [f"{name} = fcmp une {x}, 0.0"]  # NaN is true, as in C and numpy
    if src.is_float:  # float -> int32 (uint8: through int32)
        int32 = name if dst == dtypes.int32 else f"{name}.int32"
        lines = [f"{name}.low = fcmp oge {x}, -2147483648.0",
                 f"{name}.high = fcmp olt {x}, 2147483648.0",
                 f"{name}.fits = and i1 {name}.low, {name}.high",
                 f"{name}.int = fptosi {x} to i32",  # poison when it does not fit: the select avoids it
                 f"{int32} = select i1 {name}.fits, i32 {name}.int, i32 {INT32_MIN}"]
        return lines if dst == dtypes.int32 else lines + [f"{name} = trunc i32 {int32} to {llvm_type(dst)}"]
    if dst.is_float:
        return [f"{name} = {'sitofp' if signed(src) else 'uitofp'} {x} to float"]
    if dst == dtypes.bool:
        return [f"{name} = icmp ne {x}, 0"]
    if dst.itemsize < src.itemsize:
        return [f"{name} = trunc {x} to {llvm_type(dst)}"]
    return [f"{name} = {'sext' if signed(src) else 'zext'} {x} to {llvm_type(dst)}"]
# --8<-- [end:cast]
