"""Chapter 08 (training on MNIST): an optimizer and the JIT's skip rule, written by the learner.

Both exercises plug the learner's code into the real library:
- `check_momentum_sgd(cls)`: `cls` subclasses `tinyedu.nn.optim.Optimizer` (the learner writes
  `__init__` and `update`); the checker trains with it, eagerly and under TinyJit, against the
  library's SGD with momentum.
- `check_replay_can_skip(rule)`: `rule(item, facts)` replaces `tinyedu.engine.jit.replay_can_skip`
  while TinyJit records steps; the checker asks it about programs it must and must not skip, then
  replays training steps with it and compares them with running the step.

A stub (raising NotImplementedError) prints "not done yet" instead of failing, so the executed
notebook shows the exercise as open; a wrong answer raises AssertionError with a specific hint.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

NOT_DONE = ("○ not done yet: replace the `raise NotImplementedError(...)` with your code, then run this "
            "cell again")


def _stub(run: Callable[[], str]) -> str | None:
    """Run a check; a NotImplementedError from the learner's stub is "not done yet", not a failure."""
    try:
        message = run()
    except NotImplementedError:
        print(NOT_DONE)
        return None
    print(f"Correct: {message}")
    return message


# ---- exercise 1: SGD with momentum as an Optimizer subclass ----
def _train_steps(make_opt: Callable[[list], Any], steps: int, jit: bool = False,
                 lr_schedule: Callable[[int], float] | None = None) -> tuple[list[float], list[np.ndarray]]:
    """A small regression trained for `steps` steps; returns the losses and the final weights."""
    from tinyedu import Tensor, TinyJit
    from tinyedu.nn import Linear

    Tensor.manual_seed(0)
    layer = Linear(3, 2)
    opt = make_opt([layer.weight, layer.bias])
    rng = np.random.default_rng(0)
    xs = [Tensor(rng.standard_normal((8, 3)).astype(np.float32)) for _ in range(steps)]
    target = Tensor(np.array([[1.0, -2.0]], dtype=np.float32))

    def step(x: Tensor) -> Tensor:
        opt.zero_grad()
        loss = (layer(x) - target).square().mean().backward()
        opt.step()
        return loss

    run = TinyJit(step) if jit else step
    losses = []
    for k, x in enumerate(xs):
        if lr_schedule is not None:
            opt.lr.assign(lr_schedule(k))
        losses.append(run(x).item())
    return losses, [layer.weight.numpy(), layer.bias.numpy()]


def check_momentum_sgd(cls: type) -> str | None:
    """Exercise: `cls(params, lr, momentum)` is an Optimizer whose update(p, g) does SGD with momentum."""
    return _stub(lambda: _check_momentum_sgd(cls))


def _check_momentum_sgd(cls: type) -> str:
    from tinyedu import JitError
    from tinyedu.nn.optim import SGD, Optimizer

    if not (isinstance(cls, type) and issubclass(cls, Optimizer)):
        raise AssertionError("give a class that subclasses tinyedu.nn.optim.Optimizer (class MomentumSGD"
                             "(Optimizer): ...), not an instance or a function")
    lr, momentum = 0.05, 0.9
    _, plain = _train_steps(lambda p: SGD(p, lr=lr), 6)
    _, wanted = _train_steps(lambda p: SGD(p, lr=lr, momentum=momentum), 6)
    _, got = _train_steps(lambda p: cls(p, lr=lr, momentum=momentum), 1)
    _, wanted_one = _train_steps(lambda p: SGD(p, lr=lr, momentum=momentum), 1)
    if not all(np.allclose(a, b, rtol=1e-5, atol=1e-7) for a, b in zip(got, wanted_one, strict=True)):
        raise AssertionError("the very first step is already off. With a buffer b that starts at zero, b = "
                             "momentum * b + g is just g, and p moves by -lr * g: check the sign and that "
                             "you use self.lr (a tensor) and the new b")
    _, got = _train_steps(lambda p: cls(p, lr=lr, momentum=momentum), 6)
    if all(np.allclose(a, b, rtol=1e-5, atol=1e-7) for a, b in zip(got, plain, strict=True)):
        raise AssertionError("after 6 steps your weights equal plain SGD's: the momentum buffer never "
                             "carries over. update() must also return (b, new_b), so that step() writes the "
                             "buffer in place for the next step")
    if not all(np.allclose(a, b, rtol=1e-5, atol=1e-6) for a, b in zip(got, wanted, strict=True)):
        raise AssertionError("the first step is right, later ones drift from SGD with momentum. p must move "
                             "with the *new* buffer: new_b = momentum * b + g, then p - lr * new_b (not the "
                             "old b), and the buffer must be one tensor per parameter, kept between steps")
    schedule = [0.05, 0.0, 0.1, 0.02, 0.05, 0.07].__getitem__
    _, got = _train_steps(lambda p: cls(p, lr=lr, momentum=momentum), 6, lr_schedule=schedule)
    _, wanted = _train_steps(lambda p: SGD(p, lr=lr, momentum=momentum), 6, lr_schedule=schedule)
    if not all(np.allclose(a, b, rtol=1e-5, atol=1e-6) for a, b in zip(got, wanted, strict=True)):
        raise AssertionError("with a learning-rate schedule (opt.lr.assign(...) before each step) your "
                             "optimizer ignores the new values: use the tensor self.lr in the update, not a "
                             "Python number saved in __init__ (a number is baked into the kernel)")
    try:
        _, got = _train_steps(lambda p: cls(p, lr=lr, momentum=momentum), 6, jit=True)
    except JitError as e:
        raise AssertionError("under TinyJit the step is not the same program every time "
                             f"({str(e)[:90]}...): keep all state in tensors that update() returns, so that "
                             "step() assigns them in place; rebinding a Python attribute (or branching on a "
                             "Python counter) is something a replay cannot do") from None
    _, wanted = _train_steps(lambda p: SGD(p, lr=lr, momentum=momentum), 6, jit=True)
    if not all(np.array_equal(a, b) for a, b in zip(got, wanted, strict=True)):
        raise AssertionError("eagerly your optimizer matches, but replayed by TinyJit it does not: keep all "
                             "state that changes in tensors that update() returns (a replay runs no Python)")
    return ("6 steps match SGD(momentum=0.9) with a zero buffer kept in memory, a learning-rate schedule "
            "reaches the kernels through self.lr, and TinyJit replays your update bit for bit")


# ---- exercise 2: which recorded programs may a replay skip? ----
def check_replay_can_skip(rule: Callable[..., bool]) -> str | None:
    """Exercise: rule(item, facts) -> True when a TinyJit replay may leave the recorded program out."""
    return _stub(lambda: _check_replay_can_skip(rule))


def _check_replay_can_skip(rule: Callable[..., bool]) -> str:
    from tinyedu.engine import jit as jit_module
    from tinyedu.engine.jit import ItemFacts, JitItem
    from tinyedu.engine.realize import BufferCopy, Fill, HostCopy

    def ask(program: Any, **facts: Any) -> bool:
        item = JitItem("probe", None, program, [])
        defaults = {"constant": isinstance(program, (HostCopy, Fill)), "made_in_step": True, "writers": 1,
                    "returned": False}
        answer = rule(item, ItemFacts(**{**defaults, **facts}))
        if not isinstance(answer, (bool, np.bool_)):
            raise AssertionError(f"the rule must return True or False, got {answer!r}")
        return bool(answer)

    arange = HostCopy(np.arange(10))
    if not ask(arange):
        raise AssertionError("a copy of constant host data (Tensor.arange(10) inside cross_entropy) into a "
                             "buffer the step made, written by nothing else and not returned, can be "
                             "skipped: the buffer still holds the recorded values at every replay")
    cases = [
        (dict(program=BufferCopy(), constant=False), "a copy between buffers (or a kernel) reads memory the "
         "step may have changed; only programs with facts.constant write the same data every time"),
        (dict(program=arange, made_in_step=False), "this fill writes memory from before the step (an assign "
         "target, like a learning rate); code outside the step may change it between calls, so a replay "
         "must write it again"),
        (dict(program=Fill(0.0), writers=2), "another program also writes this buffer: after the first "
         "replay it no longer holds the constant, so the constant must be written again"),
        (dict(program=Fill(1.0), returned=True), "the step returns this buffer, and a replay hands back "
                                                 "fresh memory for what it returns: the fill has to run to "
                                                 "fill it"),
    ]
    for facts, hint in cases:
        if ask(**facts):
            raise AssertionError(f"your rule skips a program a replay needs: {hint}")
    with _plugged(jit_module, "replay_can_skip", rule):
        eager, jitted, dropped = _replay_pair()
    if eager != jitted:
        raise AssertionError("with your rule, replayed training steps differ from running the step; check "
                             "each condition against ItemFacts")
    if dropped != ["copy_3"]:
        raise AssertionError(f"with your rule the replay drops {dropped}; the step has exactly one constant "
                             "copy into its own memory (the arange inside cross_entropy, copy_3)")
    return ("your rule keeps every program whose result can change and drops the arange copy from each "
            "replay; replayed steps equal running the step")


def _replay_pair() -> tuple[list[float], list[float], list[str]]:
    """The same 5 steps of a tiny classifier, run and replayed; and the names the replay dropped."""
    from tinyedu import Tensor, TinyJit

    results, dropped = [], []
    for use_jit in (False, True):
        step, counter = _classifier_step()
        run = TinyJit(step) if use_jit else step
        rng = np.random.default_rng(1)
        values = []
        for _ in range(5):
            counter.assign(Tensor([-1.0]))  # changed outside the step: the step must set it again
            loss, five = run(Tensor(rng.standard_normal((6, 4)).astype(np.float32)),
                             Tensor(rng.integers(0, 3, 6).astype(np.int32)))
            values += [loss.item(), counter.item(), five.item()]
        results.append(values)
        if use_jit:
            dropped = [item.name for item in run.dropped]
    return results[0], results[1], dropped


def _classifier_step() -> tuple[Callable, Any]:
    """A training step that also writes a constant into memory from before the step, and returns a
    constant (a fill into the memory it returns)."""
    from tinyedu import Tensor
    from tinyedu.nn import Linear
    from tinyedu.nn.optim import SGD

    Tensor.manual_seed(0)
    layer = Linear(4, 3)
    opt = SGD([layer.weight, layer.bias], lr=0.1)
    counter = Tensor([0.0]).realize()

    def step(x: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:
        opt.zero_grad()
        loss = layer(x).cross_entropy(y).backward()
        opt.step()
        counter.assign(Tensor([1.0]))
        return loss, Tensor(5.0)

    return step, counter


class _plugged:
    """Replace module.name for a while (tinyedu.testing's hooks do the same once they are merged)."""

    def __init__(self, owner: Any, name: str, value: Any):
        self.owner, self.name, self.value = owner, name, value

    def __enter__(self) -> None:
        self.original = getattr(self.owner, self.name)
        setattr(self.owner, self.name, self.value)

    def __exit__(self, *exc: object) -> None:
        setattr(self.owner, self.name, self.original)
