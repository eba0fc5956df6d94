"""Chapter 08 (notebook 08, training on MNIST through the whole stack): the exercises and their checkers.

Implement-this: `08.momentum_sgd` (SGD with momentum as a subclass of `tinyedu.nn.optim.Optimizer`:
the library's `Optimizer.step()` calls the learner's `update` and writes what it returns with
`assign_all`; trained eagerly, with a learning-rate schedule and under TinyJit, against the library's
SGD) and `08.replay_can_skip` (the JIT's skip rule, plugged in as `tinyedu.jit.replay_can_skip`
while TinyJit records training steps). Prediction: `08.new_kernels` (how many kernels a learning rate
written as a Python number compiles).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from tinyedu import JitError, Tensor, TinyJit
from tinyedu import jit as jit_module
from tinyedu.engine import realize
from tinyedu.engine.realize import BufferCopy, Fill, HostCopy
from tinyedu.exercises.checking import is_count
from tinyedu.exercises.hooks import plug
from tinyedu.exercises.registry import exercise
from tinyedu.jit import ItemFacts, JitItem
from tinyedu.nn import Linear
from tinyedu.nn.optim import SGD, Optimizer

# -- exercise: how many kernels does a Python learning rate compile? -----------------------------------
NEW_KERNEL_LRS = (0.05, 0.02, 0.01, 0.005)  # the steps after a first one at lr = 0.1


def _kernels_per_lr_step() -> tuple[list[int], list[str]]:
    """Train Linear(4, 3) with `p.assign(p - lr * p.grad)` and a Python lr: one step at lr = 0.1, then
    one per NEW_KERNEL_LRS. Returns, for each later step, how many of its kernels (ASTs) no earlier step
    ran, i.e. what the compile cache (keyed by AST) has not seen; and the names of those kernels."""
    Tensor.manual_seed(0)
    layer = Linear(4, 3)
    params = [layer.weight, layer.bias]
    rng = np.random.default_rng(0)
    x = Tensor(rng.standard_normal((8, 4)).astype(np.float32))
    y = Tensor(rng.integers(0, 3, 8).astype(np.int32))
    seen: set = set()
    new: list = []

    def observe(name: str, ast: Any, program: Any, buffers: Any) -> None:
        if ast is not None and ast not in seen:
            seen.add(ast)
            new.append(name)

    def step(lr: float) -> None:
        for p in params:
            p.grad = None
        layer(x).cross_entropy(y).backward()
        Tensor.assign_all(params, [p - lr * p.grad for p in params])

    realize.observers.append(observe)
    try:
        step(0.1)
        counts, names = [], []
        for lr in NEW_KERNEL_LRS:
            new.clear()
            step(lr)
            counts.append(len(new))
            names = list(new)
    finally:
        realize.observers.remove(observe)
    return counts, names


@exercise("08.new_kernels", answer="new_kernels",
          title="Predict how many kernels a learning rate written as a Python number compiles")
def check_new_kernels(answer: Any) -> str:
    if not is_count(answer):
        raise AssertionError(f"predict the number of new kernels as an int, got {answer!r}")
    counts, names = _kernels_per_lr_step()
    total = sum(counts)
    if answer == total:
        return (f"{total}: each of the {len(counts)} steps has a new literal lr in {counts[0]} kernels "
                f"({', '.join(names)}: each parameter's gradient reduce with `p - lr * grad` fused after "
                "it), and a kernel is cached by its AST, literal included. With `opt.lr` in memory: 0.")
    if answer == 0:
        raise AssertionError("0 would be right for `opt.lr`, a tensor in memory. A Python number in a Tensor "
                             "expression is a literal in the kernel (x * 0.05f), and the compile cache is "
                             "keyed by the kernel's AST, literal included: a new value is a new kernel.")
    if answer < total:
        raise AssertionError(f"more than {answer}. Every step has a new lr, and lr is in the update of the "
                             "weight *and* of the bias: which kernel computes each `p - lr * grad`? "
                             "(Section 4 showed the SGD update fused into the kernel of its parameter's "
                             "gradient.)")
    raise AssertionError(f"fewer than {answer}. The forward pass, the loss and the backward pass do not "
                         "contain lr: they are the same kernels as in the first step, found in the cache. "
                         "Count only the kernels that compute `p - lr * grad`, per step.")


# -- exercise: SGD with momentum as an Optimizer subclass -------------------------------------------
def _train_steps(make_opt: Callable[[list], Any], steps: int, jit: bool = False,
                 lr_schedule: Callable[[int], float] | None = None) -> list[np.ndarray]:
    """A small regression trained for `steps` steps with the optimizer `make_opt(params)` makes; the
    final weight and bias."""
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
    for k, x in enumerate(xs):
        if lr_schedule is not None:
            opt.lr.assign(lr_schedule(k))
        run(x).realize()
    return [layer.weight.numpy(), layer.bias.numpy()]


def _same(got: list[np.ndarray], want: list[np.ndarray], atol: float = 1e-6) -> bool:
    return all(np.allclose(a, b, rtol=1e-5, atol=atol) for a, b in zip(got, want, strict=True))


def _check_update_returns_pairs(cls: type) -> None:
    """One call of update() on its own: it must return (tensor, new value) pairs, p's first."""
    p = Tensor(np.array([1.0, -2.0], dtype=np.float32), requires_grad=True)
    opt = cls([p], lr=0.1, momentum=0.9)
    pairs = opt.update(p, Tensor(np.array([0.5, 0.25], dtype=np.float32)))
    shape = "a list of (tensor, new value) pairs, e.g. [(p, new_p), (b, new_b)]"
    if not isinstance(pairs, (list, tuple)) or not all(isinstance(pair, tuple) and len(pair) == 2
                                                       for pair in pairs):
        raise AssertionError(f"update(p, g) must return {shape}: step() writes each new value into its "
                             f"tensor with assign_all. Yours returned {type(pairs).__name__}.")
    if not all(isinstance(t, Tensor) and isinstance(v, Tensor) for t, v in pairs):
        raise AssertionError(f"update(p, g) must return {shape}, both Tensors; yours has "
                             f"{[(type(t).__name__, type(v).__name__) for t, v in pairs]}")
    if not any(t is p for t, _ in pairs):
        raise AssertionError("update(p, g) returns no pair for p itself: (p, new value of p) is how step() "
                             "moves the parameter")


@exercise("08.momentum_sgd", answer="MomentumSGD", title="SGD with momentum, as an Optimizer subclass",
          hook="Optimizer.update (a subclass)")
def check_momentum_sgd(cls: Any) -> str:
    """Train with the learner's class and with the library's SGD(momentum=...), step by step."""
    if not (isinstance(cls, type) and issubclass(cls, Optimizer)):
        raise AssertionError("give a class that subclasses tinyedu.nn.optim.Optimizer (class MomentumSGD"
                             "(Optimizer): ...), not an instance or a function")
    if issubclass(cls, SGD):
        raise AssertionError("subclass Optimizer itself: the library's SGD already has momentum, and the "
                             "exercise is to write it (its __init__ and update)")
    lr, momentum = 0.05, 0.9

    def reference(steps: int, **kw: Any) -> list[np.ndarray]:
        return _train_steps(lambda p: SGD(p, lr=lr, momentum=momentum), steps, **kw)

    def yours(steps: int, **kw: Any) -> list[np.ndarray]:
        return _train_steps(lambda p: cls(p, lr=lr, momentum=momentum), steps, **kw)

    with plug(cls, "update", cls.update) as plugged:  # counts the calls step() makes to your update
        _check_update_returns_pairs(cls)
        if not _same(yours(1), reference(1), atol=1e-7):
            raise AssertionError("the very first step is already off. With a buffer b that starts at zero, "
                                 "b = momentum * b + g is just g, and p moves by -lr * g: check the sign and "
                                 "that you use self.lr (a tensor) and the new b")
        got = yours(6)
        if _same(got, _train_steps(lambda p: SGD(p, lr=lr), 6)):
            raise AssertionError("after 6 steps your weights equal plain SGD's: the momentum buffer never "
                                 "carries over. update() must also return (b, new_b), so that step() writes "
                                 "the buffer in place for the next step")
        if not _same(got, reference(6)):
            raise AssertionError("the first step is right, later ones drift from SGD with momentum. p must "
                                 "move with the *new* buffer: new_b = momentum * b + g, then p - lr * new_b "
                                 "(not the old b), and the buffer must be one tensor per parameter, kept "
                                 "between steps")
        schedule = [0.05, 0.0, 0.1, 0.02, 0.05, 0.07].__getitem__
        if not _same(yours(6, lr_schedule=schedule), reference(6, lr_schedule=schedule)):
            raise AssertionError("with a learning-rate schedule (opt.lr.assign(...) before each step) your "
                                 "optimizer ignores the new values: use the tensor self.lr in the update, "
                                 "not a Python number saved in __init__ (a number is baked into the kernel)")
        try:
            got = yours(6, jit=True)
        except JitError as error:
            raise AssertionError("under TinyJit the step is not the same program every time "
                                 f"({str(error)[:90]}...): keep all state in tensors that update() returns, "
                                 "so that step() assigns them in place; rebinding a Python attribute (or "
                                 "branching on a Python counter) is something a replay cannot do") from None
        if not all(np.array_equal(a, b) for a, b in zip(got, reference(6, jit=True), strict=True)):
            raise AssertionError("eagerly your optimizer matches, but replayed by TinyJit it does not: keep "
                                 "all state that changes in tensors that update() returns (a replay runs no "
                                 "Python)")
        plugged.require_called("MomentumSGD.update")
    return ("6 steps match SGD(momentum=0.9) with a zero buffer kept in memory, a learning-rate schedule "
            "reaches the kernels through self.lr, and TinyJit replays your update bit for bit.")


# -- exercise: which recorded programs may a replay skip? ------------------------------------------
@exercise("08.replay_can_skip", answer="replay_can_skip",
          title="replay_can_skip: which recorded programs a TinyJit replay may leave out",
          hook="tinyedu.jit.replay_can_skip")
def check_replay_can_skip(rule: Callable[..., bool]) -> str:
    """Ask the rule about programs it must and must not skip, then record and replay training with it."""
    if not callable(rule):
        raise AssertionError(f"expected a function replay_can_skip(item, facts) -> bool, got "
                             f"{type(rule).__name__}")

    def ask(program: Any, **facts: Any) -> bool:
        item = JitItem("probe", None, program, [])
        defaults = {"constant": isinstance(program, (HostCopy, Fill)), "made_in_step": True, "writers": 1,
                    "returned": False}
        answer = rule(item, ItemFacts(**{**defaults, **facts}))
        if not isinstance(answer, (bool, np.bool_)):
            raise AssertionError(f"the rule must return True or False, got {answer!r}")
        return bool(answer)

    weights = HostCopy(np.array([1.0, 2.0, 1.0], np.float32))
    if not ask(weights):
        raise AssertionError("a copy of constant host data (class weights Tensor([...]) made in the step) "
                             "into a buffer the step made, written by nothing else and not returned, can be "
                             "skipped: the buffer still holds the recorded values at every replay")
    cases = [
        (dict(program=BufferCopy(), constant=False), "a copy between buffers (or a kernel) reads memory the "
         "step may have changed; only programs with facts.constant write the same data every time"),
        (dict(program=weights, made_in_step=False), "this fill writes memory from before the step (an assign "
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
    with plug(jit_module, "replay_can_skip", rule) as plugged:
        eager, jitted, dropped = _replay_pair()
        plugged.require_called("tinyedu.jit.replay_can_skip")
    if eager != jitted:
        raise AssertionError("with your rule, replayed training steps differ from running the step; check "
                             "each condition against ItemFacts")
    if len(dropped) != 1 or not isinstance(dropped[0].program, HostCopy):
        names = [item.name for item in dropped]
        raise AssertionError(f"with your rule the replay drops {names}; the step has exactly one constant "
                             "copy into its own memory (the class weights Tensor([1.0, 2.0, 1.0]))")
    return (f"your rule keeps every program whose result can change and drops the class weights' copy "
            f"({dropped[0].name}) from each replay; replayed steps equal running the step.")


def _replay_pair() -> tuple[list[float], list[float], list[Any]]:
    """The same 5 steps of a tiny classifier, run and replayed; and the programs the replay dropped."""
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
            dropped = list(run.dropped)
    return results[0], results[1], dropped


def _classifier_step() -> tuple[Callable, Any]:
    """A training step that copies constant data from the host (class weights), also writes a constant
    into memory from before the step, and returns a constant (a fill into the memory it returns)."""
    Tensor.manual_seed(0)
    layer = Linear(4, 3)
    opt = SGD([layer.weight, layer.bias], lr=0.1)
    counter = Tensor([0.0]).realize()

    def step(x: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:
        opt.zero_grad()
        loss = layer(x).log_softmax(1).nll_loss(y, weight=Tensor([1.0, 2.0, 1.0])).backward()
        opt.step()
        counter.assign(Tensor([1.0]))
        return loss, Tensor(5.0)

    return step, counter
