"""``python -m harness.bench --cross-file``: does the rest of the repository help? Completion on repository-level cases.

A case is a cursor in a file of a *source directory* (a standard-library
package such as ``email/``, a ``lib/`` of an npm package, or a folder of
Go, Java or Rust sources), strictly inside an identifier. Two categories, half the cases each:

- ``cross_file``: a name (not a keyword or builtin) that occurs in another
  file of the directory and nowhere before the cursor in its own file; the
  cursor sits 2 characters into it. Only the rest of the repository can
  tell the model this name: this is where fusion should help.
- ``any``: any identifier, the cursor anywhere strictly inside it (the
  distribution of `harness.bench.quality`).

What a case's request may know (its *project*): the other files of the
directory and the cursor's file without the cursor's line (an open
document). Every mode completes every case from cold caches, single-line,
prefix only:

- ``cpc``, ``naive``, ``heal``: `cpc.generate` as it is;
- ``+fusion``: the same, with `cpc.fusion` scores of the project in the
  decoder (``ProjectCorpus.fusion(current=...)``, weights from
  ``--fusion-weights``);
- ``+context``: the peers' way (Continue, llama.vim, Tabby): the 30-line
  window of the other files whose identifiers are most like (Jaccard) those
  of the last 15 lines before the cursor, pasted before the prefix as a
  comment block with its path; the prefix loses its oldest lines so that
  both fit the engine's prompt window.

Metrics per mode, per category and overall: `harness.bench.quality`'s
``word_exact`` and ``line_exact``; ``next_identifier`` (the identifier at the cursor, completed,
is the true one); ``identifier_exact`` (the identifiers of the completed
line are the true line's); ``undefined_rate`` (of the names a completion
writes in code, the share that exist nowhere in the project, the file, the
language's builtins and keywords, or the modules the file imports, read as
source and never executed); ``invented_rate`` (the share of those that the
completion uses without declaring them: an undefined name it declares,
``for item in`` or ``int count``, as `cpc.syntax` reads a declaration, is
the user's new name, not an invention); latency (request plus what a mode prepares:
the fusion object, the context retrieval) and model calls.

Source-directory sets: ``dev`` (standard-library packages a–m and npm's own
``node_modules/*/lib``: tune here) and ``check`` (standard-library packages
n–z: never tune on them), or a glob of directories.

This module owns the case drawing, the project of a case, the identifier
metrics and the run; the source directories are `harness.bench.sources`'s,
the context baseline `harness.bench.retrieval`'s, and the cold request, the
word/line scores and the summaries `harness.bench.quality`'s.
"""

from __future__ import annotations

import json
import random
import re
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from cpc.fusion import FusionWeights, ProjectCorpus
from cpc.generate import MODES, Options
from cpc.syntax import ASSIGNMENT, DEFINE, START, Place, Syntax
from harness.bench import quality
from harness.bench.report import LATENCY_COLUMNS, grouped_bars, print_rows, pyplot, ratio
from harness.bench.retrieval import Chunk, best_chunk, chunks_of, with_context
from harness.bench.sources import Directory, Language, builtin_names, imported_names, source_dirs

if TYPE_CHECKING:
    from cpc.engine import Engine

CATEGORIES = ("cross_file", "any")
DEFAULT_MODES = ("cpc", "cpc+fusion", "cpc+context", "naive+fusion")
EXTRAS = ("fusion", "context")
RATES = ("next_identifier", "identifier_exact", "word_exact", "line_exact")
METRICS = (*RATES, "undefined_rate", "invented_rate")

CONVENTIONS = frozenset({"self", "cls"})
"""Names every file uses by convention, not the project's own: never ``cross_file`` cases."""
CROSS_FILE_TYPED = 2
"""Characters of a ``cross_file`` name typed before the cursor."""
MIN_NAME = 4
"""Drawn identifiers have at least this many characters (as in `harness.bench.quality`)."""
MAX_LINE_CHARS = 400
"""No cursor on a longer line (minified code)."""


# ---------------------------------------------------------------- cases


@dataclass(frozen=True)
class CrossFileCase:
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
    """The text before the cursor (at most `harness.bench.quality.CONTEXT_CHARS`)."""
    word_rest: str
    line_rest: str


def draw_cases(dirs: list[Directory], count: int, seed: int) -> list[CrossFileCase]:
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
    cases: list[CrossFileCase] = []
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
        prefix, word_rest, line_rest = quality.around_cursor(source, cursor, word.end())
        cases.append(
            CrossFileCase(
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
class CrossFileOutcome:
    category: str
    next_identifier: bool
    identifier_exact: bool
    word_exact: bool
    line_exact: bool
    names: int
    """Names the completion wrote in code (the identifier at the cursor, completed, and those after it)."""
    undefined: list[str]
    """Those of them that exist nowhere the request could know of."""
    declared: list[str]
    """Those of ``undefined`` that the completion declares (`declares`): new names, not inventions."""
    ms: float
    """The request, plus `prepare_ms`."""
    prepare_ms: float
    """What the mode prepared before the request: the fusion object, or the context retrieval."""
    lm_calls: int
    text: str
    words_in_prose: int = 0
    """Words the completion wrote in comments and strings (not names, so not counted in ``names``)."""


def produced_names(case: CrossFileCase, text: str, directory: Directory) -> tuple[list[str], list[bool], int]:
    """The names a completion writes in code: those of the typed part of the identifier plus the completion,
    outside comments and strings; whether it declares each one (`declares`); and how many words it writes in
    comments and strings (none for an empty completion).

    A word in a docstring or a comment is no name, so it is not counted as one (``undefined_rate``): the
    completion is read in its file, followed by the lines after the cursor's, so that a string it is inside
    of closes where the file closes it.
    """
    if not text:
        return [], [], 0
    language = directory.language
    source = directory.texts[case.file]
    lines = source.split("\n")
    begin = sum(len(line) + 1 for line in lines[: case.line_number]) + len(case.line_start) - len(case.typed)
    written = case.typed + text
    after = "\n" + "\n".join(lines[case.line_number + 1 :])
    code = language.code_only(source[:begin] + written + after)[begin : begin + len(written)]
    found = list(language.names.finditer(code))
    syntax = Syntax.of(case.file)
    declared = [declares(source[:begin] + written, begin + name.start(), begin + name.end(), syntax) for name in found]
    return [name.group() for name in found], declared, len(language.names_in(written)) - len(found)


def declares(text: str, start: int, end: int, syntax: Syntax) -> bool:
    """Whether the name at ``text[start:end]`` is declared there, as the identifier model reads a declaration:
    a new name (`cpc.syntax.DEFINE`), or a statement's first word that is assigned to (`START`).

    >>> from cpc.syntax import PYTHON
    >>> [declares(t, 4, 8, PYTHON) for t in ("for item in xs", "    rows = []", "    rows.sort()", "f = rows")]
    [True, True, False, False]
    """
    role = Place.of(text[:start].encode(), syntax).role()
    rest = text[end:].partition("\n")[0]  # a name the line leaves alone is not assigned to
    return role == DEFINE or (role == START and bool(rest.strip()) and ASSIGNMENT.match(rest.encode()) is not None)


def next_identifier(case: CrossFileCase, text: str, language: Language) -> bool:
    """The first identifier of the typed part + the completion (the identifier at the cursor) is the true one."""
    found = language.names.search(case.typed + text)
    return found is not None and found.group() == case.identifier


def identifier_exact(case: CrossFileCase, text: str, language: Language) -> bool:
    """The completed line has exactly the true line's identifiers, in order."""
    line = case.line_start + text.rstrip()
    return language.names_in(line) == language.names_in(case.line_start + case.line_rest)


class KnownNames:
    """Whether a name exists somewhere a request could know of (for ``undefined_rate``)."""

    def __init__(self, directory: Directory, case: CrossFileCase) -> None:
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




def score(case: CrossFileCase, directory: Directory, text: str) -> dict:
    """The quality fields of an outcome for a completion ``text``."""
    language = directory.language
    produced, declared, in_prose = produced_names(case, text, directory)
    known = KnownNames(directory, case)
    undefined = [(name, new) for name, new in zip(produced, declared) if name not in known]
    return {
        "next_identifier": next_identifier(case, text, language),
        "identifier_exact": identifier_exact(case, text, language),
        "word_exact": quality.word_exact(text, case.word_rest, language.word_chars),
        "line_exact": quality.line_exact(text, case.line_rest),
        "names": len(produced),
        "undefined": [name for name, _ in undefined],
        "declared": [name for name, new in undefined if new],
        "words_in_prose": in_prose,
    }


def summarise(outcomes: list[CrossFileOutcome]) -> dict:
    """`harness.bench.quality.summarise` with the identifier rates, plus the undefined-name and invented-name
    rates over all names produced."""
    row = quality.summarise(outcomes, rates=RATES)
    if outcomes:
        names = sum(o.names for o in outcomes)
        undefined = sum(len(o.undefined) for o in outcomes)
        row["undefined_rate"] = round(undefined / names, 4) if names else 0.0
        row["invented_rate"] = round((undefined - sum(len(o.declared) for o in outcomes)) / names, 4) if names else 0.0
        row["names"] = names
    return row


# ---------------------------------------------------------------- modes and the run


def parse_mode(mode: str) -> tuple[str, bool, bool]:
    """``"cpc+fusion"`` -> ``("cpc", True, False)``: the generation mode, fusion, prompt context."""
    base, *extras = mode.split("+")
    if base not in MODES or any(extra not in EXTRAS for extra in extras) or len(set(extras)) != len(extras):
        raise ValueError(
            f"unknown mode {mode!r}: one of {', '.join(MODES)}, optionally followed by +fusion and/or +context"
        )
    return base, "fusion" in extras, "context" in extras


class DirectoryCorpora:
    """The `cpc.fusion.ProjectCorpus` of one directory at a time, built once from all its files; the
    cursor's file is withheld from it and served as an open document (without the cursor's line)."""

    def __init__(self, engine: Engine, progress: Callable[[str, float], None]) -> None:
        self.engine = engine
        self.progress = progress
        self.directory: Directory | None = None
        self.corpus = None
        self.withheld: str | None = None
        self.stats: dict[str, dict] = {}

    def fusion(self, directory: Directory, case: CrossFileCase, weights: FusionWeights) -> tuple[object, float]:
        """The fusion object for ``case`` and how long making it took (ms)."""
        if directory is not self.directory:
            self.directory, self.corpus, self.withheld = directory, None, None
            started = time.perf_counter()
            corpus = ProjectCorpus(self.engine.tokenizer)
            for number, (path, text) in enumerate(directory.texts.items()):
                corpus.add_file(path, text)
                self.progress(f"counting {directory.label}", (number + 1) / len(directory.texts))
            corpus.commit()
            self.stats[directory.label] = {"build_ms": round((time.perf_counter() - started) * 1000, 1)} | corpus.stats()
            self.corpus = corpus
        if self.withheld != case.file:
            if self.withheld is not None:
                self.corpus.close_document(_document_key(self.withheld))
                self.corpus.add_file(self.withheld, directory.texts[self.withheld])
            self.corpus.remove_file(case.file)
            self.corpus.commit()
            self.withheld = case.file
        # The document is the file without the cursor's line already: no line of it is left out.
        self.corpus.update_document(
            _document_key(case.file), current_document(directory.texts[case.file], case.line_number)
        )
        started = time.perf_counter()
        fusion = self.corpus.fusion(current=_document_key(case.file), weights=weights, cursor_line=None)
        return fusion, (time.perf_counter() - started) * 1000


def _document_key(path: str) -> str:
    return Path(path).as_uri()


def complete_case(
    engine: Engine, directory: Directory, case: CrossFileCase, mode: str, max_tokens: int,
    corpora: DirectoryCorpora | None, weights: FusionWeights | None, chunks: dict[str, list[Chunk]],
) -> CrossFileOutcome:
    """One cold request of ``mode`` for ``case``, scored."""
    base, fused, context = parse_mode(mode)
    fusion, prepare_ms = None, 0.0
    prefix = case.prefix
    if context:
        started = time.perf_counter()
        others = (chunk for path, own in chunks.items() if path != case.file for chunk in own)
        chunk = best_chunk(others, case.prefix, directory.language)
        prefix = with_context(
            engine.tokenizer, case.prefix, chunk, directory.language.comment, engine.prompt_tokens
        )
        prepare_ms += (time.perf_counter() - started) * 1000
    if fused:
        fusion, fusion_ms = corpora.fusion(directory, case, weights)
        prepare_ms += fusion_ms
    generation = quality.cold_generate(engine, prefix, Options(mode=base, max_tokens=max_tokens), fusion=fusion)
    text = quality.first_text(generation)
    return CrossFileOutcome(
        category=case.category,
        **score(case, directory, text),
        ms=round(generation.elapsed_ms + prepare_ms, 2),
        prepare_ms=round(prepare_ms, 2),
        lm_calls=generation.lm_calls,
        text=text,
    )


def run(
    engine: Engine,
    directory_set: str,
    cases: int,
    seed: int,
    modes: list[str],
    max_tokens: int = 48,
    weights: FusionWeights | None = None,
    progress: Callable[[str, float], None] | None = None,
) -> dict:
    """The whole benchmark: the ``--json`` object of ``python -m harness.bench --cross-file``."""
    report = progress or (lambda message, fraction: None)
    for mode in modes:
        parse_mode(mode)
    fused = any(parse_mode(mode)[1] for mode in modes)
    if fused and weights is None:
        weights = FusionWeights()
    dirs = {directory.label: directory for directory in source_dirs(directory_set)}
    drawn = draw_cases(list(dirs.values()), cases, seed)
    # One directory at a time, one file after another: the corpus is built once per directory.
    order = sorted(range(len(drawn)), key=lambda k: (drawn[k].directory, drawn[k].file, k))
    outcomes: dict[str, list[CrossFileOutcome | None]] = {mode: [None] * len(drawn) for mode in modes}
    corpora = DirectoryCorpora(engine, report) if fused else None
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
            outcomes[mode][k] = complete_case(engine, directory, case, mode, max_tokens, corpora, weights, chunks)
        report(f"case {done}/{len(drawn)} ({case.category}, {case.directory})", done / len(drawn))
    return {
        "model": engine.vocab.name,
        "directory_set": directory_set,
        "directories": sorted({case.directory for case in drawn}),
        "cases": len(drawn),
        "seed": seed,
        "modes": modes,
        "max_tokens": max_tokens,
        "fusion_weights": asdict(weights) if weights is not None else None,
        **_summaries(outcomes),
        "corpora": corpora.stats if corpora else {},
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


def _summaries(outcomes: dict[str, list[CrossFileOutcome]]) -> dict:
    """The result's ``results`` (per mode and category), ``overall`` (per mode) and ``acceptance``."""
    results = {
        mode: {category: summarise([o for o in rows if o.category == category]) for category in CATEGORIES}
        for mode, rows in outcomes.items()
    }
    overall = {mode: summarise(rows) for mode, rows in outcomes.items()}
    return {"results": results, "overall": overall, "acceptance": acceptance(results, overall)}


def acceptance(results: dict, overall: dict) -> dict:
    """What fusion is for, where the modes it compares were run: cpc + fusion over cpc (overall, and
    on the ``cross_file`` cases), the targets, and fusion beside prompt context."""
    checks: dict = {}
    fusion, plain, context = overall.get("cpc+fusion"), overall.get("cpc"), overall.get("cpc+context")
    if fusion and plain and fusion["n"] and plain["n"]:
        deltas = {metric: round(fusion[metric] - plain[metric], 4) for metric in RATES}
        checks["fusion_minus_cpc"] = deltas
        cross = results["cpc+fusion"]["cross_file"], results["cpc"]["cross_file"]
        if cross[0]["n"] and cross[1]["n"]:
            checks["fusion_minus_cpc_cross_file"] = {m: round(cross[0][m] - cross[1][m], 4) for m in RATES}
        checks["undefined_rate_fusion_over_cpc"] = ratio(fusion["undefined_rate"], plain["undefined_rate"])
        checks["invented_rate_fusion_over_cpc"] = ratio(fusion["invented_rate"], plain["invented_rate"])
        checks["p50_fusion_over_cpc"] = ratio(fusion["p50_ms"], plain["p50_ms"])
        invented = checks["invented_rate_fusion_over_cpc"]
        checks["targets_met"] = {
            "next_identifier_plus_5_points": deltas["next_identifier"] >= 0.05,
            "line_exact_plus_5_points": deltas["line_exact"] >= 0.05,
            "invented_rate_at_most_half": fusion["invented_rate"] == 0 or (invented is not None and invented <= 0.5),
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
        f"{result['directory_set']!r} (seed {result['seed']})",
        file=stream,
    )
    rows = []
    for mode in result["results"]:
        for category, row in [*result["results"][mode].items(), ("overall", result["overall"][mode])]:
            if row["n"]:
                rows.append({"mode": mode, "category": category, **row})
    print_rows(
        rows,
        [("mode", "mode", "{}"), ("category", "category", "{}"), ("n", "n", "{:d}"),
         ("next_identifier", "next id", "{:.0%}"), ("identifier_exact", "ids", "{:.0%}"),
         ("word_exact", "word", "{:.0%}"), ("line_exact", "line", "{:.0%}"), ("undefined_rate", "undef", "{:.1%}"),
         ("invented_rate", "invented", "{:.1%}"),
         *LATENCY_COLUMNS],
        stream,
    )
    for name, value in result["acceptance"].items():
        print(f"{name}: {json.dumps(value)}", file=stream)
    for label, stats in result["corpora"].items():
        print(f"corpus {label}: {json.dumps(stats)}", file=stream)


def plot(result: dict, path: str) -> None:
    """Quality metrics per mode (all cases, and the ``cross_file`` ones) and median latency per mode."""
    plt = pyplot()
    modes = list(result["results"])
    fig, (overall, cross, latency) = plt.subplots(
        1, 3, figsize=(17, 4.8), gridspec_kw={"width_ratios": [5, 5, 3]}
    )
    labels = ["next id", "identifiers", "word", "line", "undefined", "invented"]
    for axis, rows, title in (
        (overall, {m: result["overall"][m] for m in modes}, "all cases"),
        (cross, {m: result["results"][m]["cross_file"] for m in modes}, "cross_file: a name from another file"),
    ):
        grouped_bars(
            axis, labels, {m: [100 * rows[m].get(metric, 0) for metric in METRICS] for m in modes},
            label_format="%.0f",
        )
        axis.set_ylim(0, 105)
        axis.set_ylabel("% of cases (undefined, invented: % of names)")
        axis.set_title(title)
    overall.legend(fontsize=8)
    grouped_bars(
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
        f"{result['directory_set']!r} (seed {result['seed']})"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=120)
