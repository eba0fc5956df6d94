"""Optimizers step by step against torch.optim, and the learning rate as a kernel argument."""

from __future__ import annotations

import numpy as np
import pytest

from tinyedu import Device, Tensor, TinyJit
from tinyedu.nn import Linear
from tinyedu.nn.optim import SGD, Adam, AdamW, Optimizer
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
