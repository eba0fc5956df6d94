"""Differentiable Functions: one per primitive op, forward and backward both on LazyBuffers.

Tensor methods are compositions of these, so autograd only has to know the derivative of each
primitive; the chain rule does the rest. Each backward is written with primitives too, so the
gradient is itself a lazy graph that fuses and compiles like any other computation.

A few ops are Functions without being primitives: their forward is a small graph of primitives
and their backward is written by hand, because the chain rule through that graph would be wrong
at the edges (an inf * 0 in a saturated sigmoid, a 0/0 at a kink). They live in
tinyedu/function_composite.py, each with a docstring that says why.

`backward` returns one gradient per input (None where that input needs no gradient).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from .dtype import DType
from .ops import BinaryOps, ReduceOps, TernaryOps, UnaryOps

if TYPE_CHECKING:  # (for the annotations only: the full library brings its own LazyBuffer)
    from .lazy import LazyBuffer


# --8<-- [start:function]
class Function:
    """The context an op keeps for its backward pass: which inputs need a gradient, and saved values."""

    def __init__(self, needs_input_grad: tuple[bool, ...]):
        self.needs_input_grad = needs_input_grad

    def forward(self, *args: Any, **kwargs: Any) -> LazyBuffer:
        raise NotImplementedError(f"{type(self).__name__}.forward")

    def backward(self, grad: LazyBuffer) -> LazyBuffer | None | tuple[LazyBuffer | None, ...]:
        raise NotImplementedError(f"{type(self).__name__} has no gradient")


# --8<-- [end:function]
# ---- unary ----
class Contiguous(Function):
    def forward(self, x: LazyBuffer, copy: bool = False) -> LazyBuffer:
        return x.copy() if copy else x.contiguous()

    def backward(self, grad: LazyBuffer) -> LazyBuffer:
        return grad


class Cast(Function):
    def forward(self, x: LazyBuffer, dtype: DType) -> LazyBuffer:
        self.input_dtype = x.dtype
        return x.cast(dtype)

    def backward(self, grad: LazyBuffer) -> LazyBuffer:
        return grad.cast(self.input_dtype)


class Neg(Function):
    def forward(self, x: LazyBuffer) -> LazyBuffer:
        return x.e(UnaryOps.NEG)

    def backward(self, grad: LazyBuffer) -> LazyBuffer:
        return grad.e(UnaryOps.NEG)


class Reciprocal(Function):
    def forward(self, x: LazyBuffer) -> LazyBuffer:
        self.ret = x.e(UnaryOps.RECIP)
        return self.ret

    def backward(self, grad: LazyBuffer) -> LazyBuffer:  # d(1/x) = -1/x^2 = -ret*ret
        # ret*ret first, as PyTorch: where it overflows and grad is 0, both give NaN (not -0.0)
        return grad.e(UnaryOps.NEG).e(BinaryOps.MUL, self.ret.e(BinaryOps.MUL, self.ret))


class Sin(Function):
    def forward(self, x: LazyBuffer) -> LazyBuffer:
        self.x = x
        return x.e(UnaryOps.SIN)

    def backward(self, grad: LazyBuffer) -> LazyBuffer:
        return self.x.e(UnaryOps.COS).e(BinaryOps.MUL, grad)


class Cos(Function):
    """A primitive, not sin(pi/2 - x): see tinyedu/core/ops.py for why that loses accuracy for large x."""

    def forward(self, x: LazyBuffer) -> LazyBuffer:
        self.x = x
        return x.e(UnaryOps.COS)

    def backward(self, grad: LazyBuffer) -> LazyBuffer:  # d cos(x) = -sin(x)
        return self.x.e(UnaryOps.SIN).e(UnaryOps.NEG).e(BinaryOps.MUL, grad)


class Exp2(Function):
    def forward(self, x: LazyBuffer) -> LazyBuffer:
        self.ret = x.e(UnaryOps.EXP2)
        return self.ret

    def backward(self, grad: LazyBuffer) -> LazyBuffer:  # d 2^x = 2^x ln 2
        return self.ret.e(BinaryOps.MUL, self.ret.const(math.log(2))).e(BinaryOps.MUL, grad)


class Log2(Function):
    def forward(self, x: LazyBuffer) -> LazyBuffer:
        self.x = x
        return x.e(UnaryOps.LOG2)

    def backward(self, grad: LazyBuffer) -> LazyBuffer:  # d log2(x) = 1 / (x ln 2)
        # (grad / x) * log2(e), not grad / (x * ln 2): for a subnormal x the product x * ln 2 rounds
        # to a coarser subnormal (1.4e-45 * ln 2 rounds back to 1.4e-45), which made the gradient 31%
        # too small; grad / x is one correctly rounded division, and its result is normal.
        return grad.e(BinaryOps.DIV, self.x).e(BinaryOps.MUL, self.x.const(1 / math.log(2)))


class Sqrt(Function):
    def forward(self, x: LazyBuffer) -> LazyBuffer:
        self.ret = x.e(UnaryOps.SQRT)
        return self.ret

    def backward(self, grad: LazyBuffer) -> LazyBuffer:  # d sqrt(x) = 1 / (2 sqrt(x))
        return grad.e(BinaryOps.DIV, self.ret.e(BinaryOps.MUL, self.ret.const(2)))


# ---- binary ----
class Less(Function):
    def forward(self, x: LazyBuffer, y: LazyBuffer) -> LazyBuffer:
        return x.e(BinaryOps.CMPLT, y)


class Eq(Function):
    def forward(self, x: LazyBuffer, y: LazyBuffer) -> LazyBuffer:
        return x.e(BinaryOps.CMPEQ, y)


class BitwiseAnd(Function):  # integers and bools only, so never differentiated
    def forward(self, x: LazyBuffer, y: LazyBuffer) -> LazyBuffer:
        return x.e(BinaryOps.AND, y)


class BitwiseOr(Function):
    def forward(self, x: LazyBuffer, y: LazyBuffer) -> LazyBuffer:
        return x.e(BinaryOps.OR, y)


class BitwiseXor(Function):
    def forward(self, x: LazyBuffer, y: LazyBuffer) -> LazyBuffer:
        return x.e(BinaryOps.XOR, y)


class Mod(Function):
    """fmod: x - trunc(x/y)*y. Away from the jumps, d/dx = 1 and d/dy = -trunc(x/y)."""

    def forward(self, x: LazyBuffer, y: LazyBuffer) -> LazyBuffer:
        self.x, self.y = x, y
        self.ret = x.e(BinaryOps.MOD, y)
        return self.ret

    def backward(self, grad: LazyBuffer) -> tuple[LazyBuffer | None, ...]:
        dy = None
        if self.needs_input_grad[1]:  # trunc(x/y) = (x - fmod(x, y)) / y, exact up to rounding
            quotient = self.x.e(BinaryOps.SUB, self.ret).e(BinaryOps.DIV, self.y)
            dy = quotient.e(UnaryOps.NEG).e(BinaryOps.MUL, grad)
        return (grad if self.needs_input_grad[0] else None, dy)


class Add(Function):
    def forward(self, x: LazyBuffer, y: LazyBuffer) -> LazyBuffer:
        return x.e(BinaryOps.ADD, y)

    def backward(self, grad: LazyBuffer) -> tuple[LazyBuffer | None, ...]:
        return (grad if self.needs_input_grad[0] else None, grad if self.needs_input_grad[1] else None)


class Sub(Function):
    def forward(self, x: LazyBuffer, y: LazyBuffer) -> LazyBuffer:
        return x.e(BinaryOps.SUB, y)

    def backward(self, grad: LazyBuffer) -> tuple[LazyBuffer | None, ...]:
        return (grad if self.needs_input_grad[0] else None,
                grad.e(UnaryOps.NEG) if self.needs_input_grad[1] else None)


# --8<-- [start:mul]
class Mul(Function):
    def forward(self, x: LazyBuffer, y: LazyBuffer) -> LazyBuffer:
        self.x, self.y = x, y
        return x.e(BinaryOps.MUL, y)

    def backward(self, grad: LazyBuffer) -> tuple[LazyBuffer | None, ...]:
        return (self.y.e(BinaryOps.MUL, grad) if self.needs_input_grad[0] else None,
                self.x.e(BinaryOps.MUL, grad) if self.needs_input_grad[1] else None)


# --8<-- [end:mul]
class Div(Function):
    def forward(self, x: LazyBuffer, y: LazyBuffer) -> LazyBuffer:
        self.x, self.y = x, y
        return x.e(BinaryOps.DIV, y)

    def backward(self, grad: LazyBuffer) -> tuple[LazyBuffer | None, ...]:
        # d(x/y)/dx = 1/y ; d(x/y)/dy = -x/y^2, computed as -(x/y)/y: y*y would underflow to 0 for
        # |y| < 1e-19 and give 0/0 = NaN where the answer is finite (PyTorch divides twice too).
        dx = grad.e(BinaryOps.DIV, self.y) if self.needs_input_grad[0] else None
        dy = None
        if self.needs_input_grad[1]:
            quotient_over_y = self.x.e(BinaryOps.DIV, self.y).e(BinaryOps.DIV, self.y)
            dy = grad.e(UnaryOps.NEG).e(BinaryOps.MUL, quotient_over_y)
        return dx, dy


class Maximum(Function):
    """max(x, y). The gradient goes to the side that is not smaller; on a tie it is split in half.
    Both sides get it where a NaN is involved (neither is smaller): PyTorch's rule."""

    def forward(self, x: LazyBuffer, y: LazyBuffer) -> LazyBuffer:
        self.x, self.y = x, y
        # MAX returns its second operand on a tie (as np.maximum); PyTorch's maximum returns the
        # first (maximum(-0.0, 0.0) is -0.0), so the operands go in swapped. NaN still wins.
        return y.e(BinaryOps.MAX, x)

    def backward(self, grad: LazyBuffer) -> tuple[LazyBuffer | None, ...]:
        # The gradient is *selected* (where), not multiplied by a 0/1 mask: an infinite gradient
        # must give 0 to the side that lost, not 0 * inf = NaN.
        half, zero = grad.e(BinaryOps.MUL, grad.const(0.5)), grad.const(0)
        tie = self.x.e(BinaryOps.CMPEQ, self.y)

        def share(loses: LazyBuffer) -> LazyBuffer:
            return loses.e(TernaryOps.WHERE, zero, tie.e(TernaryOps.WHERE, half, grad))

        return (share(self.x.e(BinaryOps.CMPLT, self.y)) if self.needs_input_grad[0] else None,
                share(self.y.e(BinaryOps.CMPLT, self.x)) if self.needs_input_grad[1] else None)


# ---- ternary ----
class Where(Function):
    def forward(self, condition: LazyBuffer, x: LazyBuffer, y: LazyBuffer) -> LazyBuffer:
        self.condition = condition
        return condition.e(TernaryOps.WHERE, x, y)

    def backward(self, grad: LazyBuffer) -> tuple[LazyBuffer | None, ...]:
        zero = grad.const(0)
        return (None,
                self.condition.e(TernaryOps.WHERE, grad, zero) if self.needs_input_grad[1] else None,
                self.condition.e(TernaryOps.WHERE, zero, grad) if self.needs_input_grad[2] else None)


# ---- reduce ----
# --8<-- [start:reduce]
class Sum(Function):
    def forward(self, x: LazyBuffer, axes: tuple[int, ...]) -> LazyBuffer:
        self.input_shape = x.shape
        return x.r(ReduceOps.SUM, axes)

    def backward(self, grad: LazyBuffer) -> LazyBuffer:
        return grad.expand(self.input_shape)


class Max(Function):
    """The maximum along axes. Where several elements tie for the max, they share the gradient; a
    NaN max (MAX keeps NaN) goes to the NaNs, as PyTorch's max() does: x == NaN is False everywhere,
    and the share 0/0 would make the whole gradient NaN."""

    def forward(self, x: LazyBuffer, axes: tuple[int, ...]) -> LazyBuffer:
        self.x, self.axes = x, axes
        self.ret = x.r(ReduceOps.MAX, axes)
        return self.ret

    def backward(self, grad: LazyBuffer) -> LazyBuffer:
        ret = self.ret.expand(self.x.shape)
        either_a_number = self.x.e(BinaryOps.CMPEQ, self.x).e(BinaryOps.OR, ret.e(BinaryOps.CMPEQ, ret))
        both_nan = either_a_number.e(BinaryOps.CMPEQ, either_a_number.const(False))
        is_max = self.x.e(BinaryOps.CMPEQ, ret).e(BinaryOps.OR, both_nan).cast(grad.dtype)
        count = is_max.r(ReduceOps.SUM, self.axes)
        share = is_max.e(BinaryOps.DIV, count.expand(self.x.shape))
        return share.e(BinaryOps.MUL, grad.expand(self.x.shape))


# --8<-- [end:reduce]
# ---- movement: each backward is the inverse movement ----
class Reshape(Function):
    def forward(self, x: LazyBuffer, shape: tuple[int, ...]) -> LazyBuffer:
        self.input_shape = x.shape
        return x.reshape(shape)

    def backward(self, grad: LazyBuffer) -> LazyBuffer:
        return grad.reshape(self.input_shape)


class Permute(Function):
    def forward(self, x: LazyBuffer, order: tuple[int, ...]) -> LazyBuffer:
        self.order = order
        return x.permute(order)

    def backward(self, grad: LazyBuffer) -> LazyBuffer:
        inverse = tuple(sorted(range(len(self.order)), key=self.order.__getitem__))
        return grad.permute(inverse)


# --8<-- [start:expand]
class Expand(Function):
    def forward(self, x: LazyBuffer, shape: tuple[int, ...]) -> LazyBuffer:
        self.input_shape = x.shape
        return x.expand(shape)

    def backward(self, grad: LazyBuffer) -> LazyBuffer:  # every copy sends its gradient back: a sum
        axes = tuple(i for i, (a, b) in enumerate(zip(self.input_shape, grad.shape, strict=True)) if a != b)
        return grad.r(ReduceOps.SUM, axes)


# --8<-- [end:expand]
class Pad(Function):
    def forward(self, x: LazyBuffer, padding: tuple[tuple[int, int], ...]) -> LazyBuffer:
        self.bounds = tuple((lo, lo + s) for s, (lo, _) in zip(x.shape, padding, strict=True))
        return x.pad(padding)

    def backward(self, grad: LazyBuffer) -> LazyBuffer:
        return grad.shrink(self.bounds)


class Shrink(Function):
    def forward(self, x: LazyBuffer, bounds: tuple[tuple[int, int], ...]) -> LazyBuffer:
        self.padding = tuple((lo, s - hi) for s, (lo, hi) in zip(x.shape, bounds, strict=True))
        return x.shrink(bounds)

    def backward(self, grad: LazyBuffer) -> LazyBuffer:
        return grad.pad(self.padding)


