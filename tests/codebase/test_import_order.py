"""Every entry point maps llama.cpp's shared libraries into the process before numpy is imported.

With a CUDA build of llama-cpp-python, a model load crashes the process
(SIGSEGV in ``llama_model_load_from_file``) when numpy was imported first
(docs/gpu.md). This machine has no GPU, but the order is what matters, and
it is checked here: each entry module, and each script with a
``__main__`` guard, is imported in a fresh interpreter that notes, at the
moment numpy is first looked for, whether ``libllama`` is already in
``/proc/self/maps`` (Linux, like CI).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

ENTRY_MODULES = ["cpc", "cpc.cli", "lsp_server", "lsp_server.__main__", "tests.conftest"]
"""The package, ``cpc`` (the CLI), ``cpc-lsp`` and the tests' conftest."""

SCRIPTS = sorted(
    str(path.relative_to(ROOT))
    for path in (*ROOT.glob("benchmarks/*.py"), *ROOT.glob("tests/**/*.py"), *ROOT.glob("editors/*.py"),
                 *ROOT.glob("tools/**/*.py"), *ROOT.glob("harness/**/*.py"))
    if 'if __name__ == "__main__":' in path.read_text(encoding="utf-8")
)
"""The benchmark, profile, soak and demo scripts and ``python -m harness.bench``: run as programs, they import what
the product does."""

CHECK = r"""
import importlib, importlib.abc, json, runpy, sys

def llama_mapped():
    with open("/proc/self/maps") as maps:
        return any("libllama" in line for line in maps)

seen = {}

class NumpyWatch(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "numpy" and name not in seen:
            seen[name] = llama_mapped()
        return None

sys.meta_path.insert(0, NumpyWatch())
target = sys.argv[1]
if target.endswith(".py"):
    runpy.run_path(target, run_name="__import_order_check__")  # the imports, not main()
else:
    importlib.import_module(target)
print(json.dumps({"numpy": "numpy" in seen, "llama_first": seen.get("numpy"), "llama_now": llama_mapped()}))
"""


def imports_in_a_fresh_interpreter(target: str) -> dict:
    done = subprocess.run([sys.executable, "-c", CHECK, target], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert done.returncode == 0, f"importing {target} failed:\n{done.stderr[-3000:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("target", ENTRY_MODULES + SCRIPTS)
def test_llama_cpp_is_loaded_before_numpy(target: str):
    seen = imports_in_a_fresh_interpreter(target)
    if seen["numpy"]:
        assert seen["llama_first"], (
            f"{target} imports numpy before llama.cpp's libraries are loaded: a CUDA build then crashes at "
            "model load. Import cpc (cpc/__init__.py loads llama_cpp) before anything that imports numpy."
        )


def test_the_check_sees_numpy_first():
    """The check itself can fail: numpy alone, then llama_cpp, is caught."""
    done = subprocess.run([sys.executable, "-c", CHECK.replace("target = sys.argv[1]", "import numpy\ntarget = sys.argv[1]"),
                           "llama_cpp"], capture_output=True, text=True, timeout=120)
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen == {"numpy": True, "llama_first": False, "llama_now": True}


def test_the_scripts_are_found():
    assert {"benchmarks/bench_lsp.py", "editors/demo.py", "harness/bench/__main__.py"} <= set(SCRIPTS)
