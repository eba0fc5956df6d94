"""Reference solutions, one module per chapter (`chapter00.py` for notebook 00).

Try the exercises first: the notebooks check your answers and give hints. Each module defines, under
the names the answer cells use, an answer that passes its checker, and `MISTAKES`: typical wrong
answers with the hint each must get. The test suite runs both, so every exercise is solvable and
every checker can fail. The site shows these solutions collapsed, included from these files.

Where an exercise asks for a piece of the library as the library writes it, the solution is that
piece itself (`tanh = Value.tanh`), not a copy that could drift from the code the chapters teach:
`solution_source` then shows the piece's own source, which is what the solutions page includes.
"""

from __future__ import annotations

import importlib
import inspect
import re
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]  # the repository: paths on the page are relative to it
# `name = Owner.attribute` or `name = TABLE["key"]`: the whole code of a section that names a library piece
LIBRARY_PIECE = re.compile(r"(?P<name>\w+) = (?P<piece>[A-Za-z_][\w.]*(?:\[\"\w+\"\])?)(?:\s+#.*)?")


def section(source: str, name: str) -> str:
    """The lines between `# --8<-- [start:name]` and `[end:name]`, dedented, as the site includes them."""
    start, end = f"# --8<-- [start:{name}]", f"# --8<-- [end:{name}]"
    if source.count(start) != 1 or source.count(end) != 1:
        raise ValueError(f"solutions: expected one section {name!r} between {start} and {end}")
    return textwrap.dedent(source.split(start)[1].split(end)[0].strip("\n"))


def solution_source(chapter: str, answer: str) -> str:
    """The code the solutions page shows for `answer`: its section of solutions/chapterNN.py or, where
    that section only names a library piece, the section's comments and that piece's source."""
    module = importlib.import_module(f"{__name__}.chapter{chapter}")
    text = section(Path(module.__file__).read_text(), answer)
    lines = text.splitlines()
    code = [line for line in lines if line.strip() and not line.lstrip().startswith("#")]
    match = LIBRARY_PIECE.fullmatch(code[0]) if len(code) == 1 else None
    if match is None or match["name"] != answer:
        return text
    comments = [line for line in lines if line.lstrip().startswith("#")]
    return "\n".join([*comments, library_source(match["piece"], getattr(module, answer))])


def library_source(piece: str, value: object) -> str:
    """A library piece as the page shows it: a comment naming it and its file, then its source."""
    if isinstance(value, str):  # an entry of a table of C helpers: its text is the code
        return f"# the library's own {piece}\n{piece} = {value!r}"
    function = inspect.unwrap(value)  # through `memoized` and other functools.wraps decorators
    path = Path(inspect.getsourcefile(function)).resolve().relative_to(ROOT)
    return f"# the library's own {piece}, in {path}\n" + textwrap.dedent(inspect.getsource(function)).rstrip()
