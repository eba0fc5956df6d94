"""The symbolic index algebra: each simplification rule, rendering, and brute-force checks.

The brute-force tests build random expressions together with a plain-Python twin and evaluate
both at every combination of variable values: simplification must never change a value, the
min/max bounds must contain every value, and C's truncating `/` and `%` must agree with eval.
"""

from __future__ import annotations

import dataclasses
import itertools
import operator
import os
import re
from typing import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tinyedu.shape import (
    RENDER_OPS,
    AndNode,
    DivNode,
    LtNode,
    ModNode,
    MulNode,
    Node,
    NumNode,
    SumNode,
    Variable,
    given_valid,
)

FUZZ_EXAMPLES = int(os.environ.get("SHAPE_FUZZ_EXAMPLES", "300"))  # raise it for a long hunt
a, b, c = Variable("a", 0, 7), Variable("b", 0, 3), Variable("c", -3, 4)
x = Variable("x", 0, 9)


# ---- the rules, one by one -------------------------------------------------------------------
def test_constants_fold() -> None:
    assert NumNode(2) + 3 == NumNode(5)
    assert NumNode(7) // 2 == NumNode(3) and NumNode(7) % 2 == NumNode(1)
    assert NumNode(4) * NumNode(3) == NumNode(12) and -NumNode(4) == NumNode(-4)
    assert (NumNode(2) < 3) == NumNode(1) and (NumNode(3) < 3) == NumNode(0)
    assert 10 - NumNode(3) == NumNode(7)


def test_identities() -> None:
    assert a * 1 is a and a + 0 is a and a // 1 is a
    assert a * 0 == NumNode(0) and a % 1 == NumNode(0)
    assert a - a == NumNode(0)


def test_like_terms_merge() -> None:
    assert a * 2 + a * 3 == MulNode(a, 5)
    assert (a * 2 + b) + (a * 3 - b) == MulNode(a, 5)
    assert (a + b) * 2 == SumNode((MulNode(a, 2), MulNode(b, 2)))
    assert (a * 2) * 3 == MulNode(a, 6)
    assert a + 1 + 2 == SumNode((a, NumNode(3)))


def test_division_rules() -> None:
    assert (a * 4) // 2 == MulNode(a, 2)
    assert (a * 4 + b) // 4 == a  # 0 <= b < 4, so b // 4 is 0
    assert (a * 4 + x) // 4 == SumNode((a, DivNode(x, 4)))  # x reaches 9: b // 4 stays
    assert b // 4 == NumNode(0) and x // 10 == NumNode(0)
    assert (a // 2) // 3 == DivNode(a, 6)
    assert (a * 2 + x * 4) // 8 == DivNode(SumNode((a, MulNode(x, 2))), 4)  # common factor 2


def test_modulo_rules() -> None:
    assert b % 4 is b and x % 10 is x
    assert (a * 8 + b) % 8 == b
    assert (a * 8 + x) % 8 == ModNode(x, 8)
    assert (a * 2) % 4 == MulNode(ModNode(a, 2), 2)
    assert (x % 8) % 4 == ModNode(x, 4)
    assert (a + 8) % 8 == a  # within one period, % is a subtraction
    assert (a // 2) * 2 + a % 2 == a  # re-joining what a reshape split


def test_negative_numerators_are_shifted_not_truncated() -> None:
    # c can be negative; C's '/' would truncate toward 0, so // shifts c up first.
    for node in (c // 4, c % 3, (-a) // 4, (a - 9) % 4):
        divisions = [n for n in walk(node) if isinstance(n, (DivNode, ModNode))]
        assert divisions and all(n.a.min >= 0 for n in divisions)
    assert (c // 4).render() == "(((c+4)/4)+-1)"  # c+4 >= 0, and 4 is a multiple of 4
    with pytest.raises(ValueError, match="can be negative"):
        DivNode(c, 4)


def test_comparisons_fold_with_bounds() -> None:
    assert (x < 10) == NumNode(1) and (x < 11) == NumNode(1)
    assert (x < 0) == NumNode(0) and (x >= 0) == NumNode(1) and (x >= 10) == NumNode(0)
    assert (x < 5) == LtNode(x, 5)
    assert (x + 3 < 5) == LtNode(x, 2)
    assert (x * 4 < 9) == LtNode(x, 3)
    assert (x // 4 < 2) == LtNode(x, 8)
    assert (x > 2).render() == "(x>2)" and (x <= 2).render() == "(x<3)"
    assert (x < a).render() == "((x+(a*-1))<0)"


def test_ands() -> None:
    assert Node.ands([x < 5, NumNode(1), a < 100]) == LtNode(x, 5)
    assert Node.ands([x < 5, NumNode(0)]) == NumNode(0)
    assert Node.ands([x < 5, a >= 8]) == NumNode(0)  # a >= 8 is known false
    assert Node.ands([]) == NumNode(1)
    assert Node.ands([x < 5, Node.ands([a < 3, x < 5])]) == AndNode((LtNode(x, 5), LtNode(a, 3)))
    with pytest.raises(ValueError, match="0/1-valued"):
        Node.ands([x])


def test_given_valid_simplifies_the_index_for_the_valid_positions() -> None:
    """A padded read's index matters only where its mask holds: there each variable the mask bounds
    by a constant has a narrower range, and `//` and `%` by the padded size disappear."""
    i, j = Variable("i", 0, 23), Variable("j", 0, 5)
    index = (i // 12) * 100 + i % 12 + j * 7
    assert given_valid(index, i >= 12).render() == "(i+(j*7)+88)"  # (i - 12) + 100
    assert given_valid(index, i < 12).render() == "(i+(j*7))"
    assert given_valid(index, Node.ands([i >= 12, j < 2, i < 20])).render() == "(i+(j*7)+88)"
    assert given_valid(index, i + j < 5) == index  # a bound on a sum: left as it is
    assert given_valid(index, NumNode(1)) == index
    for valid in (i >= 12, i < 12, Node.ands([i >= 6, i < 18, j >= 3])):
        simplified = given_valid(index, valid)
        for vi, vj in itertools.product(range(24), range(6)):
            if valid.eval({"i": vi, "j": vj}):
                assert simplified.eval({"i": vi, "j": vj}) == index.eval({"i": vi, "j": vj})


def test_sum_helper() -> None:
    assert Node.sum([]) == NumNode(0)
    assert Node.sum([a, 2, a, -2]) == MulNode(a, 2)


# ---- rendering and the visitor hook ----------------------------------------------------------
def test_render() -> None:
    gidx0, ridx0 = Variable("gidx0", 0, 15), Variable("ridx0", 0, 3)
    assert (gidx0 * 4 + ridx0).render() == "((gidx0*4)+ridx0)"
    assert (x // 4).render() == "(x/4)" and (x % 4).render() == "(x%4)"
    assert (x - 3).render() == "(x+-3)"
    assert Node.ands([x < 3, a < 2]).render() == "((x<3)&&(a<2))"
    assert str(x * 4) == "(x*4)" and repr(x * 4) == "<(x*4) in [0, 36]>"


def test_render_with_lets_another_stage_translate() -> None:
    # A toy linearizer: each handler appends one op to ctx (a list) and returns its position.
    def emit(ctx: list, *op: object) -> int:
        ctx.append(op)
        return len(ctx) - 1

    ops = {
        NumNode: lambda n, ops, ctx: emit(ctx, "CONST", n.b),
        Variable: lambda n, ops, ctx: emit(ctx, "SPECIAL", n.name),
        MulNode: lambda n, ops, ctx: emit(ctx, "MUL", n.a.render_with(ops, ctx), emit(ctx, "CONST", n.b)),
        SumNode: lambda n, ops, ctx: emit(ctx, "ADD", *[c.render_with(ops, ctx) for c in n.nodes]),
    }
    uops: list = []
    last = (x * 4 + b).render_with(ops, uops)
    assert uops == [("SPECIAL", "x"), ("CONST", 4), ("MUL", 0, 1), ("SPECIAL", "b"), ("ADD", 2, 3)]
    assert last == 4
    assert (x * 4 + b).render_with(RENDER_OPS) == "((x*4)+b)"


def test_eval_with_names_variables_and_arrays() -> None:
    expr = (x * 4 + b) // 3
    assert expr.eval({"x": 2, "b": 1}) == 3 and expr.eval({x: 2, b: 1}) == 3
    grid = expr.eval({x: np.arange(10)[:, None], b: np.arange(4)[None, :]})
    assert grid.shape == (10, 4) and grid[2, 1] == 3
    assert NumNode(5).eval() == 5
    with pytest.raises(KeyError, match="no value for variable 'b'"):
        expr.eval({"x": 1})
    with pytest.raises(ValueError, match=r"eval: x ranges over \[0, 9\] but got values in \[0, 10\]"):
        expr.eval({"x": np.arange(11), "b": 0})


def test_substitute_and_vars() -> None:
    expr = a * 4 + b
    assert expr.substitute({a: 2}) == SumNode((b, NumNode(8)))
    assert expr.substitute({"a": b, "b": 1}) == SumNode((MulNode(b, 4), NumNode(1)))
    assert ((x // 4) % 3 + a * 2).vars() == [x, a]
    assert NumNode(3).vars() == []
    with pytest.raises(ValueError, match="substitute: a ranges over"):
        expr.substitute({a: 8})


def test_nodes_are_frozen_hashable_and_compare_by_structure() -> None:
    assert a * 4 + b == a * 4 + b and hash(a * 4 + b) == hash(a * 4 + b)
    assert a != Variable("a", 0, 8)
    assert len({a * 4, a * 4, x * 4}) == 2
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.name = "z"  # type: ignore[misc]


def test_helpful_errors() -> None:
    with pytest.raises(TypeError, match="one side must be a constant"):
        a * b
    with pytest.raises(ValueError, match="positive"):
        a // 0
    with pytest.raises(TypeError, match="must be a constant int"):
        a % b
    with pytest.raises(ValueError, match="min 3 is greater than max 2"):
        Variable("v", 3, 2)
    with pytest.raises(TypeError, match="no single truth value"):
        bool(a < 3)
    with pytest.raises(NotImplementedError, match="no handler for ModNode"):
        (a % 3).render_with({Variable: lambda n, ops, ctx: n.name})


# ---- brute force over random expressions -----------------------------------------------------
VARIABLES = [Variable("p", 0, 4), Variable("q", 0, 5), Variable("r", -2, 3)]
Pair = tuple[Node, Callable[[dict], int]]  # a node and its plain-Python twin


def walk(node: Node) -> list[Node]:
    return [node] + [n for child in node.children for n in walk(child)]


def variable_pairs() -> st.SearchStrategy[Pair]:
    return st.sampled_from(VARIABLES).map(lambda v: (v, lambda env, name=v.name: env[name]))


def constant_pairs() -> st.SearchStrategy[Pair]:
    return st.integers(-6, 6).map(lambda k: (NumNode(k), lambda env, k=k: k))


def combine(op: Callable[[object, object], object]) -> Callable[[tuple], Pair]:
    """Apply `op` to a node and, in parallel, to its Python twin's value."""
    def build(args: tuple) -> Pair:
        (left, left_fn), right = args
        if isinstance(right, tuple):  # another (node, twin) pair
            right_node, right_fn = right
            return op(left, right_node), lambda e: op(left_fn(e), right_fn(e))
        return op(left, right), lambda e: op(left_fn(e), right)  # an int
    return build


def extend(children: st.SearchStrategy[Pair]) -> st.SearchStrategy[Pair]:
    ks, divisors = st.integers(-4, 4), st.integers(1, 6)
    return st.one_of(
        st.tuples(children, children).map(combine(operator.add)),
        st.tuples(children, children).map(combine(operator.sub)),
        st.tuples(children, ks).map(combine(operator.mul)),
        st.tuples(children, divisors).map(combine(operator.floordiv)),
        st.tuples(children, divisors).map(combine(operator.mod)),
    )


int_pairs = st.recursive(st.one_of(variable_pairs(), constant_pairs()), extend, max_leaves=8)


def compare(pair: Pair, k: int, op: str) -> Pair:
    node, fn = pair
    built = {"<": node < k, ">=": node >= k, ">": node > k, "<=": node <= k}[op]
    return built, {"<": lambda e: int(fn(e) < k), ">=": lambda e: int(fn(e) >= k),
                   ">": lambda e: int(fn(e) > k), "<=": lambda e: int(fn(e) <= k)}[op]


bool_pairs = st.builds(compare, int_pairs, st.integers(-8, 8), st.sampled_from(["<", ">=", ">", "<="]))
and_pairs = st.lists(bool_pairs, min_size=1, max_size=3).map(
    lambda ps: (Node.ands([p[0] for p in ps]), lambda e, ps=ps: int(all(p[1](e) for p in ps))))
any_pairs = st.one_of(int_pairs, bool_pairs, and_pairs)


def every_env() -> list[dict[str, int]]:
    ranges = [range(v.min, v.max + 1) for v in VARIABLES]
    return [{v.name: value for v, value in zip(VARIABLES, values, strict=True)}
            for values in itertools.product(*ranges)]


ENVS = every_env()
GRIDS = {v.name: grid for v, grid in zip(
    VARIABLES, np.meshgrid(*[np.arange(v.min, v.max + 1) for v in VARIABLES], indexing="ij"), strict=True)}


TOKEN = re.compile(r"-?\d+|[A-Za-z_]\w*|&&|[()+*/%<>]")
C_OPS: dict[str, Callable[[int, int], int]] = {
    "+": lambda p, q: p + q, "*": lambda p, q: p * q,
    "/": lambda p, q: c_div(p, q), "%": lambda p, q: p - c_div(p, q) * q,
    "<": lambda p, q: int(p < q), ">": lambda p, q: int(p > q), "&&": lambda p, q: int(bool(p) and bool(q)),
}


def c_div(p: int, q: int) -> int:
    """C's '/': truncate toward zero (Python's // floors)."""
    quotient = abs(p) // abs(q)
    return quotient if (p >= 0) == (q > 0) else -quotient


def c_eval(text: str, env: dict[str, int]) -> int:
    """Evaluate rendered text the way C would. Each parenthesised group uses one operator."""
    tokens = TOKEN.findall(text)
    assert "".join(tokens) == text, f"unexpected characters in {text}"

    def parse(pos: int) -> tuple[int, int]:
        token = tokens[pos]
        if token == "(":
            value, pos = parse(pos + 1)
            while tokens[pos] != ")":
                rhs, next_pos = parse(pos + 1)
                value, pos = C_OPS[tokens[pos]](value, rhs), next_pos
            return value, pos + 1
        return (int(token) if token.lstrip("-").isdigit() else env[token]), pos + 1

    value, end = parse(0)
    assert end == len(tokens)
    return value


@settings(max_examples=FUZZ_EXAMPLES, deadline=None)
@given(any_pairs)
def test_simplified_expressions_keep_their_values_and_bounds(pair: Pair) -> None:
    node, reference = pair
    expected = np.array([reference(env) for env in ENVS])
    got = np.broadcast_to(node.eval(GRIDS), GRIDS["p"].shape).reshape(-1)
    np.testing.assert_array_equal(got, expected)  # whole grids at once...
    assert [node.eval(env) for env in ENVS[::13]] == list(expected[::13])  # ...and one point at a time
    assert node.min <= expected.min() and expected.max() <= node.max  # ...bounds hold...
    for sub in walk(node):  # ...for every sub-expression too...
        values = np.broadcast_to(sub.eval(GRIDS), GRIDS["p"].shape)
        assert sub.min <= values.min() and values.max() <= sub.max, sub
        if isinstance(sub, (DivNode, ModNode)):
            assert sub.a.min >= 0  # ...and C's '/' and '%' never see a negative numerator
    text = node.render()
    assert [c_eval(text, env) for env in ENVS[::17]] == list(expected[::17])  # the C text agrees


@settings(max_examples=100, deadline=None)
@given(int_pairs, st.sampled_from(VARIABLES), st.data())
def test_substitute_matches_evaluating_with_that_value(pair: Pair, variable: Variable, data) -> None:
    node, reference = pair
    value = data.draw(st.integers(variable.min, variable.max))
    substituted = node.substitute({variable: value})
    assert variable not in substituted.vars()
    for env in ENVS[::7]:
        assert substituted.eval(env) == reference({**env, variable.name: value})


def test_div_and_mod_split_every_coefficient() -> None:
    """`(c + d*29) // 28` is d and `% 28` is c + d when c + d < 28: 29 splits as 28 + 1 (a window's
    index); where the small part crosses a multiple of 28, the expression stays a division."""
    c, d = Variable("c", 0, 25), Variable("d", 0, 2)
    assert (c + d * 29) // 28 == d
    assert (c + d * 29) % 28 == c + d
    wide = Variable("w", 0, 27)
    assert isinstance((wide + d * 29) // 28, DivNode)
    for cv, dv in itertools.product(range(28), range(3)):
        env = {"w": cv, "d": dv}
        assert ((wide + d * 29) // 28).eval(env) == (cv + dv * 29) // 28
        assert ((wide + d * 29) % 28).eval(env) == (cv + dv * 29) % 28
