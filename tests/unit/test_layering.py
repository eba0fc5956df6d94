"""Imports run one way: the stages below the frontend never import the drawings (tinyedu/viz/).

The engine reaches GRAPH=1's drawing only through its `schedule_hooks` seam, which tinyedu/viz/
fills; so realizing a schedule never needs graphviz, and a reader of the engine sees no drawing code.
Read from the source with `ast` (module- and function-level imports alike), not by importing.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "tinyedu"
BELOW_THE_FRONTEND = ["core", "engine", "codegen", "renderer", "runtime", "shape", "lazy.py"]


def imports_of(path: Path) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.append((node.lineno, node.module))
            found += [(node.lineno, f"{node.module}.{a.name}") for a in node.names]
    return found


def files(part: str) -> list[Path]:
    path = ROOT / part
    found = [path] if path.is_file() else sorted(path.rglob("*.py"))
    assert found, f"tinyedu/{part} does not exist: update the list of stages"
    return found


@pytest.mark.parametrize("part", BELOW_THE_FRONTEND)
def test_no_stage_below_the_frontend_imports_viz(part: str) -> None:
    bad = [f"{p.relative_to(ROOT.parent)}:{line} imports {name}"
           for p in files(part) for line, name in imports_of(p) if name.startswith("tinyedu.viz")]
    assert not bad, "the drawings plug in through tinyedu.engine.schedule_hooks instead:\n" + "\n".join(bad)


def test_graph_hook_is_installed_by_viz() -> None:
    import tinyedu  # noqa: F401 - the package import installs the hooks
    from tinyedu.engine import schedule_hooks
    from tinyedu.viz import draw_schedule_when_asked

    assert draw_schedule_when_asked in schedule_hooks


def test_the_device_base_does_not_import_codegen() -> None:
    """runtime/device.py (Device, Buffer) is below the code generator: launch dims and GPU limits,
    which both need, are plain data in tinyedu/launch.py."""
    bad = [f"line {line}: {name}" for line, name in imports_of(ROOT / "runtime" / "device.py")
           if name.startswith("tinyedu.codegen")]
    assert not bad, "runtime/device.py imports the code generator:\n" + "\n".join(bad)
