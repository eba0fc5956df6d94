"""Chapter 01b's checkers accept the reference solutions, reject each typical mistake with its hint,
and say "not done yet" to a stub (never an exception, so the executed notebook stays clean)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tinyedu.testing.chapter01b import CHECKERS, check
from tinyedu.testing.chapter01b_solutions import MISTAKES, SOLUTIONS

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "01b_numerics_and_semantics.ipynb"


@pytest.mark.parametrize("name", sorted(CHECKERS))
def test_the_reference_solution_is_correct(name: str) -> None:
    message = CHECKERS[name](SOLUTIONS[name])
    assert isinstance(message, str) and message


@pytest.mark.parametrize("name, answer, hint", MISTAKES, ids=[f"{m[0]}-{k}" for k, m in enumerate(MISTAKES)])
def test_a_typical_mistake_gets_its_hint(name: str, answer: object, hint: str) -> None:
    with pytest.raises(AssertionError, match=re.escape(hint)):
        CHECKERS[name](answer)


def test_stubs_are_not_done_yet(capsys: pytest.CaptureFixture) -> None:
    def stub(*args: object) -> None:
        raise NotImplementedError("write it")

    from tinyedu.function_composite import UnaryFunction

    class Stub(UnaryFunction):
        def value(self, x: object) -> None:
            raise NotImplementedError("write value()")

    check("01b.softplus", Stub)
    check("01b.toposort", stub)
    check("01b.nan_compare", (..., ..., ...))
    check("01b.signed_zero", ...)
    out = capsys.readouterr().out
    assert out.count("○") == 4 and "not done yet" in out and "✘" not in out


def test_every_mistake_and_checker_is_covered() -> None:
    assert {m[0] for m in MISTAKES} == set(CHECKERS) == set(SOLUTIONS)


def test_the_notebook_ships_stubs_and_checks_them() -> None:
    """The committed notebook holds each exercise's stub (not the solution) and its check prints ○."""
    cells = json.loads(NOTEBOOK.read_text())["cells"]
    sources = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
    outputs = "".join("".join(o.get("text", "")) for c in cells if c["cell_type"] == "code"
                      for o in c.get("outputs", []))
    for name in CHECKERS:
        assert any(s.startswith(f"# exercise: {name}") for s in sources), f"no answer cell for {name}"
        assert f"○ {name} · not done yet" in outputs, f"the committed check of {name} is not 'not done yet'"
    implement = [s for s in sources if s.startswith("# exercise:") and "NotImplementedError" in s]
    assert len(implement) >= 2
