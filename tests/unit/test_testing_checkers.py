"""The stage-0 checkers in tinyedu.testing: right answers pass, wrong ones get a helpful message."""

from __future__ import annotations

import math

import pytest

from tinyedu.scalar import Value
from tinyedu.testing import (
    MANUAL_BACKPROP_INPUTS,
    check_exercise,
    check_exercise_custom_op,
    check_exercise_repeated_backward,
    check_exercise_sigmoid_grad,
    check_manual_backprop,
    check_value_grads,
    numerical_grad,
)

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


def test_manual_backprop_right(capsys):
    check_manual_backprop(RIGHT_MANUAL)
    check_manual_backprop({k: int(v) for k, v in RIGHT_MANUAL.items()})  # ints are numbers too
    assert "manual_backprop: correct" in capsys.readouterr().out


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


# -- sigmoid_grad ------------------------------------------------------------------------------

def sigmoid(x: float) -> float:
    return 1 / (1 + math.exp(-x))


def test_sigmoid_grad_right(capsys):
    check_exercise_sigmoid_grad(lambda x: sigmoid(x) * (1 - sigmoid(x)))
    assert "sigmoid_grad: correct" in capsys.readouterr().out


@pytest.mark.parametrize("fn, match", [
    (sigmoid, r"at x = -4.0 .* Hint: that is sigmoid\(x\) itself"),
    (lambda x: sigmoid(x) * (1 + sigmoid(x)),
     r"numerical slope of sigmoid there is 0.017663.*sigmoid\(x\) \* \(\.\.\.\)"),
    (lambda x: str(x), r"returned '-4.0' \(str\); it should return a finite float"),
    (lambda x: sigmoid(x) * (1 - sigmoid(x)) * x / x,
     r"calling your function with x = 0.0 raised ZeroDivision"),
    (42, "expected a function of one float"),
])
def test_sigmoid_grad_wrong(fn, match):
    with pytest.raises(AssertionError, match=match):
        check_exercise_sigmoid_grad(fn)


# -- custom_op ---------------------------------------------------------------------------------

def make_cube(local=lambda x: 3 * x * x, use_out_grad=True, accumulate=True, link=True,
              result=lambda x: x**3):
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


def test_custom_op_right(capsys):
    check_exercise_custom_op(make_cube())
    assert "custom_op: correct" in capsys.readouterr().out


@pytest.mark.parametrize("cube, match", [
    (make_cube(accumulate=False), r"not the sum over both uses\. Hint: use `x.grad \+= \.\.\.`"),
    (make_cube(use_out_grad=False), "your _backward ignores out_grad"),
    (make_cube(local=lambda x: x * x), "the local derivative of x\\*\\*3 is wrong"),
    (make_cube(link=False), r"does not list x among its inputs \(_prev\)"),
    (make_cube(result=lambda x: x**2), "not x cubed"),
    (lambda x: x.data**3, "returned float; it must return a new Value"),
    ("cube", "expected a function taking a Value"),
])
def test_custom_op_wrong(cube, match):
    with pytest.raises(AssertionError, match=match):
        check_exercise_custom_op(cube)


# -- repeated_backward -------------------------------------------------------------------------

def test_repeated_backward_right(capsys):
    check_exercise_repeated_backward(36.0)
    check_exercise_repeated_backward(36)
    assert "repeated_backward: correct" in capsys.readouterr().out


@pytest.mark.parametrize("answer, match", [
    (12.0, "that is the gradient of one call"),
    (0.0, "only zero_grad\\(\\) does"),
    (-36.0, "work out dy/dx at x = -2"),
    ("36", "expected a single number"),
])
def test_repeated_backward_wrong(answer, match):
    with pytest.raises(AssertionError, match=match):
        check_exercise_repeated_backward(answer)


# -- dispatch ----------------------------------------------------------------------------------

def test_check_exercise_dispatches_by_name(capsys):
    check_exercise("manual_backprop", RIGHT_MANUAL)
    check_exercise("sigmoid_grad", lambda x: sigmoid(x) * (1 - sigmoid(x)))
    check_exercise("custom_op", make_cube())
    check_exercise("repeated_backward", 36.0)
    assert capsys.readouterr().out.count("correct") == 4
    with pytest.raises(AssertionError, match="that is the gradient of one call"):
        check_exercise("repeated_backward", 12.0)
    with pytest.raises(ValueError, match=r"no exercise named 'nope'; the exercises are \['custom_op'"):
        check_exercise("nope", 1)
