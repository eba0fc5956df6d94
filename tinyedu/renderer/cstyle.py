"""UOps -> C source: one function per kernel, one statement per line, names a reader can follow.

    void r_4_16(float* restrict data0, const float* restrict data1) {
      for (int gidx0 = 0; gidx0 < 4; gidx0++) {
        float acc0 = 0.0f;
        for (int ridx0 = 0; ridx0 < 16; ridx0++) {
          float val0 = data1[(gidx0*16)+ridx0];
          acc0 = acc0+val0;
        }
        data0[gidx0] = acc0;
      }
    }

Names: `dataN` buffers, `gidxN`/`ridxN` loop indices, `accN` accumulators, `valN` loaded values,
`aluN`/`castN` computed values. A value used exactly once is written inline where it is used.

C must give exactly what the NUMPY device gives (tinyedu/runtime/ops_numpy.py), and C's defaults
differ in a few places, each handled here or by a compiler flag (see tinyedu/runtime/ops_c.py):
- signed overflow is undefined in C, wraps in numpy: compile with `-fwrapv`;
- `a*b+c` may become one fused multiply-add, rounding once instead of twice: `-ffp-contract=off`;
- integer `x/0` crashes in C and gives 0 here, and INT_MIN/-1 traps: helper functions `div_int32`...;
- `fmaxf` ignores NaN, np.maximum returns it: `max_float32` checks for NaN (x != x only for NaN);
- uint8 arithmetic happens in `int` in C: uint8 results are stored in `unsigned char` variables
  (never inlined), which wraps them like numpy;
- float -> int casts truncate in both, but a value outside int32 (or NaN, inf) is undefined
  behaviour in C: `float_to_int32` spells out tinyedu's rule (INT32_MIN, as x86-64 gives; see
  tinyedu.dtype.cast_array), and float -> uint8 goes through it.
Masked (padded) reads become `valid ? data1[index] : 0.0f`: C evaluates only the branch it takes,
so an out-of-range index is computed but never used to touch memory.
"""

from __future__ import annotations

import math
import struct
from collections import Counter

from tinyedu.codegen.uops import INT32_MIN, UOp, UOps
from tinyedu.dtype import DType, dtypes
from tinyedu.ops import BinaryOps, TernaryOps, UnaryOps


def c_literal(value: float | int | bool, dtype: DType) -> str:
    """A C literal of `dtype` with exactly this value (`2.5f`, `(-3)`, `INFINITY`, `true`)."""
    if dtype == dtypes.bool:
        return "true" if value else "false"
    if dtype.is_float:
        if math.isnan(value):
            return "NAN"
        if math.isinf(value):
            return "INFINITY" if value > 0 else "(-INFINITY)"
        text = _shortest_float32(value) + "f"
        return f"({text})" if text.startswith("-") else text
    if value == INT32_MIN:
        return "(-2147483647-1)"  # 2147483648 alone does not fit in an int
    return f"({value})" if value < 0 else str(value)


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
    # (int)x is undefined when x does not fit; tinyedu defines it as x86-64 does (NaN fails both tests)
    "float_to_int32": "static inline int float_to_int32(float x) { return (x >= -2147483648.0f && "
                      "x < 2147483648.0f) ? (int)x : (-2147483647-1); }",
}
# --8<-- [end:helpers]


def _helper(name: str, dtype: DType) -> str:
    """The source of helper `name` (templated for the plainer types)."""
    if name in HELPERS:
        return HELPERS[name]
    c = dtype.c_name
    if name.startswith("max_"):
        return f"static inline {c} {name}({c} a, {c} b) {{ return a > b ? a : b; }}"
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


class CRenderer:
    """Renders one UOp list. `CRenderer(name, uops).render()` gives the whole source."""

    def __init__(self, name: str, uops: list[UOp]):
        self.function_name, self.uops = name, uops
        self.uses = Counter(s for u in uops for s in u.src)
        self.names: dict[UOp, str] = {}
        self.counters: Counter[str] = Counter()
        self.helpers: dict[str, str] = {}

    def new_name(self, prefix: str) -> str:
        self.counters[prefix] += 1
        return f"{prefix}{self.counters[prefix] - 1}"

    # --8<-- [start:render]
    def render(self) -> str:
        params, body, indent = [], [], 1
        for u in self.uops:
            pad = "  " * indent
            if u.op is UOps.DEFINE_GLOBAL:
                self.names[u] = f"data{u.arg}"
                params.append(f"{'' if u.arg == 0 else 'const '}{u.dtype.c_name}* restrict data{u.arg}")
            elif u.op is UOps.CONST:
                self.names[u] = c_literal(u.arg, u.dtype)
            elif u.op is UOps.RANGE:
                name, (start, end) = u.arg, (self.names[s] for s in u.src)
                self.names[u] = name
                body.append(f"{pad}for (int {name} = {start}; {name} < {end}; {name}++) {{")
                indent += 1
            elif u.op is UOps.ENDRANGE:
                indent -= 1
                body.append("  " * indent + "}")
            elif u.op is UOps.DEFINE_ACC:
                self.names[u] = self.new_name("acc")
                body.append(f"{pad}{u.dtype.c_name} {self.names[u]} = {_unwrap(c_literal(u.arg, u.dtype))};")
            elif u.op is UOps.LOAD:
                self.names[u] = self.new_name("val")
                buffer, index = self.names[u.src[0]], _unwrap(self.names[u.src[1]])
                read = f"{buffer}[{index}]"
                if len(u.src) == 3:  # gated: padding reads 0, and the index is not used at all
                    read = f"{_wrap(self.names[u.src[2]])} ? {read} : {c_literal(0, u.dtype)}"
                body.append(f"{pad}{u.dtype.c_name} {self.names[u]} = {read};")
            elif u.op in (UOps.ALU, UOps.CAST):
                if u.op is UOps.ALU:
                    expr = self.alu_expr(u)
                elif u.src[0].dtype.is_float and u.dtype.is_int:
                    helper = self.use_helper("float_to_int32", dtypes.int32)
                    expr = f"{helper}({_unwrap(self.names[u.src[0]])})"
                    expr = expr if u.dtype == dtypes.int32 else f"({u.dtype.c_name}){expr}"
                else:
                    expr = f"({u.dtype.c_name}){_wrap(self.names[u.src[0]])}"
                if self.uses[u] == 1 and u.dtype != dtypes.uint8:
                    self.names[u] = expr
                else:
                    self.names[u] = self.new_name("alu" if u.op is UOps.ALU else "cast")
                    body.append(f"{pad}{u.dtype.c_name} {self.names[u]} = {_unwrap(expr)};")
            elif u.op is UOps.ASSIGN:
                self.names[u] = self.names[u.src[0]]
                body.append(f"{pad}{self.names[u]} = {_unwrap(self.names[u.src[1]])};")
            elif u.op is UOps.STORE:
                buffer, index, value = (self.names[s] for s in u.src)
                body.append(f"{pad}{buffer}[{_unwrap(index)}] = {_unwrap(value)};")
            else:
                raise NotImplementedError(f"C renderer: no rule for UOp {u.op.name}")
        lines = ["#include <math.h>", "#include <stdbool.h>", *self.helpers.values(),
                 f"void {self.function_name}({', '.join(params)}) {{", *body, "}"]
        return "\n".join(lines) + "\n"
    # --8<-- [end:render]

    def use_helper(self, name: str, dtype: DType) -> str:
        self.helpers.setdefault(name, _helper(name, dtype))
        return name

    def alu_expr(self, u: UOp) -> str:
        """The C expression of one ALU UOp, parenthesized."""
        op, srcs = u.arg, [self.names[s] for s in u.src]
        src_dtype = u.src[0].dtype if op is not TernaryOps.WHERE else u.src[1].dtype
        is_bool, is_float = src_dtype == dtypes.bool, src_dtype.is_float
        if op is UnaryOps.NEG:
            return f"(!{srcs[0]})" if is_bool else f"(-{srcs[0]})"
        if op in UNARY_FUNCTIONS:
            return f"{UNARY_FUNCTIONS[op]}({_unwrap(srcs[0])})"
        if op is UnaryOps.RECIP:
            if is_float:
                return f"(1.0f/{srcs[0]})"
            return f"{self.use_helper('div_' + src_dtype.name, src_dtype)}(1, {_unwrap(srcs[0])})"
        if op is TernaryOps.WHERE:
            return f"({srcs[0]}?{srcs[1]}:{srcs[2]})"
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
            return f"fmodf({_unwrap(a)}, {_unwrap(b)})"
        if op is BinaryOps.CMPLT and u.src[0].op is UOps.CONST and u.src[1].op is not UOps.CONST:
            return f"({b}>{a})"  # `3<gidx0` reads better as `gidx0>3`
        if op is BinaryOps.ADD and not is_float and not is_bool and u.src[1].op is UOps.CONST and \
                u.src[1].arg < 0 and u.src[1].arg != INT32_MIN:
            return f"({a}-{-u.src[1].arg})"
        symbol = (BOOL_SYMBOLS if is_bool else {}).get(op) or BINARY_SYMBOLS[op]
        return f"({a}{symbol}{b})"


UNARY_FUNCTIONS = {UnaryOps.EXP2: "exp2f", UnaryOps.LOG2: "log2f", UnaryOps.SIN: "sinf",
                   UnaryOps.COS: "cosf", UnaryOps.SQRT: "sqrtf"}
BINARY_SYMBOLS = {BinaryOps.ADD: "+", BinaryOps.SUB: "-", BinaryOps.MUL: "*", BinaryOps.DIV: "/",
                  BinaryOps.CMPLT: "<", BinaryOps.CMPEQ: "==", BinaryOps.AND: "&", BinaryOps.OR: "|",
                  BinaryOps.XOR: "^"}
BOOL_SYMBOLS = {BinaryOps.ADD: "||", BinaryOps.MUL: "&&"}  # numpy: bool + is or, bool * is and


def render_c(name: str, uops: list[UOp]) -> str:
    """The C source of one kernel: a function `void name(T* data0, const T* data1, ...)`."""
    return CRenderer(name, uops).render()
