"""A notebook's cell through the real server: completed with the code cells above it, against the cell alone.

    python benchmarks/bench_notebooks.py [--files GLOB] [--cases 60] [--seed 1] [--json OUT] [--plot OUT.png]

The development set's cursors (`harness.bench.quality.draw_cases`, as
`benchmarks/bench_server.py` draws them) become notebooks: the text before
the cursor is cut into cells where a top-level statement (``def``,
``class``, a decorator, an import, an assignment...) follows a blank line,
as a notebook holds a few definitions or statements a cell, and the
cursor's cell is the last one, ending at the cursor. Through ``cpc-lsp``
with its shipping defaults, a headless editor (`harness.headless`) opens
each cursor three ways:

- ``notebook``: the notebook, as VS Code sends one (``notebookDocument/didOpen``):
  the server reads the code cells above the cursor's cell with it
  (`cpc.notebooks.Script`);
- ``cell``: the cursor's cell alone, as a document of its own (what the
  model reads where cells are sent as separate documents);
- ``file``: the text before the cursor as one file, as a script holds it.

Each waits until the server has read ahead (as for a notebook open a few
seconds), types the cursor's last character, and reads what the editor
shows at 250 ms, 500 ms, 1 s and 2 s (`benchmarks.bench_server.judge`).
Beside it, the in-process engine (no time budget, cold) on the texts the
server's modes read: the notebook's script and the cell alone.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_server import (  # noqa: E402
    FIGURES, MOMENTS_MS, engine_options, judge, mean_figures, moments_axis, open_and_pause, shown_at)
from cpc.session import CompletionSession, EngineSettings, Script  # noqa: E402
from harness.bench.quality import Case, draw_cases  # noqa: E402
from harness.bench.sources import expand  # noqa: E402
from harness.headless import HeadlessEditor  # noqa: E402
from lsp_server.settings import Settings  # noqa: E402

MODES = ("notebook", "cell", "file")
CELL_START = re.compile(r"\n[ \t]*\n(?=(?:def |class |async def |@|import |from |if |for |while |with |try:|[A-Za-z_]\w* =))")
"""A blank line, then a top-level statement: where a cell starts (never inside a docstring's paragraphs, whose lines
do not start so)."""


def cells_of(prefix: str) -> list[str]:
    """``prefix`` (the text before a cursor) cut into cells; the last ends at the cursor.

    >>> cells_of("import os\\n\\n\\ndef f():\\n    return 1\\n\\nx = f()\\nprint(x.re")
    ['import os', 'def f():\\n    return 1', 'x = f()\\nprint(x.re']
    """
    cuts = [0] + [match.end() for match in CELL_START.finditer(prefix)]
    parts = [prefix[start:end] for start, end in zip(cuts, cuts[1:] + [len(prefix)])]
    return [part.strip("\n") for part in parts[:-1] if part.strip()] + [parts[-1].lstrip("\n")]


async def through_server(model: str, cases: list[Case], horizon_s: float) -> dict[str, list[list[tuple[float, str]]]]:
    """Every case in every mode through one server with its defaults: per mode, the answers' timeline per case."""
    timelines: dict[str, list[list[tuple[float, str]]]] = {mode: [] for mode in MODES}
    async with HeadlessEditor(["--model", model]) as editor:
        started = time.perf_counter()
        for number, case in enumerate(cases):
            cells = cells_of(case.prefix)
            cut = cells[:-1] + [cells[-1][:-1]]  # the last character is typed
            openings = {
                "notebook": lambda: editor.open_notebook(f"file:///bench/{number}/notes.ipynb", cut),
                "cell": lambda: editor.open(f"file:///bench/{number}/cell.py", cut[-1]),
                "file": lambda: editor.open(f"file:///bench/{number}/file.py", case.prefix[:-1]),
            }
            for mode in MODES:
                await open_and_pause(editor, openings[mode](), "read")
                editor.type(case.prefix[-1])
                timelines[mode].append(await editor.suggest_over_time(horizon_s, accepted=True))
                editor.close()
            if (number + 1) % 10 == 0 or number + 1 == len(cases):
                print(f"server: {number + 1}/{len(cases)} cursors ({time.perf_counter() - started:.0f} s)",
                      file=sys.stderr, flush=True)
    return timelines


def through_engine(session: CompletionSession, cases: list[Case], settings: Settings) -> dict[str, list[str]]:
    """The notebook's script and the cell alone in process (no time budget, cold, each cell fused as its own
    document): per mode, the rest of the line once the first text is accepted, per case."""
    options, texts = engine_options(settings), {"notebook": [], "cell": []}
    for case in cases:
        cells = cells_of(case.prefix)
        script = Script.around(cells, len(cells) - 1)
        for mode, (document, start) in {"notebook": (script.text, script.start), "cell": (cells[-1], 0)}.items():
            session.clear()
            keys = [f"vscode-notebook-cell:/engine/notes.ipynb#cell{index}" for index in range(len(cells))]
            for key, cell in zip(keys, cells):
                session.update_document(key, cell)
            answer = session.complete(keys[-1], document, start + len(cells[-1]), options,
                                      fusion=settings.fusion_weights, key_start=start)
            texts[mode].append(answer.completions[0] if answer.completions else "")
            for key in keys:
                session.close_document(key)
    return texts


def run(model: str, files: str, cases: int, seed: int) -> dict:
    settings = Settings()
    session = CompletionSession()
    session.load(EngineSettings(model))
    drawn = draw_cases(session.engine, [path for glob in files.split(",") for path in expand(glob)], cases, seed)
    engine = through_engine(session, drawn, settings)
    del session  # the server loads its own model
    timelines = asyncio.run(through_server(model, drawn, MOMENTS_MS[-1] / 1000))
    above = [1 - len(cells_of(case.prefix)[-1]) / len(case.prefix) for case in drawn]
    result: dict = {
        "model": model, "files": files, "cases": len(drawn), "seed": seed, "moments_ms": list(MOMENTS_MS),
        "cells_p50": statistics.median(len(cells_of(case.prefix)) for case in drawn),
        "share_above_p50": round(statistics.median(above), 3),
        "server": {mode: {f"{ms}ms": mean_figures([judge(shown_at(answers, ms), case)
                                                    for answers, case in zip(timelines[mode], drawn)])
                          for ms in MOMENTS_MS} for mode in MODES},
        "engine": {mode: mean_figures([judge(text, case) for text, case in zip(texts, drawn)])
                   for mode, texts in engine.items()},
        "per_case": [{"file": case.file, "line": case.line_rest, "cells": len(cells_of(case.prefix)),
                      **{mode: [(round(t * 1000, 1), text) for t, text in timelines[mode][number]] for mode in MODES}}
                     for number, case in enumerate(drawn)],
    }
    return result


def print_summary(result: dict) -> None:
    print(f"{result['model']}: {result['cases']} cursors from {result['files']} (seed {result['seed']}) as notebooks "
          f"(cells p50 {result['cells_p50']}, the cells above the cursor's hold {result['share_above_p50']:.0%} of "
          "the text before it, p50), through cpc-lsp with its shipping defaults")
    print(f"{'mode':9} {'when':>8} " + " ".join(f"{name:>10}" for name in FIGURES))
    for mode, moments in result["server"].items():
        for ms in result["moments_ms"]:
            print(f"{mode:9} {ms:>6}ms " + " ".join(f"{moments[f'{ms}ms'][name]:>10.1%}" for name in FIGURES))
        if mode in result["engine"]:
            print(f"{mode:9} {'engine':>8} " + " ".join(f"{result['engine'][mode][name]:>10.1%}" for name in FIGURES)
                  + "   (in process, no time budget)")


def plot(result: dict, path: str) -> None:
    """Word and line exact against the time after the keystroke, per mode; the engine's as dashed lines."""
    from harness.bench.report import pyplot

    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    colors = {"notebook": "#4c72b0", "cell": "#c44e52", "file": "#8c8c8c"}
    labels = {"notebook": "a notebook's cell (the cells above read)", "cell": "the cell alone",
              "file": "the same text as one file"}
    moments = result["moments_ms"]
    for axis, name in zip(axes, ("word_exact", "line_exact")):
        for mode in ("file", "cell", "notebook"):  # the notebook's line over the file's, which it follows
            figures = result["server"][mode]
            axis.plot(moments, [100 * figures[f"{ms}ms"][name] for ms in moments], "o-" if mode != "file" else "s:",
                      color=colors[mode], label=labels[mode], lw=2.5 if mode == "file" else 1.5)
            if mode in result["engine"]:
                axis.axhline(100 * result["engine"][mode][name], color=colors[mode], ls="--", lw=1,
                             label=f"{mode}: in process, no time budget")
        moments_axis(axis, moments, name)
    axes[0].set_ylabel("% of cursors")
    axes[1].legend(fontsize=7, loc="upper right")
    fig.suptitle(f"In a notebook: {result['cases']} cursors of {Path(result['files']).name} cut into cells, "
                 "through cpc-lsp with its shipping defaults", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="default")
    parser.add_argument("--files", default="<stdlib>/[a-m]*.py")
    parser.add_argument("--cases", type=int, default=60)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json")
    parser.add_argument("--plot")
    parser.add_argument("--show", metavar="JSON", help="print the tables of an earlier run's JSON, and plot it")
    args = parser.parse_args()
    result = json.loads(Path(args.show).read_text()) if args.show else run(args.model, args.files, args.cases, args.seed)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    print_summary(result)
    if args.plot:
        plot(result, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
