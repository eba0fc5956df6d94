"""Chapter 04 (the linearizer and UOps): reference solutions, and typical mistakes with their hints."""

from __future__ import annotations

from tinyedu.codegen.linearizer import Linearizer
from tinyedu.core.dtype import dtypes
from tinyedu.core.ops import BinaryOps, ReduceOps
from tinyedu.core.uops import UOpBuilder, UOps, lowest_value
from tinyedu.exercises.registry import Mistake

# --8<-- [start:loop_bounds]
loop_bounds = {
    "row_sums_of_transpose": [6, 4],  # a.T is (6, 4): 6 outputs, each a sum of 4
    "matmul": [6, 6, 4],              # (6, 4) @ (4, 6): a (6, 6) output, each a sum over k = 4
    "size_one_axis": [4, 6],          # the size-1 axis makes no loop
}
# --8<-- [end:loop_bounds]

# --8<-- [start:load_counts]
load_counts = {
    "a_three_times": 1,   # a is read three times (six in the AST: relu repeats its input), one view: 1 LOAD
    "a_and_its_flip": 2,  # two views of a read different elements at one loop position
    "two_pads_of_a": 3,   # two views of a, one of b
}
# --8<-- [end:load_counts]


# --8<-- [start:simplify]
simplify = UOpBuilder._simplify
# --8<-- [end:simplify]


# --8<-- [start:lower_plain_reduce]
lower_plain_reduce = Linearizer.lower_plain_reduce
# --8<-- [end:lower_plain_reduce]


# ---- typical mistakes -------------------------------------------------------------------------------
def _simplify_python_division(self, op, src, dtype):
    a, b = src if len(src) == 2 else (None, None)
    both_const = a is not None and a.op is UOps.CONST and b.op is UOps.CONST
    if both_const and op is BinaryOps.DIV and not dtype.is_float:
        return self.const(a.arg // b.arg, dtype)
    return simplify(self, op, src, dtype)


def _simplify_floats_too(self, op, src, dtype):
    if len(src) == 2 and src[1].op is UOps.CONST and src[1].arg == 0 and op is BinaryOps.ADD:
        return src[0]
    return simplify(self, op, src, dtype)


def _simplify_one_side(self, op, src, dtype):
    if len(src) == 2 and src[0].op is UOps.CONST and src[0].arg in (0, 1) and src[1].op is not UOps.CONST:
        return None  # only looks for the constant on the right
    return simplify(self, op, src, dtype)


def _simplify_bool_sum(self, op, src, dtype):
    if dtype == dtypes.bool and all(s.op is UOps.CONST for s in src) and op is BinaryOps.ADD:
        return self.const(int(src[0].arg) + int(src[1].arg), dtypes.int32)
    return simplify(self, op, src, dtype)


def _lower_reduce_with(identity_zero=False, combine=None, open_first_only=False, close=True, assign=True):
    def lower(self, reduce):
        k, b = self.kernel, self.b
        dtype = self._dtype(reduce.src[0])
        identity = 0 if (reduce.op is ReduceOps.SUM or identity_zero) else lowest_value(dtype)
        acc = b.define_acc(identity, dtype)
        names, sizes = k.loop_names[k.first_reduce:], k.full_shape[k.first_reduce:]
        if open_first_only:
            names, sizes = names[:1], sizes[:1]
        for name, size in zip(names, sizes, strict=True):
            self.loops[name] = b.open_range(name, size)
        x = self.lower(reduce.src[0])
        op = combine or (BinaryOps.ADD if reduce.op is ReduceOps.SUM else BinaryOps.MAX)
        value = b.alu(op, acc, x)
        result = b.assign(acc, value) if assign else value
        for _ in names if close else names[1:]:
            b.close_range()
        return result
    return lower


MISTAKES = [
    Mistake("04.loop_bounds", dict(loop_bounds, row_sums_of_transpose=[4, 6]), "wrong order"),
    Mistake("04.loop_bounds", dict(loop_bounds, size_one_axis=[4, 1, 6]), "size 1"),
    Mistake("04.loop_bounds", dict(loop_bounds, matmul=[6, 6]), "more loops than 2"),
    Mistake("04.load_count", dict(load_counts, a_three_times=3), "computed once"),
    Mistake("04.load_count", dict(load_counts, a_and_its_flip=1), "two different views"),
    Mistake("04.simplify", _simplify_python_division, "rounds toward zero in C"),
    Mistake("04.simplify", _simplify_floats_too, "x + 0.0 is not x"),
    Mistake("04.simplify", _simplify_one_side, "the constant can be first"),
    Mistake("04.simplify", _simplify_bool_sum, "for bools ADD is OR"),
    Mistake("04.simplify", lambda self, op, src, dtype: None, "x*1 is x"),
    Mistake("04.lower_reduce", _lower_reduce_with(identity_zero=True), "your maxima are all 0"),
    Mistake("04.lower_reduce", _lower_reduce_with(combine=BinaryOps.ADD), "combines the accumulator and each "
            "element with BinaryOps.MAX"),
    Mistake("04.lower_reduce", _lower_reduce_with(open_first_only=True), "open one RANGE per reduce axis"),
    Mistake("04.lower_reduce", _lower_reduce_with(close=False), "close every loop you open"),
    Mistake("04.lower_reduce", _lower_reduce_with(assign=False), "not an ASSIGN"),
]
