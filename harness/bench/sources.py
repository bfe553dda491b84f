"""Real code to measure on: source directories of the standard library and npm, their languages, and the names a file can know.

A *source directory* is a standard-library package (``email/``) or the
``lib/`` of an npm package (or any directory of Go, Java or Rust sources, such
as Go's own tree, the JDK's ``src.zip`` unpacked or Debian's ``rust-src``): its files' texts,
which files use which names, and the language they are written in. `Language` tells names from comments
and strings (approximately: no lexer), and knows the names every file of
the language may use (keywords and builtins). `imported_names` lists the
names of the modules a file imports, read as source and never executed.

    >>> PYTHON.names_in("def f(x): return x.real")
    ['def', 'f', 'x', 'return', 'x', 'real']
    >>> PYTHON.code_only("x = 'a b'  # c").rstrip() + '|'
    'x =|'
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
import sysconfig
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cache
from itertools import dropwhile, takewhile
from pathlib import Path
from typing import TypeVar

STDLIB = "<stdlib>"
"""Stands for this interpreter's standard library in a file or directory glob."""
T = TypeVar("T")

MAX_FILE_BYTES = 256_000
"""Larger files are left out of a directory (generated tables, bundles)."""
MAX_DIRECTORY_BYTES = 1_000_000
"""A directory's files, in path order, up to this many bytes."""

TEST_DIRS = re.compile(r"^(tests?|idle_test|__tests__|__pycache__|node_modules)$|^test_")
TEST_FILES = re.compile(r"^test_|_test\.|\.(test|spec)\.|^tests?\.rs$")


def expand(pattern: str) -> list[Path]:
    """Files matching ``pattern`` (``**`` recursive; ``<stdlib>`` is this interpreter's standard library)."""
    pattern = pattern.replace(STDLIB, stdlib_dir())
    return sorted(Path(name) for name in glob.glob(pattern, recursive=True) if Path(name).is_file())


def random_lines(files: list[Path], rng: random.Random, tries: int) -> Iterator[tuple[Path, list[str], int]]:
    """``tries`` lines drawn at random from ``files`` (a file, then one of its lines): the file, its lines, and the
    line's index; each file is read once.

    >>> next(random_lines([Path(__file__)], random.Random(1), 1))[0].name
    'sources.py'
    """
    if not files:
        raise ValueError("no source files match the pattern")
    texts: dict[Path, list[str]] = {}
    for _ in range(tries):
        path = rng.choice(files)
        if path not in texts:
            texts[path] = path.read_text(encoding="utf-8", errors="replace").split("\n")
        yield path, texts[path], rng.randrange(len(texts[path]))


def cases_from_lines(files: list[Path], count: int, seed: int, case_at: Callable[[random.Random, Path, list[str], int], T | None],
                     what: str) -> list[T]:
    """``count`` cases that ``case_at`` makes of lines drawn at random (`random_lines`, up to 400 a case): it gets
    the random generator, the file, its lines and the line's index, and gives None for a line it leaves out.

    >>> lines = cases_from_lines([Path(__file__)], 3, 1, lambda rng, path, lines, number: lines[number] or None, "lines")
    >>> len(lines), all(lines)
    (3, True)
    """
    rng = random.Random(seed)
    cases: list[T] = []
    for path, lines, number in random_lines(files, rng, count * 400):
        if len(cases) == count:
            return cases
        case = case_at(rng, path, lines, number)
        if case is not None:
            cases.append(case)
    raise ValueError(f"found only {len(cases)} of {count} {what}: use more files")


def stdlib_dir() -> str:
    """This interpreter's standard library directory (what ``<stdlib>`` stands for)."""
    return sysconfig.get_paths()["stdlib"]



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
GO = Language(
    "go",
    (".go",),
    re.compile(r"(?<![A-Za-z0-9_])[A-Za-z_][A-Za-z0-9_]*"),
    re.compile(r"[A-Za-z0-9_]*"),
    "//",
    frozenset("""break case chan const continue default defer else fallthrough for func go goto if import interface
    map package range return select struct switch type var""".split()),
    re.compile(r"""(?s)/\*.*?\*/|//[^\n]*|`[^`]*`|"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'"""),
)
JAVA = Language(
    "java",
    (".java",),
    re.compile(r"(?<![A-Za-z0-9_$])[A-Za-z_$][A-Za-z0-9_$]*"),
    re.compile(r"[A-Za-z0-9_$]*"),
    "//",
    frozenset("""abstract assert boolean break byte case catch char class const continue default do double else enum
    extends final finally float for goto if implements import instanceof int interface long native new package
    private protected public return short static strictfp super switch synchronized this throw throws transient try
    void volatile while var record yield sealed permits true false null""".split()),
    re.compile(r"(?s)/\*.*?\*/|//[^\n]*|\"{3}.*?\"{3}|\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'"),
)
RUST = Language(
    "rust",
    (".rs",),
    re.compile(r"(?<![A-Za-z0-9_])[A-Za-z_][A-Za-z0-9_]*"),
    re.compile(r"[A-Za-z0-9_]*"),
    "//",
    frozenset("""as async await break const continue crate dyn else enum extern false fn for if impl in let loop match mod
    move mut pub ref return self Self static struct super trait true type union unsafe use where while macro_rules""".split()),
    re.compile(  # a raw string's hashes close it; a character literal is one character or escape (`'a` is a lifetime)
        r"""(?s)/\*.*?\*/|//[^\n]*|(?<!\w)b?r(#*)".*?"\1|(?:(?<!\w)b)?"(?:\\.|[^"\\])*"|"""
        r"""(?<!\w)b?'(?:\\(?:u\{[0-9a-fA-F]{1,6}\}|x[0-9a-fA-F]{2}|.)|[^\\'\n])'"""
    ),
)
LANGUAGES = (PYTHON, JAVASCRIPT, GO, JAVA, RUST)
_GO_PREDECLARED = """any bool byte comparable complex64 complex128 error float32 float64 int int8 int16 int32 int64 rune
string uint uint8 uint16 uint32 uint64 uintptr true false iota nil append cap clear close complex copy delete imag len
make max min new panic print println real recover Error"""
_RUST_PRIMITIVES_AND_PRELUDE = """bool char str u8 u16 u32 u64 u128 usize i8 i16 i32 i64 i128 isize f32 f64 Option Some None Result
Ok Err Vec String Box ToString ToOwned Clone Copy Send Sync Sized Unpin Drop Fn FnMut FnOnce drop AsRef AsMut From Into
Iterator IntoIterator DoubleEndedIterator ExactSizeIterator Extend Default Debug Eq PartialEq Ord PartialOrd Hash
println print eprintln eprint format vec assert assert_eq assert_ne debug_assert debug_assert_eq panic unreachable todo
unimplemented write writeln matches cfg derive test"""
_RUST_PRELUDE_PLACES = """std/src/prelude/v1.rs std/src/macros.rs core/src/macros/mod.rs core/src/option.rs core/src/result.rs
core/src/clone.rs core/src/cmp.rs core/src/default.rs core/src/marker.rs core/src/convert core/src/ops core/src/iter
core/src/str core/src/slice core/src/num core/src/char core/src/fmt alloc/src/vec alloc/src/string.rs alloc/src/boxed.rs
alloc/src/borrow.rs alloc/src/slice.rs alloc/src/str.rs"""
"""Where Rust's prelude and the primitive types' methods are written (`rust_library`): every file may use them."""


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
    if language is GO:
        return frozenset(_GO_PREDECLARED.split()) | language.keywords
    if language is JAVA:  # java.lang is imported by every file; its classes are read where a file imports them
        return language.keywords
    if language is RUST:  # the prelude, the primitives and their methods, read from Debian's rust-src if it is here
        library = rust_library()
        places = [library / place for place in _RUST_PRELUDE_PLACES.split()] if library else []
        return frozenset(_RUST_PRIMITIVES_AND_PRELUDE.split()) | language.keywords | _names_of_places(places, RUST)
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


def source_dirs(directory_set: str) -> list[Directory]:
    """``dev``, ``check`` or a glob of directories (``<stdlib>`` is this interpreter's standard library)."""
    if directory_set == "dev":
        paths = _stdlib_packages("a", "m") + _npm_libs()
    elif directory_set == "check":
        paths = _stdlib_packages("n", "z")
    else:
        pattern = directory_set.replace(STDLIB, stdlib_dir())
        paths = sorted(Path(name) for name in glob.glob(pattern, recursive=True) if Path(name).is_dir())
    dirs = [d for d in (load_directory(path) for path in paths) if d is not None]
    if not dirs:
        raise ValueError(f"no source directory with two files or more matches {directory_set!r}")
    return dirs


def _stdlib_packages(first: str, last: str) -> list[Path]:
    """Standard-library packages whose names start with ``first``..``last`` (generated data aside)."""
    root = Path(stdlib_dir())
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


@cache
def rust_library() -> Path | None:
    """The sources of Rust's ``std``, ``core`` and ``alloc`` (Debian's ``rust-src``), or None."""
    found = sorted(glob.glob("/usr/src/rustc-*/library/std/src/lib.rs"))
    return Path(found[-1]).parents[2] if found else None


def _label(path: Path) -> str:
    for root in (Path(stdlib_dir()), npm_root(), rust_library()):
        if root is not None and path.is_relative_to(root) and path != root:
            return path.relative_to(root).as_posix()
    return str(path)



# ---------------------------------------------------------------- what a file imports


def imported_names(source: str, path: str, directory: Directory) -> frozenset[str]:
    """Identifiers of the modules a file imports, read from their source (never executed; C modules of
    the standard library and Node's builtin modules are listed instead)."""
    if directory.language is PYTHON:
        return frozenset().union(*(_python_module_names(module) for module in _python_imports(source)))
    if directory.language in (GO, JAVA, RUST):
        return _tree_imports(source, Path(path), directory.language)
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
            spec.origin == "built-in" or spec.origin.startswith(stdlib_dir())
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


def _tree_imports(source: str, path: Path, language: Language) -> frozenset[str]:
    """The names of what a Go, Java or Rust file imports, read from the source tree it is in."""
    places, names = {GO: _go_imports, JAVA: _java_imports, RUST: _rust_imports}[language](source, path)
    return frozenset(names) | _names_of_places(places, language)


def _names_of_places(places: list[Path], language: Language) -> frozenset[str]:
    """The identifiers of source files and folders (`_source_files`)."""
    return frozenset().union(*(_names_of_files(_source_files(place, language), language) for place in places))


def _go_imports(source: str, path: Path) -> tuple[list[Path], set[str]]:
    """The folders of a Go file's imported packages, in the ``src/`` that holds ``builtin/``; their names."""
    root = next((p for p in path.parents if (p / "builtin" / "builtin.go").is_file()), None)
    block = "\n".join(re.findall(r"(?s)^import\s*\((.*?)\)", source, flags=re.MULTILINE))
    targets = re.findall(r'"([^"]+)"', block) + re.findall(r'^import\s+(?:\w+\s+)?"([^"]+)"', source, flags=re.MULTILINE)
    return ([root / target for target in targets] if root else []), {target.rpartition("/")[2] for target in targets}


def _java_imports(source: str, path: Path) -> tuple[list[Path], set[str]]:
    """The classes and packages a Java file imports (and ``java.lang``), in the folder that holds ``java/lang/``
    (or ``java.base/java/lang/``: the JDK's ``src.zip``, unpacked)."""
    roots = [p for p in path.parents if (p / "java" / "lang" / "Object.java").is_file()][:1]
    roots += [p / "java.base" for p in path.parents if (p / "java.base" / "java" / "lang").is_dir()][:1]
    imports = re.findall(r"^import\s+(?:static\s+)?([\w.]+(?:\.\*)?)\s*;", source, flags=re.MULTILINE)
    places: list[Path] = []
    for target in ["java.lang.*", *imports]:
        parts = target.removesuffix(".*").split(".")
        for root in roots:
            for cut in range(len(parts), 0, -1):  # a class, or a static member of one
                candidate = root.joinpath(*parts[:cut])
                if target.endswith(".*") and candidate.is_dir():
                    places.append(candidate)
                    break
                if candidate.with_suffix(".java").is_file():
                    places.append(candidate.with_suffix(".java"))
                    break
    return places, set()


def _rust_imports(source: str, path: Path) -> tuple[list[Path], set[str]]:
    """The modules a Rust file's ``use`` declarations and written paths (``crate::fmt::Write``) name: their
    files, in its crate (the folder of ``lib.rs`` or ``main.rs``), ``super``/``self``, or ``std``, ``core`` and
    ``alloc`` (`rust_library`). A path's first word that no folder holds is an item of the module before it."""
    code = RUST.code_only(source)
    paths = [path for tree in re.findall(r"(?<![\w:])use\s+([^;]*);", code) for path in _use_paths(tree)]
    paths += [written.split("::") for written in re.findall(r"(?<![\w:])(?:crate|std|core|alloc|super|self)(?:::\w+)+", code)]
    places = {place for words in paths for place in [_rust_module(words, path)] if place is not None}
    return sorted(places), set()


def _use_paths(tree: str) -> list[list[str]]:
    """The paths of a ``use`` declaration's tree, braces opened (``a::{b, c::*}`` is ``a::b`` and ``a::c``).

    >>> _use_paths("crate::io::{self, Read as R, buf::*}"), _use_paths("core::ascii")
    ([['crate', 'io'], ['crate', 'io', 'Read'], ['crate', 'io', 'buf']], [['core', 'ascii']])
    """
    tokens = re.findall(r"[{},*]|\bas\s+\w+|\w+", tree)
    paths: list[list[str]] = []

    def branch(position: int, prefix: list[str]) -> int:
        words = list(prefix)
        while position < len(tokens) and tokens[position] not in (",", "}"):
            token = tokens[position]
            position += 1
            if token == "{":
                while position < len(tokens) and tokens[position] != "}":
                    position = branch(position, words)
                    position += tokens[position:position + 1] == [","]
                return position + 1
            if token not in ("*", "self") and not re.match(r"as\s", token):  # an alias names no module
                words.append(token)
        paths.append(words)
        return position

    branch(0, [])
    return [words for words in paths if words]


def _rust_module(words: list[str], path: Path) -> Path | None:
    """The module a Rust path names from the file at ``path``: its file, or its folder (None: not in these
    sources). The path's words are followed while a folder holds them as modules (``name.rs``, ``name/mod.rs``):
    the next one is an item of the module before."""
    def children(file: Path) -> Path:  # where a module's own modules are
        return file.parent if file.name in ("mod.rs", "lib.rs", "main.rs") else file.with_suffix("")

    first, rest = words[0], words[1:]
    crate = next((p for p in path.parents if (p / "lib.rs").is_file() or (p / "main.rs").is_file()), None)
    library = rust_library()
    if first in ("std", "core", "alloc"):
        folder = library / first / "src" if library else None
    elif first in ("self", "super"):
        folder = children(path)
        for _ in range((first == "super") + len(list(takewhile("super".__eq__, rest)))):
            folder = folder.parent
        rest = list(dropwhile("super".__eq__, rest))
    else:  # crate::, or a module of the crate's root named alone
        folder, rest = crate, (rest if first == "crate" else words)
    if folder is None:
        return None
    place = None
    for word in rest:
        module = next((m for m in (folder / f"{word}.rs", folder / word / "mod.rs") if m.is_file()), None)
        if module is None:
            break
        place, folder = (module.parent if module.name == "mod.rs" else module), children(module)
    if place is None and first not in ("crate", "self", "super", "std", "core", "alloc"):
        return None  # another crate's path
    if place is None:  # an item of the first module: its own file
        own = (folder / "lib.rs", folder / "main.rs", folder / "mod.rs", folder.with_suffix(".rs"))
        place = next((file for file in own if file.is_file()), None)
    return place


def _source_files(place: Path, language: Language) -> tuple[Path, ...]:
    """A source file, or a folder's files of ``language`` (not its subfolders, not tests; a Rust module's folder
    with its subfolders and the ``name.rs`` beside it)."""
    if place.is_file():
        return (place,)
    if not place.is_dir():
        return ()
    found = place.rglob("*") if language is RUST else place.glob("*")
    files = sorted(f for f in found if f.suffix in language.extensions and not TEST_FILES.search(f.name))
    beside = place.with_suffix(".rs")
    return tuple(([beside] if language is RUST and beside.is_file() else []) + files)


@cache
def _names_of_files(files: tuple[Path, ...], language: Language) -> frozenset[str]:
    """The identifiers of ``files``, in their order, up to `MAX_DIRECTORY_BYTES` of them."""
    names: set[str] = set()
    total = 0
    for file in files:
        text = file.read_text(encoding="utf-8", errors="replace")
        total += len(text)
        if total > MAX_DIRECTORY_BYTES:
            break
        names.update(language.names_in(text))
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
    return _names_of_files(tuple(files[:200]), JAVASCRIPT)
