"""The C renderer: UOps to one C function, `void name(float* data0, const float* data1, ...)`.

Every UOp becomes one line or one expression, in list order (renderer.py walks the list):

    RANGE     for (int gidx0 = 0; gidx0 < 4; gidx0++) {      ENDRANGE   }
    LOAD      float val0 = data1[alu2];      (gated: float val0 = alu3 ? data1[alu2] : 0.0f;)
    ALU       float alu4 = (val0+val1);
    STORE     data0[alu2] = alu4;

A value gets a variable of its own (`declare`), so the C reads like the UOp listing, one line per
UOp. The spellings are a table (`C_OPS`): a language is data.

The full library's C renderer (tinyedu/renderer/cstyle.py) is a subclass of this one. It keeps the
loops, the loads, the declarations, the function's signature and the table's spelling of every op
they write alike, and overrides the rest: vectors, a value used once written inline, helper
functions for the ops whose C differs from numpy (MAX with NaN, integer division by 0), and every
dtype beyond float32, int32 and bool. Its NEON, OpenCL, CUDA, WGSL and WASM renderers build on it.
"""

from __future__ import annotations

import math

import numpy as np

from .dtype import DType, dtypes
from .ops import BinaryOps, TernaryOps, UnaryOps
from .renderer import Renderer
from .uops import UOp, UOps

# --8<-- [start:table]
C_OPS = {
    UnaryOps.NEG: "(-{0})", UnaryOps.RECIP: "(1.0f/{0})", UnaryOps.SQRT: "sqrtf({0})",
    UnaryOps.EXP2: "exp2f({0})", UnaryOps.LOG2: "log2f({0})",
    UnaryOps.SIN: "sinf({0})", UnaryOps.COS: "cosf({0})",
    BinaryOps.ADD: "({0}+{1})", BinaryOps.SUB: "({0}-{1})", BinaryOps.MUL: "({0}*{1})",
    BinaryOps.DIV: "({0}/{1})",
    BinaryOps.MOD: "({0}%{1})", BinaryOps.CMPLT: "({0}<{1})", BinaryOps.CMPEQ: "({0}=={1})",
    BinaryOps.AND: "({0}&{1})", BinaryOps.OR: "({0}|{1})", BinaryOps.XOR: "({0}^{1})",
    BinaryOps.MAX: "(({0}>{1}||{0}!={0})?{0}:{1})",  # NaN wins, as in PyTorch (fmaxf would drop it)
    TernaryOps.WHERE: "({0}?{1}:{2})",
}
# --8<-- [end:table]


def c_literal(value: float | int | bool, dtype: DType) -> str:
    """A C literal; a negative one in parentheses, so that `x - -1.0f` never reads as `x--`."""
    if dtype == dtypes.bool:
        return "1" if value else "0"
    if not dtype.is_float:
        text = str(int(value))
    elif math.isnan(value):
        text = "NAN"
    elif math.isinf(value):
        text = "-INFINITY" if value < 0 else "INFINITY"
    elif dtype != dtypes.float32:
        text = repr(float(value))
    else:
        text = str(np.float32(value))  # the shortest decimal that reads back as this float32
        text = f"{text if any(c in text for c in '.e') else text + '.0'}f"
    return f"({text})" if text.startswith("-") else text


class CRenderer(Renderer):
    """One UOp list to one C function. The full library's C renderer (tinyedu/renderer/cstyle.py)
    is a subclass: it keeps the walk, the loops, the loads, the declarations and the function's
    signature below, and replaces what it writes differently (vectors, values inlined, every dtype)."""

    backend = "C renderer"

    def __init__(self, name: str, uops: list[UOp]):
        super().__init__(name, uops)
        self.params: list[str] = []  # the function's arguments, one per DEFINE_GLOBAL
        self.indent = 1              # the loop depth: a line is indented by it

    def emit(self, line: str) -> None:
        self.lines.append("  " * self.indent + line)

    def type_name(self, dtype: DType) -> str:
        return dtype.c_name

    def literal(self, value: float | int | bool, dtype: DType) -> str:
        """A constant as C (the full library spells more dtypes)."""
        return c_literal(value, dtype)

    def declare(self, prefix: str, dtype: DType, value: str) -> str:
        """`float alu0 = (val0+val1);`: a new variable holding a value; its name."""
        name = self.new_name(prefix)
        self.emit(f"{self.type_name(dtype)} {name} = {value};")
        return name

    # --8<-- [start:fill]
    def bind(self, u: UOp, expression: str) -> str:
        return self.declare("cast" if u.op is UOps.CAST else "alu", u.dtype, expression)

    def define_global(self, u: UOp) -> str:
        self.params.append(f"{'' if u.arg == 0 else 'const '}{u.dtype.c_name}* restrict data{u.arg}")
        return f"data{u.arg}"

    def const(self, u: UOp) -> str:
        return self.literal(u.arg, u.dtype)

    def open_loop(self, u: UOp, start: str, end: str) -> str:
        name = u.arg.name
        self.emit(f"for ({self.type_name(u.dtype)} {name} = {start}; {name} < {end}; {name}++) {{")
        self.indent += 1
        return name

    def close_loop(self, u: UOp, loop: str) -> None:
        self.indent -= 1
        self.emit("}")

    def define_acc(self, u: UOp) -> str:
        return self.declare("acc", u.dtype, self.literal(u.arg, u.dtype))

    def assign(self, u: UOp, acc: str, value: str) -> str:
        self.emit(f"{acc} = {value};")
        return acc

    def load(self, u: UOp, buffer: str, index: str, gate: str | None = None) -> str:
        return self.declare("val", u.dtype, self.load_expression(u, buffer, index, gate))

    def load_expression(self, u: UOp, buffer: str, index: str, gate: str | None) -> str:
        """buffer[index]; gated, 0 where the gate is false: C evaluates only the branch it takes, so a
        padded read computes its index but never touches memory with it."""
        read = f"{buffer}[{index}]"
        return read if gate is None else f"{gate} ? {read} : {self.literal(0, u.dtype)}"

    def store(self, u: UOp, buffer: str, index: str, value: str) -> None:
        self.emit(f"{buffer}[{index}] = {value};")

    def alu(self, u: UOp, *operands: str) -> str:
        return C_OPS[u.arg].format(*operands)

    def cast(self, u: UOp, value: str) -> str:
        return f"({self.type_name(u.dtype)}){value}"  # value is a name or a literal: no parentheses needed
    # --8<-- [end:fill]

    def includes(self) -> list[str]:
        return ["#include <math.h>", "#include <stdbool.h>"]

    def declarations(self) -> list[str]:
        """What the source declares before the function (the full library: vector types, helpers)."""
        return []

    def finish(self) -> str:
        signature = f"void {self.function_name}({', '.join(self.params)}) {{"
        return "\n".join([*self.includes(), *self.declarations(), signature, *self.lines, "}"]) + "\n"
