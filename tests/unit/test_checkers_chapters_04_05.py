"""The exercise checkers of notebooks 04-05 accept right answers and reject wrong ones with a hint."""

import math

import numpy as np
import pytest

from tinyedu import Tensor
from tinyedu.exercises import check_c_expression, check_compile_count, check_load_count, check_loop_bounds

needs_c = pytest.mark.usefixtures("cache")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A private compile cache, so these tests neither need nor fill the user's."""
    monkeypatch.setenv("TINYEDU_CACHE", str(tmp_path))
    return tmp_path


def tensors(*shapes):
    rng = np.random.default_rng(0)
    return [Tensor(rng.standard_normal(shape).astype(np.float32)) for shape in shapes]


def test_loop_bounds():
    x, w = tensors((3, 5), (5, 2))
    assert check_loop_bounds(lambda: x.sum(0), [5, 3]).startswith("gidx0<5 ridx0<3")
    assert check_loop_bounds(lambda: x @ w, (3, 2, 5)).startswith("gidx0<3 gidx1<2 ridx0<5")
    with pytest.raises(AssertionError, match="wrong order: the Kernel puts the output axes first"):
        check_loop_bounds(lambda: x.sum(0), [3, 5])
    with pytest.raises(AssertionError, match="more loops than 2.*size 1"):
        check_loop_bounds(lambda: x @ w, [3, 2])
    with pytest.raises(AssertionError, match=r"sizes differ.*broadcast \(n, m, k\)"):
        check_loop_bounds(lambda: x @ w, [3, 5, 5])
    with pytest.raises(AssertionError, match="one int per loop"):
        check_loop_bounds(lambda: x.sum(0), "5, 3")


def test_loop_bounds_needs_one_kernel():
    (x,) = tensors((3, 5))
    with pytest.raises(ValueError, match="makes 2 compute kernels"):
        check_loop_bounds(lambda: x - x.max(1, keepdim=True), [3, 5])


def test_load_count():
    x, y = tensors((8,), (8,))
    assert check_load_count(lambda: (x * y + x).relu(), 2) == "2 LOAD(s)."
    assert check_load_count(lambda: x + x.flip(0), 2) == "2 LOAD(s)."
    with pytest.raises(AssertionError, match="fewer LOADs than 5.*computed once"):
        check_load_count(lambda: (x * y + x).relu(), 5)
    with pytest.raises(AssertionError, match="more LOADs than 1.*two different views"):
        check_load_count(lambda: x + x.flip(0), 1)
    with pytest.raises(AssertionError, match="as an int"):
        check_load_count(lambda: x + x, "1")


@needs_c
def test_c_expression():
    x, y = tensors((16,), (16,))
    sigmoid = lambda: (1 + (-x * (1 / math.log(2))).exp2()).reciprocal()  # noqa: E731 - 5 primitives
    answers = [(sigmoid, "1.0f/(1.0f+exp2f((-val0)*1.442695f))"),
               (lambda: (x * 0.1 + y).relu(), "(val0*0.1f+val1 < 0.0f) ? 0.0f : val0*0.1f+val1"),
               (lambda: x.maximum(y) * 2, "max_float32(val0, val1) * 2.0f")]
    for build, answer in answers:
        assert check_c_expression(build, answer).startswith("bit for bit")
    with pytest.raises(AssertionError, match="your expression gives .* the kernel .*f suffix is a double"):
        check_c_expression(lambda: (x * 0.1 + y).relu(), "(val0*0.1+val1 < 0.0f) ? 0.0f : val0*0.1+val1")
    with pytest.raises(AssertionError, match="val1=nan your expression gives .*not fmaxf"):
        check_c_expression(lambda: x.maximum(y) * 2, "fmaxf(val0, val1) * 2.0f")
    with pytest.raises(AssertionError, match=r"(?s)compiler rejects this expression.*the loads are val0 in"):
        check_c_expression(sigmoid, "1.0f/(1.0f+exp2f(-val0*1.442695f)")
    with pytest.raises(AssertionError, match="as a string"):
        check_c_expression(sigmoid, 0.5)


@needs_c
def test_c_expression_needs_a_plain_elementwise_kernel():
    (x,) = tensors((4, 4))
    with pytest.raises(ValueError, match="elementwise float32 kernel over one axis"):
        check_c_expression(lambda: x * 2, "val0*2.0f")


def test_compile_count():
    x, y = tensors((4, 4), (4, 4))
    message = check_compile_count(lambda: [x * 2, y * 2, x * 3], 2)
    assert message.startswith("3 kernel(s), 2 different source(s)")
    with pytest.raises(AssertionError, match="fewer compiles than 3.*other data reuses"):
        check_compile_count(lambda: [x * 2, y * 2, x * 3], 3)
    with pytest.raises(AssertionError, match=r"more compiles than 1.*2\.0f is not 3\.0f"):
        check_compile_count(lambda: [x * 2, y * 2, x * 3], 1)
    with pytest.raises(AssertionError, match="as an int"):
        check_compile_count(lambda: [x * 2], 1.0)
