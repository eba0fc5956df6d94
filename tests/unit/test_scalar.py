"""Stage 0: every Value op, forward and backward, against independent oracles.

Oracles: math on plain floats for the forward, central finite differences for the backward, and
PyTorch in float64 for both when it is installed. Then the engine's promises: operand order,
gradient accumulation, long chains, shared nodes, and a clear error for every bad input.
"""

from __future__ import annotations

import math
from typing import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tinyedu.scalar import Value


def central_diff(f: Callable[..., float], xs: list[float], eps: float = 1e-6) -> list[float]:
    """Slopes of f by central differences; written here so the tests do not trust exercises.gradcheck."""
    grads = []
    for i in range(len(xs)):
        up, down = list(xs), list(xs)
        up[i] += eps
        down[i] -= eps
        grads.append((f(*up) - f(*down)) / (2 * eps))
    return grads


def value_grads(fn: Callable[..., Value], xs: list[float]) -> tuple[float, list[float]]:
    inputs = [Value(x) for x in xs]
    out = fn(*inputs)
    out.backward()
    return out.data, [v.grad for v in inputs]


def sigmoid(x: float) -> float:
    return 1 / (1 + math.exp(-x))


# (name, expression on Values (and on torch tensors: same methods and operators), the same on
# floats, input points). Points avoid kinks (relu at 0) where a finite difference is meaningless.
UNARY = [
    ("neg", lambda x: -x, lambda x: -x, [-1.3, 0.4, 2.0]),
    ("exp", lambda x: x.exp(), math.exp, [-3.0, 0.0, 1.7]),
    ("log", lambda x: x.log(), math.log, [0.05, 1.0, 7.5]),
    ("tanh", lambda x: x.tanh(), math.tanh, [-2.5, 0.0, 0.3, 4.0]),
    ("sigmoid", lambda x: x.sigmoid(), sigmoid, [-30.0, -1.0, 0.0, 2.2, 30.0]),
    ("relu", lambda x: x.relu(), lambda x: max(x, 0.0), [-1.5, -0.1, 0.2, 3.0]),
    ("pow2", lambda x: x**2, lambda x: x**2, [-1.5, 0.0, 2.5]),
    ("pow3", lambda x: x**3, lambda x: x**3, [-1.5, 0.7]),
    ("pow-1", lambda x: x**-1, lambda x: x**-1, [-2.0, 0.5]),
    ("pow0.5", lambda x: x**0.5, lambda x: x**0.5, [0.25, 4.0]),
    ("pow-2.5", lambda x: x**-2.5, lambda x: x**-2.5, [0.5, 3.0]),
    ("pow0", lambda x: x**0, lambda x: x**0, [-2.0, 3.0]),
]
BINARY = [
    ("add", lambda a, b: a + b, lambda a, b: a + b),
    ("sub", lambda a, b: a - b, lambda a, b: a - b),
    ("mul", lambda a, b: a * b, lambda a, b: a * b),
    ("div", lambda a, b: a / b, lambda a, b: a / b),
]
BINARY_POINTS = [(1.5, -0.5), (-2.0, 3.0), (0.0, 4.0)]
# Numbers on either side of a Value: (name, expression of one Value, same on floats).
WITH_NUMBERS = [
    ("x+2.5", lambda x: x + 2.5, lambda x: x + 2.5), ("2.5+x", lambda x: 2.5 + x, lambda x: 2.5 + x),
    ("x-2.5", lambda x: x - 2.5, lambda x: x - 2.5), ("2.5-x", lambda x: 2.5 - x, lambda x: 2.5 - x),
    ("x*3", lambda x: x * 3, lambda x: x * 3), ("3*x", lambda x: 3 * x, lambda x: 3 * x),
    ("x/4", lambda x: x / 4, lambda x: x / 4), ("4/x", lambda x: 4 / x, lambda x: 4 / x),
]
UNARY_CASES = [pytest.param(fn, ref, x, id=f"{name}({x})") for name, fn, ref, xs in UNARY for x in xs]
BINARY_CASES = [pytest.param(fn, ref, a, b, id=f"{name}({a},{b})") for name, fn, ref in BINARY
                for a, b in BINARY_POINTS]
NUMBER_CASES = [pytest.param(fn, ref, x, id=f"{name}@{x}") for name, fn, ref in WITH_NUMBERS
                for x in (-1.25, 2.0)]


@pytest.mark.parametrize("fn, ref, x", UNARY_CASES + NUMBER_CASES)
def test_unary_forward_and_backward_vs_finite_differences(fn, ref, x):
    data, [grad] = value_grads(fn, [x])
    assert data == pytest.approx(ref(x), rel=1e-12, abs=1e-12)
    assert grad == pytest.approx(central_diff(ref, [x])[0], rel=1e-5, abs=1e-6)


@pytest.mark.parametrize("fn, ref, a, b", BINARY_CASES)
def test_binary_forward_and_backward_vs_finite_differences(fn, ref, a, b):
    data, grads = value_grads(fn, [a, b])
    assert data == pytest.approx(ref(a, b), rel=1e-12, abs=1e-12)
    assert grads == pytest.approx(central_diff(ref, [a, b]), rel=1e-5, abs=1e-6)


def torch_grads(fn: Callable, xs: list[float]) -> tuple[float, list[float]]:
    torch = pytest.importorskip("torch")
    inputs = [torch.tensor(x, dtype=torch.float64, requires_grad=True) for x in xs]
    out = fn(*inputs)
    out.backward()
    return out.item(), [0.0 if t.grad is None else t.grad.item() for t in inputs]


@pytest.mark.parametrize("fn, ref, x", UNARY_CASES + NUMBER_CASES)
def test_unary_vs_torch(fn, ref, x):
    expected_data, expected_grads = torch_grads(fn, [x])
    data, grads = value_grads(fn, [x])
    assert data == pytest.approx(expected_data, rel=1e-12, abs=1e-15)
    assert grads == pytest.approx(expected_grads, rel=1e-12, abs=1e-15)


@pytest.mark.parametrize("fn, ref, a, b", BINARY_CASES)
def test_binary_vs_torch(fn, ref, a, b):
    expected_data, expected_grads = torch_grads(fn, [a, b])
    data, grads = value_grads(fn, [a, b])
    assert data == pytest.approx(expected_data, rel=1e-12, abs=1e-15)
    assert grads == pytest.approx(expected_grads, rel=1e-12, abs=1e-15)


def test_composite_expression_vs_torch():
    def f(a, b, c):
        return ((a * b + c.exp()) / (1 + b**2)).tanh() * c.sigmoid() - (a - c).relu() + (b * b).log()

    expected_data, expected_grads = torch_grads(f, [0.7, -1.3, 0.4])
    data, grads = value_grads(f, [0.7, -1.3, 0.4])
    assert data == pytest.approx(expected_data, rel=1e-12)
    assert grads == pytest.approx(expected_grads, rel=1e-12)


# -- what backward() promises -------------------------------------------------------------------

def test_gradients_accumulate_across_backward_calls_like_torch():
    x = Value(3.0)
    y = x * x + x  # dy/dx = 2x + 1 = 7
    y.backward()
    assert x.grad == 7.0
    y.backward()
    assert x.grad == 14.0  # leaves accumulate
    assert y.grad == 1.0  # the root and other op results hold the latest call only
    torch = pytest.importorskip("torch")
    t = torch.tensor(3.0, dtype=torch.float64, requires_grad=True)
    ty = t * t + t
    ty.backward(retain_graph=True)
    ty.backward()
    assert x.grad == t.grad.item()


def test_second_backward_propagates_the_same_amounts_through_intermediates():
    # micrograd keeps the intermediate grads of the first call, so a second call would send
    # twice the gradient through them and give x.grad = 6 + 18; here it is exactly 2 * 6.
    x = Value(1.0)
    y = 2 * x
    z = 3 * y
    z.backward()
    z.backward()
    assert x.grad == 12.0 and y.grad == 3.0


def test_zero_grad_resets_the_whole_graph():
    a, b = Value(2.0), Value(-1.0)
    c = a * b
    d = c.tanh() + a
    d.backward()
    assert a.grad != 0 and b.grad != 0 and c.grad != 0
    d.zero_grad()
    assert [v.grad for v in (a, b, c, d)] == [0.0, 0.0, 0.0, 0.0]
    d.backward()
    _, expected = value_grads(lambda a, b: (a * b).tanh() + a, [2.0, -1.0])
    assert [a.grad, b.grad] == expected


def test_backward_on_a_leaf_seeds_one():
    x = Value(5.0)
    x.backward()
    assert x.grad == 1.0


def test_diamond_graph_sums_both_paths():
    a = Value(1.5)
    b = a * 2.0
    c = a * 3.0
    d = b + c  # a reaches d along two paths: 2 + 3
    d.backward()
    assert a.grad == 5.0
    x = Value(-4.0)
    (x * x).backward()  # the same Value on both sides of one op
    assert x.grad == -8.0


def test_long_chain_backward_is_iterative():
    x = Value(0.5)
    y = x
    for _ in range(100_000):
        y = y.relu()  # a recursive topological sort would hit Python's recursion limit here
    y.backward()
    assert x.grad == 1.0
    assert len(y._topological_order()) == 100_001


def test_topological_order_puts_inputs_before_outputs():
    a, b = Value(1.0), Value(2.0)
    c = a * b
    d = c + a
    e = d * c
    order = e._topological_order()
    position = {id(v): i for i, v in enumerate(order)}
    for v in order:
        for child in v._prev:
            assert position[id(child)] < position[id(v)]
    assert order[-1] is e and len(order) == 5


# -- bad inputs raise, and say which op and what to do ------------------------------------------

@pytest.mark.parametrize("bad", ["2", None, [1.0], True, 1 + 2j],
                         ids=["str", "None", "list", "bool", "complex"])
@pytest.mark.parametrize("op, symbol", [(lambda x, o: x + o, "+"), (lambda x, o: o + x, "+"),
                                        (lambda x, o: x - o, "-"), (lambda x, o: o - x, "-"),
                                        (lambda x, o: x * o, "*"), (lambda x, o: o * x, "*"),
                                        (lambda x, o: x / o, "/"), (lambda x, o: o / x, "/")])
def test_non_number_operands_raise_type_error_naming_op_and_type(op, symbol, bad):
    with pytest.raises(TypeError) as info:
        op(Value(1.0), bad)
    message = str(info.value)
    assert message.startswith(f"{symbol}:") and type(bad).__name__ in message
    assert "an int or a float" in message


def test_bool_is_rejected_with_a_reason():
    with pytest.raises(TypeError, match=r"bool is rejected on purpose.*float\(flag\)"):
        Value(2.0) * True


def test_numpy_scalars_are_numbers():
    np = pytest.importorskip("numpy")
    y = Value(2.0) * np.float32(1.5) + np.int64(1)
    assert y.data == 4.0


@pytest.mark.parametrize("data", ["1", None, True, Value(1.0)])
def test_value_data_must_be_a_number(data):
    with pytest.raises(TypeError, match="Value: data must be an int or a float"):
        Value(data)


def test_non_finite_data_is_rejected():
    with pytest.raises(ValueError, match="nan"):
        Value(float("nan"))
    with pytest.raises(OverflowError, match="inf"):
        Value(float("inf"))


@pytest.mark.parametrize("x", [0.0, -1.0])
def test_log_of_non_positive_raises_value_error(x):
    with pytest.raises(ValueError, match=rf"^log: log\({x}\) is undefined"):
        Value(x).log()


def test_division_by_zero_raises_zero_division_error():
    with pytest.raises(ZeroDivisionError, match=r"^/: division by zero \(3.0 / 0.0\)"):
        Value(3.0) / 0
    with pytest.raises(ZeroDivisionError, match="^/: division by zero"):
        2 / Value(0.0)


def test_pow_errors():
    with pytest.raises(TypeError, match=r"^\*\*: a Value exponent is not supported"):
        Value(2.0) ** Value(3.0)
    with pytest.raises(TypeError, match=r"^\*\*: the exponent must be an int or a float, got str"):
        Value(2.0) ** "3"
    with pytest.raises(TypeError, match=r"^\*\*: int \*\* Value is not supported"):
        2 ** Value(3.0)
    with pytest.raises(ValueError, match=r"^\*\*: 0.0 \*\* -1 is undefined"):
        Value(0.0) ** -1
    with pytest.raises(ValueError, match=r"^\*\*: \(-8.0\) \*\* 0.5 is not a real number"):
        Value(-8.0) ** 0.5
    with pytest.raises(OverflowError, match=r"^\*\*: .* overflows"):
        Value(1e200) ** 2


def test_exp_overflow_names_exp_and_input():
    with pytest.raises(OverflowError, match=r"^exp: exp\(1000.0\) overflows"):
        Value(1000.0).exp()


@pytest.mark.parametrize("op, symbol", [(lambda a: a * 10.0, "*"), (lambda a: a + a, "+")])
def test_forward_overflow_to_inf_raises_naming_the_op(op, symbol):
    with pytest.raises(OverflowError, match=rf"^\{symbol}: result is inf for input\(s\)"):
        op(Value(1e308))


def test_infinite_slope_in_backward_raises_naming_the_op():
    x = Value(0.0)
    y = x**0.5  # the forward is fine: sqrt(0) = 0; the slope there is infinite
    with pytest.raises(OverflowError, match=r"^backward of '\*\*0.5': gradient is inf"):
        y.backward()


def test_gradient_overflow_in_backward_raises_naming_the_op():
    a, b = Value(1e-300), Value(1e300)
    y = (a * b) * 1e300  # every forward value is finite, but dy/da = 1e300 * b overflows
    with pytest.raises(OverflowError, match=r"^backward of '\*': gradient is inf"):
        y.backward()


def test_log_backward_overflow_for_subnormal_input():
    y = Value(1e-320).log()
    with pytest.raises(OverflowError, match=r"^backward of 'log'"):
        y.backward()


def test_repr_is_plain_and_reproducible():
    assert repr(Value(0.5)) == "Value(data=0.5000, grad=0.0000)"
    assert repr(Value(-2.0, label="w")) == "Value(data=-2.0000, grad=0.0000, label='w')"


# -- property: random smooth expressions agree with finite differences --------------------------

SMOOTH_UNARY = [lambda v: v.tanh(), lambda v: v.sigmoid(), lambda v: v**2, lambda v: -v,
                lambda v: (v.tanh()).exp(), lambda v: (1 + v.sigmoid()).log(), lambda v: 1 / (1 + v * v)]
SMOOTH_BINARY = [lambda p, q: p + q, lambda p, q: p - q, lambda p, q: p * q,
                 lambda p, q: p / (2 + q.tanh())]


def expressions(n_vars: int) -> st.SearchStrategy:
    """Random expression trees over x0..x{n-1}, as nested tuples."""
    variables = st.integers(0, n_vars - 1).map(lambda i: ("var", i))
    leaves = variables | st.floats(-2, 2).map(lambda c: ("const", c))
    return st.recursive(leaves, lambda sub: st.one_of(
        st.tuples(st.just("unary"), st.integers(0, len(SMOOTH_UNARY) - 1), sub),
        st.tuples(st.just("binary"), st.integers(0, len(SMOOTH_BINARY) - 1), sub, sub)), max_leaves=8)


def evaluate(tree, xs):
    kind = tree[0]
    if kind == "var":
        return xs[tree[1]]
    if kind == "const":
        return Value(tree[1])
    if kind == "unary":
        return SMOOTH_UNARY[tree[1]](evaluate(tree[2], xs))
    return SMOOTH_BINARY[tree[1]](evaluate(tree[2], xs), evaluate(tree[3], xs))


@settings(max_examples=60, deadline=None)
@given(expressions(3), st.lists(st.floats(-2, 2), min_size=3, max_size=3))
def test_random_expressions_match_finite_differences(tree, xs):
    def f(*floats):
        return evaluate(tree, [Value(x) for x in floats]).data

    inputs = [Value(x) for x in xs]
    out = evaluate(tree, inputs)
    out.backward()
    numeric = central_diff(f, xs)
    for v, n in zip(inputs, numeric, strict=True):
        assert v.grad == pytest.approx(n, rel=1e-4, abs=1e-5)
