"""Chapter 01b (numerics and semantics): reference solutions, and typical mistakes with the hint they get."""

from __future__ import annotations

import math

from tinyedu import function_composite
from tinyedu.core.ops import LazyOp
from tinyedu.exercises.registry import Mistake
from tinyedu.function_composite import Expr, UnaryFunction

# --8<-- [start:Softplus]
Softplus = function_composite.Softplus
# --8<-- [end:Softplus]


# --8<-- [start:toposort]
toposort = LazyOp.toposort
# --8<-- [end:toposort]


# --8<-- [start:nan_compare]
# NaN <= 0 is False (every ordered comparison with NaN is), NaN != NaN is True, relu keeps a NaN.
nan_compare = (False, True, True)
# --8<-- [end:nan_compare]

# --8<-- [start:signed_zero]
# -0.0 + 0.0 rounds to +0.0; -0.0 - 0.0 and -0.0 * 1.0 keep the sign of -0.0.
signed_zero = (math.inf, -math.inf, -math.inf)
# --8<-- [end:signed_zero]


# ---- typical mistakes -------------------------------------------------------------------------------
class NaiveSoftplus(UnaryFunction):
    def value(self, x: Expr) -> Expr:
        return (1 + x.exp()).log()

    def derivative(self, x: Expr, ret: Expr) -> Expr:
        return x.exp() / (1 + x.exp())


class NoLog1pSoftplus(Softplus):
    def value(self, x: Expr) -> Expr:
        z = x * self.params["beta"]
        return (z > self.params["threshold"]).where(x, (1 + z.exp()).log() * (1 / self.params["beta"]))


class NoThreshold(Softplus):
    def value(self, x: Expr) -> Expr:
        return (x * self.params["beta"]).exp().log1p() * (1 / self.params["beta"])


class OverflowingDerivative(Softplus):
    def derivative(self, x: Expr, ret: Expr) -> Expr:
        return x.exp() / (1 + x.exp())


class WrongDerivative(Softplus):
    def derivative(self, x: Expr, ret: Expr) -> Expr:
        return ret


class IgnoresParameters(UnaryFunction):
    def value(self, x: Expr) -> Expr:
        return (x > 20).where(x, x.exp().log1p())

    def derivative(self, x: Expr, ret: Expr) -> Expr:
        return Softplus.derivative(self, x, ret)

    params = {"beta": 1.0, "threshold": 20.0}


def tree_toposort(root: LazyOp) -> list[LazyOp]:
    """Visits a shared node once per path to it."""
    order: list[LazyOp] = []
    for src in root.src:
        order += tree_toposort(src)
    return order + [root]


def preorder(root: LazyOp) -> list[LazyOp]:
    """Each node once, but parents first."""
    return root.walk()


MISTAKES = [
    Mistake("01b.softplus", NaiveSoftplus, "use log1p"),
    Mistake("01b.softplus", NoLog1pSoftplus, "use log1p"),
    Mistake("01b.softplus", NoThreshold, "exp(x) overflows float32"),
    Mistake("01b.softplus", OverflowingDerivative, "gradient at x = 100 is NaN"),
    Mistake("01b.softplus", WrongDerivative, "the sigmoid of x"),
    Mistake("01b.softplus", IgnoresParameters, "use the parameters"),
    Mistake("01b.softplus", lambda x: x, "a class derived from UnaryFunction"),
    Mistake("01b.toposort", tree_toposort, "once per path"),
    Mistake("01b.toposort", preorder, "comes before one of its sources"),
    Mistake("01b.nan_compare", (True, True, True), "Every ordered comparison with NaN is False"),
    Mistake("01b.nan_compare", (False, False, True), "!= is the negation of =="),
    Mistake("01b.signed_zero", (-math.inf, -math.inf, -math.inf), "-0.0 + 0.0 is +0.0"),
    Mistake("01b.signed_zero", (math.inf, math.inf, math.inf), "keep the sign"),
]
