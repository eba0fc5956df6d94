"""UOps: a kernel as a flat list of tiny instructions, the last step before source code.

A kernel AST is a graph of whole-array ops ("add these two (4, 16) arrays"). Hardware runs loops of
scalar instructions. The linearizer (tinyedu/codegen/linearizer.py) bridges the two by emitting a
list of UOps, each one scalar value or one statement:

| UOp           | src                        | arg                  | what it means                      |
| ------------- | -------------------------- | -------------------- | ---------------------------------- |
| DEFINE_GLOBAL | ()                         | buffer number        | a kernel argument: a pointer       |
| CONST         | ()                         | the value            | a literal                          |
| RANGE         | (start, end)               | loop name (`gidx0`)  | open a loop; its value is the index|
| ENDRANGE      | (range,)                   |                      | close that loop                    |
| DEFINE_ACC    | ()                         | initial value        | a running total for a reduce       |
| LOAD          | (buffer, index[, gate])    |                      | buffer[index], or 0 if gate false  |
| ALU           | 1-3 operands               | a Unary/Binary/TernaryOps | one arithmetic op             |
| CAST          | (value,)                   |                      | convert to this UOp's dtype        |
| ASSIGN        | (acc, value)               |                      | acc = value; later, the acc's value|
| STORE         | (buffer, index, value)     |                      | buffer[index] = value              |

Every UOp has a dtype (None for statements: ENDRANGE, STORE). Sources are other UOps that come
earlier in the list, so a list is a program in SSA form: each value is computed once, by one UOp.

`UOpBuilder` is how UOps get made. It keeps each distinct value once (an AST may hold two equal
subtrees; the list computes each repeated value once), simplifies integer arithmetic (`x*1 -> x`,
`x+0 -> x`, `2*3 -> 6`), and places every value in the outermost loop where all its sources exist,
so that work that does not depend on a loop is done once, outside it ("loop-invariant code motion").
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import Enum, auto
from typing import Any

from tinyedu.dtype import DType, dtypes
from tinyedu.ops import BinaryOps, TernaryOps, UnaryOps


class UOps(Enum):
    DEFINE_GLOBAL = auto(); CONST = auto(); RANGE = auto(); ENDRANGE = auto()  # noqa: E702
    DEFINE_ACC = auto(); LOAD = auto(); ALU = auto(); CAST = auto(); ASSIGN = auto()  # noqa: E702
    STORE = auto()


@dataclass(frozen=True, eq=False)
class UOp:
    """One instruction. Compared by identity: the builder already made equal values the same object."""

    op: UOps
    dtype: DType | None
    src: tuple["UOp", ...] = ()
    arg: Any = None

    def __repr__(self) -> str:
        return f"UOp({self.op.name}, {self.dtype.name if self.dtype else None}, arg={self.arg!r})"


def uops_listing(uops: list[UOp]) -> str:
    """A numbered listing, one UOp a line: `  7 ALU           float32  [5, 6]      ADD`.

    The numbers are positions in the list; sources are shown by their numbers.
    """
    number = {u: i for i, u in enumerate(uops)}
    lines = []
    for i, u in enumerate(uops):
        srcs = "[" + ", ".join(str(number[s]) for s in u.src) + "]"
        dtype = "" if u.dtype is None else u.dtype.name + ("*" if u.op is UOps.DEFINE_GLOBAL else "")
        lines.append(f"{i:4d} {u.op.name:<13s} {dtype:<8s} {srcs:<14s} {arg_text(u)}".rstrip())
    return "\n".join(lines)


def arg_text(u: UOp) -> str:
    """The argument of a UOp as a reader wants to see it."""
    if u.op is UOps.DEFINE_GLOBAL:
        return f"data{u.arg}" + (" (output)" if u.arg == 0 else "")
    if isinstance(u.arg, (UnaryOps, BinaryOps, TernaryOps)):
        return u.arg.name
    return "" if u.arg is None else str(u.arg)


# ---- constants ----
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


def const_value(value: float | int | bool, dtype: DType) -> float | int | bool:
    """`value` converted to `dtype` as a plain Python value (float32 rounding, integer wraparound)."""
    if dtype == dtypes.bool:
        return bool(value)
    if dtype.is_float:
        return struct.unpack("f", struct.pack("f", float(value)))[0]  # round to the nearest float32
    bits = 8 * dtype.itemsize
    wrapped = int(value) % (1 << bits)
    return wrapped - (1 << bits) if dtype.name.startswith("int") and wrapped >= 1 << (bits - 1) else wrapped


def lowest_value(dtype: DType) -> float | int | bool:
    """The identity of MAX: -inf for floats, the smallest int, False."""
    if dtype == dtypes.bool:
        return False
    if dtype.is_float:
        return float("-inf")
    return INT32_MIN if dtype == dtypes.int32 else 0


def _const_key(value: float | int | bool, dtype: DType) -> tuple:
    # 0.0 == -0.0 and nan != nan in Python, but they are different (or the same) constants: compare bits.
    return (dtype, struct.pack("f", value) if dtype.is_float else value)


# ---- exact integer arithmetic, for folding constants ----
def _trunc_div(a: int, b: int) -> int:
    """C's `/`: rounds toward zero; x / 0 gives 0 (tinyedu's rule, see ops_numpy)."""
    if b == 0:
        return 0
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


INT_FOLD = {
    BinaryOps.ADD: lambda a, b: a + b, BinaryOps.SUB: lambda a, b: a - b, BinaryOps.MUL: lambda a, b: a * b,
    BinaryOps.DIV: _trunc_div, BinaryOps.MOD: lambda a, b: 0 if b == 0 else a - _trunc_div(a, b) * b,
    BinaryOps.MAX: max, BinaryOps.CMPLT: lambda a, b: a < b, BinaryOps.CMPEQ: lambda a, b: a == b,
}


class UOpBuilder:
    """Makes UOps: dedups them, simplifies integer arithmetic, and places them in the right loop.

    Loops nest, so the program is built as a stack of blocks: `blocks[0]` is the kernel body outside
    every loop, `blocks[d]` the body of the d-th open loop. A value goes into the deepest block among
    its sources' blocks (never deeper: that is the hoisting). Closing a loop appends
    `RANGE, body..., ENDRANGE` to the block around it, and forgets the values made inside it, which
    do not exist after the loop (in C they would be out of scope).
    """

    def __init__(self) -> None:
        self.blocks: list[list[UOp]] = [[]]
        self.open_ranges: list[UOp] = []
        self.depth: dict[UOp, int] = {}     # which block each value lives in
        self.cache: dict[tuple, UOp] = {}   # (op, dtype, src, arg) -> the UOp that computes it
        self.accumulators: set[UOp] = set()

    @property
    def uops(self) -> list[UOp]:
        assert not self.open_ranges, f"loops still open: {[r.arg for r in self.open_ranges]}"
        return self.blocks[0]

    def _depth_of(self, u: UOp) -> int:
        # An accumulator changes on every iteration, so whatever reads it stays in the innermost loop.
        return len(self.blocks) - 1 if u in self.accumulators else self.depth[u]

    # --8<-- [start:emit]
    def emit(self, op: UOps, dtype: DType | None, src: tuple[UOp, ...] = (), arg: Any = None,
             hoist: bool = True) -> UOp:
        """A UOp for this value: an existing one if it was computed before, else a new one.

        `hoist=False` is for UOps with side effects or a fixed place (accumulators, stores): they are
        never shared and go into the innermost open loop.
        """
        key = (op, dtype, src, _const_key(arg, dtype) if op is UOps.CONST else arg)
        if hoist and key in self.cache:
            return self.cache[key]
        u = UOp(op, dtype, src, arg)
        depth = max((self._depth_of(s) for s in src), default=0) if hoist else len(self.blocks) - 1
        self.blocks[depth].append(u)
        self.depth[u] = depth
        if hoist:
            self.cache[key] = u
        return u
    # --8<-- [end:emit]

    def const(self, value: float | int | bool, dtype: DType) -> UOp:
        return self.emit(UOps.CONST, dtype, (), const_value(value, dtype))

    def alu(self, op: UnaryOps | BinaryOps | TernaryOps, *src: UOp, dtype: DType | None = None) -> UOp:
        """One ALU op; its dtype is bool for comparisons, else the (last) operand's dtype."""
        if dtype is None:
            dtype = dtypes.bool if op in (BinaryOps.CMPLT, BinaryOps.CMPEQ) else src[-1].dtype
        simpler = self._simplify(op, src, dtype)
        return simpler if simpler is not None else self.emit(UOps.ALU, dtype, src, op)

    # --8<-- [start:simplify]
    def _simplify(self, op: Any, src: tuple[UOp, ...], dtype: DType) -> UOp | None:
        """Integer/bool identities and constant folding; None when nothing applies.

        Only for integers and bools, where they are exact. Float `x+0.0` is not `x` (think of -0.0).
        """
        if any(s.dtype is not None and s.dtype.is_float for s in src) or len(src) != 2:
            return None
        a, b = src
        if a.op is UOps.CONST and b.op is UOps.CONST and op in INT_FOLD:
            if dtype == dtypes.bool and op in (BinaryOps.ADD, BinaryOps.MUL):
                return self.const((a.arg or b.arg) if op is BinaryOps.ADD else (a.arg and b.arg), dtype)
            return self.const(INT_FOLD[op](a.arg, b.arg), dtype)
        if op is BinaryOps.ADD and a.op is UOps.CONST and a.arg == 0:
            return b
        if op in (BinaryOps.ADD, BinaryOps.SUB) and b.op is UOps.CONST and b.arg == 0:
            return a
        for x, y in ((a, b), (b, a)):
            if op is BinaryOps.MUL and y.op is UOps.CONST and y.arg == 1:
                return x   # x*1, and for bools x AND true
            if op is BinaryOps.MUL and y.op is UOps.CONST and y.arg == 0:
                return y   # x*0, and x AND false
        if op is BinaryOps.DIV and b.op is UOps.CONST and b.arg == 1:
            return a
        return None
    # --8<-- [end:simplify]

    # ---- loops ----
    # --8<-- [start:loops]
    def open_range(self, name: str, size: int) -> UOp:
        """Start `for name in range(size)`; values that use it go inside."""
        start, end = self.const(0, dtypes.int32), self.const(size, dtypes.int32)
        loop = UOp(UOps.RANGE, dtypes.int32, (start, end), name)
        self.open_ranges.append(loop)
        self.blocks.append([])
        self.depth[loop] = len(self.blocks) - 1
        return loop

    def close_range(self) -> None:
        """End the innermost loop and forget the values that live in it."""
        loop, body = self.open_ranges.pop(), self.blocks.pop()
        self.blocks[-1].extend([loop, *body, UOp(UOps.ENDRANGE, None, (loop,))])
        outer = len(self.blocks) - 1
        self.cache = {k: u for k, u in self.cache.items() if self.depth[u] <= outer}
        for u in body:
            if u.op is UOps.ASSIGN:
                # after the loop, the accumulator holds its final value, readable out here
                self.depth[u] = outer
    # --8<-- [end:loops]

    def define_acc(self, init: float | int | bool, dtype: DType) -> UOp:
        """An accumulator in the current block; loops opened after it update it via `assign`."""
        acc = self.emit(UOps.DEFINE_ACC, dtype, (), const_value(init, dtype), hoist=False)
        self.accumulators.add(acc)
        return acc

    def assign(self, acc: UOp, value: UOp) -> UOp:
        return self.emit(UOps.ASSIGN, acc.dtype, (acc, value), hoist=False)
