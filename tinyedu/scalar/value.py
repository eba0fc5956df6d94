"""Value: one number that remembers how it was computed, so it can compute its own gradient.

This is stage 0 of tinyedu, in the spirit of Karpathy's micrograd. Every arithmetic operation on
`Value`s returns a new `Value` that records its inputs (`_prev`), a label for the operation (`_op`)
and a small closure (`_backward`) that applies the chain rule for that one operation. Calling
`backward()` on the final result walks this graph from the output back to the inputs and fills in
every `.grad` with d(output)/d(that value).

Choices a reader should know about:

* Operands: a `Value`, an `int` or a `float` (numpy scalars count, as does anything that is a
  `numbers.Real`). `bool` is rejected on purpose: `x * True` is almost always a comparison that
  leaked into arithmetic, so we say so instead of silently computing with 1.0.
* Nothing non-finite gets through. If a forward result or a gradient would be `inf` or `nan`, the
  op raises an error that names itself and its inputs, because a silent `nan` in a training loop
  surfaces hundreds of steps later, far from its cause.
* Gradients accumulate, like PyTorch: see `backward()`.
"""

from __future__ import annotations

import math
import numbers
from typing import Callable, ClassVar

# How a Value says "I am not an op result". A module constant so every leaf shares one no-op.
_NO_BACKWARD: Callable[[float], None] = lambda out_grad: None


# --8<-- [start:operands]
def _is_number(x: object) -> bool:
    """True for the plain numbers a Value accepts: real, and not a bool (see module docstring)."""
    # The `type(x) in` test is a fast path: isinstance against the numbers.Real ABC is slow, and
    # this runs for every node of every graph.
    return type(x) in (float, int) or (isinstance(x, numbers.Real) and not isinstance(x, bool))


def _as_value(other: object, op: str) -> Value:
    """Wrap a number as a constant leaf Value; refuse anything else with a message naming `op`."""
    if isinstance(other, Value):
        return other
    if _is_number(other):
        return Value(other)
    hint = (" bool is rejected on purpose (True/False in arithmetic is usually a bug); "
            "write float(flag) if you mean 1.0/0.0." if isinstance(other, bool) else "")
    raise TypeError(f"{op}: cannot combine a Value with {type(other).__name__} {other!r}; "
                    f"the other operand must be a Value, an int or a float.{hint}")
# --8<-- [end:operands]


# --8<-- [start:value_core]
class Value:
    """A scalar in a computation graph: its `data`, its `grad`, and the op that produced it.

    `grad` is d(root)/d(self) for the last root you called `backward()` on (accumulated for
    leaves, see `backward`). `__slots__` keeps each node small: long graphs have many of them.
    """

    __slots__ = ("data", "grad", "label", "_prev", "_op", "_backward")
    # SVG of a Value's graph, or None; set by tinyedu.viz (viz reads Value, never the other way round)
    svg_drawer: ClassVar[Callable[[Value], str | None] | None] = None

    def __init__(self, data: float, _children: tuple[Value, ...] = (), _op: str = "", label: str = ""):
        if not _is_number(data):
            raise TypeError(f"Value: data must be an int or a float, got {type(data).__name__} {data!r}")
        data = float(data)
        if not math.isfinite(data):
            raise _non_finite_error(_op, data, _children)
        self.data: float = data
        self.grad: float = 0.0
        self.label = label
        self._prev: tuple[Value, ...] = _children  # a tuple, not a set: graph order is deterministic
        self._op = _op
        # Set by the op that made this Value: given d(root)/d(self), add each input's share to its
        # .grad. It is handed that number instead of reading self.grad so that the closure needs
        # no reference back to self: no reference cycle, so Python frees an old graph at once
        # instead of leaving it to the (slow) cycle collector.
        self._backward: Callable[[float], None] = _NO_BACKWARD
    # --8<-- [end:value_core]

    # --8<-- [start:mul]
    def __mul__(self, other: Value | float) -> Value:
        other = _as_value(other, "*")
        out = Value(self.data * other.data, (self, other), "*")

        def _backward(out_grad: float) -> None:
            # Chain rule: d(root)/da = d(root)/d(out) * d(out)/da = out_grad * b, and likewise for b.
            # `+=`, not `=`: if a Value feeds several ops, its gradient is the sum over all of them.
            self.grad += other.data * out_grad
            other.grad += self.data * out_grad

        out._backward = _backward
        return out
    # --8<-- [end:mul]

    def __add__(self, other: Value | float) -> Value:
        other = _as_value(other, "+")
        out = Value(self.data + other.data, (self, other), "+")

        def _backward(out_grad: float) -> None:
            # Addition passes the gradient through unchanged to both inputs.
            self.grad += out_grad
            other.grad += out_grad

        out._backward = _backward
        return out

    def __pow__(self, exponent: float) -> Value:
        if isinstance(exponent, Value):
            raise TypeError("**: a Value exponent is not supported, only an int or a float; "
                            "for a learned exponent y write (x.log() * y).exp(), valid when x > 0.")
        if not _is_number(exponent):
            raise TypeError(f"**: the exponent must be an int or a float, got {type(exponent).__name__} "
                            f"{exponent!r}.")
        n, x = float(exponent), self.data
        if x == 0.0 and n < 0:
            raise ValueError(f"**: 0.0 ** {exponent} is undefined (it divides by zero); "
                             "make sure the base cannot be exactly zero, e.g. add a small epsilon.")
        if x < 0.0 and not n.is_integer():
            raise ValueError(f"**: ({x}) ** {exponent} is not a real number (negative base, fractional "
                             "exponent); only integer exponents are allowed for negative bases.")
        try:
            result = x**n
        except OverflowError:
            raise OverflowError(f"**: ({x}) ** {exponent} overflows a float64.") from None
        out = Value(result, (self,), f"**{exponent}")

        def _backward(out_grad: float) -> None:
            # d(x**n)/dx = n * x**(n-1). At x == 0 with 0 < n < 1 (e.g. a square root) the slope
            # is infinite; backward() turns the resulting ZeroDivisionError into a clear message.
            local = 0.0 if n == 0.0 else n * x ** (n - 1)
            self.grad += local * out_grad

        out._backward = _backward
        return out

    def exp(self) -> Value:
        try:
            result = math.exp(self.data)
        except OverflowError:
            raise OverflowError(f"exp: exp({self.data}) overflows a float64 (the largest finite input "
                                "is about 709.78); the inputs to exp have grown too large: lower the "
                                "learning rate or rescale the input.") from None
        out = Value(result, (self,), "exp")

        def _backward(out_grad: float) -> None:
            self.grad += result * out_grad  # d(e^x)/dx = e^x, which we already computed

        out._backward = _backward
        return out

    def log(self) -> Value:
        if self.data <= 0.0:
            raise ValueError(f"log: log({self.data}) is undefined; log needs a positive input. "
                             "If this is a probability that reached 0, clamp it or add a small epsilon.")
        out = Value(math.log(self.data), (self,), "log")

        def _backward(out_grad: float) -> None:
            self.grad += out_grad / self.data  # d(log x)/dx = 1/x

        out._backward = _backward
        return out

    def tanh(self) -> Value:
        t = math.tanh(self.data)
        out = Value(t, (self,), "tanh")

        def _backward(out_grad: float) -> None:
            self.grad += (1.0 - t * t) * out_grad  # d(tanh x)/dx = 1 - tanh(x)^2

        out._backward = _backward
        return out

    def sigmoid(self) -> Value:
        # Two algebraically equal forms, each used where its exp cannot overflow.
        x = self.data
        s = 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))
        out = Value(s, (self,), "sigmoid")

        def _backward(out_grad: float) -> None:
            self.grad += s * (1.0 - s) * out_grad  # d(sigmoid x)/dx = s(x) * (1 - s(x))

        out._backward = _backward
        return out

    def relu(self) -> Value:
        out = Value(self.data if self.data > 0.0 else 0.0, (self,), "relu")

        def _backward(out_grad: float) -> None:
            # The slope is 1 for x > 0 and 0 otherwise; at exactly 0 we pick 0, like PyTorch.
            self.grad += (1.0 if self.data > 0.0 else 0.0) * out_grad

        out._backward = _backward
        return out

    # --8<-- [start:compose]
    # The remaining operators are compositions of the primitives above, so they need no
    # backward of their own: the chain rule through the primitives gives their gradients.
    def __neg__(self) -> Value:
        return self * -1

    def __sub__(self, other: Value | float) -> Value:
        return self + (-_as_value(other, "-"))

    def __truediv__(self, other: Value | float) -> Value:
        other = _as_value(other, "/")
        if other.data == 0.0:
            raise ZeroDivisionError(f"/: division by zero ({self.data} / 0.0); the denominator must not "
                                    "be exactly zero, e.g. add a small epsilon to it.")
        return self * other**-1

    def __radd__(self, other: float) -> Value:  # other + self
        return self + _as_value(other, "+")

    def __rsub__(self, other: float) -> Value:  # other - self
        return _as_value(other, "-") + (-self)

    def __rmul__(self, other: float) -> Value:  # other * self
        return self * _as_value(other, "*")

    def __rtruediv__(self, other: float) -> Value:  # other / self
        return _as_value(other, "/") / self

    # --8<-- [end:compose]

    def __rpow__(self, base: object) -> Value:  # base ** self
        raise TypeError(f"**: {type(base).__name__} ** Value is not supported, the exponent must be a "
                        "plain int or float; for b ** x write (x * math.log(b)).exp(), valid when b > 0.")

    # --8<-- [start:backward]
    def _topological_order(self) -> list[Value]:
        """Every Value this one depends on, each after all of its inputs (ending with self).

        A depth-first search that finishes a node only after its children. The textbook version
        is recursive, but Python's recursion limit (about 1000) would then cap how long a chain
        of operations can be, so we keep our own stack: each entry is (node, children_done).
        """
        order: list[Value] = []
        visited: set[Value] = set()
        stack: list[tuple[Value, bool]] = [(self, False)]
        while stack:
            node, children_done = stack.pop()
            if children_done:
                order.append(node)  # all inputs of `node` are already in `order`
                continue
            if node in visited:
                continue
            visited.add(node)
            stack.append((node, True))  # come back to `node` once its children are done
            for child in reversed(node._prev):  # reversed: children get visited left to right
                if child not in visited:
                    stack.append((child, False))
        return order

    def backward(self) -> None:
        """Fill in `.grad` of every Value below this one with d(self)/d(that Value).

        Gradients ACCUMULATE, like PyTorch: each call adds into the `.grad` of the leaves (the
        Values you created: inputs and parameters). That is what lets a Value used in two places,
        or a loss summed over several calls, collect its total gradient; it also means you must
        reset the gradients (`zero_grad()`) before each training step. Intermediate results hold
        the gradient of the latest call only: they are reset here, so a second call propagates
        exactly the same amounts again.
        """
        order = self._topological_order()
        for node in order:
            if node._prev:  # an op result, not a leaf
                node.grad = 0.0
        self.grad += 1.0  # d(self)/d(self)
        for node in reversed(order):  # outputs before inputs: each grad is complete when used
            try:
                node._backward(node.grad)
            except (ZeroDivisionError, OverflowError) as error:  # e.g. the slope of x**0.5 at x = 0
                op = f"backward of '{node._op}'"
                raise _non_finite_error(op, math.inf, node._prev, "gradient") from error
            for child in node._prev:  # the one place where a silent inf or nan could slip in
                if not math.isfinite(child.grad):
                    raise _non_finite_error(f"backward of '{node._op}'", child.grad, node._prev, "gradient")
    # --8<-- [end:backward]

    def zero_grad(self) -> None:
        """Set `.grad` to 0 for this Value and every Value it was computed from."""
        for node in self._topological_order():
            node.grad = 0.0

    def __repr__(self) -> str:
        label = f", label={self.label!r}" if self.label else ""
        return f"Value(data={self.data:.4f}, grad={self.grad:.4f}{label})"

    def _repr_svg_(self) -> str | None:
        """Jupyter calls this to show a Value as its graph, drawn by `svg_drawer` (which tinyedu.viz sets
        when it is imported, so this module needs no graphviz). Never raises: None means 'use repr'."""
        return None if Value.svg_drawer is None else Value.svg_drawer(self)


def _non_finite_error(op: str, result: float, inputs: tuple[Value, ...],
                      what: str = "result") -> OverflowError | ValueError:
    """The error for a nan or inf that an op produced, naming the op and what went into it."""
    where = f"{op}: {what} is {result}" if op else f"Value: data is {result}"
    if inputs:
        where += f" for input(s) {[v.data for v in inputs]}"
    if math.isnan(result):
        return ValueError(f"{where}; nan is not allowed in a Value.")
    return OverflowError(f"{where}, beyond the float64 range; rescale the inputs or lower the "
                         "learning rate.")
