"""A formula replayed from its template (tinyedu/function_template.py) gives the graph that running
the formula gives: the same nodes (op, dtype, tracker, argument, sources), the same constants, the
same deduplication, and the same values and gradients; and a template is never used for an input of
another dtype, shape, view or device."""

import numpy as np
import pytest

from tinyedu import Tensor, dtypes, no_grad
from tinyedu import function_template as templates
from tinyedu.core.ops import LoadOps
from tinyedu.lazy import LazyBuffer


def _structure(out: LazyBuffer, x: LazyBuffer) -> list:
    """The graph from out down to x, node by node in a fixed order, with x and realized buffers as
    names and constants by value: two graphs built on different inputs compare equal if they match."""
    names: dict[int, int] = {id(x): -1}
    rows: list = []

    def walk(node: LazyBuffer) -> int:
        if id(node) in names:
            return names[id(node)]
        if node._base is not None:
            row = ("view", walk(node._base), node.st)
        elif node.realized is not None:
            row = ("realized",)
        elif node.op is LoadOps.CONST:
            row = ("const", node.dtype, node.arg)
        else:
            arg = node.arg.tobytes() if isinstance(node.arg, np.ndarray) else node.arg  # (host data)
            row = (node.op, node.dtype, node.st, arg, tuple(walk(s) for s in node.srcs))
        rows.append(row)
        names[id(node)] = len(rows) - 1
        return names[id(node)]

    walk(out)
    return rows


def _exp_graph(x: Tensor) -> list:
    return _structure(x.exp().lazydata, x.lazydata)


@pytest.fixture(autouse=True)
def _fresh():
    templates.clear()
    yield
    templates.clear()


def test_a_replayed_exp_is_the_graph_the_formula_builds():
    rng = np.random.default_rng(0)
    x = Tensor(rng.standard_normal((4, 7)).astype(np.float32)).realize()
    built = _exp_graph(x)  # the first call records the template
    assert len(templates._TEMPLATES) == 1 and built[-1][0] is not LoadOps.CONST
    y = Tensor(rng.standard_normal((4, 7)).astype(np.float32)).realize()
    replayed = _exp_graph(y)  # the second replays it, on another input
    templates.clear()
    assert replayed == _exp_graph(y) == built  # == what running the formula again builds
    assert len(built) > 20  # (the whole formula, not just its last node)


def test_replayed_values_and_gradients_are_bit_for_bit_the_formulas():
    rng = np.random.default_rng(1)
    data = (rng.standard_normal((3, 5)) * 30).astype(np.float32)
    data[0, :3] = [np.inf, -np.inf, np.nan]

    def run() -> tuple[bytes, bytes]:
        x = Tensor(data, requires_grad=True)
        y = x.exp()
        (y * Tensor(np.linspace(-1, 1, 15, dtype=np.float32).reshape(3, 5))).sum().backward()
        return y.numpy().tobytes(), x.grad.numpy().tobytes()

    first = run()  # records
    assert run() == first  # replays
    with np.errstate(over="ignore"):
        np.testing.assert_allclose(np.frombuffer(first[0], np.float32).reshape(3, 5), np.exp(data), rtol=2e-7)


def test_equal_formulas_on_one_input_are_still_computed_once():
    x = Tensor(np.linspace(-3, 3, 12, dtype=np.float32).reshape(3, 4)).realize()
    x.exp()  # record
    a, b = x.exp(), x.exp()  # both replayed: the dedup of LazyBuffer.create holds for every node
    assert a.lazydata is b.lazydata


def test_a_template_is_not_used_for_another_dtype_shape_view_or_device():
    rng = np.random.default_rng(2)
    base = rng.standard_normal((4, 6))
    inputs = [Tensor(base.astype(np.float32)), Tensor(base.astype(np.float64)),
              Tensor(base[:3].astype(np.float32)), Tensor(base.astype(np.float32)).permute(1, 0),
              Tensor(base.astype(np.float32)).reshape(6, 4), Tensor(base.astype(np.float32), device="PYTHON")]
    for x in inputs:
        x.realize()
    graphs = [_exp_graph(x) for x in inputs]  # each records a template of its own
    assert len(templates._TEMPLATES) == len(inputs)
    templates.clear()
    assert [_exp_graph(x) for x in inputs] == graphs  # (built from scratch: the same graphs)
    for x, graph in zip(inputs, graphs, strict=True):  # and each replays its own
        assert _exp_graph(x) == graph
    float64 = [row for row in graphs[1] if len(row) == 5]
    assert float64 and all(row[1] in (dtypes.float64, dtypes.bool) for row in float64)


def test_a_constant_input_is_folded_not_templated():
    x = Tensor.full((2, 3), 1.5)
    x.exp()
    assert not templates._TEMPLATES
    np.testing.assert_allclose(x.exp().numpy(), np.exp(np.full((2, 3), 1.5, np.float32)), rtol=1e-7)


def test_a_template_respects_requires_grad_and_no_grad():
    data = np.linspace(-2, 2, 6, dtype=np.float32).reshape(2, 3)
    x = Tensor(data, requires_grad=True)
    with no_grad():
        plain = x.exp()  # records, without a graph for autograd
    assert not plain.requires_grad and plain._ctx is None
    y = x.exp()  # replays, with one
    assert y.requires_grad and y._ctx is not None
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), y.numpy())  # exp's derivative is its value, exactly


def test_a_constant_given_memory_is_not_handed_out_again():
    """assign may store into a CONST it was given (LazyBuffer.full): the template records anew."""
    x = Tensor(np.ones((2, 2), np.float32)).realize()
    x.exp()
    (template,) = templates._TEMPLATES.values()
    leaf = template.leaves[0]
    (leaf._base or leaf).realized = object()  # as if assign had given it memory
    try:
        assert not template.usable()
        x.exp()
        assert list(templates._TEMPLATES.values())[0] is not template
    finally:
        (leaf._base or leaf).realized = None


# Every library Function that replays its formula, through the Tensor method that applies it.
FORMULAS = {
    "relu": lambda x: x.relu(), "abs": lambda x: x.abs(), "clamp": lambda x: x.clamp(-0.5, 0.75),
    "hardtanh": lambda x: x.hardtanh(-0.25, 0.5), "hardswish": lambda x: x.hardswish(),
    "hardsigmoid": lambda x: x.hardsigmoid(), "sigmoid": lambda x: x.sigmoid(), "tanh": lambda x: x.tanh(),
    "softplus": lambda x: x.softplus(beta=2.0, threshold=5.0), "silu": lambda x: x.silu(),
    "mish": lambda x: x.mish(), "gelu": lambda x: x.gelu(), "gelu_tanh": lambda x: x.gelu(approximate="tanh"),
    "tan": lambda x: x.tan(), "exp": lambda x: x.exp(), "expm1": lambda x: x.expm1(),
    "log1p": lambda x: x.log1p(), "sinh": lambda x: x.sinh(), "cosh": lambda x: x.cosh(),
    "asinh": lambda x: x.asinh(), "acosh": lambda x: x.acosh(), "atanh": lambda x: x.atanh(),
    "asin": lambda x: x.asin(), "acos": lambda x: x.acos(), "atan": lambda x: x.atan(),
    "erf": lambda x: x.erf(),
    "pow": lambda x: x ** 2.5,
}


def test_every_templated_function_is_listed_here():
    from tinyedu import function_composite as FC
    from tinyedu import function_math as FM
    templated = {name for module in (FC, FM) for name, cls in vars(module).items()
                 if isinstance(cls, type) and issubclass(cls, FC.UnaryFunction) and cls.template}
    assert len(templated) == len(FORMULAS) - 1  # (hardtanh is Clamp again, with other parameters)


@pytest.mark.parametrize(("name", "dtype"), [(name, np.float32) for name in sorted(FORMULAS)] + [
    (name, dtype) for name in ("exp", "gelu", "clamp") for dtype in (np.float64, np.float16)])
def test_a_replayed_formula_gives_the_graph_values_and_gradients_of_the_formula(name, dtype):
    formula = FORMULAS[name]
    rng = np.random.default_rng(3)
    data = (rng.standard_normal((3, 4)) * 2).astype(dtype)
    data[0, :2] = [0.0, -0.0]
    weights = np.linspace(-1, 1, 12).reshape(3, 4).astype(dtype)

    def run() -> tuple[list, bytes, bytes]:
        x = Tensor(data, requires_grad=True)
        y = formula(x)
        graph = _structure(y.lazydata, x.lazydata)
        (y * Tensor(weights)).sum().backward()
        return graph, y.numpy().tobytes(), x.grad.numpy().tobytes()

    scratch = run()  # records
    assert templates._TEMPLATES and all(t is not None for t in templates._TEMPLATES.values())
    assert run() == scratch  # replays: the same graph, the same bits


SOFTMAXES = {"softmax": lambda x: x.softmax(1), "log_softmax": lambda x: x.log_softmax(-1),
             "logsumexp": lambda x: x.logsumexp(1), "logsumexp_keep": lambda x: x.logsumexp(0, keepdim=True),
             "cross_entropy": lambda x: x.cross_entropy(Tensor(np.array([0, 3, 1], np.int32)))}


@pytest.mark.parametrize("name", sorted(SOFTMAXES))
def test_softmax_and_kin_replay_the_graph_values_and_gradients_they_build(name):
    formula = SOFTMAXES[name]
    data = np.random.default_rng(4).standard_normal((3, 4)).astype(np.float32)
    data[1, 2] = -np.inf

    def run() -> tuple[list, bytes, bytes]:
        x = Tensor(data, requires_grad=True)
        y = formula(x)
        graph = _structure(y.lazydata, x.lazydata)
        (y * y).sum().backward()
        return graph, y.numpy().tobytes(), x.grad.numpy().tobytes()

    scratch = run()  # records
    assert any(key[0] in ("softmax", "log_softmax", "logsumexp") for key in templates._TEMPLATES)
    assert run() == scratch  # replays
    templates.clear()
    assert run() == scratch  # and building from scratch again gives the same


def test_count_primitives_counts_every_primitive_of_a_replayable_softmax():
    from tinyedu import count_primitives

    x = Tensor(np.ones((2, 3), np.float32))
    with count_primitives() as first:
        x.softmax(1)
    x.softmax(1)  # (recorded, if it was not)
    with count_primitives() as again:
        x.softmax(1)
    assert again == first and first["Max"] == 1 and first["Exp"] == 1
