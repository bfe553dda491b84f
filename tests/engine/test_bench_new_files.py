"""`harness.bench.new_files`: a new file's first line, cut at a random character, from Python and JavaScript."""

from pathlib import Path

import pytest

from harness.bench.new_files import draw_new_file_cases, first_line

PYTHON = '''#!/usr/bin/env python3
"""Tools for the store."""

# the first statement follows the docstring and comments
from pathlib import Path
import os
'''
JAVASCRIPT = """/* eslint-disable */
'use strict'

const fs = require('fs')
"""


class Engine:  # the token kind of a cursor needs the model's tokenizer
    from cpc.tokenizer import TiktokenTokenizer
    tokenizer = TiktokenTokenizer()
    vocab = tokenizer.vocab


def test_the_first_line_is_the_first_statement_a_file_starts_with():
    assert first_line(PYTHON, python=True) == "from pathlib import Path"
    assert first_line(JAVASCRIPT, python=False) == "'use strict'"
    assert first_line('"""Only a docstring."""\n', python=True) is None


def test_a_case_is_a_first_line_cut_with_nothing_before_it(tmp_path: Path):
    for name, text in (("store.py", PYTHON), ("read.js", JAVASCRIPT), ("empty.py", "# nothing\n"),
                       ("tools.py", "import sys\n")):
        (tmp_path / name).write_text(text)
    files = sorted(tmp_path.iterdir())
    cases = draw_new_file_cases(Engine, files, 3, seed=1)
    assert draw_new_file_cases(Engine, files, 3, seed=1) == cases, "the same seed draws the same cases"
    assert [Path(case.file).suffix for case in cases] == [".py", ".js", ".py"], "the languages take turns"
    assert len({case.file for case in cases}) == 3, "a file gives one case"
    for case in cases:
        line = first_line(Path(case.file).read_text(), case.file.endswith(".py"))
        assert case.prefix + case.line_rest == line and case.prefix and case.line_rest, "cut inside the line"
        assert "\n" not in case.prefix and case.document == "", "nothing before it"
        assert case.line_rest.startswith(case.word_rest) and case.kind in ("boundary", "inside")
    with pytest.raises(ValueError, match="found only"):
        draw_new_file_cases(Engine, files, 4, seed=1)
