"""The scheduler: cut the lazy graph into kernels, each one a kernel AST that stores one buffer.

Every base of the graph is either *stored* (it gets memory, and a kernel computes it) or *fused*
(its op is written into the kernel of whoever uses it, and never touches memory). Fusing is the
whole game: `relu(x * w + c)` run op by op is three loops, each reading and writing memory; fused,
it is one loop. These rules decide, in `Scheduler.stored`:

  1. what was asked for is stored;
  2. a load is stored: host data (COPY), an EMPTY, and a CONTIGUOUS (which asks for memory);
  3. an op fuses into the kernel that reads it, unless it is seen through a view (a permute, an
     expand, a pad...): then it is stored, as a kernel reads a view only from memory;
  4. a reduce is stored: a kernel has at most one reduce, and it is its last op (so
     `relu(a @ b + c)` is two kernels: the matmul's multiply and sum, then the add and the relu);
  5. a value used twice (by two ops, or twice by one) is stored, rather than computed twice.
Constants are never stored (unless asked for): a kernel reads them as a literal, through their view.

A kernel AST is a tree of LazyOps whose leaves say where values come from: `LOAD` buffer i through
a ShapeTracker, or a `CONST` through one; its root `STORE`s buffer 0, the output.

The seams. `Scheduler` runs three steps, each a method: `bases` (the graph, sources first),
`stored` (which bases get memory, with the rule that says so) and `kernel` (one ScheduleItem per
stored base, its AST built by a `KernelBuilder`). The full library (tinyedu/engine/schedule.py)
subclasses both classes: its `stored` applies nine rules (rules 1 and 2 are these functions; the
others weigh memory against recompute, padding, kernel size), and its `KernelBuilder.inline` pushes
a view through a fused op into the loads below it, so rule 3 there stores nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from .helpers import postorder
from .lazy import LazyBuffer
from .ops import BufferOps, ConstBuffer, LazyOp, LoadOps, MemBuffer, ReduceOps
from .shape import ShapeTracker


# --8<-- [start:item]
@dataclass(frozen=True)
class ScheduleItem:
    """One step of a schedule: `ast` computes `out` from `inputs` (buffer i + 1 of the kernel).

    A load (COPY, and in the full library EMPTY and a CONST output) is an item too: its `ast` is
    the load op itself, with no compute. `reason` says which rule stored `out`."""

    ast: LazyOp
    out: LazyBuffer
    inputs: tuple[LazyBuffer, ...] = ()
    reason: str = ""

    @property
    def bufs(self) -> list[LazyBuffer]:
        """The kernel's buffers in order: the output, then the inputs."""
        return [self.out, *self.inputs]

    @property
    def name(self) -> str:
        """`E_4_16` for an elementwise kernel over (4, 16), `r_4_16` for a reduce over a (4, 16) input."""
        if isinstance(self.ast.op, LoadOps):
            name = f"{self.ast.op.name.lower()}_{'_'.join(map(str, self.out.shape)) or 'scalar'}"
            if self.ast.op is LoadOps.COPY and self.inputs and self.inputs[0].device != self.out.device:
                name += f"_{self.inputs[0].device}->{self.out.device}"  # a copy between two devices
            return name
        return kernel_name(self.ast)
# --8<-- [end:item]


@lru_cache(maxsize=20_000)
def kernel_name(ast: LazyOp) -> str:
    """A kernel's name from its AST (remembered: a realizer may ask for it on every run of a kernel)."""
    reduce = next((n for n in ast.walk() if isinstance(n.op, ReduceOps)), None)
    shape = leaf_shape(reduce.src[0]) if reduce else ast.arg.st.shape
    return ("r_" if reduce else "E_") + ("_".join(map(str, shape)) or "1")


def leaf_shape(ast: LazyOp) -> tuple[int, ...]:
    """The shape an AST node computes: the shape of the leaves below it, reduced where a REDUCE is."""
    if isinstance(ast.op, BufferOps):
        return ast.arg.st.shape
    shape = leaf_shape(ast.src[0])
    if isinstance(ast.op, ReduceOps):
        return tuple(1 if i in ast.arg else s for i, s in enumerate(shape))
    return shape


# --8<-- [start:rules]
RULES = {
    1: "rule 1: an output",
    2: "rule 2: a load (copy, empty or contiguous)",
    3: "rule 3: seen through a view",
    4: "rule 4: a reduce",
    5: "rule 5: used twice",
}

# What a rule answers: the buffers it stores, each with its rule's number (the key of RULES).
Stores = list[tuple[LazyBuffer, int]]
# Who reads a buffer: (the reading op, the view it reads the buffer through), one pair per read.
Readers = list[tuple[LazyBuffer, LazyBuffer]]


def readers_of(bases: list[LazyBuffer]) -> dict[LazyBuffer, Readers]:
    """readers[b]: (reader, the view it reads b through) for every op that reads b."""
    readers: dict[LazyBuffer, Readers] = {b: [] for b in bases}
    for b in bases:
        for src in b.srcs:
            if src.base in readers:
                readers[src.base].append((b, src))
    return readers


def rule1_outputs(outs: list[LazyBuffer]) -> Stores:
    """Rule 1: what `realize()` was called on is stored."""
    return [(out.base, 1) for out in outs]


def rule2_loads(bases: list[LazyBuffer]) -> Stores:
    """Rule 2: COPY, EMPTY and `contiguous()` ask for memory (a CONST is a value, not a load)."""
    return [(b, 2) for b in bases if isinstance(b.op, LoadOps) and b.op is not LoadOps.CONST]


def rule3_views(readers: dict[LazyBuffer, Readers]) -> Stores:
    """Rule 3: an op seen through a view is stored (the full library pushes the view through it)."""
    return [(b, 3) for b, reads in readers.items()
            if b.op is not LoadOps.CONST and any(v.is_view for _, v in reads)]


def rule4_reduces(bases: list[LazyBuffer]) -> Stores:
    """Rule 4: a reduce is stored, so a kernel holds at most one, as its last op."""
    return [(b, 4) for b in bases if isinstance(b.op, ReduceOps)]


def rule5_used_twice(readers: dict[LazyBuffer, Readers]) -> Stores:
    """Rule 5: a value read twice is stored, not computed twice."""
    return [(b, 5) for b, reads in readers.items() if b.op is not LoadOps.CONST and len(reads) > 1]
# --8<-- [end:rules]


# --8<-- [start:builder]
class KernelBuilder:
    """Builds the AST of the kernel that stores `root`, inlining every source that is not stored.

    The seam is `inline`: how a fused base enters the AST when its reader sees it through the view
    `st`. The full library overrides it to push any view through the op into the loads below it
    (and to fuse a reduce into the ops that read its result), and `build` to give such a kernel
    one shape."""

    def __init__(self, root: LazyBuffer, stored: dict[LazyBuffer, str]):
        self.root, self.stored = root, stored
        self.inputs: list[LazyBuffer] = []
        # (base, view) -> its AST: a value read twice through the same view is one node (a DAG)
        self.built: dict[tuple[int, ShapeTracker], LazyOp] = {}

    def build(self) -> LazyOp:
        """The kernel's AST: STORE the root (or, for a CONTIGUOUS, the view it copies) to buffer 0."""
        # (the root's own tracker class: the full library's graph carries the full library's trackers)
        plain = type(self.root.st).from_shape(self.root.shape)
        if self.root.op is LoadOps.CONTIGUOUS:
            body = self.read(self.root.srcs[0], self.root.srcs[0].st)
        else:
            body = self.read(self.root, plain)
        return LazyOp(BufferOps.STORE, (body,), MemBuffer(0, self.root.dtype, plain))

    def read(self, src: LazyBuffer, st: ShapeTracker) -> LazyOp:
        """The AST that reads `src`'s base through `st` (a ShapeTracker over the base's memory)."""
        key = (id(src.base), st)
        if key not in self.built:
            self.built[key] = self._read(src, st)
        return self.built[key]

    def _read(self, src: LazyBuffer, st: ShapeTracker) -> LazyOp:
        """A constant is a literal; a base in memory, or stored by its own kernel, is a LOAD; anything
        else is fused into this kernel."""
        base = src.base
        if base.op is LoadOps.CONST:
            return LazyOp(BufferOps.CONST, (), ConstBuffer(base.arg, src.dtype, st))
        if base.realized is not None or (base in self.stored and base is not self.root):
            if base not in self.inputs:
                self.inputs.append(base)
            return LazyOp(BufferOps.LOAD, (), MemBuffer(self.inputs.index(base) + 1, src.dtype, st))
        return self.inline(base, st)

    def inline(self, base: LazyBuffer, st: ShapeTracker) -> LazyOp:
        """Write `base`'s op into the kernel, over the ASTs of its sources (each read through its view).

        Here `st` is always `base`'s own plain shape: rule 3 stored every base seen through a view.
        The full library overrides this to compose `st` into the sources' views."""
        return LazyOp(base.op, tuple(self.read(s, s.st) for s in base.srcs), base.arg)
# --8<-- [end:builder]


# --8<-- [start:schedule]
class Scheduler:
    """Lazy graph -> kernels, in three steps a subclass may each override (see the module docstring).

    `LOADS` are the ops whose item is the load itself (no kernel), and `Builder` makes the ASTs."""

    LOADS: tuple[LoadOps, ...] = (LoadOps.COPY,)
    Builder = KernelBuilder

    def schedule(self, outs: list[LazyBuffer]) -> list[ScheduleItem]:
        """One ScheduleItem per stored base, in order: a kernel comes after the kernels it reads."""
        bases = self.bases(outs)
        stored = self.stored(outs, bases)
        return [self.kernel(b, stored) for b in bases if b in stored]

    def bases(self, outs: list[LazyBuffer]) -> list[LazyBuffer]:
        """The bases not in memory that the outputs need, sources before the ops that read them."""
        def sources(base: LazyBuffer) -> list[LazyBuffer]:
            return [s.base for s in base.srcs if s.base.realized is None]
        return postorder([o.base for o in outs if o.base.realized is None], sources)

    def stored(self, outs: list[LazyBuffer], bases: list[LazyBuffer]) -> dict[LazyBuffer, str]:
        """Is this base stored? The bases that get memory, each with the first rule that says so."""
        readers = readers_of(bases)
        stored: dict[LazyBuffer, str] = {}
        for stores in (rule1_outputs(outs), rule2_loads(bases), rule3_views(readers), rule4_reduces(bases),
                       rule5_used_twice(readers)):
            for base, rule in stores:
                stored.setdefault(base, RULES[rule])
        return stored

    def kernel(self, base: LazyBuffer, stored: dict[LazyBuffer, str]) -> ScheduleItem:
        """The item that computes `base`: its load (host data is copied, no kernel) or its kernel AST."""
        if base.op in self.LOADS:
            return ScheduleItem(LazyOp(base.op, (), base.arg), base, tuple(s.base for s in base.srcs),
                                stored[base])
        builder = self.Builder(base, stored)
        ast = builder.build()
        return ScheduleItem(ast, base, tuple(builder.inputs), stored[base])


def create_schedule(outs: list[LazyBuffer]) -> list[ScheduleItem]:
    """The kernels that compute `outs`, in an order where every input is ready before it is read."""
    return Scheduler().schedule(outs)
# --8<-- [end:schedule]
