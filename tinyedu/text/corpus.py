"""The course's text: a fixed snapshot of Python standard-library modules, shipped with the package.

A language model needs real text, and a course needs the same text on every machine with no
download: 40 modules from CPython 3.11.7's `Lib/` (PSF License), about 1.1 MB, stored gzipped in
`tinyedu/data/` (its README.md lists the modules, the licence and the checksum;
`scripts/make_corpus.py` rebuilds the file). Each module starts with one header line,
`# file: NAME.py`, so the text splits at module boundaries: the validation set is whole modules
the model never saw, not the second half of a function whose first half it trained on.
"""

from __future__ import annotations

import functools
import gzip
from pathlib import Path

CORPUS_FILE = Path(__file__).resolve().parent.parent / "data" / "pystdlib.txt.gz"
HEADER = b"# file: "  # the first line of every module in the corpus: "# file: json/decoder.py"


def join_modules(modules: list[tuple[str, bytes]]) -> bytes:
    """One text from (name, source) pairs, each source after its header line, each ending in a newline."""
    parts = []
    for name, source in modules:
        if "\n" in name or not name:
            raise ValueError(f"join_modules: a module name must be one non-empty line, got {name!r}")
        if source.startswith(HEADER) or b"\n" + HEADER in source:
            raise ValueError(f"join_modules: {name} has a line starting with {HEADER!r}, "
                             "where the text would split")
        if source and not source.endswith(b"\n"):
            source += b"\n"
        parts.append(HEADER + name.encode() + b"\n" + source)
    return b"".join(parts)


def split_modules(text: bytes) -> list[tuple[str, bytes]]:
    """The (name, chunk) pairs of a text made by `join_modules`; each chunk keeps its header line."""
    if not text.startswith(HEADER):
        raise ValueError(f"split_modules: the text does not start with a module header {HEADER!r}")
    starts = [0]
    at = text.find(b"\n" + HEADER)
    while at != -1:
        starts.append(at + 1)
        at = text.find(b"\n" + HEADER, at + 1)
    ends = starts[1:] + [len(text)]
    chunks = [text[start:end] for start, end in zip(starts, ends, strict=True)]
    return [(chunk[len(HEADER) : chunk.index(b"\n")].decode(), chunk) for chunk in chunks]


def split_text(text: bytes, fraction: float) -> tuple[bytes, bytes]:
    """Cut a joined text at the module boundary nearest `fraction` of its length (the earlier on a tie).

    Both parts are whole modules and neither is empty, so the text needs at least two modules.
    """
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 < fraction < 1:
        raise ValueError(f"corpus split: fraction must be a number strictly between 0 and 1, "
                         f"got {fraction!r}")
    modules = split_modules(text)
    if len(modules) < 2:
        raise ValueError(f"corpus split: the text has {len(modules)} module(s); a split needs at least 2")
    boundaries, offset = [], 0
    for _, chunk in modules[:-1]:
        offset += len(chunk)
        boundaries.append(offset)
    target = fraction * len(text)
    cut = min(boundaries, key=lambda b: (abs(b - target), b))
    return text[:cut], text[cut:]


@functools.cache
def corpus() -> bytes:
    """The whole corpus as bytes (UTF-8 Python source, module after module), read once per process."""
    if not CORPUS_FILE.exists():
        raise FileNotFoundError(f"corpus: {CORPUS_FILE} is missing; scripts/make_corpus.py rebuilds it")
    return gzip.decompress(CORPUS_FILE.read_bytes())


def corpus_modules() -> list[tuple[str, bytes]]:
    """The corpus's modules in order: (name such as "argparse.py", its text with its header line)."""
    return split_modules(corpus())


def corpus_split(fraction: float = 0.9) -> tuple[bytes, bytes]:
    """(train, validation): the first modules, about `fraction` of the bytes, and the rest.

    The same split on every machine: the modules' order is fixed and the cut is a module boundary.
    """
    return split_text(corpus(), fraction)
