"""Chapter 08's checkers: the reference solutions pass, each typical mistake fails with its hint, and a stub
is reported as "not done yet" without an exception."""

from __future__ import annotations

import pytest

from tinyedu.testing import training, training_solutions


def test_momentum_sgd_reference_passes(capsys: pytest.CaptureFixture) -> None:
    assert training.check_momentum_sgd(training_solutions.MomentumSGD) is not None
    assert capsys.readouterr().out.startswith("Correct:")


@pytest.mark.parametrize("wrong, hint", training_solutions.MOMENTUM_MISTAKES,
                         ids=[m[0].__name__ for m in training_solutions.MOMENTUM_MISTAKES])
def test_momentum_sgd_mistakes_get_their_hint(wrong, hint) -> None:
    with pytest.raises(AssertionError, match=hint):
        training.check_momentum_sgd(wrong)


def test_momentum_sgd_rejects_a_non_optimizer() -> None:
    with pytest.raises(AssertionError, match="subclasses tinyedu.nn.optim.Optimizer"):
        training.check_momentum_sgd(lambda params, lr, momentum: None)


def test_replay_can_skip_reference_passes(capsys: pytest.CaptureFixture) -> None:
    assert training.check_replay_can_skip(training_solutions.replay_can_skip) is not None
    assert capsys.readouterr().out.startswith("Correct:")


@pytest.mark.parametrize("wrong, hint", training_solutions.SKIP_MISTAKES,
                         ids=[m[0].__name__ for m in training_solutions.SKIP_MISTAKES])
def test_replay_can_skip_mistakes_get_their_hint(wrong, hint) -> None:
    with pytest.raises(AssertionError, match=hint):
        training.check_replay_can_skip(wrong)


def test_the_library_rule_is_the_reference() -> None:
    from tinyedu.engine import jit
    assert training.check_replay_can_skip(jit.replay_can_skip) is not None


def test_stubs_are_not_done_yet(capsys: pytest.CaptureFixture) -> None:
    from tinyedu.nn.optim import Optimizer

    class Stub(Optimizer):
        def __init__(self, params, lr, momentum):
            raise NotImplementedError("create one zero buffer per parameter")

    def stub_rule(item, facts):
        raise NotImplementedError("return True only when ...")

    assert training.check_momentum_sgd(Stub) is None
    assert training.check_replay_can_skip(stub_rule) is None
    assert capsys.readouterr().out.count("not done yet") == 2
