"""Soak run of the server: a headless editor edits a large real file for minutes.

    python benchmarks/soak.py [--duration 600] [--seed 1] [--model default] [--json OUT] [--plot OUT.png]

A headless editor (`harness.headless`) opens the standard library's
``argparse.py`` and, for ``--duration`` seconds, edits it the way a person
does: types real code at human speed (100-200 ms between keys) and in bursts
(a few ms), deletes, jumps the cursor, pastes and cuts blocks of lines, and
now and then pauses and accepts the suggestion shown. After each edit it asks
for inline completions as an editor does: the newest request wins, and a
stale one still unanswered gets a ``$/cancelRequest`` now and then (as VS Code
sends sometimes). Every ``--check-every`` edits, and at the end, the server's
copy of the document (``cpc/documentText``) must equal the editor's.

Each request is classified when its answer arrives:

- ``superseded``: a newer request was sent before it was answered (the
  server drops it, or stops its model work, and answers an empty list);
- ``cancelled``: the editor sent ``$/cancelRequest`` for it;
- ``cache``: answered from the server's suggestion cache; the editor keeps a
  `cpc.session.SuggestionCache` of the model answers it received, which
  predicts the server's (the total is checked against the server's counter);
- ``model``: the rest, answered by the model.

The server's resident memory (``VmRSS``) is read every second: it must level
off (the engine's caches are bounded). The exit status is 1 when a request
failed, a desync was seen, or the final texts differ.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import sysconfig
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lsprotocol import types  # noqa: E402
from pygls.exceptions import JsonRpcRequestCancelled  # noqa: E402

from cpc.session import SuggestionCache  # noqa: E402
from cpc.window import Window  # noqa: E402
from harness.headless import HeadlessEditor, Request  # noqa: E402
from lsp_server.requests import RELEASE_IDLE_S  # noqa: E402
from lsp_server.settings import Settings  # noqa: E402

HUMAN_GAP_S = (0.100, 0.200)
BURST_GAP_S = (0.002, 0.008)
ACTIONS = {"type": 34, "burst": 14, "delete": 16, "jump": 12, "paste": 6, "cut": 6, "pause": 12}
"""Relative weights of what the person does next."""
CANCEL_STALE = 0.3
"""How often a new request comes with ``$/cancelRequest`` for the stale one still unanswered."""
ACCEPT_AFTER_PAUSE = 0.6
"""How often a pause ends with Tab when a suggestion is shown."""
SIZE_BAND = (0.9, 1.1)
"""Pastes and cuts keep the document within this band of its original size."""
KINDS = ("model", "cache", "superseded", "cancelled")


@dataclass(eq=False)
class Record:
    """One request as the soak saw it."""

    request: Request
    at: float
    """Seconds since the soak began, when it was sent."""
    pace: str
    """``human``, ``burst`` or ``other`` (after a jump, paste, cut or accepted suggestion)."""
    window: Window | None = field(default=None, repr=False)
    """The window the server reads at the cursor when sent (its cache's key); dropped once the answer is
    classified."""
    superseded: bool = False
    kind: str | None = None
    items: list[types.InlineCompletionItem] = field(default_factory=list)
    error: str | None = None


@dataclass
class Edit:
    """One ``didChange``, kept until the next sync check so that a desync can name its edit."""

    number: int
    version: int
    action: str
    start: int
    end: int
    text: str
    line: int


class Soak:
    """The person at the keyboard, the bookkeeping, and the checks."""

    def __init__(self, editor: HeadlessEditor, source: str, rng: random.Random, check_every: int) -> None:
        self.editor = editor
        self.source = source
        self.lines = [line for line in source.splitlines() if line.strip()]
        self.rng = rng
        self.check_every = check_every
        self.options = Settings().options
        self.shown_cache = SuggestionCache()
        self.records: list[Record] = []
        self.newest: Record | None = None
        self.keystrokes = 0
        self.edits: list[Edit] = []
        self.edit_count = 0
        self.actions: Counter[str] = Counter()
        self.accepted = 0
        self.checks = 0
        self.desyncs: list[dict] = []
        self.errors: list[str] = []
        self.drain_s = 0.0
        self.rss: list[tuple[float, float, float]] = []
        """(seconds, VmRSS MB, RssAnon MB) every second."""
        self.started = time.perf_counter()

    # -- the person -----------------------------------------------------------

    async def run(self, duration: float, progress_every: float, drain_timeout: float) -> None:
        sampler = asyncio.create_task(self.sample_rss())
        reporter = asyncio.create_task(self.report_progress(progress_every))
        deadline = self.started + duration
        try:
            while time.perf_counter() < deadline and self.server_alive():
                action = self.rng.choices(list(ACTIONS), weights=list(ACTIONS.values()))[0]
                action = self.balance(action)
                self.actions[action] += 1
                await getattr(self, action)()
                if self.edit_count >= self.checks_due():
                    await self.check_sync()
        finally:
            await self.settle(drain_timeout)
            await self.check_sync()
            sampler.cancel()
            reporter.cancel()
            self.sample_rss_once()

    def balance(self, action: str) -> str:
        """Pastes and cuts keep the document near its original size."""
        size = len(self.editor.text) / len(self.source)
        if action == "paste" and size > SIZE_BAND[1]:
            return "cut"
        if action == "cut" and size < SIZE_BAND[0]:
            return "paste"
        return action

    async def type(self) -> None:
        await self.type_code(HUMAN_GAP_S, "human")

    async def burst(self) -> None:
        await self.type_code(BURST_GAP_S, "burst")

    async def type_code(self, gaps: tuple[float, float], pace: str) -> None:
        """A new line of real code (auto-indented, as editors do), or a fragment at the cursor."""
        line = self.rng.choice(self.lines).strip()
        if self.rng.random() < 0.5:
            here = self.editor.text[: self.editor.cursor]
            current = here[here.rfind("\n") + 1 :]
            indent = current[: len(current) - len(current.lstrip())]
            self.edit("enter", self.editor.cursor, self.editor.cursor, "\n" + indent)
            self.ask(pace)
            await self.gap(gaps)
        else:
            start = self.rng.randrange(len(line))
            line = line[start : start + self.rng.randint(3, 30)]
        for char in line[: self.rng.randint(3, 60)]:
            self.edit("key", self.editor.cursor, self.editor.cursor, char)
            self.ask(pace)
            await self.gap(gaps)

    async def delete(self) -> None:
        gaps, pace = (HUMAN_GAP_S, "human") if self.rng.random() < 0.6 else (BURST_GAP_S, "burst")
        for _ in range(self.rng.randint(1, 12)):
            if self.editor.cursor == 0:
                break
            self.edit("backspace", self.editor.cursor - 1, self.editor.cursor, "")
            self.ask(pace)
            await self.gap(gaps)

    async def jump(self) -> None:
        """Click somewhere: the end of a line, or inside it. Editors ask for a suggestion there too."""
        starts = self.line_starts()
        line = self.rng.randrange(len(starts))
        end = starts[line + 1] - 1 if line + 1 < len(starts) else len(self.editor.text)
        self.editor.cursor = end if self.rng.random() < 0.6 else self.rng.randint(starts[line], end)
        self.ask("other")
        await self.gap(HUMAN_GAP_S)

    async def paste(self) -> None:
        """A block of real lines from elsewhere in the file, pasted at a line start."""
        source_lines = self.source.splitlines(keepends=True)
        first = self.rng.randrange(len(source_lines))
        block = "".join(source_lines[first : first + self.rng.randint(2, 12)])
        starts = self.line_starts()
        at = starts[self.rng.randrange(len(starts))]
        self.edit("paste", at, at, block)
        self.ask("other")
        await self.gap(HUMAN_GAP_S)

    async def cut(self) -> None:
        """Select a few whole lines and delete them."""
        starts = self.line_starts()
        first = self.rng.randrange(len(starts))
        last = min(len(starts) - 1, first + self.rng.randint(2, 12))
        end = starts[last] if last > first else len(self.editor.text)
        self.edit("cut", starts[first], end, "")
        self.ask("other")
        await self.gap(HUMAN_GAP_S)

    async def pause(self) -> None:
        """Stop to read; accept what is shown now and then."""
        await asyncio.sleep(self.rng.uniform(0.3, 2.0))
        shown = self.shown_suggestion()
        if shown is not None and self.rng.random() < ACCEPT_AFTER_PAUSE:
            self.record_edit("accept", self.editor.offset(shown.range.start), self.editor.offset(shown.range.end),
                             shown.insert_text)
            self.editor.accept(shown)
            self.accepted += 1
            self.ask("other")

    def shown_suggestion(self) -> types.InlineCompletionItem | None:
        """The first item of the newest answer, if it answers about the text as it is now."""
        newest = self.newest
        if newest is None or newest.kind is None or not newest.items:
            return None
        if newest.request.version != self.editor.version or newest.request.cursor != self.editor.cursor:
            return None
        return newest.items[0]

    async def gap(self, gaps: tuple[float, float]) -> None:
        await asyncio.sleep(self.rng.uniform(*gaps))

    def line_starts(self) -> list[int]:
        text = self.editor.text
        starts = [0]
        position = text.find("\n")
        while position != -1 and position + 1 < len(text):
            starts.append(position + 1)
            position = text.find("\n", position + 1)
        return starts

    # -- edits and requests ---------------------------------------------------

    def edit(self, action: str, start: int, end: int, text: str) -> None:
        self.record_edit(action, start, end, text)
        self.editor.replace(start, end, text)

    def record_edit(self, action: str, start: int, end: int, text: str) -> None:
        self.edit_count += 1
        if action in ("key", "backspace", "enter"):
            self.keystrokes += 1
        line = self.editor.text.count("\n", 0, start)
        self.edits.append(Edit(self.edit_count, self.editor.version + 1, action, start, end, text, line))

    def ask(self, pace: str) -> None:
        """Request suggestions at the cursor; the one still waiting is stale now."""
        editor = self.editor
        stale = self.newest if self.newest is not None and self.newest.request.answered is None else None
        record = Record(
            editor.request_suggestions(),
            at=time.perf_counter() - self.started,
            pace=pace,
            window=Window.at(editor.text, editor.cursor),  # the server's engine: the default prompt window
        )
        if stale is not None:
            stale.superseded = True
            if self.rng.random() < CANCEL_STALE:
                editor.cancel(stale.request)
        self.records.append(record)
        self.newest = record
        record.request.answer.add_done_callback(lambda _: self.classified(record))

    def classified(self, record: Record) -> None:
        """`classify`, with a failure of the soak's own bookkeeping counted as an error (a callback's exception
        would only be logged, and the run would pass without having checked it)."""
        try:
            self.classify(record)
        except Exception as error:  # noqa: BLE001 - reported, and the run fails
            self.errors.append(f"the soak could not classify the answer sent at {record.at:.1f} s: {error!r}")

    def classify(self, record: Record) -> None:
        """Runs when the answer arrives, in arrival order (the order the server answered)."""
        request = record.request
        try:
            answer = request.answer.result()
        except JsonRpcRequestCancelled as error:
            answer = None
            if not request.cancelled:
                record.error = f"request cancelled without $/cancelRequest: {error}"
        except Exception as error:  # any error response is a failure the report counts
            answer = None
            record.error = f"{type(error).__name__}: {error}"
        record.items = list(answer.items) if answer else []
        from_cache = self.shown_cache.lookup(self.editor.uri, record.window, self.options) is not None
        if record.error:
            record.kind = "error"
            self.errors.append(f"request sent at {record.at:.1f} s: {record.error}")
        elif request.cancelled and request.answered is not None and answer is None:
            record.kind = "cancelled"
        elif record.superseded and not from_cache:
            record.kind = "superseded"
        else:
            record.kind = "cache" if from_cache else "model"
        if not from_cache and record.items:
            # The server remembers every answer its model finished, even one the editor no longer wanted.
            texts = [_after_cursor(item) for item in record.items]
            self.shown_cache.remember(self.editor.uri, record.window, self.options, texts)
        record.window = None

    async def settle(self, timeout: float) -> None:
        """Wait for every answer still on its way."""
        pending = [r.request.answer for r in self.records if not r.request.answer.done()]
        started = time.perf_counter()
        if pending:
            _, late = await asyncio.wait(pending, timeout=timeout)
            if late:
                self.errors.append(f"{len(late)} requests still without an answer {timeout:.0f} s after the editing stopped")
        self.drain_s = time.perf_counter() - started
        await asyncio.sleep(0)  # let the last classifications run

    # -- checks ---------------------------------------------------------------

    def checks_due(self) -> int:
        return (self.checks + 1) * self.check_every if not self.desyncs else self.edit_count

    async def check_sync(self) -> None:
        """The server's copy must be the editor's; on a desync, name the edits since the last good check."""
        if not self.server_alive():
            return
        self.checks += 1
        editor = self.editor
        text, version = await editor.server_text()
        if text == editor.text and version == editor.version:
            self.edits.clear()
            return
        where = next((k for k, (a, b) in enumerate(zip(text, editor.text)) if a != b), min(len(text), len(editor.text)))
        line = editor.text.count("\n", 0, where)
        self.desyncs.append({
            "at_s": round(time.perf_counter() - self.started, 1),
            "editor_version": editor.version,
            "server_version": version,
            "first_difference": {"offset": where, "line": line,
                                 "editor": editor.text[max(0, where - 40) : where + 40],
                                 "server": text[max(0, where - 40) : where + 40]},
            "edits_since_last_good_check": len(self.edits),
            "edits_near_the_difference": [vars(e) for e in self.edits if abs(e.line - line) <= 2][-20:],
        })
        print(f"DESYNC at version {editor.version} (server {version}), line {line + 1}: "
              f"{self.desyncs[-1]['edits_near_the_difference'][-1:] or 'edit unknown'}", file=sys.stderr, flush=True)
        # Start over from the editor's copy, and check after every action from now on to pin the next one.
        editor.close()
        self.shown_cache.forget(editor.uri)
        await editor.open(editor.uri, editor.text, cursor=editor.cursor)
        self.edits.clear()

    def server_alive(self) -> bool:
        status = self.editor.server_exit_status
        if status is not None and not any("server exited" in e for e in self.errors):
            self.errors.append(f"server exited with status {status}")
        return status is None

    # -- memory and progress --------------------------------------------------

    def sample_rss_once(self) -> None:
        memory = _memory_mb(self.editor.server_pid)
        if memory is not None:
            self.rss.append((round(time.perf_counter() - self.started, 2), *memory))

    async def sample_rss(self) -> None:
        while True:
            self.sample_rss_once()
            await asyncio.sleep(1.0)

    async def report_progress(self, every: float) -> None:
        while True:
            await asyncio.sleep(every)
            elapsed = time.perf_counter() - self.started
            kinds = Counter(r.kind for r in self.records)
            model = [r.request.latency_ms for r in self.records if r.kind == "model"]
            print(
                f"[{elapsed:6.0f} s] keystrokes {self.keystrokes}, requests {len(self.records)} "
                f"(model {kinds['model']}, cache {kinds['cache']}, superseded {kinds['superseded']}, "
                f"cancelled {kinds['cancelled']}), model p50 {_percentile(model, 0.5):.0f} ms, "
                f"accepted {self.accepted}, errors {len(self.errors)}, desyncs {len(self.desyncs)}, "
                f"RSS {self.rss[-1][1] if self.rss else float('nan'):.0f} MB (anon {self.rss[-1][2] if self.rss else float('nan'):.0f}), "
                f"doc {len(self.editor.text)} chars",
                file=sys.stderr, flush=True,
            )


def _after_cursor(item: types.InlineCompletionItem) -> str:
    """The item's text after the cursor: it repeats the word before the cursor that its range covers."""
    covered = item.range.end.character - item.range.start.character  # UTF-16 units on one line
    return item.insert_text.encode("utf-16-le")[2 * covered :].decode("utf-16-le")


def _memory_mb(pid: int) -> tuple[float, float] | None:
    """``VmRSS`` and its anonymous part ``RssAnon`` (the heap: the caches; the rest is mapped model file)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    try:
        return tuple(round(int(fields[name].split()[0]) / 1024, 1) for name in ("VmRSS", "RssAnon"))
    except (KeyError, ValueError):
        return None


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else float("nan")


def growth(samples: list[tuple[float, float]]) -> dict:
    """Start, end, peak, the median of the last quarter (the level), and the growth over the second half of the
    run, fitted (a plateau grows ~0 there): the server gives freed heap back between bursts, so any two
    samples differ by a burst's worth.

    >>> flat = [(t, 600.0 + (40 if t % 7 == 0 else 0)) for t in range(100)]
    >>> growth(flat)["plateau"], growth(flat)["level_mb"], growth([(t, 500.0 + t) for t in range(100)])["plateau"]
    (True, 600.0, False)
    """
    if len(samples) < 4:
        return {"samples": len(samples)}
    values = [mb for _, mb in samples]
    half = samples[len(samples) // 2 :]
    times = [t for t, _ in half]
    slope = statistics.linear_regression(times, [mb for _, mb in half]).slope if len(set(times)) > 1 else 0.0
    second_half_growth = slope * (times[-1] - times[0])
    return {
        "level_mb": statistics.median(values[len(values) * 3 // 4 :]),
        "start_mb": values[0],
        "end_mb": values[-1],
        "peak_mb": max(values),
        "second_half_growth_mb": round(second_half_growth, 1),
        "second_half_slope_mb_per_min": round(slope * 60, 2),
        "plateau": second_half_growth <= max(32.0, 0.05 * values[-1]),
    }


async def _at_rest(editor: HeadlessEditor, released: int | None, timeout_s: float = 30.0) -> int | None:
    """Wait until the server has given memory back after the editing stopped (its count of ``released`` grows),
    at most ``timeout_s``; the count then. A server from before the count (a baseline run): `RELEASE_IDLE_S`."""
    deadline = time.monotonic() + timeout_s
    await asyncio.sleep(RELEASE_IDLE_S)
    while time.monotonic() < deadline:
        now = getattr(await editor.status(), "released", None)
        if released is None or now > released:
            return now
        await asyncio.sleep(0.5)
    return now


def summarize(soak: Soak, duration: float, seed: int, model: str, server_counts: dict, final_equal: bool) -> dict:
    latency = {}
    for kind in KINDS:
        values = [r.request.latency_ms for r in soak.records if r.kind == kind and r.request.latency_ms is not None]
        latency[kind] = {
            "n": len(values),
            "p50_ms": round(_percentile(values, 0.5), 1) if values else None,
            "p95_ms": round(_percentile(values, 0.95), 1) if values else None,
            "max_ms": round(max(values), 1) if values else None,
        }
    predicted_cache = sum(r.kind == "cache" for r in soak.records)
    return {
        "model": model,
        "seed": seed,
        "duration_s": duration,
        "file": "argparse.py",
        "file_chars": len(soak.source),
        "final_chars": len(soak.editor.text),
        "keystrokes": soak.keystrokes,
        "edits": soak.edit_count,
        "actions": dict(soak.actions),
        "accepted_suggestions": soak.accepted,
        "requests": len(soak.records),
        "requests_by_pace": dict(Counter(r.pace for r in soak.records)),
        "latency_by_kind": latency,
        "server_counts": server_counts,
        "cache_answers_editor_vs_server": [predicted_cache, server_counts.get("from_cache")],
        "errors": len(soak.errors),
        "error_messages": soak.errors[:50],
        "server_error_messages": [m.message for m in soak.editor.shown if m.type == types.MessageType.Error][:20],
        "sync_checks": soak.checks,
        "desyncs": len(soak.desyncs),
        "desync_details": soak.desyncs,
        "final_text_identical": final_equal,
        "rss": growth([(t, rss) for t, rss, _ in soak.rss]),
        "rss_anon": growth([(t, anon) for t, _, anon in soak.rss]),
        "drain_s": soak.drain_s,
        "server_stderr_tail": list(soak.editor.server_stderr)[-20:],
        "rss_curve": soak.rss,
        "requests_timeline": [
            {"at_s": round(r.at, 3), "ms": round(r.request.latency_ms, 1), "kind": r.kind, "pace": r.pace}
            for r in soak.records if r.request.latency_ms is not None
        ],
    }


async def soak_run(
    model: str, duration: float, seed: int, check_every: int, progress_every: float, drain_timeout: float
) -> dict:
    source = (Path(sysconfig.get_paths()["stdlib"]) / "argparse.py").read_text(encoding="utf-8")
    rng = random.Random(seed)
    # An editor's settings: the server's own debounce, not the benchmark's zero.
    settings = {"debounceMs": Settings().debounce_ms}
    print(f"soak: starting cpc-lsp on {model}, {duration:.0f} s, seed {seed}", file=sys.stderr, flush=True)
    async with HeadlessEditor(["--model", model], settings=settings) as editor:
        await editor.open("file:///soak/argparse.py", source, cursor=0)
        soak = Soak(editor, source, rng, check_every)
        soak.sample_rss_once()
        await soak.run(duration, progress_every, drain_timeout)
        final_text, final_version = await editor.server_text() if soak.server_alive() else ("", -1)
        final_equal = final_text == editor.text and final_version == editor.version
        counts = await editor.status() if soak.server_alive() else None
        names = ("requests", "from_cache", "from_model", "superseded", "stopped", "not_ready")
        server_counts = {name: getattr(counts, name) for name in names} if counts else {}
        if soak.server_alive():  # the user stops: the server gives back what it can once its work is done
            server_counts["released"] = await _at_rest(editor, getattr(counts, "released", None))
        result = summarize(soak, duration, seed, model, server_counts, final_equal)
        result["at_rest_mb"] = _memory_mb(editor.server_pid)
        return result


def summary_text(result: dict) -> str:
    lines = [
        f"soak: {result['duration_s']:.0f} s on {result['file']} ({result['file_chars']} chars), "
        f"model {result['model']}, seed {result['seed']}",
        f"  keystrokes {result['keystrokes']}, edits {result['edits']} {result['actions']}, "
        f"accepted suggestions {result['accepted_suggestions']}",
        f"  requests {result['requests']} {result['requests_by_pace']}",
    ]
    for kind, row in result["latency_by_kind"].items():
        if row["n"]:
            lines.append(f"    {kind:10} n={row['n']:5}  p50 {row['p50_ms']:7.1f} ms  p95 {row['p95_ms']:7.1f} ms  "
                         f"max {row['max_ms']:7.1f} ms")
    lines += [
        f"  server counts {result['server_counts']}",
        f"  cache answers, editor's prediction vs server: {result['cache_answers_editor_vs_server']}",
        f"  errors {result['errors']}, desyncs {result['desyncs']} in {result['sync_checks']} checks, "
        f"final text identical: {result['final_text_identical']}",
        f"  answers still on their way when the editing stopped took {result['drain_s']:.1f} s more",
    ]
    for name, title in (("rss", "VmRSS"), ("rss_anon", "RssAnon")):
        rss = result[name]
        if "start_mb" in rss:
            lines.append(
                f"  {title:8} start {rss['start_mb']:6.0f} MB, end {rss['end_mb']:6.0f} MB, peak {rss['peak_mb']:6.0f} MB, "
                f"level (last quarter's median) {rss['level_mb']:6.0f} MB, "
                f"second half {rss['second_half_growth_mb']:+.0f} MB fitted ({rss['second_half_slope_mb_per_min']:+.1f} MB/min): "
                f"{'plateau' if rss['plateau'] else 'STILL GROWING'}"
            )
    if result.get("at_rest_mb"):
        lines.append(f"  at rest (the editing stopped, the server's work done): VmRSS {result['at_rest_mb'][0]:.0f} MB, "
                     f"RssAnon {result['at_rest_mb'][1]:.0f} MB")
    for message in result["error_messages"][:5]:
        lines.append(f"  error: {message}")
    return "\n".join(lines)


def plot(result: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (memory, latency) = plt.subplots(2, 1, figsize=(12, 7), sharex=True)
    curve = result["rss_curve"]
    memory.plot([row[0] for row in curve], [row[1] for row in curve], color="#8172b2", label="VmRSS")
    memory.plot([row[0] for row in curve], [row[2] for row in curve], color="#937860", label="RssAnon (heap)")
    memory.axvline(result["duration_s"], color="#999999", ls="--", lw=1, label="editing stops")
    memory.legend(fontsize=8)
    memory.set_ylabel("server memory (MB)")
    memory.set_ylim(bottom=0)
    memory.set_title(f"soak: {result['keystrokes']} keystrokes, {result['requests']} requests, "
                     f"{result['errors']} errors, {result['desyncs']} desyncs")
    colors = {"model": "#4c72b0", "cache": "#55a868", "superseded": "#dd8452", "cancelled": "#c44e52"}
    for kind, color in colors.items():
        points = [(r["at_s"], r["ms"]) for r in result["requests_timeline"] if r["kind"] == kind]
        latency.scatter([p[0] for p in points], [p[1] for p in points], s=6, color=color, alpha=0.6,
                        label=f"{kind} ({len(points)})")
    latency.set_yscale("log")
    latency.set_xlabel("time (s)")
    latency.set_ylabel("time to the answer (ms, log)")
    latency.legend(fontsize=8, markerscale=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=600, help="seconds of editing (default 600)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--model", default="default")
    parser.add_argument("--check-every", type=int, default=100, help="edits between sync checks")
    parser.add_argument("--progress-every", type=float, default=15, help="seconds between progress lines")
    parser.add_argument("--drain-timeout", type=float, default=120,
                        help="seconds the answers still on their way may take after the editing stops")
    parser.add_argument("--json")
    parser.add_argument("--plot")
    args = parser.parse_args()
    result = asyncio.run(
        soak_run(args.model, args.duration, args.seed, args.check_every, args.progress_every, args.drain_timeout)
    )
    print(summary_text(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    if args.plot:
        plot(result, args.plot)
    failed = result["errors"] or result["desyncs"] or not result["final_text_identical"]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
