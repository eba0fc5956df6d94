"""Bad input must fail early with an exception a learner can act on: the right type (as PyTorch
would raise, or ValueError for a shape that does not fit), and a message that names the op, the
shapes or values involved, and what would be valid.

The last part is a fuzz test: hypothesis feeds random, mostly invalid, arguments to the public
API and checks that nothing else ever comes out (no AssertionError, KeyError, ZeroDivisionError
from deep inside the engine), and that every message names the op that was called.
"""

from __future__ import annotations

import os
import re
from types import SimpleNamespace
from typing import Any, Callable

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tinyedu import Device, Tensor, dtypes

API_ERRORS = (ValueError, IndexError, TypeError, RuntimeError, OverflowError)


def raises(exc: type[Exception] | tuple, *words: str) -> Any:
    """pytest.raises that also wants every one of `words` in the message (regex-escaped)."""
    return pytest.raises(exc, match="(?s)" + "".join(f"(?=.*{re.escape(w)})" for w in words))


x23 = Tensor.arange(6).reshape(2, 3).float()


# ---- shapes that do not fit ----
class TestShapes:
    def test_matmul(self) -> None:
        with raises(ValueError, "matmul", "(2, 3)", "(2, 3)", "second-to-last"):
            x23 @ x23
        with raises(ValueError, "matmul", "at least 1 dimension"):
            Tensor(2.0) @ x23
        with raises(ValueError, "matmul", "(2, 2, 3)", "(3, 3, 1)", "batch"):
            Tensor.ones(2, 2, 3) @ Tensor.ones(3, 3, 1)
        with raises(TypeError, "matmul", "list"):
            x23 @ [[1.0], [2.0], [3.0]]

    def test_conv2d(self) -> None:
        image = Tensor.ones(1, 3, 5, 5)
        with raises(ValueError, "conv2d", "3 channels", "(2, 2, 3, 3)"):
            image.conv2d(Tensor.ones(2, 2, 3, 3))
        with raises(ValueError, "conv2d", "(C_in, H, W)", "(5, 5)"):
            Tensor.ones(5, 5).conv2d(Tensor.ones(1, 1, 3, 3))
        with raises(ValueError, "conv2d", "kernel", "(7, 7)", "padded input"):
            image.conv2d(Tensor.ones(1, 3, 7, 7))
        with raises(ValueError, "conv2d", "groups"):
            image.conv2d(Tensor.ones(4, 1, 3, 3), groups=3)
        with raises(ValueError, "conv2d", "stride", ">= 1"):
            image.conv2d(Tensor.ones(1, 3, 3, 3), stride=0)
        with raises(ValueError, "conv2d", "padding", "'same'"):
            image.conv2d(Tensor.ones(1, 3, 3, 3), padding="full")
        with raises(ValueError, "conv2d", "bias", "(2,)"):
            image.conv2d(Tensor.ones(2, 3, 3, 3), bias=Tensor.ones(3))
        with raises(TypeError, "conv2d", "weight"):
            image.conv2d(np.ones((1, 3, 3, 3)))

    def test_pooling(self) -> None:
        with raises(ValueError, "max_pool2d", "padding", "half"):
            Tensor.ones(1, 1, 4, 4).max_pool2d(2, padding=2)
        with raises(ValueError, "avg_pool2d", "(N, C, H, W)"):
            Tensor.ones(4, 4).avg_pool2d(2)
        with raises(ValueError, "max_pool2d", "kernel_size", ">= 1"):
            Tensor.ones(1, 1, 4, 4).max_pool2d((2, 0))

    def test_cat_and_stack(self) -> None:
        with raises(ValueError, "cat", "(2, 3)", "(2, 4)", "dim 0"):
            Tensor.cat(x23, Tensor.ones(2, 4))
        with raises(ValueError, "cat", "0-d"):
            Tensor.cat(Tensor(1.0), Tensor(2.0))
        with raises(IndexError, "cat", "but got 2"):
            Tensor.cat(x23, x23, dim=2)
        with raises(TypeError, "cat", "item 1", "ndarray"):
            Tensor.cat(x23, np.ones((2, 3)))
        with raises(ValueError, "cat", "non-empty"):
            Tensor.cat([])
        with raises(ValueError, "stack", "same shape", "(3, 2)"):
            Tensor.stack(x23, x23.T)

    def test_broadcasting(self) -> None:
        with raises(ValueError, "add", "(2, 3)", "(2,)", "equal or 1"):
            x23 + Tensor.ones(2)
        with raises(ValueError, "where", "(4,)"):
            (x23 > 1).where(Tensor.ones(4), 0)

    def test_losses_and_norms(self) -> None:
        logits = Tensor.ones(3, 4)
        with raises(ValueError, "cross_entropy", "(4,)", "(3,)"):
            logits.cross_entropy(Tensor([0, 1, 2, 3]))
        with raises(TypeError, "cross_entropy", "integers"):
            logits.cross_entropy(Tensor([True, False, True]))
        with raises(ValueError, "cross_entropy", "reduction", "'avg'"):
            logits.cross_entropy(Tensor([0, 1, 2]), reduction="avg")
        with raises(ValueError, "binary_cross_entropy", "(3, 4)", "(4,)"):
            logits.sigmoid().binary_cross_entropy(Tensor.ones(4))
        with raises(ValueError, "layer_norm", "(3,)", "(3, 4)"):
            logits.layer_norm(3)
        with raises(ValueError, "linear", "(3, 4)", "(4, 3)"):
            logits.linear(Tensor.ones(4, 3))
        with raises(ValueError, "dropout", "between 0 and 1", "1.5"):
            logits.dropout(1.5)


# ---- movement ----
class TestMovement:
    def test_reshape(self) -> None:
        with raises(ValueError, "reshape", "(2, 3)", "(4,)", "6 elements"):
            x23.reshape(4)
        with raises(ValueError, "reshape", "at most one -1"):
            x23.reshape(-1, -1)
        with raises(ValueError, "reshape", "-1", "(4, -1)"):
            x23.reshape(4, -1)
        with raises(TypeError, "reshape", "ints"):
            x23.reshape(2.0, 3)

    def test_permute_expand_pad_shrink(self) -> None:
        with raises(ValueError, "permute", "(0, 0)", "permutation"):
            x23.permute(0, 0)
        with raises(IndexError, "permute", "but got 2"):
            x23.permute(0, 2)
        with raises(ValueError, "expand", "(2, 3)", "(2, 4)", "size-1"):
            x23.expand(2, 4)
        with raises(ValueError, "expand", "fewer dimensions"):
            x23.expand(3)
        with raises(ValueError, "pad", "crops more", "(2, 3)"):
            x23.pad(((0, -3), (0, 0)))  # negative padding crops (as F.pad), but not past the size
        with raises(ValueError, "pad", "one entry per axis"):
            x23.pad(((1, 1),))
        with raises(ValueError, "pad", "even number of ints"):
            x23.pad((1, 2, 3))
        with raises(ValueError, "pad", "(before, after)"):
            x23.pad(((1, 2), 3))
        with raises(ValueError, "shrink", "0 <= start <= end <= size"):
            x23.shrink(((0, 3), (0, 3)))
        with raises(ValueError, "shrink", "(start, end)"):
            x23.shrink((1, None))

    def test_other_movement(self) -> None:
        with raises(ValueError, "repeat", "at least one per axis"):
            x23.repeat(2)
        with raises(ValueError, "as_strided", "position 8", "6 elements"):
            x23.as_strided((3, 3), (2, 1), 2)
        with raises(ValueError, "as_strided", "negative strides"):
            x23.as_strided((2,), (-1,))
        with raises(ValueError, "split", "add up to 2"):
            x23.split([1, 2])
        with raises(ValueError, "split", "positive"):
            x23.split(0)
        with raises(ValueError, "chunk", "positive"):
            x23.chunk(0)
        with raises(ValueError, "flatten", "start_dim"):
            x23.flatten(1, 0)


# ---- axes and indices out of range ----
class TestRanges:
    @pytest.mark.parametrize("call", [
        lambda: x23.sum(2), lambda: x23.max(-3), lambda: x23.mean((0, 5)), lambda: x23.var(3),
        lambda: x23.softmax(2), lambda: x23.log_softmax(-3), lambda: x23.logsumexp(4), lambda: x23.argmax(2),
        lambda: x23.argmin(-3), lambda: x23.any(2), lambda: x23.transpose(0, 2), lambda: x23.flip(2),
        lambda: x23.squeeze(3), lambda: x23.split(1, dim=2), lambda: x23.gather(2, x23.int()),
    ])
    def test_axis_out_of_range(self, call: Callable) -> None:
        with raises(IndexError, "Dimension out of range", "(2, 3)", "expected to be in range of [-2, 1]"):
            call()

    def test_unsqueeze_has_one_more_axis(self) -> None:
        # worded as PyTorch's: "Dimension out of range (expected to be in range of [-3, 2], but got 4)"
        torch_words = "Dimension out of range (expected to be in range of [{}, {}], but got {})"
        with raises(IndexError, "unsqueeze: " + torch_words.format(-3, 2, 4)):
            x23.unsqueeze(4)
        with raises(IndexError, "squeeze: " + torch_words.format(-2, 1, 2)):
            x23.squeeze((0, 2))
        with raises(IndexError, "unsqueeze", "[-1, 0]", "but got 1"):
            Tensor(1.0).unsqueeze(1)

    def test_axis_type(self) -> None:
        with raises(TypeError, "sum", "axis must be an int", "float"):
            x23.sum(1.0)
        with raises(ValueError, "sum", "same dimension twice"):
            x23.sum((1, -1))

    def test_getitem(self) -> None:
        with raises(IndexError, "__getitem__", "index 2", "axis 0", "size 2", "-2..1"):
            x23[2]
        with raises(IndexError, "__getitem__", "index -4", "axis 1"):
            x23[0, -4]
        with raises(IndexError, "__getitem__", "too many indices", "(2, 3)"):
            x23[0, 0, 0]
        with raises(IndexError, "__getitem__", "value 3", "size 3", "-3..2"):
            x23[:, [0, 3]]
        with raises(IndexError, "__getitem__", "value -3", "size 2"):
            x23[Tensor([-3])]
        with raises(IndexError, "__getitem__", "single ellipsis"):
            x23[..., ...]
        with raises(ValueError, "__getitem__", "step 0"):
            x23[::0]
        with raises(TypeError, "__getitem__", "slice", "int"):
            x23[0.5:]
        with raises(IndexError, "__getitem__", "float"):
            x23[1.5]
        with raises(IndexError, "__getitem__", "boolean mask"):
            x23[x23 > 2]
        with raises(IndexError, "__getitem__", "integers", "float32"):
            x23[Tensor([0.0])]
        with raises(TypeError, "__setitem__", "x.assign(new_values)"):
            x23[0] = 1.0

    def test_gather_and_targets(self) -> None:
        with raises(IndexError, "gather", "value 3", "size 3", "0..2"):
            x23.gather(1, Tensor([[0, 3]]))
        with raises(IndexError, "gather", "value -1"):
            x23.gather(0, Tensor([[-1]]))
        with raises(ValueError, "gather", "(3, 1)", "(2, 3)"):
            x23.gather(1, Tensor([[0], [1], [2]]))
        with raises(TypeError, "gather", "integers", "float32"):
            x23.gather(0, x23)
        with raises(IndexError, "cross_entropy", "target 3", "3 classes"):
            x23.cross_entropy(Tensor([0, 3]))
        with raises(IndexError, "nll_loss", "target -2"):
            x23.log_softmax(1).nll_loss(Tensor([0, -2]))

    def test_item_and_bool(self) -> None:
        with raises(ValueError, "item", "(2, 3)"):
            x23.item()
        with raises(RuntimeError, "bool", "ambiguous", ".any()"):
            bool(x23)
        with raises(RuntimeError, "backward", "retain_graph"):
            y = Tensor([1.0], requires_grad=True) * 2
            y.sum().backward()
            y.sum().backward()


# ---- devices and dtypes ----
class TestDevicesAndDtypes:
    def test_mismatched_devices_message(self) -> None:
        """The message path, without a second device: _broadcasted compares device names."""
        a, b = Tensor([1.0]), Tensor([2.0])
        b.lazydata = SimpleNamespace(device="ELSEWHERE")  # Tensor.device reads lazydata.device
        with raises(ValueError, "mul", "different devices", "ELSEWHERE", ".to("):
            a._broadcasted(b, "mul")

    @pytest.mark.skipif(len(Device.known) < 2, reason="needs a second device")
    def test_mismatched_devices(self) -> None:
        first, second = Device.known[:2]
        a, b = Tensor([1.0, 2.0], device=first), Tensor([1.0, 2.0], device=second)
        with raises(ValueError, "add", "different devices", first, second):
            a + b
        with raises(ValueError, "cat", "different devices"):
            Tensor.cat(a, b)
        with raises(ValueError, "where", "different devices"):
            (a > 1).where(b, 0)
        with raises(ValueError, "__getitem__", second, first):
            a[Tensor([0], device=second)]
        with raises(ValueError, "gather", second, first):
            a.gather(0, Tensor([0], device=second))
        assert (a + b.to(first)).tolist() == [2.0, 4.0]

    def test_unknown_device(self) -> None:
        with raises(ValueError, "device", "TPU", "valid devices"):
            Tensor([1.0], device="TPU")

    def test_unknown_dtype(self) -> None:
        with raises(TypeError, "dtype", "banana", "float32"):
            Tensor([1.0], dtype="banana")
        with raises(TypeError, "dtype", "complex"):
            x23.cast(np.complex64)
        with raises(TypeError, "Tensor", "str"):
            Tensor("1.0")
        with raises(TypeError, "requires_grad", "int32", ".float()"):
            Tensor([1, 2], requires_grad=True)

    def test_dtype_rules(self) -> None:
        with raises(TypeError, "sub", "bool"):
            Tensor([True]) - Tensor([False])
        with raises(TypeError, "neg", "bool", "logical_not"):
            -Tensor([True])
        with raises(OverflowError, "Tensor", "int32"):
            Tensor([2**40])
        assert Tensor([1, 2]).sum().dtype == dtypes.int64  # integer sums are int64, as in PyTorch


# ---- fuzz: random calls into the public API ----
# The default is small and repeatable (derandomized); FUZZ_EXAMPLES=1000 FUZZ_RANDOM=1 explores further.
FUZZ_EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", 25))
FUZZ_RANDOM = bool(os.environ.get("FUZZ_RANDOM"))
ints = st.integers(-3, 5)
small_shapes = st.lists(st.integers(0, 3), min_size=0, max_size=3).map(tuple)
axes = st.one_of(st.none(), st.integers(-4, 4), st.lists(st.integers(-4, 4), max_size=3).map(tuple),
                 st.sampled_from([1.0, "0", True]))
junk = st.sampled_from([None, 1.5, "x", [1, "a"], (1, 2), -1, 0, True, object()])


def index_item() -> st.SearchStrategy:
    slices = st.builds(slice, st.one_of(st.none(), ints), st.one_of(st.none(), ints),
                       st.one_of(st.none(), st.integers(-3, 3)))
    lists = st.lists(st.integers(-5, 5), min_size=0, max_size=3)
    return st.one_of(st.integers(-4, 4), slices, st.just(None), st.just(Ellipsis), lists,
                     st.sampled_from([1.5, "a", True, [[0], [1]], [True, False]]))


def tensor(shape: tuple[int, ...], dtype: str = "float32") -> Tensor:
    data = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape) % 5
    return Tensor(data.astype(dtype))


def shapes_up_to(n: int) -> st.SearchStrategy:
    return st.lists(st.integers(0, 3), min_size=2, max_size=n).map(tuple)


BITWISE = {"&": lambda t, v: t & v, "|": lambda t, v: t | v, "^": lambda t, v: t ^ v, "~": lambda t, v: ~t,
           "//": lambda t, v: t // v, "<<": lambda t, v: t << v, ">>": lambda t, v: t >> v}
ACTIVATIONS = ("hardtanh", "softplus", "celu", "elu", "gelu", "clamp", "leaky_relu", "round")

# name: (op names a message may mention, strategy for the extra arguments, call(x, *args))
FUZZ: dict[str, tuple[tuple[str, ...], st.SearchStrategy, Callable]] = {
    "reshape": (("reshape",), st.lists(st.integers(-2, 7), max_size=4), lambda x, s: x.reshape(s)),
    "reshape_junk": (("reshape",), junk, lambda x, s: x.reshape(s)),
    "permute": (("permute",), st.lists(st.integers(-4, 4), max_size=4), lambda x, o: x.permute(o)),
    "expand": (("expand",), st.lists(st.integers(-2, 4), max_size=4), lambda x, s: x.expand(s)),
    "pad": (("pad",), st.lists(st.one_of(st.none(), st.tuples(ints, ints), junk), max_size=4),
            lambda x, p: x.pad(p)),
    "pad_value": (("pad",), st.tuples(st.integers(-1, 2), junk),
                  lambda x, a: x.pad([(a[0], 1)] * x.ndim, a[1])),
    "shrink": (("shrink",), st.lists(st.one_of(st.none(), st.tuples(ints, ints), junk), max_size=4),
               lambda x, b: x.shrink(b)),
    "getitem": (("__getitem__",), st.lists(index_item(), max_size=4).map(tuple), lambda x, i: x[i]),
    "getitem_tensor": (("__getitem__",), st.lists(st.integers(-6, 6), max_size=4),
                       lambda x, i: x[Tensor(np.array(i, dtype=np.int32))]),
    "sum": (("sum",), st.tuples(axes, st.booleans()), lambda x, a: x.sum(*a)),
    "max": (("max",), st.tuples(axes, st.booleans()), lambda x, a: x.max(*a)),
    "min": (("min", "max"), st.tuples(axes, st.booleans()), lambda x, a: x.min(*a)),
    "mean": (("mean",), st.tuples(axes, st.booleans()), lambda x, a: x.mean(*a)),
    "var": (("var",), st.tuples(axes, st.booleans(), st.one_of(st.integers(-1, 3), junk)),
            lambda x, a: x.var(a[0], a[1], a[2])),
    "argmax": (("argmax",), st.tuples(axes, st.booleans()), lambda x, a: x.argmax(*a)),
    "argmin": (("argmin", "argmax"), st.tuples(axes, st.booleans()), lambda x, a: x.argmin(*a)),
    "softmax": (("softmax",), axes, lambda x, a: x.softmax(a)),
    "log_softmax": (("log_softmax",), axes, lambda x, a: x.log_softmax(a)),
    "logsumexp": (("logsumexp",), axes, lambda x, a: x.logsumexp(a)),
    "any": (("any", "sum"), axes, lambda x, a: x.any(a)),
    "transpose": (("transpose",), st.tuples(ints, ints), lambda x, a: x.transpose(*a)),
    "flatten": (("flatten",), st.tuples(ints, ints), lambda x, a: x.flatten(*a)),
    "unsqueeze_squeeze": (("unsqueeze", "squeeze"), ints, lambda x, d: x.unsqueeze(d).squeeze(d)),
    "flip": (("flip",), axes, lambda x, a: x.flip(a)),
    "repeat": (("repeat",), st.lists(st.integers(-1, 3), max_size=4), lambda x, r: x.repeat(r)),
    "as_strided": (("as_strided",), st.tuples(small_shapes, st.lists(st.integers(-1, 3), max_size=3), ints),
                   lambda x, a: x.as_strided(*a)),
    "cat": (("cat",), st.tuples(small_shapes, ints), lambda x, a: x.cat(tensor(a[0]), dim=a[1])),
    "cat_junk": (("cat",), junk, lambda x, j: Tensor.cat(x, j)),
    "stack": (("stack",), st.tuples(small_shapes, ints),
              lambda x, a: Tensor.stack(x, tensor(a[0]), dim=a[1])),
    "split": (("split",), st.tuples(st.one_of(st.integers(-1, 4), st.lists(st.integers(-1, 3), max_size=3),
                                              junk), ints),
              lambda x, a: x.split(*a)),
    "chunk": (("chunk",), st.tuples(st.one_of(st.integers(-1, 4), junk), ints), lambda x, a: x.chunk(*a)),
    "matmul": (("matmul",), small_shapes, lambda x, s: x @ tensor(s)),
    "matmul_junk": (("matmul",), junk, lambda x, j: x @ j),
    "linear": (("linear",), st.tuples(small_shapes, small_shapes),
               lambda x, s: x.linear(tensor(s[0]), tensor(s[1]))),
    "gather": (("gather",), st.tuples(ints, small_shapes, st.integers(-2, 4)),
               lambda x, a: x.gather(a[0], Tensor.full(a[1], a[2]))),
    "pow": (("pow",), st.one_of(st.floats(-3, 3), st.integers(-3, 3), small_shapes.map(tensor), junk),
            lambda x, e: x ** e),
    "rpow": (("pow",), st.one_of(st.floats(-3, 3), st.integers(-3, 3), junk), lambda x, b: b ** x),
    "where": (("where",), st.tuples(st.one_of(small_shapes.map(tensor), st.floats(-2, 2), junk),
                                    st.one_of(small_shapes.map(tensor), st.integers(-2, 2), junk)),
              lambda x, a: (x > 1).where(*a)),
    "binary": (("add", "sub", "mul", "div", "maximum", "lt", "eq"), st.tuples(
        st.sampled_from(["add", "sub", "mul", "div", "maximum", "lt", "eq"]),
        st.one_of(small_shapes.map(tensor), small_shapes.map(lambda s: tensor(s, "int32")), junk)),
        lambda x, a: getattr(x, a[0])(a[1])),
    "conv2d": (("conv2d",), st.tuples(st.lists(st.integers(0, 3), min_size=2, max_size=5).map(tuple),
                                      small_shapes.map(lambda s: (2,) + s), st.integers(-1, 3),
                                      st.integers(-1, 2), st.integers(0, 2),
                                      st.sampled_from([1, 2, 3, "same", "valid", "x"])),
               lambda x, a: tensor(a[0]).conv2d(tensor(a[1]), stride=a[2], dilation=a[3], groups=a[4],
                                                padding=a[5])),
    "pool": (("max_pool2d", "avg_pool2d"), st.tuples(st.sampled_from(["max_pool2d", "avg_pool2d"]),
                                                      st.integers(-1, 4),
                                                      st.one_of(st.none(), st.integers(-1, 3)),
                                                      st.integers(-1, 2)),
             lambda x, a: getattr(x, a[0])(a[1], a[2], a[3])),
    "cross_entropy": (("cross_entropy",), st.tuples(small_shapes, st.integers(-2, 4), junk),
                      lambda x, a: x.cross_entropy(Tensor.full(a[0], a[1]),
                                                   reduction="mean" if a[2] else "x")),
    "layer_norm": (("layer_norm",), st.one_of(st.integers(-1, 4), st.lists(st.integers(0, 4), max_size=3)),
                   lambda x, s: x.layer_norm(s)),
    "dropout": (("dropout",), st.one_of(st.floats(-1, 2), junk), lambda x, p: x.dropout(p)),
    # ---- the ops added for issue 13 ----
    "conv_nd": (("conv1d", "conv2d", "conv3d"), st.tuples(
        st.sampled_from([1, 2, 3]), shapes_up_to(6), shapes_up_to(6), st.integers(-1, 3), st.integers(-1, 2),
        st.integers(0, 2), st.one_of(st.integers(-2, 2), st.lists(st.integers(-2, 2), max_size=6).map(tuple),
                                     st.sampled_from(["same", "valid", "x"]), junk)),
        lambda x, a: getattr(tensor(a[1]), f"conv{a[0]}d")(tensor(a[2]), stride=a[3], dilation=a[4],
                                                          groups=a[5], padding=a[6])),
    "conv_transpose": (("conv_transpose1d", "conv_transpose2d"), st.tuples(
        st.sampled_from([1, 2]), shapes_up_to(4), shapes_up_to(4), st.integers(-1, 3), st.integers(-1, 2),
        st.integers(-1, 2), st.integers(0, 2)),
        lambda x, a: getattr(tensor(a[1]), f"conv_transpose{a[0]}d")(
            tensor(a[2]), stride=a[3], padding=a[4], output_padding=a[5], groups=a[6])),
    "pool_nd": (tuple(f"{kind}_pool{nd}d" for kind in ("max", "avg") for nd in (1, 2, 3)), st.tuples(
        st.sampled_from(["max", "avg"]), st.sampled_from([1, 2, 3]), st.one_of(st.integers(-1, 4), junk),
        st.one_of(st.none(), st.integers(-1, 3)), st.integers(-1, 2), st.booleans()),
        lambda x, a: getattr(x, f"{a[0]}_pool{a[1]}d")(a[2], a[3], a[4], ceil_mode=a[5])),
    "cumsum_prod": (("cumsum", "prod"), st.tuples(st.sampled_from(["cumsum", "prod"]), axes),
                    lambda x, a: getattr(x, a[0])(a[1])),
    "triangle": (("tril", "triu"), st.tuples(st.sampled_from(["tril", "triu"]), st.one_of(ints, junk)),
                 lambda x, a: getattr(x, a[0])(a[1])),
    "one_hot": (("one_hot",), st.tuples(st.integers(-2, 5), st.sampled_from(["int32", "float32"])),
                lambda x, a: tensor(x.shape, a[1]).one_hot(a[0])),
    "multinomial": (("multinomial",), st.tuples(st.integers(-1, 5), st.booleans()),
                    lambda x, a: (x - 1).multinomial(a[0], a[1])),
    "attention": (("scaled_dot_product_attention",), st.tuples(small_shapes, small_shapes, st.booleans(),
                                                               st.one_of(st.floats(-1, 2), junk)),
                  lambda x, a: x.scaled_dot_product_attention(tensor(a[0]), tensor(a[1]), is_causal=a[2],
                                                              dropout_p=a[3])),
    "pad_flat": (("pad", "pad2d"), st.lists(st.integers(-4, 3), max_size=7), lambda x, p: x.pad2d(p)),
    "bitwise": (("bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "floor_divide", "lshift",
                 "rshift"),
                st.tuples(st.sampled_from(sorted(BITWISE)), st.sampled_from(["int32", "float32"]),
                          st.one_of(st.integers(-3, 40), junk)),
                lambda x, a: BITWISE[a[0]](tensor(x.shape, a[1]), a[2])),
    "int_pow": (("pow",), st.tuples(st.integers(-3, 5), st.floats(-2, 2)),
                lambda x, a: (tensor(x.shape, "int32") ** a[0], x ** a[1])),
    "activations": (ACTIVATIONS, st.tuples(st.sampled_from(ACTIVATIONS),
                                           st.one_of(st.floats(-2, 2), st.integers(-2, 2), junk)),
                    lambda x, a: getattr(x, a[0])(a[1])),
    "movedim": (("movedim",), st.tuples(st.one_of(ints, st.lists(ints, max_size=3)),
                                        st.one_of(ints, st.lists(ints, max_size=3))),
                lambda x, a: x.movedim(*a)),
    "keywords": (("reshape", "permute", "expand", "flip", "gather", "sum"), st.tuples(
        st.sampled_from(["reshape", "permute", "expand", "flip", "gather", "sum"]),
        st.sampled_from(["shape", "dims", "order", "size", "axis", "dim", "idx", "x"]),
        st.lists(st.integers(-2, 3), max_size=3)),
        lambda x, a: getattr(x, a[0])(**{a[1]: tuple(a[2]) if a[1] != "idx" else Tensor.full(x.shape, 0)})),
}


def _realize(out: Any) -> None:
    for t in out if isinstance(out, tuple) else (out,):
        if isinstance(t, Tensor):
            t.realize()


@pytest.mark.parametrize("name", FUZZ)
@settings(max_examples=FUZZ_EXAMPLES, deadline=None, derandomize=not FUZZ_RANDOM,
          suppress_health_check=list(HealthCheck))
@given(shape=st.lists(st.integers(0, 3), min_size=0, max_size=3).map(tuple), data=st.data())
def test_fuzz_public_api(name: str, shape: tuple[int, ...], data: st.DataObject) -> None:
    ops, strategy, call = FUZZ[name]
    x = tensor(shape)
    args = data.draw(strategy)
    try:
        out = call(x, args)
    except API_ERRORS as e:
        message = str(e)
        assert any(op in message for op in ops), f"{type(e).__name__} does not name {ops}: {message}"
        return
    _realize(out)
