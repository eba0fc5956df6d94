"""The scheduler: cut the lazy graph into kernels, each one a kernel AST that stores one buffer.

Every base of the graph is either *stored* (it gets memory, and a kernel computes it) or *fused*
(its op is written into the kernel of whoever uses it, and never touches memory). Fusing is the
whole game: `relu(x * w + c)` run op by op is three loops, each reading and writing memory; fused,
it is one loop. These rules decide, in `stored_bases`:

  1. what was asked for is stored, and so is host data (COPY) and a CONTIGUOUS;
  2. a reduce is stored: a kernel has at most one reduce, and it is its last op (so
     `relu(a @ b + c)` is two kernels: the matmul's multiply and sum, then the add and the relu);
  3. a value used twice (by two ops, or twice by one) is stored, rather than computed twice;
  4. a value seen through a view (a permute, an expand, a pad...) is stored: a kernel reads a
     view only from memory (the full scheduler in tinyedu/engine/ also pushes views through ops).
Constants are never stored: a kernel reads them as a literal, through their view.

A kernel AST is a tree of LazyOps whose leaves say where values come from: `LOAD` buffer i through
a ShapeTracker, or a `CONST` through one; its root `STORE`s buffer 0, the output.
"""

from __future__ import annotations

from dataclasses import dataclass

from .helpers import postorder
from .lazy import LazyBuffer
from .ops import BufferOps, ConstBuffer, LazyOp, LoadOps, MemBuffer, ReduceOps
from .shape import ShapeTracker


@dataclass
class ScheduleItem:
    """One step of a schedule: `ast` computes `bufs[0]` from the other bases in `bufs`."""

    ast: LazyOp
    bufs: list[LazyBuffer]


def _sources(base: LazyBuffer) -> list[LazyBuffer]:
    """The bases a base reads (none once it is in memory)."""
    return [] if base.realized is not None else [s.base for s in base.srcs]


# --8<-- [start:rules]
def stored_bases(outs: list[LazyBuffer]) -> list[LazyBuffer]:
    """The bases that get memory, in an order where each comes after the ones it reads."""
    order = postorder([o.base for o in outs], _sources)
    users: dict[int, int] = {}
    viewed: set[int] = set()
    for base in order:
        for src in (base.srcs if base.realized is None else ()):
            users[id(src.base)] = users.get(id(src.base), 0) + 1
            if src.is_view:
                viewed.add(id(src.base))
    wanted = {id(o.base) for o in outs}
    return [b for b in order if b.realized is None and (
        id(b) in wanted                                        # 1. asked for
        or b.op in (LoadOps.COPY, LoadOps.CONTIGUOUS)          # 1. host data, a copy asked for
        or (b.op is not LoadOps.CONST and (
            isinstance(b.op, ReduceOps)                        # 2. a reduce
            or users.get(id(b), 0) > 1                         # 3. used twice
            or id(b) in viewed)))]                             # 4. seen through a view
# --8<-- [end:rules]


# --8<-- [start:schedule]
def create_schedule(outs: list[LazyBuffer]) -> list[ScheduleItem]:
    """One ScheduleItem per stored base, in order: a kernel comes after the kernels it reads."""
    stored = stored_bases(outs)
    is_stored = {id(b) for b in stored}
    items = []
    for base in stored:
        if base.op is LoadOps.COPY:  # host data: no kernel, a copy into device memory
            items.append(ScheduleItem(LazyOp(LoadOps.COPY, (), base.arg), [base]))
            continue
        bufs = [base]
        root = base.srcs[0] if base.op is LoadOps.CONTIGUOUS else base
        ast = _build(root, bufs, is_stored)
        out = MemBuffer(0, base.dtype, ShapeTracker.from_shape(base.shape))
        items.append(ScheduleItem(LazyOp(BufferOps.STORE, (ast,), out), bufs))
    return items


def _build(x: LazyBuffer, bufs: list[LazyBuffer], is_stored: set[int]) -> LazyOp:
    """The AST that computes `x` (a base, or a view of one) inside the kernel storing bufs[0].

    A source that is in memory, or stored by its own kernel, is a LOAD through the view it is seen
    through; a constant is a CONST through its view; anything else is fused: its op, applied to the
    ASTs of its sources. (Iterative would be safer for very deep graphs; rule 3 keeps these shallow.)
    """
    base = x.base
    if base.op is LoadOps.CONST and base.realized is None:
        return LazyOp(BufferOps.CONST, (), ConstBuffer(base.arg, base.dtype, x.st))
    if base.realized is not None or (id(base) in is_stored and base is not bufs[0]):
        if base not in bufs[1:]:
            bufs.append(base)
        index = next(i for i, b in enumerate(bufs) if b is base and i > 0)
        return LazyOp(BufferOps.LOAD, (), MemBuffer(index, base.dtype, x.st))
    srcs = tuple(_build(s, bufs, is_stored) for s in base.srcs)
    return LazyOp(base.op, srcs, base.arg)
# --8<-- [end:schedule]
