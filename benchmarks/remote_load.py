"""Editors typing against shared llama-servers, for `bench_remote.py`: the load grid (editors x replicas) and the failover run.

Each editor is a separate process, as separate editors are (`Editors`). It
loads the vocabulary once, and for each phase connects to that phase's
servers (one address, or several replicas: `cpc.replicas`), waits for the
start, and types the identifiers of its own cases key by key, over and
over, until the phase's time is up. Per request it keeps when it began and
ended and what came of it: answered, refused (a model server error, said
to the user: `cpc.session.MODEL_SERVER_ERRORS`), or lost (any other
exception). The servers are started here with the documented team
configuration (`TEAM_SERVER_ARGS`), or are those at ``--server-url``.

- `load_grid`: 1, 8 and 32 editors against 1, 2 and 4 replicas: requests
  per second, p50/p95, the states per second the servers answered and the
  slots busy per decode (their ``/metrics``), where a state's time goes.
- `replay_grid`: the same grid with the editors' calls recorded first and
  then replayed by light threads (`replay_load`): the servers' load as a
  team's editors, each on a laptop of its own, would make it.
- `failover`: 16 editors on 2 replicas; one replica is stopped (SIGTERM)
  a quarter into the run and started again at half: every request must be
  answered or refused, none lost.
"""

from __future__ import annotations

import itertools
import json
import math
import multiprocessing
import os
import statistics
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path

from benchmarks.replay_load import Recorder, Request, replay, replay_row
from cpc.engine import Engine
from cpc.generate import Options, generate
from cpc.remote import RemoteOptions, server_addresses
from cpc.replicas import ReplicatedLM, remote_lm
from cpc.session import MODEL_SERVER_ERRORS
from harness.bench.quality import Case
from harness.llama_server import LlamaServer, all_running

TEAM_SERVER_ARGS = ("--no-cache-idle-slots", "--cache-ram", "2048", "--metrics")
"""The documented team configuration (docs/team-server.md), beside `LlamaServer`'s own flags
(``--no-kv-unified``, ``--swa-full``) and ``--parallel``: idle slots keep their prompts (by default every
task's start copies every idle slot's KV cache to host memory), a host-memory prompt cache holds the prompts
of editors beyond the slots, and ``/metrics`` answers."""
ANSWERED, REFUSED, LOST = "answered", "refused", "lost"

PROFILE_COLUMNS = [("replicas", "replicas", "{:8d}"), ("editors", "editors", "{:7d}"),
                   ("states_per_s", "states/s", "{:8.1f}"), ("decodes_per_state", "decodes/state", "{:13.2f}"),
                   ("busy_slots", "busy slots", "{:10.2f}"), ("http_ms", "HTTP ms", "{:8.1f}"),
                   ("server_ms", "server ms", "{:9.1f}"), ("prompt_tokens", "prompt tok", "{:10.1f}"),
                   ("queue_ms", "queue ms", "{:8.1f}"), ("parse_ms", "JSON ms", "{:7.2f}"),
                   ("rows_ms", "rows ms", "{:7.2f}"), ("kib", "KiB", "{:6.1f}")]
"""Per state (averages over every state the editors asked): the HTTP round trip, the server's own compute
(prompt + predicted ms from its timings), the prompt tokens it evaluated, the rest of the round trip (queued
behind other requests, the answer built and sent), the client's JSON decoding and row building, the answer
size; and the servers' ``llama_decode`` calls per state and slots busy per decode."""


def _editor(number: int, commands: multiprocessing.Queue, results: multiprocessing.Queue, k: int,
            max_tokens: int, api: str, greedy_runs: bool) -> None:
    """One editor for every phase: ``(model, cases, record)`` connects (``None``: the end), then a deadline
    types; with ``record``, its HTTP calls come back too (`replay_load.Recorder`)."""
    options = RemoteOptions(top_k=k, timeout_s=600, api=api, greedy_runs=greedy_runs)
    engine = None
    while (command := commands.get()) is not None:
        model, cases, record = command
        engine = Engine.load(model, remote=options) if engine is None else _reconnected(engine, model, options)
        results.put(("ready", number))
        deadline = commands.get()
        before = _counts(engine)
        recorder = Recorder() if record else None
        with recorder.installed() if recorder else nullcontext():
            spans, errors = _type(engine, cases, max_tokens, deadline, recorder)
        after = _counts(engine)
        results.put(("done", number, {"spans": spans, "errors": errors,
                                      "profile": {name: after[name] - before[name] for name in before},
                                      "recording": [r.to_json() for r in recorder.requests] if recorder else None}))


def _reconnected(engine: Engine, model: str, options: RemoteOptions) -> Engine:
    """The engine's vocabulary and stages on other servers: a phase's editor without loading it again."""
    lm = remote_lm(model, engine.tokenizer, engine.index, n_ctx=engine.lm.n_ctx, options=options)
    lm.try_connect()
    return Engine.wire(engine.gguf, lm, engine.tokenizer, engine.index, engine.beam.width, engine.beam.threshold,
                       engine.prompt_tokens)


def _counts(engine: Engine) -> dict:
    """The client's profile and counters: its states asked, the prompt tokens the servers read, per replica."""
    lm = engine.lm
    replicas = lm.replicas if isinstance(lm, ReplicatedLM) else [lm]
    return {**vars(lm.profile), "states": lm.stats.states, "server_prompt_tokens": lm.stats.tokens,
            **{f"replica_{n}": replica.stats.states for n, replica in enumerate(replicas)}}


def _type(engine: Engine, cases: list[Case], max_tokens: int, deadline: float,
          recorder: Recorder | None = None) -> tuple[list[tuple], list[str]]:
    """Type the cases' identifiers key by key until ``deadline``: (began, ended, outcome) per request, and the errors;
    the ``recorder`` keeps each answered request's calls."""
    options = Options(max_tokens=max_tokens)
    spans, errors = [], []
    for case in itertools.cycle(cases):  # busy until the time is up, however many editors share the cases
        for typed in range(len(case.word_rest)):
            if time.monotonic() > deadline:
                return spans, errors
            began = time.monotonic()
            if recorder:
                recorder.begin()
            try:
                generate(engine, case.prefix + case.word_rest[:typed], options=options)
                outcome = ANSWERED
            except MODEL_SERVER_ERRORS as error:
                outcome = REFUSED
                errors.append(str(error))
            except Exception as error:  # noqa: BLE001 - a lost request is what this run counts
                outcome = LOST
                errors.append(repr(error))
            if recorder:
                recorder.end(keep=outcome == ANSWERED)
            spans.append((began, time.monotonic(), outcome))
    return spans, errors


class Editors:
    """Editor processes, started once and reused by every phase (each loads the vocabulary once)."""

    def __init__(self, count: int, k: int, max_tokens: int, api: str, greedy_runs: bool = True) -> None:
        """``greedy_runs`` off: one request per generated token (`cpc.remote.RemoteOptions.greedy_runs`)."""
        context = multiprocessing.get_context("spawn")  # separate processes, nothing shared but the servers
        self.results = context.Queue()
        self.commands = [context.Queue() for _ in range(count)]
        self.processes = [context.Process(target=_editor, args=(n, self.commands[n], self.results, k, max_tokens, api,
                                                                           greedy_runs))
                          for n in range(count)]
        for process in self.processes:
            process.start()

    def prepare(self, count: int, model: str, cases: list[Case]) -> None:
        """The first ``count`` editors connect to ``model``, each with its share of the cases."""
        self.prepare_shares(model, [cases[n::count] or cases for n in range(count)])

    def prepare_shares(self, model: str, shares: list[list[Case]], record: bool = False) -> None:
        """The first editors connect to ``model``, one per share of the cases; ``record``: they record their calls."""
        for n, share in enumerate(shares):
            self.commands[n].put((model, share, record))
        for _ in shares:
            kind, _ = self.results.get(timeout=900)
            assert kind == "ready", kind

    def go(self, count: int, seconds: float) -> float:
        """Start the prepared editors typing for ``seconds``; when they began."""
        began = time.monotonic()
        for n in range(count):
            self.commands[n].put(began + seconds)
        return began

    def collect(self, count: int, seconds: float) -> list[dict]:
        return [self.results.get(timeout=seconds + 900)[2] for _ in range(count)]

    def close(self) -> None:
        for commands in self.commands:
            commands.put(None)
        for process in self.processes:
            process.join(60)


@contextmanager
def replica_servers(count: int, parallel: int, extra: str) -> Iterator[list[LlamaServer]]:
    """``count`` llama-servers of the team configuration sharing this machine: the slots (``parallel``) and the
    cores split between them."""
    slots = max(1, math.ceil(parallel / count))
    threads = max(1, len(os.sched_getaffinity(0)) // count)
    with all_running([LlamaServer("default", parallel=slots, threads=threads, extra=(*TEAM_SERVER_ARGS, *extra.split()))
                      for _ in range(count)]) as servers:
        yield servers


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


def metrics_since(before: list[dict[str, float]], after: list[dict[str, float]]) -> dict:
    """The servers' side of a phase: their ``llama_decode`` calls, the slots busy per decode, and the prompt tokens
    they read (their counters are totals since they started: the phase's share is the difference)."""
    pairs = [(b, a) for b, a in zip(before, after) if "n_decode_total" in b and "n_decode_total" in a]
    if not pairs:
        return {"decodes": float("nan"), "busy_slots": float("nan"), "prompt_tokens_read": float("nan")}
    decodes = sum(a["n_decode_total"] - b["n_decode_total"] for b, a in pairs)
    busy = sum(a["n_decode_total"] * a.get("n_busy_slots_per_decode", 0.0)
               - b["n_decode_total"] * b.get("n_busy_slots_per_decode", 0.0) for b, a in pairs)
    read = sum(a.get("prompt_tokens_total", 0.0) - b.get("prompt_tokens_total", 0.0) for b, a in pairs)
    return {"decodes": decodes, "busy_slots": round(busy / decodes, 2) if decodes else float("nan"),
            "prompt_tokens_read": read}


def profile_row(editors: int, seconds: float, profiles: list[dict]) -> dict:
    """Per state, over every editor: where its time went (`PROFILE_COLUMNS`)."""
    total = {name: sum(p[name] for p in profiles) for name in profiles[0] if not name.startswith("replica_")}
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


def phase_row(editors: int, replicas: int, began: float, done: list[dict], metrics: dict) -> dict:
    """One phase's figures: requests answered per second and their latency, the refused and lost ones, where
    a state's time went, and how the states spread over the replicas."""
    spans = [span for editor in done for span in editor["spans"]]
    answered = sorted((end - start) * 1000 for start, end, outcome in spans if outcome == ANSWERED)
    window = max((end for _, end, _ in spans), default=began + 1) - began
    profiles = [editor["profile"] for editor in done]
    profile = profile_row(editors, window, profiles) | metrics | {"replicas": replicas}
    profile["decodes_per_state"] = round(profile["decodes"] / max(1, profile["states"]), 2)
    return {
        "replicas": replicas, "editors": editors, "requests": len(spans), "seconds": round(window, 1),
        "answered": len(answered), "refused": sum(outcome == REFUSED for *_, outcome in spans),
        "lost": sum(outcome == LOST for *_, outcome in spans),
        "requests_per_s": round(len(answered) / window, 2),
        "p50_ms": round(statistics.median(answered), 1) if answered else float("nan"),
        "p95_ms": round(answered[min(len(answered) - 1, round(0.95 * (len(answered) - 1)))], 1) if answered else float("nan"),
        "states_per_replica": [sum(p.get(f"replica_{n}", 0) for p in profiles) for n in range(replicas)],
        "errors": sorted({error for editor in done for error in editor["errors"]})[:10],
        "profile": profile,
    }


def measure(editors: Editors, count: int, urls: list[str], cases: list[Case], seconds: float) -> dict:
    """``count`` editors typing for ``seconds`` against the servers at ``urls`` (replicas when several)."""
    editors.prepare(count, " ".join(urls), cases)
    before = [server_metrics(url) for url in urls]
    began = editors.go(count, seconds)
    done = editors.collect(count, seconds)
    row = phase_row(count, len(urls), began, done, metrics_since(before, [server_metrics(url) for url in urls]))
    print(f"{len(urls)} replicas, {count} editors: {row}", file=sys.stderr)
    return row


def load_grid(editors: Editors, cases: list[Case], editor_counts: list[int], replica_counts: list[int],
              seconds: float, parallel: int, server_args: str, server_url: str | None) -> list[dict]:
    """Every editor count against every replica count (started here), or against ``server_url``'s servers."""
    rows = []
    for replicas in [0] if server_url else replica_counts:
        with _serving(replicas, parallel, server_args, server_url) as urls:
            rows += [measure(editors, count, urls, cases, seconds) for count in editor_counts]
    return rows


def record(editors: Editors, cases: list[Case], shares: int, urls: list[str], seconds: float,
           wave: int) -> list[list[Request]]:
    """The calls of ``shares`` editors, each typing its share of the cases for ``seconds``, recorded ``wave`` at a
    time so that their own work is not slowed by one another's (`replay_load`)."""
    portions = [cases[n::shares] or cases for n in range(shares)]
    recordings = []
    for first in range(0, shares, wave):
        batch = portions[first:first + wave]
        editors.prepare_shares(" ".join(urls), batch, record=True)
        editors.go(len(batch), seconds)
        recordings += [[Request.from_json(r) for r in done["recording"]]
                       for done in editors.collect(len(batch), seconds)]
        print(f"recorded {len(recordings)} of {shares} editors", file=sys.stderr)
    return recordings


def replay_grid(editors: Editors, cases: list[Case], editor_counts: list[int], replica_counts: list[int],
                seconds: float, parallel: int, server_args: str, server_url: str | None,
                wave: int, saved: Path | None = None) -> tuple[list[dict], dict]:
    """`load_grid` with the editors' calls replayed (`replay_load`): recorded on the first servers (or read from
    ``saved``, where a recording is also written), then sent by as many editors as each phase has. The rows, and
    what was recorded."""
    recordings = [[Request.from_json(r) for r in editor] for editor in json.loads(saved.read_text())] \
        if saved and saved.exists() else []
    read_from_file = bool(recordings)
    rows = []
    for replicas in [0] if server_url else replica_counts:
        with _serving(replicas, parallel, server_args, server_url) as urls:
            if not recordings:
                recordings = record(editors, cases, max(editor_counts), urls, seconds, wave)
                if saved:
                    saved.write_text(json.dumps([[r.to_json() for r in editor] for editor in recordings]))
            for count in editor_counts:
                before = [server_metrics(url) for url in urls]
                spans = replay(recordings, urls, count, seconds)
                after = [server_metrics(url) for url in urls]
                rows.append(replay_row(count, len(urls), spans, metrics_since(before, after)))
                print(f"replayed, {len(urls)} replicas, {count} editors: {rows[-1]}", file=sys.stderr)
    requests = [request for recording in recordings for request in recording]
    recorded = {
        "editors": len(recordings), "requests": len(requests), "wave": None if read_from_file else wave,
        "file": str(saved) if saved else None,
        "calls_per_request": round(statistics.mean(len(r.calls) for r in requests), 2) if requests else 0,
        "own_ms_p50": round(statistics.median(r.own_s for r in requests) * 1000, 1) if requests else 0,
    }
    return rows, recorded


@contextmanager
def _serving(replicas: int, parallel: int, server_args: str, server_url: str | None) -> Iterator[list[str]]:
    """The addresses of the servers at ``server_url``, or of ``replicas`` started here."""
    if server_url:
        yield server_addresses(server_url)
        return
    with replica_servers(replicas, parallel, server_args) as servers:
        yield [server.url for server in servers]


def failover(editors: Editors, cases: list[Case], count: int, seconds: float, parallel: int, server_args: str) -> dict:
    """``count`` editors on 2 replicas; the second is stopped a quarter into the run and started again at half.

    Per second of the run, the requests that began then, by outcome: the
    timeline of the plot."""
    with replica_servers(2, parallel, server_args) as servers:
        urls = [server.url for server in servers]
        editors.prepare(count, " ".join(urls), cases)
        began = editors.go(count, seconds)
        time.sleep(max(0.0, began + seconds / 4 - time.monotonic()))
        stopped = time.monotonic() - began
        servers[1].stop()  # as an administrator stops it (SIGTERM twice): its requests in flight go to the other
        exited = time.monotonic() - began
        time.sleep(max(0.0, began + seconds / 2 - time.monotonic()))
        restarted = time.monotonic() - began
        servers[1].start()
        serving = time.monotonic() - began
        done = editors.collect(count, seconds)
    row = phase_row(count, 2, began, done, metrics_since([], []))  # the replicas' counters restart with them
    spans = [span for editor in done for span in editor["spans"]]
    timeline = {outcome: [0] * (int(seconds) + 1) for outcome in (ANSWERED, REFUSED, LOST)}
    for start, _, outcome in spans:
        timeline[outcome][min(int(seconds), int(start - began))] += 1
    waits = sorted(end - (began + stopped) for start, end, _ in spans if start <= began + stopped < end)
    row |= {"stopped_s": round(stopped, 1), "exited_s": round(exited, 1), "restarted_s": round(restarted, 1),
            "serving_again_s": round(serving, 1),
            "in_flight_at_stop": len(waits),  # and how long they went on after it: the stop's stall
            "after_stop_p50_s": round(statistics.median(waits), 2) if waits else None,
            "after_stop_max_s": round(waits[-1], 2) if waits else None,
            "timeline": timeline}
    print(f"failover: {row}", file=sys.stderr)
    return row
