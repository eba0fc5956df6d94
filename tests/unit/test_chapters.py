"""Every chapter (notebooks/NN_*.ipynb) is laid out as a course, and its links lead somewhere.

A chapter opens with prerequisites, what you will learn and how to run it, links its walkthrough
page(s) (a stage page, or for chapter 08 the training pages), and ends with a recap, a link back to
its walkthrough and the next chapter on disk (the last chapter links back to an earlier one instead). Links
into the site's pages (`../docs/page.md#anchor`) must name a page and an anchor that exist (the site
build checks the pages; this checks anchors).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = sorted((ROOT / "notebooks").glob("[0-9][0-9]*_*.ipynb"))
# A walkthrough page: a stage's page, one of the pages of the training stack (chapter 08), the models
# page (chapters 09-10), the export page (chapter 11), the language model page (chapter 13) or the
# many devices page (chapter 14).
PAGES = r"stage\d_\w+|numerics_and_semantics|nn|optim|state|jit|models|export|language_model|multi"
WALKTHROUGH = rf"\]\(\.\./docs/((?:{PAGES})\.md)\)"


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


# The chapters of the pipeline's stages; others (08 training, ...) may join and leave gaps.
STAGE_CHAPTERS = ["00", "01", "02", "03", "04", "05", "06", "07"]


def test_the_chapters():
    """The notebooks on disk are the chapters, in order: one per number, every stage's present."""
    numbers = [p.name.split("_")[0] for p in CHAPTERS]
    assert len(set(numbers)) == len(numbers), f"two notebooks share a chapter number: {numbers}"
    missing = [n for n in STAGE_CHAPTERS if n not in numbers]
    assert not missing, f"no notebook for chapter(s) {missing}"


@pytest.mark.parametrize("notebook", CHAPTERS, ids=lambda p: p.name)
def test_chapter_opens_and_closes_like_a_course(notebook: Path):
    cells = markdown_cells(notebook)
    opening, rest = cells[0], "\n".join(cells)
    for part in ("**Prerequisites.**", "**You will learn**", "**How to run it.**"):
        assert part in opening, f"{notebook.name}: the first cell lacks {part}"
    assert re.search(WALKTHROUGH, opening), f"{notebook.name}: no walkthrough link"
    assert re.search(r"^## (\d+ · )?Exercises", rest, flags=re.M), f"{notebook.name}: no exercises"
    closing = cells[-1]
    assert "## Recap" in closing and re.search(WALKTHROUGH, closing), \
        f"{notebook.name}: the last cell must recap and link back to the walkthrough"
    if notebook == CHAPTERS[-1]:
        assert re.search(r"\]\(\d\d_\w+\.ipynb\)", closing), f"{notebook.name}: no link back to a chapter"
    else:
        following = CHAPTERS[CHAPTERS.index(notebook) + 1].name
        assert re.search(rf"\*\*Next:\*\*[^\n]*\]\({following}\)", closing), \
            f"{notebook.name}: no **Next:** link to {following}"


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
def test_walkthrough_pages_link_back(notebook: Path):
    for page in set(re.findall(WALKTHROUGH, markdown_cells(notebook)[0])):
        text = (ROOT / "docs" / page).read_text()
        assert f"notebooks/{notebook.name}" in text, f"{page} lacks {notebook.name}"
