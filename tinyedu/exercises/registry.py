"""The exercise framework: every chapter's exercises are registered here, checked the same way.

An exercise has a name (`"00.tanh"`: the chapter, i.e. the notebook's number, and a short name), the
name of the object the learner's *answer cell* defines (`tanh`), and a checker. The checker calls
the learner's code (through a hook, see hooks.py, when the answer is a piece of the library) on
cases chosen to catch the usual mistakes, and

- returns a short success message (or prints one) when the answer is right;
- raises AssertionError with a hint when it is wrong: what went wrong and where to look, never the
  answer itself.

`run(name, answer)` turns that into a `Result` with one of three statuses. A stub (code that raises
NotImplementedError, or a prediction that still contains `...`) is "not done yet", not an error, so
a notebook that ships stubs runs clean. `check(name, answer)` prints the Result: that is the call
the notebooks make. The answers in the notebooks are read by answers.py.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import pkgutil
import re
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

CORRECT, NOT_DONE, WRONG = "correct", "not done yet", "not yet right"
_SYMBOL = {CORRECT: "✔", NOT_DONE: "○", WRONG: "✘"}

PACKAGE_DIR = Path(__file__).resolve().parents[1]        # tinyedu/


@dataclass(frozen=True)
class Exercise:
    """One exercise: its name, what the answer cell defines, and the checker."""

    name: str                               # "00.tanh": chapter "00", short name "tanh"
    answer: str                             # the name the answer cell defines (and the solution)
    title: str                              # one line for progress tables and the solutions page
    checker: Callable[[Any], str | None]
    hook: str = ""                          # where the answer plugs into the library, "" if nowhere

    @property
    def chapter(self) -> str:
        return self.name.split(".", 1)[0]


@dataclass(frozen=True)
class Result:
    """What a check found: status CORRECT, NOT_DONE or WRONG, and the message for the learner."""

    exercise: str
    status: str
    message: str

    @property
    def correct(self) -> bool:
        return self.status == CORRECT

    def __str__(self) -> str:
        return f"{_SYMBOL[self.status]} {self.exercise} · {self.status}: {self.message}"


@dataclass(frozen=True)
class Mistake:
    """A typical wrong answer and a piece of the hint it must get (kept next to the solutions)."""

    exercise: str
    answer: Any
    hint: str       # must appear in the checker's message
    what: str = ""  # the mistake, in words


_REGISTRY: dict[str, Exercise] = {}


def exercise(name: str, *, answer: str, title: str, hook: str = "") -> Callable:
    """Decorator: register `checker(answer) -> success message` as the exercise `name`."""
    if not re.fullmatch(r"\d\d[a-z]?\.[a-z][a-z0-9_]*", name):
        raise ValueError(f"exercise: name {name!r} must look like '03.kernel_count' (chapter.short_name)")

    def register(checker: Callable[[Any], str | None]) -> Callable[[Any], str | None]:
        if name in _REGISTRY and _REGISTRY[name].checker.__qualname__ != checker.__qualname__:
            raise ValueError(f"exercise: {name!r} is registered twice")
        _REGISTRY[name] = Exercise(name, answer, title, checker, hook)
        return checker

    return register


def _load_chapter_modules() -> None:
    """Import every `tinyedu/exercises/chapterNN.py`: importing one registers its exercises."""
    for module in pkgutil.iter_modules([str(Path(__file__).parent)]):
        if module.name.startswith("chapter"):
            importlib.import_module(f"tinyedu.exercises.{module.name}")


def exercises(chapter: str | None = None) -> list[Exercise]:
    """Every registered exercise (of one chapter, e.g. "03"), in chapter order."""
    _load_chapter_modules()
    found = [e for e in _REGISTRY.values() if chapter is None or e.chapter == chapter]
    return sorted(found, key=lambda e: e.chapter)  # stable: registration order within a chapter


def get(name: str) -> Exercise:
    _load_chapter_modules()
    if name not in _REGISTRY:
        close = sorted(n for n in _REGISTRY if n.split(".")[0] == name.split(".")[0]) or sorted(_REGISTRY)
        raise ValueError(f"check: no exercise named {name!r}; the exercises are {close}")
    return _REGISTRY[name]


# ---- checking -------------------------------------------------------------------------------------
def has_placeholder(answer: Any) -> bool:
    """True when a prediction still contains `...` (anywhere in a dict, list or tuple)."""
    if answer is Ellipsis:
        return True
    if isinstance(answer, dict):
        return any(has_placeholder(v) for v in answer.values())
    if isinstance(answer, (list, tuple)):
        return any(has_placeholder(v) for v in answer)
    return False


class BrokenAnswer:
    """Stands in for an answer whose cell did not run (a syntax error, a missing import, ...)."""

    def __init__(self, error: BaseException):
        self.error = error


def run(name: str, answer: Any) -> Result:
    """Check `answer` for exercise `name`; never raises for anything the answer does."""
    ex = get(name)
    if isinstance(answer, BrokenAnswer):
        return Result(name, WRONG, f"the answer cell does not run: {_describe(answer.error)}. Answer cells "
                                   "run on their own from the command line: import what you use in the cell.")
    if has_placeholder(answer):
        return Result(name, NOT_DONE, "replace each `...` with your answer, then run the check again.")
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            message = ex.checker(answer)
    except NotImplementedError as error:
        hint = str(error) or "the function still raises NotImplementedError"
        return Result(name, NOT_DONE, hint)
    except AssertionError as error:
        return Result(name, WRONG, str(error) or "an assertion failed without a message")
    except RecursionError as error:
        return Result(name, WRONG, f"{_describe(error)}. A recursive function goes one Python call deeper "
                                   "per level; a long chain needs an explicit stack (a list) instead.")
    except Exception as error:  # the learner's code broke: say what and where, as a hint
        return Result(name, WRONG, _describe(error))
    text = message if isinstance(message, str) else printed.getvalue().strip() or "all checks pass."
    return Result(name, CORRECT, text)


def check(name: str, answer: Any) -> None:
    """Check your answer to exercise `name` and print what the checker found."""
    print(run(name, answer))


def _describe(error: BaseException) -> str:
    """`ZeroDivisionError in your `f` (line 3): division by zero`, naming the learner's frame if any."""
    frames = traceback.extract_tb(error.__traceback__)
    theirs = [f for f in frames if not _is_library_file(f.filename)]
    where = f" in your `{theirs[-1].name}` (line {theirs[-1].lineno})" if theirs else ""
    if not theirs and frames:
        where = f" inside tinyedu (`{frames[-1].name}`), called with what your code returned"
    return f"{type(error).__name__}{where}: {error}"


def _is_library_file(filename: str) -> bool:
    path = Path(filename)
    return (PACKAGE_DIR in path.parents and "solutions" not in path.parts) or "site-packages" in path.parts \
        or path.name in ("contextlib.py", "threading.py") or "/lib/python" in filename
