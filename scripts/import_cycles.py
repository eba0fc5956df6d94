"""Print the import circles inside a package: module-level AND function-level imports, read with ast.

    python scripts/import_cycles.py            # circles in tinyedu/
    python scripts/import_cycles.py --edges    # also every import edge, "a -> b (line, function-level)"

An import inside a function still makes the two modules depend on each other; it only hides the
circle from Python's import machinery. So both kinds count here (imports under `if TYPE_CHECKING:`
count too: a reader still meets the circle). A circle is a strongly connected component of the
graph with more than one module; its members are printed with the edges that close it.
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(node: ast.AST, current: str, is_package: bool, known: set[str],
                     reexports: dict[str, dict[str, str]]) -> list[str]:
    """The package's modules an import statement names: `from a import b` names a.b if that is a module,
    else the module a's __init__ took b from (`from tinyedu import Tensor` names tinyedu.tensor), else a."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name in known]
    assert isinstance(node, ast.ImportFrom)
    base = node.module or ""
    if node.level:  # relative: resolve against the current package
        package = current.split(".") if is_package else current.split(".")[:-1]
        package = package[:len(package) - node.level + 1]
        base = ".".join(package + ([base] if base else []))
    found = []
    for alias in node.names:
        full = f"{base}.{alias.name}"
        found.append(full if full in known else reexports.get(base, {}).get(alias.name, base))
    return [m for m in dict.fromkeys(found) if m in known]


def reexported_names(files: dict[str, Path], known: set[str]) -> dict[str, dict[str, str]]:
    """For each package, the names its __init__.py imports from a module of the package: name -> module."""
    names: dict[str, dict[str, str]] = {}
    for package, path in files.items():
        if path.name != "__init__.py":
            continue
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ImportFrom) and node.module in known and not node.level:
                names.setdefault(package, {}).update({a.asname or a.name: node.module for a in node.names})
    return names


def import_edges(root: Path) -> list[tuple[str, str, int, bool]]:
    """(importer, imported, line, inside a function) for every import of a module of the package."""
    files = {module_name(p, root): p for p in root.rglob("*.py")}
    known = set(files)
    reexports = reexported_names(files, known)
    edges = []
    for name, path in files.items():
        tree = ast.parse(path.read_text(), str(path))
        functions = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        inner = {id(n) for f in functions for n in ast.walk(f)}
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for target in imported_modules(node, name, path.name == "__init__.py", known, reexports):
                    if target != name and not name.startswith(target + "."):  # a package's own parents
                        edges.append((name, target, node.lineno, id(node) in inner))
    return edges


def cycles(edges: list[tuple[str, str, int, bool]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    graph: dict[str, set[str]] = {}
    for a, b, _, _ in edges:
        graph.setdefault(a, set()).add(b)
        graph.setdefault(b, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph[child]))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return sorted(found)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("package", nargs="?", default="tinyedu")
    parser.add_argument("--edges", action="store_true", help="print every import edge too")
    args = parser.parse_args()
    edges = import_edges(Path(args.package).resolve())
    if args.edges:
        for a, b, line, inner in sorted(edges):
            print(f"{a} -> {b} ({line}{', function-level' if inner else ''})")
    found = cycles(edges)
    for component in found:
        members = set(component)
        print(f"circle of {len(component)}: {', '.join(component)}")
        for a, b, line, inner in sorted(edges):
            if a in members and b in members:
                print(f"    {a} -> {b} (line {line}{', function-level' if inner else ''})")
    print(f"{len(found)} circle(s)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
