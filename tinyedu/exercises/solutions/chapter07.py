"""Chapter 07 (the NEON and LLVM backends): reference solutions, and typical mistakes with their hints."""

from __future__ import annotations

from tinyedu.core.dtype import DType, dtypes
from tinyedu.core.ops import BinaryOps, TernaryOps, UnaryOps
from tinyedu.core.uops import FusedOps, VectorDType
from tinyedu.exercises.registry import Mistake
from tinyedu.renderer.llvm_ops import int_divide as library_int_divide
from tinyedu.renderer.llvm_ops import signed
from tinyedu.renderer.neon import vector_op as library_vector_op

GIVEN = (BinaryOps.MAX, UnaryOps.RECIP, UnaryOps.SQRT)  # the notebook's stub does these already
NAMES = {BinaryOps.ADD: "add", BinaryOps.SUB: "sub", BinaryOps.MUL: "mul", BinaryOps.DIV: "div",
         UnaryOps.NEG: "neg", BinaryOps.CMPLT: "clt", BinaryOps.CMPEQ: "ceq",
         BinaryOps.AND: "and", BinaryOps.OR: "orr", BinaryOps.XOR: "eor"}  # the last three: int32 only


# --8<-- [start:vector_op]
def vector_op(op, dtype: VectorDType, args: list[str]) -> str:
    if op in GIVEN:
        return library_vector_op(op, dtype, args)  # given in the notebook
    q = "q" if dtype.count == 4 else ""  # a 128-bit q register holds 4 lanes; 2 lanes: a 64-bit one
    lanes = {dtypes.float32: "f32", dtypes.int32: "s32"}[dtype.scalar]

    def call(name: str, *operands: str) -> str:
        return f"v{name}{q}_{lanes}({', '.join(operands)})"

    if op is FusedOps.MULACC:  # a*b + c; vfmaq_f32(c, a, b) computes c + a*b
        a, b, c = args
        return call("fma", c, a, b)
    if op is TernaryOps.WHERE:  # the mask first: vbslq_f32(mask, a, b)
        return call("bsl", *args)
    return call(NAMES[op], *args)
# --8<-- [end:vector_op]


# --8<-- [start:int_divide]
def int_divide(name: str, op, lane: DType, t: str, a: str, b: str, by_positive_constant: bool = False) \
        -> list[str]:
    if by_positive_constant or not signed(lane):
        return library_int_divide(name, op, lane, t, a, b, by_positive_constant)  # given in the notebook
    divide = "sdiv" if op is BinaryOps.DIV else "srem"
    lines = [f"{name}.zero = icmp eq {t} {b}, 0",
             f"{name}.minus1 = icmp eq {t} {b}, -1",
             f"{name}.bad = or i1 {name}.zero, {name}.minus1",
             f"{name}.safe = select i1 {name}.bad, {t} 1, {t} {b}",  # never divide by 0 or -1
             f"{name}.q = {divide} {t} {a}, {name}.safe"]
    if op is BinaryOps.MOD:  # x % 0 and x % -1 are 0
        return lines + [f"{name} = select i1 {name}.bad, {t} 0, {t} {name}.q"]
    return lines + [f"{name}.neg = sub {t} 0, {a}",  # x / -1 is -x (INT_MIN wraps to INT_MIN)
                    f"{name}.q1 = select i1 {name}.minus1, {t} {name}.neg, {t} {name}.q",
                    f"{name} = select i1 {name}.zero, {t} 0, {t} {name}.q1"]
# --8<-- [end:int_divide]


# --8<-- [start:phi_answer]
# %acc0.ridx0 is 0.0 when control first enters ridx0.loop (from gidx0.body), then after each of the
# 4 iterations it comes back from ridx0.body with the sum so far: 1, 3, 6, 10. The fifth time the
# test fails and 10 is what the store after the loop reads.
phi_answer = {"values": [0.0, 1.0, 3.0, 6.0, 10.0], "comes_back_from": "ridx0.body"}
# --8<-- [end:phi_answer]


# ---- typical mistakes -------------------------------------------------------------------------------
def _vector_op_with(fma_order=False, always_q=False, float_names=False, mask_last=False, greater=False,
                    or_name=False):
    def wrong(op, dtype, args):
        if op in (BinaryOps.MAX, UnaryOps.RECIP, UnaryOps.SQRT):
            return library_vector_op(op, dtype, args)
        q = "q" if dtype.count == 4 or always_q else ""
        lanes = "f32" if float_names else {dtypes.float32: "f32", dtypes.int32: "s32"}[dtype.scalar]
        if op is FusedOps.MULACC:
            a, b, c = args
            return f"vfma{q}_{lanes}({', '.join((a, b, c) if fma_order else (c, a, b))})"
        if op is TernaryOps.WHERE:
            mask, a, b = args
            return f"vbsl{q}_{lanes}({', '.join((a, b, mask) if mask_last else (mask, a, b))})"
        name = NAMES[op]
        if greater and op is BinaryOps.CMPLT:
            name = "cgt"
        if or_name and op is BinaryOps.OR:
            name = "or"
        return f"v{name}{q}_{lanes}({', '.join(args)})"
    return wrong


def _divide_with(guard_zero=True, guard_minus1=True, safe_divisor=True, negate=True):
    def wrong(name, op, lane, t, a, b, by_positive_constant=False):
        if not signed(lane) or by_positive_constant:
            return library_int_divide(name, op, lane, t, a, b, by_positive_constant)
        divide = "sdiv" if op is BinaryOps.DIV else "srem"
        if not guard_zero:
            return [f"{name} = {divide} {t} {a}, {b}"]
        lines = [f"{name}.zero = icmp eq {t} {b}, 0", f"{name}.minus1 = icmp eq {t} {b}, -1"]
        bad = f"{name}.zero"
        if guard_minus1:
            lines.append(f"{name}.bad = or i1 {name}.zero, {name}.minus1")
            bad = f"{name}.bad"
        divisor = f"{name}.safe" if safe_divisor else b
        lines += [f"{name}.safe = select i1 {bad}, {t} 1, {t} {b}", f"{name}.q = {divide} {t} {a}, {divisor}"]
        if op is BinaryOps.MOD:
            return lines + [f"{name} = select i1 {bad}, {t} 0, {t} {name}.q"]
        result = f"{name}.neg" if negate else a
        return lines + [f"{name}.neg = sub {t} 0, {a}",
                        f"{name}.q1 = select i1 {name}.minus1, {t} {result}, {t} {name}.q",
                        f"{name} = select i1 {name}.zero, {t} 0, {t} {name}.q1"]
    return wrong


def _divide_as_i32(name, op, lane, t, a, b, by_positive_constant=False):
    """The reference recipe with the type written as i32 instead of `t`: right for int32 only."""
    lines = int_divide(name, op, lane, t, a, b, by_positive_constant)
    return [line.replace(f" {t} ", " i32 ") for line in lines]


MISTAKES = [
    Mistake("07.neon_vector_op", _vector_op_with(fma_order=True), "the accumulator c goes first",
            "MULACC's operands in its own order"),
    Mistake("07.neon_vector_op", _vector_op_with(always_q=True), "a 64-bit register (2 lanes)",
            "vaddq_f32 on float32x2_t"),
    Mistake("07.neon_vector_op", _vector_op_with(float_names=True), "take the _s32 intrinsics",
            "vaddq_f32 on int32x4_t"),
    Mistake("07.neon_vector_op", _vector_op_with(mask_last=True), "the mask comes first",
            "vbslq_f32(a, b, mask)"),
    Mistake("07.neon_vector_op", _vector_op_with(greater=True), "CMPLT(a, b) is a < b",
            "vcgtq_f32 for CMPLT"),
    Mistake("07.neon_vector_op", _vector_op_with(or_name=True), "named after their instructions",
            "vorq_s32 for OR (the instruction is orr)"),
    Mistake("07.neon_vector_op", "vaddq_f32", "expected a function", "a string instead of a function"),
    Mistake("07.llvm_int_divide", _divide_with(guard_zero=False), "died with SIGFPE",
            "a plain sdiv: traps on x / 0"),
    Mistake("07.llvm_int_divide", _divide_with(guard_minus1=False), "died with SIGFPE",
            "guards 0 but not INT_MIN / -1"),
    Mistake("07.llvm_int_divide", _divide_with(safe_divisor=False), "A select after the division is too late",
            "divides by b itself, then selects"),
    Mistake("07.llvm_int_divide", _divide_with(negate=False), "x / -1 is -x", "x / -1 gives x"),
    Mistake("07.llvm_int_divide", lambda name, op, lane, t, a, b, by_positive_constant=False:
            [f"{name} = sdiv {a}, {b}"], "LLVM rejects the IR", "no type on the instruction"),
    Mistake("07.llvm_int_divide", _divide_as_i32, "LLVM rejects the IR", "i32 written where `t` belongs"),
    Mistake("07.phi", {"values": [1.0, 3.0, 6.0, 10.0], "comes_back_from": "ridx0.body"},
            "the first time coming from gidx0.body", "the partial sums without the initial value"),
    Mistake("07.phi", {"values": [0.0, 1.0, 3.0, 6.0], "comes_back_from": "ridx0.body"},
            "enters ridx0.loop once more", "forgets the last time through the header"),
    Mistake("07.phi", {"values": [0.0, 1.0, 3.0, 6.0, 10.0], "comes_back_from": "gidx0.body"},
            "the block control comes back from", "the block the first value comes from"),
]
