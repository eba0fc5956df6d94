"""Rebuild tinyedu/data/pystdlib.txt.gz, the course's text corpus, from a CPython `Lib/` folder.

    python scripts/make_corpus.py [LIBDIR]      (default: this interpreter's standard library)

The shipped file was made from CPython 3.11.7 (/root/.pyenv/versions/3.11.7/lib/python3.11); the
same folder always gives the same bytes (modules in this order, gzip with no timestamp). The
script prints the sizes and the SHA-256 of the text, which tinyedu/data/README.md records.
"""

from __future__ import annotations

import gzip
import hashlib
import sys
import sysconfig
from pathlib import Path

from tinyedu.text.corpus import CORPUS_FILE, join_modules

# Plain, readable, pure-Python modules of the standard library (PSF License), in alphabetical order.
MODULES = [
    "abc.py", "argparse.py", "ast.py", "bisect.py", "calendar.py", "cmd.py", "colorsys.py",
    "configparser.py", "contextlib.py", "copy.py", "csv.py", "dataclasses.py", "datetime.py",
    "difflib.py", "enum.py", "fileinput.py", "fractions.py", "functools.py", "getopt.py", "gettext.py",
    "graphlib.py", "heapq.py", "json/__init__.py", "json/decoder.py", "json/encoder.py",
    "json/scanner.py", "numbers.py", "operator.py", "pathlib.py", "pprint.py", "queue.py", "random.py",
    "sched.py", "shlex.py", "statistics.py", "string.py", "textwrap.py", "tokenize.py", "traceback.py",
    "weakref.py",
]  # fmt: skip


def build(libdir: Path) -> bytes:
    """The corpus text: every module of MODULES read from `libdir`, after its header line."""
    missing = [name for name in MODULES if not (libdir / name).is_file()]
    if missing:
        raise FileNotFoundError(f"make_corpus: {libdir} has no {', '.join(missing)}")
    return join_modules([(name, (libdir / name).read_bytes()) for name in MODULES])


def main() -> None:
    libdir = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(sysconfig.get_paths()["stdlib"])
    text = build(libdir)
    packed = gzip.compress(text, compresslevel=9, mtime=0)
    CORPUS_FILE.parent.mkdir(parents=True, exist_ok=True)
    CORPUS_FILE.write_bytes(packed)
    print(f"{CORPUS_FILE}: {len(MODULES)} modules from {libdir}")
    print(f"text: {len(text)} bytes, sha256 {hashlib.sha256(text).hexdigest()}")
    print(f"gzip: {len(packed)} bytes")


if __name__ == "__main__":
    main()
