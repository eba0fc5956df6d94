"""The walkthrough site, seen the way a learner sees it.

Build the site with `mkdocs build --strict` (a broken link, a missing notebook or a source excerpt
whose section no longer exists fails the build), serve it on 127.0.0.1, and open it in a real
headless Chromium: the stage-0 notebook page must show its graph and its plot; math must be typeset
by the MathJax the site serves itself (the machine has no network); the nbval markers must not show;
solutions must be collapsed; every link inside a notebook page must lead to a page of the site; and
the navigation must reach every page listed in mkdocs.yml. Screenshots go to artifacts/screenshots/.
"""

from __future__ import annotations

import ast
import base64
import functools
import html as html_lib
import http.server
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import threading
import urllib.request
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urljoin, urlparse

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / "artifacts" / "screenshots"

pytestmark = pytest.mark.browser


def find_chromium() -> str | None:
    """A Chromium-family browser: $CHROMIUM first, then the usual names and macOS app paths."""
    candidates = [os.environ.get("CHROMIUM", ""), "chromium", "chromium-browser", "google-chrome",
                  "google-chrome-stable", "/Applications/Chromium.app/Contents/MacOS/Chromium",
                  "/Applications/Google Chrome.app/Contents/MacOS/Google Chrome"]
    for name in candidates:
        if name and (shutil.which(name) or os.access(name, os.X_OK)):
            return shutil.which(name) or name
    return None


def nav_pages(nav: list) -> list[str]:
    """Every page path (e.g. 'index.md', 'notebooks/00_scalar_autograd.ipynb') in a mkdocs nav."""
    pages: list[str] = []
    for entry in nav:
        value = next(iter(entry.values())) if isinstance(entry, dict) else entry
        if isinstance(value, list):
            pages += nav_pages(value)
        elif not str(value).startswith(("http://", "https://")):
            pages.append(str(value))
    return pages


def page_url(path: str) -> str:
    """The URL mkdocs gives a page with use_directory_urls: 'a/b.md' -> 'a/b/', 'index.md' -> ''."""
    stem = path.rsplit(".", 1)[0]
    if stem == "index":
        return ""
    if stem.endswith("/index"):
        return stem[: -len("index")]
    return stem + "/"


class LinkCollector(HTMLParser):
    """Collects the hrefs of the site navigation (material's `md-nav__link` anchors)."""

    def __init__(self) -> None:
        super().__init__()
        self.nav_links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        if tag == "a" and "md-nav__link" in (attributes.get("class") or "") and attributes.get("href"):
            self.nav_links.append(attributes["href"] or "")


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - signature is fixed
        pass


@pytest.fixture(scope="session")
def built_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{proc.stdout}\n{proc.stderr}"
    return out


@pytest.fixture(scope="session")
def site_url(built_site: Path):
    handler = functools.partial(QuietHandler, directory=str(built_site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/"
    server.shutdown()


@pytest.fixture(scope="session")
def browser(tmp_path_factory: pytest.TempPathFactory):
    """Run headless Chromium on a URL: `browser("--dump-dom", url)` returns what it printed."""
    executable = find_chromium()
    if executable is None:
        message = "no Chromium found: install it (make system-browser) or set CHROMIUM=/path/to/chrome"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    profile = tmp_path_factory.mktemp("chromium-profile")
    # Flags: no sandbox (CI runs as root), and no background traffic: the machine has no network.
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--disable-dev-shm-usage", "--hide-scrollbars", f"--user-data-dir={profile}"]

    def run(*args: str) -> str:
        proc = subprocess.run([executable, *flags, *args], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, f"chromium {' '.join(args)} failed:\n{proc.stderr[-2000:]}"
        return proc.stdout

    return run


def test_site_builds_strict(built_site: Path) -> None:
    assert (built_site / "index.html").is_file()
    assert (built_site / "notebooks" / "00_scalar_autograd" / "index.html").is_file()


class ResourceCollector(HTMLParser):
    """What a page makes the browser fetch by itself: script, image, frame and media sources, `<link>`
    targets (stylesheets, fonts, preconnects), and every URL written inside inline scripts and styles
    (`import("https://...")`, `@import`, `url(...)`). Plain `<a href>` links are not fetched."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []
        self._inline: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        if tag == "link" and attributes.get("href"):
            self.urls.append(attributes["href"] or "")
        if tag in ("script", "img", "iframe", "audio", "video", "source", "embed") and attributes.get("src"):
            self.urls.append(attributes["src"] or "")
        self._inline = tag if tag in ("script", "style") else None

    def handle_endtag(self, tag: str) -> None:
        self._inline = None

    def handle_data(self, data: str) -> None:
        if self._inline:
            self.urls += re.findall(r"(?:https?:)?//[A-Za-z0-9.-]+\.[A-Za-z]{2,}[^\s\"'`)]*", data)


def test_built_site_loads_nothing_from_the_internet(built_site: Path) -> None:
    """A learner offline gets every page whole: no web font, CDN script or remote stylesheet."""
    external: dict[str, set[str]] = {}
    for page in sorted(built_site.rglob("*.html")):
        collector = ResourceCollector()
        collector.feed(page.read_text())
        remote = {u for u in collector.urls if (urlparse(u).netloc or u.startswith("//"))
                  and urlparse(u).netloc != "www.w3.org"}  # XML namespace names, never fetched
        if remote:
            external[str(page.relative_to(built_site))] = remote
    assert not external, f"pages that fetch from the internet: {external}"


def site_hooks():
    """scripts/mkdocs_hooks.py as a module (it is loaded by mkdocs, not installed)."""
    spec = importlib.util.spec_from_file_location("mkdocs_hooks", ROOT / "scripts" / "mkdocs_hooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def answer_bodies(path: str, names: tuple[str, ...]) -> dict[str, list[str]]:
    """The library's code for each named definition, as stripped source lines of more than 20
    characters, leaving out signatures and docstrings (which the pages show): what no page may show."""
    source = (ROOT / path).read_text()
    lines = source.splitlines()
    bodies: dict[str, list[str]] = {}

    def code_lines(node: ast.AST) -> list[str]:
        shown = set()  # lines of signatures and docstrings
        for n in ast.walk(node):
            if isinstance(n, (ast.FunctionDef, ast.ClassDef)):
                first_body = n.body[1] if ast.get_docstring(n) is not None and len(n.body) > 1 else n.body[0]
                shown |= set(range(n.lineno, first_body.lineno))
        span = range(node.lineno, node.end_lineno + 1)
        return sorted({lines[i - 1].strip() for i in span if i not in shown} - {""})

    def visit(nodes: list[ast.stmt], scope: tuple[str, ...]) -> None:
        for node in nodes:
            name = getattr(node, "name", None)
            targets = tuple(t.id for t in getattr(node, "targets", []) if isinstance(t, ast.Name))
            for qual in names:
                parts = tuple(qual.split("."))
                if (name and (*scope, name)[-len(parts):] == parts) or targets == parts:
                    bodies[qual] = [b for b in code_lines(node) if len(b) > 20 and not b.startswith("#")]
            if isinstance(node, ast.ClassDef):
                visit(node.body, (*scope, node.name))

    visit(ast.parse(source).body, ())
    return bodies


def test_every_implement_this_exercise_lists_its_answer_for_the_site() -> None:
    from tinyedu.exercises import exercises

    answers = site_hooks().EXERCISE_ANSWERS
    # every implement-this exercise hides its library piece; an exercise written apart from the library
    # may hide the library code that holds its answer too (13.online_softmax: FlashAttention.forward)
    assert {e.name for e in exercises() if e.hook} <= set(answers) <= {e.name for e in exercises()}
    for exercise, (path, names) in answers.items():
        found = answer_bodies(path, names)
        assert set(found) == set(names), f"{exercise}: {path} has no definition of {set(names) - set(found)}"


def test_no_page_shows_an_exercise_answer(built_site: Path) -> None:
    """The library code an implement-this exercise asks for appears only on the solutions pages: the
    walkthrough pages show its signature and docstring, the notebooks a stub (and no printed source)."""
    pages = {str(p.relative_to(built_site)): html_lib.unescape(re.sub(r"<[^>]+>", "", p.read_text()))
             for p in built_site.rglob("index.html")}
    pages = {name: text for name, text in pages.items() if not name.startswith("solutions")}
    leaks = []
    for exercise, (path, names) in site_hooks().EXERCISE_ANSWERS.items():
        for qual, body in answer_bodies(path, names).items():
            for page, text in pages.items():
                shown = [line for line in body if line in text]
                if body and len(shown) >= 0.75 * len(body):
                    leaks.append(f"{exercise} ({qual}) on {page}: {shown[:2]}")
    assert not leaks, "\n".join(leaks)


def test_stage0_notebook_page_shows_graph_and_plot(site_url: str, browser) -> None:
    url = urljoin(site_url, "notebooks/00_scalar_autograd/")
    dom = browser("--virtual-time-budget=5000", "--dump-dom", url)
    # Notebook outputs are embedded as data URLs: a Value's graph as graphviz SVG, the loss curve
    # and the decision boundary as matplotlib PNGs.
    encoded = re.findall(r'src="data:image/svg\+xml;base64,([^"]+)"', dom)
    svgs = [base64.b64decode(m).decode() for m in encoded]
    assert any('class="graph"' in svg and "grad" in svg for svg in svgs), \
        "the Value graph (graphviz SVG with data and grad on its nodes) is not on the page"
    assert "data:image/png;base64," in dom, "the matplotlib plots are not on the page"
    assert "backward" in dom
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    shot = SCREENSHOTS / "stage0_notebook.png"
    browser("--window-size=1280,2400", f"--screenshot={shot}", url)
    assert shot.is_file() and shot.stat().st_size > 10_000, "the screenshot is missing or blank"


def test_navigation_reaches_every_page(site_url: str, browser) -> None:
    from mkdocs.config import load_config

    config = load_config(str(ROOT / "mkdocs.yml"))
    expected = {urljoin(site_url, page_url(p)) for p in nav_pages(config["nav"])}
    assert len(expected) >= 3

    collector = LinkCollector()
    collector.feed(browser("--dump-dom", site_url))
    reached = {urljoin(site_url, href).split("#")[0] for href in collector.nav_links}
    reached = {u for u in reached if urlparse(u).netloc == urlparse(site_url).netloc}
    missing = sorted(expected - reached)
    assert not missing, f"pages in mkdocs.yml but not in the site navigation: {missing}"

    for url in sorted(expected):  # each page is served, with a heading (static HTML: no browser needed)
        with urllib.request.urlopen(url, timeout=30) as response:
            page = response.read().decode()
        assert "<h1" in page, f"{url} has no heading"
        assert "404 - Not found" not in page, f"{url} is the 404 page"


def notebook_pages() -> list[str]:
    return sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))


def test_math_is_typeset_offline(site_url: str, browser, built_site: Path) -> None:
    """Formulas become MathJax output, from the site's own copy of MathJax (no CDN is referenced)."""
    for page, formulas in (("stage0_scalar_autograd/", 5), ("notebooks/00_scalar_autograd/", 20)):
        html = (built_site / page / "index.html").read_text()
        scripts = re.findall(r'<script[^>]*src="([^"]+)"', html)
        assert any(s.endswith("javascripts/mathjax/tex-chtml.js") for s in scripts), scripts
        assert not [s for s in scripts if s.startswith(("http://", "https://", "//"))], scripts
        dom = browser("--virtual-time-budget=10000", "--dump-dom", urljoin(site_url, page))
        typeset = dom.count("<mjx-container")
        assert typeset >= formulas, f"{page}: {typeset} formulas typeset by MathJax, expected >= {formulas}"
        assert "$$" not in re.sub(r"<(pre|code|script)[^>]*>.*?</\1>", "", dom, flags=re.S), \
            f"{page}: raw $$...$$ left in the text"
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    shot = SCREENSHOTS / "math_stage0.png"
    browser("--window-size=1280,1600", "--virtual-time-budget=10000", f"--screenshot={shot}",
            urljoin(site_url, "stage0_scalar_autograd/"))
    assert shot.is_file() and shot.stat().st_size > 10_000


@pytest.mark.parametrize("notebook", notebook_pages())
def test_notebook_pages_hide_nbval_markers_and_link_to_real_pages(notebook: str, site_url: str, browser,
                                                                  built_site: Path) -> None:
    source = (ROOT / "notebooks" / notebook).read_text()
    url = urljoin(site_url, f"notebooks/{notebook[:-len('.ipynb')]}/")
    dom = browser("--dump-dom", url)
    if "NBVAL_" in source:
        assert "NBVAL_" not in dom, f"{notebook}: an nbval marker shows on the site"
    hrefs = set(re.findall(r'href="([^"#]*)(?:#[^"]*)?"', dom))
    internal = {h for h in hrefs if h and not h.startswith(("http://", "https://", "mailto:", "data:"))}
    for href in sorted(internal):
        target = urlparse(urljoin(url, href)).path.lstrip("/")
        path = built_site / target
        assert path.is_file() or (path / "index.html").is_file(), f"{notebook}: the link {href} is broken"
    assert not any(h.endswith((".md", ".ipynb")) and "/" in h and not h.startswith("../") for h in internal)


def test_solutions_are_collapsed(site_url: str, browser) -> None:
    """Every solution sits in a closed <details>; the notebook pages show stubs, never a solution."""
    from tinyedu.exercises import exercises

    for chapter in sorted({e.chapter for e in exercises()}):
        dom = browser("--dump-dom", urljoin(site_url, f"solutions/chapter{chapter}/"))
        blocks = re.findall(r"<details([^>]*)>(.*?)</details>", dom, flags=re.S)
        names = [e.name for e in exercises(chapter)]
        assert len(blocks) == len(names), f"chapter {chapter}: {len(blocks)} <details> for {names}"
        assert all("open" not in attributes for attributes, _ in blocks), f"chapter {chapter}: one is open"
        for name in names:
            assert any(name in body and "<code" in body for _, body in blocks), f"{name}: no solution"
    dom = browser("--dump-dom", urljoin(site_url, "solutions/chapter00/"))
    assert any("topological_order" in body and "stack" in body for _, body in
               re.findall(r"<details([^>]*)>(.*?)</details>", dom, flags=re.S))
    notebook = browser("--dump-dom", urljoin(site_url, "notebooks/00_scalar_autograd/"))
    assert "stack.append((node, True))" not in notebook, "the notebook page shows a solution"
    assert "not done yet" in notebook  # the stubs' checks ran when the notebook was executed


def test_home_page_shows_the_pipeline_picture(site_url: str, browser) -> None:
    """The picture drawn at build time from one computation: graph, kernel AST, UOps, C, result."""
    dom = browser("--virtual-time-budget=5000", "--dump-dom", site_url)
    match = re.search(r'<svg class="pipeline-picture".*?</svg>', dom, flags=re.S)
    assert match, "the home page has no pipeline picture"
    svg = match.group(0)
    for text in ("the lazy graph", "ReduceOps.SUM", "kernel r_2_3", "BufferOps.STORE", "DEFINE_GLOBAL",
                 "RANGE", "void r_2_3(", "data0[gidx0]", "y = [5., 0.]"):
        assert text in svg, f"the pipeline picture lacks {text!r}"
    assert "pipeline-picture -->" not in dom
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    shot = SCREENSHOTS / "home_pipeline.png"
    browser("--window-size=1280,1800", f"--screenshot={shot}", site_url)
    assert shot.is_file() and shot.stat().st_size > 20_000


def test_api_page_lists_every_public_method(built_site: Path) -> None:
    """The API page is written from the Tensor class at build time: every public method is on it."""
    from tinyedu import Tensor

    text = html_lib.unescape(re.sub(r"<[^>]+>", "", (built_site / "api" / "index.html").read_text()))
    public = [name for name in dir(Tensor)
              if not name.startswith("_") and callable(getattr(Tensor, name, None))]
    missing = [name for name in public if not re.search(rf"\b{re.escape(name)}\(", text)]
    assert not missing, f"methods missing from the API page: {missing}"
    for name in ("sort(", "logcumsumexp(", "interpolate(", "scatter_reduce(", "view(", "erf("):
        assert name in text
