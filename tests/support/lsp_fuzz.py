"""An LSP fuzzer over the real stdio transport: random valid and invalid messages, invariants checked as it goes.

`Fuzzer.run` drives one `tests.support.raw_lsp.RawServer` with a seeded random mix:
edit batches (incremental and whole-document, text with CR, CRLF, the
characters only Unicode calls line breaks, emoji and CJK), positions out of
range, versions going backwards, ``didChange`` for closed documents, a 10 MB
document and a 1 MB line, inline completions at random valid positions
while the model works, cancels of unknown ids, 1,000-request bursts, broken
JSON, wrong ``Content-Length``, non-object JSON, batches, bad params and
unknown methods. Like an editor it cancels a completion left unanswered
for a few seconds when it asks for the next one. It checks:

- the process stays alive (a crash ends the run);
- every request with an id is answered, with the kind of answer it calls
  for, within a bound (a hang otherwise);
- ``cpc/status`` answers within 1 s while the model works;
- after each edit batch the server's copy of the document
  (``cpc/documentText``) equals `Document`, the client's model of it.

Run alone for a report: ``python -m tests.support.lsp_fuzz --steps 2000 --seed 7``.
"""

from __future__ import annotations

import argparse
import bisect
import json
import random
import re
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.raw_lsp import NULL_ID, RawServer, frame, inline_params, notification, request

PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, CANCELLED = -32700, -32600, -32601, -32602, -32800
COMPLETION_BOUND_S = 120.0
"""Inline completions queue for the one model thread: a generous bound before one counts as a hang."""
STALE_COMPLETION_S = 5.0
"""Like an editor, the fuzzer cancels a completion still unanswered this long when it asks for another
(and all of them at the end): the model may take minutes on some texts, a cancel must be answered at once."""
REQUEST_BOUND_S = 30.0
"""Any other request (a 10 MB ``cpc/documentText`` included)."""
SETTINGS = {"debounceMs": 0, "maxTokens": 4}
"""Short completions: the fuzzer needs the model at work, not long suggestions."""
STATUS_BOUND_S = 1.0
"""``cpc/status`` while the model works (the liveness bound: the server answers while the engine is busy)."""

LSP_LINE_BREAK = re.compile(r"\r\n|\r|\n")
UNICODE_ONLY_BREAKS = "\f\v\x1c\x1d\x1e\x85\u2028\u2029"
"""Line breaks to `str.splitlines` but not to LSP: a server that splits on them shifts every later line."""
ATOMS = [
    "def", "self", "return", "userName", "x", "_", " ", "    ", "\t", "(", ")", ":", ".", "=", "'", '"', "0", "42",
    "\n", "\n", "\r\n", "\r", "日本", "😀", "👍🏽", "e\u0301", "ß",
    *UNICODE_ONLY_BREAKS,
]


def utf16_units(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


class Document:
    """The client's copy of one open document, with LSP's lines (``\\n``, ``\\r\\n``, ``\\r``) and UTF-16 positions."""

    def __init__(self, uri: str, text: str, version: int) -> None:
        self.uri, self.text, self.version = uri, text, version

    def _line_starts(self) -> list[int]:
        return [0, *(match.end() for match in LSP_LINE_BREAK.finditer(self.text))]

    def _line_end(self, starts: list[int], line: int) -> int:
        """The offset of the end of ``line``'s content (before its line break)."""
        if line + 1 < len(starts):
            end = starts[line + 1]
            return end - (2 if self.text[end - 2 : end] == "\r\n" else 1)
        return len(self.text)

    def offset(self, line: int, character: int) -> int:
        """The text offset of an LSP position; past the line's end or the last line it clamps, as LSP says."""
        starts = self._line_starts()
        if line >= len(starts):
            return len(self.text)
        start, end = starts[line], self._line_end(starts, line)
        units = 0
        for index in range(start, end):
            if units >= character:
                return index
            units += utf16_units(self.text[index])
        return end

    def position(self, offset: int) -> tuple[int, int]:
        """The LSP position of ``offset`` (an offset inside a CRLF counts as the line's end)."""
        starts = self._line_starts()
        line = bisect.bisect_right(starts, offset) - 1
        offset = min(offset, self._line_end(starts, line))
        return line, utf16_units(self.text[starts[line] : offset])

    def lines(self) -> int:
        return len(self._line_starts())

    def line_units(self, line: int) -> int:
        starts = self._line_starts()
        return utf16_units(self.text[starts[line] : self._line_end(starts, line)])

    def apply(self, change: dict[str, Any]) -> None:
        if "range" not in change:
            self.text = change["text"]
            return
        start, end = change["range"]["start"], change["range"]["end"]
        first = self.offset(start["line"], start["character"])
        last = max(first, self.offset(end["line"], end["character"]))
        self.text = self.text[:first] + change["text"] + self.text[last:]


@dataclass
class Expectation:
    what: str
    sent: float
    bound: float
    accepts: Callable[[dict[str, Any]], bool]
    completion: bool = False
    cancelled: bool = False


@dataclass
class Report:
    seed: int
    messages: int = 0
    """Frames written (a burst counts each of its requests)."""
    requests: int = 0
    answered: int = 0
    null_id_answers: int = 0
    """Answers with ``"id": null``, to messages whose id could not be read."""
    crashes: list[str] = field(default_factory=list)
    hangs: list[str] = field(default_factory=list)
    desyncs: list[str] = field(default_factory=list)
    wrong_answers: list[str] = field(default_factory=list)
    status_while_working_s: list[float] = field(default_factory=list)
    peak_rss_mib: float = 0.0
    seconds: float = 0.0

    @property
    def slow_status(self) -> list[float]:
        return [latency for latency in self.status_while_working_s if latency > STATUS_BOUND_S]

    def failures(self) -> list[str]:
        slow = [f"cpc/status took {latency:.2f} s while the model worked" for latency in self.slow_status]
        return [*self.crashes, *self.hangs, *self.desyncs, *self.wrong_answers, *slow]

    def summary(self) -> str:
        worst = max(self.status_while_working_s, default=0.0)
        return (
            f"seed {self.seed}: {self.messages} messages ({self.requests} requests, {self.answered} answered; "
            f"{self.null_id_answers} answers with a null id) "
            f"in {self.seconds:.0f} s; crashes {len(self.crashes)}, hangs {len(self.hangs)}, desyncs {len(self.desyncs)}, "
            f"wrong answers {len(self.wrong_answers)}; cpc/status while the model works: "
            f"{len(self.status_while_working_s)} asked, slowest {worst * 1000:.0f} ms; peak RSS {self.peak_rss_mib:.0f} MiB"
        )


def _is_result(answer: dict[str, Any]) -> bool:
    return "result" in answer and "error" not in answer


def _is_error(*codes: int) -> Callable[[dict[str, Any]], bool]:
    return lambda answer: "error" in answer and answer["error"].get("code") in codes


def _is_result_or_cancelled(answer: dict[str, Any]) -> bool:
    return _is_result(answer) or _is_error(CANCELLED)(answer)


class Fuzzer:
    """One seeded run against one server; `run` returns the `Report`."""

    def __init__(self, server: RawServer, seed: int, steps: int, huge: bool = True, unicode_breaks: bool = True) -> None:
        self.server, self.random, self.steps, self.huge = server, random.Random(seed), steps, huge
        self.atoms = ATOMS if unicode_breaks else [atom for atom in ATOMS if atom not in UNICODE_ONLY_BREAKS]
        self.report = Report(seed)
        self.documents: dict[str, Document] = {}
        self.closed: list[str] = []
        self.pending: dict[Any, Expectation] = {}
        self.null_answers_expected = 0
        self._uris = (f"file:///fuzz/{n}.py" for n in range(10**9))

    # -- sending -------------------------------------------------------------------------

    def _write(self, data: bytes, frames: int = 1) -> None:
        self.report.messages += frames
        self.server.send_bytes(data)

    def _expect(self, message_id: Any, what: str, accepts: Callable[[dict[str, Any]], bool], bound: float = REQUEST_BOUND_S) -> Expectation:
        expectation = self.pending[message_id] = Expectation(what, time.monotonic(), bound, accepts)
        self.report.requests += 1
        return expectation

    def _expect_completion(self, message_id: Any, document: Document, what: str) -> Expectation:
        expectation = self._expect(message_id, f"{what}{_breaks_note(document)}", _is_result, COMPLETION_BOUND_S)
        expectation.completion = True
        return expectation

    def _request(self, method: str, params: Any, what: str, accepts=_is_result, bound: float = REQUEST_BOUND_S, length_change: int = 0) -> int:
        message_id = self.server.next_id()
        self._expect(message_id, what, accepts, bound)
        self._write(frame(request(message_id, method, params), length_change))
        return message_id

    def _cancel(self, message_id: Any) -> None:
        """``$/cancelRequest`` for a pending completion: now a result or a ``RequestCancelled`` error is right."""
        expectation = self.pending[message_id]
        expectation.accepts, expectation.cancelled = _is_result_or_cancelled, True
        self._notify("$/cancelRequest", {"id": message_id})

    def _cancel_stale_completions(self, older_than: float) -> None:
        now = time.monotonic()
        for message_id, expectation in list(self.pending.items()):
            if expectation.completion and not expectation.cancelled and now - expectation.sent > older_than:
                self._cancel(message_id)

    def _notify(self, method: str, params: Any) -> None:
        self._write(frame(notification(method, params)))

    def _wait(self, message_id: Any) -> tuple[float, dict[str, Any]] | None:
        """Wait for one expected answer and check it: how long it took, and the answer; None when it never came."""
        expectation = self.pending.pop(message_id)
        left = expectation.sent + expectation.bound - time.monotonic()
        try:
            arrived, answer = self.server.answer_with_time(message_id, max(left, 0.01))
        except AssertionError:
            self.report.hangs.append(f"no answer to {expectation.what} (id {message_id}) within {expectation.bound:.0f} s")
            return None
        self._check(message_id, expectation, answer)
        return arrived - expectation.sent, answer

    def _check(self, message_id: Any, expectation: Expectation, answer: dict[str, Any]) -> None:
        self.report.answered += 1
        if not expectation.accepts(answer):
            self.report.wrong_answers.append(f"{expectation.what} (id {message_id}) was answered {json.dumps(answer)[:300]}")

    def _collect(self, final: bool = False) -> None:
        """Check the answers that came; at the end, cancel the completions left and wait for every answer up to its bound."""
        if final:
            self._cancel_stale_completions(older_than=0)
        for message_id in list(self.pending):
            if final or self.server.answered(message_id):
                self._wait(message_id)
            elif time.monotonic() > self.pending[message_id].sent + self.pending[message_id].bound:
                self._wait(message_id)
        if final:
            for _ in range(self.null_answers_expected):
                try:
                    self.server.answer(NULL_ID, timeout=REQUEST_BOUND_S)
                    self.report.null_id_answers += 1
                except AssertionError:
                    self.report.hangs.append("a message with no readable id got no answer with a null id")

    # -- the client's model ---------------------------------------------------------------

    def _text(self, atoms: int) -> str:
        return "".join(self.random.choice(self.atoms) for _ in range(atoms))

    def _open(self, text: str | None = None) -> Document:
        uri = next(self._uris)
        document = Document(uri, text if text is not None else self._text(self.random.randint(0, 60)), self.random.randint(0, 5))
        self.documents[uri] = document
        self._notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": document.version, "text": document.text}})
        return document

    def _valid_position(self, document: Document) -> tuple[int, int]:
        return document.position(self.random.randint(0, len(document.text)))

    def _out_of_range_position(self, document: Document) -> tuple[int, int]:
        line = self.random.randrange(document.lines())
        if self.random.random() < 0.5:
            return line, document.line_units(line) + self.random.randint(1, 50)
        return document.lines() + self.random.randint(0, 20), self.random.randint(0, 9)

    def _change(self, document: Document, out_of_range: bool) -> dict[str, Any]:
        if self.random.random() < 0.08:
            return {"text": self._text(self.random.randint(0, 40))}
        ends = sorted([self._valid_position(document), self._valid_position(document)])
        if out_of_range:
            ends[self.random.randrange(2)] = self._out_of_range_position(document)
            ends.sort()
        (start_line, start_character), (end_line, end_character) = ends
        return {
            "range": {"start": {"line": start_line, "character": start_character}, "end": {"line": end_line, "character": end_character}},
            "text": self._text(self.random.choice([0, 1, 1, 2, 4, 10])),
        }

    def _edit_batch(self, document: Document) -> None:
        """One ``didChange`` of a few changes, then the server's copy must equal the model's."""
        out_of_range = self.random.random() < 0.15
        changes, kinds = [], set()
        for _ in range(self.random.randint(1, 4)):
            change = self._change(document, out_of_range)
            kinds.update(_kinds(change, document))
            document.apply(change)
            changes.append(change)
        backwards = self.random.random() < 0.1
        document.version = document.version - self.random.randint(1, 3) if backwards else document.version + 1
        self._notify("textDocument/didChange", {"textDocument": {"uri": document.uri, "version": document.version}, "contentChanges": changes})
        self._check_sync(document, changes, sorted(kinds))

    def _check_sync(self, document: Document, changes: list[dict[str, Any]], kinds: list[str]) -> None:
        message_id = self._request("cpc/documentText", {"uri": document.uri}, f"cpc/documentText of {document.uri}")
        waited = self._wait(message_id)
        if waited is None or "result" not in waited[1]:
            return
        server = waited[1]["result"]
        if server["text"] == document.text and server["version"] == document.version:
            return
        at = next((i for i, (a, b) in enumerate(zip(server["text"], document.text)) if a != b), min(len(server["text"]), len(document.text)))
        self.report.desyncs.append(
            f"{document.uri} v{document.version} after {json.dumps(changes)[:400]} ({', '.join(kinds) or 'plain edits'}): "
            f"server has {server['text'][max(0, at - 20) : at + 20]!r} (v{server['version']}), "
            f"client {document.text[max(0, at - 20) : at + 20]!r} at offset {at}"
        )
        # start over from the client's text, so that one desync is reported once
        document.version += 1
        self._notify("textDocument/didChange", {"textDocument": {"uri": document.uri, "version": document.version}, "contentChanges": [{"text": document.text}]})

    # -- actions ---------------------------------------------------------------------------

    def _inline(self, document: Document) -> int:
        self._cancel_stale_completions(STALE_COMPLETION_S)
        line, character = self._valid_position(document)
        message_id = self.server.next_id()
        self._expect_completion(message_id, document, f"inline completion at {line}:{character} of {document.uri}")
        self._write(frame(request(message_id, "textDocument/inlineCompletion", inline_params(document.uri, line, character))))
        return message_id

    def _status_while_working(self) -> None:
        """Start model work on a cold position, then time ``cpc/status``."""
        document = self.random.choice(list(self.documents.values()))
        self._inline(document)
        waited = self._wait(self._request("cpc/status", {}, "cpc/status while the model works"))
        if waited is not None and "result" in waited[1] and waited[1]["result"]["running"]:
            self.report.status_while_working_s.append(waited[0])

    def _bad_inline(self, document: Document) -> None:
        line, character = self._out_of_range_position(document)
        params = self.random.choice([
            {**inline_params(document.uri, 0, 0), "position": f"{line}:{character}"},
            inline_params(document.uri, -self.random.randint(1, 9), character),
            inline_params(document.uri, line, character),
            {key: value for key, value in inline_params(document.uri, 0, 0).items() if key != "position"},
            inline_params("file:///never/opened.py", 0, 0),
        ])
        self._request("textDocument/inlineCompletion", params, "an inline completion with bad params", _is_error(INVALID_PARAMS))

    def _bad_frame(self) -> None:
        kind = self.random.randrange(6)
        if kind == 0:  # broken JSON
            body = json.dumps(request(self.server.next_id(), "cpc/status", {})).encode()
            self._write(frame(body[: self.random.randrange(1, len(body) - 1)]))
            self.null_answers_expected += 1
        elif kind == 1:  # wrong Content-Length on a valid request: repaired on the next header
            change = self.random.choice([-9, -3, -1, 1, 4, 60, 3000])
            self._request("cpc/status", {}, f"cpc/status framed {change:+d} bytes off", length_change=change)
        elif kind == 2:  # JSON that is not an object
            self._write(frame(self.random.choice([0, "status", None, False, 2.5])))
            self.null_answers_expected += 1
        elif kind == 3:  # a batch
            ids = [self.server.next_id() for _ in range(self.random.randint(0, 3))]
            for message_id in ids:
                self._expect(message_id, "a request inside a batch", _is_error(INVALID_REQUEST))
            self._write(frame([request(message_id, "cpc/status", {}) for message_id in ids]))
            self.null_answers_expected += not ids
        elif kind == 4:
            self._request(f"cpc/unknown{self.random.randrange(99)}", {}, "an unknown method", _is_error(METHOD_NOT_FOUND))
        else:
            self._notify("$/cancelRequest", {"id": self.random.choice([10**9 + self.random.randrange(99), "never-sent"])})

    def _burst(self, size: int = 1000) -> None:
        """``size`` requests in one write: status, inline completions, document texts; all must be answered."""
        document = self.random.choice(list(self.documents.values()))
        frames = []
        for _ in range(size):
            message_id = self.server.next_id()
            roll = self.random.random()
            if roll < 0.6:
                frames.append(frame(request(message_id, "cpc/status", {})))
                self._expect(message_id, "cpc/status in a burst", _is_result)
            elif roll < 0.9:
                line, character = self._valid_position(document)
                frames.append(frame(request(message_id, "textDocument/inlineCompletion", inline_params(document.uri, line, character))))
                self._expect_completion(message_id, document, "an inline completion in a burst")
            else:
                frames.append(frame(request(message_id, "cpc/documentText", {"uri": document.uri})))
                self._expect(message_id, "cpc/documentText in a burst", _is_result)
        self._write(b"".join(frames), frames=size)

    def _cancel_pending_inline(self, document: Document) -> None:
        self._cancel(self._inline(document))

    def _close(self, document: Document) -> None:
        self._notify("textDocument/didClose", {"textDocument": {"uri": document.uri}})
        del self.documents[document.uri]
        self.closed.append(document.uri)

    def _change_closed(self) -> None:
        """``didChange`` for a document that is not open: dropped, and the server says it does not know it."""
        uri = self.random.choice(self.closed or ["file:///fuzz/never-opened.py"])
        self._notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": 7}, "contentChanges": [{"text": "lost"}]})
        self._request("cpc/documentText", {"uri": uri}, f"cpc/documentText of closed {uri}", _is_error(INVALID_PARAMS))

    def _huge_documents(self) -> None:
        """A 10 MB document and a 1 MB line: edited, checked, completed in, closed."""
        line = "    value = compute(alpha, beta) + 42  # a comment\n"
        for text in ("".join(line for _ in range(10_000_000 // len(line))), "x = '" + "ab" * 500_000 + "'\ny = x\n"):
            document = self._open(text)
            for _ in range(2):
                self._edit_batch(document)
            self._inline(document)
            self._close(document)

    # -- the run -----------------------------------------------------------------------------

    def run(self) -> Report:
        started = time.monotonic()
        server = self.server
        server.initialize(SETTINGS)
        server.wait_until_ready()
        for _ in range(3):
            self._open()
        actions: list[tuple[float, Callable[[], None]]] = [
            (30, lambda: self._edit_batch(self._any_document())),
            (12, lambda: self._inline(self._any_document())),
            (8, self._bad_frame),
            (6, lambda: self._bad_inline(self._any_document())),
            (3, self._status_while_working),
            (3, lambda: self._open()),
            (2, lambda: self._close(self._any_document()) if len(self.documents) > 2 else None),
            (2, self._change_closed),
            (2, lambda: self._cancel_pending_inline(self._any_document())),
        ]
        weights = [weight for weight, _ in actions]
        burst_at = {self.steps // 2, *range(1000, self.steps, 1000)}
        huge_at = self.steps // 3 if self.huge else -1
        for step in range(self.steps):
            if not server.alive():
                break
            if step in burst_at:
                self._burst()
            if step == huge_at:
                self._huge_documents()
            self.random.choices(actions, weights)[0][1]()
            if step % 20 == 0:
                self._collect()
        if server.alive():
            self._collect(final=True)
        if server.alive():
            self.report.peak_rss_mib = server.peak_rss_kib() / 1024
        else:
            self.report.crashes.append(f"the server died (exit code {server.process.poll()}); log:\n{server.log_tail()}")
        self.report.hangs += [f"{e.what}: never answered" for e in self.pending.values()]
        self.report.seconds = time.monotonic() - started
        return self.report

    def _any_document(self) -> Document:
        if not self.documents:
            return self._open()
        return self.random.choice(list(self.documents.values()))


def _breaks_note(document: Document) -> str:
    """A note for reports: positions in this document depend on a server splitting lines as LSP does."""
    return " [non-LSP line breaks in the document]" if any(char in document.text for char in UNICODE_ONLY_BREAKS) else ""


def _kinds(change: dict[str, Any], document: Document) -> list[str]:
    """What in ``change`` could trip a server: the characters only Unicode calls line breaks, positions out of range."""
    kinds = []
    if any(char in change["text"] for char in UNICODE_ONLY_BREAKS) or any(char in document.text for char in UNICODE_ONLY_BREAKS):
        kinds.append("non-LSP line breaks in the document")
    if "range" in change:
        for end in change["range"].values():
            if end["line"] >= document.lines() or end["character"] > document.line_units(min(end["line"], document.lines() - 1)):
                kinds.append("a position out of range")
    return kinds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--no-huge", action="store_true", help="leave out the 10 MB document and the 1 MB line")
    parser.add_argument("--no-unicode-breaks", action="store_true", help=f"leave out {UNICODE_ONLY_BREAKS!r}")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder, RawServer(Path(folder) / "server.log") as server:
        report = Fuzzer(server, args.seed, args.steps, not args.no_huge, not args.no_unicode_breaks).run()
        print(report.summary())
        for failure in report.failures():
            print(" -", failure)


if __name__ == "__main__":
    main()
