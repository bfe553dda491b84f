"""The text files of folders, read safely: a breadth-first walk that honours git's ignore rules and size caps.

This module owns the walk over folders (the server's are the client's
``workspaceFolders``): which files fusion's corpus reads and which it never
sees. It knows no LSP types; the session turns its files into
`cpc.fusion.ProjectCorpus.add_file` calls on a background thread, and the
server its progress into ``$/progress``.

What a folder may hold decides the rules:

- **only what git would see**: ``.gitignore`` files at every level (a nested
  one applies to its subtree and overrides the ones above it), the
  repository's ``.git/info/exclude``, and the ``.gitignore`` files above the
  folder when it is a subdirectory of a repository (unless they ignore the
  folder itself: then it was opened on purpose); ``.git``, ``.hg``,
  ``.svn`` and ``.bzr`` are always skipped. A vendored tree that git tracks is
  read (the caps bound it); one that git ignores is never entered.
- **the project's own code**: installed packages and tools' caches are
  skipped wherever they sit below a folder, ignored or not (`INSTALLED_DIRS`,
  and a Python virtual environment by its ``pyvenv.cfg``, whatever its name),
  as VS Code's search leaves ``node_modules`` out. A project that is no git
  repository, or whose ``.gitignore`` forgot them, filled the caps with them:
  npm's own folder holds 1,510 files of packages (8.8 MB) beside 432 of its
  own. A folder opened itself is read.
- **text only**: a NUL byte in the first 8 KiB or bytes that are not UTF-8
  mark a binary; oversize files are skipped by their size before any read.
  A Jupyter notebook (``.ipynb``) is read as its code cells
  (`cpc.notebooks.ipynb_script`), not as its JSON of escaped source, outputs
  and images.
- **bounded**: a cap on file count, on total bytes and on directory entries
  looked at, so opening ``/`` or a huge monorepo costs a bounded walk. The
  walk is breadth-first over all folders together, so the top of each
  project comes before deep subtrees when a cap stops it.
- **nothing followed, nothing executed**: symbolic links are never followed
  (git stores a link, not its target; a target inside the folder is read at
  its own path; one outside could be anything, e.g. ``~/.ssh``; and loops
  cannot happen). Files are opened with ``O_NOFOLLOW | O_NONBLOCK`` and
  checked to be regular files, so a link or FIFO swapped in mid-walk is not
  read and cannot block. No git command runs, no network is touched.
"""

from __future__ import annotations

import os
import stat
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pathspec

from cpc.notebooks import ipynb_script

VCS_DIRS = frozenset({".git", ".hg", ".svn", ".bzr"})
"""Names skipped wherever they appear: version-control metadata, never project text."""

INSTALLED_DIRS = frozenset({
    "node_modules", "bower_components", "__pycache__", ".tox", ".nox", ".mypy_cache", ".pytest_cache", ".ruff_cache",
})
"""Directories of installed packages and tools' caches: skipped wherever they sit below a folder."""

ENVIRONMENT_MARKER = "pyvenv.cfg"
"""The file that makes a directory a Python virtual environment (``.venv``, ``venv``, ``env``...): skipped as
installed packages below a folder."""

BINARY_SNIFF_BYTES = 8192
"""A NUL byte within this many leading bytes marks a binary (git's own heuristic)."""

MAX_IGNORE_FILE_BYTES = 1_000_000
"""A larger ``.gitignore`` (or exclude file) is not read: no real one is that big."""

PROGRESS_EVERY = 100
"""Files looked at between two progress calls."""

_O_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)


@dataclass(frozen=True)
class ReadLimits:
    """Caps on what one walk reads (the server exposes them as settings).

    The defaults fit a large project's sources in a few tens of MB of fusion
    counts while keeping the first reading within seconds.
    """

    max_file_bytes: int = 512_000
    """Larger files are skipped: generated code, data, minified bundles."""
    max_total_bytes: int = 20_000_000
    """The walk stops before the text read would exceed this."""
    max_files: int = 5_000
    """The walk stops after this many files."""
    max_entries: int = 200_000
    """Directory entries looked at (ignored, binary and skipped ones too): the walk's own cost."""

    def __post_init__(self) -> None:
        for name in ("max_file_bytes", "max_total_bytes", "max_files", "max_entries"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 0:
                raise ValueError(f"ReadLimits.{name} must be a non-negative int, not {value!r}")


@dataclass(frozen=True)
class FolderFile:
    path: Path
    """The file under its folder as given (symbolic links in the folder's own path kept)."""
    text: str
    """The file's text, decoded as UTF-8 (a leading byte-order mark dropped), line breaks as on disk."""


@dataclass
class ReadReport:
    """What a walk did, filled in as it goes (for ``cpc/status`` and logs)."""

    files: int = 0
    bytes: int = 0
    entries: int = 0
    skipped_binary: int = 0
    skipped_large: int = 0
    skipped_unreadable: int = 0
    skipped_installed: int = 0
    """Directories of installed packages or caches not entered (`INSTALLED_DIRS`, virtual environments)."""
    stopped: str | None = None
    """Why the walk ended early (``"max_files"``, ``"max_total_bytes"``, ``"max_entries"``,
    ``"cancelled"``); None when it read everything."""


ReadProgress = Callable[[str, float | None], None]
"""Called with a message and a fraction in [0, 1], or None while the total is unknown."""


@dataclass(frozen=True)
class _Layer:
    """One ignore file's patterns, and how a folder-relative path reads from where the file sits."""

    spec: pathspec.GitIgnoreSpec
    prepend: str = ""
    """Path from the ignore file's directory down to the folder (ignore files above the folder)."""
    strip: int = 0
    """Characters of the folder-relative path above the ignore file's directory (nested ignore files)."""


@dataclass
class _Dir:
    root: str
    rel: str
    """Posix path relative to the folder, "" for the folder itself."""
    layers: tuple[_Layer, ...] = field(default_factory=tuple)


def folder_files(
    folders: Iterable[str | os.PathLike[str]],
    limits: ReadLimits = ReadLimits(),
    progress: ReadProgress | None = None,
    cancelled: Callable[[], bool] | None = None,
    *,
    report: ReadReport | None = None,
) -> Iterator[FolderFile]:
    """The text files of ``folders`` that git would not ignore, installed packages and caches left out,
    breadth-first, in a fixed order.

    Within a directory, entries come in sorted name order; all folders are
    walked together level by level, so the same tree always gives the same
    sequence and a cap cuts deep trees before shallow files. A file reached
    twice (the same folder listed twice, nested folders, hard links) is
    yielded once. ``progress`` is called every ~100 files looked at and once
    at the end (fraction 1.0); ``cancelled`` is polled before each directory
    and each file, and the walk returns as soon as it says True. Pass a
    ``ReadReport`` to learn the counts and why the walk stopped.

        >>> import tempfile
        >>> folder = tempfile.TemporaryDirectory()
        >>> root = Path(folder.name)
        >>> _ = (root / ".gitignore").write_text("build/\\n*.log\\n")
        >>> _ = (root / "app.py").write_text("def main():\\n    pass\\n")
        >>> (root / "build").mkdir(); _ = (root / "build" / "out.py").write_text("x = 1\\n")
        >>> _ = (root / "debug.log").write_text("noise\\n")
        >>> _ = (root / "logo.png").write_bytes(b"\\x89PNG\\r\\n\\x1a\\n\\x00\\x00")
        >>> (root / "pkg").mkdir(); _ = (root / "pkg" / "util.py").write_text("HELPER = 2\\n")
        >>> report = ReadReport()
        >>> [f.path.relative_to(root).as_posix() for f in folder_files([root], report=report)]
        ['.gitignore', 'app.py', 'pkg/util.py']
        >>> report.files, report.skipped_binary, report.stopped
        (3, 1, None)
        >>> folder.cleanup()
    """
    walk = _Walk(limits, progress, cancelled, report if report is not None else ReadReport())
    yield from walk.files([os.path.abspath(os.fspath(folder)) for folder in folders])


def folder_file(
    folders: Iterable[str | os.PathLike[str]], path: str | os.PathLike[str], limits: ReadLimits = ReadLimits()
) -> FolderFile | None:
    """The file at ``path`` as `folder_files` would read it from ``folders``, read now; None when no folder
    holds it or the walk would pass it over (ignored by git, in a version-control folder or under a symbolic
    link, not a regular text file within ``limits.max_file_bytes``, gone). For a file saved, created or
    changed after a walk.

        >>> import tempfile
        >>> folder = tempfile.TemporaryDirectory()
        >>> root = Path(folder.name)
        >>> _ = (root / ".gitignore").write_text("build/\\n")
        >>> (root / "build").mkdir(); _ = (root / "build" / "out.py").write_text("x = 1\\n")
        >>> (root / "pkg").mkdir(); _ = (root / "pkg" / "util.py").write_text("HELPER = 2\\n")
        >>> [folder_file([root], root / name) for name in ("build/out.py", "pkg/util.py", "gone.py")]
        [None, FolderFile(path=PosixPath('...pkg/util.py'), text='HELPER = 2\\n'), None]
        >>> folder.cleanup()
    """
    path = os.path.abspath(os.fspath(path))
    for root in (os.path.abspath(os.fspath(folder)) for folder in folders):
        rel = os.path.relpath(path, root)
        if rel == os.curdir or rel.split(os.sep)[0] == os.pardir or not _reached(root, rel.split(os.sep)):
            continue
        outcome = _read_text(path, limits, ReadReport(), set())
        return FolderFile(Path(path), outcome[0]) if isinstance(outcome, tuple) else None
    return None


def _reached(root: str, names: list[str]) -> bool:
    """Whether the walk from ``root`` reaches the file at the relative path ``names`` (directories that are
    not links, none ignored or version-control metadata, and the file not ignored), as `_Walk.files` decides."""
    directory, path = _Dir(root, "", _layers_above(root)), root
    for depth, name in enumerate(names):
        present = {marker for marker in (".git", ".gitignore") if os.path.lexists(os.path.join(path, marker))}
        layers = _directory_layers(directory, path, present)
        rel = "/".join(names[: depth + 1])
        is_dir = depth < len(names) - 1
        path = os.path.join(path, name)
        if name in VCS_DIRS or _ignored(layers, rel, is_dir):
            return False
        if is_dir and (os.path.islink(path) or not os.path.isdir(path) or _installed(name, path)):
            return False
        directory = _Dir(root, rel, layers)
    return True


class _Walk:
    """One breadth-first walk of `folder_files`: its caps, its progress and its report."""

    def __init__(self, limits: ReadLimits, progress: ReadProgress | None,
                 cancelled: Callable[[], bool] | None, report: ReadReport) -> None:
        self.limits = limits
        self.progress = progress
        self.cancelled = cancelled or (lambda: False)
        self.report = report
        self.seen: set[tuple[int, int]] = set()
        """(device, inode) of the files read: a file reached twice is read once."""
        self.looked_at = 0

    def files(self, roots: list[str]) -> Iterator[FolderFile]:
        queue = deque(_Dir(root, "", _layers_above(root)) for root in roots)
        while queue:
            if self.cancelled():
                return self._stop("cancelled")
            directory = queue.popleft()
            path = os.path.join(directory.root, directory.rel) if directory.rel else directory.root
            entries = _list_dir(path)
            if entries is None:
                self.report.skipped_unreadable += 1
                continue
            layers = _directory_layers(directory, path, {entry.name for entry in entries})
            subdirs: list[_Dir] = []
            for entry in entries:
                self.report.entries += 1
                if self.report.entries > self.limits.max_entries:
                    return self._stop("max_entries")
                kind = _kind(entry)
                if kind is None:
                    continue
                rel = f"{directory.rel}/{entry.name}" if directory.rel else entry.name
                if _ignored(layers, rel, kind == "dir"):
                    continue
                if kind == "dir":
                    if _installed(entry.name, entry.path):
                        self.report.skipped_installed += 1
                    else:
                        subdirs.append(_Dir(directory.root, rel, layers))
                    continue
                outcome = self._read(entry)
                if isinstance(outcome, str):
                    return self._stop(outcome)
                if outcome is not None:
                    yield outcome
                    if self.report.files >= self.limits.max_files:
                        return self._stop("max_files")
            queue.extend(subdirs)
        self._tell(1.0)

    def _read(self, entry: os.DirEntry[str]) -> FolderFile | str | None:
        """The file, if it is text within the caps; the name of a cap that stops the walk; or None."""
        if self.cancelled():
            return "cancelled"
        self.looked_at += 1
        if self.looked_at % PROGRESS_EVERY == 0:
            self._tell(None)
        outcome = _read_text(entry.path, self.limits, self.report, self.seen)
        if outcome is None or isinstance(outcome, str):
            return outcome
        self.report.files += 1
        self.report.bytes += outcome[1]
        return FolderFile(Path(entry.path), outcome[0])

    def _tell(self, fraction: float | None, stopped: str = "") -> None:
        if self.progress is not None:
            self.progress(f"Folders: {self.report.files} files, {self.report.bytes} bytes{stopped}", fraction)

    def _stop(self, reason: str) -> None:
        self.report.stopped = reason
        self._tell(1.0, f" (stopped: {reason})")


def _directory_layers(directory: _Dir, path: str, names: set[str]) -> tuple[_Layer, ...]:
    """The ignore files that apply in a directory, given the names in it."""
    layers = directory.layers
    if ".git" in names:
        # the folder's repository, or a nested one (submodule, vendored clone): its own ignores apply, not ours
        layers = _repository_layers(path, prefix_len=len(directory.rel) + 1 if directory.rel else 0)
    if ".gitignore" in names:
        spec = _read_ignore_file(os.path.join(path, ".gitignore"))
        if spec is not None:
            layers = (*layers, _Layer(spec, "", len(directory.rel) + 1 if directory.rel else 0))
    return layers


def _installed(name: str, path: str) -> bool:
    """Whether the directory ``name`` at ``path`` (below a folder) holds installed packages or a cache."""
    return name in INSTALLED_DIRS or os.path.lexists(os.path.join(path, ENVIRONMENT_MARKER))


def _kind(entry: os.DirEntry[str]) -> str | None:
    """``"dir"`` or ``"file"``; None for what the walk passes over: version-control folders, symbolic
    links, FIFOs, sockets, devices, and entries that vanish."""
    if entry.name in VCS_DIRS:
        return None
    try:
        if entry.is_dir(follow_symlinks=False):
            return "dir"
        return "file" if entry.is_file(follow_symlinks=False) else None
    except OSError:
        return None


def _list_dir(path: str) -> list[os.DirEntry[str]] | None:
    """A directory's entries sorted by name, read at once (no open handle held across yields)."""
    try:
        with os.scandir(path) as it:
            return sorted(it, key=lambda entry: entry.name)
    except OSError:
        return None


def _ignored(layers: tuple[_Layer, ...], rel: str, is_dir: bool) -> bool:
    """Git's answer: the deepest ignore file with a matching pattern decides, its last match wins."""
    for layer in reversed(layers):
        path = layer.prepend + rel[layer.strip :] + ("/" if is_dir else "")
        include = layer.spec.check_file(path).include
        if include is not None:
            return include
    return False


def _read_text(
    path: str, limits: ReadLimits, report: ReadReport, seen: set[tuple[int, int]]
) -> tuple[str, int] | str | None:
    """(text, bytes) of a text file; None to skip it; a cap's name when the walk must stop."""
    try:
        fd = os.open(path, _O_FLAGS)
    except OSError:
        report.skipped_unreadable += 1  # swapped for a link (O_NOFOLLOW), removed, or no permission
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None
        if (info.st_dev, info.st_ino) in seen:
            return None
        if info.st_size > limits.max_file_bytes:
            report.skipped_large += 1
            return None
        if report.bytes + info.st_size > limits.max_total_bytes:
            return "max_total_bytes"
        with os.fdopen(fd, "rb", closefd=False) as handle:
            head = handle.read(BINARY_SNIFF_BYTES)
            if b"\0" in head:
                report.skipped_binary += 1
                return None
            data = head + handle.read(limits.max_file_bytes + 1 - len(head))
    except OSError:
        report.skipped_unreadable += 1
        return None
    finally:
        os.close(fd)
    if len(data) > limits.max_file_bytes:  # grew since fstat
        report.skipped_large += 1
        return None
    if report.bytes + len(data) > limits.max_total_bytes:
        return "max_total_bytes"
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        report.skipped_binary += 1
        return None
    seen.add((info.st_dev, info.st_ino))
    if path.endswith(".ipynb") and (script := ipynb_script(text)) is not None:  # else: no notebook, read as text
        text = script
    return text, len(data)


def _read_ignore_file(path: str) -> pathspec.GitIgnoreSpec | None:
    """The patterns of a ``.gitignore`` or exclude file; None when absent, not a regular file, or huge.

    Like git (since 2.32), a ``.gitignore`` that is a symbolic link is not followed.
    """
    try:
        fd = os.open(path, _O_FLAGS)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_IGNORE_FILE_BYTES:
            return None
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = handle.read(MAX_IGNORE_FILE_BYTES)
    except OSError:
        return None
    finally:
        os.close(fd)
    # surrogateescape: patterns match the names os.scandir gives for non-UTF-8 file names
    lines = data.decode("utf-8", "surrogateescape").splitlines()
    spec = pathspec.GitIgnoreSpec.from_lines(lines)
    return spec if len(spec) else None


def _git_dir(worktree: str) -> str | None:
    """The git directory holding ``info/exclude`` for a work tree (``.git`` itself, or where a ``.git`` file points)."""
    dot_git = os.path.join(worktree, ".git")
    if os.path.isdir(dot_git) and not os.path.islink(dot_git):
        return dot_git
    try:
        with open(dot_git, "rb") as handle:
            line = handle.read(4096).decode("utf-8", "surrogateescape").strip()
    except OSError:
        return None
    if not line.startswith("gitdir:"):
        return None
    git_dir = os.path.join(worktree, line[len("gitdir:") :].strip())
    # a linked work tree's exclude file lives in the main repository's ("common") git directory
    try:
        with open(os.path.join(git_dir, "commondir"), "rb") as handle:
            common = handle.read(4096).decode("utf-8", "surrogateescape").strip()
        return os.path.join(git_dir, common)
    except OSError:
        return git_dir


def _repository_layers(worktree: str, prefix_len: int = 0) -> tuple[_Layer, ...]:
    """The repository-wide exclude file of the repository whose work tree starts at ``worktree``."""
    git_dir = _git_dir(worktree)
    spec = _read_ignore_file(os.path.join(git_dir, "info", "exclude")) if git_dir else None
    return (_Layer(spec, "", prefix_len),) if spec is not None else ()


def _layers_above(root: str) -> tuple[_Layer, ...]:
    """Ignore rules that reach into ``root`` from above: when it is inside a repository (not its top),
    that repository's exclude file and the ``.gitignore`` files from its top down to ``root``'s parent.

    A folder that those rules ignore (or that sits in an ignored directory) was opened on purpose:
    it is read as a tree of its own, with none of them (e.g. a Python installed under a
    ``pyenv`` clone, whose ``.gitignore`` ignores ``/versions/``).
    """
    real = os.path.realpath(root)
    if os.path.lexists(os.path.join(real, ".git")):
        return ()  # the walk reads the folder's own repository when it lists the folder
    ancestors: list[str] = []
    current = real
    while True:
        parent = os.path.dirname(current)
        if parent == current:
            return ()  # not inside a repository
        ancestors.append(parent)
        if os.path.lexists(os.path.join(parent, ".git")):
            break
        current = parent
    ancestors.reverse()  # the repository's top first
    git_dir = _git_dir(ancestors[0])
    exclude = _read_ignore_file(os.path.join(git_dir, "info", "exclude")) if git_dir else None
    found: list[tuple[str, pathspec.GitIgnoreSpec]] = [(ancestors[0], exclude)] if exclude is not None else []
    for directory, child in zip(ancestors, [*ancestors[1:], real]):
        spec = _read_ignore_file(os.path.join(directory, ".gitignore"))
        if spec is not None:
            found.append((directory, spec))
        if _ignored_above(found, child):
            return ()
    return tuple(_Layer(spec, _rel(real, directory) + "/") for directory, spec in found)


def _ignored_above(found: list[tuple[str, pathspec.GitIgnoreSpec]], directory: str) -> bool:
    """Whether the ignore files above ``directory`` ignore it (deepest file first, as `_ignored`)."""
    for base, spec in reversed(found):
        include = spec.check_file(_rel(directory, base) + "/").include
        if include is not None:
            return include
    return False


def _rel(path: str, base: str) -> str:
    return os.path.relpath(path, base).replace(os.sep, "/")
