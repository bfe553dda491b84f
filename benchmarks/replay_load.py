"""Editors on machines of their own, replayed: the model servers' load without the editors' work on the same cores.

In a team each editor runs its client (the index, re-encoding, the beam)
on its own laptop, and only its HTTP calls reach the model servers. When
`remote_load` runs 32 editor processes on the servers' machine, their work
takes the cores the servers' main loops need (on a 16-core GPU box it was
the limit past 4 replicas: docs/team-server.md). Here the editors' calls
are recorded once, a few editors at a time so that they do not crowd each
other (`Recorder`), and then sent again by light threads (`replay`), each
waiting between two calls as long as its editor's own work took then:

    >>> calls = [Call(0.002, "127.0.0.1:8080", "/completion", '{"prompt": [2, 9]}', route_key([(2, 9)]))]
    >>> Request(tuple(calls), tail_s=0.001).own_s
    0.003

A replayed request is what a user waits for: its editor's own work (as
recorded) plus each call's round trip now. Only what the servers need is
kept: a call's path and JSON body, never its headers (a key is sent again
from ``CPC_REMOTE_API_KEY``, and is never written). Each call goes to the
replica that `cpc.replicas.rank` chooses for its prompt's start, as the
client does, so a document's prompts stay on one replica. A streamed
answer (a greedy run) is read whole: what its editor did while it streamed
overlapped the server's work, and is not waited again.
"""

from __future__ import annotations

import http.client
import json
import os
import statistics
import threading
import time
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from cpc.replicas import rank, route_key

ANSWERED, LOST = "answered", "lost"


@dataclass(frozen=True)
class Call:
    """One HTTP call of an editor's request, and the editor's own work before it."""

    gap_s: float
    """Since the request began, or since the previous call's answer was read."""
    origin: str
    """``host:port`` of the server the editor sent it to."""
    path: str
    """As sent: the server's base path included."""
    body: str
    route: bytes
    """`cpc.replicas.route_key` of its prompts."""


@dataclass(frozen=True)
class Request:
    """One completion request of an editor: its calls in order, and its own work after the last answer."""

    calls: tuple[Call, ...]
    tail_s: float

    @property
    def own_s(self) -> float:
        """The editor's own work in this request, all of it."""
        return round(sum(call.gap_s for call in self.calls) + self.tail_s, 6)

    def to_json(self) -> dict:
        return {"tail_s": self.tail_s,
                "calls": [{"gap_s": c.gap_s, "origin": c.origin, "path": c.path, "body": c.body} for c in self.calls]}

    @classmethod
    def from_json(cls, data: dict) -> Request:
        return cls(tuple(Call(c["gap_s"], c["origin"], c["path"], c["body"], _route(c["body"])) for c in data["calls"]),
                   data["tail_s"])


def _route(body: str) -> bytes:
    """What the client routes a call by: the start of its prompts (one prompt, or a list of them)."""
    prompt = json.loads(body).get("prompt") or [[]]
    return route_key(prompt if isinstance(prompt[0], list) else [prompt])


class Recorder:
    """The HTTP calls an editor process makes, request by request (`begin`, `end`), with its work between them."""

    def __init__(self) -> None:
        self.requests: list[Request] = []
        self._lock = threading.Lock()
        self._calls: list[Call] | None = None
        self._last = 0.0

    def begin(self) -> None:
        with self._lock:
            self._calls, self._last = [], time.monotonic()

    def end(self, keep: bool) -> None:
        """The request is over; ``keep`` it (answered) or not."""
        with self._lock:
            if keep and self._calls:
                self.requests.append(Request(tuple(self._calls), time.monotonic() - self._last))
            self._calls = None

    def _sent(self, origin: str, path: str, body: bytes | str | None) -> None:
        with self._lock:
            if self._calls is not None and body:
                text = body.decode() if isinstance(body, bytes) else body
                self._calls.append(Call(time.monotonic() - self._last, origin, path, text, _route(text)))

    def _read(self) -> None:
        with self._lock:
            self._last = time.monotonic()

    @contextmanager
    def installed(self) -> Iterator[Recorder]:
        """Record every POST of this process's `http.client` while the context lasts (an editor process's own)."""
        connection, response = http.client.HTTPConnection, http.client.HTTPResponse
        originals = connection.request, response.read, response.readline
        recorder = self

        def request(conn, method, url, body=None, headers={}, **kwargs):  # noqa: B006 - http.client's signature
            if method == "POST":
                recorder._sent(f"{conn.host}:{conn.port}", urllib.parse.urlsplit(url).path, body)
            return originals[0](conn, method, url, body, headers, **kwargs)

        def read(resp, *args):
            data = originals[1](resp, *args)
            recorder._read()
            return data

        def readline(resp, *args):
            data = originals[2](resp, *args)
            recorder._read()
            return data

        connection.request, response.read, response.readline = request, read, readline
        try:
            yield self
        finally:
            connection.request, response.read, response.readline = originals


class _Client:
    """One replayed editor's keep-alive connections, one per replica."""

    def __init__(self, urls: list[str], timeout_s: float) -> None:
        self.urls = urls
        self.timeout_s = timeout_s
        self.headers = {"Content-Type": "application/json"}
        if key := os.environ.get("CPC_REMOTE_API_KEY"):
            self.headers["Authorization"] = f"Bearer {key}"
        self._connections: dict[int, http.client.HTTPConnection] = {}

    def send(self, call: Call) -> None:
        """The call on its replica; raises on a failed answer. A keep-alive connection the server closed is opened
        again once."""
        replica = rank(call.route, self.urls)[0] if len(self.urls) > 1 else 0
        for attempt in (0, 1):
            connection = self._connections.get(replica) or self._connect(replica)
            try:
                connection.request("POST", call.path, body=call.body.encode(), headers=self.headers)
                response = connection.getresponse()
                response.read()
                break
            except (ConnectionResetError, BrokenPipeError, http.client.RemoteDisconnected):
                connection.close()
                self._connections.pop(replica, None)
                if attempt:
                    raise
        if response.status >= 400:
            raise RuntimeError(f"{self.urls[replica]}{call.path} answered {response.status}")

    def _connect(self, replica: int) -> http.client.HTTPConnection:
        parts = urllib.parse.urlsplit(self.urls[replica])
        kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        self._connections[replica] = kind(parts.hostname, parts.port, timeout=self.timeout_s)
        return self._connections[replica]

    def close(self) -> None:
        for connection in self._connections.values():
            connection.close()


def replay(recordings: list[list[Request]], urls: list[str], count: int, seconds: float,
           timeout_s: float = 120.0) -> list[tuple[float, float, str, float]]:
    """``count`` editors replay the recordings on the servers at ``urls`` for ``seconds``, each request after the
    previous one; per request (began, ended, outcome, own seconds). Editor n replays the n-th recording (a
    person at work on documents of their own), from its start and over again; editors past the recordings'
    number replay them again. Before the clock starts, each editor sends its recording's first request (its
    document opened: the whole prompt read), as in a team whose editors were at work before the measurement."""
    spans: list[tuple[float, float, str, float]] = []
    lock = threading.Lock()
    deadline = [0.0]
    start = threading.Barrier(count + 1, action=lambda: deadline.__setitem__(0, time.monotonic() + seconds))

    def editor(number: int) -> None:
        client = _Client(urls, timeout_s)
        opened, *requests = recordings[number % len(recordings)]
        _replayed(client, opened)
        start.wait()
        try:
            while True:
                for request in requests or [opened]:
                    if time.monotonic() > deadline[0]:
                        return
                    span = _replayed(client, request)
                    with lock:
                        spans.append(span)
        finally:
            client.close()

    threads = [threading.Thread(target=editor, args=(n,), daemon=True) for n in range(count)]
    for thread in threads:
        thread.start()
    start.wait()  # every document open: the clock starts
    for thread in threads:
        thread.join(seconds + timeout_s + 60)
    return spans


def _replayed(client: _Client, request: Request) -> tuple[float, float, str, float]:
    began = time.monotonic()
    outcome = ANSWERED
    try:
        for call in request.calls:
            time.sleep(call.gap_s)
            client.send(call)
        time.sleep(request.tail_s)
    except (OSError, http.client.HTTPException, RuntimeError):
        outcome = LOST
    return began, time.monotonic(), outcome, request.own_s


def replay_row(editors: int, replicas: int, spans: list[tuple[float, float, str, float]], metrics: dict) -> dict:
    """A replayed phase's figures: requests answered per second, their latency as users wait (their editor's
    own work included) and the servers' share of it, and the servers' decodes and busy slots."""
    answered = sorted((end - start) * 1000 for start, end, outcome, _ in spans if outcome == ANSWERED)
    own = [own_s * 1000 for *_, outcome, own_s in spans if outcome == ANSWERED]
    seconds = max((end for _, end, *_ in spans), default=1.0) - min((start for start, *_ in spans), default=0.0)
    return {
        "replicas": replicas, "editors": editors, "requests": len(spans), "refused": 0,
        "lost": sum(outcome == LOST for _, _, outcome, _ in spans),
        "seconds": round(seconds, 1), "requests_per_s": round(len(answered) / seconds, 2),
        "p50_ms": round(statistics.median(answered), 1) if answered else float("nan"),
        "p95_ms": round(answered[min(len(answered) - 1, round(0.95 * (len(answered) - 1)))], 1)
        if answered else float("nan"),
        "editor_own_ms_p50": round(statistics.median(own), 1) if own else float("nan"),
        **metrics,
        "prompt_tokens_per_request": round(metrics.get("prompt_tokens_read", float("nan")) / max(1, len(spans)), 1),
        "slot_steps_per_request": round(metrics.get("decodes", float("nan")) * metrics.get("busy_slots", float("nan"))
                                        / max(1, len(spans)), 1),
    }
