"""Alternatives asked for: what VS Code's *Show Next Inline Suggestion* (Alt+]) brings, and how soon.

    python benchmarks/bench_alternatives.py [--files GLOB] [--cases 60] [--seed 1] [--json OUT] [--plot OUT.png]

The development set's cursors (`harness.bench.quality.draw_cases`) go
through ``cpc-lsp`` with its shipping defaults. Per cursor, a headless
editor (`harness.headless`) opens the text before the cursor but its last
character, waits until the server has read it ahead, types that character
and follows the suggestion as the editors do until it is whole (what is on
screen), and reads it (``--reading-s``). Then it asks again where the suggestion is shown, invoked, as
VS Code does for Alt+] (the server answers with at least
`lsp_server.requests.ALTERNATIVES` suggestions, the shown one first), and
once more (Alt+] again: the suggestion cache answers).

It reports, over the cursors: the line exact of the suggestion shown, and
of *any* of the alternatives (the user finds the line by cycling); the
alternatives per answer (distinct texts); and the p50 of the time from the
ask to the alternatives, and to the second ask's answer, beside the time
from the key to the suggestion's last answer.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_server import DEFAULT_FILES, open_and_pause  # noqa: E402
from cpc.session import CompletionSession, EngineSettings  # noqa: E402
from harness.bench.quality import Case, draw_cases, line_exact, word_exact  # noqa: E402
from harness.bench.sources import expand  # noqa: E402
from harness.headless import HeadlessEditor  # noqa: E402

SHOWN_HORIZON_S = 5.0
"""How long the suggestion on screen is followed (growth, an upgrade) at most."""
READING_S = 1.0
"""How long after the suggestion is whole Alt+] is pressed: a user reads a suggestion before asking for another
(the server prepares the next line meanwhile, `lsp_server.cursor.Foresight`); ``--reading-s 0`` presses it at once."""


async def cursor_trial(editor: HeadlessEditor, case: Case, reading_s: float) -> dict:
    """One cursor: the suggestion shown, then Alt+] twice (the texts as the line reads once each is accepted)."""
    editor.type(case.prefix[-1])
    shown = await editor.suggest_over_time(SHOWN_HORIZON_S, accepted=True)
    await asyncio.sleep(reading_s)
    asked = editor.request_suggestions(invoked=True)
    answer = await asked.answer
    again = editor.request_suggestions(invoked=True)
    await again.answer
    items = len(answer.items) if answer else 0
    texts = [editor.accepted_rest(answer, index) for index in range(items)]
    return {
        "shown": shown[-1][1] if shown else "", "alternatives": texts,
        "shown_ms": round(shown[-1][0] * 1000, 1) if shown else None,
        "ask_ms": round(asked.latency_ms, 1), "again_ms": round(again.latency_ms, 1),
    }


async def through_server(model: str, cases: list[Case], reading_s: float) -> list[dict]:
    trials = []
    started = time.perf_counter()
    async with HeadlessEditor(["--model", model]) as editor:
        for number, case in enumerate(cases):
            await open_and_pause(editor, editor.open(f"file:///bench/alternatives/{number}/{Path(case.file).name}",
                                                     case.prefix[:-1] + case.suffix, len(case.prefix) - 1), "read")
            trials.append(await cursor_trial(editor, case, reading_s) | {"file": case.file, "line": case.line_rest})
            editor.close()
            if (number + 1) % 10 == 0 or number + 1 == len(cases):
                print(f"{number + 1}/{len(cases)} cursors ({time.perf_counter() - started:.0f} s)", file=sys.stderr,
                      flush=True)
    return trials


def summary(trials: list[dict], cases: list[Case]) -> dict:
    """The figures over the cursors (fractions, and milliseconds)."""
    def share(values: list[bool]) -> float:
        return round(statistics.fmean(values), 4) if values else 0.0

    return {
        "cursors": len(trials),
        "line_exact_shown": share([line_exact(t["shown"], c.line_rest) for t, c in zip(trials, cases)]),
        "line_exact_any": share([any(line_exact(text, c.line_rest) for text in t["alternatives"])
                                 for t, c in zip(trials, cases)]),
        "word_exact_shown": share([bool(t["shown"]) and word_exact(t["shown"], c.word_rest)
                                   for t, c in zip(trials, cases)]),
        "word_exact_any": share([any(word_exact(text, c.word_rest) for text in t["alternatives"] if text)
                                 for t, c in zip(trials, cases)]),
        "shown_first": share([t["alternatives"][:1] == [t["shown"]] for t in trials if t["shown"]]),
        "alternatives_mean": round(statistics.fmean(len(set(t["alternatives"])) for t in trials), 2),
        "shown_p50_ms": round(statistics.median(t["shown_ms"] for t in trials if t["shown_ms"] is not None), 1),
        "ask_p50_ms": round(statistics.median(t["ask_ms"] for t in trials), 1),
        "again_p50_ms": round(statistics.median(t["again_ms"] for t in trials), 1),
    }


def plot(result: dict, path: str) -> None:
    """Word and line exact of the suggestion shown and of any alternative, and the two asks' p50."""
    from harness.bench.report import pyplot

    plt = pyplot()
    figures = result["summary"]
    fig, (quality, latency) = plt.subplots(1, 2, figsize=(9, 3.6))
    names = ("word exact", "line exact")
    shown = [100 * figures["word_exact_shown"], 100 * figures["line_exact_shown"]]
    cycled = [100 * figures["word_exact_any"], 100 * figures["line_exact_any"]]
    places = range(len(names))
    quality.bar([p - 0.2 for p in places], shown, 0.4, label="the suggestion shown", color="#4c72b0")
    quality.bar([p + 0.2 for p in places], cycled, 0.4, label="any of the alternatives (Alt+])", color="#55a868")
    quality.set_xticks(list(places), names)
    quality.set_ylabel("% of cursors")
    quality.set_ylim(0, 120)  # room above the bars for the legend
    quality.set_yticks(range(0, 101, 20))
    quality.legend(fontsize=8, loc="upper right")
    latency.bar(["the suggestion\n(key to its last answer)", "Alt+]", "Alt+] again"],
                [figures["shown_p50_ms"], figures["ask_p50_ms"], figures["again_p50_ms"]], color="#8172b2")
    latency.set_ylabel("p50 ms")
    fig.suptitle(f"Alternatives asked for: {figures['cursors']} cursors of {Path(result['files']).name}, "
                 f"cpc-lsp shipping defaults", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="default")
    parser.add_argument("--files", default=DEFAULT_FILES)
    parser.add_argument("--cases", type=int, default=60)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--reading-s", type=float, default=READING_S,
                        help="seconds between the suggestion's last answer and Alt+]")
    parser.add_argument("--json")
    parser.add_argument("--plot")
    args = parser.parse_args()
    session = CompletionSession()
    session.load(EngineSettings(args.model))
    cases = draw_cases(session.engine, [path for glob in args.files.split(",") for path in expand(glob)],
                       args.cases, args.seed)
    del session  # the server loads its own model
    trials = asyncio.run(through_server(args.model, cases, args.reading_s))
    result = {"model": args.model, "files": args.files, "seed": args.seed, "reading_s": args.reading_s,
              "summary": summary(trials, cases),
              "per_cursor": trials}
    print(json.dumps(result["summary"], indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    if args.plot:
        plot(result, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
