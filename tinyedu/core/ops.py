"""The primitive ops, and the kernel AST built from them.

Every Tensor method, however fancy, is a composition of the handful of ops below. Keeping the list
small is the point: a backend only has to implement these to run everything.

- UnaryOps, BinaryOps, TernaryOps: elementwise math ("ALU" ops). They fuse freely.
- ReduceOps: SUM and MAX along some axes (MIN is -MAX(-x); MEAN is SUM then a multiply).
- MovementOps: change *which* element sits at each position, never the elements themselves. They
  are free: they only edit a ShapeTracker. FLIP is STRIDE with a negative step.
- LoadOps: where data comes from: EMPTY (uninitialised), CONST (one value, broadcast), COPY
  (from another device or from numpy), CONTIGUOUS (force a real, dense copy of a view).
- BufferOps: the leaves and root of a *kernel* AST: LOAD a buffer through a ShapeTracker, a CONST
  seen through a ShapeTracker (so padding can still apply), and STORE the result.

Why these and not others: EXP2/LOG2 instead of EXP/LOG because hardware has base-2 versions (exp(x)
is 2^(x log2 e), computed with care: tinyedu/expr.py); RECIP instead of a separate float DIV path
for gradients; CMPLT and CMPEQ give every comparison (a > b is b < a, a <= b is (a < b) OR (a == b):
*not* "not b < a", which would make NaN <= 0 true); WHERE gives masking, relu, clamp and friends;
MAX gives both max-pooling and relu-style clipping; AND, OR, XOR are bitwise on integers and logical
on bools.

SIN and COS are both primitives. cos(x) = sin(pi/2 - x) is exact for real numbers but not in
float32: pi/2 - x is rounded to a multiple of x's ulp (about 0.001 near x = 1e4), so the result
would be off by that much. Reducing x exactly needs pi to about 100 bits (Payne-Hanek), which
every libm's cosf already does; so, like SIN, COS is handed to the backend.

Constants are compared by their bit pattern (`const_key`), never with `==`: -0.0 == 0.0 but
1/-0.0 is -inf, and nan != nan would make a NaN constant unequal to itself.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import Enum, auto
from typing import TYPE_CHECKING, Any, Union

from .dtype import DType
from .helpers import cached_hash, postorder

if TYPE_CHECKING:  # (for the annotations only: the full library brings its own ShapeTracker)
    from .shape import ShapeTracker


class OpEnum(Enum):
    """An enum of ops, hashed by identity: its members are singletons, compared with `is`, and the
    lazy graph's caches hash an op for every node they look up (Enum's own hash is a Python call
    that hashes the member's name)."""

    __hash__ = object.__hash__


class UnaryOps(OpEnum):
    NEG = auto(); EXP2 = auto(); LOG2 = auto(); SIN = auto(); COS = auto(); SQRT = auto()  # noqa: E702
    RECIP = auto()
    CAST = auto()  # arg: the target DType


class BinaryOps(OpEnum):
    ADD = auto(); SUB = auto(); MUL = auto(); DIV = auto(); MAX = auto(); MOD = auto()  # noqa: E702
    CMPLT = auto(); CMPEQ = auto()  # noqa: E702
    AND = auto(); OR = auto(); XOR = auto()  # noqa: E702 - bitwise on ints, logical on bools


class TernaryOps(OpEnum):
    WHERE = auto()  # where(cond, a, b)


class ReduceOps(OpEnum):
    SUM = auto(); MAX = auto()  # noqa: E702 - arg: the reduced axes (they keep size 1)


class MovementOps(OpEnum):
    RESHAPE = auto(); PERMUTE = auto(); EXPAND = auto(); PAD = auto(); SHRINK = auto()  # noqa: E702
    STRIDE = auto()


class LoadOps(OpEnum):
    EMPTY = auto(); CONST = auto(); COPY = auto(); CONTIGUOUS = auto()  # noqa: E702


class BufferOps(OpEnum):
    LOAD = auto(); CONST = auto(); STORE = auto()  # noqa: E702


Op = Union[UnaryOps, BinaryOps, TernaryOps, ReduceOps, MovementOps, LoadOps, BufferOps]
ALU_OPS = (UnaryOps, BinaryOps, TernaryOps)


# --8<-- [start:const-key]
def const_key(value: Any) -> Any:
    """What makes two constants the same constant: the bit pattern of a float, the value otherwise.

    With `==`, -0.0 would equal 0.0 (yet 1/-0.0 is -inf) and a NaN would not even equal itself, so
    caches keyed on constants would mix up signed zeros and never hit for NaN.
    """
    if isinstance(value, float):
        return ("float", struct.pack("<d", value))
    return value


# --8<-- [end:const-key]

@dataclass(frozen=True)
class MemBuffer:
    """A LOAD/STORE leaf: buffer number `idx` of the kernel (0 is the output), read through `st`."""

    idx: int
    dtype: DType
    st: ShapeTracker

    __hash__ = cached_hash


@dataclass(frozen=True, eq=False)
class ConstBuffer:
    """A CONST leaf: the value `val` at every position of `st` (0 where `st` is masked out).

    Equal when the bits of `val` are equal (see const_key): a kernel with -0.0 is not one with 0.0.
    """

    val: float | int | bool
    dtype: DType
    st: ShapeTracker

    def _key(self) -> tuple:
        return (const_key(self.val), self.dtype, self.st)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ConstBuffer) and self._key() == other._key()

    def __hash__(self) -> int:  # computed once per leaf (hashed on every compile cache lookup)
        value = self.__dict__.get("_hash")
        if value is None:
            value = hash(self._key())
            object.__setattr__(self, "_hash", value)
        return value


# --8<-- [start:lazyop]
@dataclass(frozen=True, eq=False)
class LazyOp:
    """A node of a kernel AST: an op, its sources, and an argument (axes, dtype, buffer...).

    Immutable, and equal to any AST with the same structure: the compile cache and kernel dedup rely
    on it. An AST is a DAG: a value used twice (relu reads x twice) is one node with two parents. So
    nothing here may recurse into each parent separately, which would cost 2^depth on a chain of
    such ops: the hash is computed once from the children's cached hashes, equality compares each
    pair of nodes once, and walks visit each node once.
    """

    op: Op
    src: tuple["LazyOp", ...] = ()
    arg: Any = None

    def __post_init__(self) -> None:
        # Hashed once, when the node is made: its sources exist already and carry their own hash, so
        # this costs one small tuple per node (no recursion), and every later lookup (the compile
        # cache, kernel dedup, the per-step scheduler) reads the number back.
        try:
            arg_hash = hash(const_key(self.arg))
        except TypeError:  # host data (a numpy array) on a COPY item: compared by identity
            arg_hash = id(self.arg)
        object.__setattr__(self, "_hash", hash((self.op, arg_hash, tuple(s._hash for s in self.src))))

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, LazyOp) or self._hash != other._hash:
            return False
        compared, stack = set(), [(self, other)]
        while stack:
            a, b = stack.pop()
            if a is b or (id(a), id(b)) in compared:
                continue
            compared.add((id(a), id(b)))
            if a._hash != b._hash or a.op is not b.op or len(a.src) != len(b.src):
                return False
            if not _same_arg(a.arg, b.arg):
                return False
            stack.extend(zip(a.src, b.src, strict=True))
        return True

    # --8<-- [end:lazyop]
    def __str__(self) -> str:
        return "\n".join(self._tree_lines())

    def _tree_lines(self) -> list[str]:
        """The AST as an indented tree, one node a line: what DEBUG=3 and notebooks print.

        A node with several parents is printed in full once, tagged `[shared #n]`; every later use is
        one line, `[same as #n]`. (Leaves are one line anyway, so they are always printed.)
        """
        parents: dict[int, int] = {}
        for node in self.walk():
            for child in node.src:
                parents[id(child)] = parents.get(id(child), 0) + 1
        numbers: dict[int, int] = {}
        lines: list[str] = []
        stack: list[tuple[LazyOp, str]] = [(self, "")]
        while stack:
            node, prefix = stack.pop()
            text = f"{prefix}{type(node.op).__name__}.{node.op.name}{node._arg_text()}"
            if node.src and parents.get(id(node), 0) > 1:
                if id(node) in numbers:
                    lines.append(f"{text}  [same as #{numbers[id(node)]}]")
                    continue
                numbers[id(node)] = len(numbers) + 1
                text += f"  [shared #{numbers[id(node)]}]"
            lines.append(text)
            stack.extend((child, prefix + "  ") for child in reversed(node.src))
        return lines

    def _arg_text(self) -> str:
        if isinstance(self.arg, MemBuffer):
            return f" buf{self.arg.idx} {self.arg.dtype.name} shape={self.arg.st.shape}" + (
                "" if self.arg.st.contiguous else f" view={self.arg.st}")
        if isinstance(self.arg, ConstBuffer):
            return f" {self.arg.val} {self.arg.dtype.name} shape={self.arg.st.shape}"
        if self.arg is None:
            return ""
        return f" {self.arg}"

    def walk(self) -> list["LazyOp"]:
        """Every distinct node of the AST once, parents before children, left to right (iterative:
        kernel ASTs can be deep; by identity: a shared node is visited once, however many parents)."""
        nodes, seen, stack = [], set(), [self]
        while stack:
            node = stack.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            nodes.append(node)
            stack.extend(reversed(node.src))
        return nodes

    def toposort(self) -> list["LazyOp"]:
        """Every distinct node once, each after all of its sources (children before parents)."""
        return postorder([self], lambda node: node.src)

    @property
    def leaves(self) -> list["LazyOp"]:
        """The distinct BufferOps leaves below this node, left to right."""
        return [n for n in self.walk() if isinstance(n.op, BufferOps) and n.op is not BufferOps.STORE]


def _same_arg(a: Any, b: Any) -> bool:
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    try:
        return bool(const_key(a) == const_key(b))
    except (TypeError, ValueError):  # numpy arrays (host data): only the same array is the same
        return False
