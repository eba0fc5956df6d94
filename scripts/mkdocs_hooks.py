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
- Solutions: a solutions page includes each answer's section of tinyedu/exercises/solutions/; where
  that section only names the library's own piece (`tanh = Value.tanh`), the page shows the piece's
  source instead (tinyedu.exercises.solutions.solution_source), so it is the code the library runs.
- Exercise answers stay on the solutions pages: where a walkthrough page includes library source that
  an implement-this exercise asks the learner to write (EXERCISE_ANSWERS), a section or a whole file
  (`--8<-- "tinyedu/core/function.py"`, as the core's reading page does), the page shows that
  definition's signature and docstring and, in place of its body, a line naming the exercise.
- The API page's tables (`<!-- api-tables -->` in docs/api.md) are written at build time from the
  Tensor class itself: every public method, grouped by the module that defines it, with its
  signature and the first line of its docstring, so the list can never miss or invent an op.
- The home page's pipeline picture is drawn at build time from the real objects of one small
  computation (tinyedu.viz.pipeline), in place of the `<!-- pipeline-picture -->` marker (an HTML
  comment, so the page still reads well where the hook does not run).
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
import re
import textwrap
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
_SNIPPET = re.compile(r'^(?P<indent>[ \t]*)--8<-- "(?P<path>[^":]+)(?::(?P<section>[\w-]+))?"[ \t]*$',
                      re.MULTILINE)
ROOT = Path(__file__).resolve().parents[1]

# The library pieces each implement-this exercise asks a learner to write: (file, qualified names).
# A walkthrough page that includes one of them shows its signature and docstring, not its body.
# tests/browser/test_site.py checks that every exercise with a hook is listed and that no page shows
# one of these bodies. 06.fast_matmul is listed without names: the learner picks opts for one matmul,
# and the stage-5 page's general heuristics (which the checker swaps out) are no answer to that.
EXERCISE_ANSWERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "00.tanh": ("tinyedu/scalar/value.py", ("Value.tanh",)),
    "00.topological_order": ("tinyedu/scalar/value.py", ("Value._topological_order",)),
    "01.mul": ("tinyedu/core/function.py", ("Mul",)),
    "01.expand": ("tinyedu/core/function.py", ("Expand",)),
    "01b.softplus": ("tinyedu/function_composite.py", ("Softplus",)),
    "01b.toposort": ("tinyedu/core/ops.py", ("LazyOp.toposort",)),
    "02.permute": ("tinyedu/core/shape.py", ("View.permute",)),
    "02.pad": ("tinyedu/core/shape.py", ("View.pad",)),
    "03.keeps_zero": ("tinyedu/engine/schedule.py", ("keeps_zero",)),
    "03.store_is_cheaper": ("tinyedu/engine/schedule.py", ("store_is_cheaper",)),
    "04.simplify": ("tinyedu/core/uops.py", ("UOpBuilder._simplify",)),
    "04.lower_reduce": ("tinyedu/core/linearizer.py", ("Linearizer.lower_plain_reduce",)),
    "05.c_literal": ("tinyedu/renderer/cstyle.py", ("c_literal",)),
    "05.max_float32": ("tinyedu/renderer/cstyle.py", ("HELPERS",)),
    "06.upcast": ("tinyedu/codegen/opts.py", ("upcast",)),
    "06.fast_matmul": ("tinyedu/codegen/heuristics.py", ()),
    "07.neon_vector_op": ("tinyedu/renderer/neon.py",
                          ("vector_op", "NEON_BINARY", "NEON_BITWISE", "NEON_UNARY")),
    "07.llvm_int_divide": ("tinyedu/renderer/llvm_ops.py", ("int_divide",)),
    "08.momentum_sgd": ("tinyedu/nn/optim.py", ("SGD.update",)),
    "08.replay_can_skip": ("tinyedu/jit.py", ("replay_can_skip",)),
    "09.causal_mask": ("tinyedu/models/transformer.py", ("causal_mask",)),
    "09.layer_norm": ("tinyedu/nn/__init__.py", ("LayerNorm.__call__",)),
    "10.lstm_cell": ("tinyedu/models/lstm.py", ("lstm_cell",)),
    "10.basic_block": ("tinyedu/models/resnet.py", ("BasicBlock.__call__",)),
    "11.place_buffers": ("tinyedu/export/memory.py", ("place_buffers",)),
    "11.buffer_lifetimes": ("tinyedu/export/program.py", ("buffer_lifetimes",)),
    "12.group_combine": ("tinyedu/codegen/gpu.py", ("combine_groups",)),
    "12.barriers": ("tinyedu/codegen/gpu.py", ("finish_groups",)),
    "12.local_sizes": ("tinyedu/codegen/heuristics.py", ("gpu_optimizations",)),
    "13.merge_pair": ("tinyedu/text/bpe.py", ("merge_pair",)),
    "13.kv_cache_update": ("tinyedu/models/gpt.py", ("write_rows",)),
    "13.online_softmax": ("tinyedu/function_attention.py", ("FlashAttention.forward",)),
    "14.reduce_scatter_step": ("tinyedu/multi/allreduce.py", ("reduce_scatter_step",)),
    "14.reshaped_axis": ("tinyedu/multi/lazy.py", ("reshaped_axis",)),
}
# Where the core (tinyedu/core/) has its own copy of an exercise's answer, that copy is hidden too.
# (None today: the full library's Linearizer inherits the core's lower_plain_reduce.)
CORE_COPIES: dict[str, tuple[str, tuple[str, ...]]] = {}
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


def section_text(path: str, section: str | None) -> str:
    """The source between `# --8<-- [start:section]` and `[end:section]` (the whole file when section is
    None), as pymdownx.snippets includes it: other sections' markers dropped, dedented."""
    lines = (ROOT / path).read_text().splitlines()
    if section is None:
        return "\n".join(line for line in lines if "--8<-- [" not in line)
    start = [i for i, line in enumerate(lines) if line.strip() == f"# --8<-- [start:{section}]"]
    end = [i for i, line in enumerate(lines) if line.strip() == f"# --8<-- [end:{section}]"]
    if len(start) != 1 or len(end) != 1 or end[0] < start[0]:
        raise PluginError(f"{path}: no single section {section!r} to include")
    body = [line for line in lines[start[0] + 1:end[0]] if "--8<-- [" not in line]
    return textwrap.dedent("\n".join(body))


def _answer_spans(tree: ast.Module, answers: dict[str, str]) -> list[tuple[int, int, int, str]]:
    """(first line, last line, indent, exercise) of each answer body in a parsed snippet (1-based)."""
    spans = []

    def visit(nodes: list[ast.stmt], scope: list[str], answers: dict[str, str]) -> None:
        for node in nodes:
            names = [t.id for t in getattr(node, "targets", []) if isinstance(t, ast.Name)]
            name = getattr(node, "name", None)
            path = [*scope, name] if name else scope
            exercise = next((ex for qual, ex in answers.items()
                             if name and qual.split(".")[-len(path):] == path[-len(qual.split(".")):]), None)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and exercise:
                body = node.body[1:] if ast.get_docstring(node) is not None else node.body
                if body:
                    spans.append((body[0].lineno, node.end_lineno, body[0].col_offset, exercise))
            elif isinstance(node, ast.ClassDef):
                # a whole class is the answer: show each method's signature only
                methods = {f"{node.name}.{m.name}": exercise for m in node.body
                           if isinstance(m, ast.FunctionDef)}
                visit(node.body, path, {**answers, **methods} if exercise else answers)
            elif any(n in answers for n in names):
                table = next(n for n in names if n in answers)
                spans.append((node.lineno, node.end_lineno, -1, answers[table]))

    visit(tree.body, [], answers)
    return spans


def hide_answers(text: str, answers: dict[str, str], where: str) -> str:
    """`text` with each answer's body (or an answer table's value) replaced by a line naming its exercise."""
    if not any(re.search(rf"\b{re.escape(q.split('.')[-1])}\b", text) for q in answers):
        return text
    try:
        tree = ast.parse(text)
    except SyntaxError as error:
        raise PluginError(f"{where}: the section holds an exercise's answer but is not whole Python "
                          f"({error}); move its markers to whole statements") from error
    lines = text.splitlines()
    for first, last, indent, exercise in sorted(_answer_spans(tree, answers), reverse=True):
        chapter = exercise.split(".")[0]
        note = f"# exercise {exercise}: you write this in chapter {chapter} (solutions page, collapsed)"
        if indent < 0:  # a table: keep `NAME =`
            head = lines[first - 1].split("=")[0].rstrip()
            lines[first - 1:last] = [f"{head} = ...  {note}"]
        else:
            lines[first - 1:last] = [" " * indent + f"...  {note}"]
    return "\n".join(lines)


API_MARKER = "<!-- api-tables -->"
SOLUTIONS_DIR = "tinyedu/exercises/solutions/"


def api_tables() -> str:
    """Markdown tables of Tensor's public methods, one per module that defines some: tinyedu/tensor_api/,
    tensor.py, and core/tensor.py for what Tensor inherits from the core."""
    from tinyedu import Tensor  # imported when a page needs it, as the pipeline picture is

    groups: dict[str, list[str]] = {}
    for name in sorted(n for n in dir(Tensor) if not n.startswith("_")):
        member = inspect.getattr_static(Tensor, name)
        function = member.__func__ if isinstance(member, (staticmethod, classmethod)) else member
        is_property = isinstance(function, property)
        function = function.fget if is_property else function
        if not callable(function):
            continue
        module = function.__module__.replace("tinyedu.", "").replace(".", "/") + ".py"
        doc = (inspect.getdoc(function) or "").split("\n\n")[0].replace("\n", " ").replace("|", "\\|")
        try:
            signature = str(inspect.signature(function))
            signature = re.sub(r"^\((?:self|cls)(?:: [^,)]+)?(?:, |(?=\)))", "(", signature)  # no self, cls
        except (TypeError, ValueError):
            signature = "(...)"
        if is_property:  # read as an attribute: x.shape
            signature = ""
        signature = re.sub(r" -> .*$", "", signature).replace("'", "").replace("|", "\\|")
        groups.setdefault(module, []).append(f"| `{name}{signature}` | {doc} |")
    parts = []
    for module in sorted(groups):
        table = "\n".join(groups[module])
        parts.append(f"### `tinyedu/{module}`\n\n| method | what it does |\n| --- | --- |\n{table}")
    return "\n\n".join(parts)


def on_page_markdown(markdown: str, page, config, files: Files) -> str:
    """Include the sections that hold an exercise's answer here, with the answer hidden, and the
    solutions' sections (a library piece as its source); write the API page's tables."""
    from tinyedu.exercises.solutions import solution_source  # imported when a page needs it

    if API_MARKER in markdown:
        markdown = markdown.replace(API_MARKER, api_tables())
    by_file: dict[str, dict[str, str]] = {}
    for exercise, (path, names) in [*EXERCISE_ANSWERS.items(), *CORE_COPIES.items()]:
        by_file.setdefault(path, {}).update({name: exercise for name in names})

    def expand(match: re.Match) -> str:
        path, section = match["path"], match["section"]  # (section None: the whole file)
        if section is not None and path.startswith(SOLUTIONS_DIR):  # a solution that is the library's piece
            return textwrap.indent(solution_source(Path(path).stem.removeprefix("chapter"), section),
                                   match["indent"])
        if not by_file.get(path):
            return match.group(0)
        text = section_text(path, section)
        hidden = hide_answers(text, by_file[path], path if section is None else f"{path}:{section}")
        return match.group(0) if hidden == text else textwrap.indent(hidden, match["indent"])

    return _SNIPPET.sub(expand, markdown)


def on_page_content(html: str, page, config, files: Files) -> str:
    if page.file.src_uri.endswith(".ipynb"):
        html = site_links(strip_nbval_markers(html), page, files)
    if PICTURE_MARKER in html:
        from tinyedu.viz.pipeline import pipeline_figure

        html = html.replace(PICTURE_MARKER, pipeline_figure())
    return html


def on_post_build(config) -> None:
    """Pages built from code after the site: the WebGPU page, webgpu/index.html (tinyedu's WGSL kernels
    run by the reader's browser; scripts/site_webgpu.py), and the live lab's WebAssembly models
    (scripts/site_wasm.py)."""
    for name, builder in (("site_webgpu", "write_page"), ("site_wasm", "build_lab")):
        spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        getattr(module, builder)(Path(config["site_dir"]))
