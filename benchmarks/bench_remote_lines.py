"""A whole line from a shared model server: one request per token against the line in one request (`cpc.runs`).

    python benchmarks/bench_remote_lines.py [--cases 40] [--seed 1] [--modes cpc,naive] [--server-url URL]
                                            [--server-args '-ngl 99'] [--json OUT] [--plot OUT.png]

The cursors of ``python -m harness.bench`` (standard library a-m, short
prompts: whole lines, at most 300 tokens), each completed through the remote
backend as the editor's server completes it (single line, the file fused
into the choices, `Options`' defaults, no time budget so that both ways
reach the same end). Each request starts from the prompt read ahead into
the server's slot (as after a pause: `cpc.generate.warm`), so what is timed
is the conditioning and the line. Per mode, both ways on each cursor in
turn (which goes first alternates): identical texts, the request's time
p50 / p95 and HTTP requests per suggestion. A llama-server with one slot
is started here (on this machine it shares the cores with the client), or
``--server-url`` names one (a GPU box).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from contextlib import nullcontext
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cpc.engine import Engine  # noqa: E402
from cpc.generate import Options, generate, warm  # noqa: E402
from cpc.remote import RemoteOptions  # noqa: E402
from harness.bench import quality  # noqa: E402
from harness.bench.report import print_rows, pyplot  # noqa: E402
from harness.bench.sources import expand  # noqa: E402
from harness.llama_server import LlamaServer  # noqa: E402

WAYS = ("per token", "one request")
"""One request per generated token (``greedy_runs`` off, as before), and the line in one request."""


def one_line(engine: Engine, case: quality.Case, mode: str, runs: bool) -> dict:
    """One warm request at the case's cursor: its text, time, HTTP requests and streamed tokens."""
    engine.lm.options = replace(engine.lm.options, greedy_runs=runs)
    options = Options(mode=mode)
    fusion = quality.document_corpus(engine, case).fusion(quality.document_key(case))
    engine.clear()
    warm(engine, case.prefix, options=options)
    requests = engine.lm.profile.requests
    generation = generate(engine, case.prefix, options=options, fusion=fusion)
    return {"text": quality.first_text(generation), "ms": generation.elapsed_ms,
            "requests": engine.lm.profile.requests - requests, "run_tokens": generation.run_tokens}


def measure(engine: Engine, cases: list[quality.Case], modes: list[str]) -> dict:
    rows = {mode: {way: [] for way in WAYS} for mode in modes}
    for number, case in enumerate(cases):
        for mode in modes:
            order = WAYS if number % 2 == 0 else WAYS[::-1]
            for way in order:
                rows[mode][way].append(one_line(engine, case, mode, runs=way == WAYS[1]))
        print(f"case {number + 1}/{len(cases)}", file=sys.stderr, end="\r")
    return {mode: summarise(ways) for mode, ways in rows.items()}


def summarise(ways: dict[str, list[dict]]) -> dict:
    before, after = ways[WAYS[0]], ways[WAYS[1]]
    summary = {way: {
        "p50_ms": round(statistics.median(r["ms"] for r in runs), 1),
        "p95_ms": round(statistics.quantiles([r["ms"] for r in runs], n=20)[-1], 1),
        "requests_per_suggestion": round(statistics.mean(r["requests"] for r in runs), 2),
        "requests_p50": statistics.median(r["requests"] for r in runs),
    } for way, runs in ways.items()}
    summary["identical_texts"] = sum(a["text"] == b["text"] for a, b in zip(before, after))
    summary["cases"] = len(before)
    summary["p50_ratio"] = round(summary[WAYS[1]]["p50_ms"] / summary[WAYS[0]]["p50_ms"], 3)
    summary["different"] = [(a["text"], b["text"]) for a, b in zip(before, after) if a["text"] != b["text"]]
    return summary


def plot(result: dict, path: str) -> None:
    plt = pyplot()
    figure, (times, requests) = plt.subplots(1, 2, figsize=(10, 4))
    modes = list(result["modes"])
    for offset, way in enumerate(WAYS):
        xs = [number + offset * 0.4 for number in range(len(modes))]
        times.bar(xs, [result["modes"][mode][way]["p50_ms"] for mode in modes], 0.4, label=way)
        requests.bar(xs, [result["modes"][mode][way]["requests_per_suggestion"] for mode in modes], 0.4, label=way)
    for axis, title in ((times, "whole-line request, p50 ms"), (requests, "HTTP requests per suggestion")):
        axis.set_xticks([number + 0.2 for number in range(len(modes))], modes)
        axis.set_title(title)
        axis.legend()
    figure.suptitle(f"A line from a model server ({result['server']}, {result['cases']} cursors)")
    figure.tight_layout()
    figure.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=40)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--modes", default="cpc,naive")
    parser.add_argument("--server-url", help="a llama-server started elsewhere (a GPU box)")
    parser.add_argument("--server-args", default="", help="more llama-server flags (e.g. -ngl 99 on a GPU)")
    parser.add_argument("--json")
    parser.add_argument("--plot")
    args = parser.parse_args()
    server = (nullcontext(None) if args.server_url else
              LlamaServer("default", extra=("--cache-ram", "0", *args.server_args.split())))
    with server as running:
        url = args.server_url or running.url
        engine = Engine.load(url, remote=RemoteOptions(timeout_s=120.0))
        cases = quality.draw_cases(engine, expand("<stdlib>/[a-m]*.py"), args.cases, args.seed)
        cases = [replace(case, prefix=quality.shorten(engine.tokenizer, case.prefix)) for case in cases]
        result = {"server": args.server_url or "llama-server, 1 slot, on this machine", "cases": len(cases),
                  "seed": args.seed, "modes": measure(engine, cases, args.modes.split(","))}
    print_rows([{"mode": mode, "way": way, **figures[way]} for mode, figures in result["modes"].items() for way in WAYS],
               [("mode", "mode", "{:6}"), ("way", "way", "{:12}"), ("p50_ms", "p50 ms", "{:8.1f}"),
                ("p95_ms", "p95 ms", "{:8.1f}"), ("requests_per_suggestion", "requests", "{:9.2f}")])
    for mode, figures in result["modes"].items():
        print(f"{mode}: identical texts {figures['identical_texts']}/{figures['cases']}, "
              f"p50 one request / per token {figures['p50_ratio']}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    if args.plot:
        plot(result, args.plot)


if __name__ == "__main__":
    main()
