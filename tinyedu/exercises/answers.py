"""The learner's answers, read from the notebooks: `make check-exercises` and `pytest -m chapter0`.

The answers live in the notebooks, in cells whose first line is `# exercise: <name>`.
`load_answers(chapter)` executes those cells (each on its own, so they must import what they use)
and returns what they define, so the command line checks the same answers as the notebook does.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path
from typing import Any

from tinyedu.exercises.registry import PACKAGE_DIR, BrokenAnswer, get

NOTEBOOKS_DIR = PACKAGE_DIR.parent / "notebooks"          # the chapters, in a checkout of the repository
ANSWER_MARK = re.compile(r"^#\s*exercise:\s*(\S+)")


def chapter_marker(chapter: str) -> str:
    """The pytest marker of a chapter's answers: "03" -> "chapter3", "01b" -> "chapter1b"."""
    return "chapter" + (chapter.lstrip("0") or "0")


def normalize_chapter(text: str) -> str:
    """"3", "03", "chapter3" -> "03"; "1b" -> "01b" (what a learner types on the command line)."""
    match = re.fullmatch(r"(?:chapter)?0*(\d+)([a-z]?)", text.strip().lower())
    if not match:
        raise ValueError(f"not a chapter: {text!r}; write it like 3, 03 or 1b")
    return f"{int(match.group(1)):02d}{match.group(2)}"


def notebook_for(chapter: str, notebooks: Path = NOTEBOOKS_DIR) -> Path:
    """The notebook of a chapter: notebooks/03_*.ipynb for chapter "03"."""
    found = sorted(notebooks.glob(f"{chapter}_*.ipynb"))
    if len(found) != 1:
        raise FileNotFoundError(f"chapter {chapter}: expected one notebook {notebooks}/{chapter}_*.ipynb, "
                                f"found {[p.name for p in found]}")
    return found[0]


def answer_cells(notebook: Path) -> dict[str, str]:
    """The source of every answer cell (first line `# exercise: <name>`), by exercise name."""
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    sources: dict[str, str] = {}
    for cell in cells:
        source = "".join(cell["source"])
        match = ANSWER_MARK.match(source)
        if cell["cell_type"] == "code" and match:
            if match.group(1) in sources:
                raise ValueError(f"{notebook.name}: two answer cells for {match.group(1)}")
            sources[match.group(1)] = source
    return sources


def load_answers(chapter: str, notebooks: Path = NOTEBOOKS_DIR) -> dict[str, Any]:
    """Run each answer cell of a chapter's notebook on its own; return what it defines, by exercise.

    An exercise without an answer cell is missing from the result; a cell that does not run gives
    a BrokenAnswer (which `run` reports as a wrong answer, with the error).
    """
    notebook = notebook_for(chapter, notebooks)
    answers: dict[str, Any] = {}
    for name, source in answer_cells(notebook).items():
        namespace: dict[str, Any] = {"__name__": f"answers_{chapter}"}
        wanted = get(name).answer
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                exec(compile(source, f"{notebook.name}: answer cell {name}", "exec"), namespace)  # noqa: S102
        except Exception as error:  # a broken cell is the learner's to fix: report it, do not crash
            answers[name] = BrokenAnswer(error)
            continue
        if wanted not in namespace:
            answers[name] = BrokenAnswer(NameError(f"the cell must define `{wanted}`, and it does not"))
            continue
        answers[name] = namespace[wanted]
    return answers
