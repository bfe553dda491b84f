"""``make bench-remote``: editors sharing one or several model servers, a replica's failover, and the model
in-process vs on a server.

    python benchmarks/bench_remote.py [--only quality|throughput|failover] [--editors 1,8,32]
                                      [--replicas 1,2,4] [--parallel 32] [--seconds 15]
                                      [--failover-editors 16] [--failover-seconds 60]
                                      [--server-url URL] [--json OUT] [--plot OUT.png]
                                      [--cases 60] [--seed 1] [--prompt short|long] [--ks 64,512,4096]
                                      [--apis llama-server,openai] [--per-token] [--replay [--record-wave 4] [--recording FILE]]

Throughput (`remote_load.load_grid`): 1, 8 and 32 editors (separate
processes, as separate editors are) share 1, 2 and 4 llama-server replicas
started here with the documented team configuration (the ``--parallel``
slots and the cores split between the replicas), or the servers at
``--server-url`` (a GPU box; several addresses: replicas), each typing
identifiers of its own files key by key for a fixed time (short prompts:
whole lines up to 300 tokens), one request after the other. Requests per
second over all editors and p50/p95 per request, the states per second the
servers answered and their busy slots per decode, and where a model
state's time goes (`remote_load.PROFILE_COLUMNS`).

With ``--replay``, each phase's editors are replayed instead
(`remote_load.replay_grid`): the calls of as many editors as the largest
phase has are recorded first, ``--record-wave`` at a time, then sent again
by threads that wait between calls as long as their editor's own work took,
so that the servers are measured without the editors' work on their cores
(a team's editors run on laptops of their own).

Failover (`remote_load.failover`): 16 editors on 2 replicas, one stopped a
quarter into the run (SIGTERM twice, `harness.llama_server.LlamaServer.stop`)
and started again at half: how many requests were answered, refused (said
to the user) or lost (none may be), per second, and how long the requests
in flight at the stop went on after it.

Quality (``--only quality``: not in the default run, which it would make
seven minutes longer): the cursors of ``python -m harness.bench`` (standard-library
files a-m, cold caches, CPC mode; short prompts by default -- whole lines,
at most 300 tokens, as ``python -m harness.bench --prompt short``: on two cores a long
prompt's cold prefill dominates every number) completed by the in-process
model and by the remote backend at each K and over each API (llama-server's
own ``/completion``, and ``/v1/completions`` as vLLM serves it), against a
llama-server with one slot on the same model file, and in-process again
batched another way (`REBATCHED`, the control for identical texts). Per
configuration: word and line exact, p50/p95 latency; per remote
configuration: the share of cases whose text is identical to the
in-process one, and the bound on the mass outside the top K (the largest
``rest`` of the request's answers) where the texts differ.

The result records the machine it ran on and the servers' command line.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import asdict, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cpc.engine import Engine  # noqa: E402
from benchmarks.remote_load import (  # noqa: E402
    PROFILE_COLUMNS, TEAM_SERVER_ARGS, Editors, failover, load_grid, replay_grid,
)
from cpc.generate import Options  # noqa: E402
from cpc.remote import RemoteOptions  # noqa: E402
from harness.bench.quality import (  # noqa: E402
    KINDS, Case, Outcome, cold_generate, draw_cases, first_text, line_exact, shorten, summarise, word_exact,
)
from harness.bench.report import print_rows, pyplot  # noqa: E402
from harness.bench.sources import expand  # noqa: E402
from harness.llama_server import BINARY, LlamaServer  # noqa: E402

FILES = "<stdlib>/[a-m]*.py"
LOCAL = "in-process"
REBATCHED = "rebatched"
"""The control: in-process again with one state per ``llama_decode``, the same model and build with only the
batching changed. llama.cpp's CPU logits depend on how a prompt's tokens are split into decodes (by up to
0.09 in probability on this model), so this is how often the model agrees with itself on the text: the
ceiling for the remote backend, whose server batches its own way."""
UNLIMITED_MS = 600_000.0
COLORS = ("#4c72b0", "#dd8452", "#55a868", "#c44e52")
THROUGHPUT_COLUMNS = [("replicas", "replicas", "{:8d}"), ("editors", "editors", "{:7d}"),
                      ("requests", "requests", "{:8d}"), ("refused", "refused", "{:7d}"), ("lost", "lost", "{:4d}"),
                      ("requests_per_s", "req/s", "{:6.2f}"), ("p50_ms", "p50 ms", "{:8.0f}"), ("p95_ms", "p95 ms", "{:8.0f}")]
REPLAY_COLUMNS = [*THROUGHPUT_COLUMNS, ("editor_own_ms_p50", "own ms p50", "{:10.1f}"),
                  ("decodes", "decodes", "{:8.0f}"), ("busy_slots", "busy slots", "{:10.2f}"),
                  ("prompt_tokens_per_request", "prompt tok/req", "{:14.1f}"),
                  ("slot_steps_per_request", "slot steps/req", "{:14.1f}")]
"""A replayed phase: the editors' own work per request (as recorded, in the p50/p95) and the servers' side."""


def complete_case(engine: Engine, case: Case, max_tokens: int) -> Outcome:
    """`harness.bench.quality.complete_case` in CPC mode without the generation time budget: on two busy cores the
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


def plot(result: dict, path: str) -> None:
    """Quality and cold latency per configuration (when measured), throughput against the editor count per
    replica count, the servers' side, and the failover run's requests per second."""
    plt = pyplot()
    panels = ((["quality", "latency"] if "quality" in result else []) + (["load", "servers"] if "throughput" in result else [])
              + (["replay"] if "replay" in result else []) + (["failover"] if "failover" in result else []))
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels) + 1, 4.5), squeeze=False)
    axes = dict(zip(panels, axes[0]))
    if "quality" in result:
        _plot_quality(axes["quality"], axes["latency"], result["quality"]["results"])
    if "throughput" in result:
        _plot_load(axes["load"], axes["servers"], result)
    if "replay" in result:
        _plot_requests(axes["replay"], result["replay"], "replayed editors, each on a machine of its own (dashed: p95)")
        _log_editors(axes["replay"], result["replay"], f"editors ({result['server']['summary']})")
    if "failover" in result:
        _plot_failover(axes["failover"], result["failover"])
    fig.suptitle(f"{result['model']}: {result['cases']} cursors in {FILES} (seed {result['seed']}, "
                 f"{result['prompt']} prompts)\n{result['machine']['summary']}", fontsize=9)
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


def _plot_load(load_axis, server_axis, result: dict) -> None:
    """Requests per second (solid) and p95 (dashed) against the editors, and the states per second the servers
    answered with their busy slots per decode: a line per replica count."""
    load = result["throughput"]
    _plot_requests(load_axis, load, f"throughput (K={result['throughput_k']}; dashed: p95)")
    for replicas, color in zip(sorted({row["replicas"] for row in load}), COLORS):
        rows = [row for row in load if row["replicas"] == replicas]
        label = f"{replicas} replica{'s' if replicas > 1 else ''}"
        server_axis.plot([row["editors"] for row in rows], [row["profile"]["states_per_s"] for row in rows], "o-",
                         color=color, label=label)
        for row in rows:
            server_axis.annotate(f"{row['profile']['busy_slots']:.1f}", (row["editors"], row["profile"]["states_per_s"]),
                                 fontsize=7, textcoords="offset points", xytext=(0, 5), ha="center")
    server_axis.set_title("the servers: states/s (labels: busy slots per decode)", fontsize=9)
    server_axis.set_ylabel("states per second")
    for axis in (load_axis, server_axis):
        _log_editors(axis, load, f"editors ({result['server']['summary']})")


def _plot_requests(axis, load: list[dict], title: str) -> None:
    """Requests per second (solid) and p95 (dashed, right axis) against the editors, a line per replica count."""
    times = axis.twinx()
    for replicas, color in zip(sorted({row["replicas"] for row in load}), COLORS):
        rows = [row for row in load if row["replicas"] == replicas]
        editors = [row["editors"] for row in rows]
        axis.plot(editors, [row["requests_per_s"] for row in rows], "o-", color=color,
                  label=f"{replicas} replica{'s' if replicas > 1 else ''}")
        times.plot(editors, [row["p95_ms"] for row in rows], "^--", color=color, alpha=0.6)
    axis.set_title(title, fontsize=9)
    axis.set_ylabel("requests per second")
    times.set_ylabel("p95 ms per request")
    times.set_ylim(bottom=0)


def _log_editors(axis, load: list[dict], xlabel: str) -> None:
    """The editor counts on a log scale, the y axis from 0, the legend."""
    axis.set_xlabel(xlabel, fontsize=8)
    axis.set_ylim(bottom=0)
    axis.set_xscale("log", base=2)
    editors = sorted({row["editors"] for row in load})
    axis.set_xticks(editors, [str(e) for e in editors])
    axis.minorticks_off()
    axis.legend(loc="upper left", fontsize=8)


def _plot_failover(axis, run: dict) -> None:
    """Requests per second by outcome over the failover run, the replica's outage shaded."""
    timeline = run["timeline"]
    seconds = range(len(timeline["answered"]))
    for outcome, color in (("answered", "#4c72b0"), ("refused", "#dd8452"), ("lost", "#c44e52")):
        axis.plot(list(seconds), timeline[outcome], color=color, label=f"{outcome}: {sum(timeline[outcome])}")
    axis.axvspan(run["stopped_s"], run["serving_again_s"], color="#cccccc", alpha=0.5, label="one replica stopped")
    axis.set_xlabel("seconds into the run")
    axis.set_ylabel("requests begun per second")
    axis.set_ylim(bottom=0)
    axis.set_title(f"failover: {run['editors']} editors, 2 replicas", fontsize=9)
    axis.legend(fontsize=8)


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
    parser.add_argument("--editors", default="1,8,32")
    parser.add_argument("--replicas", default="1,2,4", help="llama-servers started here for the throughput part")
    parser.add_argument("--parallel", type=int, default=32, help="slots over all replicas (one per editor)")
    parser.add_argument("--seconds", type=float, default=15, help="each throughput phase's typing")
    parser.add_argument("--failover-editors", type=int, default=16)
    parser.add_argument("--failover-seconds", type=float, default=60)
    parser.add_argument("--throughput-k", type=int, default=512)
    parser.add_argument("--throughput-api", default="auto", help="the API the editors use (remoteApi)")
    parser.add_argument("--per-token", action="store_true",
                        help="the editors ask one request per generated token (as before cpc.runs), not a line in one")
    parser.add_argument("--replay", action="store_true",
                        help="throughput with the editors' calls recorded, then replayed by threads: the servers "
                             "without the editors' own work on this machine's cores")
    parser.add_argument("--record-wave", type=int, default=4, help="with --replay: editors recorded at a time")
    parser.add_argument("--recording", type=Path, help="with --replay: the editors' calls are read from this file "
                                                       "when it exists, and written to it when they are recorded")
    parser.add_argument("--max-tokens", type=int, default=16, help="tokens per completion (an identifier and a short line)")
    parser.add_argument("--server-url", help="drive servers started elsewhere (a GPU box; several addresses: "
                                             "replicas) instead of starting them")
    parser.add_argument("--server-args", default="", help="more llama-server flags (e.g. -ngl 99 on a GPU)")
    parser.add_argument("--timeout", type=float, default=120, help="seconds per request (both ends share 2 cores)")
    parser.add_argument("--only", choices=("quality", "throughput", "failover"),
                        help="one part of the benchmark (without it: throughput and failover)")
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
        "greedy_runs": not args.per_token,
    }

    def save() -> None:  # after every phase: a long run that stops keeps what it measured
        if args.json:
            Path(args.json).write_text(json.dumps(result, indent=1))

    if args.only == "quality":
        run_quality(args, short if args.prompt == "short" else cases, result, save)
    else:
        run_load(args, short, result, save)
    show(result, args.plot)


def run_load(args: argparse.Namespace, cases: list[Case], result: dict, save: Callable[[], None]) -> None:
    """The throughput grid and the failover run (or the one ``--only`` names), with editor processes shared by both."""
    counts = [int(e) for e in args.editors.split(",")] if args.only != "failover" else []
    typing = [args.record_wave] if args.replay else counts  # replayed phases need only the recording editors
    editors = Editors(max([*typing, args.failover_editors if args.only != "throughput" else 0]),
                      args.throughput_k, args.max_tokens, args.throughput_api, greedy_runs=not args.per_token)
    try:
        if args.only != "failover":
            replicas = [int(r) for r in args.replicas.split(",")]
            result["server"] = {
                "summary": f"at {args.server_url}" if args.server_url else
                f"llama-server --parallel {args.parallel} over the replicas",
                # one replica's flags; replica_servers splits --parallel and -t between the replicas
                "command": [Path(BINARY).name, *LlamaServer(
                    "default", extra=(*TEAM_SERVER_ARGS, *args.server_args.split())).command()[1:]],
            }
            if args.replay:
                result["replay"], result["recorded"] = replay_grid(
                    editors, cases, counts, replicas, args.seconds, args.parallel, args.server_args, args.server_url,
                    args.record_wave, args.recording)
            else:
                result["throughput"] = load_grid(editors, cases, counts, replicas, args.seconds, args.parallel,
                                                 args.server_args, args.server_url)
            save()
        if args.only != "throughput" and not args.server_url:
            result["failover"] = failover(editors, cases, args.failover_editors, args.failover_seconds, args.parallel,
                                          args.server_args)
            save()
    finally:
        editors.close()


def show(result: dict, plot_path: str | None) -> None:
    """The tables, and the picture when asked."""
    if "quality" in result:
        print_quality(result["quality"])
    if "throughput" in result:
        print_rows(result["throughput"], THROUGHPUT_COLUMNS)
        print_rows([row["profile"] for row in result["throughput"]], PROFILE_COLUMNS)
    if "replay" in result:
        print(f"replayed: {result['recorded']}")
        print_rows(result["replay"], REPLAY_COLUMNS)
    if "failover" in result:
        run = result["failover"]
        print_rows([run], THROUGHPUT_COLUMNS)
        print(f"failover: one of 2 replicas stopped at {run['stopped_s']} s (exited at {run.get('exited_s', '?')} s), "
              f"started again at {run['restarted_s']} s, serving at {run['serving_again_s']} s; states per replica {run['states_per_replica']}; "
              f"errors {run['errors']}")
        if "in_flight_at_stop" in run:  # runs before it was measured lack it
            print(f"in flight at the stop: {run['in_flight_at_stop']} requests, answered {run['after_stop_p50_s']} s "
                  f"(p50) and at most {run['after_stop_max_s']} s after it")
    if plot_path:
        plot(result, plot_path)


if __name__ == "__main__":
    main()
