"""Chapter 00 (scalar autograd): reference solutions, and typical mistakes with the hint they get."""

from __future__ import annotations

import math

from tinyedu.exercises.registry import Mistake
from tinyedu.scalar.value import Value

# --8<-- [start:gradients]
# L = (a*b + c) * f with a=2, b=-3, c=10, f=-2. Forward: e = a*b = -6, d = e + c = 4, L = d*f = -8.
# Backward from dL/dL = 1: L = d*f gives dL/dd = f = -2 and dL/df = d = 4; d = e + c passes -2 on to
# e and c; e = a*b gives dL/da = dL/de * b = 6 and dL/db = dL/de * a = -4.
gradients = {"a": 6.0, "b": -4.0, "c": -2.0, "d": -2.0, "e": -2.0, "f": 4.0}
# --8<-- [end:gradients]


# --8<-- [start:sigmoid_grad]
def sigmoid_grad(x: float) -> float:
    s = 1 / (1 + math.exp(-x))
    return s * (1 - s)  # d/dx (1 + e^-x)^-1 = e^-x / (1 + e^-x)^2 = s * (1 - s)
# --8<-- [end:sigmoid_grad]


# --8<-- [start:tanh]
tanh = Value.tanh
# --8<-- [end:tanh]


# --8<-- [start:cube]
def cube(x: Value) -> Value:
    out = Value(x.data**3, (x,), "cube")

    def _backward(out_grad: float) -> None:
        x.grad += 3 * x.data**2 * out_grad

    out._backward = _backward
    return out
# --8<-- [end:cube]


# --8<-- [start:topological_order]
topological_order = Value._topological_order
# --8<-- [end:topological_order]


# --8<-- [start:x_grad]
# One call: dy/dx = 3x^2 = 12 at x = -2. backward() adds into the leaf's .grad, three calls: 3 * 12.
x_grad = 36.0
# --8<-- [end:x_grad]


# ---- typical mistakes, and the hint each must get ------------------------------------------------
def _tanh_with(slope, accumulate: bool = True, link: bool = True, result=math.tanh):
    def tanh(self: Value) -> Value:
        t = result(self.data)
        out = Value(t, (self,) if link else (), "tanh")

        def _backward(out_grad: float) -> None:
            if accumulate:
                self.grad += slope(self.data, t, out_grad)
            else:
                self.grad = slope(self.data, t, out_grad)

        out._backward = _backward
        return out

    return tanh


def _tanh_without_backward(self: Value) -> Value:
    return Value(math.tanh(self.data), (self,), "tanh")


def _tanh_composed(self: Value) -> Value:
    e = (self * 2).exp()
    return (e - 1) / (e + 1)


def _tanh_by_exp(self: Value) -> Value:
    e = math.exp(2 * self.data)
    return _tanh_with(lambda x, t, g: (1 - t * t) * g, result=lambda x: (e - 1) / (e + 1))(self)


def _cube(local=lambda x: 3 * x * x, use_out_grad=True, accumulate=True, link=True, result=lambda x: x**3):
    def cube(x: Value) -> Value:
        out = Value(result(x.data), (x,) if link else (), "cube")

        def _backward(out_grad: float) -> None:
            g = local(x.data) * (out_grad if use_out_grad else 1.0)
            if accumulate:
                x.grad += g
            else:
                x.grad = g

        out._backward = _backward
        return out

    return cube


def _order_recursive(root: Value) -> list[Value]:
    order, visited = [], set()

    def visit(node: Value) -> None:
        if node not in visited:
            visited.add(node)
            for child in node._prev:
                visit(child)
            order.append(node)

    visit(root)
    return order


def _order_preorder(root: Value) -> list[Value]:
    order, seen, stack = [], set(), [root]
    while stack:
        node = stack.pop()
        if node not in seen:
            seen.add(node)
            order.append(node)  # before its inputs: the wrong way round
            stack.extend(node._prev)
    return order


def _order_no_visited(root: Value) -> list[Value]:
    order, stack = [], [(root, False)]
    while stack:
        node, done = stack.pop()
        if done:
            order.append(node)
        else:
            stack.append((node, True))
            stack.extend((child, False) for child in node._prev)
    return order


def _order_only_root_inputs(root: Value) -> list[Value]:
    return [*root._prev, root]


MISTAKES = [
    Mistake("00.manual_backprop", dict(gradients, a=-6.0, e=1.0), "dL/da: e = a * b", "two signs wrong"),
    Mistake("00.manual_backprop", {"a": 6.0}, "missing gradient(s) for ['b', 'c', 'd', 'e', 'f']"),
    Mistake("00.sigmoid_grad", lambda x: 1 / (1 + math.exp(-x)), "that is sigmoid(x) itself"),
    Mistake("00.sigmoid_grad", lambda x: sigmoid_grad(x) * x / x, "x = 0.0 raised ZeroDivisionError"),
    Mistake("00.tanh", _tanh_with(lambda x, t, g: 1 - t * t), "ignores out_grad", "no chain rule"),
    Mistake("00.tanh", _tanh_with(lambda x, t, g: (1 - x * x) * g), "you squared the input x"),
    Mistake("00.tanh", _tanh_with(lambda x, t, g: (1 + t * t) * g), "check the sign"),
    Mistake("00.tanh", _tanh_with(lambda x, t, g: (1 - t * t) * g, accumulate=False), "`self.grad += ...`"),
    Mistake("00.tanh", _tanh_with(lambda x, t, g: (1 - t * t) * g, link=False), "records no inputs"),
    Mistake("00.tanh", _tanh_without_backward, "has no _backward"),
    Mistake("00.tanh", _tanh_composed, "it is built from other ops"),
    Mistake("00.tanh", _tanh_by_exp, "overflowed"),
    Mistake("00.tanh", lambda self: math.tanh(self.data), "returned float; it must return a new Value"),
    Mistake("00.cube", lambda x: x * x * x, "it is built from other ops", "a composition, not a primitive"),
    Mistake("00.cube", lambda x: Value(x.data**3, (x,), "cube"), "has no _backward"),
    Mistake("00.cube", _cube(accumulate=False), "use `x.grad += ...`"),
    Mistake("00.cube", _cube(use_out_grad=False), "ignores out_grad"),
    Mistake("00.cube", _cube(local=lambda x: x * x), "the local derivative of x**3 is wrong"),
    Mistake("00.cube", _cube(link=False), "records no inputs"),
    Mistake("00.cube", _cube(result=lambda x: x**2), "not x cubed"),
    Mistake("00.topological_order", _order_recursive, "past Python's recursion limit"),
    Mistake("00.topological_order", _order_preorder, "comes before its input(s)"),
    Mistake("00.topological_order", _order_no_visited, "more than once"),
    Mistake("00.topological_order", _order_only_root_inputs, "misses"),
    Mistake("00.topological_order", lambda root: {root}, "must return a list of Values"),
    Mistake("00.repeated_backward", 12.0, "that is the gradient of one call"),
    Mistake("00.repeated_backward", 0.0, "only zero_grad() does"),
    Mistake("00.repeated_backward", "36", "expected a single number"),
]
