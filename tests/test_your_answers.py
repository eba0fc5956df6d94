"""Your answers, checked from the command line: `pytest -m chapter0` (or `make check-exercises`).

Each parameter is one exercise; its answer is read from the answer cell (`# exercise: <name>`) of
its chapter's notebook, as saved on disk. A stub is skipped as "not done yet" (so the committed
notebooks, which ship stubs, pass); a wrong answer fails with the checker's hint; a right one passes.
"""

from __future__ import annotations

import functools

import pytest

from tinyedu.exercises import NOT_DONE, chapter_marker, exercises, load_answers, run


@functools.cache
def answers(chapter: str) -> dict:
    return load_answers(chapter)


def _params() -> list:
    return [pytest.param(e.name, id=e.name, marks=getattr(pytest.mark, chapter_marker(e.chapter)))
            for e in exercises()]


@pytest.mark.parametrize("name", _params())
def test_your_answer(name, tmp_path_factory, monkeypatch):
    monkeypatch.setenv("TINYEDU_CACHE", str(tmp_path_factory.getbasetemp() / "answers-cache"))
    chapter = name.split(".")[0]
    if name not in answers(chapter):
        pytest.fail(f"the notebook of chapter {chapter} has no answer cell `# exercise: {name}`")
    result = run(name, answers(chapter)[name])
    if result.status == NOT_DONE:
        pytest.skip(str(result))
    assert result.correct, str(result)
