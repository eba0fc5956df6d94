"""Writing new values into existing memory: what `Tensor.assign` asks of the engine.

An optimizer updates a weight *in place*: the same buffer, new contents, so everything that holds
the weight (the model, a view of it, a captured TinyJit step) sees the update without rebinding.

The one danger is reading and writing the same memory. `w.assign(w - lr * w.grad)`: the gradient
of *another* weight may also read `w`, and must see its old values. So every value is computed
first, in one schedule, and only then written. And a computation that was built on the old values
but has not run yet (say the loss, still lazy after `optimizer.step()`) is pointed at a snapshot of
them, so it computes what it would have computed before the write, as in an eager framework. The
snapshot is taken just before the target is written, not before the schedule: a computation that
was only a part of a kernel the schedule ran (the product inside a matmul whose sum it stored) has
been freed by then, and needs no copy.

The write costs a copy, unless the kernel that computes a value can store straight into the
target, which is safe when

1. no later kernel of the schedule reads the target's old contents, and
2. the kernel itself reads the target, if at all, only at the element it is about to write: with
   the same view as its store, and outside any reduce (an update fused after the reduce that
   computes its gradient reads the old weight once per output element, just before the store).
   Every element is then read before it is written, and by no one else.

Otherwise the value goes to memory of its own, and is copied into the target after the schedule.
"""

from __future__ import annotations

import functools
from typing import Collection

from tinyedu.core.helpers import debug_level
from tinyedu.core.ops import BufferOps, LazyOp, LoadOps, ReduceOps
from tinyedu.engine.realize import BufferCopy, queueing, run_program, run_schedule
from tinyedu.engine.schedule import ScheduleItem
from tinyedu.engine.schedule_cache import schedules
from tinyedu.lazy import LazyBuffer, pending_readers
from tinyedu.runtime.device import Buffer


class SnapshotCopy(BufferCopy):
    """The copy that keeps old values for pending computations (TinyJit tells it from the step's own work)."""


# --8<-- [start:assign]
def assign(pairs: list[tuple[LazyBuffer, LazyBuffer]]) -> None:
    """Write each value into its target's memory. Targets are writable() memory; values are lazy."""
    targets: list[Buffer] = [target.base.realized for target, _ in pairs]
    if len({id(b) for b in targets}) != len(targets):
        raise ValueError("assign: the same tensor is assigned twice in one update; give each target one "
                         "value")
    values = [_as_base(value) for _, value in pairs]
    work = [(buffer, value) for buffer, value in zip(targets, values, strict=True)
            if value.realized is not buffer]  # (w.assign(w) writes nothing)
    schedule = schedules.schedule([v for _, v in work if v.realized is None])
    stored = {id(item.out) for item in schedule}
    position = {id(item.out): k for k, item in enumerate(schedule)}
    copies: list[tuple[Buffer, LazyBuffer | Buffer]] = []
    for buffer, value in work:
        k = position.pop(id(value), None)  # pop: a value assigned to two targets is written once
        if k is not None and _in_place_is_safe(schedule, k, buffer):
            value.realized = buffer  # run_schedule writes an output that already has memory in place
        elif any(value.realized is b for b in targets):  # another target (a swap): keep its old contents
            copies.append((buffer, _copy_of(value.realized)))
        else:
            copies.append((buffer, value))
    # Old values are kept for pending computations just before each target is written (see the module
    # docstring): by then the schedule has freed the graphs it ran, and a computation that was only
    # part of one of its kernels (the forward product of a matmul whose sum the step stored) is gone.
    kept: set[int] = set()
    queue = queueing(debug_level())  # ASYNC=1: the copies are queued behind the kernels too

    def keep_old_values(buffer: Buffer) -> None:
        if id(buffer) not in kept:
            kept.add(id(buffer))
            snapshot_for_pending_readers(buffer, stored=stored, queue=queue)

    run_schedule(schedule, before_write=keep_old_values)
    for buffer, source in copies:
        keep_old_values(buffer)
        source = source.realized if isinstance(source, LazyBuffer) else source
        run_program(f"copy_{buffer.size}", None, BufferCopy(), [buffer, source], queue)
    for buffer in targets:
        keep_old_values(buffer)  # (one not written, as w.assign(w): its version still changes)
        buffer.version += 1


# --8<-- [end:assign]
def snapshot_for_pending_readers(buffer: Buffer, stored: Collection[int] | None = None,
                                 queue: bool = False) -> None:
    """Computations planned on `buffer` that will not run now (are not `stored` outputs of the schedule
    about to run) read a copy of its current contents from now on. Called before `buffer` is written.
    (`queue`, ASYNC=1: the copy is queued, at its place among the queued kernels.)"""
    pending = [node for node in pending_readers(buffer) if stored is None or id(node) not in stored]
    if not pending:
        return
    snapshot = Buffer(buffer.device, buffer.size, buffer.dtype)
    run_program(f"snapshot_{buffer.size}", None, SnapshotCopy(), [snapshot, buffer], queue)
    for node in pending:
        node.read_old_values(buffer, snapshot)


def _copy_of(buffer: Buffer) -> Buffer:
    copy = Buffer(buffer.device, buffer.size, buffer.dtype)
    run_program(f"copy_{buffer.size}", None, BufferCopy(), [copy, buffer])
    return copy


def _as_base(value: LazyBuffer) -> LazyBuffer:
    """A base whose memory holds `value` in element order (a reordering view gets a copy kernel)."""
    if not value.is_view or (value.st.contiguous and value.size == value.base.size):
        return value.base
    return value.contiguous()


# --8<-- [start:safe]
def _in_place_is_safe(schedule: list[ScheduleItem], k: int, target: Buffer) -> bool:
    """Can kernel k store straight into `target` (rules 1 and 2 of the module docstring)?"""
    if any(inp.realized is target for item in schedule[k + 1:] for inp in item.inputs):
        return False  # rule 1: a later kernel still needs the old contents
    item = schedule[k]
    reads = frozenset(n + 1 for n, inp in enumerate(item.inputs) if inp.realized is target)
    if not reads:
        return True
    return not isinstance(item.ast.op, LoadOps) and _reads_only_where_it_stores(item.ast, reads)


@functools.lru_cache(maxsize=4096)
def _reads_only_where_it_stores(ast: LazyOp, reads: frozenset[int]) -> bool:
    """Rule 2 for the kernel `ast` and the buffers numbered `reads` (the target's numbers): a question
    about the AST alone, so answered once per kernel and remembered (an optimizer asks it for every
    weight, every step, and the answer is a walk over the AST)."""
    store_st = ast.arg.st  # contiguous; a load that is contiguous too reads element k where k is stored
    for node in ast.walk():
        if isinstance(node.op, ReduceOps) and any(leaf.arg.idx in reads for leaf in node.leaves
                                                  if leaf.op is BufferOps.LOAD):
            return False  # read inside a reduce: other output elements would see new values
        if node.op is BufferOps.LOAD and node.arg.idx in reads and not (
                node.arg.st.contiguous and node.arg.st.size == store_st.size):
            return False  # read through another view: some element is read after it was written
    return True
# --8<-- [end:safe]
