"""`harness.bench.functions`: cold single-function documents from Python and JavaScript, and the cursors drawn in them."""

from pathlib import Path

import pytest

from harness.bench.functions import MAX_LINES, draw_function_cases, functions_in, javascript_functions, python_functions

PYTHON = '''import os


class Store:
    def load(self, path):
        """Read the store at ``path``."""
        with open(path) as file:
            self.text = file.read()
        return len(self.text)

    def undocumented(self):
        return 1


def tiny():
    """Only a docstring and one line."""
    return 0
'''

JAVASCRIPT = '''const fs = require('fs')

/**
 * Read a file's lines.
 */
function readLines (path) {
  const text = fs.readFileSync(path, 'utf8')
  return text.split('\\n')
}

class Ledger {
  // the entries, newest first
  entries (count) {
    if (count > 0) {
      return this.list.slice(0, count)
    }
    return []
  }
}

if (process.argv.length > 2) {
  readLines(process.argv[2])
}
'''


def test_documented_functions_become_documents_of_their_own():
    found = {name: (lines, text) for name, lines, text in python_functions(PYTHON)}
    assert set(found) == {"load", "tiny"}, "an undocumented method is left out"
    lines, text = found["load"]
    assert text.startswith('def load(self, path):\n    """Read') and lines == 5, "dedented to column 0"
    found = {name: text for name, _, text in javascript_functions(JAVASCRIPT)}
    assert set(found) == {"readLines", "entries"}, "an `if (...) {` block is no function"
    assert found["entries"].startswith("// the entries, newest first\nentries (count) {\n  if (count > 0) {")
    assert found["entries"].endswith("  return []\n}\n")


def test_a_case_is_a_cut_body_line_with_nothing_around_its_function(tmp_path: Path):
    for name, text in (("store.py", PYTHON), ("ledger.js", JAVASCRIPT)):
        (tmp_path / name).write_text(text)
    files = sorted(tmp_path.iterdir())
    assert [f.name for path in files for f in functions_in(path)] == ["readLines", "entries", "load"], (
        "a function needs two body lines after its docstring")

    class Engine:  # the token kind of a cursor needs the model's tokenizer
        from cpc.tokenizer import TiktokenTokenizer
        tokenizer = TiktokenTokenizer()
        vocab = tokenizer.vocab

    cases = draw_function_cases(Engine, files, 3, seed=1)
    assert draw_function_cases(Engine, files, 3, seed=1) == cases, "the same seed draws the same cases"
    assert {Path(case.file).suffix for case in cases} == {".py", ".js"}, "both languages take turns"
    for case in cases:
        function = next(f for path in files for f in functions_in(path) if f.text.startswith(case.prefix[:20]))
        assert function.text.startswith(case.prefix + case.line_rest), "the prefix is the function up to the cursor"
        assert case.line_rest and case.line_rest == case.line_rest.rstrip() and "\n" not in case.line_rest
        assert case.prefix.count("\n") in function.body_lines
        assert case.line_rest.startswith(case.word_rest) and case.kind in ("boundary", "inside")
        assert case.document == case.prefix[: case.prefix.rfind("\n") + 1], "fusion reads the lines before the cursor"
    with pytest.raises(ValueError, match="found only"):
        draw_function_cases(Engine, files, 4, seed=1)


def test_long_functions_are_not_short_files():
    body = "".join(f"    x{k} = {k}\n" for k in range(MAX_LINES))
    assert python_functions(f'def long():\n    """Many lines."""\n{body}') == []
