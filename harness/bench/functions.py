"""Cold single-function documents: a function's signature, its docstring or comment, and its body up to a cursor.

What a user meets on a freshly opened short file, drawn from real code
(the standard library's Python and npm's JavaScript): each case's whole
document is one function, cut at a random character of one of its body
lines, with nothing around it and no other file. The cursor may fall
anywhere on the line: at its indentation (the whole line to write),
inside a word, between two symbols. The case's ``line_rest`` is the rest of
that line, its ``word_rest`` the rest of the identifier at the cursor
(empty when the cursor is not before one), its ``kind`` whether the
model's tokens of the line have a boundary at the cursor.

    >>> source = 'def area(r):\\n    "The area of a circle."\\n    pi = 3.14\\n    return pi * r * r\\n'
    >>> [(name, lines) for name, lines, _ in python_functions(source)]
    [('area', 4)]
    >>> document = python_functions(source)[0][2]
    >>> cursor_line(document, 3, 11)
    ('def area(r):\\n    "The area of a circle."\\n    pi = 3.14\\n    return ', 'pi', 'pi * r * r')
"""

from __future__ import annotations

import ast
import random
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from cpc.engine import Engine
from harness.bench.quality import Case, _kind

MIN_BODY_LINES = 2
MAX_LINES = 40
"""A function longer than this is not a short file."""
_WORD = re.compile(r"[A-Za-z0-9_$]*")
_JS_HEADER = re.compile(
    r"^(?P<indent>[ \t]*)(?P<doc>/\*\*(?:(?!\*/)[\s\S])*\*/|(?://[^\n]*\n[ \t]*)*//[^\n]*)[ \t]*\n"
    r"(?P=indent)(?:export\s+)?(?:default\s+)?(?:async\s+)?"
    r"(?:function\b[ \t]*\*?[ \t]*(?P<name>[A-Za-z_$][\w$]*)|(?P<method>[A-Za-z_$][\w$]*))[ \t]*\([^\n]*\)[ \t]*\{[ \t]*\n",
    re.M,
)
_JS_NOT_METHODS = frozenset({"if", "for", "while", "switch", "catch", "with", "return", "function"})


@dataclass(frozen=True)
class Function:
    """One function as a document of its own, and the lines of its body a cursor may fall on."""

    path: str
    name: str
    text: str
    body_lines: tuple[int, ...]
    """Line numbers (0-based, in ``text``) of the body's code lines, after the docstring."""


def python_functions(source: str) -> list[tuple[str, int, str]]:
    """``(name, lines, document)`` of each documented function in ``source``, dedented to column 0."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    lines = source.splitlines(keepends=True)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or not ast.get_docstring(node):
            continue
        if len(node.body) <= 1 or node.end_lineno - node.lineno + 1 > MAX_LINES:
            continue
        indent = node.col_offset
        text = "".join(line[indent:] if not line[:indent].strip() else line.lstrip() for line in lines[node.lineno - 1 : node.end_lineno])
        found.append((node.name, node.end_lineno - node.lineno + 1, text))
    return found


def javascript_functions(source: str) -> list[tuple[str, int, str]]:
    """``(name, lines, document)`` of each function or method after a ``/** */`` or ``//`` comment, dedented."""
    found = []
    for match in _JS_HEADER.finditer(source):
        name = match.group("name") or match.group("method")
        if name in _JS_NOT_METHODS:
            continue
        indent = match.group("indent")
        close = re.compile(rf"^{re.escape(indent)}\}}", re.M).search(source, match.end())
        if close is None:
            continue
        end = source.find("\n", close.start())
        lines = source[match.start() : end if end >= 0 else len(source)].splitlines(keepends=True)
        if len(lines) > MAX_LINES:
            continue
        text = "".join(line[len(indent):] if line.startswith(indent) else line.lstrip() for line in lines)
        found.append((name, len(lines), text if text.endswith("\n") else text + "\n"))
    return found


@cache
def functions_in(path: Path) -> list[Function]:
    """The short documented functions of a Python or JavaScript file, each with the lines a cursor may fall on."""
    source = path.read_text(encoding="utf-8", errors="replace")
    python = path.suffix == ".py"
    found = []
    for name, _, text in (python_functions if python else javascript_functions)(source):
        body = _body_lines(text, python)
        if len(body) >= MIN_BODY_LINES:
            found.append(Function(str(path), name, text, tuple(body)))
    return found


def _body_lines(text: str, python: bool) -> list[int]:
    """The code lines after the signature and docstring (comments, blank lines and a closing brace left out)."""
    lines = text.splitlines()
    if python:
        tree = ast.parse(text).body[0]
        first = tree.body[1].lineno - 1  # body[0] is the docstring
    else:
        first = next(number for number, line in enumerate(lines) if line.rstrip().endswith("{") and "(" in line) + 1
    return [
        number for number in range(first, len(lines))
        if lines[number].strip() and not lines[number].lstrip().startswith(("#", "//", "*", "/*"))
        and lines[number].strip() not in ("}", "};", "})", "});")
    ]


def cursor_line(text: str, line: int, column: int) -> tuple[str, str, str]:
    """``(prefix, word_rest, line_rest)`` with the cursor at ``column`` of line ``line`` of ``text``."""
    lines = text.splitlines(keepends=True)
    prefix = "".join(lines[:line]) + lines[line][:column]
    rest = lines[line][column:].rstrip("\n").rstrip()
    return prefix, _WORD.match(rest).group(), rest


def draw_function_cases(engine: Engine, files: list[Path], count: int, seed: int) -> list[Case]:
    """``count`` cold cursors, half in Python files and half in JavaScript ones when ``files`` has both.

    Each is a documented function of at most `MAX_LINES` lines, cut at a random character of a random
    body line (from its indentation's end to its last character: at least one character is left to
    complete). The case's document is the prefix itself: nothing of the file around the function.
    """
    rng = random.Random(seed)
    by_language: dict[bool, list[Path]] = {}
    for path in files:
        if path.suffix in (".py", ".js", ".mjs", ".cjs"):
            by_language.setdefault(path.suffix == ".py", []).append(path)
    if not by_language:
        raise ValueError("no Python or JavaScript files match the pattern")
    pools = [sorted(paths) for _, paths in sorted(by_language.items())]
    cases: list[Case] = []
    seen: set[tuple[str, str]] = set()
    for _ in range(count * 400):
        if len(cases) == count:
            return cases
        path = rng.choice(pools[len(cases) % len(pools)])
        functions = [f for f in functions_in(path) if (f.path, f.name) not in seen]
        if not functions:
            continue
        function = rng.choice(functions)
        seen.add((function.path, function.name))
        line = rng.choice(function.body_lines)
        text = function.text.splitlines(keepends=True)[line].rstrip("\n").rstrip()
        column = rng.randrange(len(text) - len(text.lstrip()), len(text))
        prefix, word_rest, line_rest = cursor_line(function.text, line, column)
        line_end = len(prefix) + len(line_rest)
        start = prefix.rfind("\n") + 1
        kind = _kind(engine, (prefix + line_rest)[start:line_end], len(prefix) - start)
        cases.append(Case(function.path, prefix, word_rest, line_rest, kind, prefix[:start]))
    raise ValueError(f"found only {len(cases)} of {count} functions: use more files")


