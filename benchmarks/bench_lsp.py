"""Latency benchmark of the server: typing real code, keystroke by keystroke.

    python benchmarks/bench_lsp.py [--model default] [--chars 60] [--repeat N] [--beside core|model] [--only PART]
                                   [--pairs 20] [--json OUT] [--plot OUT.png]

A headless editor (`harness.headless`) opens standard-library files with
a stretch of code removed and types it back, one character at a time, the
way an editor does: ``didChange``, then ``textDocument/inlineCompletion``,
waiting for each answer (debounce off). Each stretch starts with a cold
request (nothing about the file in any cache). While the model works on a
request, a ``cpc/status`` request measures how long the event loop takes to
answer (``didChange`` is handled by the same loop).

Then the same requests are replayed on the bare engine in this process
(`cpc.session.CompletionSession`, the same caches, document updates and
fusion weights, no LSP), so the server's overhead is the median of each
request's time over its replay's, over the requests that did the same work:
answered by the model on both sides, with the same text (a different text
took a different number of model calls). The ratio of the two medians is
reported too (``server_over_bare_p50``).

``--beside core`` keeps one core busy in another process meanwhile (a
build), ``--beside model`` runs another llama.cpp process beside it (a
model test: `harness.beside`).

The editor scenario is a person in a real editor, with the server's
shipping settings (``--set KEY=VALUE`` changes one): open a file of ~2,000
lines, read for a second, jump to a line in the middle (an editor sends
nothing for that) and type its first name there, a key every 150 ms. Each
key is a ``didChange``, then a ``$/cancelRequest`` for the request still
unanswered from the key before, then a request, as VS Code does. It
reports the time from the first key to the first suggestion shown, whether
that suggestion agrees with the file's own text, and the latency of every
answered request after it, split into cache and model answers.

The paced part (``--only paced``) types the typing stretches' first lines
at a person's pace, from the moment each file opens: a key every 150 ms,
the request still unanswered from the key before cancelled, as in the
editor scenario (`paced_typing`). It reports the keys that had a
suggestion on screen before the next key came, and those whose suggestion
writes the rest of the line as far as it goes. The typing part waits for
each answer before the next key, so a key that waits seconds costs it
nothing there; here it costs every key typed meanwhile.

The pairs part (``--only pairs``) types real lines at the same pace in an
editor that closes pairs, as VS Code does (`harness.bench.closers`: a
bracket or quote typed with its closer, a closer typed over), each at the
end of its file's text: it reports, over every key and over the keys that
changed the closers, a suggestion on screen before the next key, one that
makes the line once accepted, and the suggestion cache's answers
(``--plot`` with ``--before LABEL=JSON`` draws earlier runs beside it).

The next-line part (``--only next-line``) accepts a whole-line suggestion
and presses Enter (`next_line_scenario`): it reports how long the next
line's suggestion takes to show after the Enter, and whether the suggestion
cache answered it (the server foresees the next line after an answer that
ends its line: `lsp_server.cursor.Foresight`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import sys
import sysconfig
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cpc.session import CompletionSession, EngineSettings  # noqa: E402
from harness.beside import LOADS, beside  # noqa: E402
from harness.headless import HeadlessEditor, Request  # noqa: E402
from lsp_server.settings import Settings  # noqa: E402
from benchmarks.bench_server import development_cases, parse_setting  # noqa: E402
from harness.bench.closers import auto_closed  # noqa: E402

# (file, the code to type back): each typed from the start of its line
STRETCHES = [
    ("textwrap.py", "        self.break_on_hyphens = break_on_hyphens\n        self.tabsize = tabsize"),
    ("difflib.py", "        self.fullbcount = None\n        self.__chain_b()"),
    ("shlex.py", "        self.whitespace_split = False\n        self.quotes = '\\'\"'"),
]


def stretches(chars: int) -> list[tuple[str, str, str, str]]:
    """(uri, text before, text to type, text after) per stretch."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    cases = []
    for name, typed in STRETCHES:
        source = (stdlib / name).read_text(encoding="utf-8")
        start = source.index(typed)
        typed = typed[:chars]
        cases.append((f"file:///bench/{name}", source[:start], typed, source[start + len(typed) :]))
    return cases


async def through_server(model: str, cases: list, settings: dict) -> list[dict]:
    rows = []
    async with HeadlessEditor(["--model", model], settings=settings) as editor:
        for uri, before, typed, after in cases:
            await editor.open(uri, before + after, cursor=len(before))
            for k, char in enumerate(typed):
                editor.type(char)
                counts = await editor.status()
                started = time.perf_counter()
                request = asyncio.ensure_future(editor.suggest())
                probe_started = time.perf_counter()
                await editor.status()  # answered while the model works on the request
                probe_ms = (time.perf_counter() - probe_started) * 1000
                text = await request
                ms = (time.perf_counter() - started) * 1000
                after_counts = await editor.status()
                rows.append({
                    "uri": uri,
                    "prefix": editor.text[: editor.cursor],
                    "suffix": editor.text[editor.cursor :],
                    "cold": k == 0,
                    "ms": ms,
                    "status_ms": probe_ms,
                    "from_cache": after_counts.from_cache > counts.from_cache,
                    "text": text,
                })
            print(f"server: {uri} typed ({len(typed)} keystrokes)", file=sys.stderr, flush=True)
    return rows


# files of about 2,000 lines: the cursor jumps to the first statement after the middle that assigns or calls a name
SCENARIO_FILES = ("difflib.py", "enum.py", "mailbox.py", "ipaddress.py", "argparse.py")
STATEMENT = re.compile(r"^[ \t]+((?:self\.)?[a-z_][A-Za-z0-9_]{4,})(?= = |\()", re.MULTILINE)
"""A statement that assigns or calls a name (not a keyword, not prose in a docstring)."""
READING_S = 1.0
KEY_INTERVAL_S = 0.15


def scenario_targets() -> list[tuple[str, str, str, str]]:
    """(uri, text before, name to type, text after) per file: the middle line's first name is taken out."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    targets = []
    for name in SCENARIO_FILES:
        source = (stdlib / name).read_text(encoding="utf-8")
        middle = source.index("\n", len(source) // 2) + 1
        match = STATEMENT.search(source, middle)
        start = match.start(1)
        targets.append((f"file:///scenario/{name}", source[:start], match.group(1), source[match.end(1):]))
    return targets


async def editor_scenario(model: str, settings: dict) -> list[dict]:
    """One trial per file, each in a fresh server: the file is new to the model."""
    trials = []
    for uri, before, name, after in scenario_targets():
        async with HeadlessEditor(["--model", model], settings=settings) as editor:
            await editor.open(uri, before + after, cursor=len(before))
            await asyncio.sleep(READING_S)
            trials.append(await type_name(editor, name))
        print(f"scenario: {uri} ({name})", file=sys.stderr, flush=True)
    return trials


async def paced_keys(editor: HeadlessEditor, keys: int, press: Callable[[int], None]) -> list[dict]:
    """Press ``keys`` keys a key every `KEY_INTERVAL_S` (``press(k)`` makes the k-th key's edit), each followed
    by a request, and the request still unanswered from the key before cancelled, as VS Code does.

    Per key, in key order: its ``request``, its ``answer`` (None when refused or cancelled unanswered),
    ``from_cache`` (the server's suggestion cache answered it), when it was sent and answered (seconds
    after the first key), its latency, whether it was cancelled, and ``on_screen``: it was shown, before
    the next key came.
    """
    first_key = time.perf_counter()
    requests: list[Request] = []
    cache_counts: list[int | None] = []

    async def watch(request: Request, number: int) -> None:
        # the server's cache counter right after the answer tells a cache answer from a model answer
        await asyncio.wait([request.answer], timeout=30)
        if request.answered is not None:
            cache_counts[number] = (await editor.status()).from_cache

    watchers = []
    for k in range(keys):
        if k:
            await asyncio.sleep(max(0.0, first_key + k * KEY_INTERVAL_S - time.perf_counter()))
        press(k)
        if requests and requests[-1].answered is None:
            editor.cancel(requests[-1])
        requests.append(editor.request_suggestions())
        cache_counts.append(None)
        watchers.append(asyncio.ensure_future(watch(requests[-1], k)))
    await asyncio.gather(*watchers)
    rows = []
    seen = 0
    for k, request in sorted(enumerate(requests), key=lambda item: item[1].answered or float("inf")):
        answer = request.answer.result() if request.answer.done() and not request.answer.exception() else None
        # a cancelled request's counter may already include the next key's cache answer: only the
        # requests an editor shows take the counter's steps
        from_cache = not request.cancelled and cache_counts[k] is not None and cache_counts[k] > seen
        if not request.cancelled:
            seen = max(seen, cache_counts[k] or 0)
        rows.append({
            "key": k,
            "request": request,
            "answer": answer,
            "sent_s": round(request.sent - first_key, 4),
            "ms": request.latency_ms,
            "answered_s": None if request.answered is None else round(request.answered - first_key, 4),
            "cancelled": request.cancelled,
            "from_cache": from_cache,
        })
    rows.sort(key=lambda row: row["key"])
    for row, following in zip(rows, rows[1:] + [None]):
        row["on_screen"] = bool(row["answer"] and row["answer"].items and not row["cancelled"] and (
            following is None or row["answered_s"] <= following["sent_s"]))
    return rows


async def type_name(editor: HeadlessEditor, name: str) -> dict:
    """Type ``name`` a key every `KEY_INTERVAL_S`, cancelling a request the next key makes stale (`paced_keys`).

    Each answer's text is judged on the name (`writes_name`): ``right`` when accepting it would
    write the name as far as the text goes, ``finishes`` when it also ends the name. What a suggestion
    writes after the name is the rest of a line the file may well write differently.
    """
    rows = await paced_keys(editor, len(name), lambda k: editor.type(name[k]))
    for row in rows:
        request, answer = row.pop("request"), row.pop("answer")
        text = ""
        if answer and answer.items:
            item = answer.items[0]
            text = item.insert_text[request.cursor - editor.offset(item.range.start) :]
        right = writes_name(text, name[row["key"] + 1 :])
        row |= {"text": text, "right": right, "finishes": right and len(text) >= len(name) - row["key"] - 1,
                "shown": bool(text)}
    shown = sorted((row for row in rows if row["shown"]), key=lambda row: row["answered_s"])
    first = shown[0] if shown else None
    return {
        "name": name,
        "first_suggestion_ms": round(first["answered_s"] * 1000, 1) if first else None,
        "first_suggestion_right": bool(first and first["right"]),
        "first_suggestion_finishes": bool(first and first["finishes"]),
        "keys": rows,
    }


ACCEPT_PAUSE_S = 0.5
"""How long a person reads a whole-line suggestion before Tab accepts it."""
ENTER_PAUSE_S = 0.15
"""From Tab to Enter."""


async def next_line_scenario(model: str, settings: dict) -> list[dict]:
    """Accepting a whole line, then Enter: how long until the next line's suggestion is on screen.

    One trial per scenario file, each in a fresh server. The middle line (`scenario_targets`) ends after
    its first name's first character; after `READING_S` the name's next character is typed, and the
    suggestion is followed as it grows. After `ACCEPT_PAUSE_S` Tab accepts it (a ``didChange``, then the
    request an editor makes at the new cursor), and after `ENTER_PAUSE_S` Enter opens the next line with
    the line's indentation, as an editor indents, and a request follows it.
    """
    trials = []
    for uri, before, name, after in scenario_targets():
        rest_of_file = after[after.find("\n") :]
        async with HeadlessEditor(["--model", model], settings=settings) as editor:
            await editor.open(uri, before + name[0] + rest_of_file, cursor=len(before) + 1)
            await asyncio.sleep(READING_S)
            editor.type(name[1])
            shown = [text for _, text in await editor.suggest_over_time(horizon_s=10.0)]
            line = shown[-1] if shown else ""
            await asyncio.sleep(ACCEPT_PAUSE_S)
            editor.type(line)
            editor.request_suggestions()
            await asyncio.sleep(ENTER_PAUSE_S)
            editor.type("\n" + before[before.rfind("\n") + 1 :])
            counts = await editor.status()
            answers = await editor.suggest_over_time(horizon_s=5.0)
            first = next(((seconds, text) for seconds, text in answers if text), None)
            after_counts = await editor.status()
            file_line = rest_of_file.split("\n")[1].strip()  # what the file itself writes there
            trials.append({
                "uri": uri, "accepted": name[:2] + line, "next_line": first[1] if first else "",
                "file_next_line": file_line, "line_exact": bool(first) and first[1].strip() == file_line,
                "next_line_ms": round(first[0] * 1000, 1) if first else None,
                "from_cache": after_counts.from_cache > counts.from_cache,
                "foreseen": getattr(after_counts, "foreseen", None),
            })
        print(f"next line: {uri} ({trials[-1]['next_line_ms']} ms)", file=sys.stderr, flush=True)
    return trials


def next_line_summary(trials: list[dict]) -> dict:
    times = [t["next_line_ms"] for t in trials if t["next_line_ms"] is not None]
    return {"trials": len(trials), "next_line_p50_ms": pct(times, 0.5), "next_line_max_ms": max(times, default=None),
            "never_shown": len(trials) - len(times), "from_cache": sum(t["from_cache"] for t in trials),
            "line_exact": sum(t["line_exact"] for t in trials)}


def writes_name(text: str, rest: str) -> bool:
    """Whether ``text`` writes the name's ``rest`` as far as it goes, and ends the name where it does.

    >>> writes_name("ixlen = int(prefixlen)", "ixlen"), writes_name("ix", "ixlen")
    (True, True)
    >>> writes_name("ixlength", "ixlen"), writes_name("._locked", "._file"), writes_name("", "ixlen")
    (False, False, False)
    """
    beyond = text[len(rest) : len(rest) + 1]
    return bool(text) and rest.startswith(text[: len(rest)]) and not (beyond.isalnum() or beyond == "_")


def scenario_summary(trials: list[dict]) -> dict:
    """Medians over the trials: the first suggestion, and the answered keystrokes after it."""
    firsts = [t["first_suggestion_ms"] for t in trials]
    later = [row for t in trials for row in t["keys"] if row["ms"] is not None and not row["cancelled"]
             and t["first_suggestion_ms"] is not None and row["answered_s"] * 1000 > t["first_suggestion_ms"]]
    model = [row["ms"] for row in later if not row["from_cache"]]
    cache = [row["ms"] for row in later if row["from_cache"]]
    keys = sum(len(t["keys"]) for t in trials)
    return {
        "trials": len(trials),
        "first_suggestion_p50_ms": pct([f for f in firsts if f is not None], 0.5),
        "first_suggestion_max_ms": max((f for f in firsts if f is not None), default=None),
        "never_shown": sum(f is None for f in firsts),
        "first_suggestion_right": sum(t["first_suggestion_right"] for t in trials),
        "first_suggestion_finishes": sum(t["first_suggestion_finishes"] for t in trials),
        "keys": keys,
        "cancelled_share": round(sum(row["cancelled"] for t in trials for row in t["keys"]) / keys, 3),
        "model_keystroke": {"n": len(model), "p50_ms": pct(model, 0.5), "p95_ms": pct(model, 0.95)},
        "cache_keystroke": {"n": len(cache), "p50_ms": pct(cache, 0.5), "p95_ms": pct(cache, 0.95)},
    }


def through_engine(model: str, rows: list[dict], settings: Settings) -> None:
    """Replay the server's requests on a bare session doing the same work: each text is a document
    update first (as ``didChange`` queues one), and fusion weighs the same. Adds ``bare_ms``,
    ``bare_text`` and ``bare_from_cache`` to each row."""
    session = CompletionSession()
    session.limit_documents(settings.workspace_max_file_bytes)
    session.load(EngineSettings(model, threads=settings.threads))
    for row in rows:
        started = time.perf_counter()
        session.update_document(row["uri"], row["prefix"] + row["suffix"])
        answer = session.complete(row["uri"], row["prefix"] + row["suffix"], len(row["prefix"]), settings.options,
                                  fusion=settings.fusion_weights)
        row["bare_ms"] = (time.perf_counter() - started) * 1000
        row["bare_text"] = answer.completions[0] if answer.completions else ""
        row["bare_from_cache"] = answer.from_cache


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))], 1) if ordered else float("nan")


async def paced_typing(model: str, settings: dict) -> list[dict]:
    """The typing stretches' first lines typed at a person's pace, from the moment each file opens (in a fresh
    server: the file is new to the model), a key every `KEY_INTERVAL_S` and the request still unanswered
    from the key before cancelled (`type_name`). Per key: whether a suggestion was on screen before the next
    key came, and whether it writes the rest of the line as far as it goes."""
    trials = []
    for uri, before, typed, after in stretches(10**6):
        line = typed.split("\n")[0]
        async with HeadlessEditor(["--model", model], settings=settings) as editor:
            await editor.open(uri, before + typed[len(line):] + after, cursor=len(before))
            trial = await type_name(editor, line)
        trials.append(trial | {"uri": uri})
        print(f"paced: {uri} ({len(line)} keys)", file=sys.stderr, flush=True)
    return trials


def paced_summary(trials: list[dict]) -> dict:
    keys = [row for trial in trials for row in trial["keys"]]
    waits = [row["ms"] for row in keys if row["ms"] is not None and not row["cancelled"]]
    return {"keys": len(keys), "on_screen": sum(row["on_screen"] for row in keys),
            "on_screen_right": sum(row["on_screen"] and row["right"] for row in keys),
            "answered_p50_ms": pct(waits, 0.5), "answered_max_ms": max(waits, default=None)}


PAIRS_FILES = "<stdlib>/[a-m]*.py"


def pairs_lines(model: str, files: str, count: int, seed: int) -> list[tuple[str, str, str]]:
    """(file, text before, line) per line to type: real lines an editor's pairs touch (`harness.bench.closers`),
    each typed from its indentation's end at the end of its file's text before it, and closed by its end. ASCII
    lines only: the answers' positions are UTF-16 units, read here as characters (`pairs_typing`)."""
    session = CompletionSession()
    session.load(EngineSettings(model, threads=1))
    lines = []
    for case in development_cases(session.engine, files, count * 3, seed, "long", "closers"):
        start = case.prefix.rfind("\n") + 1
        line = (case.prefix[start:] + case.line_rest).lstrip()
        before = case.prefix[: len(case.prefix) - len(case.prefix[start:].lstrip())]
        if line.isascii() and auto_closed(line) == "" and all(line != seen for _, _, seen in lines):
            lines.append((case.file, before, line))
    return lines[:count]


async def pairs_typing(model: str, settings: dict, lines: list[tuple[str, str, str]]) -> list[dict]:
    """Each line typed at a person's pace (`paced_keys`) in an editor that closes pairs (`auto_closed`: a bracket
    or quote typed with its closer, a closer typed over), in one server, each file read for `READING_S` first.
    Per key: whether accepting the suggestion shown then makes the line (``right``), and whether the key
    changed the closers after the cursor (``pair_key``)."""
    trials = []
    async with HeadlessEditor(["--model", model], settings=settings) as editor:
        for number, (file, before, line) in enumerate(lines):
            await editor.open(f"file:///pairs/{number}{Path(file).suffix}", before + "\n", cursor=len(before))
            await asyncio.sleep(READING_S)
            start = editor.cursor

            def press(k: int, line: str = line, start: int = start) -> None:
                editor.replace(start + k, start + k + len(auto_closed(line[:k])), line[k] + auto_closed(line[: k + 1]))
                editor.cursor = start + k + 1

            rows = await paced_keys(editor, len(line), press)
            editor.close()
            indent = before[before.rfind("\n") + 1 :]
            for row in rows:
                k, answer = row["key"], row.pop("answer")
                row.pop("request")
                shown = indent + line[: k + 1] + auto_closed(line[: k + 1])
                accepted = None
                if answer and answer.items:
                    item = answer.items[0]
                    accepted = shown[: item.range.start.character] + item.insert_text + shown[item.range.end.character :]
                row |= {"right": accepted == indent + line, "accepted": accepted,
                        "pair_key": auto_closed(line[: k + 1]) != auto_closed(line[:k])}
            trials.append({"file": file, "line": line, "keys": rows})
            print(f"pairs: {number + 1}/{len(lines)} {line!r}", file=sys.stderr, flush=True)
    return trials


def pairs_summary(trials: list[dict]) -> dict:
    """Shares of keys (and of the keys that changed the closers): a suggestion on screen before the next key, one
    that makes the line once accepted, and cache answers."""
    keys = [row for trial in trials for row in trial["keys"] if row["key"] > 0]  # the first key of a line is cold

    def shares(rows: list[dict]) -> dict:
        count = max(1, len(rows))
        return {"keys": len(rows),
                "on_screen": round(sum(r["on_screen"] for r in rows) / count, 3),
                "on_screen_right": round(sum(r["on_screen"] and r["right"] for r in rows) / count, 3),
                "from_cache": round(sum(r["from_cache"] for r in rows) / count, 3)}

    return {"lines": len(trials), "all_keys": shares(keys), "pair_keys": shares([r for r in keys if r["pair_key"]])}


def plot_pairs(runs: list[tuple[str, dict]], path: str) -> None:
    """Bars per run (a label and its ``pairs`` summary): of all keys and of the keys that changed the closers, the
    share with a suggestion on screen before the next key, with one that makes the line, and cache answers."""
    from harness.bench.report import pyplot

    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    measures = (("on_screen", "on screen"), ("on_screen_right", "makes the line"), ("from_cache", "from the cache"))
    width = 0.8 / len(runs)
    for axis, group, title in zip(axes, ("all_keys", "pair_keys"), ("every key", "keys that changed the closers")):
        for number, (label, summary) in enumerate(runs):
            shares = [100 * summary[group][measure] for measure, _ in measures]
            bars = axis.bar([x + number * width for x in range(len(measures))], shares, width, label=label)
            axis.bar_label(bars, fmt="%.0f", fontsize=8)
        axis.set_xticks([x + width * (len(runs) - 1) / 2 for x in range(len(measures))], [name for _, name in measures])
        axis.set_title(f"{title} ({runs[0][1][group]['keys']} keys a run)", fontsize=10)
    axes[0].set_ylabel("% of keys")
    axes[0].legend(fontsize=8)
    fig.suptitle("lines typed at a key every 150 ms in an editor that closes pairs", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


PARTS = ("typing", "scenario", "next-line", "paced", "pairs")


def run(model: str, chars: int, parts: tuple[str, ...] = PARTS, threads: int = 0,
        repeat: int = 1, changes: dict | None = None, pairs: int = 20) -> dict:
    """The scenario runs with the server's shipping settings (``changes`` over them, for a comparison); the
    typing stretches without debounce, so that each keystroke's request does the same work as its replay."""
    shipped = {"threads": threads, **(changes or {})}
    result: dict = {"model": model, "scenario_settings": shipped}
    if "scenario" in parts:
        trials = asyncio.run(editor_scenario(model, shipped))
        result["editor_scenario"] = scenario_summary(trials) | {"per_trial": trials}
    if "next-line" in parts:
        trials = asyncio.run(next_line_scenario(model, shipped))
        result["next_line"] = next_line_summary(trials) | {"per_trial": trials}
    if "paced" in parts:
        trials = asyncio.run(paced_typing(model, shipped))
        result["paced"] = paced_summary(trials) | {"per_trial": trials}
    if "pairs" in parts:
        trials = asyncio.run(pairs_typing(model, shipped, pairs_lines(model, PAIRS_FILES, pairs, 1)))
        result["pairs"] = pairs_summary(trials) | {"per_trial": trials}
    if "typing" in parts:
        runs = [typing_stretches(model, chars, {**shipped, "debounceMs": 0}) for _ in range(repeat)]
        overheads = [r["server_overhead"] for r in runs]
        # one run's overhead moves by about as much as the bare engine's own run-to-run spread (~8 %)
        result |= runs[0] | {"server_overhead": round(statistics.median(overheads), 3), "server_overhead_runs": overheads,
                             "server_over_bare_p50_runs": [r["server_over_bare_p50"] for r in runs]}
    return result


def typing_stretches(model: str, chars: int, settings: dict) -> dict:
    """Stretches typed back, each answer awaited, and the same requests on the bare engine."""
    cases = stretches(chars)
    rows = asyncio.run(through_server(model, cases, settings))
    through_engine(model, rows, Settings().updated(settings)[0])
    model_rows = [r for r in rows if not r["from_cache"]]
    warm = [r for r in model_rows if not r["cold"]]
    cold = [r for r in rows if r["cold"]]
    # the overhead compares the same work: both answered by the model, with the same text
    same = [r for r in model_rows if not r["bare_from_cache"] and r["text"] == r["bare_text"]]
    server_p50 = statistics.median(r["ms"] for r in same)
    bare_p50 = statistics.median(r["bare_ms"] for r in same)
    return {
        "keystrokes": len(rows),
        "p50_ms": pct([r["ms"] for r in rows], 0.5),
        "p95_ms": pct([r["ms"] for r in rows], 0.95),
        "from_cache_share": round(sum(r["from_cache"] for r in rows) / len(rows), 3),
        "cache_answer_p50_ms": pct([r["ms"] for r in rows if r["from_cache"]], 0.5),
        "model_answer": {"n": len(model_rows), "same_work": len(same), "server_p50_ms": round(server_p50, 1),
                         "bare_p50_ms": round(bare_p50, 1)},
        # paired: each request against its own replay (a ratio of the two medians compares different
        # requests when the timings bunch at ~200 and ~400 ms, and moves by 10 % between runs)
        "server_overhead": round(statistics.median(r["ms"] / r["bare_ms"] for r in same), 3),
        "server_over_bare_p50": round(server_p50 / bare_p50, 3),
        "per_request_overhead_p50_ms": round(statistics.median(r["ms"] - r["bare_ms"] for r in same), 1),
        "cold_p50_ms": pct([r["ms"] for r in cold], 0.5),
        "warm_keystroke_p50_ms": pct([r["ms"] for r in warm], 0.5),
        "warm_keystroke_over_cold": round(pct([r["ms"] for r in warm], 0.5) / pct([r["ms"] for r in cold], 0.5), 3),
        "status_while_working_max_ms": round(max(r["status_ms"] for r in rows), 1),
        "status_while_working_p50_ms": pct([r["status_ms"] for r in rows], 0.5),
        "per_keystroke": rows,
    }


def plot(result: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = result["per_keystroke"]
    fig, (timeline, bars) = plt.subplots(1, 2, figsize=(13, 4.5), gridspec_kw={"width_ratios": [3, 1]})
    x = range(len(rows))
    timeline.plot(x, [r["bare_ms"] for r in rows], color="#999999", lw=1, label="bare engine, same requests")
    for kind, color, label in (("model", "#4c72b0", "server: model"), ("cache", "#55a868", "server: cache")):
        points = [(k, r["ms"]) for k, r in enumerate(rows) if r["from_cache"] == (kind == "cache")]
        timeline.scatter([p[0] for p in points], [p[1] for p in points], s=14, color=color, label=label, zorder=3)
    cold = [(k, r["ms"]) for k, r in enumerate(rows) if r["cold"]]
    timeline.scatter([c[0] for c in cold], [c[1] for c in cold], s=60, facecolors="none", edgecolors="#c44e52",
                     label="cold (new file)", zorder=4)
    timeline.set_yscale("log")
    timeline.set_xlabel("keystroke")
    timeline.set_ylabel("time to a suggestion (ms, log)")
    timeline.legend(fontsize=8)
    timeline.set_title("typing real code through cpc-lsp")
    names = ["cold", "warm\nkeystroke", "cache\nanswer", "status while\nworking (max)"]
    values = [result["cold_p50_ms"], result["warm_keystroke_p50_ms"], result["cache_answer_p50_ms"],
              result["status_while_working_max_ms"]]
    bars.bar(names, values, color=["#c44e52", "#4c72b0", "#55a868", "#8172b2"])
    bars.set_yscale("log")
    bars.set_title(f"medians; server overhead {result['server_overhead']:.2f}x")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="default")
    parser.add_argument("--chars", type=int, default=60, help="characters typed per stretch")
    parser.add_argument("--only", choices=PARTS, help="run one part (no plot, but for pairs)")
    parser.add_argument("--threads", type=int, default=0, help="the server's CPU threads (0: every core)")
    parser.add_argument("--repeat", type=int, default=1, help="typing runs; the overhead reported is their median")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a server setting other than its default (camelCase, JSON value), for comparisons")
    parser.add_argument("--beside", choices=LOADS, default="none",
                        help="what runs in another process meanwhile: a busy core (a build), a model (a test run)")
    parser.add_argument("--pairs", type=int, default=20, help="lines typed in the pairs part")
    parser.add_argument("--before", metavar="JSON", action="append", default=[],
                        help="with --only pairs --plot: an earlier run's JSON drawn beside this one (LABEL=PATH)")
    parser.add_argument("--json")
    parser.add_argument("--plot")
    args = parser.parse_args()
    with beside(args.beside):
        result = run(args.model, args.chars, (args.only,) if args.only else PARTS, args.threads,
                     args.repeat, dict(parse_setting(item) for item in args.set), args.pairs)
    result["beside"] = args.beside
    scenario = result.get("editor_scenario", {})
    summary = {k: v for k, v in result.items()
               if k not in ("per_keystroke", "editor_scenario", "next_line", "paced", "pairs")}
    summary["editor_scenario"] = {k: v for k, v in scenario.items() if k != "per_trial"}
    summary["paced"] = {k: v for k, v in result.get("paced", {}).items() if k != "per_trial"}
    summary["next_line"] = {k: v for k, v in result.get("next_line", {}).items() if k != "per_trial"}
    summary["pairs"] = {k: v for k, v in result.get("pairs", {}).items() if k != "per_trial"}
    print(json.dumps(summary, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    if args.plot and not args.only:
        plot(result, args.plot)
    elif args.plot and args.only == "pairs":
        earlier = [(label, json.loads(Path(path).read_text())["pairs"])
                   for label, _, path in (item.rpartition("=") for item in args.before)]
        plot_pairs([*earlier, ("this run", result["pairs"])], args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
