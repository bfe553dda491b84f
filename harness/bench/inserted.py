"""Cursors on a line being typed between two lines of an existing file, the rest of the file after it.

Every other cursor set ends its document at the cursor's line; users also
edit inside a file, where the lines after the cursor are there (the editor
sends them, and fusion reads them; the model does not see them without a
fill-in-the-middle format). A case is a real line of code typed anew where
it was: the file with that line replaced by its indentation and the first
few characters of its first word (none at all: the line just opened), and
the rest of the file after it. The right suggestion is the rest of the
line; one that writes the line after it (or the one before it) again is a
neighbour repeated (`repeats_a_neighbour`).

    >>> repeats_a_neighbour("    x = 1", "    y = 2\\n    x = 1", "\\n    x = 1\\n")
    True
"""

from __future__ import annotations

import random
import re
from pathlib import Path

from cpc.engine import Engine
from harness.bench.quality import CONTEXT_CHARS, Case, _kind
from harness.bench.sources import cases_from_lines

SUFFIX_CHARS = 20_000
"""The most of the file after the cursor's line that a case holds: what an editor sends of a long file is
all of it, and a window this long already holds every name the next screens use."""
_FIRST_WORD = re.compile(r"[\w$]*")
_COMMENT_LINE = re.compile(r"^\s*(#|//|/\*|\*|\"\"\"|''')")
MAX_LINE_CHARS = 160


def _neighbours(prefix: str, suffix: str) -> tuple[str, str]:
    """The last whole line before the cursor's and the first non-blank line after it, stripped."""
    above = prefix.rpartition("\n")[0].rpartition("\n")[2].strip()
    below = next((line.strip() for line in suffix.partition("\n")[2].split("\n") if line.strip()), "")
    return above, below


def repeats_a_neighbour(line: str, prefix: str, suffix: str) -> bool:
    """Whether ``line``, the cursor's line with a suggestion accepted, is the line above it or the next non-blank
    line below it again (blanks aside): ``prefix`` is the text before the cursor, ``suffix`` after it."""
    return bool(line.strip()) and line.strip() in _neighbours(prefix, suffix)


def draw_inserted_cases(engine: Engine, files: list[Path], count: int, seed: int) -> list[Case]:
    """``count`` lines of code typed anew where they were, with the rest of the file after them.

    The case's ``prefix`` is the file up to the cursor (at most `CONTEXT_CHARS`): the line's indentation and from
    none to all but one of its first word's characters; its ``suffix`` the end of the line (a newline) and the
    file after it (at most `SUFFIX_CHARS`); its ``line_rest`` the rest of the file's line. Lines the same as the
    one before or after them are left out: the right line would then repeat a neighbour.
    """
    def case_at(rng: random.Random, path: Path, lines: list[str], number: int) -> Case | None:
        line = lines[number].rstrip()
        body = line.lstrip()
        if not body or len(line) > MAX_LINE_CHARS or _COMMENT_LINE.search(line) or number == 0:
            return None
        indent = line[: len(line) - len(body)]
        word = _FIRST_WORD.match(body).group()
        typed = body[: rng.randrange(max(1, len(word)))]
        before = "\n".join(lines[:number] + [indent + typed])
        suffix = "\n" + "\n".join(lines[number + 1 :])[:SUFFIX_CHARS]
        if line.strip() in _neighbours(before, suffix):
            return None
        return Case(str(path), before[-CONTEXT_CHARS:], word[len(typed) :], body[len(typed) :],
                    _kind(engine, line, len(indent + typed)), before[: len(before) - len(indent + typed)], suffix=suffix)

    return cases_from_lines(files, count, seed, case_at, "lines typed between others")
