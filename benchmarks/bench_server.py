"""Suggestion quality through the real server: what an editor shows 250 ms, 500 ms, 1 s and 2 s after a keystroke.

    python benchmarks/bench_server.py [--files GLOB] [--cases 200] [--seed 1] [--prompt long|short]
                                 [--modes cpc,heal,naive] [--set KEY=VALUE ...] [--json OUT] [--plot OUT.png]
    python benchmarks/bench_server.py --show OUT.json    # the tables of an earlier run
    python benchmarks/bench_server.py ... --engine-later --json OUT.json; python benchmarks/bench_server.py --add-engine OUT.json

The development set's cursors (`harness.bench.quality.draw_cases`: inside identifiers
of real code, half of them on a token boundary) go through ``cpc-lsp``
with its shipping defaults (`lsp_server.settings.Settings`; ``--set``
changes one, for a comparison, and the JSON records every setting sent).
Per cursor, a headless editor (`harness.headless`) opens a new
document holding the text before the cursor but its last character, waits
(``--pause``: by default until the server has read the document ahead where the cursor rests, as
it does while the user looks at a file; ``0`` for a key typed the moment
the file opens), types that character (``didChange``) and asks for inline
completions at once,
then follows the server's ``cpc/suggestionReady`` notifications by asking
again, as the editors do. What the editor shows at a moment is the first
item of the last answer received by then, read as the rest of the line
once it is accepted (with ``--cursors closers`` the document holds an
editor's auto-closed pairs after the cursor, and a suggestion may replace
them). Each document is closed after its cursor, so fusion reads one open
document, as in a small project.

At each moment, over the cursors: ``word_exact`` (the shown text finishes
the identifier), ``line_exact`` (it is the rest of the line),
``line_chars`` (the share of the rest of the line it gets right from its
start) and ``shown`` (a suggestion is on screen).

Beside it, the in-process engine on the same cursors
(`cpc.session.CompletionSession`: the same defaults without any time
budget, cold caches, the same document fused): what the server would show
given all the time it needs. ``server_over_engine`` is the ratio of each
figure at 1 s to the engine's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections.abc import Awaitable
from dataclasses import asdict, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cpc.engine import Engine  # noqa: E402
from cpc.generate import Options  # noqa: E402
from cpc.session import CompletionSession, EngineSettings, new_file_header, replaced_after  # noqa: E402
from harness.bench.appended import draw_appended_cases  # noqa: E402
from harness.bench.closers import draw_closers_cases  # noqa: E402
from harness.bench.functions import draw_function_cases  # noqa: E402
from harness.bench.inserted import draw_inserted_cases  # noqa: E402
from harness.bench.new_files import draw_new_file_cases  # noqa: E402
from harness.bench.sources import expand  # noqa: E402
from harness.bench.quality import Case, draw_cases, in_its_line, inside_its_word, line_exact, shorten, word_exact  # noqa: E402
from harness.headless import HeadlessEditor  # noqa: E402
from lsp_server.settings import Settings  # noqa: E402

MOMENTS_MS = (250, 500, 1000, 2000)
"""When the editor's screen is read, after the keystroke."""
FIGURES = ("word_exact", "line_exact", "line_chars", "shown")
READ_AHEAD_LIMIT_S = 10.0
"""``--pause read`` waits at most this long for the server to read a new document ahead."""
DEFAULT_FILES = "<stdlib>/[a-m]*.py"


def shown_at(answers: list[tuple[float, str]], ms: float) -> str:
    """The text on screen ``ms`` after the keystroke: the last answer received by then ('' before the first).

    >>> shown_at([(0.2, "in"), (0.6, "in(path)")], 500), shown_at([(0.2, "in")], 100)
    ('in', '')
    """
    text = ""
    for seconds, answer in answers:
        if seconds * 1000 <= ms:
            text = answer
    return text


def judge(text: str, case: Case) -> dict[str, float]:
    """The figures of one shown text against the file.

    >>> judge("ngth(s)", Case("f.py", "len(s) + le", "n", "ngth(s)", "inside"))["line_chars"]
    1.0
    """
    right = 0
    for shown, true in zip(text, case.line_rest):
        if shown != true:
            break
        right += 1
    return {
        "word_exact": float(bool(text) and word_exact(text, case.word_rest)),
        "line_exact": float(line_exact(text, case.line_rest)),
        "line_chars": right / len(case.line_rest),
        "shown": float(bool(text)),
    }


def mean_figures(rows: list[dict[str, float]]) -> dict[str, float]:
    return {name: round(statistics.fmean(row[name] for row in rows), 4) if rows else 0.0 for name in FIGURES}


async def through_server(model: str, cases: list[Case], modes: list[str], settings: dict,
                         horizon_s: float, pause: str) -> tuple[dict, dict]:
    """Every case in every mode through one server: per mode, the answers' timeline per case; and the server's
    own ``cpc/status`` at the end (the settings it ran with, its request counters)."""
    timelines: dict[str, list[list[tuple[float, str]]]] = {}
    async with HeadlessEditor(["--model", model], settings=settings) as editor:
        for mode in modes:
            editor.configure(mode=mode)
            timelines[mode] = []
            started = time.perf_counter()
            for number, case in enumerate(cases):
                await open_and_pause(editor, editor.open(f"file:///bench/{mode}/{number}/{Path(case.file).name}",
                                                         case.prefix[:-1] + case.suffix, len(case.prefix) - 1), pause)
                editor.type(case.prefix[-1])
                timelines[mode].append(await editor.suggest_over_time(horizon_s, accepted=True))
                editor.close()
                if (number + 1) % 20 == 0 or number + 1 == len(cases):
                    print(f"server, {mode}: {number + 1}/{len(cases)} cursors ({time.perf_counter() - started:.0f} s)",
                          file=sys.stderr, flush=True)
        editor.configure(mode=Settings().mode)
        status = await editor.status()
    counts = ("requests", "from_model", "from_cache", "grown", "cut_short", "stopped", "superseded")
    return timelines, {"settings": _plain(status.settings), **{name: getattr(status, name, None) for name in counts}}


async def open_and_pause(editor: HeadlessEditor, opening: Awaitable[None], pause: str) -> None:
    """Open a document (``opening``: the editor's `HeadlessEditor.open` or `HeadlessEditor.open_notebook`), then
    wait: ``read``, until the server has read it ahead where the cursor rests (the editor tells it,
    ``cpc/cursorRest``, as both editors do: what the server does for a file open a few seconds, at most
    `READ_AHEAD_LIMIT_S`), or a number of milliseconds (``0``: the key comes at once)."""
    before = (await editor.status()).warmed if pause == "read" else 0
    await opening
    if pause == "read":
        editor.rest()
    else:
        await asyncio.sleep(float(pause) / 1000)
        return
    deadline = time.perf_counter() + READ_AHEAD_LIMIT_S
    while (await editor.status()).warmed == before and time.perf_counter() < deadline:
        await asyncio.sleep(0.05)


def _plain(value: object) -> object:
    """A pygls result object (attributes) as plain JSON values."""
    if hasattr(value, "_asdict"):
        return {key: _plain(item) for key, item in value._asdict().items()}
    return value


def engine_options(settings: Settings) -> Options:
    """The server's options for ``settings``, without any time budget."""
    return replace(settings.options, prompt_budget_ms=None, word_budget_ms=None, time_budget_ms=None)


def through_engine(session: CompletionSession, cases: list[Case], modes: list[str], settings: Settings) -> dict:
    """The same cursors in process, with the same defaults and no time budget: per mode, (the rest of the line once
    the first text is accepted, ms) per case.

    Each cursor starts cold; its modes run one after the other, so the later ones find its prompt in the KV
    cache (the texts do not depend on time; ``ms`` is the first mode's cold request, the others' warm one)."""
    options = engine_options(settings)
    results: dict[str, list[tuple[str, float]]] = {mode: [] for mode in modes}
    for number, case in enumerate(cases):
        session.clear()  # a cold cursor: nothing of the last one is cached
        for mode in modes:
            uri = f"file:///engine/{mode}/{number}/{Path(case.file).name}"
            document = case.prefix + case.suffix
            session.update_document(uri, document)
            header = new_file_header(uri, document)  # what the server reads before a new file's text
            answer = session.complete(uri, header + document, len(header) + len(case.prefix), replace(options, mode=mode),
                                      fusion=settings.fusion_weights, key_start=len(header))
            session.close_document(uri)
            text = answer.completions[0] if answer.completions else ""
            left = case.suffix.partition("\n")[0][replaced_after(text, case.suffix):] if text else ""
            results[mode].append((text + left, answer.engine_ms))
        if (number + 1) % 20 == 0 or number + 1 == len(cases):
            print(f"engine: {number + 1}/{len(cases)} cursors", file=sys.stderr, flush=True)
    return results


def run(model: str, files: str, cases: int, seed: int, prompt: str, modes: list[str], changes: dict,
        pause: str = "read", horizon_ms: int = MOMENTS_MS[-1], engine: bool = True, cursors: str = "identifiers") -> dict:
    """The benchmark: the ``--json`` object (without the in-process engine's figures unless ``engine``)."""
    settings, problems = Settings().updated(changes)
    if problems:
        raise SystemExit("; ".join(problems))
    session = CompletionSession()
    session.load(EngineSettings(model))
    drawn = development_cases(session.engine, files, cases, seed, prompt, cursors)
    del session  # the server loads its own model
    timelines, served = asyncio.run(through_server(model, drawn, modes, changes, horizon_ms / 1000, pause))
    moments = [ms for ms in MOMENTS_MS if ms <= horizon_ms]
    result: dict = {
        "model": model, "files": files, "cursors": cursors, "cases": len(drawn), "seed": seed, "prompt": prompt,
        "pause": pause, "settings": served.pop("settings"), "changed": changes, "server_counts": served,
        "engine_options": asdict(engine_options(settings)),
        "moments_ms": moments, "server": {}, "per_case": [],
    }
    for mode in modes:
        result["server"][mode] = {
            f"{ms}ms": mean_figures([judge(shown_at(answers, ms), case) for answers, case in zip(timelines[mode], drawn)])
            for ms in moments
        }
        first = [answers[0][0] * 1000 for answers in timelines[mode] if answers]
        last = [answers[-1][0] * 1000 for answers in timelines[mode] if answers]
        result["server"][mode] |= {
            "first_answer_p50_ms": round(statistics.median(first), 1) if first else None,
            "last_answer_p50_ms": round(statistics.median(last), 1) if last else None,
            "answers_per_cursor": round(statistics.fmean(len(answers) for answers in timelines[mode]), 2),
        }
    for number, case in enumerate(drawn):
        result["per_case"].append({
            "file": case.file, "kind": case.kind, "word": case.word_rest, "line": case.line_rest,
            **{mode: {"answers": [(round(t * 1000, 1), text) for t, text in timelines[mode][number]]} for mode in modes},
        })
    if engine:
        add_engine(result)
    return result


def development_cases(engine: Engine, files: str, cases: int, seed: int, prompt: str,
                      cursors: str = "identifiers") -> list[Case]:
    """The cursors, drawn as `python -m harness.bench` draws them (the same for the same arguments); ``functions``: cold
    single-function documents (`harness.bench.functions`), whatever ``prompt`` says; ``closers``: lines being typed
    with an editor's closers after the cursor (`harness.bench.closers`); ``words``: the identifiers' cursors with
    the rest of their line after the word (`harness.bench.quality.in_its_line`); ``mid-word`` and ``whole-word``: the
    identifiers' cursors with the rest of their line after the cursor, the word's next letter left out or nothing
    (`harness.bench.quality.inside_its_word`); ``appended``: a word's end inside a line, what followed it left out
    (`harness.bench.appended`); ``inserted``: a line typed between two lines of a file, the rest of the file after it
    (`harness.bench.inserted`); ``new-files``: a new file's first line (`harness.bench.new_files`)."""
    paths = [path for glob in files.split(",") for path in expand(glob)]
    if cursors == "functions":
        return draw_function_cases(engine, paths, cases, seed)
    if cursors == "new-files":
        return draw_new_file_cases(engine, paths, cases, seed)
    if cursors == "mid-word":  # a letter left out of the word's rest: its rest must hold two
        drawn = [inside_its_word(case, 1) for case in draw_cases(engine, paths, 2 * cases, seed)
                 if len(case.word_rest) >= 2][:cases]
    else:
        draw = {"closers": draw_closers_cases, "appended": draw_appended_cases,
                "inserted": draw_inserted_cases}.get(cursors, draw_cases)
        drawn = draw(engine, paths, cases, seed)
    if cursors == "words":
        drawn = [in_its_line(case) for case in drawn]
    if cursors == "whole-word":
        drawn = [inside_its_word(case, 0) for case in drawn]
    if prompt == "short":
        drawn = [replace(case, prefix=shorten(engine.tokenizer, case.prefix)) for case in drawn]
    return drawn


def add_engine(result: dict) -> None:
    """The in-process engine on the same cursors, beside the server's figures: it needs no quiet machine
    (no time budget), so ``--engine-later`` can run it after the server's part, while the machine does other
    work."""
    session = CompletionSession()
    session.load(EngineSettings(result["model"]))
    drawn = development_cases(session.engine, result["files"], result["cases"], result["seed"], result["prompt"],
                              result.get("cursors", "identifiers"))
    settings, _ = Settings().updated(result["changed"])
    modes = list(result["server"])
    engine_results = through_engine(session, drawn, modes, settings)
    result["engine"], result["server_over_engine"] = {}, {}
    for mode in modes:
        engine_rows = [judge(text, case) for (text, _), case in zip(engine_results[mode], drawn)]
        result["engine"][mode] = mean_figures(engine_rows) | {
            "p50_ms": round(statistics.median(ms for _, ms in engine_results[mode]), 1)}
        at_1s = result["server"][mode]["1000ms"]
        result["server_over_engine"][mode] = {
            name: round(at_1s[name] / result["engine"][mode][name], 3) if result["engine"][mode][name] else None
            for name in ("word_exact", "line_exact", "line_chars")
        }
        for row, (text, _) in zip(result["per_case"], engine_results[mode]):
            row[mode]["engine"] = text
    result["by_kind_1s"] = by_kind(result)


def by_kind(result: dict, ms: int = 1000) -> dict[str, dict[str, dict[str, float]]]:
    """Word and line exact at ``ms`` through the server, and in process, per kind of cursor (``inside`` a
    token or on a token ``boundary``) and mode, from the run's ``per_case``."""
    def share(texts: list[str], rows: list[dict], exact) -> float:
        return round(statistics.fmean(float(bool(text) and exact(text, row)) for text, row in zip(texts, rows)), 4)

    table: dict[str, dict[str, dict[str, float]]] = {}
    for kind in sorted({row["kind"] for row in result["per_case"]}):
        rows = [row for row in result["per_case"] if row["kind"] == kind]
        table[kind] = {}
        for mode in result["server"]:
            served = [shown_at([(t / 1000, text) for t, text in row[mode]["answers"]], ms) for row in rows]
            engine = [row[mode]["engine"] for row in rows]
            table[kind][mode] = {"cursors": len(rows)}
            for name, source in (("", served), ("engine_", engine)):
                table[kind][mode][f"{name}word_exact"] = share(source, rows, lambda text, row: word_exact(text, row["word"]))
                table[kind][mode][f"{name}line_exact"] = share(source, rows, lambda text, row: line_exact(text, row["line"]))
    return table


def print_summary(result: dict) -> None:
    print(f"{result['model']}: {result['cases']} cursors from {result['files']} (seed {result['seed']}), "
          f"{result['prompt']} prompts, each typed {describe_pause(result['pause'])}, "
          f"through cpc-lsp with {result['changed'] or 'its shipping defaults'}")
    header = f"{'mode':6} {'when':>8} " + " ".join(f"{name:>10}" for name in FIGURES)
    print(header)
    for mode, moments in result["server"].items():
        for ms in result["moments_ms"]:
            row = moments[f"{ms}ms"]
            print(f"{mode:6} {ms:>6}ms " + " ".join(f"{row[name]:>10.1%}" for name in FIGURES))
        engine = result["engine"][mode]
        print(f"{mode:6} {'engine':>8} " + " ".join(f"{engine[name]:>10.1%}" for name in FIGURES)
              + f"   (in process, no time budget, p50 {engine['p50_ms']:.0f} ms)")
        print(f"{'':6} first answer p50 {moments['first_answer_p50_ms']} ms, last {moments['last_answer_p50_ms']} ms, "
              f"{moments['answers_per_cursor']} answers per cursor; at 1 s over the engine: "
              f"{result['server_over_engine'][mode]}")
    for kind, modes in by_kind(result).items():
        print(f"{kind} ({next(iter(modes.values()))['cursors']} cursors), at 1 s through the server (in process): "
              + "; ".join(f"{mode} word {row['word_exact']:.1%} ({row['engine_word_exact']:.1%}), "
                          f"line {row['line_exact']:.1%} ({row['engine_line_exact']:.1%})" for mode, row in modes.items()))


def describe_pause(pause: str) -> str:
    """When the keystroke came, in words (for the table and the plot)."""
    return "once the server had read its file ahead" if pause == "read" else f"{pause} ms after its file opened"


def plot(result: dict, path: str) -> None:
    """Word and line exact against the time after the keystroke, per mode; the engine's as dashed lines."""
    from harness.bench.report import pyplot

    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    colors = {"cpc": "#4c72b0", "heal": "#55a868", "naive": "#c44e52"}
    for axis, name in zip(axes, ("word_exact", "line_exact")):
        for mode, moments in result["server"].items():
            color = colors.get(mode)
            axis.plot(result["moments_ms"], [100 * moments[f"{ms}ms"][name] for ms in result["moments_ms"]], "o-",
                      color=color, label=f"{mode}: cpc-lsp")
            axis.axhline(100 * result["engine"][mode][name], color=color, ls="--", lw=1,
                         label=f"{mode}: in process, no time budget")
        moments_axis(axis, result["moments_ms"], name)
    axes[0].set_ylabel("% of cursors")
    axes[1].legend(fontsize=7, loc="upper right")  # line exact stays well under 60 %: room above its lines
    changed = ", ".join(f"{k}={v}" for k, v in result["changed"].items()) or "shipping defaults"
    where = {"functions": "single-function documents (the cold set)", "new-files": "new files' first lines"}.get(
        result.get("cursors"), f"{Path(result['files']).name}, {result['prompt']} prompts")
    fig.suptitle(f"What the editor shows: {result['cases']} cursors in {where}, "
                 f"typed {describe_pause(result['pause'])}, {changed}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def moments_axis(axis: object, moments: list[int], name: str) -> None:
    """A plot of figure ``name`` (in % of cursors) against the moments after the keystroke, on a log scale."""
    axis.set_xscale("log")
    axis.set_xticks(moments, [f"{ms} ms" if ms < 1000 else f"{ms // 1000} s" for ms in moments])
    axis.minorticks_off()  # the log scale's own ticks would be labelled over the moments
    axis.set_xlabel("time after the keystroke")
    axis.set_title(name.replace("_", " "))
    axis.set_ylim(0, 100)


def parse_setting(text: str) -> tuple[str, object]:
    """``KEY=VALUE`` with a JSON value (a bare word is a string).

    >>> parse_setting("wordBudgetMs=0"), parse_setting("fusion=false"), parse_setting("mode=heal")
    (('wordBudgetMs', 0), ('fusion', False), ('mode', 'heal'))
    """
    key, _, value = text.partition("=")
    try:
        return key, json.loads(value)
    except json.JSONDecodeError:
        return key, value


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="default")
    parser.add_argument("--files", default=DEFAULT_FILES)
    parser.add_argument("--cases", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--prompt", choices=("long", "short"), default="long")
    parser.add_argument("--cursors", choices=("identifiers", "functions", "closers", "words", "mid-word", "whole-word",
                                              "appended", "inserted", "new-files"),
                        default="identifiers",
                        help="identifiers: inside identifiers of whole files (the development sets); functions: cold "
                             "single-function documents cut at any character of a body line (harness.bench.functions); "
                             "closers: lines being typed, an editor's auto-closed pairs after the cursor "
                             "(harness.bench.closers); words: the identifiers' cursors with the rest of their line "
                             "after the word, a word retyped in an existing line; mid-word / whole-word: the "
                             "identifiers' cursors with the rest of their line after the cursor, the word's next "
                             "letter left out (a letter to add) or none (nothing to add); appended: a word's end inside "
                             "a line, the run after it left out (harness.bench.appended); inserted: a line typed between two "
                             "lines of a file, the rest of the file after it (harness.bench.inserted); new-files: a "
                             "new file's first line "
                             "typed (harness.bench.new_files); --files takes comma-separated globs")
    parser.add_argument("--until-ms", type=int, choices=MOMENTS_MS, default=MOMENTS_MS[-1],
                        help="follow each cursor's suggestion this long (the later moments are left out)")
    parser.add_argument("--modes", default="cpc,heal,naive")
    parser.add_argument("--pause", default="read",
                        help="how long each document is open before the keystroke: 'read' (until the server has "
                             "read it ahead where the cursor rests, as for a file open a few seconds) or "
                             "milliseconds (0: typed at once)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a server setting other than its default (camelCase, JSON value), for comparisons")
    parser.add_argument("--json")
    parser.add_argument("--plot")
    parser.add_argument("--engine-later", action="store_true",
                        help="leave out the in-process engine (it needs no quiet machine); --add-engine adds it")
    parser.add_argument("--add-engine", metavar="JSON", help="add the engine's figures to an --engine-later run's JSON")
    parser.add_argument("--show", metavar="JSON", help="print the tables of an earlier run's JSON, and plot it")
    args = parser.parse_args()
    if args.show or args.add_engine:
        result = json.loads(Path(args.show or args.add_engine).read_text())
        if args.add_engine:
            add_engine(result)
    else:
        result = run(args.model, args.files, args.cases, args.seed, args.prompt, args.modes.split(","),
                     dict(parse_setting(item) for item in args.set), args.pause, args.until_ms,
                     engine=not args.engine_later, cursors=args.cursors)
    if args.json or args.add_engine:
        Path(args.json or args.add_engine).write_text(json.dumps(result, indent=1))
    if "engine" not in result:
        print(f"the server's part is in {args.json}: --add-engine {args.json} adds the engine's", file=sys.stderr)
        return 0
    print_summary(result)
    if args.plot:
        plot(result, args.plot)
    return 0

if __name__ == "__main__":
    sys.exit(main())
