"""Optimizers step by step against torch.optim, and the learning rate as a kernel argument."""

from __future__ import annotations

import numpy as np
import pytest

from tinyedu import Device, Tensor, TinyJit
from tinyedu.nn import Linear
from tinyedu.nn.optim import SGD, Adam, AdamW, Optimizer, WarmupCosine, clip_grad_norm
from tinyedu.nn.state import get_parameters, get_state_dict

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(0)
X = RNG.standard_normal((6, 16, 8)).astype(np.float32)
Y = RNG.integers(0, 4, (6, 16))


class Net:
    def __init__(self) -> None:
        self.l1, self.l2 = Linear(8, 16), Linear(16, 4)

    def __call__(self, x: Tensor) -> Tensor:
        return self.l2(self.l1(x).relu())


class TorchNet(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.l1, self.l2 = torch.nn.Linear(8, 16), torch.nn.Linear(16, 4)

    def forward(self, x: "torch.Tensor") -> "torch.Tensor":
        return self.l2(self.l1(x).relu())


def _torch_net(net: Net) -> "torch.nn.Module":
    reference = TorchNet()
    reference.load_state_dict({k: torch.tensor(v.numpy()) for k, v in get_state_dict(net).items()})
    return reference


CASES = [
    (SGD, torch.optim.SGD, {"lr": 0.1}),
    (SGD, torch.optim.SGD, {"lr": 0.1, "momentum": 0.9}),
    (SGD, torch.optim.SGD, {"lr": 0.05, "momentum": 0.9, "nesterov": True, "weight_decay": 0.01}),
    (SGD, torch.optim.SGD, {"lr": 0.1, "momentum": 0.5, "dampening": 0.3, "weight_decay": 0.1}),
    (Adam, torch.optim.Adam, {"lr": 0.01}),
    (Adam, torch.optim.Adam, {"lr": 0.01, "betas": (0.8, 0.99), "eps": 1e-6, "weight_decay": 0.1}),
    (AdamW, torch.optim.AdamW, {"lr": 0.01}),
    (AdamW, torch.optim.AdamW, {"lr": 0.02, "weight_decay": 0.5}),
]


@pytest.mark.parametrize("ours, theirs, kwargs", CASES, ids=[f"{c[0].__name__}-{c[2]}" for c in CASES])
def test_trajectory_matches_torch_step_by_step(ours, theirs, kwargs) -> None:
    Tensor.manual_seed(1)
    net = Net()
    reference = _torch_net(net)
    opt, topt = ours(get_parameters(net), **kwargs), theirs(reference.parameters(), **kwargs)
    for step in range(len(X)):
        loss = net(Tensor(X[step])).cross_entropy(Tensor(Y[step].astype(np.int32)))
        opt.zero_grad()
        loss.backward()
        opt.step()
        tloss = torch.nn.functional.cross_entropy(reference(torch.tensor(X[step])), torch.tensor(Y[step]))
        topt.zero_grad()
        tloss.backward()
        topt.step()
        np.testing.assert_allclose(loss.item(), tloss.item(), rtol=1e-5)
        for name, p in get_state_dict(net).items():  # after every step
            np.testing.assert_allclose(p.numpy(), reference.state_dict()[name].numpy(), rtol=1e-5, atol=2e-6,
                                       err_msg=f"step {step}: {name}")


def _compiled_programs() -> int:
    return len(Device["C"].programs)


def test_a_learning_rate_schedule_compiles_nothing_new() -> None:
    """20 steps of a decaying lr: the lr is a kernel argument (a buffer), not a literal."""
    Tensor.manual_seed(2)
    net = Net()
    opt = Adam(get_parameters(net), lr=0.01)
    x, y = Tensor(X[0]).realize(), Tensor(Y[0].astype(np.int32)).realize()

    def step() -> None:
        opt.zero_grad()
        net(x).cross_entropy(y).backward()
        opt.step()

    step()  # compiles the step's kernels once
    compiled = _compiled_programs()
    before = net.l1.weight.numpy()
    for k in range(20):
        opt.lr.assign(0.01 * 0.9 ** k)
        step()
    assert _compiled_programs() == compiled
    assert not np.array_equal(net.l1.weight.numpy(), before)


def test_a_python_number_in_an_update_is_a_literal_and_compiles_once_per_value() -> None:
    """The contrast: a decay written with a Python scalar compiles one kernel per value."""
    w = Tensor(np.ones(7, np.float32)).realize()
    compiled = _compiled_programs()
    for k in range(3):
        w.assign(w * (0.5 + 0.1 * k))
    assert _compiled_programs() == compiled + 3


def test_lr_change_takes_effect_and_zero_lr_freezes() -> None:
    w = Tensor([1.0, 2.0], requires_grad=True)
    opt = SGD([w], lr=0.5)
    (w * w).sum().backward()
    opt.lr.assign(0.0)
    opt.step()
    np.testing.assert_array_equal(w.numpy(), [1, 2])
    opt.lr.assign(0.25)
    opt.step()                                           # the same gradient 2w, now with lr 0.25
    np.testing.assert_array_equal(w.numpy(), [0.5, 1.0])


def test_parameters_without_gradient_are_left_alone() -> None:
    a, b = Tensor([1.0], requires_grad=True), Tensor([5.0], requires_grad=True)
    opt = SGD([a, b], lr=0.1, momentum=0.9)
    (a * 3).sum().backward()
    opt.step()
    np.testing.assert_allclose(a.numpy(), [0.7])
    np.testing.assert_array_equal(b.numpy(), [5.0])


def test_optimizer_inside_tinyjit_matches_eager() -> None:
    """The step counter and beta^t live in memory, so a replayed Adam step is the same step."""
    nets = []
    for _ in range(2):
        Tensor.manual_seed(3)
        nets.append(Net())
    opts = [Adam(get_parameters(n), lr=0.01) for n in nets]

    def step(net: Net, opt: Optimizer, x: Tensor, y: Tensor) -> Tensor:
        opt.zero_grad()
        loss = net(x).cross_entropy(y).backward()
        opt.step()
        return loss

    jitted = TinyJit(lambda x, y: step(nets[1], opts[1], x, y))
    for k in range(len(X)):
        x, y = Tensor(X[k]), Tensor(Y[k].astype(np.int32))
        assert step(nets[0], opts[0], x, y).item() == jitted(x, y).item()
    for a, b in zip(get_state_dict(nets[0]).values(), get_state_dict(nets[1]).values(), strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


@pytest.mark.parametrize("make, match", [
    (lambda p: SGD(p, lr=-1), "lr must be a number >= 0.0"),
    (lambda p: SGD(p, momentum=-0.5), "momentum must be a number >= 0.0"),
    (lambda p: SGD(p, nesterov=True), "Nesterov momentum needs momentum > 0"),
    (lambda p: Adam(p, betas=(0.9, 1.0)), r"betas\[1\] must be a number in \[0.0, 1.0\)"),
    (lambda p: Adam(p, betas=0.9), "betas must be a pair"),
    (lambda p: AdamW(p, eps=-1e-8), "eps must be a number >= 0.0"),
    (lambda p: SGD([], lr=0.1), "empty parameter list"),
    (lambda p: SGD([Tensor([1.0])], lr=0.1), "requires_grad=True"),
])
def test_bad_optimizer_arguments(make, match) -> None:
    with pytest.raises(ValueError, match=match):
        make([Tensor([1.0], requires_grad=True)])


def test_optimizer_subclass_hook() -> None:
    """update(p, g) is the one method a new optimizer writes (the notebook's exercise uses it)."""

    class SignSGD(Optimizer):
        def update(self, p: Tensor, g: Tensor) -> list[tuple[Tensor, Tensor]]:
            return [(p, p - self.lr * g.sign())]

    w = Tensor([1.0, -2.0, 3.0], requires_grad=True)
    opt = SignSGD([w], lr=0.5)
    (w * Tensor([1.0, -4.0, 0.0])).sum().backward()
    opt.step()
    np.testing.assert_array_equal(w.numpy(), [0.5, -1.5, 3.0])
    with pytest.raises(NotImplementedError, match="update"):
        Optimizer([w], lr=0.1).step()


# ---------------------------------------------------------------------------------------------
# The warmup + cosine schedule and gradient clipping, against PyTorch's
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("warmup, total, min_lr", [(5, 40, 0.0), (1, 10, 1e-4), (10, 11, 3e-4),
                                                   (0, 12, 1e-4)])
def test_warmup_cosine_equals_torch_schedulers(warmup: int, total: int, min_lr: float) -> None:
    """torch's LinearLR(1/warmup -> 1 over warmup - 1 steps) then CosineAnnealingLR(total - warmup)."""
    max_lr = 3e-3
    w = Tensor([1.0], requires_grad=True)
    schedule = WarmupCosine(SGD([w], lr=1.0), max_lr, warmup, total, min_lr)
    topt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=max_lr)
    cosine = torch.optim.lr_scheduler.CosineAnnealingLR(topt, T_max=total - warmup, eta_min=min_lr)
    if warmup > 0:
        warm = torch.optim.lr_scheduler.LinearLR(topt, 1 / warmup, 1.0, total_iters=max(warmup - 1, 1)) \
            if warmup > 1 else torch.optim.lr_scheduler.ConstantLR(topt, 1.0, total_iters=0)
        cosine = torch.optim.lr_scheduler.SequentialLR(topt, [warm, cosine], milestones=[warmup])
    tsched = cosine
    for step in range(total + 3):
        want = topt.param_groups[0]["lr"] if step <= total else min_lr  # torch's cosine rises after T_max
        assert schedule.lr_at(step) == pytest.approx(want, rel=1e-9, abs=1e-15), step
        np.testing.assert_allclose(schedule.optimizer.lr.numpy(), want, rtol=1e-6, atol=1e-12)
        topt.step()
        tsched.step()
        schedule.step()
    assert schedule.lr_at(max(warmup - 1, 0)) == max_lr and schedule.lr_at(total) == min_lr


def test_warmup_cosine_rejects_bad_settings() -> None:
    opt = SGD([Tensor([1.0], requires_grad=True)], lr=0.1)
    for args, message in [((0.1, -1, 10), "warmup_steps must be an int >= 0"),
                          ((0.1, 5, 5), "must be more than"),
                          ((0.1, 2, 10.0), "total_steps must be an int"), ((0.1, 2, 10, 0.5), "above max_lr"),
                          ((0.1, 2, 10, -1.0), "min_lr must be a number"), ((-1, 2, 10), "max_lr must be")]:
        with pytest.raises(ValueError, match=message):
            WarmupCosine(opt, *args)


@pytest.mark.parametrize("max_norm", [0.05, 1.0, 1e6])
def test_clip_grad_norm_equals_torch(max_norm: float) -> None:
    """Clipped (0.05, 1.0 here) and not clipped (1e6): the norm returned and every gradient after."""
    Tensor.manual_seed(3)
    net = Net()
    reference = _torch_net(net)
    net(Tensor(X[0])).cross_entropy(Tensor(Y[0].astype(np.int32))).backward()
    torch.nn.functional.cross_entropy(reference(torch.tensor(X[0])), torch.tensor(Y[0])).backward()
    norm = clip_grad_norm(get_parameters(net), max_norm)
    tnorm = torch.nn.utils.clip_grad_norm_(reference.parameters(), max_norm)
    np.testing.assert_allclose(norm.numpy(), tnorm.numpy(), rtol=1e-5)
    tgrads = {name: p.grad.numpy() for name, p in reference.named_parameters()}
    for name, p in get_state_dict(net).items():
        np.testing.assert_allclose(p.grad.numpy(), tgrads[name], rtol=1e-5, atol=1e-8, err_msg=name)
    clipped = np.sqrt(sum((g.astype(np.float64) ** 2).sum() for g in tgrads.values()))
    assert clipped == pytest.approx(min(max_norm, float(tnorm)), rel=1e-4)


def test_a_clipped_scheduled_adamw_trajectory_equals_torch_under_tinyjit() -> None:
    """The chapter's training step (AdamW, clipping, warmup + cosine) in a TinyJit, step by step."""
    Tensor.manual_seed(4)
    net = Net()
    reference = _torch_net(net)
    opt, topt = AdamW(get_parameters(net), lr=0.05), torch.optim.AdamW(reference.parameters(), lr=0.05)
    schedule = WarmupCosine(opt, 0.05, 2, len(X))
    tsched = torch.optim.lr_scheduler.LambdaLR(topt, lambda t: schedule.lr_at(t) / 0.05)

    @TinyJit
    def step(x: Tensor, y: Tensor) -> Tensor:
        opt.zero_grad()
        loss = net(x).cross_entropy(y)
        loss.backward()
        norm = clip_grad_norm(opt.params, 0.5)
        opt.step()
        return norm.realize()

    for k in range(len(X)):
        norm = step(Tensor(X[k]).realize(), Tensor(Y[k].astype(np.int32)).realize())
        schedule.step()
        topt.zero_grad()
        torch.nn.functional.cross_entropy(reference(torch.tensor(X[k])), torch.tensor(Y[k])).backward()
        tnorm = torch.nn.utils.clip_grad_norm_(reference.parameters(), 0.5)
        topt.step()
        tsched.step()
        np.testing.assert_allclose(norm.numpy(), tnorm.numpy(), rtol=1e-4)
        for name, p in get_state_dict(net).items():
            np.testing.assert_allclose(p.numpy(), reference.state_dict()[name].numpy(), rtol=1e-4, atol=5e-6,
                                       err_msg=f"step {k}: {name}")


def test_clip_grad_norm_errors() -> None:
    w = Tensor([1.0], requires_grad=True)
    with pytest.raises(ValueError, match="no parameter has a gradient"):
        clip_grad_norm([w], 1.0)
    with pytest.raises(ValueError, match="max_norm must be a number"):
        clip_grad_norm([w], -1.0)
