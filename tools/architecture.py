"""The shape of the code, read from its source: the import graph, its cycles, and the longest functions.

Run it from the repository root; it imports nothing of the project (it
reads the files with `ast`):

    $ python tools/architecture.py            # the figures, one block each
    $ python tools/architecture.py --dot out/imports.dot --plot out/imports.png

- ``imports``: every ``cpc``/``lsp_server``/``harness`` module and the
  project modules it imports (at any depth of the file: a function's import
  counts too, ``TYPE_CHECKING`` imports do not, since they never run);
- ``cycles``: the strongly connected groups of that graph (there should be none);
- ``server reaches into``: the ``cpc`` modules ``lsp_server`` imports;
- ``harness``: the product's imports of the harness, and the benchmarks'
  and the harness's imports of the tests (there should be none);
- ``longest functions``: functions and methods by length in lines, longest first;
- ``classes``: the largest classes, with their methods and lines.

``tests/codebase/test_architecture.py`` holds the project to the rules.
"""

from __future__ import annotations

import argparse
import ast
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PRODUCT = ("cpc", "lsp_server")
"""The packages that ship."""
PACKAGES = (*PRODUCT, "harness")
"""The packages held to the rules: the product and the harness that drives it."""


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    """Every module of `PACKAGES`, by dotted name."""
    return {module_name(path): path for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py"))}


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imported(path: Path, package: str = "") -> set[str]:
    """Every module ``path`` imports when it runs, by absolute name (``TYPE_CHECKING`` blocks left out);
    ``package``: the one relative imports start from."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The project modules ``name`` imports when it runs."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    # a module's import of its own package (``import cpc`` for the library order) is not an edge
    return {module for module in imported(path, package)
            if module in known and module != name and not name.startswith(module + ".")}


def import_graph() -> dict[str, set[str]]:
    found = modules()
    known = set(found)
    return {name: imports_of(name, path, known) for name, path in found.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                connect(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1 or node in graph.get(node, ()):
                groups.append(sorted(group))

    sys.setrecursionlimit(10_000)
    for node in sorted(graph):
        if node not in index:
            connect(node)
    return groups


def product_reaches_harness(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """Per ``cpc``/``lsp_server`` module, the ``harness`` modules it imports (there should be none)."""
    return {
        name: {target for target in targets if target.split(".")[0] == "harness"}
        for name, targets in graph.items() if name.split(".")[0] in PRODUCT
    }


def scripts_importing(folder: str, top: str) -> dict[str, set[str]]:
    """Per script under ``folder``, the modules of the package ``top`` it imports (e.g. benchmarks/ -> tests)."""
    found = {str(path.relative_to(ROOT)): {module for module in imported(path) if module.split(".")[0] == top}
             for path in sorted((ROOT / folder).rglob("*.py"))}
    return {script: modules for script, modules in found.items() if modules}


def server_reaches(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """Per ``lsp_server`` module, the ``cpc`` modules it imports."""
    return {
        name: {target for target in targets if target.split(".")[0] == "cpc"}
        for name, targets in graph.items() if name.split(".")[0] == "lsp_server"
    }


@dataclass(frozen=True)
class Span:
    """A function or a class, where it starts, and how many lines it takes (its docstring included)."""

    module: str
    name: str
    """``Class.method`` for a method, ``outer.inner`` for a nested function."""
    line: int
    length: int
    methods: int = 0
    """A class's methods."""


def functions(paths: dict[str, Path]) -> list[Span]:
    """Every function and method, nested ones included, longest first."""
    found: list[Span] = []

    def visit(node: ast.AST, module: str, scope: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = f"{scope}{child.name}"
                found.append(Span(module, name, child.lineno, child.end_lineno - child.lineno + 1))
                visit(child, module, name + ".")
            elif isinstance(child, ast.ClassDef):
                visit(child, module, f"{scope}{child.name}.")
            else:
                visit(child, module, scope)

    for module, path in paths.items():
        visit(ast.parse(path.read_text(encoding="utf-8")), module, "")
    return sorted(found, key=lambda function: -function.length)


def classes(paths: dict[str, Path]) -> list[Span]:
    found = []
    for module, path in paths.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                methods = sum(isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) for item in node.body)
                found.append(Span(module, node.name, node.lineno, node.end_lineno - node.lineno + 1, methods))
    return sorted(found, key=lambda shape: -shape.length)


def report(top: int = 10) -> str:
    graph = import_graph()
    paths = modules()
    lines = [f"modules: {len(graph)}, imports between them: {sum(map(len, graph.values()))}"]
    found = cycles(graph)
    lines.append(f"cycles: {len(found)}")
    lines += [f"  {' <-> '.join(group)}" for group in found]
    reaches = server_reaches(graph)
    reached = sorted(set().union(*reaches.values()))
    lines.append(f"server reaches into {len(reached)} cpc modules: {', '.join(reached)}")
    into_harness = sorted(f"{name} -> {target}" for name, targets in product_reaches_harness(graph).items()
                          for target in targets)
    lines.append(f"product imports of the harness: {len(into_harness)}")
    lines += [f"  {edge}" for edge in into_harness]
    for folder in ("benchmarks", "harness"):
        into_tests = scripts_importing(folder, "tests")
        lines.append(f"{folder}/ files importing tests: {len(into_tests)}")
        lines += [f"  {script}: {', '.join(sorted(modules))}" for script, modules in into_tests.items()]
    lines.append(f"longest functions (of {len(functions(paths))}):")
    lines += [f"  {f.length:4d}  {f.module}.{f.name} (line {f.line})" for f in functions(paths)[:top]]
    lines.append("largest classes:")
    lines += [f"  {c.length:4d} lines, {c.methods:2d} methods  {c.module}.{c.name}" for c in classes(paths)[:top]]
    return "\n".join(lines)


def dot(graph: dict[str, set[str]]) -> str:
    """The import graph in Graphviz's language, a cluster per package."""
    out = ["digraph imports {", "  rankdir=LR; node [shape=box, fontsize=10];"]
    for package in PACKAGES:
        out.append(f'  subgraph "cluster_{package}" {{ label="{package}";')
        out += [f'    "{name}";' for name in sorted(graph) if name.split(".")[0] == package]
        out.append("  }")
    out += [f'  "{name}" -> "{target}";' for name, targets in sorted(graph.items()) for target in sorted(targets)]
    out.append("}")
    return "\n".join(out)


def plot(graph: dict[str, set[str]], path: str) -> None:
    """The import graph as a picture: modules in layers, each below every module it imports."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    depth: dict[str, int] = {}

    def layer(name: str, seen: frozenset[str] = frozenset()) -> int:
        if name not in depth:
            below = [layer(t, seen | {name}) for t in graph[name] if t not in seen]
            depth[name] = 1 + max(below, default=-1)
        return depth[name]

    for name in graph:
        layer(name)
    rows: dict[int, list[str]] = {}
    for name in sorted(graph, key=lambda n: (n.split(".")[0] != "lsp_server", n)):
        rows.setdefault(depth[name], []).append(name)
    place = {name: (column - (len(row) - 1) / 2, level) for level, row in rows.items() for column, name in enumerate(row)}
    width = max(len(row) for row in rows.values())
    figure, axes = plt.subplots(figsize=(max(10, width * 1.6), 1.2 * len(rows) + 1))
    for name, targets in graph.items():
        for target in targets:
            (x0, y0), (x1, y1) = place[name], place[target]
            axes.annotate("", (x1, y1 + 0.15), (x0, y0 - 0.15),
                          arrowprops={"arrowstyle": "->", "color": "#999", "lw": 0.6})
    for name, (x, y) in place.items():
        colour = {"lsp_server": "#cfe3ff", "harness": "#f4e1d2"}.get(name.split(".")[0], "#e8f4d9")
        axes.text(x, y, name, ha="center", va="center", fontsize=7,
                  bbox={"boxstyle": "round", "fc": colour, "ec": "#666", "lw": 0.5})
    axes.set_xlim(-width / 2 - 0.5, width / 2 + 0.5)
    axes.set_ylim(-0.7, len(rows) - 0.3)
    axes.invert_yaxis()
    axes.axis("off")
    axes.set_title("cpc, lsp_server and harness: who imports whom (an arrow points to the module imported)")
    figure.tight_layout()
    figure.savefig(path, dpi=90)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top", type=int, default=10, help="how many functions and classes to list")
    parser.add_argument("--dot", help="write the import graph in Graphviz's language here")
    parser.add_argument("--plot", help="draw the import graph into this PNG")
    args = parser.parse_args(argv)
    print(report(args.top))
    graph = import_graph()
    if args.dot:
        Path(args.dot).write_text(dot(graph) + "\n", encoding="utf-8")
    if args.plot:
        plot(graph, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
