"""Chapter 14 (many devices): reference solutions, and typical mistakes with the hint they get."""

from __future__ import annotations

from tinyedu.exercises.registry import Mistake
from tinyedu.multi import allreduce, lazy

# --8<-- [start:reduce_scatter_step]
reduce_scatter_step = allreduce.reduce_scatter_step
# --8<-- [end:reduce_scatter_step]

# --8<-- [start:reshaped_axis]
reshaped_axis = lazy.reshaped_axis
# --8<-- [end:reshaped_axis]

# --8<-- [start:which_communicate]
# col_sum and gram sum over the sharded axis (an all-reduce); transpose_flatten mixes the devices' rows
# and first_rows leaves the second device nothing (both gather first)
which_communicate = {"col_sum", "transpose_flatten", "first_rows", "gram"}
# --8<-- [end:which_communicate]


def _without_copy(chunks, step, op="sum"):
    n = len(chunks)
    for i in range(n):
        c = (i - step) % n
        if chunks[i][c] is not None:
            j = (i + 1) % n
            chunks[j][c] = allreduce.combine(op, chunks[i][c], chunks[j][c])


def _wrong_chunk(chunks, step, op="sum"):
    n = len(chunks)
    for i in range(n):
        c = (i + step) % n
        if chunks[i][c] is not None:
            j = (i + 1) % n
            received = chunks[i][c].copy_to_device(chunks[j][c].device)
            chunks[j][c] = allreduce.combine(op, received, chunks[j][c])


def _replace_not_add(chunks, step, op="sum"):
    n = len(chunks)
    for i in range(n):
        c = (i - step) % n
        if chunks[i][c] is not None:
            j = (i + 1) % n
            chunks[j][c] = chunks[i][c].copy_to_device(chunks[j][c].device)


def _never_gathers(old, axis, sizes, new):
    kept = next(((k, list(sizes)) for k in range(len(new)) if new[k] == old[axis]), None)
    return kept or (axis, list(sizes))


MISTAKES = [
    Mistake("14.reduce_scatter_step", _without_copy, "copy_to_device", "adds a chunk from another device"),
    Mistake("14.reduce_scatter_step", _wrong_chunk, "sends its chunk (i - s) mod n", "sends the wrong chunk"),
    Mistake("14.reduce_scatter_step", _replace_not_add, "combines it with its own chunk", "replaces, no sum"),
    Mistake("14.reshaped_axis", _never_gathers, "a block of sizes[i]", "never gathers"),
    Mistake("14.which_communicate", {"col_sum", "gram", "transpose_flatten"}, "first_rows communicates",
            "misses a shrink that empties a device"),
    Mistake("14.which_communicate", {"col_sum", "gram", "transpose_flatten", "first_rows", "row_sum"},
            "row_sum runs shard by shard", "a sum over an axis that is not sharded"),
]
