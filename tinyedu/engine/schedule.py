"""From the lazy graph to a list of kernels.

A ScheduleItem is one kernel: an AST rooted at STORE whose leaves LOAD input buffers (through
their ShapeTrackers) or read constants, plus the LazyBuffers it writes and reads. Load ops that
need no kernel (EMPTY, COPY) are items too, with an AST that is just that op.

This version emits one kernel per op: every elementwise op, reduce and contiguous copy gets its own
kernel and its own output buffer. Fusion (several ops into one kernel) builds on it.
"""

from __future__ import annotations

from dataclasses import dataclass

from tinyedu.lazy import LazyBuffer
from tinyedu.ops import BufferOps, ConstBuffer, LazyOp, LoadOps, MemBuffer
from tinyedu.shape import ShapeTracker


@dataclass(frozen=True)
class ScheduleItem:
    ast: LazyOp
    out: LazyBuffer
    inputs: tuple[LazyBuffer, ...]  # buffer i + 1 of the kernel; buffer 0 is `out`


def _bases_to_run(outs: list[LazyBuffer]) -> list[LazyBuffer]:
    """Unrealized bases the outputs depend on, sources before users (an iterative DFS, no recursion)."""
    order: list[LazyBuffer] = []
    visited: set[int] = set()
    stack: list[tuple[LazyBuffer, bool]] = [(out.base, False) for out in reversed(outs)]
    while stack:
        node, children_done = stack.pop()
        if children_done:
            order.append(node)
            continue
        if id(node) in visited or node.realized is not None:
            continue
        visited.add(id(node))
        stack.append((node, True))
        for src in reversed(node.srcs):
            stack.append((src.base, False))
    # Unrealized constants are read as CONST leaves, never stored, unless asked for as an output.
    wanted = {id(out.base) for out in outs}
    return [b for b in order if b.op is not LoadOps.CONST or id(b) in wanted]


def _leaf(src: LazyBuffer, inputs: list[LazyBuffer]) -> LazyOp:
    """How a kernel reads one source: a constant in place, or a LOAD of its base's buffer."""
    if src.is_unrealized_const():
        return LazyOp(BufferOps.CONST, (), ConstBuffer(src.base.arg, src.dtype, src.st))
    if src.base not in inputs:
        inputs.append(src.base)
    return LazyOp(BufferOps.LOAD, (), MemBuffer(inputs.index(src.base) + 1, src.dtype, src.st))


def _kernel_for(base: LazyBuffer) -> ScheduleItem:
    if base.op in (LoadOps.EMPTY, LoadOps.COPY) or (base.op is LoadOps.CONST):
        # No compute: the realizer allocates (EMPTY), copies (COPY) or fills (a CONST output).
        return ScheduleItem(LazyOp(base.op, (), base.arg), base, tuple(s.base for s in base.srcs))
    inputs: list[LazyBuffer] = []
    leaves = tuple(_leaf(src, inputs) for src in base.srcs)
    body = leaves[0] if base.op is LoadOps.CONTIGUOUS else LazyOp(base.op, leaves, base.arg)
    store = MemBuffer(0, base.dtype, ShapeTracker.from_shape(base.shape))
    return ScheduleItem(LazyOp(BufferOps.STORE, (body,), store), base, tuple(inputs))


def create_schedule(outs: list[LazyBuffer]) -> list[ScheduleItem]:
    """The kernels that compute `outs`, in an order where every input is ready before it is read."""
    return [_kernel_for(base) for base in _bases_to_run(outs)]
