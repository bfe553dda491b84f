"""A new file's first line: typed to a random character, with nothing before it and no workspace.

The moment a user creates ``tools.py`` or ``fetch.js`` and writes its first
line. Drawn from real code (the standard library's Python, npm's
JavaScript): the first line of a file that is a statement a file starts
with (an import, a definition, an assignment; ``'use strict'`` in
JavaScript), cut at a random character after its first one. The case's
document is that prefix alone; its file name is the real file's, which the
server reads (`cpc.file_header`).

    >>> first_line("#!/usr/bin/env python3\\n'''Tools.'''\\nimport os\\nimport sys\\n", python=True)
    'import os'
"""

from __future__ import annotations

import random
import re
from pathlib import Path

from cpc.engine import Engine
from harness.bench.quality import Case, _kind

_FIRST = {
    True: re.compile(r"(import |from \S+ import |def |class |async def |[A-Za-z_]\w* = )"),
    False: re.compile(r"(const |let |var |import |export |function |async function |module\.exports|exports\.|"
                      r"'use strict'|\"use strict\")"),
}
"""How a file's first statement starts, by language (Python: True)."""
MIN_LINE = 6
_WORD = re.compile(r"[A-Za-z0-9_$]*")


def first_line(source: str, python: bool) -> str | None:
    """The first line of ``source`` that starts at column 0 with a statement `_FIRST` knows, or None."""
    for line in source.splitlines():
        if _FIRST[python].match(line) and len(line.rstrip()) >= MIN_LINE:
            return line.rstrip()
    return None


def draw_new_file_cases(engine: Engine, files: list[Path], count: int, seed: int) -> list[Case]:
    """``count`` first lines, half from Python files and half from JavaScript ones when ``files`` has both, each
    from another file, cut at a random character from the second to the last."""
    rng = random.Random(seed)
    pools = [sorted(path for path in files if (path.suffix == ".py") == python and path.suffix in (".py", ".js"))
             for python in (True, False)]
    pools = [pool for pool in pools if pool]
    if not pools:
        raise ValueError("no Python or JavaScript files match the pattern")
    cases: list[Case] = []
    seen: set[Path] = set()
    for _ in range(count * 50):
        if len(cases) == count:
            return cases
        path = rng.choice(pools[len(cases) % len(pools)])
        if path in seen:
            continue
        seen.add(path)
        line = first_line(path.read_text(encoding="utf-8", errors="replace"), path.suffix == ".py")
        if line is None:
            continue
        cut = rng.randrange(1, len(line))
        prefix, rest = line[:cut], line[cut:]
        cases.append(Case(str(path), prefix, _WORD.match(rest).group(), rest, _kind(engine, line, cut)))
    raise ValueError(f"found only {len(cases)} of {count} first lines: use more files")
