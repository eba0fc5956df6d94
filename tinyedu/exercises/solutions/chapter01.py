"""Chapter 01 (tensors and autograd): reference solutions, and typical mistakes with the hint they get."""

from __future__ import annotations

from tinyedu.core import function
from tinyedu.core.ops import BinaryOps, ReduceOps
from tinyedu.exercises.registry import Mistake

# --8<-- [start:broadcast_shapes]
# Line the shapes up on the right, pad the shorter with 1s; each axis must match or be 1.
broadcast_shapes = {
    ((3, 1, 5), (4, 5)): (3, 4, 5),         # (3, 1, 5) and (1, 4, 5)
    ((2, 3), (3, 2)): None,                 # 3 vs 2 on the last axis: neither is 1
    ((8, 1, 6, 1), (7, 1, 5)): (8, 7, 6, 5),  # (8, 1, 6, 1) and (1, 7, 1, 5)
}
# --8<-- [end:broadcast_shapes]


# --8<-- [start:mish]
def mish(x):
    return x * x.softplus().tanh()  # autograd composes the backward from the primitives
# --8<-- [end:mish]


# --8<-- [start:Mul]
Mul = function.Mul
# --8<-- [end:Mul]


# --8<-- [start:Expand]
# every copy made by the expand sends its gradient back: sum over the stretched axes
Expand = function.Expand
# --8<-- [end:Expand]


# ---- typical mistakes -------------------------------------------------------------------------------
class _MulSwapped(Mul):
    def backward(self, grad):
        return self.x.e(BinaryOps.MUL, grad), self.y.e(BinaryOps.MUL, grad)


class _MulNoChain(Mul):
    def backward(self, grad):
        return self.y, self.x


class _MulAdds(Mul):
    def forward(self, x, y):
        self.x, self.y = x, y
        return x.e(BinaryOps.ADD, y)


class _MulIgnoresNeeds(Mul):
    def backward(self, grad):
        return self.y.e(BinaryOps.MUL, grad), self.x.e(BinaryOps.MUL, grad)


class _MulOneGradient(Mul):
    def backward(self, grad):
        return self.y.e(BinaryOps.MUL, grad)


class _ExpandIdentity(Expand):
    def backward(self, grad):
        return grad


class _ExpandMax(Expand):
    def backward(self, grad):
        axes = tuple(i for i, (a, b) in enumerate(zip(self.input_shape, grad.shape, strict=True)) if a != b)
        return grad.r(ReduceOps.MAX, axes)


class _ExpandSumsAll(Expand):
    def backward(self, grad):
        return grad.r(ReduceOps.SUM, tuple(range(len(grad.shape))))


class _ExpandLeadingAxesOnly(Expand):
    def backward(self, grad):  # as if expand only ever added axes in front
        return grad.r(ReduceOps.SUM, tuple(range(len(grad.shape) - len(self.input_shape))))


MISTAKES = [
    Mistake("01.broadcast_shape", broadcast_shapes | {((3, 1, 5), (4, 5)): (3, 1, 5)},
            "Line the shapes up on the right"),
    Mistake("01.broadcast_shape", broadcast_shapes | {((2, 3), (3, 2)): (3, 3)}, "the answer is None"),
    Mistake("01.broadcast_shape", {((3, 1, 5), (4, 5)): (3, 4, 5)}, "one entry per pair of shapes"),
    Mistake("01.mish", lambda x: x.softplus().tanh(), "values are off"),
    Mistake("01.mish", lambda x: (x * x.softplus().tanh()).sum(), "Tensor of the input's shape"),
    Mistake("01.mul", _MulSwapped, "you swapped them"),
    Mistake("01.mul", _MulNoChain, "multiply by grad"),
    Mistake("01.mul", _MulAdds, "you added instead"),
    Mistake("01.mul", _MulIgnoresNeeds, "return None where needs_input_grad is False"),
    Mistake("01.mul", _MulOneGradient, "one gradient per input"),
    Mistake("01.mul", lambda x, y: x, "subclasses Function"),
    Mistake("01.expand", _ExpandIdentity, "it must have the input's shape (2, 1)"),
    Mistake("01.expand", _ExpandSumsAll, "it must have the input's shape (2, 1)"),
    Mistake("01.expand", _ExpandMax, "SUM, not MAX"),
    Mistake("01.expand", _ExpandLeadingAxesOnly, "it must have the input's shape (2, 1)"),
]
