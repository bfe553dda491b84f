"""The load benchmark's replayed editors (`benchmarks.replay_load`) against two real llama-servers.

What an editor's client sends is recorded call by call, with its own work
between calls; a replay sends the same bodies to the replica the client
chose, and a server that does not answer loses the request, not the run.
"""

from __future__ import annotations

import itertools
import json
import socket
import time

import pytest

from benchmarks.replay_load import ANSWERED, LOST, Recorder, Request, replay, replay_row
from cpc.engine import Engine
from cpc.generate import Options, generate
from cpc.remote import RemoteOptions
from cpc.replicas import rank, route_key
from harness.llama_server import LlamaServer, all_running

pytestmark = pytest.mark.slow

DOCUMENTS = 4
NAMES = ("load", "parse", "scan", "render", "close", "merge", "split", "check", "fetch", "write", "clean", "build",
         "print", "count", "store", "index", "match", "patch", "serve", "watch", "unzip", "touch", "probe", "flush")


def documents_on_both(engine: Engine, urls: list[str]) -> list[str]:
    """`DOCUMENTS` documents, routed to the two replicas in turn. A route is a hash of the prompt's start and
    the replica's address, whose port changes from run to run: four fixed documents all went to one
    replica one run in eight."""
    routed: dict[int, list[str]] = {0: [], 1: []}
    for name in NAMES:
        document = f"def {name}(path):\n    with open(path) as handle:\n        return handle.re"
        state = (*engine.lm.bos, *engine.tokenizer.encode(document.encode()))
        routed[rank(route_key([state]), urls)[0]].append(document)
    alternating = [document for pair in itertools.zip_longest(*routed.values()) for document in pair if document]
    return alternating[:DOCUMENTS]


@pytest.fixture(scope="module")
def servers():
    with all_running([LlamaServer("default", parallel=2, slot_context=1024, threads=1) for _ in range(2)]) as running:
        yield running


@pytest.fixture(scope="module")
def recorded(servers) -> tuple[list[str], list[Request], list[float]]:
    """Two keystrokes in each document through a client of both replicas, recorded; each request's wall time."""
    urls = [server.url for server in servers]
    engine = Engine.load(" ".join(urls), n_ctx=1024, remote=RemoteOptions(timeout_s=60.0))
    recorder, walls = Recorder(), []
    with recorder.installed():
        for document in documents_on_both(engine, urls):
            for typed in (document, document + "a"):
                began = time.monotonic()
                recorder.begin()
                generate(engine, typed, options=Options(max_tokens=4))
                recorder.end(keep=True)
                walls.append(time.monotonic() - began)
    return urls, recorder.requests, walls


def test_each_request_is_recorded_with_its_calls_and_its_own_work(recorded):
    urls, requests, walls = recorded
    assert len(requests) == 2 * DOCUMENTS
    for request, wall in zip(requests, walls):
        assert request.calls, "a request with no call to the server"
        for call in request.calls:
            body = json.loads(call.body)
            assert call.path == "/completion" and body["prompt"], call
            assert "Authorization" not in call.body
        assert 0 < request.own_s < wall
    assert Request.from_json(json.loads(json.dumps(requests[0].to_json()))) == requests[0]


def test_a_replayed_call_goes_to_the_replica_the_client_chose(recorded):
    urls, requests, _ = recorded
    origins = [url.removeprefix("http://") for url in urls]
    chosen = [(call.origin, origins[rank(call.route, urls)[0]]) for request in requests for call in request.calls]
    assert all(sent == routed for sent, routed in chosen), chosen
    assert len({sent for sent, _ in chosen}) == 2, "the documents should spread over both replicas"


def test_replayed_editors_are_answered(recorded):
    urls, requests, _ = recorded
    spans = replay([requests[:4], requests[4:]], urls, 2, 1.0)
    assert spans and all(outcome == ANSWERED for _, _, outcome, _ in spans)
    row = replay_row(2, 2, spans, {})
    assert row["lost"] == 0 and row["requests_per_s"] > 0
    assert row["p50_ms"] >= row["editor_own_ms_p50"]


def test_a_server_that_does_not_answer_loses_its_requests_and_the_run_goes_on(recorded):
    _, requests, _ = recorded
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{unused.getsockname()[1]}"
    spans = replay([requests[:2]], [closed], 1, 0.3, timeout_s=5)
    assert spans and all(outcome == LOST for _, _, outcome, _ in spans)
