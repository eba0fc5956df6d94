"""Functions the full library adds to the core's primitives (tinyedu/core/function.py).

They plug in the same way as every Function: a forward and a backward on LazyBuffers, applied with
`Tensor._apply`. Copy moves a value to another device (its gradient comes back); Flat keeps a step
function (floor, sign, x // y) in the graph with a zero gradient; ContiguousBackward makes the
gradient contiguous; Stride is the sixth movement op (every k-th element, a flip when k < 0).
"""

from __future__ import annotations

from tinyedu.core.function import Function
from tinyedu.lazy import LazyBuffer


class ContiguousBackward(Function):
    def forward(self, x: LazyBuffer) -> LazyBuffer:
        return x

    def backward(self, grad: LazyBuffer) -> LazyBuffer:
        return grad.contiguous()


class Copy(Function):
    """Tensor.to(device): the gradient goes back to the device the input lives on."""

    def forward(self, x: LazyBuffer, device: str) -> LazyBuffer:
        self.input_device = x.device
        return x.copy_to_device(device)

    def backward(self, grad: LazyBuffer) -> LazyBuffer:
        return grad.copy_to_device(self.input_device)


# --8<-- [start:flat]
class Flat(Function):
    """A step function (sign, floor, round, x // y, x ** 0...): its value is computed elsewhere,
    without gradient, and passed in; its derivative is 0 wherever it exists, and PyTorch uses 0 at
    the jumps too. Being a Function keeps it in the graph: the inputs get a zero gradient rather
    than none, and backward() through it works."""

    def forward(self, *inputs: LazyBuffer, value: LazyBuffer) -> LazyBuffer:
        self.input_shapes = [x.shape for x in inputs]
        return value

    def backward(self, grad: LazyBuffer) -> tuple[LazyBuffer, ...]:
        return tuple(grad.const(0, shape) for shape in self.input_shapes)


# --8<-- [end:flat]


class Stride(Function):
    """Take every k-th element along each axis (k < 0 walks backwards: a flip)."""

    def forward(self, x: LazyBuffer, steps: tuple[int, ...]) -> LazyBuffer:
        self.input_shape, self.steps = x.shape, steps
        return x.stride(steps)

    def backward(self, grad: LazyBuffer) -> LazyBuffer:
        # Undo the flips first, then put each gradient back at every k-th slot with zeros between:
        # along an axis, (n,) -> (n, 1) -pad-> (n, k) -> (n*k,), then shift and fit to the input size.
        grad = grad.stride(tuple(-1 if k < 0 else 1 for k in self.steps))
        for axis, (step, size) in enumerate(zip(self.steps, self.input_shape, strict=True)):
            k = abs(step)
            if k == 1:
                continue
            # x[::-k] starts at the last element, so after un-flipping the picks sit at start + j*k.
            start = (size - 1) % k if step < 0 else 0
            n, shape = grad.shape[axis], grad.shape
            spread = [(0, 0)] * (len(shape) + 1)
            spread[axis + 1] = (0, k - 1)
            grad = grad.reshape(shape[:axis] + (n, 1) + shape[axis + 1:]).pad(tuple(spread))
            grad = grad.reshape(shape[:axis] + (n * k,) + shape[axis + 1:])
            fit = [(0, 0)] * len(shape)
            fit[axis] = (start, max(0, size - start - n * k))
            grad = grad.pad(tuple(fit))
            if grad.shape[axis] > size:
                bounds = [(0, s) for s in grad.shape]
                bounds[axis] = (0, size)
                grad = grad.shrink(tuple(bounds))
        return grad
