"""`python -m tinyedu.exercises [CHAPTER ...]`: check your answers in the notebooks, chapter by chapter.

This is what `make check-exercises` runs. Save the notebook first: the answers are read from the
notebook files. Exit status 1 if an answer is wrong (a stub is "not done yet", not wrong).
"""

from __future__ import annotations

import os
import sys
import tempfile

from tinyedu.exercises.answers import load_answers, normalize_chapter, notebook_for
from tinyedu.exercises.registry import CORRECT, NOT_DONE, WRONG, exercises, run


def main(argv: list[str]) -> int:
    os.environ.setdefault("TINYEDU_CACHE", os.path.join(tempfile.gettempdir(), "tinyedu-exercises"))
    chapters = [normalize_chapter(a) for a in argv] or sorted({e.chapter for e in exercises()})
    counts = {CORRECT: 0, NOT_DONE: 0, WRONG: 0}
    for chapter in chapters:
        todo = exercises(chapter)
        if not todo:
            print(f"chapter {chapter}: no exercises")
            continue
        print(f"chapter {chapter} · notebooks/{notebook_for(chapter).name}")
        answers = load_answers(chapter)
        for ex in todo:
            result = run(ex.name, answers[ex.name]) if ex.name in answers else None
            if result is None:
                print(f"  ✘ {ex.name}: the notebook has no cell starting `# exercise: {ex.name}`")
                counts[WRONG] += 1
                continue
            counts[result.status] += 1
            message = result.message if result.status != CORRECT else ex.title
            print(f"  {str(result)[0]} {ex.name:28s} {result.status}: {message}")
    print(f"\n{counts[CORRECT]} correct, {counts[WRONG]} not yet right, {counts[NOT_DONE]} not done yet")
    return 1 if counts[WRONG] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
