"""``make bench-remote``: the model in-process vs on a shared server, and one server shared by many editors.

    python benchmarks/bench_remote.py [--cases 60] [--seed 1] [--prompt short|long] [--ks 64,512,4096]
                                      [--apis llama-server,openai] [--editors 1,4,16,32] [--parallel 32]
                                      [--seconds 30] [--server-url URL] [--json OUT] [--plot OUT.png]

Quality: the cursors of ``cpc bench`` (standard-library files a-m, cold
caches, CPC mode; short prompts by default -- whole lines, at most 300
tokens, as ``cpc bench --prompt short``: on two cores a long prompt's cold
prefill dominates every number) completed by the in-process model and by
the remote backend at each K and over each API (llama-server's own
``/completion``, and ``/v1/completions`` as vLLM serves it), against a
llama-server with one slot on the same model file, and in-process again
batched another way (`REBATCHED`, the control for identical texts). Per
configuration: word and line exact, p50/p95 latency; per remote
configuration: the share of cases whose text is identical to the
in-process one, and the bound on the mass outside the top K (the largest
``rest`` of the request's answers) where the texts differ.

Throughput: 1, 4, 16 and 32 editors (separate processes, as separate
editors are) share one llama-server started with the documented team
configuration (`TEAM_SERVER_ARGS`: a slot per expected editor, ``--parallel
32``), or the server at ``--server-url`` (a GPU box), each typing
identifiers of its own files key by key for a fixed time (short prompts:
whole lines up to 300 tokens), one request after the other. Requests per
second over all editors and p50/p95 per request, and where a model state's
time goes (`PROFILE_COLUMNS`: the client's side, and the server's own
timings). The result records the machine it ran on and the server's
command line.
"""

from __future__ import annotations

import argparse
import itertools
import json
import multiprocessing
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
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
from cpc.remote import RemoteLM, RemoteOptions  # noqa: E402
from tests.support.llama_server import LlamaServer  # noqa: E402

FILES = "<stdlib>/[a-m]*.py"
LOCAL = "in-process"
REBATCHED = "rebatched"
"""The control: in-process again with one state per ``llama_decode``, the same model and build with only the
batching changed. llama.cpp's CPU logits depend on how a prompt's tokens are split into decodes (by up to
0.09 in probability on this model), so this is how often the model agrees with itself on the text: the
ceiling for the remote backend, whose server batches its own way."""
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
           timeout_s: float, api: str = "llama-server") -> tuple[list[Outcome], list[dict]]:
    """Every case at one K over one API; per case, whether the text is the in-process one (``exact``) and the bound."""
    started = time.monotonic()
    engine = Engine.load(url, remote=RemoteOptions(top_k=k, timeout_s=timeout_s, api=api))
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
    print(f"{config_name(api, k)}: done in {time.monotonic() - started:.0f} s", file=sys.stderr)
    return outcomes, details


def config_name(api: str, k: int) -> str:
    """A remote configuration's name in the results: ``K=512`` (llama-server's API), ``openai K=512``."""
    return f"K={k}" if api == "llama-server" else f"{api} K={k}"


def summarise_quality(cases: list[Case], outcomes: dict[str, list[Outcome]], details: dict[str, list[dict]]) -> dict:
    results = {
        name: {"overall": summarise(rows), **{kind: summarise([o for o in rows if o.kind == kind]) for kind in KINDS}}
        for name, rows in outcomes.items()
    }
    for name, rows in details.items():
        differing = [row["max_rest"] for row in rows if not row["identical"]]
        results[name]["identical"] = round(sum(row["identical"] for row in rows) / len(rows), 4)
        results[name]["max_rest_p50"] = statistics.median(row["max_rest"] for row in rows)
        results[name]["max_rest_where_different"] = sorted(differing)
        results[name]["widened_per_request"] = round(statistics.mean(row["widened"] for row in rows), 2)
    if REBATCHED in outcomes:
        same = [a.text == b.text for a, b in zip(outcomes[REBATCHED], outcomes[LOCAL])]
        results[REBATCHED]["identical"] = round(sum(same) / len(same), 4)
    def word_exact(name: str) -> float | None:
        return results[name]["overall"]["word_exact"] if name in results else None

    def gap(a: float | None, b: float | None) -> float | None:
        return round(abs(a - b), 4) if a is not None and b is not None else None

    return {
        "results": results,
        "acceptance": {
            "word_exact_gap_at_512": gap(word_exact("K=512"), word_exact(LOCAL)),
            "identical_at_4096": results["K=4096"]["identical"] if "K=4096" in results else None,
            "openai_gap_to_native_at_512": gap(word_exact("openai K=512"), word_exact("K=512")),
        },
        "per_case": [
            {"file": case.file, "kind": case.kind, "expected": case.word_rest}
            | {name: asdict(rows[n]) for name, rows in outcomes.items()}
            | {f"{name} bound": rows[n] for name, rows in details.items()}
            for n, case in enumerate(cases)
        ],
    }


def _editor(number: int, url: str, api: str, cases: list[Case], k: int, max_tokens: int,
            start: multiprocessing.Event, seconds: float, results: multiprocessing.Queue) -> None:
    """One editor: types the identifiers of its cases key by key, over and over, until the time is up; (start, end)
    per request."""
    engine = Engine.load(url, remote=RemoteOptions(top_k=k, timeout_s=600, api=api))
    results.put(("ready", number, None))
    profile_before = _profile(engine.lm)
    start.wait()
    deadline = time.monotonic() + seconds
    spans = []
    options = Options(max_tokens=max_tokens)
    for case in itertools.cycle(cases):  # busy until the time is up, however many editors share the cases
        for typed in range(len(case.word_rest)):
            if time.monotonic() > deadline:
                results.put(("done", number, (spans, _profile_since(engine.lm, profile_before))))
                return
            began = time.monotonic()
            generate(engine, case.prefix + case.word_rest[:typed], "", options)
            spans.append((began, time.monotonic()))


def _profile(lm: RemoteLM) -> dict:
    """The client's profile and counters: its states asked and the prompt tokens the server read for them."""
    return {**vars(lm.profile), "states": lm.stats.states, "server_prompt_tokens": lm.stats.tokens}


def _profile_since(lm: RemoteLM, before: dict) -> dict:
    return {name: value - before[name] for name, value in _profile(lm).items()}


PROFILE_COLUMNS = [("editors", "editors", "{:7d}"), ("states_per_s", "states/s", "{:8.1f}"),
                   ("decodes_per_state", "decodes/state", "{:13.2f}"), ("busy_slots", "busy slots", "{:10.2f}"),
                   ("http_ms", "HTTP ms", "{:8.1f}"), ("server_ms", "server ms", "{:9.1f}"),
                   ("prompt_tokens", "prompt tok", "{:10.1f}"), ("queue_ms", "queue ms", "{:8.1f}"),
                   ("parse_ms", "JSON ms", "{:7.2f}"), ("rows_ms", "rows ms", "{:7.2f}"), ("kib", "KiB", "{:6.1f}")]
"""Per state (averages over every state the editors asked): the HTTP round trip, the server's own compute
(prompt + predicted ms from its timings), the prompt tokens it evaluated, the rest of the round trip (queued
behind other requests, the answer built and sent), the client's JSON decoding and row building, the answer size."""


def server_metrics(url: str) -> dict[str, float]:
    """llama-server's Prometheus counters (``--metrics``), by name; empty from a server without them."""
    try:
        with urllib.request.urlopen(f"{url}/metrics", timeout=30) as response:
            text = response.read().decode()
    except (OSError, ValueError):
        return {}
    found = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name.startswith("llamacpp:"):
            found[name.removeprefix("llamacpp:")] = float(value)
    return found


def metrics_since(before: dict[str, float], after: dict[str, float], requests: int) -> dict:
    """The server's side of a phase: its ``llama_decode`` calls per model state asked (below 1: the states of
    several editors shared decodes), and the slots busy per decode."""
    if "n_decode_total" not in after or "n_decode_total" not in before:
        return {"decodes_per_state": float("nan"), "busy_slots": float("nan")}
    decodes = after["n_decode_total"] - before["n_decode_total"]
    return {"decodes": decodes, "busy_slots": round(after.get("n_busy_slots_per_decode", float("nan")), 2)}


def profile_row(editors: int, seconds: float, profiles: list[dict]) -> dict:
    total = {name: sum(p[name] for p in profiles) for name in profiles[0]}
    states = max(1, total["states"])
    server_ms = (total["server_prompt_ms"] + total["server_predicted_ms"]) / states
    http_ms = total["http_s"] * 1000 / states
    return {
        "editors": editors, "states": total["states"], "requests": total["requests"],
        "states_per_s": round(total["states"] / seconds, 2),
        "http_ms": round(http_ms, 2), "server_ms": round(server_ms, 2),
        "prompt_tokens": round(total["server_prompt_tokens"] / states, 2),
        "queue_ms": round(http_ms - server_ms, 2),
        "parse_ms": round(total["parse_s"] * 1000 / states, 3), "rows_ms": round(total["rows_s"] * 1000 / states, 3),
        "kib": round(total["bytes"] / 1024 / states, 2),
    }


def throughput(url: str, api: str, cases: list[Case], editors: list[int], seconds: float, k: int,
               max_tokens: int) -> list[dict]:
    """Requests per second and latency with each number of editors sharing the server."""
    context = multiprocessing.get_context("spawn")  # separate processes, nothing shared but the server
    rows = []
    for count in editors:
        start, results = context.Event(), context.Queue()
        processes = [
            context.Process(
                target=_editor,
                args=(n, url, api, cases[n::count] or cases, k, max_tokens, start, seconds, results),
            )
            for n in range(count)
        ]
        for process in processes:
            process.start()
        for _ in processes:
            kind, number, _ = results.get(timeout=600)
            assert kind == "ready", kind
        before = server_metrics(url)
        began = time.monotonic()
        start.set()
        spans, profiles = [], []
        for _ in processes:
            kind, number, (editor_spans, profile) = results.get(timeout=seconds + 600)
            spans.extend(editor_spans)
            profiles.append(profile)
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
            "profile": profile_row(count, window, profiles) | metrics_since(before, server_metrics(url), len(spans)),
        })
        profile = rows[-1]["profile"]
        if "decodes" in profile:
            profile["decodes_per_state"] = round(profile["decodes"] / max(1, profile["states"]), 2)
        print(f"{count} editors: {rows[-1]}", file=sys.stderr)
    return rows


def plot(result: dict, path: str) -> None:
    """Quality and cold latency per configuration (when measured), and throughput against the editor count."""
    plt = pyplot()
    panels = (["quality", "latency"] if "quality" in result else []) + (["load"] if "throughput" in result else [])
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels) + 1, 4.5), squeeze=False)
    axes = dict(zip(panels, axes[0]))
    if "quality" in result:
        _plot_quality(axes["quality"], axes["latency"], result["quality"]["results"])
    if "throughput" in result:
        _plot_load(axes["load"], result)
    fig.suptitle(f"{result['model']}: {result['cases']} cursors in {FILES} (seed {result['seed']}, "
                 f"{result['prompt']} prompts); {result['machine']['summary']}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def _plot_quality(quality_axis, latency_axis, results: dict) -> None:
    labels = list(results)
    positions = range(len(labels))
    for offset, (metric, color) in zip((-0.2, 0.2), (("word_exact", "#4c72b0"), ("line_exact", "#dd8452"))):
        values = [100 * results[name]["overall"][metric] for name in labels]
        bars = quality_axis.bar([p + offset for p in positions], values, 0.4, label=metric.replace("_", " "), color=color)
        quality_axis.bar_label(bars, fmt="%.0f%%", fontsize=8)
    ticks = [
        f"{name}\n{100 * results[name]['identical']:.0f}% same" if "identical" in results[name] else name
        for name in labels
    ]
    quality_axis.set_xticks(list(positions), ticks, fontsize=7, rotation=35, ha="right")
    quality_axis.set_xlabel("% same: cases whose text is the in-process one")
    quality_axis.set_ylim(0, 125)
    quality_axis.set_ylabel("% of cases")
    quality_axis.set_title("quality: in-process vs remote top-K")
    quality_axis.legend(loc="upper center", ncol=2)
    for offset, (metric, color) in zip((-0.2, 0.2), (("p50_ms", "#55a868"), ("p95_ms", "#c44e52"))):
        values = [results[name]["overall"][metric] for name in labels]
        latency_axis.bar([p + offset for p in positions], values, 0.4, label=metric.replace("_ms", ""), color=color)
    latency_axis.set_xticks(list(positions), labels, fontsize=7, rotation=35, ha="right")
    latency_axis.set_ylabel("ms per cold request")
    latency_axis.set_title("latency (1 editor, cold)")
    latency_axis.legend()


def _plot_load(load_axis, result: dict) -> None:
    load = result["throughput"]
    editors = [row["editors"] for row in load]
    load_axis.plot(editors, [row["requests_per_s"] for row in load], "o-", color="#4c72b0", label="requests/s")
    load_axis.set_xlabel(f"editors sharing one server ({result['server']['summary']})", fontsize=8)
    load_axis.set_ylabel("requests per second", color="#4c72b0")
    load_axis.set_ylim(bottom=0)
    load_axis.set_xscale("log", base=2)
    load_axis.set_xticks(editors, [str(e) for e in editors])
    load_axis.minorticks_off()
    times = load_axis.twinx()
    times.plot(editors, [row["p50_ms"] for row in load], "s--", color="#55a868", label="p50 ms")
    times.plot(editors, [row["p95_ms"] for row in load], "^--", color="#c44e52", label="p95 ms")
    times.set_ylabel("ms per request")
    times.set_ylim(bottom=0)
    times.legend(loc="upper left")
    load_axis.set_title(f"throughput (K={result['throughput_k']}, typing, short prompts)")


def machine() -> dict:
    """What this benchmark ran on: the CPU, its cores, a GPU if one answers ``nvidia-smi``."""
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor() or platform.machine())
    cores = len(os.sched_getaffinity(0))
    gpu = None
    if shutil.which("nvidia-smi"):
        done = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=30)
        gpu = done.stdout.strip() or None
    summary = f"{gpu or 'no GPU'}, {cores} cores ({cpu})"
    return {"cpu": cpu, "cores": cores, "gpu": gpu, "python": platform.python_version(), "summary": summary}


TEAM_SERVER_ARGS = ("--no-cache-idle-slots", "--cache-ram", "2048", "--metrics")
"""The documented team configuration (docs/team-server.md), beside `LlamaServer`'s own flags
(``--no-kv-unified``, ``--swa-full``) and ``--parallel`` (as many slots as expected editors): idle slots
keep their prompts (by default every task's start copies every idle slot's KV cache to host memory),
a host-memory prompt cache holds the prompts of editors beyond the slots, and ``/metrics`` answers."""


@contextmanager
def team_server(args: argparse.Namespace) -> Iterator[dict]:
    """The server the editors share: ``--server-url``'s, or a llama-server started here with the documented
    configuration; what the result says of it."""
    if args.server_url:
        yield {"url": args.server_url, "summary": f"at {args.server_url}", "started_here": False}
        return
    extra = (*TEAM_SERVER_ARGS, *args.server_args.split())
    with LlamaServer("default", parallel=args.parallel, extra=extra) as server:
        yield {"url": server.url, "summary": f"llama-server --parallel {args.parallel}", "started_here": True,
               "command": [Path(server.command()[0]).name, *server.command()[1:]]}


def run_quality(args: argparse.Namespace, cases: list[Case], result: dict, save: Callable[[], None]) -> None:
    """In-process, rebatched, then each API and K against a one-slot llama-server (or ``--server-url``)."""
    local = Engine.load("default")
    outcomes: dict[str, list[Outcome]] = {LOCAL: in_process(local, cases, args.max_tokens)}
    details: dict[str, list[dict]] = {}
    del local
    outcomes[REBATCHED] = in_process(Engine.load("default", states_per_decode=1), cases, args.max_tokens, REBATCHED)
    # one slot; erasable (cold requests, as in-process); no host-memory prompt cache to restore from
    server = (nullcontext(None) if args.server_url else
              LlamaServer("default", extra=("--slot-save-path", "/tmp", "--cache-ram", "0", *args.server_args.split())))
    with server as running:
        url = args.server_url or running.url
        for api in args.apis.split(","):
            for k in [int(k) for k in args.ks.split(",")]:
                name = config_name(api, k)
                outcomes[name], details[name] = remote(outcomes[LOCAL], url, cases, k, args.max_tokens, args.timeout, api)
                result["quality"] = summarise_quality(cases, outcomes, details)
                save()


def print_quality(measured: dict) -> None:
    rows = [
        {"config": name, "kind": kind, **row[kind]}
        for name, row in measured["results"].items() for kind in ("overall", *KINDS)
    ]
    print_rows(rows, [("config", "config", "{:14}"), ("kind", "kind", "{:8}"), ("n", "n", "{:3d}"),
                      ("word_exact", "word", "{:6.0%}"), ("line_exact", "line", "{:6.0%}"),
                      ("p50_ms", "p50 ms", "{:8.0f}"), ("p95_ms", "p95 ms", "{:8.0f}")])
    for name, row in measured["results"].items():
        if "max_rest_where_different" in row:
            print(f"{name}: identical texts {row['identical']:.0%}, rest where different "
                  f"{row['max_rest_where_different']}, widened per request {row['widened_per_request']}")
        elif "identical" in row:
            print(f"{name}: identical texts {row['identical']:.0%} (llama.cpp against itself)")
    print(f"acceptance: {measured['acceptance']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=60)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--prompt", choices=("short", "long"), default="short")
    parser.add_argument("--ks", default="64,512,4096")
    parser.add_argument("--apis", default="llama-server,openai",
                        help="the APIs the quality part compares (llama-server: /completion; openai: /v1/completions)")
    parser.add_argument("--editors", default="1,4,16,32")
    parser.add_argument("--parallel", type=int, default=32, help="the throughput server's slots (one per editor)")
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--throughput-k", type=int, default=512)
    parser.add_argument("--throughput-api", default="auto", help="the API the editors use (remoteApi)")
    parser.add_argument("--max-tokens", type=int, default=16, help="tokens per completion (an identifier and a short line)")
    parser.add_argument("--server-url", help="drive a server started elsewhere (a GPU box) instead of starting one")
    parser.add_argument("--server-args", default="", help="more llama-server flags (e.g. -ngl 99 on a GPU)")
    parser.add_argument("--timeout", type=float, default=120, help="seconds per request (both ends share 2 cores)")
    parser.add_argument("--only", choices=("quality", "throughput"), help="one part of the benchmark")
    parser.add_argument("--json")
    parser.add_argument("--plot")
    parser.add_argument("--show", metavar="JSON", help="the tables and the plot of an earlier run's JSON")
    args = parser.parse_args()
    if args.show:
        show(json.loads(Path(args.show).read_text()), args.plot)
        return
    local = Engine.load("default")
    cases = draw_cases(local, expand(FILES), args.cases, args.seed)
    short = [replace(case, prefix=shorten(local.tokenizer, case.prefix)) for case in cases]
    del local
    result = {
        "model": "gemma-3-270m Q4_K_M", "files": FILES, "cases": len(cases), "seed": args.seed, "prompt": args.prompt,
        "max_tokens": args.max_tokens, "machine": machine(), "throughput_k": args.throughput_k,
    }

    def save() -> None:  # after every phase: a long run that stops keeps what it measured
        if args.json:
            Path(args.json).write_text(json.dumps(result, indent=1))

    if args.only != "throughput":
        run_quality(args, short if args.prompt == "short" else cases, result, save)
    if args.only != "quality":
        with team_server(args) as server:
            result["server"] = server
            result["throughput"] = throughput(server["url"], args.throughput_api, short,
                                              [int(e) for e in args.editors.split(",")], args.seconds,
                                              args.throughput_k, args.max_tokens)
        save()
    show(result, args.plot)


def show(result: dict, plot_path: str | None) -> None:
    """The tables, and the picture when asked."""
    if "quality" in result:
        print_quality(result["quality"])
    if "throughput" in result:
        print_rows(result["throughput"], THROUGHPUT_COLUMNS)
        print_rows([row["profile"] for row in result["throughput"]], PROFILE_COLUMNS)
    if plot_path:
        plot(result, plot_path)


if __name__ == "__main__":
    main()
