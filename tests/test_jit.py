"""TinyJit: replays give exactly what running the step gives, and everything a replay cannot follow is
refused with a clear error."""

from __future__ import annotations

import numpy as np
import pytest

from tinyedu import JitError, Tensor, TinyJit, dtypes
from tinyedu.nn import BatchNorm2d, Conv2d, Linear
from tinyedu.nn.optim import SGD
from tinyedu.nn.state import get_parameters, get_state_dict

RNG = np.random.default_rng(0)


class Net:
    def __init__(self) -> None:
        self.conv, self.bn, self.head = Conv2d(1, 4, 3), BatchNorm2d(4), Linear(4 * 6 * 6, 10)

    def __call__(self, x: Tensor) -> Tensor:
        return self.head(self.bn(self.conv(x)).relu().max_pool2d(2).flatten(1))


def _train(jit: bool, steps: int = 5) -> tuple[list[float], Net]:
    Tensor.manual_seed(4)
    net = Net()
    opt = SGD(get_parameters(net), lr=0.05, momentum=0.9)

    def step(x: Tensor, y: Tensor) -> Tensor:
        with Tensor.train():
            opt.zero_grad()
            loss = net(x).cross_entropy(y).backward()
            opt.step()
        return loss

    run = TinyJit(step) if jit else step
    data = np.random.default_rng(5)
    losses = [run(Tensor(data.standard_normal((8, 1, 14, 14)).astype(np.float32)),
                  Tensor(data.integers(0, 10, 8).astype(np.int32))).item() for _ in range(steps)]
    return losses, net


def test_replayed_training_is_identical_to_running_the_step() -> None:
    """A small CNN with BatchNorm (running stats assigned in place) and SGD momentum: same losses, same
    weights, same running statistics, bit for bit."""
    eager_losses, eager = _train(jit=False)
    jit_losses, jitted = _train(jit=True)
    assert eager_losses == jit_losses
    for (name, a), b in zip(get_state_dict(eager).items(), get_state_dict(jitted).values(), strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=name)


def test_replay_does_not_run_the_function_and_returns_fresh_outputs() -> None:
    calls = []
    w = Tensor([1.0, 2.0, 3.0]).realize()

    @TinyJit
    def step(x: Tensor) -> tuple[Tensor, Tensor]:
        calls.append(1)
        w.assign(w + x)
        return (w * 2).sum(), x + 1

    results = [step(Tensor([float(k)] * 3)) for k in range(5)]
    assert len(calls) == 3                      # warmed up, recorded twice, then replayed
    totals = [r[0].item() for r in results]     # every earlier result keeps its own value
    assert totals == [12.0, 18.0, 30.0, 48.0, 72.0]
    np.testing.assert_array_equal(results[4][1].numpy(), [5, 5, 5])
    np.testing.assert_array_equal(w.numpy(), [11, 12, 13])
    assert step.kernel_count == 3


def test_inputs_given_as_views_or_constants_are_copied_in() -> None:
    @TinyJit
    def double(x: Tensor) -> Tensor:
        return x * 2

    data = Tensor(np.arange(12, dtype=np.float32).reshape(3, 4)).realize()
    for k in range(4):
        np.testing.assert_array_equal(double(data.T[k % 4]).numpy(), 2 * np.arange(12).reshape(3, 4).T[k % 4])
    np.testing.assert_array_equal(double(Tensor.full((3,), 7.0)).numpy(), [14, 14, 14])


def test_constant_host_copies_are_not_replayed() -> None:
    step = TinyJit(lambda logits, y: logits.cross_entropy(y) * Tensor.arange(1, 4).float().mean())
    for _ in range(3):
        loss = step(Tensor(RNG.standard_normal((4, 3)).astype(np.float32)), Tensor([0, 1, 2, 0]))
    assert [item.name for item in step.dropped] == ["copy_3"]   # the Tensor.arange(1, 4) in the step
    assert np.isfinite(loss.item())
    # cross_entropy keeps its class index 0..C-1 in memory: it copies nothing from the host
    plain = _recorded(lambda logits, y: logits.cross_entropy(y), Tensor.ones(4, 3), Tensor([0, 1, 2, 0]))
    assert plain.dropped == []


def _recorded(fn, *args):
    jit = TinyJit(fn)
    for _ in range(3):
        jit(*args)
    return jit


def test_changed_input_shape_dtype_device_is_refused() -> None:
    jit = _recorded(lambda x: x + 1, Tensor.ones(3))
    with pytest.raises(JitError, match=r"shape \(4,\), float32 on C, but the step was recorded with shape"):
        jit(Tensor.ones(4))
    with pytest.raises(JitError, match="int32"):
        jit(Tensor.ones(3, dtype=dtypes.int32))
    with pytest.raises(JitError, match="NUMPY"):
        jit(Tensor.ones(3, device="NUMPY"))
    with pytest.raises(JitError, match="called with 2 arguments, recorded with 1"):
        jit(Tensor.ones(3), Tensor.ones(3))


def test_changed_python_argument_is_refused() -> None:
    jit = _recorded(lambda x, k: x * k, Tensor.ones(3), 2)
    np.testing.assert_array_equal(jit(Tensor.ones(3), 2).numpy(), [2, 2, 2])
    with pytest.raises(JitError, match="argument 1 changed from 2 to 3"):
        jit(Tensor.ones(3), 3)


def test_a_step_that_changes_between_recorded_calls_is_refused() -> None:
    calls = []

    def step(x: Tensor) -> Tensor:
        calls.append(1)
        return x + 1 if len(calls) <= 2 else x.exp()

    jit = TinyJit(step)
    jit(Tensor.ones(3))
    jit(Tensor.ones(3))
    with pytest.raises(JitError, match="runs different kernels on different calls"):
        jit(Tensor.ones(3))


def test_random_numbers_drawn_on_the_host_are_refused() -> None:
    jit = TinyJit(lambda x: x * Tensor.rand(3))
    jit(Tensor.ones(3))
    jit(Tensor.ones(3))
    with pytest.raises(JitError, match="copies different host data on each call"):
        jit(Tensor.ones(3))


def test_returning_a_python_number_is_refused() -> None:
    with pytest.raises(JitError, match="returned float"):
        TinyJit(lambda x: x.sum().item())(Tensor.ones(3))


def test_a_lazy_computation_outside_the_step_keeps_the_old_weights() -> None:
    net = Linear(3, 2)
    opt = SGD(get_parameters(net), lr=0.5)

    @TinyJit
    def step(x: Tensor) -> Tensor:
        opt.zero_grad()
        loss = net(x).square().sum().backward()
        opt.step()
        return loss

    x = Tensor(RNG.standard_normal((4, 3)).astype(np.float32))
    for _ in range(4):
        step(x)
    pending = net(x)                        # built on the current weights, not run yet
    expected = x.numpy() @ net.weight.numpy().T + net.bias.numpy()
    step(x)                                 # a replay writes the weights
    np.testing.assert_allclose(pending.numpy(), expected, rtol=1e-6)
    assert not np.allclose(net(x).numpy(), expected)


def test_time_items_times_a_replay() -> None:
    jit = _recorded(lambda x: (x + 1).sum(), Tensor.ones(8))
    times = jit.time_items(Tensor.ones(8))
    assert [name for name, _ in times] == [item.name for item in jit.items]
    assert all(seconds >= 0 for _, seconds in times)
    with pytest.raises(JitError, match="not recorded yet"):
        TinyJit(lambda x: x).time_items(Tensor.ones(1))


def test_keyword_inputs_in_any_order_and_a_tensor_returned_twice() -> None:
    @TinyJit
    def step(a: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
        out = a * 2 + b
        return out, out

    for k in range(5):
        kwargs = {"a": Tensor([float(k)]), "b": Tensor([10.0])}
        first, second = step(**(kwargs if k % 2 else dict(reversed(kwargs.items()))))
        assert first.item() == second.item() == 2 * k + 10


# ---- input relations the recording relies on: each replays as the step runs, or is refused ----
def _eager_and_jit(make, calls):
    """Run `make()`'s step on each call's arguments (call n draws them from a generator seeded with n),
    plainly and under TinyJit, from the same state; the results and the arguments afterwards as numpy."""
    results = []
    for jit in (False, True):
        step = make()
        step = TinyJit(step) if jit else step
        run = []
        for n, call in enumerate(calls):
            args = call(np.random.default_rng(n))
            out = step(*args)
            out = out if isinstance(out, tuple) else (out,)
            run.append([t.numpy() for t in (*out, *args)])
        results.append(run)
    return results


def test_one_tensor_passed_twice_replays_only_as_one_tensor() -> None:
    @TinyJit
    def add(a: Tensor, b: Tensor) -> Tensor:
        return a + b

    for k in range(4):
        t = Tensor([1.0, 2.0, 3.0]).contiguous().realize() * k
        np.testing.assert_array_equal(add(t.realize(), t).numpy(), 2 * k * np.array([1, 2, 3]))
    with pytest.raises(JitError, match="inputs 0 and 1 are not the same memory .* but were when"):
        add(Tensor([1.0, 2, 3]).contiguous().realize(), Tensor([10.0, 20, 30]).contiguous().realize())
    separate = _recorded(lambda a, b: a + b, Tensor.ones(3), Tensor.ones(3))
    t = Tensor([1.0, 2, 3]).realize()
    with pytest.raises(JitError, match="inputs 0 and 1 are the same memory .* but were not when"):
        separate(t, t)


def test_two_views_of_one_buffer_are_the_same_memory() -> None:
    """A reshape of a tensor is the same memory: it must be passed the same way as when recorded."""
    jit = _recorded(lambda a, b: a * 2 + b.flatten(), Tensor.ones(4), Tensor.ones(2, 2))
    t = Tensor([1.0, 2, 3, 4]).realize()
    with pytest.raises(JitError, match="inputs 0 and 1 are the same memory"):
        jit(t, t.reshape(2, 2))
    shared = _recorded(lambda a, b: a * 2 + b.flatten(), t, t.reshape(2, 2))
    u = Tensor([5.0, 6, 7, 8]).realize()
    np.testing.assert_array_equal(shared(u, u.reshape(2, 2)).numpy(), [15, 18, 21, 24])


def test_an_aliased_input_that_the_step_writes_matches_running_the_step() -> None:
    def make():
        def step(a: Tensor, b: Tensor) -> Tensor:
            a.assign(a * 2 + b.flip(0))
            return a.sum()
        return step

    def call(rng):
        t = Tensor(rng.standard_normal(5).astype(np.float32)).realize()
        return t, t
    eager, jit = _eager_and_jit(make, [call] * 5)
    for e, j in zip(eager, jit, strict=True):
        for x, y in zip(e, j, strict=True):
            np.testing.assert_array_equal(x, y)


def test_an_input_written_or_returned_by_the_step_matches_running_the_step() -> None:
    """The replay writes and returns the *new* input's memory, and a lazy computation built on the input
    before the call keeps its old values (as for weights)."""
    def make():
        def step(a: Tensor, b: Tensor) -> tuple[Tensor, Tensor, Tensor]:
            a.assign(a * 2 + b)
            return a, a.reshape(2, 2) + 1, b
        return step

    pending = []

    def call(rng):
        a, b = (Tensor(rng.standard_normal(4).astype(np.float32)).realize() for _ in range(2))
        pending.append((a * 10, a.numpy() * 10))  # built on a's old values, not run yet
        return a, b
    eager, jit = _eager_and_jit(make, [call] * 6)
    for e, j in zip(eager, jit, strict=True):
        for x, y in zip(e, j, strict=True):
            np.testing.assert_array_equal(x, y)
    for lazy, expected in pending:
        np.testing.assert_array_equal(lazy.numpy(), expected)


def test_an_input_that_is_a_weight_the_step_writes_is_refused() -> None:
    w = Tensor([1.0, 2.0, 3.0]).realize()

    @TinyJit
    def step(x: Tensor) -> Tensor:
        w.assign(w + x)
        return (w * x).sum()

    for _ in range(4):
        step(Tensor.ones(3).contiguous().realize())
    with pytest.raises(JitError, match="input 0 is memory the step also uses without it being passed in"):
        step(w)
    with pytest.raises(JitError, match="input 0 is a view .* of memory that the step writes"):
        step(w.flip(0))
    reads = _recorded(lambda x: x * w, Tensor.ones(3))  # a weight only read: passing it in is fine
    np.testing.assert_array_equal(reads(w).numpy(), w.numpy() ** 2)


def test_writing_an_input_given_as_a_copy_is_refused() -> None:
    """A slice or a constant is copied in; a write to the copy would not reach the caller's tensor."""
    def bump(a: Tensor) -> Tensor:
        a.assign(a + 1)
        return a

    big = Tensor([1.0, 2.0, 3.0, 4.0]).realize()
    with pytest.raises(JitError, match="the step writes input 0 .* copies into memory of its own"):
        TinyJit(bump)(big.reshape(2, 2).T)
    with pytest.raises(JitError, match="the step writes input 0"):
        TinyJit(bump)(Tensor.full((3,), 2.0))
    jit = _recorded(bump, Tensor([1.0, 2.0]).realize())
    with pytest.raises(JitError, match="the step writes input 0"):
        jit(big[1:3])

    def read_after_write(a: Tensor, b: Tensor) -> Tensor:
        a.assign(a + 1)
        return b * 1
    with pytest.raises(JitError, match="input 1 is a view .* of memory that the step writes"):
        TinyJit(read_after_write)(big, big[1:3])


def test_python_arguments_are_compared_by_value_and_type() -> None:
    jit = _recorded(lambda x, scale: x * scale[0], Tensor.ones(3), [2.0])
    with pytest.raises(JitError, match="argument 1 changed from a list with other contents to a list"):
        jit(Tensor.ones(3), [3.0])
    steps = [2.0]
    jit = _recorded(lambda x, scale: x * scale[0], Tensor.ones(3), steps)
    steps[0] = 5.0  # changed in place: the recorded 2.0 would be replayed
    with pytest.raises(JitError, match="argument 1 changed"):
        jit(Tensor.ones(3), steps)
    jit = _recorded(lambda x, k: x * k, Tensor.ones(3), 2)
    with pytest.raises(JitError, match="argument 1 changed from 2 to 2.0"):
        jit(Tensor.ones(3), 2.0)
    jit = _recorded(lambda x, m: x * float(m.sum()), Tensor.ones(3), np.ones(2))
    np.testing.assert_array_equal(jit(Tensor.ones(3), np.ones(2)).numpy(), [2, 2, 2])
    with pytest.raises(JitError, match="argument 1 changed from a ndarray with other contents"):
        jit(Tensor.ones(3), np.zeros(2))
    nan = _recorded(lambda x, v: x + (0 if v != v else 1), Tensor.ones(1), float("nan"))
    np.testing.assert_array_equal(nan(Tensor.ones(1), float("nan")).numpy(), [1])
    with pytest.raises(JitError, match="a Tensor inside a list"):
        TinyJit(lambda xs: xs[0] + 1)([Tensor.ones(2)])


def test_unrealized_and_constant_inputs_match_running_the_step() -> None:
    """An input still lazy (here built on a weight the step writes) is computed before the step runs."""
    def make():
        w = Tensor([1.0, -2.0, 3.0]).realize()

        def step(x: Tensor, c: Tensor) -> tuple[Tensor, Tensor]:
            w.assign(w * 0.5 + x)
            return w + c, w
        make.w = w
        return step

    def call(rng):
        return make.w * 3 + 1, Tensor.full((3,), 0.25)
    eager, jit = _eager_and_jit(make, [call] * 6)
    for e, j in zip(eager, jit, strict=True):
        for x, y in zip(e, j, strict=True):
            np.testing.assert_array_equal(x, y)


def test_replay_after_the_kernel_libraries_are_unloaded_looks_them_up_again() -> None:
    # a replay of C kernels calls functions it looked up once; unloading their libraries (LOADED evicts
    # the least recently used, or is cleared) must make it look them up again, not call freed code
    from tinyedu.runtime.ops_c import LOADED

    w = Tensor(np.arange(12, dtype=np.float32).reshape(3, 4)).realize()
    step = TinyJit(lambda x: ((x @ w).relu() + 1).sum(1).realize())
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal((2, 3)).astype(np.float32) for _ in range(7)]
    expected = [(np.maximum(x @ w.numpy(), 0) + 1).sum(1) for x in inputs]
    for k, x in enumerate(inputs):
        if k in (4, 6):
            LOADED.clear()  # every library unloaded between two replays
        np.testing.assert_allclose(step(Tensor(x)).numpy(), expected[k], rtol=1e-6)
    assert step.calls == 7 and step._direct is not None and step._direct[1] is not None  # the direct path ran
