"""Chapter 06 (kernel optimizations): reference solutions, and typical mistakes with the hint they get."""

from __future__ import annotations

from tinyedu.codegen.kernel import AxisKind, Kernel
from tinyedu.codegen.opts import Opt, OptOps
from tinyedu.exercises.registry import Mistake


# --8<-- [start:upcast]
def upcast(k: Kernel, axis: int, amount: int) -> None:
    k.split_axis(axis, amount)                     # axis -> (n // amount, amount): two axes, both loops
    first_expanded = min(k.expanded_axes, default=len(k.full_shape))
    k.move_axis(axis + 1, first_expanded - 1, AxisKind.UPCAST)  # the amount part, to the front of the
    # expanded axes: the first UPCAST applied stays innermost (a later one splits what is left outside it)
# --8<-- [end:upcast]


# --8<-- [start:matmul_opts]
def matmul_opts(kernel: Kernel) -> list[Opt]:
    # full shape (512 rows i, 512 columns j, 512 k): a vector of 16 columns (B and the output are
    # contiguous along j), 2 such vectors, 8 rows: 16 accumulators, each B vector used by 8 rows
    return [Opt(OptOps.UPCAST, 1, 16), Opt(OptOps.UPCAST, 1, 2), Opt(OptOps.UPCAST, 0, 8)]
# --8<-- [end:matmul_opts]


# --8<-- [start:prediction]
# 64 columns = a loop of 4, times 16 lanes; x and y are each one vector load; the 2 is broadcast once
prediction = {"loop sizes": [16, 4], "vector type": "floatx16", "vector loads": 2, "broadcasts": 1}
# --8<-- [end:prediction]


# --8<-- [start:accumulators]
# matmul: expanded axes (4 rows, 2 column vectors, 16 lanes): 4 x 2 = 8 vector accumulators;
# sum: (4 unrolled steps, 16 lanes): 4 vector accumulators
accumulators = {"matmul": 8, "sum": 4}
# --8<-- [end:accumulators]


def _upcast_at_the_end(k: Kernel, axis: int, amount: int) -> None:
    k.split_axis(axis, amount)
    k.move_axis(axis + 1, len(k.full_shape) - 1, AxisKind.UPCAST)


def _upcast_outer_part(k: Kernel, axis: int, amount: int) -> None:
    k.split_axis(axis, amount)
    first_expanded = min(k.expanded_axes, default=len(k.full_shape))
    k.move_axis(axis, first_expanded - 1, AxisKind.UPCAST)


def _upcast_as_a_loop(k: Kernel, axis: int, amount: int) -> None:
    k.split_axis(axis, amount)
    first_expanded = min(k.expanded_axes, default=len(k.full_shape))
    k.move_axis(axis + 1, first_expanded - 1, AxisKind.LOOP)


def _upcast_wrong_split(k: Kernel, axis: int, amount: int) -> None:
    k.split_axis(axis, k.full_shape[axis] // amount)
    first_expanded = min(k.expanded_axes, default=len(k.full_shape))
    k.move_axis(axis + 1, first_expanded - 1, AxisKind.UPCAST)


def _not_implemented(kernel: Kernel) -> list[Opt]:
    return []


MISTAKES = [
    Mistake("06.upcast", _upcast_at_the_end, "to the *front* of the expanded axes", "appended innermost"),
    Mistake("06.upcast", _upcast_outer_part, "the *inner* part", "moved the n // amount part"),
    Mistake("06.upcast", _upcast_as_a_loop, "AxisKind.UPCAST", "kept it a loop"),
    Mistake("06.upcast", _upcast_wrong_split, "must be `amount` long", "split(n // amount)"),
    Mistake("06.fast_matmul", _not_implemented, "this is the kernel as written"),
    Mistake("06.fast_matmul", lambda k: [Opt(OptOps.UPCAST, 1, 16)], "a vector alone reuses nothing"),
    Mistake("06.fast_matmul", lambda k: [Opt(OptOps.UPCAST, 2, 4)], "these opts do not apply"),
    Mistake("06.fast_matmul", lambda k: [Opt(OptOps.UNROLL, 2, 16)],
            "nothing is a vector along j", "a vector along k only"),
    Mistake("06.fast_matmul", lambda k: "UPCAST", "must return a list of Opt"),
    Mistake("06.upcast_c", dict(prediction, **{"loop sizes": [16, 64]}), "an UPCAST axis is no loop"),
    Mistake("06.upcast_c", dict(prediction, **{"vector loads": 3}), "how many buffers does x * 2 + y read"),
    Mistake("06.upcast_c", dict(prediction, **{"broadcasts": 0}), "the same in every lane"),
    Mistake("06.upcast_c", dict(prediction, **{"vector type": "float16"}), "named after its lanes"),
    Mistake("06.upcast_c", {"loop sizes": [16, 4]}, "exactly the keys"),
    Mistake("06.accumulators", {"matmul": 128, "sum": 64}, "the vector axis, which lives inside"),
    Mistake("06.accumulators", {"matmul": 8, "sum": 1}, "sum: not 1"),
]
