"""Reading folders (`cpc.folder_files`) on real directory trees: git's ignore rules, binaries, caps, links."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

from cpc.folder_files import ReadLimits, ReadReport, folder_file, folder_files


def write(root: Path, rel: str, data: str | bytes = "x = 1\n") -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data, encoding="utf-8")
    return path


def names(root: Path, files) -> list[str]:
    return [f.path.relative_to(root).as_posix() for f in files]


def scan(root: Path, **kwargs) -> list[str]:
    return names(root, folder_files([root], **kwargs))


IGNORE_TREE = {
    ".gitignore": "# comment\n*.log\n!keep.log\nbuild/\n/top_only.txt\ndocs/**/draft.md\n",
    "main.py": "print('main')\n",
    "debug.log": "ignored by *.log\n",
    "keep.log": "re-included by !keep.log\n",
    "top_only.txt": "ignored: anchored /top_only.txt\n",
    "build": "a FILE named build is not matched by the directory pattern build/\n",
    "pkg/top_only.txt": "kept: the anchored pattern is for the top only\n",
    "pkg/build/gen.py": "ignored: build/ matches directories at any depth\n",
    "pkg/mod.py": "VALUE = 1\n",
    "pkg/trace.log": "ignored by the root's *.log\n",
    "pkg/.gitignore": "!trace.log\nsecret/\n*.tmp\n",
    "pkg/secret/key.py": "ignored by pkg/.gitignore's secret/\n",
    "pkg/notes.tmp": "ignored by pkg/.gitignore's *.tmp\n",
    "notes.tmp": "kept: pkg/.gitignore applies only to its subtree\n",
    "docs/a/b/draft.md": "ignored by docs/**/draft.md\n",
    "docs/draft.md": "ignored by docs/**/draft.md (** matches zero directories)\n",
    "docs/a/final.md": "kept\n",
    "vendor/lib/deep.js": "kept: git tracks vendored trees unless told otherwise\n",
}
IGNORE_TREE_VISIBLE = [
    ".gitignore",
    "build",
    "keep.log",
    "main.py",
    "notes.tmp",
    "pkg/.gitignore",
    "pkg/mod.py",
    "pkg/top_only.txt",
    "pkg/trace.log",
    "docs/a/final.md",
    "vendor/lib/deep.js",
]


def make_tree(root: Path, tree: dict[str, str]) -> None:
    for rel, text in tree.items():
        write(root, rel, text)


def test_gitignore_rules_nested_negation_directory_anchored_doublestar(tmp_path):
    make_tree(tmp_path, IGNORE_TREE)
    # breadth-first: every top-level file before anything in a subdirectory, names sorted within a directory
    assert scan(tmp_path) == IGNORE_TREE_VISIBLE


def git(root: Path, *args: str) -> str:
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    return subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True, text=True).stdout


@pytest.mark.skipif(shutil.which("git") is None, reason="no git to compare with")
def test_same_files_as_git_would_add(tmp_path):
    """Git itself is the oracle: the files `git add -A` would stage are exactly the ones read."""
    make_tree(tmp_path, IGNORE_TREE)
    write(tmp_path, "pkg/local_only.py", "ignored through .git/info/exclude\n")
    git(tmp_path, "init", "-q")
    (tmp_path / ".git" / "info").mkdir(exist_ok=True)
    (tmp_path / ".git" / "info" / "exclude").write_text("local_only.py\n")
    expected = sorted(git(tmp_path, "ls-files", "--others", "--exclude-standard").splitlines())
    assert "pkg/local_only.py" not in expected and "pkg/trace.log" in expected  # the scenario tests what it means to
    assert sorted(scan(tmp_path)) == expected


def test_git_info_exclude_and_gitignores_above_a_subfolder_apply(tmp_path):
    """A workspace folder inside a repository gets the rules git would apply there."""
    (tmp_path / ".git" / "info").mkdir(parents=True)
    (tmp_path / ".git" / "info" / "exclude").write_text("*.local\n")
    write(tmp_path, ".gitignore", "node_modules/\nservices/api/generated/\n")
    write(tmp_path, "services/.gitignore", "*.cache\n!api/keep.cache\n")
    api = tmp_path / "services" / "api"
    for rel in ["app.py", "settings.local", "x.cache", "keep.cache", "node_modules/m/index.js", "generated/g.py", "src/ok.py"]:
        write(api, rel)
    assert scan(api) == ["app.py", "keep.cache", "src/ok.py"]


def test_a_folder_the_repository_above_ignores_is_read_as_its_own_tree(tmp_path):
    """Opening an ignored directory (a Python under a pyenv clone that ignores /versions/) is on purpose."""
    (tmp_path / ".git").mkdir()
    write(tmp_path, ".gitignore", "/versions/\n*.pyc\n")
    lib = tmp_path / "versions" / "3.11" / "lib"
    write(lib, "json/decoder.py")
    write(lib, "json/decoder.pyc", "not applied either: the folder is outside what the repository sees\n")
    write(tmp_path, "plugins/p/.gitignore", "*.sh\n")
    write(tmp_path, "plugins/p/bin/run.sh")
    write(tmp_path, "plugins/p/bin/x.pyc")
    write(tmp_path, "plugins/p/bin/ok.py")
    assert scan(lib) == ["json/decoder.py", "json/decoder.pyc"]
    assert scan(tmp_path / "plugins" / "p" / "bin") == ["ok.py"]  # a folder the rules do not ignore gets them


def test_worktree_dot_git_file_points_to_the_common_exclude(tmp_path):
    """In a linked work tree `.git` is a file; `info/exclude` is the main repository's."""
    main_git = tmp_path / "main" / ".git"
    (main_git / "info").mkdir(parents=True)
    (main_git / "info" / "exclude").write_text("scratch.py\n")
    wt_git = main_git / "worktrees" / "wt"
    wt_git.mkdir(parents=True)
    (wt_git / "commondir").write_text("../..\n")
    wt = tmp_path / "wt"
    write(wt, ".git", f"gitdir: {wt_git}\n")
    write(wt, "scratch.py")
    write(wt, "real.py")
    assert scan(wt) == ["real.py"]


def test_nested_repository_reads_its_own_ignores(tmp_path):
    write(tmp_path, ".gitignore", "*.gen\n")
    write(tmp_path, "sub/.git/HEAD", "ref: refs/heads/main\n")
    write(tmp_path, "sub/.gitignore", "*.out\n")
    write(tmp_path, "sub/a.gen", "the outer *.gen does not reach into another repository\n")
    write(tmp_path, "sub/b.out")
    write(tmp_path, "top.gen")
    assert scan(tmp_path) == [".gitignore", "sub/.gitignore", "sub/a.gen"]


def test_vcs_metadata_is_never_read(tmp_path):
    for rel in [".git/config", ".git/HEAD", ".git/refs/heads/main", ".hg/hgrc", ".svn/entries", "pkg/.svn/entries", ".bzr/README"]:
        write(tmp_path, rel, "[core]\n")
    write(tmp_path, "pkg/code.py")
    write(tmp_path, ".github/workflows/ci.yml", "on: push\n")  # hidden but not VCS metadata: read
    assert scan(tmp_path) == ["pkg/code.py", ".github/workflows/ci.yml"]  # breadth-first


def test_installed_packages_and_caches_are_never_entered_below_a_folder(tmp_path):
    """npm's and pip's installs and tools' caches are not the project's code, ignored by git or not (no repository
    here, no .gitignore): a virtual environment is known by its pyvenv.cfg whatever its name. One opened as a
    folder itself is read, and a file saved in one is not read again either."""
    for rel in ["node_modules/left-pad/index.js", "web/node_modules/react/index.js", "__pycache__/app.py",
                ".venv/pyvenv.cfg", ".venv/lib/site.py", "tools/env/pyvenv.cfg", "tools/env/bin/activate_this.py",
                ".mypy_cache/3.11/app.data.json", ".tox/py311/log.txt"]:
        write(tmp_path, rel)
    write(tmp_path, "app.py")
    write(tmp_path, "tools/build.py")
    write(tmp_path, "docs/venv.md", "pyvenv.cfg is how a virtual environment is known\n")
    report = ReadReport()
    assert scan(tmp_path, report=report) == ["app.py", "docs/venv.md", "tools/build.py"]
    assert report.skipped_installed == 7
    assert scan(tmp_path / "node_modules") == ["left-pad/index.js"]
    assert scan(tmp_path / ".venv") == ["pyvenv.cfg", "lib/site.py"]
    assert folder_file([tmp_path], tmp_path / "web/node_modules/react/index.js") is None
    assert folder_file([tmp_path], tmp_path / "tools/env/bin/activate_this.py") is None
    assert folder_file([tmp_path], tmp_path / "tools/build.py") is not None


def test_binaries_and_non_utf8_are_skipped_text_is_kept(tmp_path):
    write(tmp_path, "image.png", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    write(tmp_path, "late_nul.bin", b"a" * 8000 + b"\x00" + b"b" * 100)
    write(tmp_path, "latin1.txt", "café\n".encode("latin-1"))
    write(tmp_path, "truncated_utf8.txt", "ok ".encode() + "é".encode()[:1])
    write(tmp_path, "unicode.py", "naïve = '日本語 🫨'\n")
    write(tmp_path, "bom.py", b"\xef\xbb\xbfx = 1\n")
    # a NUL past the first 8 KiB is not the binary sniff's business, and it is valid UTF-8
    write(tmp_path, "nul_after_8k.txt", b"c" * 9000 + b"\x00")
    report = ReadReport()
    files = {f.path.name: f.text for f in folder_files([tmp_path], report=report)}
    assert sorted(files) == ["bom.py", "nul_after_8k.txt", "unicode.py"]
    assert files["unicode.py"] == "naïve = '日本語 🫨'\n"
    assert files["bom.py"] == "x = 1\n"
    assert report.skipped_binary == 4


def test_oversize_files_are_skipped_by_size(tmp_path):
    limits = ReadLimits(max_file_bytes=1000)
    write(tmp_path, "at_cap.py", "a" * 1000)
    write(tmp_path, "over_cap.py", "a" * 1001)
    write(tmp_path, "small.py", "b = 2\n")
    report = ReadReport()
    assert scan(tmp_path, limits=limits, report=report) == ["at_cap.py", "small.py"]
    assert report.skipped_large == 1 and report.stopped is None


def test_total_cap_stops_before_exceeding_and_keeps_shallow_files_first(tmp_path):
    for i in range(5):
        write(tmp_path, f"f{i}.py", "x" * 100)
        write(tmp_path, f"deep/er/d{i}.py", "y" * 100)
    report = ReadReport()
    got = scan(tmp_path, limits=ReadLimits(max_total_bytes=650), report=report)
    assert got == [f"f{i}.py" for i in range(5)] + ["deep/er/d0.py"]
    assert report.bytes == 600 <= 650 and report.stopped == "max_total_bytes"


def test_file_count_cap(tmp_path):
    for i in range(10):
        write(tmp_path, f"f{i:02}.py")
    report = ReadReport()
    assert scan(tmp_path, limits=ReadLimits(max_files=4), report=report) == [f"f{i:02}.py" for i in range(4)]
    assert report.stopped == "max_files"


def test_entry_cap_bounds_the_walk_even_when_nothing_is_read(tmp_path):
    write(tmp_path, ".gitignore", "*.o\n")
    for i in range(50):
        write(tmp_path, f"obj/{i}.o")
    report = ReadReport()
    assert scan(tmp_path, limits=ReadLimits(max_entries=20), report=report) == [".gitignore"]
    assert report.stopped == "max_entries" and report.entries == 21


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="no symbolic links")
def test_symbolic_links_are_not_followed_loops_end(tmp_path):
    outside = tmp_path / "outside"
    write(outside, "secret.txt", "password\n")
    root = tmp_path / "ws"
    write(root, "a/code.py")
    (root / "a" / "loop").symlink_to(root, target_is_directory=True)  # a -> ws -> a -> ...
    (root / "a" / "self").symlink_to(root / "a", target_is_directory=True)
    (root / "out_dir").symlink_to(outside, target_is_directory=True)
    (root / "out_file.txt").symlink_to(outside / "secret.txt")
    (root / "alias.py").symlink_to(root / "a" / "code.py")
    (root / "dangling.py").symlink_to(root / "missing.py")
    report = ReadReport()
    got = [(f.path.relative_to(root).as_posix(), f.text) for f in folder_files([root], report=report)]
    assert got == [("a/code.py", "x = 1\n")]
    assert report.stopped is None


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="no symbolic links")
def test_a_linked_gitignore_is_not_followed(tmp_path):
    """Git (2.32+) does not follow a .gitignore that is a link; neither do we (it could point anywhere)."""
    write(tmp_path, "rules", "*.py\n")
    root = tmp_path / "ws"
    write(root, "a.py")
    (root / ".gitignore").symlink_to(tmp_path / "rules")
    assert scan(root) == ["a.py"]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs")
def test_fifos_are_not_opened(tmp_path):
    """A FIFO would block a read forever; the walk neither opens it nor hangs."""
    os.mkfifo(tmp_path / "pipe.py")
    write(tmp_path, "real.py")
    result: list[list[str]] = []
    walker = threading.Thread(target=lambda: result.append(scan(tmp_path)), daemon=True)
    walker.start()
    walker.join(10)
    assert result == [["real.py"]]


def test_order_is_deterministic_breadth_first_sorted(tmp_path):
    rels = ["z.py", "a.py", "m/b.py", "m/a.py", "b/deep/x.py", "b/c.py", "B.py", "_u.py"]
    for rel in rels:
        write(tmp_path, rel)
    first = scan(tmp_path)
    assert first == ["B.py", "_u.py", "a.py", "z.py", "b/c.py", "m/a.py", "m/b.py", "b/deep/x.py"]
    # the same tree built in another order reads the same sequence
    other = tmp_path.parent / (tmp_path.name + "_again")
    for rel in reversed(rels):
        write(other, rel)
    assert scan(other) == first


def test_several_folders_walk_together_and_a_file_is_read_once(tmp_path):
    write(tmp_path, "one/top1.py")
    write(tmp_path, "one/sub/deep1.py")
    write(tmp_path, "two/top2.py")
    folders = [tmp_path / "one", tmp_path / "two", tmp_path / "one" / "sub", tmp_path / "one"]
    got = [f.path.relative_to(tmp_path).as_posix() for f in folder_files(folders)]
    assert got == ["one/top1.py", "two/top2.py", "one/sub/deep1.py"]


def test_cancellation_returns_early(tmp_path):
    for i in range(20):
        write(tmp_path, f"f{i:02}.py")
    seen: list[str] = []
    report = ReadReport()
    for f in folder_files([tmp_path], cancelled=lambda: len(seen) >= 3, report=report):
        seen.append(f.path.name)
    assert seen == ["f00.py", "f01.py", "f02.py"]
    assert report.stopped == "cancelled"
    assert list(folder_files([tmp_path], cancelled=lambda: True)) == []


def test_progress_every_hundred_files_then_done(tmp_path):
    for i in range(250):
        write(tmp_path, f"f{i:03}.py")
    calls: list[tuple[str, float | None]] = []
    files = list(folder_files([tmp_path], progress=lambda message, fraction: calls.append((message, fraction))))
    assert len(files) == 250
    assert [fraction for _, fraction in calls] == [None, None, 1.0]
    assert calls[0][0] == "Folders: 99 files, 594 bytes"
    assert calls[-1][0] == "Folders: 250 files, 1500 bytes"


def test_missing_or_unreadable_folder_gives_nothing(tmp_path):
    report = ReadReport()
    assert list(folder_files([tmp_path / "missing"], report=report)) == []
    assert report.skipped_unreadable == 1


@pytest.mark.parametrize("field", ["max_file_bytes", "max_total_bytes", "max_files", "max_entries"])
def test_limits_reject_negative_values(field):
    with pytest.raises(ValueError, match=field):
        ReadLimits(**{field: -1})


def test_a_notebook_is_read_as_its_code_cells(tmp_path):
    notebook = {
        "cells": [
            {"cell_type": "markdown", "metadata": {}, "source": ["# Ledgers\n", "How they rotate."]},
            {"cell_type": "code", "execution_count": 1, "metadata": {}, "source": ["def rotate(entries):\n", "    return entries[1:]"],
             "outputs": [{"output_type": "display_data", "data": {"image/png": "iVBORw0KGgo" * 40}}]},
            {"cell_type": "code", "execution_count": 2, "metadata": {}, "source": "rotate([1, 2])", "outputs": []},
        ],
        "metadata": {}, "nbformat": 4, "nbformat_minor": 5,
    }
    write(tmp_path, "ledgers.ipynb", json.dumps(notebook, indent=1))
    write(tmp_path, "empty.ipynb", json.dumps({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    write(tmp_path, "broken.ipynb", '{"cells": [')  # no notebook (a save cut short): read as the text it is
    files = {f.path.name: f.text for f in folder_files([tmp_path])}
    assert files == {
        "ledgers.ipynb": "def rotate(entries):\n    return entries[1:]\n\nrotate([1, 2])\n",
        "empty.ipynb": "",
        "broken.ipynb": '{"cells": [',
    }
