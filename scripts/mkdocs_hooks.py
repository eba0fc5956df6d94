"""mkdocs hooks for the walkthrough site (mkdocs.yml: `hooks:`).

- Notebook pages: the nbval markers (`# NBVAL_IGNORE_OUTPUT`, ...) are for the notebook tests, not
  for readers, so their lines are removed from the rendered code. Links written for Jupyter
  (`../docs/glossary.md#view`, `01_tensors_and_autograd.ipynb`) are turned into the site's URLs; a
  link to a page that does not exist fails the build.
- Math: MathJax is served from the site itself, copied from the `mathjax` Python package (installed
  with the docs extra), so formulas render without a network.
- Offline: mkdocs-jupyter's notebook template ends with a module script that imports mermaid from a
  CDN when a page has a mermaid diagram. The notebooks have none, so the script is removed (a notebook
  that gains a mermaid cell fails the build rather than render it from the internet).
- The home page's pipeline picture is drawn at build time from the real objects of one small
  computation (tinyedu.viz.pipeline), in place of the `<!-- pipeline-picture -->` marker (an HTML
  comment, so the page still reads well where the hook does not run).
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

MATHJAX_DEST = "javascripts/mathjax"
PICTURE_MARKER = "<!-- pipeline-picture -->"
# The parts of MathJax's es5 build the site needs: the TeX-to-HTML bundle, its fonts, the TeX
# extensions it may load on demand, and the accessibility and menu modules behind its context menu.
MATHJAX_PARTS = ("tex-chtml.js", "output/chtml/fonts/woff-v2", "input/tex/extensions", "a11y", "ui")

_MARKER_HTML = re.compile(r'<span class="c1"># NBVAL_[A-Z_]+</span>\n')
_MARKER_TEXT = re.compile(r"^# NBVAL_[A-Z_]+\n", re.MULTILINE)
_MERMAID_SCRIPT = re.compile(r'<script type="module">(?:(?!</script>).)*?mermaid(?:(?!</script>).)*</script>',
                             re.DOTALL)
_HREF = re.compile(r'href="(\.\./docs/[^"#]+\.md|[A-Za-z0-9_.-]+\.ipynb)(#[^"]*)?"')


def mathjax_dir() -> Path:
    """MathJax's es5 folder inside the installed `mathjax` package (pip: django-static-mathjax)."""
    spec = importlib.util.find_spec("mathjax")
    if spec is None or not spec.submodule_search_locations:
        raise PluginError("MathJax is not installed: the site serves it itself so that math renders "
                          "offline. Install the docs extra (pip install -e '.[docs]'), which has it.")
    return Path(next(iter(spec.submodule_search_locations))) / "static" / "mathjax" / "es5"


def on_files(files: Files, config) -> Files:
    """Add MathJax's files to the site, under javascripts/mathjax/."""
    source = mathjax_dir()
    for part in MATHJAX_PARTS:
        paths = [source / part] if (source / part).is_file() else sorted((source / part).rglob("*"))
        for path in paths:
            if path.is_file():
                relative = path.relative_to(source).as_posix()
                files.append(File(relative, str(source), config["site_dir"],
                                  config["use_directory_urls"], dest_uri=f"{MATHJAX_DEST}/{relative}"))
    return files


def strip_nbval_markers(html: str) -> str:
    """Remove `# NBVAL_...` lines from rendered notebook code (highlighted and copy-button text)."""
    html = _MARKER_HTML.sub("", html)
    return re.sub(r'(<div class="clipboard-copy-txt"[^>]*>)(.*?)(</div>)',
                  lambda m: m.group(1) + _MARKER_TEXT.sub("", m.group(2)) + m.group(3), html, flags=re.DOTALL)


def site_links(html: str, page, files: Files) -> str:
    """`../docs/x.md#a` and `y.ipynb` (links that work in Jupyter) -> URLs of the built site."""

    def replace(match: re.Match) -> str:
        target, anchor = match.group(1), match.group(2) or ""
        src = target[len("../docs/"):] if target.startswith("../docs/") else f"notebooks/{target}"
        file = files.get_file_from_path(src)
        if file is None:
            raise PluginError(f"{page.file.src_uri}: the link {target} points at no page of the site ({src})")
        return f'href="{file.url_relative_to(page.file)}{anchor}"'

    return _HREF.sub(replace, html)


def strip_mermaid_loader(html: str, page) -> str:
    """Remove the notebook template's CDN import of mermaid (no notebook draws a mermaid diagram)."""
    if 'class="jp-Mermaid' in html:
        raise PluginError(f"{page.file.src_uri}: a mermaid diagram would load mermaid from a CDN; the site "
                          "must work offline, so draw it as an image (graphviz SVG) instead")
    return _MERMAID_SCRIPT.sub("", html)


def on_post_page(html: str, page, config) -> str:
    if page.file.src_uri.endswith(".ipynb"):
        html = strip_mermaid_loader(html, page)
    return html


def on_page_content(html: str, page, config, files: Files) -> str:
    if page.file.src_uri.endswith(".ipynb"):
        html = site_links(strip_nbval_markers(html), page, files)
    if PICTURE_MARKER in html:
        from tinyedu.viz.pipeline import pipeline_figure

        html = html.replace(PICTURE_MARKER, pipeline_figure())
    return html
