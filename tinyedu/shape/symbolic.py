"""Symbolic integer expressions: the language index arithmetic is written in.

A ShapeTracker answers "which buffer element does output element (i, j) read?" not with a number
but with an *expression* in the loop variables, e.g. `((idx0*4)+idx1)`. Later stages consume it:
the linearizer turns it into integer ALU ops, the C renderer prints it, and the NUMPY device
evaluates it over whole index grids at once.

Every node is immutable, compares and hashes by structure, and knows the smallest and largest
value it can take (`node.min`, `node.max`). Those bounds are what make simplification possible:
`x % 8` is just `x` when we know 0 <= x < 8.

Build expressions with the operators (`+ - * // % < >=`), `Node.sum` and `Node.ands`; they
simplify as they build (the rules live in `tinyedu/shape/rules.py`). Calling a node class
directly, e.g. `MulNode(x, 1)`, builds that node exactly as written, with no simplification.

Division is floor division, and `//` never builds a `DivNode` or `ModNode` whose numerator can be
negative (it shifts the numerator up by a multiple of the divisor first). So the rendered C `/`
and `%`, which truncate toward zero, agree with Python's `//` and `%` on every value.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence, Union

import numpy as np

IntOrArray = Union[int, np.ndarray]
# A visitor handler: handler(node, ops, ctx) -> anything. See Node.render_with.
Handler = Callable[["Node", dict, Any], Any]


def as_int(value: object, what: str) -> int:
    """`value` as a Python int (numpy ints welcome), or a TypeError naming `what` was wrong."""
    if isinstance(value, NumNode):
        return value.b
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{what}: expected an int, got {value!r} ({type(value).__name__})") from None


class Node:
    """Base class of every symbolic expression.

    Subclasses are frozen dataclasses; each sets `min` and `max` (inclusive bounds on its value)
    when it is built. `==` compares structure and answers True/False (so nodes work as dict
    keys), while `<`, `<=`, `>`, `>=` build comparison nodes, like the arithmetic operators do.
    """

    min: int
    max: int

    def _set_bounds(self, lo: int, hi: int) -> None:
        # Frozen dataclasses refuse normal assignment; bounds are derived, not fields, so they take
        # no part in equality or hashing.
        object.__setattr__(self, "min", lo)
        object.__setattr__(self, "max", hi)

    # ---- building: every operator simplifies as it builds -------------------------------------
    def __add__(self, other: Node | int) -> Node:
        return Node.sum([self, to_node(other, "+")])

    def __radd__(self, other: int) -> Node:
        return Node.sum([to_node(other, "+"), self])

    def __sub__(self, other: Node | int) -> Node:
        return Node.sum([self, -to_node(other, "-")])

    def __rsub__(self, other: int) -> Node:
        return Node.sum([to_node(other, "-"), -self])

    def __neg__(self) -> Node:
        return self * -1

    def __mul__(self, other: Node | int) -> Node:
        if isinstance(other, Node) and not isinstance(other, NumNode):
            if isinstance(self, NumNode):
                return rules.mul(other, self.b)
            raise TypeError(f"symbolic '*': cannot multiply {self.render()} by {other.render()}; "
                            "index expressions stay linear, so one side must be a constant int")
        return rules.mul(self, as_int(other, "symbolic '*'"))

    __rmul__ = __mul__

    def __floordiv__(self, other: Node | int) -> Node:
        return rules.div(self, _divisor(other, "//", self))

    def __mod__(self, other: Node | int) -> Node:
        return rules.mod(self, _divisor(other, "%", self))

    def __lt__(self, other: Node | int) -> Node:  # type: ignore[override]
        if isinstance(other, Node) and not isinstance(other, NumNode):
            return rules.lt(self - other, 0)
        return rules.lt(self, as_int(other, "symbolic '<'"))

    def __ge__(self, other: Node | int) -> Node:  # type: ignore[override]
        # x >= b  <=>  -x < 1 - b : everything is written with the one comparison, LtNode.
        return (-self) < (1 - to_node(other, ">="))

    def __gt__(self, other: Node | int) -> Node:  # type: ignore[override]
        return self >= to_node(other, ">") + 1

    def __le__(self, other: Node | int) -> Node:  # type: ignore[override]
        return self < to_node(other, "<=") + 1

    def __bool__(self) -> bool:
        raise TypeError(f"the symbolic expression {self.render()} has no single truth value; "
                        "compare its .min/.max bounds, or .eval() it with values for its variables")

    @staticmethod
    def sum(nodes: Sequence[Node | int]) -> Node:
        """The simplified sum of `nodes` (0 for an empty list)."""
        return rules.sum_nodes([to_node(n, "Node.sum") for n in nodes])

    @staticmethod
    def ands(nodes: Sequence[Node | int]) -> Node:
        """The simplified logical AND of 0/1-valued `nodes` (1 for an empty list)."""
        return rules.ands([to_node(n, "Node.ands") for n in nodes])

    # ---- reading ----------------------------------------------------------------------------
    @property
    def children(self) -> tuple[Node, ...]:
        """The sub-expressions this node is built from (empty for leaves)."""
        return ()

    def render_with(self, ops: Mapping[type, Handler], ctx: Any = None) -> Any:
        """Visit this expression with one handler per node type: `ops[type(node)](node, ops, ctx)`.

        This is how other stages translate an expression without knowing node internals. A
        handler receives the node, the same `ops` table and `ctx` (anything the caller needs, such
        as a list to append UOps to); it handles the node's children by calling
        `child.render_with(ops, ctx)` itself and returns whatever its stage wants (a string, a
        UOp, an array). `render`, `eval` and `substitute` below are all built on this hook.
        """
        try:
            handler = ops[type(self)]
        except KeyError:
            known = ", ".join(sorted(t.__name__ for t in ops))
            raise NotImplementedError(f"render_with: no handler for {type(self).__name__}; "
                                      f"the ops table handles {known}") from None
        return handler(self, ops, ctx)

    def render(self) -> str:
        """C-compatible text such as `((gidx0*4)+ridx0)` or `((idx0>0)&&(idx0<5))`.

        `/` and `%` are printed as they are in C, which is safe because their numerators are never
        negative; `&&` and comparisons give 0/1 in C just like here.
        """
        return self.render_with(RENDER_OPS)

    def eval(self, env: Mapping[Variable | str, IntOrArray] | None = None) -> IntOrArray:
        """Evaluate with `env` mapping each variable (or its name) to an int or an int array.

        With arrays the whole expression is evaluated elementwise (numpy broadcasting), which is
        how the NUMPY device computes every index of a kernel at once. The result is an int when
        nothing depends on an array (e.g. a constant expression); broadcast it yourself if needed.
        Values outside a variable's [min, max] are refused: the expression was simplified for
        that range only (`x % 8` became `x` because x < 8), so other values would give nonsense.
        """
        names = {(k.name if isinstance(k, Variable) else k): v for k, v in (env or {}).items()}
        for v in self.vars():
            value = names.get(v.name)
            if value is not None and np.size(value) and (np.min(value) < v.min or np.max(value) > v.max):
                raise ValueError(f"eval: {v.name} ranges over [{v.min}, {v.max}] but got values in "
                                 f"[{np.min(value)}, {np.max(value)}]; the expression was simplified "
                                 "for that range only")
        return self.render_with(EVAL_OPS, names)

    def substitute(self, mapping: Mapping[Variable | str, Node | int]) -> Node:
        """Replace variables (keys: Variable or name) by nodes or ints, simplifying as it rebuilds.

        A replacement must stay inside the variable's [min, max], for the same reason as in eval.
        """
        names = {(k.name if isinstance(k, Variable) else k): to_node(v, "substitute")
                 for k, v in mapping.items()}
        for v in self.vars():
            new = names.get(v.name)
            if new is not None and (new.min < v.min or new.max > v.max):
                raise ValueError(f"substitute: {v.name} ranges over [{v.min}, {v.max}] but its replacement "
                                 f"{new.render()} takes values in [{new.min}, {new.max}]; the expression "
                                 "was simplified for that range only")
        return self.render_with(SUBSTITUTE_OPS, names)

    def vars(self) -> list[Variable]:
        """Every Variable in the expression, once each, in order of first appearance."""
        if isinstance(self, Variable):
            return [self]
        seen: dict[Variable, None] = {}
        for child in self.children:
            seen.update(dict.fromkeys(child.vars()))
        return list(seen)

    def __repr__(self) -> str:
        return f"<{self.render()} in [{self.min}, {self.max}]>"

    def __str__(self) -> str:
        return self.render()


def variable_bounds(valid: Node) -> tuple[dict[str, int], dict[str, int], list[Node]]:
    """What a validity expression says about single variables: for each variable it bounds by a
    constant, the least value it allows (`v >= c`, written `-v < 1 - c`) and the first it refuses
    (`v < c`); and the conditions of any other form (on a sum of variables, say), left as they are."""
    lowest: dict[str, int] = {}
    beyond: dict[str, int] = {}
    others: list[Node] = []
    for condition in valid.nodes if isinstance(valid, AndNode) else (valid,):
        if isinstance(condition, LtNode) and isinstance(condition.a, Variable):  # v < c
            name = condition.a.name
            beyond[name] = min(beyond.get(name, condition.b), condition.b)
        elif isinstance(condition, LtNode) and isinstance(condition.a, MulNode) and condition.a.b == -1 and \
                isinstance(condition.a.a, Variable):  # -v < c: v >= 1 - c
            name = condition.a.a.name
            lowest[name] = max(lowest.get(name, 1 - condition.b), 1 - condition.b)
        elif not isinstance(condition, NumNode):
            others.append(condition)
    return lowest, beyond, others


def given_valid(index: Node, valid: Node) -> Node:
    """`index` where `valid` is true: simplified with the narrower range of each variable that valid
    bounds by a constant (see variable_bounds).

    A padded read's index counts for the positions the mask lets through only (elsewhere the load
    reads nothing), and there it is often much simpler: in a concatenation's second part, `i >= 12`,
    `(i // 12)` is 1 and `i % 12` is `i - 12`. With the loop variables' full ranges, the kernel would
    compute the general form for every element. The bounds only narrow, so the simplified index
    agrees with `index` wherever `valid` is true."""
    if isinstance(valid, NumNode):  # (most loads: no mask, nothing to narrow)
        return index
    lowest, beyond, _ = variable_bounds(valid)
    narrowed = {}
    for v in index.vars():
        low, high = max(v.min, lowest.get(v.name, v.min)), min(v.max, beyond.get(v.name, v.max + 1) - 1)
        if (low, high) != (v.min, v.max) and low <= high:  # (low > high: valid is never true)
            narrowed[v.name] = Variable(v.name, low, high)
    return index.substitute(narrowed) if narrowed else index


def to_node(value: Node | int, what: str) -> Node:
    """Wrap an int as a NumNode; leave nodes alone."""
    return value if isinstance(value, Node) else NumNode(as_int(value, f"symbolic '{what}'"))


def _divisor(value: Node | int, op: str, numerator: Node) -> int:
    if isinstance(value, Node) and not isinstance(value, NumNode):
        raise TypeError(f"symbolic '{op}': cannot divide {numerator.render()} by the expression "
                        f"{value.render()}; the divisor must be a constant int")
    b = as_int(value, f"symbolic '{op}'")
    if b <= 0:
        raise ValueError(f"symbolic '{op}': divisor {b} must be a positive int (indices are split by "
                         "the positive sizes of axes)")
    return b


@dataclass(frozen=True, repr=False)
class NumNode(Node):
    """A constant."""

    b: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "b", as_int(self.b, "NumNode"))
        self._set_bounds(self.b, self.b)


@dataclass(frozen=True, repr=False)
class Variable(Node):
    """A named integer that takes every value in [min, max], such as a loop index."""

    name: str
    min: int
    max: int

    def __post_init__(self) -> None:
        if self.min > self.max:
            raise ValueError(f"Variable {self.name!r}: min {self.min} is greater than max {self.max}; "
                             "a variable needs at least one value")


@dataclass(frozen=True, repr=False)
class MulNode(Node):
    """a * b for a constant int b."""

    a: Node
    b: int

    def __post_init__(self) -> None:
        self._set_bounds(*sorted((self.a.min * self.b, self.a.max * self.b)))

    @property
    def children(self) -> tuple[Node, ...]:
        return (self.a,)


@dataclass(frozen=True, repr=False)
class DivNode(Node):
    """Floor division a // b, for a >= 0 (so it equals C's truncating `/`) and b > 0."""

    a: Node
    b: int

    def __post_init__(self) -> None:
        _check_nonnegative_division(self, "/")
        self._set_bounds(self.a.min // self.b, self.a.max // self.b)

    @property
    def children(self) -> tuple[Node, ...]:
        return (self.a,)


@dataclass(frozen=True, repr=False)
class ModNode(Node):
    """a % b, for a >= 0 (so it equals C's `%`) and b > 0."""

    a: Node
    b: int

    def __post_init__(self) -> None:
        _check_nonnegative_division(self, "%")
        if self.a.min // self.b == self.a.max // self.b:  # a never wraps around: a shifted interval
            self._set_bounds(self.a.min % self.b, self.a.max % self.b)
        else:
            self._set_bounds(0, self.b - 1)

    @property
    def children(self) -> tuple[Node, ...]:
        return (self.a,)


def _check_nonnegative_division(node: DivNode | ModNode, op: str) -> None:
    if node.b <= 0:
        raise ValueError(f"{type(node).__name__}: divisor {node.b} must be positive")
    if node.a.min < 0:
        raise ValueError(f"{type(node).__name__}: numerator {node.a.render()} can be negative "
                         f"(min {node.a.min}), where C's '{op}' and Python's floor disagree; "
                         f"build it with the '{'//' if op == '/' else '%'}' operator, which shifts it")


@dataclass(frozen=True, repr=False)
class SumNode(Node):
    """nodes[0] + nodes[1] + ..."""

    nodes: tuple[Node, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "nodes", tuple(self.nodes))
        self._set_bounds(sum(n.min for n in self.nodes), sum(n.max for n in self.nodes))

    @property
    def children(self) -> tuple[Node, ...]:
        return self.nodes


@dataclass(frozen=True, repr=False)
class LtNode(Node):
    """a < b for a constant int b: 1 when true, 0 when false."""

    a: Node
    b: int

    def __post_init__(self) -> None:
        self._set_bounds(int(self.a.max < self.b), int(self.a.min < self.b))

    @property
    def children(self) -> tuple[Node, ...]:
        return (self.a,)


@dataclass(frozen=True, repr=False)
class AndNode(Node):
    """Logical AND of 0/1-valued nodes (comparisons): 1 when all are 1."""

    nodes: tuple[Node, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "nodes", tuple(self.nodes))
        for n in self.nodes:
            if n.min < 0 or n.max > 1:
                raise ValueError(f"AndNode: {n.render()} takes values in [{n.min}, {n.max}]; "
                                 "only 0/1-valued nodes (comparisons) can be ANDed")
        # For 0/1 values AND is the minimum.
        self._set_bounds(min((n.min for n in self.nodes), default=1),
                         min((n.max for n in self.nodes), default=1))

    @property
    def children(self) -> tuple[Node, ...]:
        return self.nodes


# The simplification rules and the visitor tables build nodes of the classes above, and the methods
# above call them: a genuine cycle, so these imports come last, once every class exists.
from tinyedu.shape import rules  # noqa: E402
from tinyedu.shape.visitors import EVAL_OPS, RENDER_OPS, SUBSTITUTE_OPS  # noqa: E402
