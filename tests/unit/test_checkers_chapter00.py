"""Gradient checks, and details of the chapter-00 checkers that the generic exercise tests do not cover.

Every exercise is also run on its reference solution and its typical mistakes in test_exercises.py.
"""

from __future__ import annotations

import math

import pytest

from tinyedu.exercises import (
    MANUAL_BACKPROP_INPUTS,
    check_exercise_repeated_backward,
    check_manual_backprop,
    check_value_grads,
    numerical_grad,
)
from tinyedu.scalar import Value

# -- gradient checks --------------------------------------------------------------------------


def test_numerical_grad_of_known_functions():
    assert numerical_grad(lambda x, y: x * x + 3 * x * y, [1.0, 2.0]) == pytest.approx([8.0, 3.0], rel=1e-8)
    assert numerical_grad(math.sin, [0.3]) == pytest.approx([math.cos(0.3)], rel=1e-8)
    assert numerical_grad(lambda x: Value(x) ** 3, [2.0]) == pytest.approx([12.0], rel=1e-8)  # Value result


def test_check_value_grads_accepts_a_correct_backward():
    grads = check_value_grads(lambda a, b: (a * b).tanh() + a.exp() / b, [0.3, -1.2])
    expected = numerical_grad(lambda a, b: math.tanh(a * b) + math.exp(a) / b, [0.3, -1.2])
    assert grads == pytest.approx(expected)


def broken_square(x: Value) -> Value:
    out = Value(x.data**2, (x,), "square")

    def _backward(out_grad: float) -> None:
        x.grad += x.data * out_grad  # wrong: the slope of x**2 is 2x

    out._backward = _backward
    return out


def test_check_value_grads_rejects_a_wrong_backward():
    with pytest.raises(AssertionError, match=r"gradient of input 0 \(x = 1.5\): backward gave 1.5, finite "
                                             r"differences 3.*_backward of some op in f is wrong"):
        check_value_grads(broken_square, [1.5])


# -- manual backprop ----------------------------------------------------------------------------

RIGHT_MANUAL = {"a": 6.0, "b": -4.0, "c": -2.0, "d": -2.0, "e": -2.0, "f": 4.0}


def test_manual_backprop_expected_values_by_hand():
    # L = (a*b + c) * f with a=2, b=-3, c=10, f=-2: d = 4, so dL/df = 4, dL/dd = f = -2, ...
    assert MANUAL_BACKPROP_INPUTS == {"a": 2.0, "b": -3.0, "c": 10.0, "f": -2.0}


def test_manual_backprop_right():
    assert "all six gradients" in check_manual_backprop(RIGHT_MANUAL)
    assert "all six gradients" in check_manual_backprop({k: int(v) for k, v in RIGHT_MANUAL.items()})
    assert "36" not in check_exercise_repeated_backward(36)  # an int is a number too


def test_manual_backprop_wrong_gives_chain_rule_hints_not_answers():
    wrong = dict(RIGHT_MANUAL, a=-6.0, e=1.0)
    with pytest.raises(AssertionError) as info:
        check_manual_backprop(wrong)
    message = str(info.value)
    assert "2 of 6 gradients are not right yet: ['a', 'e']" in message
    assert "dL/da: e = a * b" in message and "dL/de: d = e + c" in message
    assert "6.0" not in message and "-2.0" not in message  # the answers stay hidden


@pytest.mark.parametrize("answers, match", [
    ([6, -4], "expected a dict like"),
    ({"a": 6.0}, r"missing gradient\(s\) for \['b', 'c', 'd', 'e', 'f'\]"),
    (dict(RIGHT_MANUAL, b="-4"), r"the answers for \['b'\] are not finite numbers"),
    (dict(RIGHT_MANUAL, c=float("nan")), r"the answers for \['c'\] are not finite numbers"),
])
def test_manual_backprop_wrong_kind(answers, match):
    with pytest.raises(AssertionError, match=match):
        check_manual_backprop(answers)
