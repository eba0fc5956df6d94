"""Every exercise is solvable, every checker can fail, and every notebook ships stubs.

For each registered exercise (tinyedu/exercises/chapterNN.py): its reference solution
(tinyedu/exercises/solutions/chapterNN.py) is checked "correct"; each typical mistake listed there
is "not yet right" with the hint it is meant to get; and the stub in its chapter's notebook, run
from the committed notebook exactly as a learner gets it, is "not done yet". The framework itself
(hooks restore what they replace, answers are read from notebooks) is tested at the end.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

from tinyedu.exercises import (
    CORRECT,
    NOT_DONE,
    NOTEBOOKS_DIR,
    WRONG,
    answer_cells,
    exercises,
    load_answers,
    notebook_for,
    plug,
    run,
)
from tinyedu.exercises.solutions import solution_source
from tinyedu.scalar import Value

ROOT = Path(__file__).resolve().parents[2]
ALL = exercises()
CHAPTERS = sorted({e.chapter for e in ALL})
# Every chapter is a notebook notebooks/NN_*.ipynb (or NNb_*.ipynb); each has two implement-this exercises.
NOTEBOOK_CHAPTERS = sorted(p.name.split("_")[0] for p in NOTEBOOKS_DIR.glob("[0-9][0-9]*_*.ipynb"))


def solutions(chapter: str):
    return importlib.import_module(f"tinyedu.exercises.solutions.chapter{chapter}")


def mistakes() -> list:
    return [m for chapter in CHAPTERS for m in solutions(chapter).MISTAKES]


@pytest.fixture(autouse=True)
def private_cache(tmp_path_factory, monkeypatch):
    """Exercises that compile C use a private compile cache."""
    monkeypatch.setenv("TINYEDU_CACHE", str(tmp_path_factory.getbasetemp() / "exercise-cache"))


@pytest.mark.parametrize("ex", ALL, ids=lambda e: e.name)
def test_reference_solution_is_correct(ex):
    result = run(ex.name, getattr(solutions(ex.chapter), ex.answer))
    assert result.status == CORRECT, str(result)


@pytest.mark.parametrize("mistake", mistakes(), ids=lambda m: m.exercise)
def test_typical_mistake_gets_its_hint(mistake):
    result = run(mistake.exercise, mistake.answer)
    assert result.status == WRONG, f"{mistake.what or mistake.hint}: {result}"
    assert mistake.hint in result.message, f"expected the hint {mistake.hint!r}, got: {result.message}"


@pytest.mark.parametrize("ex", ALL, ids=lambda e: e.name)
def test_every_exercise_has_typical_mistakes(ex):
    assert any(m.exercise == ex.name for m in solutions(ex.chapter).MISTAKES), \
        f"{ex.name}: list at least one typical mistake in solutions/chapter{ex.chapter}.py"


@pytest.mark.parametrize("ex", ALL, ids=lambda e: e.name)
def test_notebook_ships_a_stub(ex):
    answers = load_answers(ex.chapter)
    assert ex.name in answers, f"{notebook_for(ex.chapter).name} has no cell starting `# exercise: {ex.name}`"
    result = run(ex.name, answers[ex.name])
    assert result.status == NOT_DONE, f"the committed answer cell must be a stub: {result}"


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_answer_cells_belong_to_registered_exercises(chapter):
    names = {e.name for e in ALL}
    for name in answer_cells(notebook_for(chapter)):
        assert name in names, f"{notebook_for(chapter).name}: answer cell for unknown exercise {name}"


def test_every_chapter_has_exercises():
    assert NOTEBOOK_CHAPTERS == CHAPTERS, f"notebooks: {NOTEBOOK_CHAPTERS}, with exercises: {CHAPTERS}"
    assert {"00", "01", "02", "03", "04", "05", "08"} <= set(NOTEBOOK_CHAPTERS)


@pytest.mark.parametrize("chapter", NOTEBOOK_CHAPTERS)
def test_every_chapter_has_two_implement_this_exercises(chapter):
    hooked = [e.name for e in exercises(chapter) if e.hook]
    assert len(hooked) >= 2, f"chapter {chapter}: implement-this exercises (with a hook): {hooked}"


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_solutions_page_includes_every_solution(chapter):
    page = (ROOT / "docs" / "solutions" / f"chapter{chapter}.md").read_text()
    for ex in exercises(chapter):
        include = f"tinyedu/exercises/solutions/chapter{chapter}.py:{ex.answer}"
        assert include in page, f"docs/solutions/chapter{chapter}.md does not include {include}"
        assert ex.name in page


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_notebooks_show_no_solution(chapter):
    """No reference solution's body appears in a notebook (they are stubs there)."""
    notebook = json.loads(notebook_for(chapter).read_text())
    text = "\n".join("".join(c["source"]) for c in notebook["cells"])
    for ex in exercises(chapter):
        section = solution_source(chapter, ex.answer)  # what the solutions page shows
        # the scaffolding a stub ships (signatures, a class line, its super().__init__ call) is no solution
        generic = ("#", "def ", "class ", "super().__init__(", '"""', "return out", "out._backward")
        lines = [line.strip() for line in section.splitlines()]
        body = [line for line in lines if line and not line.startswith(generic)]
        leaked = [line for line in body if len(line) > 25 and line in text]
        assert not leaked, f"{ex.name}: the solution is in the notebook: {leaked}"


# ---- the framework ----------------------------------------------------------------------------------
def test_run_sorts_answers_into_three_kinds():
    def stub(self):
        raise NotImplementedError("write me")

    assert run("00.tanh", stub).status == NOT_DONE and run("00.tanh", stub).message == "write me"
    assert run("00.repeated_backward", ...).status == NOT_DONE
    assert run("00.manual_backprop", {"a": 1.0, "b": ...}).status == NOT_DONE
    broken = run("00.tanh", lambda self: 1 / 0)
    assert broken.status == WRONG and "ZeroDivisionError in your `<lambda>`" in broken.message
    assert str(run("00.repeated_backward", 36.0)).startswith("✔ 00.repeated_backward · correct")


def test_plug_restores_the_original_even_when_the_block_raises():
    original = Value.tanh
    with pytest.raises(RuntimeError):
        with plug(Value, "tanh", lambda self: "mine"):
            assert Value(1.0).tanh() == "mine"
            raise RuntimeError
    assert Value.tanh is original and Value(0.0).tanh().data == 0.0


def test_plug_uncovers_an_inherited_attribute_and_restores_dict_items():
    class Base:
        def f(self):
            return "base"

    class Child(Base):
        pass

    with plug(Child, "f", lambda self: "child"):
        assert Child().f() == "child"
    assert Child().f() == "base" and "f" not in vars(Child)
    table = {"k": 1}
    with plug(table, "k", 2):
        assert table["k"] == 2
    assert table == {"k": 1}


def test_plug_refuses_a_name_that_does_not_exist():
    with pytest.raises(AttributeError, match="has no 'tnah' to replace"):
        with plug(Value, "tnah", lambda self: self):
            pass


def test_answers_are_read_from_notebook_cells(tmp_path):
    def cell(source: str) -> dict:
        return {"cell_type": "code", "metadata": {}, "source": source, "outputs": [], "execution_count": None}

    notebook = {"cells": [cell("x = 1"),
                          cell("# exercise: 00.repeated_backward\nx_grad = 36.0"),
                          cell("# exercise: 00.cube\ndef cube(x):\n    return x ** 3 +"),
                          cell("# exercise: 00.tanh\ntanh2 = None")],
                "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    (tmp_path / "00_test.ipynb").write_text(json.dumps(notebook))
    answers = load_answers("00", tmp_path)
    assert answers["00.repeated_backward"] == 36.0
    assert "SyntaxError" in run("00.cube", answers["00.cube"]).message
    assert "must define `tanh`" in run("00.tanh", answers["00.tanh"]).message
    assert "00.sigmoid_grad" not in answers


def test_notebooks_folder_is_the_repositorys():
    assert NOTEBOOKS_DIR == ROOT / "notebooks"


def test_plug_counts_calls_and_a_cache_that_answers_is_an_error():
    with plug(Value, "tanh", lambda self: self) as plugged:
        Value(1.0).tanh()
        Value(2.0).tanh()
    assert plugged.calls == 2
    with plug(Value, "tanh", lambda self: self) as plugged:
        with pytest.raises(RuntimeError, match="some cache answered"):
            plugged.require_called("Value.tanh")


def test_clear_caches_empties_memoized_functions_of_tinyedu():
    import functools
    import sys
    import types

    from tinyedu.exercises.hooks import clear_caches

    module = types.ModuleType("tinyedu._memo_probe")
    module.square = functools.cache(lambda x: x * x)
    sys.modules[module.__name__] = module
    try:
        module.square(3)
        assert module.square.cache_info().currsize == 1
        clear_caches()
        assert module.square.cache_info().currsize == 0
    finally:
        del sys.modules[module.__name__]
