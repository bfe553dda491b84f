"""The shape of the code holds: no import cycle, one door from the server into the engine, the harness apart from the product, short functions, a tree that tells product from the rest.

`tools/architecture.py` reads the source (it imports nothing of it); run it
for the figures behind these checks.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

import architecture  # noqa: E402

LONGEST_FUNCTION = 60
"""Lines, docstring included: a function longer than this holds more than one step."""
LARGEST_SERVER_CLASS = 250


def test_the_import_graph_has_no_cycle():
    assert architecture.cycles(architecture.import_graph()) == []


def test_the_server_enters_the_engine_only_through_the_session():
    """``cpc`` itself is imported first for the library load order (cpc/__init__.py), nothing else of it."""
    reached = set().union(*architecture.server_reaches(architecture.import_graph()).values())
    assert reached <= {"cpc", "cpc.session"}


def test_the_engine_knows_nothing_of_the_server():
    graph = architecture.import_graph()
    assert not any(target.startswith("lsp_server") for name, targets in graph.items() if name.startswith("cpc")
                   for target in targets)


def test_the_product_never_imports_the_harness():
    """The headless editor, the benchmarks' library and llama-server for tests drive the product from outside."""
    assert architecture.product_reaches_harness(architecture.import_graph()) == {
        name: set() for name in architecture.modules() if name.split(".")[0] in architecture.PRODUCT
    }


def test_the_product_check_sees_an_import_of_the_harness():
    graph = {"cpc.cli": {"cpc.engine", "harness.bench.quality"}, "harness.bench.quality": {"cpc.engine"}}
    assert architecture.product_reaches_harness(graph) == {"cpc.cli": {"harness.bench.quality"}}


def test_neither_benchmarks_nor_the_harness_import_the_tests():
    """What the benchmarks share with the tests lives in harness/; tests/ is for the tests alone."""
    assert architecture.scripts_importing("benchmarks", "tests") == {}
    assert architecture.scripts_importing("harness", "tests") == {}


def test_the_scripts_check_sees_imports_at_any_depth():
    """The tests import the harness, some inside a function (tests/engine/test_bench_cli.py)."""
    found = architecture.scripts_importing("tests", "harness")
    assert "harness.threads" in found["tests/conftest.py"]
    assert "harness.bench.quality" in found["tests/engine/test_bench_cli.py"]


def test_only_the_product_ships():
    """The wheel's packages are named exactly: a wildcard such as ``cpc*`` would take in any package named alike."""
    import tomllib

    found = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["packages"]
    assert found["find"]["include"] == [name for package in architecture.PRODUCT for name in (package, f"{package}.*")]


def test_no_function_is_longer_than_a_screen():
    long = [f"{f.module}.{f.name} ({f.length} lines)" for f in architecture.functions(architecture.modules())
            if f.length > LONGEST_FUNCTION]
    assert long == []


def test_the_server_class_holds_no_engine_work():
    server = next(c for c in architecture.classes(architecture.modules()) if c.name == "CPCServer")
    assert server.length < LARGEST_SERVER_CLASS


def test_every_module_says_what_it_owns_in_its_first_line():
    """The first line names the algorithm or the job, not a history only the project's tracker knows."""
    import ast
    import re

    history = re.compile(r"\b(seed|issue)s? ?\d", re.IGNORECASE)
    for name, path in architecture.modules().items():
        docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
        assert docstring, f"{name} has no docstring"
        assert not history.search(docstring.splitlines()[0]), f"{name}: {docstring.splitlines()[0]}"


def test_the_tree_tells_product_tests_benchmarks_and_tools_apart():
    """Product code is in the two packages, what drives it in harness/; every test file is under tests/, every
    benchmark script in benchmarks/."""
    tracked = [path.relative_to(ROOT) for path in ROOT.rglob("*.py")
               if not {".venv", "node_modules", ".git"} & set(path.relative_to(ROOT).parts)]
    tops = {path.parts[0] for path in tracked if len(path.parts) > 1}
    assert tops <= {"cpc", "lsp_server", "harness", "tests", "benchmarks", "tools", "editors"}
    assert all(path.parts[0] == "tests" for path in tracked if path.name.startswith("test_"))
    assert all(path.parts[0] == "benchmarks" for path in tracked
               if path.name.startswith(("bench_", "profile_", "soak")) and path.parts[0] != "cpc")
