"""Cursors in a line being typed in an editor that closes brackets and quotes: the closers wait after the cursor.

VS Code (and Neovim with an autopairs plugin) types ``)`` as soon as ``(``
is typed, ``"`` as soon as ``"``, and types over them when the user types
them. So while a line is written from left to right, the text after the
cursor is the closers of what the line has opened so far
(`auto_closed`). A case is a cursor at a random character of a real line
where that text is not empty; the document is the file up to the cursor
and those closers, and the right answer makes the line the file's line
once accepted (`line_rest`: the rest of the file's line, closers included).

    >>> auto_closed('print("Hello, '), auto_closed("if len(s) > x["), auto_closed("x = f'{a"), auto_closed("it's(")
    ('")', ']', "'", ')')
"""

from __future__ import annotations

import random
import re
from pathlib import Path

from cpc.engine import Engine
from harness.bench.quality import CONTEXT_CHARS, Case, _kind
from harness.bench.sources import cases_from_lines

BRACKETS = {"(": ")", "[": "]", "{": "}"}
QUOTES = "\"'`"
CLOSE_BEFORE = ";:.,=}])> \t"
"""VS Code closes a pair only before one of these (or the line's end): its default ``autoCloseBefore``."""
STRING_PREFIX = re.compile(r"(?<!\w)[rbfuRBFU]{1,2}$")
"""A Python string's prefix (``f"``, ``rb'``): a quote after it opens a string, and is closed too."""
_WORD_BEFORE = re.compile(r"\w$")
_WORD_AFTER = re.compile(r"[A-Za-z0-9_$]*")
_SKIPPED = re.compile(r"^\s*(#|//|/\*|\*)|\"\"\"|'''|\\[\"'`]")
"""Comment lines, triple-quoted strings and escaped quotes: where an editor's pairs are not modelled here."""


def auto_closed(line_prefix: str) -> str:
    """The text an editor that closes pairs holds after the cursor once ``line_prefix`` is typed into an empty line.

    A bracket typed before nothing or before a closer gets its closer; a quote too, outside a string and not
    after a word (but after a string prefix); a closer typed where the same closer waits is typed over.
    """
    after = ""
    for at, char in enumerate(line_prefix):
        typed = line_prefix[:at]
        in_string = after[:1] in QUOTES and after != ""
        closes_here = after == "" or after[0] in CLOSE_BEFORE
        if after and char == after[0] and char in ")]}" + QUOTES:
            after = after[1:]
        elif char in BRACKETS and closes_here and not in_string:
            after = BRACKETS[char] + after
        elif (char in QUOTES and closes_here and not in_string
              and (not _WORD_BEFORE.search(typed) or STRING_PREFIX.search(typed))):
            after = char + after
    return after


def draw_closers_cases(engine: Engine, files: list[Path], count: int, seed: int) -> list[Case]:
    """``count`` cursors at random characters of real lines where an editor holds closers after the cursor.

    The case's ``prefix`` is the file up to the cursor (at most `CONTEXT_CHARS`), its ``suffix`` the closers,
    its ``line_rest`` the rest of the file's line, its ``kind`` whether the model's tokens of the line have a
    boundary at the cursor.
    """
    def case_at(rng: random.Random, path: Path, lines: list[str], number: int) -> Case | None:
        line = lines[number].rstrip()
        indent = len(line) - len(line.lstrip())
        if len(line) - indent < 4 or _SKIPPED.search(line):
            return None
        column = rng.randrange(indent + 1, len(line))
        closers = auto_closed(line[:column])
        if not closers:
            return None
        before = "\n".join(lines[:number] + [line[:column]])
        rest = line[column:]
        return Case(str(path), before[-CONTEXT_CHARS:], _WORD_AFTER.match(rest).group(), rest,
                    _kind(engine, line, column), before[: len(before) - column], suffix=closers)

    return cases_from_lines(files, count, seed, case_at, "cursors with closers")
