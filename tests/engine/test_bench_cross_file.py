"""`python -m harness.bench --cross-file`: case drawing, the identifier metrics, the context baseline, and a tiny real run."""

import json
import re
import shutil
import sys
from pathlib import Path

import pytest

from harness.bench import cross_file, quality, retrieval, sources

DEFINES = '''"""Checksums."""

WEIGHTS = (3, 7, 1)


def compute_weighted_checksum(data, weights=WEIGHTS):
    return sum(w * b for w, b in zip(weights, data)) % 256


class ChecksumError(ValueError):
    pass
'''

USES = '''"""Frames."""

import textwrap

from .checksums import compute_weighted_checksum, ChecksumError


def check_frame(frame):
    # the checksum is the last byte
    total = compute_weighted_checksum(frame[:-1])
    if total != frame[-1]:
        raise ChecksumError(textwrap.dedent("bad frame"))
    return frame[:-1]
'''


@pytest.fixture
def package(tmp_path) -> Path:
    root = tmp_path / "frames"
    root.mkdir()
    (root / "__init__.py").write_text("")
    (root / "checksums.py").write_text(DEFINES)
    (root / "frame.py").write_text(USES)
    tests = root / "tests"
    tests.mkdir()
    (tests / "frame_cases.py").write_text("def test_nothing():\n    leaked_test_name = 1\n")
    (root / "test_checksums.py").write_text("def test_more():\n    leaked_test_name = 2\n")
    return root


def case_at(
    directory: sources.Directory, path: Path, needle: str, typed: int, category: str = "any", after: str = ""
) -> cross_file.CrossFileCase:
    """The case with the cursor ``typed`` characters into the first whole-word ``needle`` of ``path``
    after the text ``after``."""
    source = directory.texts[str(path)]
    pattern = re.compile(rf"(?<![A-Za-z0-9_$]){re.escape(needle)}(?![A-Za-z0-9_$])")
    start = pattern.search(source, source.index(after)).start()
    cursor = start + typed
    line_begin = source.rfind("\n", 0, cursor) + 1
    prefix, word_rest, line_rest = quality.around_cursor(source, cursor, start + len(needle))
    return cross_file.CrossFileCase(
        directory=directory.label, file=str(path), category=category, identifier=needle,
        line_number=source.count("\n", 0, cursor), typed=needle[:typed], line_start=source[line_begin:cursor],
        prefix=prefix, word_rest=word_rest, line_rest=line_rest,
    )


# ---------------------------------------------------------------- directories and cases


def test_a_directory_leaves_tests_out(package):
    directory = sources.load_directory(package)
    assert directory.language is sources.PYTHON
    assert sorted(Path(p).name for p in directory.texts) == ["checksums.py", "frame.py"]  # and no empty file
    assert directory.shown_path(str(package / "frame.py")).endswith("frames/frame.py")


def test_cross_file_names_are_first_used_here_and_used_in_another_file(package):
    directory = sources.load_directory(package)
    names = [m.group() for m in cross_file.cross_file_names(directory, str(package / "frame.py"))]
    assert "compute_weighted_checksum" in names and "ChecksumError" in names
    assert "textwrap" not in names  # no other file uses it
    assert "frame" not in names and "check_frame" not in names  # this file's own names
    assert "zip" not in cross_file.cross_file_names(directory, str(package / "checksums.py"))  # builtins are no one's own


@pytest.mark.parametrize("directory_set", ["<stdlib>/json", "<stdlib>/email"])
def test_drawn_cases_sit_inside_identifiers(directory_set):
    dirs = sources.source_dirs(directory_set)
    by_label = {d.label: d for d in dirs}
    cases = cross_file.draw_cases(dirs, 40, seed=5)
    assert [c.category for c in cases].count("cross_file") == 20
    for case in cases:
        directory = by_label[case.directory]
        source = directory.texts[case.file]
        names = directory.language.names
        assert case.identifier == case.typed + case.word_rest
        assert 0 < len(case.typed) < len(case.identifier)
        assert case.prefix.endswith(case.line_start) and case.line_start.endswith(case.typed)
        cursor = source.index(case.prefix + case.line_rest) + len(case.prefix)
        assert names.match(source, cursor - len(case.typed)).group() == case.identifier
        assert case.line_rest == source[cursor:].partition("\n")[0].rstrip()
        lines = source.split("\n")
        assert lines[case.line_number].startswith(case.line_start + case.line_rest)
        document = cross_file.current_document(source, case.line_number)
        assert document.split("\n") == lines[: case.line_number] + lines[case.line_number + 1 :]
        if case.category == "cross_file":
            assert len(case.typed) == cross_file.CROSS_FILE_TYPED
            before = source[: cursor - len(case.typed)]
            assert case.identifier not in set(names.findall(before)), "a cross_file name appears before the cursor"
            others = [directory.code[p] for p in directory.texts if p != case.file]
            assert any(case.identifier in names.findall(text) for text in others)


def test_development_and_check_sets_are_disjoint():
    dev = {d.label for d in sources.source_dirs("dev")}
    check = {d.label for d in sources.source_dirs("check")}
    assert not dev & check
    assert {"email", "json", "asyncio", "importlib", "concurrent"} <= dev
    assert {"xml", "urllib", "unittest"} <= check
    assert all("a" <= label[0] <= "m" for label in dev if "/" not in label)
    assert all("n" <= label[0] <= "z" for label in check)
    if sources.npm_root() is not None:
        assert any(label.endswith("/lib") for label in dev)


def test_a_glob_without_directories_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="no source directory"):
        sources.source_dirs(str(tmp_path / "nothing*"))


# ---------------------------------------------------------------- metrics


def test_metrics_on_hand_made_completions(package):
    directory = sources.load_directory(package)
    case = case_at(directory, package / "frame.py", "compute_weighted_checksum", 2, "cross_file", after="total")
    assert case.typed == "co" and case.line_rest == "mpute_weighted_checksum(frame[:-1])"

    right = cross_file.score(case, directory, "mpute_weighted_checksum(frame[:-1])")
    assert right == {"next_identifier": True, "identifier_exact": True, "word_exact": True, "line_exact": True,
                     "names": 2, "undefined": [], "declared": [], "words_in_prose": 0}

    other_args = cross_file.score(case, directory, "mpute_weighted_checksum(frame [: -1]) ")
    assert other_args["identifier_exact"] and not other_args["line_exact"]  # same names, other spacing

    invented = cross_file.score(case, directory, "mpute_checksum(frame, weights=WEIGHTS)")
    assert invented == {"next_identifier": False, "identifier_exact": False, "word_exact": False,
                        "line_exact": False, "names": 4, "undefined": ["compute_checksum"], "declared": [],
                        "words_in_prose": 0}
    # words in a comment are no names: not counted, undefined or not
    commented = cross_file.score(case, directory, "mpute_checksum(frame)  # the checksum of every frame")
    assert (commented["names"], commented["undefined"], commented["words_in_prose"]) == (2, ["compute_checksum"], 5)

    # builtins, the module's imports (read, not executed) and names of the file itself are known
    known = cross_file.score(case, directory, "nfigure_frames(len(textwrap.indent(check_frame, 2)), total)")
    assert known["undefined"] == ["configure_frames"] and known["names"] == 6  # 'co' + 'nfigure_frames'
    assert cross_file.score(case, directory, "unt(textwrap.shorten)")["undefined"] == []  # list.count, str.count...

    assert cross_file.score(case, directory, "") == {"next_identifier": False, "identifier_exact": False,
                                             "word_exact": False, "line_exact": False, "names": 0, "undefined": [],
                                             "declared": [], "words_in_prose": 0}


def test_a_new_name_the_completion_declares_is_no_invention(package):
    """An undefined name the completion assigns to or declares is the user's new one (``declared``); one it
    only uses is invented."""
    directory = sources.load_directory(package)
    case = case_at(directory, package / "frame.py", "total", 2, after="#")
    assert case.line_start == "    to"
    assigned = cross_file.score(case, directory, "tal_sum = compute_weighted_checksum(frame[:-1])")
    assert (assigned["undefined"], assigned["declared"]) == (["total_sum"], ["total_sum"])
    called = cross_file.score(case, directory, "tal_sum(frame)")
    assert (called["undefined"], called["declared"]) == (["total_sum"], [])
    looped = cross_file.score(case, directory, "tal = 0\n    for framelet in frames_of(frame):")
    assert (looped["undefined"], looped["declared"]) == (["framelet", "frames_of"], ["framelet"])


def test_the_cursor_line_is_not_known_to_the_corpus(package):
    directory = sources.load_directory(package)
    # 'total' is defined on the cursor's line only and used on the next: known from the document
    case = case_at(directory, package / "frame.py", "total", 3)
    assert "total" in cross_file.KnownNames(directory, case)
    (package / "solo.py").write_text("def f():\n    unique_local_name = 1\n")
    directory = sources.load_directory(package)
    case = case_at(directory, package / "solo.py", "unique_local_name", 2)
    known = cross_file.KnownNames(directory, case)
    assert "unique_local_name" not in known and "f" in known and "len" in known
    assert "leaked_test_name" not in known  # tests are not part of the project


def test_imported_stdlib_modules_are_read_not_imported():
    imported = "xml.dom.minidom" in sys.modules
    assert "parseString" in sources._python_module_names("xml.dom.minidom")
    assert ("xml.dom.minidom" in sys.modules) == imported  # read, not imported
    assert sources._python_module_names("no_such_module_anywhere") == frozenset()
    assert "sqrt" in sources._python_module_names("math")  # a C module has no source: listed


def test_javascript_names_and_globals(tmp_path):
    root = tmp_path / "lib"
    root.mkdir()
    (root / "a.js").write_text("const fetchRegistryIndex = async (spec) => spec\nmodule.exports = { fetchRegistryIndex }\n")
    (root / "b.js").write_text("// uses a\nconst { fetchRegistryIndex } = require('./a.js')\nfetchRegistryIndex($x).then(console.log)\n")
    directory = sources.load_directory(root)
    assert directory.language is sources.JAVASCRIPT
    assert [m.group() for m in cross_file.cross_file_names(directory, str(root / "b.js"))] == ["fetchRegistryIndex"]
    case = case_at(directory, root / "b.js", "fetchRegistryIndex", 2, after=")\n")
    result = cross_file.score(case, directory, "tchRegistryIndex($y).then(console.logg)")
    assert result["next_identifier"] and not result["identifier_exact"]
    if shutil.which("node"):  # the globals and their members come from node
        assert result["undefined"] == ["$y", "logg"]


def write_file(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_go_and_java_read_their_imports_from_the_source_tree(tmp_path):
    """A Go file's imported packages come from the ``src/`` that holds ``builtin/``, a Java file's classes and
    ``java.lang`` from the folder that holds ``java/lang/``: their names are known, never undefined."""
    go = tmp_path / "go" / "src"
    for path, text in {"builtin/builtin.go": "package builtin\n", "strings/strings.go": "package strings\nfunc TrimSpace(s string) string\n",
                       "app/a.go": 'package app\n\nimport (\n\t"strings"\n)\n\nfunc clean(s string) string { return strings.TrimSpace(s) }\n',
                       "app/b.go": "package app\n// a raw string: `clean it`\nvar cleaned = clean(`x`)\n"}.items():
        write_file(go / path, text)
    directory = sources.load_directory(go / "app")
    assert directory.language is sources.GO
    assert sources.GO.code_only("x := `a b` // c").rstrip() == "x :="
    a = str(go / "app" / "a.go")
    assert {"strings", "TrimSpace"} <= sources.imported_names(directory.texts[a], a, directory)
    assert "len" in sources.builtin_names(sources.GO)
    java = tmp_path / "jdk"
    for path, text in {"java/lang/Object.java": "package java.lang;\npublic class Object { public String toString() }\n",
                       "java/util/List.java": "package java.util;\npublic interface List<E> { int size(); }\n",
                       "app/A.java": "package app;\nimport java.util.List;\nclass A { int n(List<String> xs) { return xs.size(); } }\n",
                       "app/B.java": 'package app;\nclass B { String s = """\n  a text block\n  """; }\n'}.items():
        write_file(java / path, text)
    directory = sources.load_directory(java / "app")
    assert directory.language is sources.JAVA
    b = str(java / "app" / "B.java")
    assert "text" not in sources.JAVA.names_in(directory.code[b])
    a = str(java / "app" / "A.java")
    assert {"size", "toString", "Object"} <= sources.imported_names(directory.texts[a], a, directory)


def test_rust_reads_its_uses_from_the_crate_and_the_library(tmp_path, monkeypatch):
    """A Rust file's ``use`` trees and written paths name modules of its crate (``crate::``, ``super::``) and of
    ``core``/``std`` (Debian's ``rust-src``, here a small stand-in library): their names are known. A lifetime
    is code, a character literal is not; ``tests.rs`` is a test."""
    for path, text in {
        "library/core/src/lib.rs": "pub mod option;\n",
        "library/core/src/option.rs": "pub enum Option<T> { Some(T), None }\nimpl<T> Option<T> { pub fn unwrap_or_default(self) }\n",
        "app/src/lib.rs": "mod io;\nmod parse;\n",
        "app/src/parse.rs": "pub fn next_token() {}\npub struct Token;\n",
        "app/src/io/mod.rs": "pub mod reader;\npub struct Buffer;\n",
        "app/src/io/reader.rs": "use super::Buffer;\nuse crate::parse::{self, Token as T};\nuse core::option::Option;\n"
                                "pub fn read<'a>(b: &'a Buffer) -> char { let c = '\\''; parse::next_token(b) }\n",
        "app/src/io/tests.rs": "#[test]\nfn reads() {}\n",
    }.items():
        write_file(tmp_path / path, text)
    monkeypatch.setattr(sources, "rust_library", lambda: tmp_path / "library")
    directory = sources.load_directory(tmp_path / "app" / "src" / "io")
    assert directory.language is sources.RUST
    reader = str(tmp_path / "app" / "src" / "io" / "reader.rs")
    assert sorted(Path(p).name for p in directory.texts) == ["mod.rs", "reader.rs"]
    assert {"Buffer", "next_token", "Token", "unwrap_or_default"} <= sources.imported_names(directory.texts[reader], reader, directory)
    assert sources.RUST.code_only("let c = '\\''; &'a x // y").rstrip() == "let c =     ; &'a x"
    assert sources._rust_module(["super", "super", "parse"], Path(reader)) == tmp_path / "app" / "src" / "parse.rs"
    assert sources._rust_module(["super", "super", "super", "parse"], Path(reader)) is None  # above the crate
    assert sources._rust_module(["libc", "c_int"], Path(reader)) is None  # another crate


def test_summaries_pool_undefined_names_over_cases():
    def outcome(category, names, undefined, ms, good, declared=()):
        return cross_file.CrossFileOutcome(category, good, good, good, good, names, undefined, list(declared), ms,
                                           0.0, 3, "x")

    rows = [outcome("cross_file", 4, ["a"], 100, True), outcome("any", 1, [], 300, False),
            outcome("any", 5, ["b", "c"], 200, True, declared=["c"])]
    row = cross_file.summarise(rows)
    assert row["n"] == 3 and row["next_identifier"] == round(2 / 3, 4) and row["undefined_rate"] == 0.3
    assert row["invented_rate"] == 0.2  # "c" is declared where it is written
    assert row["p50_ms"] == 200 and row["names"] == 10
    assert cross_file.summarise([]) == {"n": 0}


def test_modes():
    assert cross_file.parse_mode("cpc") == ("cpc", False, False)
    assert cross_file.parse_mode("naive+fusion") == ("naive", True, False)
    assert cross_file.parse_mode("cpc+context+fusion") == ("cpc", True, True)
    for bad in ("cpc+magic", "fusion", "cpc+fusion+fusion"):
        with pytest.raises(ValueError):
            cross_file.parse_mode(bad)


def test_fusion_weights_option():
    from cpc.fusion import FusionWeights

    assert FusionWeights.parse(None) == FusionWeights()
    weights = FusionWeights.parse("ngram=0.25, identifiers=1.5")
    assert (weights.ngram, weights.identifiers) == (0.25, 1.5)
    assert FusionWeights.parse("ngram=0").identifiers == FusionWeights().identifiers
    for bad in ("ngram", "speed=1", "ngram=fast"):
        with pytest.raises(ValueError):
            FusionWeights.parse(bad)


# ---------------------------------------------------------------- the context baseline


def test_windows_and_the_most_similar_chunk(package):
    text = "\n".join(f"line_{k} = {k}" for k in range(70))
    chunks = retrieval.chunks_of("x.py", text, sources.PYTHON)
    assert [c.first_line for c in chunks] == [0, 15, 30, 45]
    assert chunks[-1].text.endswith("line_69 = 69") and all(c.text.count("\n") <= 29 for c in chunks)

    directory = sources.load_directory(package)
    chunks = [c for p, t in directory.texts.items() if not p.endswith("frame.py")
              for c in retrieval.chunks_of(directory.shown_path(p), t, sources.PYTHON)]
    best = retrieval.best_chunk(chunks, "def check(frame):\n    total = compute_weighted_checksum(data, weights)\n", sources.PYTHON)
    assert best.path.endswith("frames/checksums.py") and "def compute_weighted_checksum" in best.text
    assert retrieval.best_chunk(chunks, "nothing_shared_here", sources.PYTHON) is None
    assert retrieval.jaccard(frozenset("ab"), frozenset("bc")) == pytest.approx(1 / 3)


def test_context_is_pasted_before_a_trimmed_prefix(smollm2_tokenizer):
    chunk = retrieval.Chunk("frames/checksums.py", 0, DEFINES, frozenset())
    count = lambda text: len(smollm2_tokenizer.encode(text.encode("utf-8")))  # noqa: E731
    short = "x = compute_wei"
    prompt = retrieval.with_context(smollm2_tokenizer, short, chunk, "#", 1024)
    assert prompt == retrieval.context_block(chunk, "#") + short
    assert prompt.startswith("# Path: frames/checksums.py\n# \"\"\"Checksums.\"\"\"\n")
    assert "# def compute_weighted_checksum(data, weights=WEIGHTS):" in prompt

    long_prefix = "".join(f"value_{k} = compute(value_{k - 1})\n" for k in range(1, 400)) + "total = compute_wei"
    prompt = retrieval.with_context(smollm2_tokenizer, long_prefix, chunk, "#", 256)
    block = retrieval.context_block(chunk, "#")
    kept = prompt[len(block) :]
    assert prompt.startswith(block) and long_prefix.endswith(kept) and kept.endswith("total = compute_wei")
    assert long_prefix[: len(long_prefix) - len(kept)].endswith("\n")  # cut at a line start
    assert count(prompt) <= 256 and count(prompt) > 200  # fits, and not trimmed much more than needed

    huge = retrieval.Chunk("big.py", 0, "\n".join(f"name_{k} = {k} * {k}" for k in range(30)), frozenset())
    prompt = retrieval.with_context(smollm2_tokenizer, long_prefix, huge, "#", 128)
    assert count(prompt) <= 128 and prompt.startswith("# Path: big.py\n") and prompt.endswith("total = compute_wei")
    assert retrieval.with_context(smollm2_tokenizer, short, None, "#", 128) == short


# ---------------------------------------------------------------- command line and a real run


@pytest.fixture(scope="module")
def smollm2_engine():
    from cpc.engine import Engine

    return Engine.load("smollm2", threads=1)


def test_a_tiny_real_run(smollm2_engine, tmp_path, capsys):
    modes = ["cpc", "cpc+context", "cpc+fusion", "naive+fusion"]
    result = cross_file.run(smollm2_engine, "<stdlib>/json", 2, 1, modes, max_tokens=6)
    json.loads(json.dumps(result))
    assert result["model"].endswith(".gguf") and result["cases"] == 2 and result["directories"] == ["json"]
    assert set(result["results"]) == set(result["overall"]) == set(modes)
    for mode in modes:
        assert set(result["results"][mode]) == set(cross_file.CATEGORIES)
        for row in [*result["results"][mode].values(), result["overall"][mode]]:
            assert row["n"] in (1, 2)
            assert {*cross_file.METRICS, "p50_ms", "p95_ms", "lm_calls", "names"} <= row.keys()
            assert 0 <= row["line_exact"] <= row["identifier_exact"] <= 1
            assert 0 <= row["undefined_rate"] <= 1 and row["p95_ms"] >= row["p50_ms"] > 0
    assert len(result["per_case"]) == 2
    for case in result["per_case"]:
        assert {"directory", "file", "category", "identifier", "expected", "line_rest", *modes} <= case.keys()
        assert case["cpc+context"]["prepare_ms"] > 0 and case["cpc"]["prepare_ms"] == 0
    assert {"fusion_minus_cpc", "fusion_vs_context", "targets_met"} <= result["acceptance"].keys()
    assert result["corpora"]["json"]["files"] == 5
    cross_file.print_table(result)
    assert "next id" in capsys.readouterr().out
    cross_file.plot(result, str(tmp_path / "plot.png"))
    assert (tmp_path / "plot.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
