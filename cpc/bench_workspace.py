"""``cpc bench --workspace``: does the rest of the repository help? Completion on repository-level cases.

A case is a cursor in a file of a *source directory* (a standard-library
package such as ``email/``, or a ``lib/`` of an npm package), strictly
inside an identifier. Two categories, half the cases each:

- ``cross_file``: a name (not a keyword or builtin) that occurs in another
  file of the directory and nowhere before the cursor in its own file; the
  cursor sits 2 characters into it. Only the rest of the repository can
  tell the model this name: this is where workspace fusion should help.
- ``any``: any identifier, the cursor anywhere strictly inside it (the
  distribution of `cpc.bench`).

What a case's request may know (its *workspace*): the other files of the
directory and the cursor's file without the cursor's line (an open
document). Every mode completes every case from cold caches, single-line,
prefix only:

- ``cpc``, ``naive``, ``heal``: `cpc.generate` as it is;
- ``+fusion``: the same, with `cpc.fusion` scores of the workspace in the
  decoder (``WorkspaceModel.fusion(current=...)``, weights from
  ``--fusion-weights``);
- ``+context``: the peers' way (Continue, llama.vim, Tabby): the 30-line
  window of the other files whose identifiers are most like (Jaccard) those
  of the last 15 lines before the cursor, pasted before the prefix as a
  comment block with its path; the prefix loses its oldest lines so that
  both fit the engine's prompt window.

Metrics per mode, per category and overall: `cpc.bench`'s ``word_exact`` and
``line_exact``; ``next_identifier`` (the identifier at the cursor, completed,
is the true one); ``identifier_exact`` (the identifiers of the completed
line are the true line's); ``undefined_rate`` (of the names a completion
writes in code, the share that exist nowhere in the workspace, the file, the
language's builtins and keywords, or the modules the file imports, read as
source and never executed); latency (request plus what a mode prepares:
the fusion object, the context retrieval) and model calls.

Source-directory sets: ``dev`` (standard-library packages a–m and npm's own
``node_modules/*/lib``: tune here) and ``check`` (standard-library packages
n–z: never tune on them), or a glob of directories.

This module owns the directory sets, the case drawing, the workspace of a
case, the identifier metrics, the context baseline and the report; the cold
request, the word/line scores, the summaries, the table and the bars are
`cpc.bench`'s.
"""

from __future__ import annotations

import ast
import builtins
import glob
import importlib
import importlib.util
import json
import keyword
import random
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from cpc import bench
from cpc.fusion import FusionWeights, WorkspaceModel
from cpc.generate import MODES, Options

if TYPE_CHECKING:
    from cpc.engine import Engine

CATEGORIES = ("cross_file", "any")
WORKSPACES = ("dev", "check")
DEFAULT_MODES = ("cpc", "cpc+fusion", "cpc+context", "naive+fusion")
EXTRAS = ("fusion", "context")
RATES = ("next_identifier", "identifier_exact", "word_exact", "line_exact")
METRICS = (*RATES, "undefined_rate")

CONVENTIONS = frozenset({"self", "cls"})
"""Names every file uses by convention, not the project's own: never ``cross_file`` cases."""
CROSS_FILE_TYPED = 2
"""Characters of a ``cross_file`` name typed before the cursor (the issue's measurement)."""
MIN_NAME = 4
"""Drawn identifiers have at least this many characters (as in `cpc.bench`)."""
MAX_FILE_BYTES = 256_000
"""Larger files are left out of a directory (generated tables, bundles)."""
MAX_DIRECTORY_BYTES = 1_000_000
"""A directory's files, in path order, up to this many bytes."""
MAX_LINE_CHARS = 400
"""No cursor on a longer line (minified code)."""

WINDOW_LINES = 30
WINDOW_STRIDE = 15
QUERY_LINES = 15
CONTEXT_MARGIN_TOKENS = 8
"""Room left for tokens that merge where the context block meets the prefix."""

TEST_DIRS = re.compile(r"^(tests?|idle_test|__tests__|__pycache__|node_modules)$|^test_")
TEST_FILES = re.compile(r"^test_|_test\.|\.(test|spec)\.")


# ---------------------------------------------------------------- languages


@dataclass(frozen=True)
class Language:
    name: str
    extensions: tuple[str, ...]
    names: re.Pattern
    """Any identifier (whole words)."""
    word_chars: re.Pattern
    """The identifier characters at the start of a completion."""
    comment: str
    keywords: frozenset[str]
    non_code: re.Pattern
    """Comments and string literals (approximately: no lexer)."""

    def names_in(self, text: str) -> list[str]:
        return self.names.findall(text)

    def code_only(self, text: str) -> str:
        """``text`` with comments and strings blanked out (newlines kept): offsets stay the same."""
        return self.non_code.sub(lambda m: re.sub(r"[^\n]", " ", m.group()), text)


JS_KEYWORDS = frozenset(
    """break case catch class const continue debugger default delete do else export extends false finally for
    function if import in instanceof new null return super switch this throw true try typeof var void while with
    yield let static enum await implements package protected interface private public async of get set from as
    undefined arguments require module exports __dirname __filename""".split()
)

PYTHON = Language(
    "python",
    (".py",),
    re.compile(r"(?<![A-Za-z0-9_])[A-Za-z_][A-Za-z0-9_]*"),
    re.compile(r"[A-Za-z0-9_]*"),
    "#",
    frozenset(keyword.kwlist + keyword.softkwlist),
    re.compile(
        r"""(?s)[rRbBuUfF]{0,2}(\"\"\"|\'\'\')(?:.*?)\1|[rRbBuUfF]{0,2}"(?:\\.|[^"\\\n])*"|[rRbBuUfF]{0,2}'(?:\\.|[^'\\\n])*'|#[^\n]*"""
    ),
)
JAVASCRIPT = Language(
    "javascript",
    (".js", ".mjs", ".cjs"),
    re.compile(r"(?<![A-Za-z0-9_$])[A-Za-z_$][A-Za-z0-9_$]*"),
    re.compile(r"[A-Za-z0-9_$]*"),
    "//",
    JS_KEYWORDS,
    re.compile(r"""(?s)/\*.*?\*/|//[^\n]*|`(?:\\.|[^`\\])*`|"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'"""),
)
LANGUAGES = (PYTHON, JAVASCRIPT)


@cache
def builtin_names(language: Language) -> frozenset[str]:
    """Names every file of ``language`` may use: keywords and builtins.

    Python: ``dir(builtins)`` and the attributes of the builtin types
    (``str.join``, ``dict.items``...). JavaScript: the globals, the members
    of their prototypes and the exports of Node's builtin modules, as this
    machine's ``node`` lists them (the keywords alone without ``node``).
    """
    if language is PYTHON:
        names = set(dir(builtins))
        for value in vars(builtins).values():
            if isinstance(value, type):
                names.update(dir(value))
        return frozenset(names) | language.keywords
    return frozenset(_node_globals()) | language.keywords


_NODE_GLOBALS = r"""
const names = new Set();
const add = (o) => { for (let p = o; p; p = Object.getPrototypeOf(p)) { try { for (const k of Object.getOwnPropertyNames(p)) names.add(k) } catch {} } };
const deep = (o) => { add(o); try { for (const k of Object.getOwnPropertyNames(o)) { let v; try { v = o[k] } catch { continue }
  if (typeof v === 'function') { add(v); if (v.prototype) add(v.prototype) } else if (v && typeof v === 'object') add(v) } } catch {} };
deep(globalThis);
for (const m of require('module').builtinModules) { try { deep(require(m)) } catch {} }
process.stdout.write(JSON.stringify([...names]));
"""


def _node_globals() -> list[str]:
    node = shutil.which("node")
    if node is None:
        return []
    try:
        done = subprocess.run([node, "--no-warnings", "-e", _NODE_GLOBALS], capture_output=True, text=True, timeout=60)
        return json.loads(done.stdout) if done.returncode == 0 else []
    except (OSError, subprocess.SubprocessError, ValueError):
        return []


# ---------------------------------------------------------------- source directories


@dataclass
class Directory:
    """A source directory: its files' texts and which files use which names."""

    path: Path
    label: str
    language: Language
    texts: dict[str, str]
    """File path -> text, in path order."""
    names: dict[str, frozenset[str]] = field(init=False)
    files_with: Counter = field(init=False)
    """Name -> how many files of the directory hold it (anywhere)."""
    code: dict[str, str] = field(init=False)
    """File path -> text with comments and strings blanked out."""
    code_files_with: Counter = field(init=False)
    """Name -> how many files of the directory use it in code."""

    def __post_init__(self) -> None:
        self.names = {path: frozenset(self.language.names_in(text)) for path, text in self.texts.items()}
        self.files_with = Counter(name for names in self.names.values() for name in names)
        self.code = {path: self.language.code_only(text) for path, text in self.texts.items()}
        self._code_names = {path: frozenset(self.language.names_in(text)) for path, text in self.code.items()}
        self.code_files_with = Counter(name for names in self._code_names.values() for name in names)

    def in_other_files(self, path: str, name: str) -> bool:
        """Another file holds ``name`` (in code, a comment or a string)."""
        return self.files_with[name] - (name in self.names[path]) > 0

    def in_other_files_code(self, path: str, name: str) -> bool:
        """Another file uses ``name`` in its code."""
        return self.code_files_with[name] - (name in self._code_names[path]) > 0

    def shown_path(self, path: str) -> str:
        return f"{self.label}/{Path(path).relative_to(self.path).as_posix()}"


def source_dirs(workspace: str) -> list[Directory]:
    """``dev``, ``check`` or a glob of directories (``<stdlib>`` is this interpreter's standard library)."""
    if workspace == "dev":
        paths = _stdlib_packages("a", "m") + _npm_libs()
    elif workspace == "check":
        paths = _stdlib_packages("n", "z")
    else:
        pattern = workspace.replace(bench.STDLIB, bench.stdlib_dir())
        paths = sorted(Path(name) for name in glob.glob(pattern, recursive=True) if Path(name).is_dir())
    dirs = [d for d in (load_directory(path) for path in paths) if d is not None]
    if not dirs:
        raise ValueError(f"no source directory with two files or more matches {workspace!r}")
    return dirs


def _stdlib_packages(first: str, last: str) -> list[Path]:
    """Standard-library packages whose names start with ``first``..``last`` (generated data aside)."""
    root = Path(bench.stdlib_dir())
    skipped = {"encodings", "pydoc_data", "site-packages", "test"}  # codec tables and topics are generated
    return sorted(
        child
        for child in root.iterdir()
        if child.is_dir() and (child / "__init__.py").exists() and child.name not in skipped
        and first <= child.name[0].lower() <= last
    )


@cache
def npm_root() -> Path | None:
    """Where npm keeps global packages (``npm root -g``), or None without npm."""
    npm = shutil.which("npm")
    if npm is None:
        return None
    try:
        done = subprocess.run([npm, "root", "-g"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    root = Path(done.stdout.strip()) if done.returncode == 0 else None
    return root if root and root.is_dir() else None


def _npm_libs() -> list[Path]:
    """``lib/`` of the global npm packages and of npm's own ``node_modules`` (scoped ones too)."""
    root = npm_root()
    if root is None:
        return []
    found = set()
    for pattern in ("*/lib", "*/node_modules/*/lib", "*/node_modules/@*/*/lib"):
        found.update(Path(name) for name in glob.glob(str(root / pattern)) if Path(name).is_dir())
    return sorted(found)


def load_directory(path: Path) -> Directory | None:
    """A directory's source files (tests, bundles and oversized files left out), or None with fewer than two."""
    files = [
        file for file in sorted(path.rglob("*"))
        if file.is_file() and not TEST_FILES.search(file.name)
        and not any(TEST_DIRS.search(part) for part in file.relative_to(path).parts[:-1])
    ]
    by_language = Counter(lang for file in files for lang in LANGUAGES if file.suffix in lang.extensions)
    if not by_language:
        return None
    language = by_language.most_common(1)[0][0]
    texts: dict[str, str] = {}
    total = 0
    for file in files:
        if file.suffix not in language.extensions or file.stat().st_size > MAX_FILE_BYTES:
            continue
        text = file.read_text(encoding="utf-8", errors="replace")
        lines = text.count("\n") + 1
        if "\0" in text or not text.strip() or len(text) / lines > 200:
            continue
        if total + len(text) > MAX_DIRECTORY_BYTES:
            break
        total += len(text)
        texts[str(file)] = text
    return Directory(path, _label(path), language, texts) if len(texts) >= 2 else None


def _label(path: Path) -> str:
    for root in (Path(bench.stdlib_dir()), npm_root()):
        if root is not None and path.is_relative_to(root) and path != root:
            return path.relative_to(root).as_posix()
    return str(path)


# ---------------------------------------------------------------- cases


@dataclass(frozen=True)
class WorkspaceCase:
    directory: str
    """The directory's label."""
    file: str
    category: str
    identifier: str
    """The whole identifier the cursor is in."""
    line_number: int
    """The cursor's line, from 0."""
    typed: str
    """The identifier's characters before the cursor."""
    line_start: str
    """The cursor line's text before the cursor."""
    prefix: str
    """The text before the cursor (at most `cpc.bench.CONTEXT_CHARS`)."""
    word_rest: str
    line_rest: str


def draw_cases(dirs: list[Directory], count: int, seed: int) -> list[WorkspaceCase]:
    """``count`` cursors, half ``cross_file`` and half ``any``.

    A language is drawn first (each present one equally often), then a
    directory of it, a file, an identifier.
    """
    rng = random.Random(seed)
    wanted = {"cross_file": count // 2, "any": count - count // 2}
    by_language: dict[str, list[Directory]] = {}
    for directory in dirs:
        by_language.setdefault(directory.language.name, []).append(directory)
    languages = sorted(by_language)
    cases: list[WorkspaceCase] = []
    seen: set[tuple[str, int]] = set()
    words_of: dict[tuple[str, str], list[re.Match]] = {}
    for _ in range(count * 200):
        if not any(wanted.values()):
            return cases
        category = rng.choice([c for c in CATEGORIES if wanted[c]])
        directory = rng.choice(by_language[rng.choice(languages)])
        path = rng.choice(list(directory.texts))
        source = directory.texts[path]
        if (category, path) not in words_of:
            find = cross_file_names if category == "cross_file" else drawable_names
            words_of[category, path] = find(directory, path)
        words = words_of[category, path]
        if not words:
            continue
        word = rng.choice(words)
        if category == "cross_file":
            cursor = word.start() + CROSS_FILE_TYPED
        else:
            cursor = rng.randrange(word.start() + 1, word.end())
        line_begin = source.rfind("\n", 0, cursor) + 1
        if (path, cursor) in seen or len(source[line_begin:].partition("\n")[0]) > MAX_LINE_CHARS:
            continue
        seen.add((path, cursor))
        wanted[category] -= 1
        prefix, word_rest, line_rest = bench.around_cursor(source, cursor, word.end())
        cases.append(
            WorkspaceCase(
                directory=directory.label,
                file=path,
                category=category,
                identifier=word.group(),
                line_number=source.count("\n", 0, cursor),
                typed=source[word.start() : cursor],
                line_start=source[line_begin:cursor],
                prefix=prefix,
                word_rest=word_rest,
                line_rest=line_rest,
            )
        )
    raise ValueError(f"found only {len(cases)} of {count} cases: use more directories")


def drawable_names(directory: Directory, path: str) -> list[re.Match]:
    """Identifiers of the file at least `MIN_NAME` characters long."""
    return [m for m in directory.language.names.finditer(directory.texts[path]) if len(m.group()) >= MIN_NAME]


def cross_file_names(directory: Directory, path: str) -> list[re.Match]:
    """Names in code at their first occurrence in the file (not even in a comment or a string before)
    that the code of another file of the directory uses (keywords and builtins aside)."""
    known = builtin_names(directory.language) | CONVENTIONS
    names = directory.language.names
    first: dict[str, int] = {}
    for match in names.finditer(directory.texts[path]):
        first.setdefault(match.group(), match.start())
    return [
        match
        for match in names.finditer(directory.code[path])
        if first.get(match.group()) == match.start() and len(match.group()) >= MIN_NAME
        and match.group() not in known and directory.in_other_files_code(path, match.group())
    ]


def current_document(source: str, line_number: int) -> str:
    """The cursor's file without the cursor's line."""
    lines = source.split("\n")
    del lines[line_number]
    return "\n".join(lines)


# ---------------------------------------------------------------- metrics


@dataclass(frozen=True)
class WorkspaceOutcome:
    category: str
    next_identifier: bool
    identifier_exact: bool
    word_exact: bool
    line_exact: bool
    names: int
    """Names the completion wrote in code (the identifier at the cursor, completed, and those after it)."""
    undefined: list[str]
    """Those of them that exist nowhere the request could know of."""
    ms: float
    """The request, plus `prepare_ms`."""
    prepare_ms: float
    """What the mode prepared before the request: the fusion object, or the context retrieval."""
    lm_calls: int
    text: str
    words_in_prose: int = 0
    """Words the completion wrote in comments and strings (not names, so not counted in ``names``)."""


def produced_names(case: WorkspaceCase, text: str, directory: Directory) -> tuple[list[str], int]:
    """The names a completion writes in code: those of the typed part of the identifier plus the completion,
    outside comments and strings; and how many words it writes in those (none for an empty completion).

    A word in a docstring or a comment is no name, so it is not counted as one (``undefined_rate``): the
    completion is read in its file, followed by the lines after the cursor's, so that a string it is inside
    of closes where the file closes it.
    """
    if not text:
        return [], 0
    language = directory.language
    source = directory.texts[case.file]
    lines = source.split("\n")
    begin = sum(len(line) + 1 for line in lines[: case.line_number]) + len(case.line_start) - len(case.typed)
    written = case.typed + text
    after = "\n" + "\n".join(lines[case.line_number + 1 :])
    code = language.code_only(source[:begin] + written + after)[begin : begin + len(written)]
    names = language.names_in(code)
    return names, len(language.names_in(written)) - len(names)


def next_identifier(case: WorkspaceCase, text: str, language: Language) -> bool:
    """The first identifier of the typed part + the completion (the identifier at the cursor) is the true one."""
    found = language.names.search(case.typed + text)
    return found is not None and found.group() == case.identifier


def identifier_exact(case: WorkspaceCase, text: str, language: Language) -> bool:
    """The completed line has exactly the true line's identifiers, in order."""
    line = case.line_start + text.rstrip()
    return language.names_in(line) == language.names_in(case.line_start + case.line_rest)


class KnownNames:
    """Whether a name exists somewhere a request could know of (for ``undefined_rate``)."""

    def __init__(self, directory: Directory, case: WorkspaceCase) -> None:
        language = directory.language
        source = directory.texts[case.file]
        self.directory = directory
        self.file = case.file
        typed_start = len(case.line_start) - len(case.typed)
        self.local = frozenset(language.names_in(current_document(source, case.line_number)))
        self.local |= frozenset(language.names_in(case.line_start[:typed_start]))
        self.base = builtin_names(language)
        self.imported = imported_names(source, case.file, directory)

    def __contains__(self, name: str) -> bool:
        return (
            name in self.local or name in self.base or name in self.imported
            or self.directory.in_other_files(self.file, name)
        )


def imported_names(source: str, path: str, directory: Directory) -> frozenset[str]:
    """Identifiers of the modules a file imports, read from their source (never executed; C modules of
    the standard library and Node's builtin modules are listed instead)."""
    if directory.language is PYTHON:
        return frozenset().union(*(_python_module_names(module) for module in _python_imports(source)))
    names: set[str] = set()
    for target in re.findall(r"""(?:require\s*\(\s*|\bfrom\s+|\bimport\s+)['"]([^'"]+)['"]""", source):
        names |= _js_module_names(target, str(Path(path).parent))
    return frozenset(names)


def _python_imports(source: str) -> set[str]:
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return set(re.findall(r"^\s*(?:from|import)\s+([A-Za-z_][\w.]*)", source, flags=re.MULTILINE))
    modules: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules.add(node.module)
            modules.update(f"{node.module}.{alias.name}" for alias in node.names if alias.name != "*")
    return modules


C_MODULES_NOT_IMPORTED = frozenset({"readline", "_tkinter", "_curses", "_curses_panel", "antigravity", "this"})


@cache
def _python_module_names(module: str, depth: int = 0) -> frozenset[str]:
    """Identifiers of a module's source, found without importing it (parents included); a C module of
    the interpreter (no source) is imported and listed with ``dir``."""
    parts = module.split(".")
    try:
        spec = importlib.util.find_spec(parts[0])
    except (ImportError, ValueError):
        return frozenset()
    if spec is None:
        return frozenset()
    if len(parts) == 1 and spec.origin and not spec.origin.endswith(".py"):
        if parts[0] in C_MODULES_NOT_IMPORTED or not (
            spec.origin == "built-in" or spec.origin.startswith(bench.stdlib_dir())
        ):
            return frozenset()
        try:
            return frozenset(dir(importlib.import_module(parts[0])))
        except Exception:  # noqa: BLE001 - any failure to list a C module just lists nothing
            return frozenset()
    source = Path(spec.origin) if spec.origin and spec.origin.endswith(".py") else None
    locations = list(spec.submodule_search_locations or [])
    for part in parts[1:]:
        source = None
        for location in locations:
            candidates = (Path(location) / f"{part}.py", Path(location) / part / "__init__.py")
            source = next((c for c in candidates if c.is_file()), None)
            if source is not None:
                locations = [str(source.parent)] if source.name == "__init__.py" else []
                break
        if source is None:
            return frozenset()
    if source is None:
        return frozenset()
    text = source.read_text(encoding="utf-8", errors="replace")
    names = set(PYTHON.names_in(text))
    if depth < 2:
        for star in re.findall(r"^from\s+([A-Za-z_][\w.]*)\s+import\s+\*", text, flags=re.MULTILINE):
            names |= _python_module_names(star, depth + 1)
    return frozenset(names)


@cache
def _js_module_names(target: str, folder: str) -> frozenset[str]:
    """Identifiers of a required module's files: a relative path, or a package in a ``node_modules``
    above ``folder`` (all its source files up to `MAX_DIRECTORY_BYTES`)."""
    if target.startswith("."):
        base = Path(folder) / target
        files = [f for f in (base, base.with_suffix(".js"), base / "index.js") if f.is_file()]
    else:
        name = "/".join(target.split("/")[:2] if target.startswith("@") else target.split("/")[:1])
        package = next(
            (p / "node_modules" / name for p in (Path(folder), *Path(folder).parents)
             if (p / "node_modules" / name).is_dir()),
            None,
        )
        files = sorted(f for f in package.rglob("*.js") if "node_modules" not in f.relative_to(package).parts) if package else []
    names: set[str] = set()
    total = 0
    for file in files[:200]:
        text = file.read_text(encoding="utf-8", errors="replace")
        total += len(text)
        if total > MAX_DIRECTORY_BYTES:
            break
        names.update(JAVASCRIPT.names_in(text))
    return frozenset(names)


def score(case: WorkspaceCase, directory: Directory, text: str) -> dict:
    """The quality fields of an outcome for a completion ``text``."""
    language = directory.language
    produced, in_prose = produced_names(case, text, directory)
    known = KnownNames(directory, case)
    return {
        "next_identifier": next_identifier(case, text, language),
        "identifier_exact": identifier_exact(case, text, language),
        "word_exact": bench.word_exact(text, case.word_rest, language.word_chars),
        "line_exact": bench.line_exact(text, case.line_rest),
        "names": len(produced),
        "undefined": [name for name in produced if name not in known],
        "words_in_prose": in_prose,
    }


def summarise(outcomes: list[WorkspaceOutcome]) -> dict:
    """`cpc.bench.summarise` with the identifier rates, plus the undefined-name rate over all names produced."""
    row = bench.summarise(outcomes, rates=RATES)
    if outcomes:
        names = sum(o.names for o in outcomes)
        row["undefined_rate"] = round(sum(len(o.undefined) for o in outcomes) / names, 4) if names else 0.0
        row["names"] = names
    return row


# ---------------------------------------------------------------- the context baseline


@dataclass(frozen=True)
class Chunk:
    """A window of a workspace file."""

    path: str
    """The path shown in the prompt."""
    first_line: int
    text: str
    names: frozenset[str]


def chunks_of(path: str, text: str, language: Language) -> list[Chunk]:
    """`WINDOW_LINES`-line windows every `WINDOW_STRIDE` lines (the last one reaching the end)."""
    lines = text.split("\n")
    starts = list(range(0, max(1, len(lines) - WINDOW_LINES + WINDOW_STRIDE), WINDOW_STRIDE))
    chunks = []
    for start in starts:
        body = "\n".join(lines[start : start + WINDOW_LINES])
        if body.strip():
            chunks.append(Chunk(path, start, body, frozenset(language.names_in(body))))
    return chunks


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 0.0


def best_chunk(chunks: Iterable[Chunk], prefix: str, language: Language) -> Chunk | None:
    """The chunk most like the last `QUERY_LINES` lines before the cursor (the first of equals), or None
    when none shares a name with them."""
    query = frozenset(language.names_in("\n".join(prefix.split("\n")[-QUERY_LINES:])))
    best, best_score = None, 0.0
    for chunk in chunks:
        similarity = jaccard(query, chunk.names)
        if similarity > best_score:
            best, best_score = chunk, similarity
    return best


def context_block(chunk: Chunk, comment: str) -> str:
    """The chunk as a comment block with its path, ending with a newline."""
    lines = [f"{comment} Path: {chunk.path}"] + [f"{comment} {line}".rstrip() for line in chunk.text.split("\n")]
    return "\n".join(lines) + "\n"


def with_context(tokenizer, prefix: str, chunk: Chunk | None, comment: str, max_tokens: int) -> str:
    """The prompt text: the chunk's comment block, then the prefix without its oldest lines so that
    both fit in ``max_tokens`` tokens of ``tokenizer`` (the block gets at most half)."""
    if chunk is None:
        return prefix

    def count(text: str) -> int:
        return len(tokenizer.encode(text.encode("utf-8")))

    lines = context_block(chunk, comment).split("\n")[:-1]
    while len(lines) > 1 and count("\n".join(lines) + "\n") > max_tokens // 2:
        lines.pop()
    block = "\n".join(lines) + "\n"
    budget = max_tokens - count(block) - CONTEXT_MARGIN_TOKENS
    prefix = _last_tokens(tokenizer, prefix, budget)
    while count(block + prefix) > max_tokens and "\n" in prefix:
        prefix = prefix.partition("\n")[2]
    return block + prefix


def _last_tokens(tokenizer, text: str, budget: int) -> str:
    """The end of ``text`` that its last ``budget`` tokens spell, from the next line start on (or from the
    first whole character when that is the only line)."""
    data = text.encode("utf-8")
    tokens = tokenizer.encode(data)
    if len(tokens) <= budget:
        return text
    pieces = tokenizer.vocab.pieces
    kept = sum(len(pieces[t]) for t in tokens[len(tokens) - max(0, budget) :])
    tail = data[len(data) - kept :].decode("utf-8", "ignore")
    newline = tail.find("\n")
    return tail[newline + 1 :] if 0 <= newline < len(tail) - 1 else tail


# ---------------------------------------------------------------- modes and the run


def parse_mode(mode: str) -> tuple[str, bool, bool]:
    """``"cpc+fusion"`` -> ``("cpc", True, False)``: the generation mode, fusion, prompt context."""
    base, *extras = mode.split("+")
    if base not in MODES or any(extra not in EXTRAS for extra in extras) or len(set(extras)) != len(extras):
        raise ValueError(
            f"unknown mode {mode!r}: one of {', '.join(MODES)}, optionally followed by +fusion and/or +context"
        )
    return base, "fusion" in extras, "context" in extras


class Workspaces:
    """The `cpc.fusion.WorkspaceModel` of one directory at a time, built once from all its files; the
    cursor's file is withheld from it and served as an open document (without the cursor's line)."""

    def __init__(self, engine: Engine, progress: Callable[[str, float], None]) -> None:
        self.engine = engine
        self.progress = progress
        self.directory: Directory | None = None
        self.model = None
        self.withheld: str | None = None
        self.stats: dict[str, dict] = {}

    def fusion(self, directory: Directory, case: WorkspaceCase, weights: FusionWeights) -> tuple[object, float]:
        """The fusion object for ``case`` and how long making it took (ms)."""
        if directory is not self.directory:
            self.directory, self.model, self.withheld = directory, None, None
            started = time.perf_counter()
            model = WorkspaceModel(self.engine)
            for number, (path, text) in enumerate(directory.texts.items()):
                model.add_file(path, text)
                self.progress(f"indexing {directory.label}", (number + 1) / len(directory.texts))
            model.commit()
            self.stats[directory.label] = {"build_ms": round((time.perf_counter() - started) * 1000, 1)} | model.stats()
            self.model = model
        if self.withheld != case.file:
            if self.withheld is not None:
                self.model.close_document(_document_key(self.withheld))
                self.model.add_file(self.withheld, directory.texts[self.withheld])
            self.model.remove_file(case.file)
            self.model.commit()
            self.withheld = case.file
        # The document is the file without the cursor's line already: no line of it is left out.
        self.model.update_document(
            _document_key(case.file), current_document(directory.texts[case.file], case.line_number)
        )
        started = time.perf_counter()
        fusion = self.model.fusion(current=_document_key(case.file), weights=weights, cursor_line=None)
        return fusion, (time.perf_counter() - started) * 1000


def _document_key(path: str) -> str:
    return Path(path).as_uri()


def complete_case(
    engine: Engine, directory: Directory, case: WorkspaceCase, mode: str, max_tokens: int,
    workspaces: Workspaces | None, weights: FusionWeights | None, chunks: dict[str, list[Chunk]],
) -> WorkspaceOutcome:
    """One cold request of ``mode`` for ``case``, scored."""
    base, fused, context = parse_mode(mode)
    fusion, prepare_ms = None, 0.0
    prefix = case.prefix
    if context:
        started = time.perf_counter()
        others = (chunk for path, own in chunks.items() if path != case.file for chunk in own)
        chunk = best_chunk(others, case.prefix, directory.language)
        prefix = with_context(
            engine.tokenizer, case.prefix, chunk, directory.language.comment, engine.conditioner.max_prompt_tokens
        )
        prepare_ms += (time.perf_counter() - started) * 1000
    if fused:
        fusion, fusion_ms = workspaces.fusion(directory, case, weights)
        prepare_ms += fusion_ms
    generation = bench.cold_generate(engine, prefix, Options(mode=base, max_tokens=max_tokens), fusion=fusion)
    text = bench.first_text(generation)
    return WorkspaceOutcome(
        category=case.category,
        **score(case, directory, text),
        ms=round(generation.elapsed_ms + prepare_ms, 2),
        prepare_ms=round(prepare_ms, 2),
        lm_calls=generation.lm_calls,
        text=text,
    )


def run(
    engine: Engine,
    workspace: str,
    cases: int,
    seed: int,
    modes: list[str],
    max_tokens: int = 48,
    weights: FusionWeights | None = None,
    progress: Callable[[str, float], None] | None = None,
) -> dict:
    """The whole benchmark: the ``--json`` object of ``cpc bench --workspace``."""
    report = progress or (lambda message, fraction: None)
    for mode in modes:
        parse_mode(mode)
    fused = any(parse_mode(mode)[1] for mode in modes)
    if fused and weights is None:
        weights = FusionWeights()
    dirs = {directory.label: directory for directory in source_dirs(workspace)}
    drawn = draw_cases(list(dirs.values()), cases, seed)
    # One directory at a time, one file after another: the workspace model is built once per directory.
    order = sorted(range(len(drawn)), key=lambda k: (drawn[k].directory, drawn[k].file, k))
    outcomes: dict[str, list[WorkspaceOutcome | None]] = {mode: [None] * len(drawn) for mode in modes}
    workspaces = Workspaces(engine, report) if fused else None
    chunks: dict[str, list[Chunk]] = {}
    chunks_of_dir = None
    for done, k in enumerate(order, start=1):
        case = drawn[k]
        directory = dirs[case.directory]
        if any(parse_mode(mode)[2] for mode in modes) and chunks_of_dir != case.directory:
            chunks = {path: chunks_of(directory.shown_path(path), text, directory.language)
                      for path, text in directory.texts.items()}
            chunks_of_dir = case.directory
        for mode in modes:
            outcomes[mode][k] = complete_case(engine, directory, case, mode, max_tokens, workspaces, weights, chunks)
        report(f"case {done}/{len(drawn)} ({case.category}, {case.directory})", done / len(drawn))
    results = {
        mode: {category: summarise([o for o in rows if o.category == category]) for category in CATEGORIES}
        for mode, rows in outcomes.items()
    }
    overall = {mode: summarise(rows) for mode, rows in outcomes.items()}
    return {
        "model": engine.vocab.name,
        "workspace": workspace,
        "directories": sorted({case.directory for case in drawn}),
        "cases": len(drawn),
        "seed": seed,
        "modes": modes,
        "max_tokens": max_tokens,
        "fusion_weights": asdict(weights) if weights is not None else None,
        "results": results,
        "overall": overall,
        "acceptance": acceptance(results, overall),
        "workspaces": workspaces.stats if workspaces else {},
        "per_case": [
            {
                "directory": case.directory, "file": case.file, "category": case.category,
                "identifier": case.identifier, "line_number": case.line_number,
                "expected": case.word_rest, "line_rest": case.line_rest,
            }
            | {mode: asdict(outcomes[mode][k]) for mode in modes}
            for k, case in enumerate(drawn)
        ],
    }


def acceptance(results: dict, overall: dict) -> dict:
    """Issue 11's comparisons, where the modes they compare were run: cpc + fusion over cpc (overall, and
    on the ``cross_file`` cases), the targets, and fusion beside prompt context."""
    checks: dict = {}
    fusion, plain, context = overall.get("cpc+fusion"), overall.get("cpc"), overall.get("cpc+context")
    if fusion and plain and fusion["n"] and plain["n"]:
        deltas = {metric: round(fusion[metric] - plain[metric], 4) for metric in RATES}
        checks["fusion_minus_cpc"] = deltas
        cross = results["cpc+fusion"]["cross_file"], results["cpc"]["cross_file"]
        if cross[0]["n"] and cross[1]["n"]:
            checks["fusion_minus_cpc_cross_file"] = {m: round(cross[0][m] - cross[1][m], 4) for m in RATES}
        checks["undefined_rate_fusion_over_cpc"] = bench.ratio(fusion["undefined_rate"], plain["undefined_rate"])
        checks["p50_fusion_over_cpc"] = bench.ratio(fusion["p50_ms"], plain["p50_ms"])
        undefined = checks["undefined_rate_fusion_over_cpc"]
        checks["targets_met"] = {
            "next_identifier_plus_5_points": deltas["next_identifier"] >= 0.05,
            "line_exact_plus_5_points": deltas["line_exact"] >= 0.05,
            "undefined_rate_at_most_half": fusion["undefined_rate"] == 0 or (undefined is not None and undefined <= 0.5),
            "word_exact_not_lower": deltas["word_exact"] >= 0,
            "p50_at_most_1_1x": (checks["p50_fusion_over_cpc"] or 0) <= 1.1,
        }
    if fusion and context and fusion["n"] and context["n"]:
        checks["fusion_vs_context"] = {
            metric: {"cpc+fusion": fusion[metric], "cpc+context": context[metric]} for metric in (*METRICS, "p50_ms")
        }
    return checks


# ---------------------------------------------------------------- report


def print_table(result: dict, stream=None) -> None:
    stream = stream or sys.stdout
    print(
        f"{result['model']}: {result['cases']} cases in {len(result['directories'])} directories of "
        f"{result['workspace']!r} (seed {result['seed']})",
        file=stream,
    )
    rows = []
    for mode in result["results"]:
        for category, row in [*result["results"][mode].items(), ("overall", result["overall"][mode])]:
            if row["n"]:
                rows.append({"mode": mode, "category": category, **row})
    bench.print_rows(
        rows,
        [("mode", "mode", "{}"), ("category", "category", "{}"), ("n", "n", "{:d}"),
         ("next_identifier", "next id", "{:.0%}"), ("identifier_exact", "ids", "{:.0%}"),
         ("word_exact", "word", "{:.0%}"), ("line_exact", "line", "{:.0%}"), ("undefined_rate", "undef", "{:.1%}"),
         *bench.LATENCY_COLUMNS],
        stream,
    )
    for name, value in result["acceptance"].items():
        print(f"{name}: {json.dumps(value)}", file=stream)
    for label, stats in result["workspaces"].items():
        print(f"workspace {label}: {json.dumps(stats)}", file=stream)


def plot(result: dict, path: str) -> None:
    """Quality metrics per mode (all cases, and the ``cross_file`` ones) and median latency per mode."""
    plt = bench.pyplot()
    modes = list(result["results"])
    fig, (overall, cross, latency) = plt.subplots(
        1, 3, figsize=(17, 4.8), gridspec_kw={"width_ratios": [5, 5, 3]}
    )
    labels = ["next id", "identifiers", "word", "line", "undefined"]
    for axis, rows, title in (
        (overall, {m: result["overall"][m] for m in modes}, "all cases"),
        (cross, {m: result["results"][m]["cross_file"] for m in modes}, "cross_file: a name from another file"),
    ):
        bench.grouped_bars(
            axis, labels, {m: [100 * rows[m].get(metric, 0) for metric in METRICS] for m in modes},
            label_format="%.0f",
        )
        axis.set_ylim(0, 105)
        axis.set_ylabel("% of cases (undefined: % of names)")
        axis.set_title(title)
    overall.legend(fontsize=8)
    bench.grouped_bars(
        latency, modes,
        {c: [result["results"][m][c].get("p50_ms", 0) for m in modes] for c in CATEGORIES}
        | {"overall": [result["overall"][m].get("p50_ms", 0) for m in modes]},
    )
    latency.tick_params(axis="x", labelrotation=20)
    latency.set_ylabel("median ms per cold request")
    latency.set_title("latency")
    latency.legend(fontsize=8)
    fig.suptitle(
        f"{result['model']}: {result['cases']} cursors in {len(result['directories'])} directories of "
        f"{result['workspace']!r} (seed {result['seed']})"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=120)
