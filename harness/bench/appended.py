"""Cursors at a word's end inside an existing line, where what followed the word is missing: text appended there.

A user adds a call, an index or an attribute to a name in the middle of a
line that goes on (``x = foo|  # note`` on its way to ``x = foo(bar)  #
note``). A case is a real line with the run of non-blank characters that
follows a word and starts with a symbol (``(bar)``, ``.strip()``, ``[0]``)
left out, when blanks and more of the line come after it; the cursor is at
the word's end. The right suggestion writes the run, and the line once
accepted is the file's line (`line_rest`).

    >>> [match.group() for match in APPENDED.finditer("x = foo(bar)  # note")]
    ['(bar)']
"""

from __future__ import annotations

import random
import re
from pathlib import Path

from cpc.engine import Engine
from harness.bench.quality import CONTEXT_CHARS, Case, _kind
from harness.bench.sources import cases_from_lines

APPENDED = re.compile(r"(?<=[A-Za-z0-9_])[^\w\s]\S*(?=[ \t]+\S)")
"""A run that follows a word, starts with a symbol, and has blanks and more of its line after it."""
_COMMENT_LINE = re.compile(r"^\s*(#|//|/\*|\*)")
MAX_LINE_CHARS = 200


def draw_appended_cases(engine: Engine, files: list[Path], count: int, seed: int) -> list[Case]:
    """``count`` cursors at a word's end with the run after it (`APPENDED`) left out of the line.

    The case's ``prefix`` is the file up to the cursor (at most `CONTEXT_CHARS`), its ``suffix`` the rest of the
    line after the run, its ``line_rest`` the rest of the file's line, its ``kind`` whether the model's tokens of
    the line have a boundary at the cursor.
    """
    def case_at(rng: random.Random, path: Path, lines: list[str], number: int) -> Case | None:
        line = lines[number].rstrip()
        runs = list(APPENDED.finditer(line))
        if len(line) > MAX_LINE_CHARS or _COMMENT_LINE.search(line) or not runs:
            return None
        run = rng.choice(runs)
        before = "\n".join(lines[:number] + [line[: run.start()]])
        return Case(str(path), before[-CONTEXT_CHARS:], "", line[run.start() :], _kind(engine, line, run.start()),
                    before[: len(before) - run.start()], suffix=line[run.end() :])

    return cases_from_lines(files, count, seed, case_at, "cursors before appended text")
