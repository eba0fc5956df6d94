"""UOps: a kernel as a flat list of tiny instructions, the last step before source code.

A kernel AST is a graph of whole-array ops ("add these two (4, 16) arrays"). Hardware runs loops of
scalar instructions. The linearizer (linearizer.py here; with opts, tinyedu/codegen/linearizer.py)
bridges the two by emitting a list of UOps, each one value (a scalar; with opts, also a vector) or
one statement:

| UOp           | src                        | arg                  | what it means                      |
| ------------- | -------------------------- | -------------------- | ---------------------------------- |
| DEFINE_GLOBAL | ()                         | buffer number        | a kernel argument: a pointer       |
| DEFINE_LOCAL  | ()                         | number of elements   | a small array (per thread): a tile |
| CONST         | ()                         | the value            | a literal                          |
| RANGE         | (start, end)               | Loop(name, threads)  | open a loop; its value is the index|
| ENDRANGE      | (range,)                   |                      | close that loop                    |
| DEFINE_ACC    | ()                         | initial value        | a running total for a reduce       |
| LOAD          | (buffer, index[, gate])    |                      | buffer[index], or 0 if gate false  |
| ALU           | 1-3 operands               | a Unary/Binary/TernaryOps or MULACC | one arithmetic op   |
| CAST          | (value,)                   |                      | convert to this UOp's dtype        |
| ASSIGN        | (acc, value)               |                      | acc = value; later, the acc's value|
| STORE         | (buffer, index, value)     |                      | buffer[index] = value              |
| VECTORIZE     | (scalar, scalar, ...)      |                      | a vector made of these lanes       |
| BROADCAST     | (scalar,)                  |                      | a vector with this value in every lane |
| GEP           | (vector,)                  | lane number          | one lane of a vector               |
| SPECIAL       | ()                         | (name, size)         | GPU: this workgroup's index `gidN` |
|               |                            |                      | or this thread's `lidN` (0..size-1)|
| DEFINE_SHARED | ()                         | (number, elements)   | GPU: an array in the workgroup's   |
|               |                            |                      | shared (local) memory              |
| BARRIER       | ()                         |                      | GPU: wait for every thread of the  |
|               |                            |                      | workgroup; shared writes now seen  |
| IF            | (condition,)               |                      | only threads where it holds run on |
| ENDIF         | (if,)                      |                      | until the matching ENDIF           |

Every UOp has a dtype (None for statements: ENDRANGE, STORE). Sources are other UOps that come
earlier in the list, so a list is a program in SSA form: each value is computed once, by one UOp.

Vectors (stage 5). A dtype can be a `VectorDType`, e.g. float32x16: 16 lanes in one value, one SIMD
register. A LOAD or STORE of a vector dtype reads or writes that many consecutive elements from the
index on; an ALU op on vectors works lane by lane (a vector ADD is 16 ADDs at once). Only the ops in
VECTOR_ALU_OPS are ever emitted on vectors: everything else is done lane by lane (GEP each lane,
scalar ops, VECTORIZE), so a renderer supplies only: vector types, vector LOAD/STORE, BROADCAST,
VECTORIZE, GEP and the ops of VECTOR_ALU_OPS. A comparison of vectors gives a bool vector (a mask)
that is only ever used as the condition of a vector WHERE.

GPU kernels (stage 7). A GPU runs one copy of the kernel per *thread*; threads come in *workgroups*
that share a small fast memory. SPECIAL values say which copy this is: `gid0..2` the workgroup's
position in the grid, `lid0..2` the thread's position in its workgroup. Their sizes are the launch
dimensions (tinyedu/codegen/launch.py). Values read from shared memory are never hoisted or shared
between two places in the list: a BARRIER between them may have changed the memory.

MULACC(a, b, c) is a*b + c rounded once (a fused multiply-add). The linearizer emits it only to
accumulate a SUM of products in an optimized kernel, where the reduction order changes anyway;
elementwise math is never fused, so it stays bit-identical across devices.

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

from .dtype import DType, dtypes
from .ops import BinaryOps, TernaryOps, UnaryOps


class UOps(Enum):
    DEFINE_GLOBAL = auto(); CONST = auto(); RANGE = auto(); ENDRANGE = auto()  # noqa: E702
    DEFINE_ACC = auto(); LOAD = auto(); ALU = auto(); CAST = auto(); ASSIGN = auto()  # noqa: E702
    STORE = auto(); DEFINE_LOCAL = auto(); VECTORIZE = auto(); BROADCAST = auto(); GEP = auto()  # noqa: E702
    SPECIAL = auto(); DEFINE_SHARED = auto(); BARRIER = auto(); IF = auto(); ENDIF = auto()  # noqa: E702


class FusedOps(Enum):
    """ALU ops that exist only in generated code, never in a kernel AST."""

    MULACC = auto()  # MULACC(a, b, c) = a*b + c, rounded once (a fused multiply-add)


# The type of loop counters and index arithmetic: int32, unless a kernel's buffers or loops pass
# 2^31 elements (then int64: the linearizer decides per kernel, see tinyedu/codegen/index.py).
INDEX_DTYPE = dtypes.int32


# --8<-- [start:vectors]
@dataclass(frozen=True)
class VectorDType:
    """`count` lanes of `scalar` in one value, e.g. float32x16 (one 512-bit SIMD register)."""

    scalar: DType
    count: int

    @property
    def name(self) -> str:
        return f"{self.scalar.name}x{self.count}"

    @property
    def is_float(self) -> bool:
        return self.scalar.is_float

    @property
    def itemsize(self) -> int:
        return self.scalar.itemsize * self.count

    def __repr__(self) -> str:
        return f"{self.scalar!r}.vec({self.count})"


AnyDType = DType | VectorDType


def scalar_of(dtype: AnyDType) -> DType:
    """The lane dtype of a vector dtype; a scalar dtype itself."""
    return dtype.scalar if isinstance(dtype, VectorDType) else dtype


def is_vector(dtype: AnyDType | None) -> bool:
    return isinstance(dtype, VectorDType)


# The ops a renderer must support on vectors, per lane dtype (4-byte lanes only: float32, int32).
# Comparisons give a bool vector, which only ever feeds a WHERE.
VECTOR_ALU_OPS: dict[DType, frozenset] = {
    dtypes.float32: frozenset({BinaryOps.ADD, BinaryOps.SUB, BinaryOps.MUL, BinaryOps.DIV, UnaryOps.NEG,
                               UnaryOps.RECIP, UnaryOps.SQRT, BinaryOps.MAX, BinaryOps.CMPLT, BinaryOps.CMPEQ,
                               TernaryOps.WHERE, FusedOps.MULACC}),
    dtypes.int32: frozenset({BinaryOps.ADD, BinaryOps.SUB, BinaryOps.MUL, UnaryOps.NEG, BinaryOps.MAX,
                             BinaryOps.CMPLT, BinaryOps.CMPEQ, TernaryOps.WHERE, BinaryOps.AND, BinaryOps.OR,
                             BinaryOps.XOR}),
}
# --8<-- [end:vectors]


@dataclass(frozen=True)
class Loop:
    """The arg of a RANGE: the loop's name, and how many threads share its iterations (1: none)."""

    name: str
    threads: int = 1

    def __str__(self) -> str:
        return self.name if self.threads == 1 else f"{self.name} ({self.threads} threads)"


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
        pointer = u.op in (UOps.DEFINE_GLOBAL, UOps.DEFINE_LOCAL, UOps.DEFINE_SHARED)
        dtype = "" if u.dtype is None else u.dtype.name + ("*" if pointer else "")
        lines.append(f"{i:4d} {u.op.name:<13s} {dtype:<8s} {srcs:<14s} {arg_text(u)}".rstrip())
    return "\n".join(lines)


def arg_text(u: UOp) -> str:
    """The argument of a UOp as a reader wants to see it."""
    if u.op is UOps.DEFINE_GLOBAL:
        return f"data{u.arg}" + (" (output)" if u.arg == 0 else "")
    if u.op is UOps.DEFINE_LOCAL:
        return f"{u.arg} elements"
    if u.op is UOps.DEFINE_SHARED:
        return f"shared{u.arg[0]}, {u.arg[1]} elements"
    if u.op is UOps.SPECIAL:
        return f"{u.arg[0]} < {u.arg[1]}"
    if isinstance(u.arg, (UnaryOps, BinaryOps, TernaryOps, FusedOps)):
        return u.arg.name
    return "" if u.arg is None else str(u.arg)


# ---- constants ----
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


def const_value(value: float | int | bool, dtype: DType) -> float | int | bool:
    """`value` converted to `dtype` as a plain Python value (float32 rounding, integer wraparound)."""
    if dtype == dtypes.bool:
        return bool(value)
    if dtype == dtypes.float64:
        return float(value)
    if dtype.is_float:  # float16 and bfloat16 values are float32s in kernels (see tinyedu.core.dtype)
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
    return -(1 << (8 * dtype.itemsize - 1)) if dtype.kind == "i" else 0


def _const_key(value: float | int | bool, dtype: DType) -> tuple:
    # 0.0 == -0.0 and nan != nan in Python, but they are different (or the same) constants: compare bits.
    return (dtype, struct.pack("d", value) if dtype.is_float else value)


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

    def __init__(self, index_dtype: DType = INDEX_DTYPE) -> None:
        self.index_dtype = index_dtype      # loop counters and index arithmetic: int32 or int64
        self.blocks: list[list[UOp]] = [[]]
        self.open_ranges: list[UOp] = []
        self.depth: dict[UOp, int] = {}     # which block each value lives in
        self.cache: dict[tuple, UOp] = {}   # (op, dtype, src, arg) -> the UOp that computes it
        self.accumulators: set[UOp] = set()

    @property
    def uops(self) -> list[UOp]:
        assert not self.open_ranges, f"loops still open: {[str(r.arg) for r in self.open_ranges]}"
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
            dtype = src[-1].dtype
            if op in (BinaryOps.CMPLT, BinaryOps.CMPEQ):
                dtype = VectorDType(dtypes.bool, dtype.count) if is_vector(dtype) else dtypes.bool
        simpler = None if is_vector(dtype) else self._simplify(op, src, dtype)
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
    def open_range(self, name: str, size: int, threads: int = 1) -> UOp:
        """Start `for name in range(size)` (split across `threads` threads); values that use it go inside."""
        start, end = self.const(0, self.index_dtype), self.const(size, self.index_dtype)
        loop = UOp(UOps.RANGE, self.index_dtype, (start, end), Loop(name, threads))
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

    def define_acc(self, init: float | int | bool, dtype: AnyDType) -> UOp:
        """An accumulator in the current block (every lane starts at `init`); loops opened after it
        update it via `assign`."""
        acc = self.emit(UOps.DEFINE_ACC, dtype, (), const_value(init, scalar_of(dtype)), hoist=False)
        self.accumulators.add(acc)
        return acc

    def assign(self, acc: UOp, value: UOp) -> UOp:
        return self.emit(UOps.ASSIGN, acc.dtype, (acc, value), hoist=False)

    # ---- GPU ----
    def special(self, name: str, size: int) -> UOp:
        """The workgroup index `gidN` or thread index `lidN` (0 <= value < size): known everywhere."""
        return self.emit(UOps.SPECIAL, self.index_dtype, (), (name, size))

    def define_shared(self, size: int, dtype: DType) -> UOp:
        """An array of `size` elements in the workgroup's shared memory, declared at the kernel's top."""
        number = sum(1 for u in self.blocks[0] if u.op is UOps.DEFINE_SHARED)
        u = UOp(UOps.DEFINE_SHARED, dtype, (), (number, size))
        self.blocks[0].insert(0, u)
        self.depth[u] = 0
        return u

    def barrier(self) -> UOp:
        """Every thread of the workgroup waits here; shared-memory writes before it are seen after."""
        return self.emit(UOps.BARRIER, None, (), None, hoist=False)

    def load_shared(self, shared: UOp, index: UOp, dtype: DType) -> UOp:
        """shared[index], in place: never hoisted or reused (a barrier may come between)."""
        return self.emit(UOps.LOAD, dtype, (shared, index), hoist=False)

    def open_if(self, condition: UOp) -> UOp:
        """Start `if (condition) {`: the UOps until close_if run only in threads where it holds."""
        branch = UOp(UOps.IF, None, (condition,))
        self.open_ranges.append(branch)
        self.blocks.append([])
        self.depth[branch] = len(self.blocks) - 1
        return branch

    def close_if(self) -> None:
        branch, body = self.open_ranges.pop(), self.blocks.pop()
        assert branch.op is UOps.IF, f"close_if: the innermost open block is {branch.op.name}"
        self.blocks[-1].extend([branch, *body, UOp(UOps.ENDIF, None, (branch,))])
        outer = len(self.blocks) - 1
        self.cache = {k: u for k, u in self.cache.items() if self.depth[u] <= outer}

    def define_local(self, size: int, dtype: DType) -> UOp:
        """A kernel-local array of `size` elements, in the current block (so each thread has its own)."""
        return self.emit(UOps.DEFINE_LOCAL, dtype, (), size, hoist=False)
