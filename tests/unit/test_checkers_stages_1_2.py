"""The exercise checkers of notebooks 01-03 accept right answers and reject wrong ones with a hint."""

import numpy as np
import pytest

from tinyedu import Tensor
from tinyedu.testing import (
    check_broadcast_shape,
    check_index_expression,
    check_kernel_count,
    check_mish,
    check_strides,
)


def test_broadcast_shape(capsys):
    check_broadcast_shape((3, 1, 5), (4, 5), (3, 4, 5))
    check_broadcast_shape((2, 3), (3, 2), None)
    assert capsys.readouterr().out.count("Correct") == 2
    with pytest.raises(AssertionError, match="Line the shapes up on the right"):
        check_broadcast_shape((3, 1, 5), (4, 5), (3, 1, 5))
    with pytest.raises(AssertionError, match="None"):
        check_broadcast_shape((2, 3), (3, 2), (2, 3))


def test_mish(capsys):
    check_mish(lambda x: x * x.softplus().tanh())
    assert "Correct" in capsys.readouterr().out
    with pytest.raises(AssertionError, match="values are off"):
        check_mish(lambda x: x.softplus().tanh())
    with pytest.raises(AssertionError, match="Tensor of the input's shape"):
        check_mish(lambda x: x.sum())


def test_strides(capsys):
    check_strides((2, 3, 4), (2, 0, 1), (1, 12, 4))
    assert "Correct" in capsys.readouterr().out
    with pytest.raises(AssertionError, match="permute moves those strides"):
        check_strides((2, 3, 4), (2, 0, 1), (12, 4, 1))
    with pytest.raises(AssertionError, match="one stride per axis"):
        check_strides((2, 3, 4), (2, 0, 1), (1, 12))


def test_index_expression(capsys):
    x = Tensor(np.arange(12, dtype=np.float32)).reshape(3, 4)
    check_index_expression(x.flip(0), "((idx0*-4) + idx1 + 8)")
    assert "Correct" in capsys.readouterr().out
    with pytest.raises(AssertionError, match=r"variables \['idx0', 'idx1'\]"):
        check_index_expression(x.flip(0), "((idx0*4)+idx1)")


def test_kernel_count(capsys):
    a = Tensor(np.ones((4, 6), dtype=np.float32)).realize()
    check_kernel_count(lambda: (a - a.max(1, keepdim=True)).sum(), 2)
    assert "Correct" in capsys.readouterr().out
    with pytest.raises(AssertionError, match="more kernels than 1.*rule 4"):
        check_kernel_count(lambda: (a - a.max(1, keepdim=True)).sum(), 1)
    with pytest.raises(AssertionError, match="fewer kernels than 3.*Only the output"):
        check_kernel_count(lambda: (a * 2 + 1).sum(), 3)
    with pytest.raises(AssertionError, match="as an int"):
        check_kernel_count(lambda: a.sum(), "one")
