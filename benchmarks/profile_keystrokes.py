"""Where a warm keystroke's time goes: lines of real code typed into an open document, as the server answers them.

    python benchmarks/profile_keystrokes.py [--lines 10] [--gpu-layers N] [--threads N] [--json OUT] [--plot OUT.png]

Lines are drawn at random (seeded) from standard-library files; each is
taken out of its file and typed again after its indentation, one character
at a time, into the open document. Every keystroke goes through
`cpc.session.CompletionSession` with the server's shipping settings
(`lsp_server.settings.Settings`: the mode, the budgets, the document fused,
an early answer asked for), the document updated first as the server
updates it. A request at the line's start, before its first key, warms the
caches and is not counted. Keystrokes that type what the suggestion shown
already says are answered from the suggestion cache, without the model;
the others are timed by stage as `benchmarks/profile_request.py` times a
request (its `StageClock`), with the document's update as a stage of its
own (``update``).

The report: keystrokes answered by the model and from the cache, the model
keystrokes' median total and median *host* time (everything but the
decode: what keeps a warm keystroke above the model's own time on a GPU),
and the stages' medians.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.profile_request import STAGES, StageClock  # noqa: E402
from cpc.model_files import stderr_progress  # noqa: E402
from cpc.session import CompletionSession  # noqa: E402
from harness.bench.report import pyplot  # noqa: E402
from harness.bench.sources import expand  # noqa: E402
from lsp_server.settings import Settings  # noqa: E402

UPDATE = "update"
KEY = "file:///typed.py"


def draw_lines(files: list[Path], count: int, seed: int) -> list[tuple[str, str, str]]:
    """``count`` (text before, line, text after) of code lines of 12-60 characters past their indentation."""
    rng = random.Random(seed)
    drawn = []
    while len(drawn) < count:
        lines = rng.choice(files).read_text(encoding="utf-8", errors="replace").splitlines(keepends=True)
        usable = [n for n, line in enumerate(lines) if 12 <= len(line.strip()) <= 60 and not line.lstrip().startswith("#")]
        if usable:
            n = rng.choice(usable)
            drawn.append(("".join(lines[:n]), lines[n].rstrip("\n"), "".join(lines[n + 1 :])))
    return drawn


def type_lines(session: CompletionSession, settings: Settings, lines: list[tuple[str, str, str]],
               clock: StageClock) -> list[dict]:
    """Every keystroke of every line: whether the model answered it, its total and its stages (ms)."""
    options, fusion = settings.options, settings.fusion_weights
    update = clock.wrap(UPDATE, session.update_document)  # a stage of its own (its tokenizing is `tokenize`'s)
    rows = []
    for number, (before, line, after) in enumerate(lines):
        typed = line[: len(line) - len(line.lstrip())]
        for position in range(len(typed), len(line) + 1):
            typed = line[:position]
            document = f"{before}{typed}\n{after}"
            clock.take()
            started = time.perf_counter()
            update(KEY, document)
            answer = session.complete(KEY, document, len(before) + len(typed), options, None, fusion, None,
                                      lambda early: None)
            ended = time.perf_counter()
            stages = {UPDATE: 0.0} | clock.take()
            stages["python"] = (ended - started) * 1000 - sum(stages.values())
            if position > len(line) - len(line.lstrip()):  # the line's start only warms the caches
                rows.append({"line": number, "model": not answer.from_cache, "total_ms": (ended - started) * 1000,
                             **{f"{stage}_ms": ms for stage, ms in stages.items()}})
        stderr_progress(f"line {number + 1}/{len(lines)}", (number + 1) / len(lines))
    return rows


def summary(rows: list[dict]) -> dict:
    """Counts, and medians over the keystrokes the model answered (the stages' medians need not add up)."""
    model = [row for row in rows if row["model"]]
    columns = ["total_ms", *(f"{stage}_ms" for stage in (*STAGES, UPDATE, "python"))]
    medians = {column: round(statistics.median(row[column] for row in model), 2) for column in columns}
    host = [row["total_ms"] - row["decode_ms"] for row in model]
    cached = [row["total_ms"] for row in rows if not row["model"]]
    return {
        "keystrokes": len(rows), "by_model": len(model), "from_cache": len(cached),
        "host_ms_p50": round(statistics.median(host), 2), "host_ms_mean": round(statistics.mean(host), 2),
        "from_cache_ms_p50": round(statistics.median(cached), 2) if cached else None,
        "medians": medians,
    }


def print_summary(result: dict) -> None:
    print(f"{result['keystrokes']} keystrokes: {result['by_model']} answered by the model, {result['from_cache']} from "
          f"the suggestion cache (p50 {result['from_cache_ms_p50']} ms)")
    medians = result["medians"]
    print(f"model keystrokes: total p50 {medians['total_ms']} ms, host (all but the decode) p50 "
          f"{result['host_ms_p50']} ms, mean {result['host_ms_mean']} ms")
    print("stage medians (ms): " + ", ".join(f"{column[:-3]} {value}" for column, value in medians.items()
                                             if column != "total_ms"))


def plot(result: dict, path: str) -> None:
    """The model keystrokes' stage medians, the decode apart from the host's stages."""
    plt = pyplot()
    medians = result["medians"]
    stages = [column for column in medians if column != "total_ms"]
    fig, axis = plt.subplots(figsize=(8, 4))
    axis.barh(range(len(stages)), [medians[stage] for stage in stages],
              color=["C3" if stage == "decode_ms" else "C0" for stage in stages])
    axis.set_yticks(range(len(stages)), [stage[:-3] for stage in stages])
    axis.invert_yaxis()
    axis.set_xlabel("median ms per keystroke the model answered")
    axis.set_title(f"a warm keystroke: total p50 {medians['total_ms']:.0f} ms, host p50 {result['host_ms_p50']:.0f} ms "
                   f"({result['by_model']} of {result['keystrokes']} keystrokes)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", default="<stdlib>/[a-m]*.py")
    parser.add_argument("--lines", type=int, default=10)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--gpu-layers", type=int, default=0, help="model layers on the GPU (-1: all)")
    parser.add_argument("--threads", type=int, default=0, help="the model's CPU threads (0: as the server chooses)")
    parser.add_argument("--json", metavar="OUT")
    parser.add_argument("--plot", metavar="OUT.png")
    args = parser.parse_args()
    settings = Settings()
    session = CompletionSession()
    session.load(replace(settings.engine, gpu_layers=args.gpu_layers, threads=args.threads), stderr_progress)
    clock = StageClock()
    clock.install()
    rows = type_lines(session, settings, draw_lines(expand(args.files), args.lines, args.seed), clock)
    result = summary(rows)
    print_summary(result)
    if args.json:
        Path(args.json).write_text(json.dumps({"summary": result, "rows": rows}, indent=2))
    if args.plot:
        plot(result, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
