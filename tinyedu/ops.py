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
is exp2(x / ln 2)); RECIP instead of a separate float DIV path for gradients; CMPLT and CMPEQ give
every comparison (a > b is b < a, a <= b is not b < a); WHERE gives masking, relu, clamp and
friends; MAX gives both max-pooling and relu-style clipping.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum, auto
from typing import Any, Union

from tinyedu.dtype import DType
from tinyedu.shape import ShapeTracker
from tinyedu.shape.memo import cached_hash


class UnaryOps(Enum):
    NEG = auto(); EXP2 = auto(); LOG2 = auto(); SIN = auto(); SQRT = auto(); RECIP = auto()  # noqa: E702
    CAST = auto()  # arg: the target DType


class BinaryOps(Enum):
    ADD = auto(); SUB = auto(); MUL = auto(); DIV = auto(); MAX = auto(); MOD = auto()  # noqa: E702
    CMPLT = auto(); CMPEQ = auto()  # noqa: E702


class TernaryOps(Enum):
    WHERE = auto()  # where(cond, a, b)


class ReduceOps(Enum):
    SUM = auto(); MAX = auto()  # noqa: E702 - arg: the reduced axes (they keep size 1)


class MovementOps(Enum):
    RESHAPE = auto(); PERMUTE = auto(); EXPAND = auto(); PAD = auto(); SHRINK = auto()  # noqa: E702
    STRIDE = auto()


class LoadOps(Enum):
    EMPTY = auto(); CONST = auto(); COPY = auto(); CONTIGUOUS = auto()  # noqa: E702


class BufferOps(Enum):
    LOAD = auto(); CONST = auto(); STORE = auto()  # noqa: E702


Op = Union[UnaryOps, BinaryOps, TernaryOps, ReduceOps, MovementOps, LoadOps, BufferOps]
ALU_OPS = (UnaryOps, BinaryOps, TernaryOps)


@dataclass(frozen=True)
class MemBuffer:
    """A LOAD/STORE leaf: buffer number `idx` of the kernel (0 is the output), read through `st`."""

    idx: int
    dtype: DType
    st: ShapeTracker

    __hash__ = cached_hash


@dataclass(frozen=True)
class ConstBuffer:
    """A CONST leaf: the value `val` at every position of `st` (0 where `st` is masked out)."""

    val: float | int | bool
    dtype: DType
    st: ShapeTracker

    __hash__ = cached_hash


@dataclass(frozen=True)
class LazyOp:
    """A node of a kernel AST: an op, its sources, and an argument (axes, dtype, buffer...).

    Frozen so that equal ASTs hash equal: the compile cache and kernel dedup rely on it.
    """

    op: Op
    src: tuple["LazyOp", ...] = ()
    arg: Any = None

    __hash__ = cached_hash  # the compile cache looks kernels up by AST: hash each node once

    def __str__(self) -> str:
        return "\n".join(self._tree_lines())

    def _tree_lines(self, prefix: str = "") -> list[str]:
        """The AST as an indented tree, one node a line: what DEBUG=3 and notebooks print."""
        lines = [f"{prefix}{type(self.op).__name__}.{self.op.name}{self._arg_text()}"]
        for child in self.src:
            lines += child._tree_lines(prefix + "  ")
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
        """Every node of the AST, parents before children (iterative: kernel ASTs can be deep)."""
        nodes, stack = [], [self]
        while stack:
            node = stack.pop()
            nodes.append(node)
            stack.extend(reversed(node.src))
        return nodes

    @property
    def leaves(self) -> list["LazyOp"]:
        """The BufferOps leaves below this node, left to right."""
        if isinstance(self.op, BufferOps) and self.op is not BufferOps.STORE:
            return [self]
        return [leaf for child in self.src for leaf in child.leaves]
