"""Chapter 06's exercises: the reference solutions pass, each typical mistake gets its hint, and the
notebook ships stubs. (The same checks as tests/unit/test_exercises.py on main, for this chapter.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from tinyedu.testing.exercise import CORRECT, NOT_DONE, WRONG, exercises, load_answers, run
from tinyedu.testing.solutions import chapter06 as solutions

ROOT = Path(__file__).resolve().parents[2]
CHAPTER = exercises("06")


@pytest.fixture(autouse=True)
def private_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("TINYEDU_CACHE", str(tmp_path_factory.getbasetemp() / "exercise-cache"))


def test_the_chapter_has_two_implement_this_exercises():
    assert len([e for e in CHAPTER if e.hook]) >= 2 and len(CHAPTER) == 4


@pytest.mark.parametrize("ex", CHAPTER, ids=lambda e: e.name)
def test_reference_solution_is_correct(ex):
    result = run(ex.name, getattr(solutions, ex.answer))
    assert result.status == CORRECT, str(result)


@pytest.mark.parametrize("mistake", solutions.MISTAKES, ids=lambda m: f"{m.exercise}-{m.hint[:20]}")
def test_typical_mistake_gets_its_hint(mistake):
    result = run(mistake.exercise, mistake.answer)
    assert result.status == WRONG, f"{mistake.what or mistake.hint}: {result}"
    assert mistake.hint in result.message, f"expected the hint {mistake.hint!r}, got: {result.message}"


def test_notebook_ships_stubs_and_the_solutions_page_includes_every_solution():
    answers = load_answers("06")
    page = (ROOT / "docs" / "solutions" / "chapter06.md").read_text()
    for ex in CHAPTER:
        assert run(ex.name, answers[ex.name]).status == NOT_DONE
        assert f"tinyedu/testing/solutions/chapter06.py:{ex.answer}" in page and ex.name in page
