"""The C renderer: UOps to one C function, `void name(float* data0, const float* data1, ...)`.

Every UOp becomes one line or one expression, in list order (renderer.py walks the list):

    RANGE     for (int gidx0 = 0; gidx0 < 4; gidx0++) {      ENDRANGE   }
    LOAD      float val0 = data1[alu2];      (gated: float val0 = (alu3?data1[alu2]:0.0f);)
    ALU       float alu4 = (val0+val1);
    STORE     data0[alu2] = alu4;

A value gets a variable of its own, so the C reads like the UOp listing, one line per UOp. The
spellings are a table (`C_OPS`): a language is data. The full library's C renderer
(tinyedu/renderer/cstyle.py) adds vectors, writing a value used once inline, and the exact rules of
every dtype; its NEON, OpenCL, CUDA, WGSL and WASM renderers build on that one.
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
    backend = "C renderer"

    def type_name(self, dtype: DType) -> str:
        return dtype.c_name

    # --8<-- [start:fill]
    def bind(self, u: UOp, expression: str) -> str:
        name = self.new_name({UOps.LOAD: "val", UOps.CAST: "cast"}.get(u.op, "alu"))
        self.emit(f"{self.type_name(u.dtype)} {name} = {expression};")
        return name

    def define_global(self, u: UOp) -> str:
        return f"data{u.arg}"

    def const(self, u: UOp) -> str:
        return c_literal(u.arg, u.dtype)

    def open_loop(self, u: UOp, start: str, end: str) -> str:
        self.emit(f"for (int {u.arg.name} = {start}; {u.arg.name} < {end}; {u.arg.name}++) {{")
        return u.arg.name

    def close_loop(self, u: UOp, loop: str) -> None:
        self.emit("}")

    def define_acc(self, u: UOp) -> str:
        name = self.new_name("acc")
        self.emit(f"{self.type_name(u.dtype)} {name} = {c_literal(u.arg, u.dtype)};")
        return name

    def assign(self, u: UOp, acc: str, value: str) -> str:
        self.emit(f"{acc} = {value};")
        return acc

    def load(self, u: UOp, buffer: str, index: str, gate: str | None = None) -> str:
        read = f"{buffer}[{index}]"
        return self.bind(u, read if gate is None else f"({gate}?{read}:{c_literal(0, u.dtype)})")

    def store(self, u: UOp, buffer: str, index: str, value: str) -> None:
        self.emit(f"{buffer}[{index}] = {value};")

    def alu(self, u: UOp, *operands: str) -> str:
        return C_OPS[u.arg].format(*operands)

    def cast(self, u: UOp, value: str) -> str:
        return f"({self.type_name(u.dtype)})({value})"
    # --8<-- [end:fill]

    def finish(self) -> str:
        args = ", ".join(f"{'' if u.arg == 0 else 'const '}{self.type_name(u.dtype)}* restrict data{u.arg}"
                         for u in self.uops if u.op is UOps.DEFINE_GLOBAL)
        body, depth = [], 1
        for line in self.lines:  # indented by the loop depth
            depth -= line == "}"
            body.append("  " * depth + line + "\n")
            depth += line.endswith("{")
        header = f"#include <math.h>\n#include <stdbool.h>\nvoid {self.function_name}({args}) {{\n"
        return header + "".join(body) + "}\n"
