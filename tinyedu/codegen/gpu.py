"""The GPU parts of the linearizer (stage 7): thread indices instead of loops, and GROUP's combine.

A GPU runs the kernel's body once per thread. The GLOBAL, LOCAL and GROUP axes of a Kernel are
not loops: each becomes a SPECIAL, the index of this thread's workgroup (`gid`) or of this thread in
its workgroup (`lid`), and the index expressions use it where a CPU kernel uses a loop counter.

A GROUP axis splits a reduce among the threads of a workgroup. Each thread reduces its part with the
usual accumulators; then the partials have to meet:

    shared[local thread, group thread] = my partial     every thread writes its slot
    BARRIER                                             wait until all slots are written
    if group thread == 0:                               one thread per output
        acc = shared[local thread, 0] + ... + [.., G-1] in a fixed order (the same bits every run)
        data0[...] = <the rest of the AST, with acc>    the STORE happens inside the IF
    BARRIER                                             only inside an output loop: the next
                                                        iteration writes the slots again

The linearizer (tinyedu/codegen/linearizer.py) calls these with its Kernel, its UOpBuilder and the
values of its loop variables by name (`loops`); they return what they made.
"""

from __future__ import annotations

from typing import Any

from tinyedu.codegen.kernel import GPU_KINDS, AxisKind, Kernel
from tinyedu.codegen.uops import UOp, UOpBuilder, UOps, lowest_value
from tinyedu.dtype import DType
from tinyedu.helpers import prod
from tinyedu.ops import BinaryOps, ReduceOps


def thread_indices(k: Kernel, b: UOpBuilder) -> dict[str, UOp]:
    """Every GLOBAL, LOCAL and GROUP axis is a SPECIAL, known everywhere in the kernel (by name)."""
    names = k.loop_names
    return {names[axis]: b.special(names[axis], k.full_shape[axis]) for axis in k.axes_of(*GPU_KINDS)}


def _flat_index(k: Kernel, b: UOpBuilder, loops: dict[str, UOp], axes: list[int]) -> UOp:
    """The row-major position of this thread along `axes` (0 when there are none)."""
    index = b.const(0, b.index_dtype)
    for axis in axes:
        index = b.alu(BinaryOps.ADD, b.alu(BinaryOps.MUL, index, b.const(k.full_shape[axis], b.index_dtype)),
                      loops[k.loop_names[axis]])
    return index


# --8<-- [start:group-combine]
def combine_groups(k: Kernel, b: UOpBuilder, loops: dict[str, UOp], dtype: DType,
                   partials: dict[Any, UOp]) -> dict[Any, UOp]:
    """GROUP: every thread's partial (one per output position in `partials`) into shared memory, a
    barrier, then the workgroup's first thread along the GROUP axes combines them, in order. Returns
    the combined values; the IF around them stays open (the STORE goes inside) until `finish_groups`."""
    groups, locals_ = k.axes_of(AxisKind.GROUP), k.axes_of(AxisKind.LOCAL)
    size, slots = prod(k.full_shape[a] for a in groups), len(partials)
    shared = b.define_shared(prod(k.full_shape[a] for a in locals_) * size * slots, dtype)
    mine = _flat_index(k, b, loops, groups)  # this thread's number among the GROUP threads
    first_slot = b.alu(BinaryOps.MUL, _flat_index(k, b, loops, locals_), b.const(size * slots, b.index_dtype))
    for n, partial in enumerate(partials.values()):
        slot = b.alu(BinaryOps.ADD, first_slot, b.const(n, b.index_dtype))
        b.emit(UOps.STORE, None, (shared, _at(b, slot, mine, slots), partial), hoist=False)
    b.barrier()
    b.open_if(b.alu(BinaryOps.CMPEQ, mine, b.const(0, b.index_dtype)))
    op = BinaryOps.ADD if k.reduceop.op is ReduceOps.SUM else BinaryOps.MAX
    combined = {}
    for n, position in enumerate(partials):
        acc = b.define_acc(0 if op is BinaryOps.ADD else lowest_value(dtype), dtype)
        part = b.open_range(f"group{n}", size)
        slot = b.alu(BinaryOps.ADD, first_slot, b.const(n, b.index_dtype))
        value = b.load_shared(shared, _at(b, slot, part, slots), dtype)
        combined[position] = b.assign(acc, b.alu(op, acc, value))
        b.close_range()
    return combined
# --8<-- [end:group-combine]


def _at(b: UOpBuilder, slot: UOp, thread: UOp, slots: int) -> UOp:
    """shared's index of `thread`'s partial in `slot`: slot + thread * slots."""
    return b.alu(BinaryOps.ADD, slot, b.alu(BinaryOps.MUL, thread, b.const(slots, b.index_dtype)))


def finish_groups(b: UOpBuilder, inside_loops: bool) -> None:
    """Close the IF that `combine_groups` opened; inside an output loop, a barrier keeps the next
    iteration's partials from overwriting slots the first thread may still be reading."""
    b.close_if()
    if inside_loops:
        b.barrier()
