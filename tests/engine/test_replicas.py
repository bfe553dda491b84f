"""Replicas: one client over two real llama-servers of the default model (`cpc.replicas`).

Each document's prompt stays on one replica (its slot keeps the prompt: a
keystroke reads a token or two), documents spread over both, a replica
stopped mid-run is skipped and its documents served by the other, it takes
them back when it is started again, and editors typing all the while lose
no request and get no other state's answer. With no replica answering, one
clear error; then service again on the same client. A replica stopped as
docs/team-server.md says (SIGTERM twice) exits at once, and its requests in
flight see their connections close.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
import urllib.request

import numpy as np
import pytest

from cpc.engine import Engine
from cpc.remote import RemoteOptions, RemoteUnavailable
from cpc.replicas import ReplicatedLM, remote_lm
from harness.llama_server import STOP_GRACE_S, LlamaServer, all_running

pytestmark = pytest.mark.slow

RETRY_S = 0.2
DOCUMENTS = [f"# {name}.py\nimport os\n\n\ndef {name}(path):\n    with open(path) as handle:\n        return handle."
             for name in ("load", "parse", "read_config", "scan", "render", "fetch_rows", "merge", "walk")]


@pytest.fixture(scope="module")
def pair():
    with all_running([LlamaServer("default", parallel=4, slot_context=1024, threads=1) for _ in range(2)]) as servers:
        yield servers


@pytest.fixture(scope="module")
def engine(pair) -> Engine:
    return replicated(pair)


def replicated(servers: list[LlamaServer]) -> Engine:
    """A client of both replicas; generous timeouts (two busy cores run both servers and the client)."""
    model = " , ".join(server.url for server in servers)  # spaces and commas both separate addresses
    return Engine.load(model, n_ctx=1024, remote=RemoteOptions(timeout_s=60.0, replica_retry_s=RETRY_S))


def prompt(engine: Engine, text: str) -> tuple[int, ...]:
    return engine.lm.bos + tuple(engine.tokenizer.encode(text.encode()))


def banned(engine: Engine) -> np.ndarray:
    return engine.vocab.special.copy()


def step(engine: Engine, state: tuple[int, ...]) -> tuple[int, float]:
    """One greedy step, and which replica answered it (by their counts of states answered)."""
    chosen, logprobs = engine.lm.greedy_next([state], banned(engine))
    return int(chosen[0]), float(logprobs[0])


def states_answered(lm: ReplicatedLM) -> list[int]:
    return [replica.stats.states for replica in lm.replicas]


def home(engine: Engine, state: tuple[int, ...]) -> int:
    """The replica that answers ``state``'s step."""
    before = states_answered(engine.lm)
    step(engine, state)
    grown = [after - was for after, was in zip(states_answered(engine.lm), before)]
    assert sorted(grown) == [0, 1], grown
    return grown.index(1)


def test_each_document_keeps_to_one_replica_and_the_documents_spread(engine):
    lm = engine.lm
    assert isinstance(lm, ReplicatedLM) and lm.last_error is None and len(lm.replicas) == 2
    homes = {}
    for document in DOCUMENTS:
        state = prompt(engine, document)
        homes[document] = home(engine, state)
        for typed in (", ", ", mode"):  # keystrokes: the prompt grows at its end
            longer = prompt(engine, document + typed)
            replica = lm.replicas[homes[document]]
            read = replica.stats.tokens
            assert home(engine, longer) == homes[document], "a document stays on its replica"
            assert replica.stats.tokens - read <= len(longer) - len(state) + 1, "its slot kept the prompt"
    assert set(homes.values()) == {0, 1}, ("the documents spread over both replicas", homes)


def test_a_stopped_replica_is_skipped_and_takes_its_documents_back_when_started_again(engine, pair):
    lm = engine.lm
    states = {document: prompt(engine, document + "read") for document in DOCUMENTS}
    homes = {document: home(engine, state) for document, state in states.items()}
    document = next(document for document, number in homes.items() if number == 1)
    pair[1].kill()
    try:
        assert home(engine, states[document]) == 0, "served by the other replica"
        assert lm.last_error is None, "a replica that fails over is no error for the user"
        assert all(home(engine, state) == 0 for state in states.values())
    finally:
        pair[1].start()
    assert lm.try_connect()  # checked again: used at once (else after its wait)
    assert {document: home(engine, state) for document, state in states.items()} == homes, "each came back"


def test_no_replica_answering_is_one_clear_error_then_service_again(engine, pair):
    state = prompt(engine, DOCUMENTS[0])
    for server in pair:
        server.kill()
    try:
        with pytest.raises(RemoteUnavailable, match="no model server answered") as refused:
            step(engine, state)
        assert all(server.url in str(refused.value) for server in pair), "both replicas are named"
        assert engine.lm.last_error == str(refused.value)
    finally:
        for server in pair:
            server.start()
    assert step(engine, state)[0] >= 0 and engine.lm.last_error is None


def test_editors_typing_lose_nothing_when_a_replica_stops_and_starts_again(engine, pair):
    """Four editors type while each replica in turn is killed and started again: every step is answered, and
    with its own state's token (states whose next token is certain: noise between batches cannot change it)."""
    certain = {}
    for document in DOCUMENTS:
        for typed in ("", "r", "re", "rea", "read"):
            state = prompt(engine, document + typed)
            token, logprob = step(engine, state)
            if logprob > np.log(0.7):
                certain[state] = token
    assert len(certain) >= 8, certain
    answered: list[bool] = []
    wrong: list[tuple] = []
    stop = threading.Event()

    def editor(number: int) -> None:
        lm = remote_lm(engine.lm.url, engine.tokenizer, engine.index, n_ctx=1024,
                       options=RemoteOptions(timeout_s=60.0, replica_retry_s=RETRY_S))
        own = list(certain.items())[number::4] or list(certain.items())
        while not stop.is_set():
            for state, token in own:
                try:
                    chosen, _ = lm.greedy_next([state], banned(engine))
                except Exception as error:  # noqa: BLE001 - any failure is what this test counts
                    answered.append(False)
                    wrong.append((state, repr(error)))
                    continue
                answered.append(True)
                if int(chosen[0]) != token:
                    wrong.append((state, int(chosen[0]), token))

    editors = [threading.Thread(target=editor, args=(n,)) for n in range(4)]
    for thread in editors:
        thread.start()
    try:
        for server in pair:
            time.sleep(2)
            server.kill()  # mid-run, as a crash: requests in flight see their connection drop
            time.sleep(2)
            server.start()
        time.sleep(2)
    finally:
        stop.set()
        for thread in editors:
            thread.join(120)
    assert len(answered) >= 20 and all(answered), (len(answered), wrong[:5])
    assert wrong == []


def wait_until_decoding(server: LlamaServer, timeout: float = 30.0) -> bool:
    """Whether one of the server's slots took up a request within ``timeout`` (its ``/slots``)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with urllib.request.urlopen(f"{server.url}/slots", timeout=10) as response:
            if any(slot.get("is_processing") for slot in json.loads(response.read())):
                return True
        time.sleep(0.05)
    return False


def test_a_replica_stopped_with_two_sigterms_exits_at_once_and_drops_its_requests_in_flight():
    """What docs/team-server.md tells an administrator (and `LlamaServer.stop` does): once told to stop,
    llama-server answers no request in flight and keeps running; a second SIGTERM ends it at once, and the
    requests' connections close, so the editors send them to the next replica instead of waiting."""
    outcome: dict[str, object] = {}
    with LlamaServer("default", threads=1) as server:
        def long_request() -> None:
            body = json.dumps({"prompt": "def main():\n", "n_predict": 1500, "ignore_eos": True}).encode()
            request = urllib.request.Request(f"{server.url}/completion", body, {"Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(request, timeout=60) as response:
                    outcome["answered"] = response.read()
            except (http.client.HTTPException, OSError) as error:
                outcome["dropped"] = error

        worker = threading.Thread(target=long_request)
        worker.start()
        assert wait_until_decoding(server), "the request reached a slot"
        server.process.terminate()
        worker.join(STOP_GRACE_S)
        assert worker.is_alive() and server.process.poll() is None, "told to stop once: it waits, answering nothing"
        server.process.terminate()
        assert server.process.wait(timeout=5) == 1, "the second SIGTERM: it exits at once"
        worker.join(10)
    assert not worker.is_alive() and "dropped" in outcome, outcome
