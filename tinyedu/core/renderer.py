"""The renderer seam: what a backend supplies to turn UOps into its source.

Every renderer walks the same UOp list once, in order, and turns each UOp into the backend's way
of writing it: a C expression or statement, an LLVM IR instruction. The walk is written once, here
(`Renderer.render`); a backend fills in one method per kind of UOp:

| group   | methods                                       | C / NEON write          | LLVM IR writes     |
| ------- | --------------------------------------------- | ----------------------- | ------------------ |
| types   | type_name(dtype)                              | float, float32x4_t      | float, <4 x float> |
| values  | const, alu, cast                              | (a+b), (float)x         | %alu0 = fadd ...   |
| memory  | define_global, define_local, load, store      | data1[i], vld1q_f32(p)  | getelementptr, load|
| loops   | open_loop, close_loop, define_acc, assign     | for (...) {, acc0 = ... | blocks, phi nodes  |
| vectors | vectorize, broadcast, gep                     | (float32x4_t){...}, ... | insertelement, ... |
| GPU     | special, define_shared, barrier, open_if, close_if | (GPU renderers only: renderer/gpu.py)   |
| output  | finish()                                      | the whole C file        | the whole function |

Each method gets the UOp and its sources as the backend wrote them (`self.value(src)`), and returns
how the backend writes the UOp's own value (or None for a statement). Statements go into the body
with `self.emit(line)`. `bind(u, expression)` decides what to do with a computed value: C writes a
value used once inline where it is used and declares a variable otherwise; LLVM IR has already
named it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import Counter
from typing import Any

from .uops import UOp, UOps

# which method renders each UOp: the UOps every kernel may have, and the ones only GPU kernels have
CPU_RULES = {
    UOps.DEFINE_GLOBAL: "define_global", UOps.DEFINE_LOCAL: "define_local", UOps.CONST: "const",
    UOps.RANGE: "open_loop", UOps.ENDRANGE: "close_loop", UOps.DEFINE_ACC: "define_acc",
    UOps.ASSIGN: "assign", UOps.LOAD: "load", UOps.STORE: "store", UOps.ALU: "alu", UOps.CAST: "cast",
    UOps.VECTORIZE: "vectorize", UOps.BROADCAST: "broadcast", UOps.GEP: "gep",
}
GPU_RULES = {UOps.SPECIAL: "special", UOps.DEFINE_SHARED: "define_shared", UOps.BARRIER: "barrier",
             UOps.IF: "open_if", UOps.ENDIF: "close_if"}
RULES = {**CPU_RULES, **GPU_RULES}
VALUES = (UOps.ALU, UOps.CAST, UOps.VECTORIZE, UOps.BROADCAST, UOps.GEP)  # computed values: go through bind


class Renderer(ABC):
    """One UOp list to one kernel's source: `SomeRenderer(name, uops).render()`."""

    backend = "renderer"  # for error messages: "C renderer: no rule for ..."

    def __init__(self, name: str, uops: list[UOp]):
        self.function_name, self.uops = name, uops
        self.values: dict[UOp, str] = {}
        self.lines: list[str] = []
        self.counters: Counter[str] = Counter()

    # --8<-- [start:walk]
    def render(self) -> str:
        """Walk the UOps once: each becomes what its method returns; then the whole source."""
        for u in self.uops:
            if u.op not in RULES:
                raise NotImplementedError(f"{self.backend}: no rule for UOp {u.op.name}")
            value = getattr(self, RULES[u.op])(u, *(self.value(s) for s in u.src))
            self.values[u] = self.bind(u, value) if u.op in VALUES else value
        return self.finish()
    # --8<-- [end:walk]

    def value(self, u: UOp) -> str:
        """How the backend writes the value of an earlier UOp, where it is used."""
        return self.values[u]

    def bind(self, u: UOp, expression: str) -> str:
        """What a computed value becomes (C: inline or a variable; by default the expression itself)."""
        return expression

    def new_name(self, prefix: str) -> str:
        """alu0, alu1, ...: a fresh name for each prefix."""
        self.counters[prefix] += 1
        return f"{prefix}{self.counters[prefix] - 1}"

    def emit(self, line: str) -> None:
        self.lines.append(line)

    # ---- what a backend fills in ----
    @abstractmethod
    def type_name(self, dtype: Any) -> str:
        """The backend's name for a dtype (scalar or vector)."""

    @abstractmethod
    def define_global(self, u: UOp) -> str:
        """A kernel argument: buffer number u.arg, a pointer."""

    def define_local(self, u: UOp) -> str:
        """A local array of u.arg elements."""
        self.not_supported(u, "vectors and local arrays (opts)")

    @abstractmethod
    def const(self, u: UOp) -> str:
        """A literal of u.dtype with the value u.arg."""

    @abstractmethod
    def open_loop(self, u: UOp, start: str, end: str) -> str:
        """Start `for u.arg.name in range(start, end)`; the loop variable's name."""

    @abstractmethod
    def close_loop(self, u: UOp, loop: str) -> None:
        """End the innermost loop (u is its RANGE)."""

    @abstractmethod
    def define_acc(self, u: UOp) -> str:
        """A running total that starts at u.arg."""

    @abstractmethod
    def assign(self, u: UOp, acc: str, value: str) -> str:
        """acc = value: the accumulator's new value."""

    @abstractmethod
    def load(self, u: UOp, buffer: str, index: str, gate: str | None = None) -> str:
        """buffer[index]; 0 where gate (if any) is false, without touching memory there."""

    @abstractmethod
    def store(self, u: UOp, buffer: str, index: str, value: str) -> None:
        """buffer[index] = value."""

    @abstractmethod
    def alu(self, u: UOp, *operands: str) -> str:
        """One arithmetic op, u.arg, on the operands."""

    @abstractmethod
    def cast(self, u: UOp, value: str) -> str:
        """value converted to u.dtype."""

    # --8<-- [start:vectors]
    def vectorize(self, u: UOp, *lanes: str) -> str:
        """A vector of these lanes."""
        self.not_supported(u, "vectors and local arrays (opts)")

    def broadcast(self, u: UOp, value: str) -> str:
        """A vector with value in every lane."""
        self.not_supported(u, "vectors and local arrays (opts)")

    def gep(self, u: UOp, vector: str) -> str:
        """Lane u.arg of the vector."""
        self.not_supported(u, "vectors and local arrays (opts)")
    # --8<-- [end:vectors]

    @abstractmethod
    def finish(self) -> str:
        """The whole source, once every UOp is rendered."""

    def not_supported(self, u: UOp, what: str) -> None:
        raise NotImplementedError(f"{self.backend}: no rule for {u.op.name}; this renderer does not write "
                                  f"{what}")

    # ---- GPU UOps: only a GPU renderer (renderer/gpu.py) writes them; a CPU renderer says so ----
    def gpu_only(self, u: UOp) -> None:
        raise NotImplementedError(f"{self.backend}: {u.op.name} is a GPU UOp, and this renderer writes CPU "
                                  "kernels; lower the kernel for a CPU device, or render it for GPU or CUDA")

    def special(self, u: UOp) -> str:
        """The workgroup index gidN or thread index lidN named by u.arg."""
        self.gpu_only(u)

    def define_shared(self, u: UOp) -> str:
        """An array of u.arg[1] elements in the workgroup's shared memory."""
        self.gpu_only(u)

    def barrier(self, u: UOp) -> None:
        """Every thread of the workgroup waits here."""
        self.gpu_only(u)

    def open_if(self, u: UOp, condition: str) -> None:
        """`if (condition) {`."""
        self.gpu_only(u)

    def close_if(self, u: UOp, branch: None) -> None:
        """The end of the IF block."""
        self.gpu_only(u)
