"""Every chapter (notebook 00-05) is laid out as a course, and its links lead somewhere.

A chapter opens with prerequisites, what you will learn and how to run it, links its walkthrough
page, and ends with a recap and the way on. Links into the site's pages (`../docs/page.md#anchor`)
must name a page and an anchor that exist (the site build checks the pages; this checks anchors).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = sorted((ROOT / "notebooks").glob("0[0-5]_*.ipynb"))


def markdown_cells(notebook: Path) -> list[str]:
    cells = json.loads(notebook.read_text())["cells"]
    return ["".join(c["source"]) for c in cells if c["cell_type"] == "markdown"]


def anchors(page: Path) -> set[str]:
    """Explicit `{#id}` anchors and the ids mkdocs gives headings (lower case, spaces to dashes)."""
    text = page.read_text()
    found = set(re.findall(r"\{#([\w-]+)\}", text))
    for heading in re.findall(r"^#+ (.+?)\s*(?:\{#[\w-]+\})?$", text, flags=re.M):
        found.add(re.sub(r"[\s]+", "-", re.sub(r"[^\w\s-]", "", heading).strip().lower()))
    return found


def test_there_are_six_chapters():
    assert [p.name[:2] for p in CHAPTERS] == ["00", "01", "02", "03", "04", "05"]


@pytest.mark.parametrize("notebook", CHAPTERS, ids=lambda p: p.name)
def test_chapter_opens_and_closes_like_a_course(notebook: Path):
    cells = markdown_cells(notebook)
    opening, rest = cells[0], "\n".join(cells)
    for part in ("**Prerequisites.**", "**You will learn**", "**How to run it.**"):
        assert part in opening, f"{notebook.name}: the first cell lacks {part}"
    assert re.search(r"\]\(\.\./docs/stage\d_\w+\.md\)", opening), f"{notebook.name}: no walkthrough link"
    assert re.search(r"^## (\d+ · )?Exercises", rest, flags=re.M), f"{notebook.name}: no exercises"
    closing = cells[-1]
    assert "## Recap" in closing and re.search(r"\]\(\.\./docs/stage\d_\w+\.md\)", closing), \
        f"{notebook.name}: the last cell must recap and link back to the walkthrough"
    assert "**Next:**" in closing or notebook.name.startswith("05"), f"{notebook.name}: no next chapter"


@pytest.mark.parametrize("notebook", CHAPTERS, ids=lambda p: p.name)
def test_links_to_site_pages_have_real_anchors(notebook: Path):
    for cell in markdown_cells(notebook):
        for page, anchor in re.findall(r"\]\(\.\./docs/([\w/]+\.md)(?:#([\w-]+))?\)", cell):
            target = ROOT / "docs" / page
            assert target.is_file(), f"{notebook.name}: link to a missing page {page}"
            if anchor:
                assert anchor in anchors(target), f"{notebook.name}: {page} has no anchor #{anchor}"
        for sibling in re.findall(r"\]\(([\w]+\.ipynb)\)", cell):
            assert (ROOT / "notebooks" / sibling).is_file(), f"{notebook.name}: link to a missing {sibling}"


@pytest.mark.parametrize("notebook", CHAPTERS, ids=lambda p: p.name)
def test_walkthrough_page_links_back(notebook: Path):
    opening = markdown_cells(notebook)[0]
    page = re.search(r"\]\(\.\./docs/(stage\d_\w+\.md)\)", opening).group(1)
    assert f"notebooks/{notebook.name}" in (ROOT / "docs" / page).read_text(), f"{page} lacks {notebook.name}"
