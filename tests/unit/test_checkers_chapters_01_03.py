"""The exercise checkers of notebooks 01-03 accept right answers and reject wrong ones with a hint."""

import numpy as np
import pytest

from tinyedu import Tensor
from tinyedu.exercises import (
    check_broadcast_shape,
    check_index_expression,
    check_kernel_count,
    check_mish,
    check_strides,
)


def test_broadcast_shape():
    assert check_broadcast_shape((3, 1, 5), (4, 5), (3, 4, 5)) == "(3, 4, 5)"
    assert check_broadcast_shape((2, 3), (3, 2), None) == "None"
    with pytest.raises(AssertionError, match="Line the shapes up on the right"):
        check_broadcast_shape((3, 1, 5), (4, 5), (3, 1, 5))
    with pytest.raises(AssertionError, match="None"):
        check_broadcast_shape((2, 3), (3, 2), (2, 3))


def test_mish():
    assert "values match numpy" in check_mish(lambda x: x * x.softplus().tanh())
    with pytest.raises(AssertionError, match="values are off"):
        check_mish(lambda x: x.softplus().tanh())
    with pytest.raises(AssertionError, match="Tensor of the input's shape"):
        check_mish(lambda x: x.sum())


def test_strides():
    assert "strides (1, 12, 4)" in check_strides((2, 3, 4), (2, 0, 1), (1, 12, 4))
    with pytest.raises(AssertionError, match="permute moves those strides"):
        check_strides((2, 3, 4), (2, 0, 1), (12, 4, 1))
    with pytest.raises(AssertionError, match="one stride per axis"):
        check_strides((2, 3, 4), (2, 0, 1), (1, 12))


@pytest.mark.parametrize("answer", ["((idx0*-4) + idx1 + 8)", "8 - 4*idx0 + idx1", "idx1 + 4*(2 - idx0)",
                                    "((idx0*-4)+idx1+8)", "(11 - idx1 - 4*idx0) - 3 + 2*idx1"])
def test_index_expression_compares_values_not_strings(answer):
    x = Tensor(np.arange(12, dtype=np.float32)).reshape(3, 4)
    assert "at all 12 positions" in check_index_expression(x.flip(0), answer)


@pytest.mark.parametrize("answer, match", [
    ("((idx0*4)+idx1)", "at idx0 = 0, idx1 = 0 your expression gives 0"),
    ("(idx0*4)+idx1+8", "one step along idx0 moves your index by 4"),
    ("8 - 4*idx0 - idx1", "one step along idx1 moves your index by -1"),
    ("8 - 4*idx0 + idx1 + (idx0*idx1) % 1 + idx0*idx0 - idx0", "further in the range"),
    ("idx0 +", "does not parse"),
    ("8 - 4*idx2 + idx1", "it has 'idx2'"),
    ("__import__('os')", "it has 'Call'"),
    (8, "as a string"),
])
def test_index_expression_hints(answer, match):
    x = Tensor(np.arange(12, dtype=np.float32)).reshape(3, 4)
    with pytest.raises(AssertionError, match=match):
        check_index_expression(x.flip(0), answer)


def test_index_expression_ignores_padding():
    """Where the view is padding, the index is never used: any value there is fine."""
    x = Tensor(np.arange(12, dtype=np.float32)).reshape(3, 4)
    padded = x.pad(((1, 0), (0, 2)))
    assert "at all 12 positions" in check_index_expression(padded, "idx0*4 + idx1 - 4")
    assert "at all 12 positions" in check_index_expression(padded, "(idx0 - 1)*4 + idx1")


def test_kernel_count():
    a = Tensor(np.ones((4, 6), dtype=np.float32)).realize()
    assert check_kernel_count(lambda: (a - a.max(1, keepdim=True)).sum(), 2) == "2 kernel(s)."
    with pytest.raises(AssertionError, match="more kernels than 1.*rule 4"):
        check_kernel_count(lambda: (a - a.max(1, keepdim=True)).sum(), 1)
    with pytest.raises(AssertionError, match="fewer kernels than 3.*Only the output"):
        check_kernel_count(lambda: (a * 2 + 1).sum(), 3)
    with pytest.raises(AssertionError, match="as an int"):
        check_kernel_count(lambda: a.sum(), "one")
