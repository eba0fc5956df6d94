"""Chapter 03 (the lazy graph and the scheduler): reference solutions, and typical mistakes."""

from __future__ import annotations

from tinyedu.core.ops import BinaryOps, TernaryOps, UnaryOps
from tinyedu.engine import schedule
from tinyedu.exercises.registry import Mistake

# --8<-- [start:kernel_counts]
kernel_counts = {
    "centered_square_sum": 2,  # the row mean is broadcast back over its row (rule 4), then one sum
    "two_reductions": 2,       # two reduces never share a kernel: one is stored (rule 4); a * 3 is recomputed
    "padded_log": 2,           # log(0) is not 0: the log is stored before it is padded (rule 6)
    "views_then_sum": 1,       # transposes and flips are views: they fuse into the loads (rule 3)
    "normalize_rows": 3,       # mean and variance are reduces broadcast back (rule 4), then the output
}
# --8<-- [end:kernel_counts]


# --8<-- [start:keeps_zero]
def keeps_zero(op) -> bool:
    # f(0, ..., 0) == 0: -0, sin 0, sqrt 0, a cast of 0, 0+0, 0-0, 0*0, max(0, 0), (0 < 0) = false,
    # 0 & 0, 0 | 0, 0 ^ 0, where(0, 0, 0). Not: 2**0 = 1, cos 0 = 1, log2 0 = -inf, 1/0 = inf,
    # 0/0 = nan, fmod(0, 0) = nan, (0 == 0) = true.
    return op in {UnaryOps.NEG, UnaryOps.SIN, UnaryOps.SQRT, UnaryOps.CAST, BinaryOps.ADD, BinaryOps.SUB,
                  BinaryOps.MUL, BinaryOps.MAX, BinaryOps.CMPLT, BinaryOps.AND, BinaryOps.OR, BinaryOps.XOR,
                  TernaryOps.WHERE}
# --8<-- [end:keeps_zero]


# --8<-- [start:store_is_cheaper]
# store: write it once, read it in every kernel (size + kernels * size); recompute: read its inputs
# again in every kernel (kernels * leaf_elements). Read by one kernel: inline it; a reduce: store it
store_is_cheaper = schedule.store_is_cheaper
# --8<-- [end:store_is_cheaper]


# ---- typical mistakes -------------------------------------------------------------------------------
def _keeps_zero_with(*flipped):
    return lambda op: keeps_zero(op) != (op in flipped)


def _store_without_write(kernels, leaf_elements, size, has_reduce):
    return kernels > 1 and (has_reduce or kernels * leaf_elements > kernels * size)


def _store_ignores_reduce(kernels, leaf_elements, size, has_reduce):
    return kernels > 1 and kernels * leaf_elements > size * (1 + kernels)


def _store_always_when_shared(kernels, leaf_elements, size, has_reduce):
    return kernels > 1


def _store_even_one_kernel(kernels, leaf_elements, size, has_reduce):
    return has_reduce or kernels * leaf_elements > size * (1 + kernels)


MISTAKES = [
    Mistake("03.kernel_count", dict(kernel_counts, two_reductions=1), "more kernels than 1"),
    Mistake("03.kernel_count", dict(kernel_counts, normalize_rows=1), "rule 4"),
    Mistake("03.kernel_count", dict(kernel_counts, views_then_sum=3), "fewer kernels than 3"),
    Mistake("03.kernel_count", {"padded_log": 2}, "one prediction per expression"),
    Mistake("03.keeps_zero", _keeps_zero_with(UnaryOps.EXP2), "what is 2**0?", "exp2 called zero-preserving"),
    Mistake("03.keeps_zero", _keeps_zero_with(BinaryOps.CMPEQ), "is 0 == 0 true"),
    Mistake("03.keeps_zero", _keeps_zero_with(BinaryOps.CMPLT), "is 0 < 0 true"),
    Mistake("03.keeps_zero", _keeps_zero_with(BinaryOps.DIV), "0.0 / 0.0"),
    Mistake("03.keeps_zero", _keeps_zero_with(UnaryOps.NEG), "what is -0?"),
    Mistake("03.keeps_zero", _keeps_zero_with(UnaryOps.COS), "what is cos(0)?", "cos treated like sin"),
    Mistake("03.keeps_zero", lambda op: 1, "must return True or False"),
    Mistake("03.store_is_cheaper", _store_without_write, "storing costs a write too"),
    Mistake("03.store_is_cheaper", _store_ignores_reduce, "never recomputed"),
    Mistake("03.store_is_cheaper", _store_always_when_shared, "count the elements moved"),
    Mistake("03.store_is_cheaper", _store_even_one_kernel, "read by one kernel only"),
]
