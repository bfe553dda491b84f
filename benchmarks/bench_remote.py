"""``make bench-remote``: the model in-process vs on a llama-server, and one server shared by many editors.

    python benchmarks/bench_remote.py [--cases 60] [--seed 1] [--prompt short|long] [--ks 64,512,4096]
                                 [--editors 1,4,16] [--seconds 30] [--json OUT] [--plot OUT.png]

Quality: the cursors of ``cpc bench`` (standard-library files a-m, cold
caches, CPC mode; short prompts by default -- whole lines, at most 300
tokens, as ``cpc bench --prompt short``: on two cores a long prompt's cold
prefill dominates every number) completed by the in-process model and by
the remote backend at each K, against a llama-server with one slot on the
same model file, and in-process again batched another way (`REBATCHED`, the
control for identical texts). Per configuration: word and line exact, p50/p95 latency;
per K: the share of cases whose text is identical to the in-process one,
and the bound on the mass outside the top K (the largest ``rest`` of the
request's answers) where the texts differ.

Throughput: 1, 4 and 16 editors (separate processes, as separate editors
are) share one llama-server with ``--parallel 4`` (editor i pinned to slot
i mod 4), each typing identifiers of its own files key by key for a fixed
time (short prompts: whole lines up to 300 tokens), one request after the
other. Requests per second over all editors and p50/p95 per request.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cpc.bench.corpus import expand  # noqa: E402
from cpc.bench.quality import (  # noqa: E402
    KINDS, Case, Outcome, cold_generate, draw_cases, first_text, line_exact, shorten, summarise, word_exact,
)
from cpc.bench.report import print_rows, pyplot  # noqa: E402
from cpc.engine import Engine  # noqa: E402
from cpc.generate import Options, generate  # noqa: E402
from cpc.remote import RemoteOptions  # noqa: E402
from tests.support.llama_server import LlamaServer  # noqa: E402

FILES = "<stdlib>/[a-m]*.py"
LOCAL = "in-process"
REBATCHED = "rebatched"
"""The control: in-process again with one state per ``llama_decode``, the same model and build with only the
batching changed. llama.cpp's CPU logits depend on how a prompt's tokens are split into decodes (by up to
0.09 in probability on this model), so this is how often the model agrees with itself on the text: the
ceiling for the remote backend, whose server batches its own way."""
ACCEPTANCE_KS = (512, 4096)
UNLIMITED_MS = 600_000.0
THROUGHPUT_COLUMNS = [("editors", "editors", "{:7d}"), ("requests", "requests", "{:8d}"),
                      ("requests_per_s", "req/s", "{:6.2f}"), ("p50_ms", "p50 ms", "{:8.0f}"), ("p95_ms", "p95 ms", "{:8.0f}")]


def complete_case(engine: Engine, case: Case, max_tokens: int) -> Outcome:
    """`cpc.bench.quality.complete_case` in CPC mode without the generation time budget: on two busy cores the
    budget would cut texts at load-dependent points, and the texts are compared for identity."""
    generation = cold_generate(engine, case.prefix, Options(max_tokens=max_tokens, time_budget_ms=UNLIMITED_MS))
    text = first_text(generation)
    return Outcome(
        kind=case.kind, word_exact=word_exact(text, case.word_rest), line_exact=line_exact(text, case.line_rest),
        ms=generation.elapsed_ms, lm_calls=generation.lm_calls, text=text,
    )


def in_process(local: Engine, cases: list[Case], max_tokens: int, label: str = LOCAL) -> list[Outcome]:
    started = time.monotonic()
    outcomes = [complete_case(local, case, max_tokens) for case in cases]
    print(f"{label}: done in {time.monotonic() - started:.0f} s", file=sys.stderr)
    return outcomes


def remote(exact: list[Outcome], url: str, cases: list[Case], k: int, max_tokens: int,
           timeout_s: float) -> tuple[list[Outcome], list[dict]]:
    """Every case at one K; per case, whether the text is the in-process one (``exact``) and the bound."""
    started = time.monotonic()
    engine = Engine.load(url, remote=RemoteOptions(top_k=k, timeout_s=timeout_s))
    lm = engine.lm
    outcomes, details = [], []
    for case, reference in zip(cases, exact):
        lm.bounds.clear()
        widened = lm.widened
        outcome = complete_case(engine, case, max_tokens)
        outcomes.append(outcome)
        details.append({
            "identical": outcome.text == reference.text,
            "max_rest": max((bound.rest for bound in lm.bounds), default=0.0),
            "widened": lm.widened - widened,
        })
    print(f"K={k}: done in {time.monotonic() - started:.0f} s", file=sys.stderr)
    return outcomes, details


def summarise_quality(cases: list[Case], outcomes: dict[str, list[Outcome]], details: dict[str, list[dict]]) -> dict:
    results = {
        label: {"overall": summarise(rows), **{kind: summarise([o for o in rows if o.kind == kind]) for kind in KINDS}}
        for label, rows in outcomes.items()
    }
    for label, rows in details.items():
        differing = [row["max_rest"] for row in rows if not row["identical"]]
        results[label]["identical"] = round(sum(row["identical"] for row in rows) / len(rows), 4)
        results[label]["max_rest_p50"] = statistics.median(row["max_rest"] for row in rows)
        results[label]["max_rest_where_different"] = sorted(differing)
        results[label]["widened_per_request"] = round(statistics.mean(row["widened"] for row in rows), 2)
    if REBATCHED in outcomes:
        same = [a.text == b.text for a, b in zip(outcomes[REBATCHED], outcomes[LOCAL])]
        results[REBATCHED]["identical"] = round(sum(same) / len(same), 4)
    base = results[LOCAL]["overall"]["word_exact"]
    return {
        "results": results,
        "acceptance": {
            "word_exact_gap_at_512": round(abs(results["K=512"]["overall"]["word_exact"] - base), 4)
            if "K=512" in results else None,
            "identical_at_4096": results["K=4096"]["identical"] if "K=4096" in results else None,
        },
        "per_case": [
            {"file": case.file, "kind": case.kind, "expected": case.word_rest}
            | {label: asdict(rows[n]) for label, rows in outcomes.items()}
            | {f"{label} bound": rows[n] for label, rows in details.items()}
            for n, case in enumerate(cases)
        ],
    }


def _editor(number: int, url: str, slot: int, cases: list[Case], k: int, max_tokens: int,
            start: multiprocessing.Event, seconds: float, results: multiprocessing.Queue) -> None:
    """One editor: types the identifiers of its cases key by key until the time is up; (start, end) per request."""
    engine = Engine.load(url, remote=RemoteOptions(top_k=k, slot=slot, timeout_s=600))
    results.put(("ready", number, None))
    start.wait()
    deadline = time.monotonic() + seconds
    spans = []
    options = Options(max_tokens=max_tokens)
    for case in cases:
        for typed in range(len(case.word_rest)):
            if time.monotonic() > deadline:
                results.put(("done", number, spans))
                return
            began = time.monotonic()
            generate(engine, case.prefix + case.word_rest[:typed], "", options)
            spans.append((began, time.monotonic()))
    results.put(("done", number, spans))


def throughput(url: str, parallel: int, cases: list[Case], editors: list[int], seconds: float, k: int,
               max_tokens: int) -> list[dict]:
    """Requests per second and latency with each number of editors sharing the server."""
    context = multiprocessing.get_context("spawn")  # separate processes, nothing shared but the server
    rows = []
    for count in editors:
        start, results = context.Event(), context.Queue()
        processes = [
            context.Process(
                target=_editor,
                args=(n, url, n % parallel, cases[n::count] or cases, k, max_tokens, start, seconds, results),
            )
            for n in range(count)
        ]
        for process in processes:
            process.start()
        for _ in processes:
            kind, number, _ = results.get(timeout=600)
            assert kind == "ready", kind
        began = time.monotonic()
        start.set()
        spans = []
        for _ in processes:
            kind, number, editor_spans = results.get(timeout=seconds + 600)
            spans.extend(editor_spans)
        for process in processes:
            process.join()
        window = max(end for _, end in spans) - began
        latencies = sorted((end - begin) * 1000 for begin, end in spans)
        rows.append({
            "editors": count,
            "requests": len(spans),
            "seconds": round(window, 1),
            "requests_per_s": round(len(spans) / window, 2),
            "p50_ms": round(statistics.median(latencies), 1),
            "p95_ms": round(latencies[min(len(latencies) - 1, round(0.95 * (len(latencies) - 1)))], 1),
        })
        print(f"{count} editors: {rows[-1]}", file=sys.stderr)
    return rows


def plot(result: dict, path: str) -> None:
    plt = pyplot()
    fig, (quality_axis, latency_axis, load_axis) = plt.subplots(1, 3, figsize=(15, 4.5))
    results = result["quality"]["results"]
    labels = list(results)
    positions = range(len(labels))
    for offset, (metric, color) in zip((-0.2, 0.2), (("word_exact", "#4c72b0"), ("line_exact", "#dd8452"))):
        values = [100 * results[label]["overall"][metric] for label in labels]
        bars = quality_axis.bar([p + offset for p in positions], values, 0.4, label=metric.replace("_", " "), color=color)
        quality_axis.bar_label(bars, fmt="%.0f%%", fontsize=8)
    ticks = [
        f"{label}\n{100 * results[label]['identical']:.0f}% same" if "identical" in results[label] else label
        for label in labels
    ]
    quality_axis.set_xticks(list(positions), ticks, fontsize=8)
    quality_axis.set_xlabel("% same: cases whose text is the in-process one")
    quality_axis.set_ylim(0, 125)
    quality_axis.set_ylabel("% of cases")
    quality_axis.set_title("quality: in-process vs remote top-K")
    quality_axis.legend(loc="upper center", ncol=2)
    for offset, (metric, color) in zip((-0.2, 0.2), (("p50_ms", "#55a868"), ("p95_ms", "#c44e52"))):
        values = [results[label]["overall"][metric] for label in labels]
        latency_axis.bar([p + offset for p in positions], values, 0.4, label=metric.replace("_ms", ""), color=color)
    latency_axis.set_xticks(list(positions), labels)
    latency_axis.set_ylabel("ms per cold request")
    latency_axis.set_title("latency (1 editor, cold)")
    latency_axis.legend()
    load = result["throughput"]
    editors = [row["editors"] for row in load]
    load_axis.plot(editors, [row["requests_per_s"] for row in load], "o-", color="#4c72b0", label="requests/s")
    load_axis.set_xlabel("editors sharing one llama-server (--parallel 4)")
    load_axis.set_ylabel("requests per second", color="#4c72b0")
    load_axis.set_xscale("log", base=2)
    load_axis.set_xticks(editors, [str(e) for e in editors])
    times = load_axis.twinx()
    times.plot(editors, [row["p50_ms"] for row in load], "s--", color="#55a868", label="p50 ms")
    times.plot(editors, [row["p95_ms"] for row in load], "^--", color="#c44e52", label="p95 ms")
    times.set_ylabel("ms per request")
    times.legend(loc="upper left")
    load_axis.set_title(f"throughput (K={result['throughput_k']}, typing, short prompts)")
    fig.suptitle(f"{result['model']}: {result['cases']} cursors in {FILES} (seed {result['seed']}, "
                 f"{result['prompt']} prompts), "
                 f"llama-server {result['machine']}")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=60)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--prompt", choices=("short", "long"), default="short")
    parser.add_argument("--ks", default="64,512,4096")
    parser.add_argument("--editors", default="1,4,16")
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--throughput-k", type=int, default=512)
    parser.add_argument("--max-tokens", type=int, default=16, help="tokens per completion (an identifier and a short line)")
    parser.add_argument("--machine", default="CPU, 2 cores", help="what the server ran on, for the plot's title")
    parser.add_argument("--server-args", default="", help="more llama-server flags (e.g. -ngl 99 on a GPU)")
    parser.add_argument("--timeout", type=float, default=120, help="seconds per request (both ends share 2 cores)")
    parser.add_argument("--only", choices=("quality", "throughput"), help="one part of the benchmark")
    parser.add_argument("--json")
    parser.add_argument("--plot")
    args = parser.parse_args()
    extra = tuple(args.server_args.split())
    local = Engine.load("default")
    cases = draw_cases(local, expand(FILES), args.cases, args.seed)
    short = [replace(case, prefix=shorten(local.tokenizer, case.prefix)) for case in cases]
    if args.prompt == "short":
        cases = short
    result = {
        "model": "gemma-3-270m Q4_K_M", "files": FILES, "cases": len(cases), "seed": args.seed, "prompt": args.prompt,
        "max_tokens": args.max_tokens, "machine": args.machine, "throughput_k": args.throughput_k,
    }

    def save() -> None:  # after every phase: a long run that stops keeps what it measured
        if args.json:
            Path(args.json).write_text(json.dumps(result, indent=1))

    if args.only == "throughput":
        del local
        with LlamaServer("default", parallel=4, extra=extra) as server:
            result["throughput"] = throughput(server.url, 4, short, [int(e) for e in args.editors.split(",")],
                                              args.seconds, args.throughput_k, 16)
        save()
        print_rows(result["throughput"], THROUGHPUT_COLUMNS)
        return
    outcomes: dict[str, list[Outcome]] = {LOCAL: in_process(local, cases, args.max_tokens)}
    details: dict[str, list[dict]] = {}
    del local
    outcomes[REBATCHED] = in_process(Engine.load("default", states_per_decode=1), cases, args.max_tokens, REBATCHED)

    def run_quality(ks: list[int]) -> None:
        # one slot; erasable (cold requests, as in-process); no host-memory prompt cache to restore from
        with LlamaServer("default", extra=("--slot-save-path", "/tmp", "--cache-ram", "0", *extra)) as server:
            for k in ks:
                outcomes[f"K={k}"], details[f"K={k}"] = remote(
                    outcomes[LOCAL], server.url, cases, k, args.max_tokens, args.timeout
                )
                result["quality"] = summarise_quality(cases, outcomes, details)
                save()

    # The K's of the acceptance targets first, then throughput, then the rest: a run that has to stop early
    # has saved the numbers that matter most.
    ks = [int(k) for k in args.ks.split(",")]
    first = [k for k in ks if k in ACCEPTANCE_KS] or ks
    run_quality(first)
    if args.only == "quality":
        run_quality([k for k in ks if k not in first])
        return
    with LlamaServer("default", parallel=4, extra=extra) as server:
        result["throughput"] = throughput(server.url, 4, short, [int(e) for e in args.editors.split(",")],
                                          args.seconds, args.throughput_k, 16)
    save()
    run_quality([k for k in ks if k not in first])
    measured = result["quality"]
    load = result["throughput"]
    rows = [
        {"config": label, "kind": kind, **row[kind]}
        for label, row in measured["results"].items() for kind in ("overall", *KINDS)
    ]
    print_rows(rows, [("config", "config", "{:10}"), ("kind", "kind", "{:8}"), ("n", "n", "{:3d}"),
                      ("word_exact", "word", "{:6.0%}"), ("line_exact", "line", "{:6.0%}"),
                      ("p50_ms", "p50 ms", "{:8.0f}"), ("p95_ms", "p95 ms", "{:8.0f}")])
    for label, row in measured["results"].items():
        if "max_rest_where_different" in row:
            print(f"{label}: identical texts {row['identical']:.0%}, rest where different "
                  f"{row['max_rest_where_different']}, widened per request {row['widened_per_request']}")
        elif "identical" in row:
            print(f"{label}: identical texts {row['identical']:.0%} (llama.cpp against itself)")
    print(f"acceptance: {measured['acceptance']}")
    print_rows(load, THROUGHPUT_COLUMNS)
    if args.plot:
        plot(result, args.plot)


if __name__ == "__main__":
    main()
