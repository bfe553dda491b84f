"""The remote backend against a real llama-server (built by `make llama-server`) on the default model.

Over both APIs the server speaks (`API`): its own ``/completion``, and
``/v1/completions`` as vLLM and SGLang serve it. The rows the client builds
from top-K answers are compared with the in-process model's; the bound on
the unknown rest must hold; a needed token outside the top K widens K; the
states of a call travel one request each; the server keeps each client on the slot that holds its prompt; a
server of another model is refused by name; and the faults: a server that
is not there, one that stops answering (SIGSTOP), one killed mid-request
and started again -- clear errors, then service again on the same client.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from cpc.engine import Engine
from cpc.generate import Options, generate
from cpc.remote import RemoteLM, RemoteMismatch, RemoteOptions, RemoteUnavailable, full_row
from harness.llama_server import LlamaServer, free_port
from harness.threads import MODEL_THREADS
from tests.support.openai_server import MODEL_ID, OpenAIShapeServer

pytestmark = pytest.mark.slow

API = ["llama-server", "openai"]

PREFIX = "class Box:\n    def __init__(self, width):\n        self.width = width\n\n    def area(self):\n        return self.wid"


@pytest.fixture(scope="module")
def server():
    # slots erasable (`RemoteLM.reset`), and no host-memory prompt cache to restore an erased prompt from
    with LlamaServer("default", extra=("--slot-save-path", "/tmp", "--cache-ram", "0")) as running:
        yield running


@pytest.fixture(scope="module")
def local() -> Engine:
    return Engine.load("default", n_seq=2, threads=MODEL_THREADS)


def remote_engine(url: str, **options) -> Engine:
    """A remote engine; its timeout is generous (two busy cores run both ends) unless a test sets one."""
    return Engine.load(url, remote=RemoteOptions(**{"timeout_s": 60.0} | options))


def test_full_row_spreads_the_rest_within_the_bound():
    logprobs = np.log([0.6, 0.25, 0.1])
    row, bound = full_row(np.array([5, 1, 7]), logprobs, 10)
    probs = np.exp(row.astype(np.float64))
    assert probs.sum() == pytest.approx(1.0)
    assert bound.rest == pytest.approx(0.05) and bound.kth == pytest.approx(0.1)
    outside = np.delete(probs, [5, 1, 7])
    assert outside.max() <= bound.kth and outside == pytest.approx(np.full(7, 0.05 / 7))


@pytest.mark.parametrize("api", API)
def test_rows_match_the_in_process_model_and_the_bound_holds(server, local, api):
    engine = remote_engine(server.url, top_k=512, api=api)
    lm = engine.lm
    assert isinstance(lm, RemoteLM) and lm.last_error is None and lm.api.name == api
    prompt = lm.bos + tuple(engine.tokenizer.encode(PREFIX.encode()))
    for state in (prompt, prompt[:-1], prompt[:-3]):
        # Each state read whole from an empty cache on both sides: llama.cpp's logits depend on how a
        # prompt is split into decodes (docs/team-server.md), so only the same split compares exactly.
        lm.reset()
        local.lm.reset()
        remote = np.exp(lm.next_logprobs([state])[0].astype(np.float64))
        exact = np.exp(local.lm.next_logprobs([state])[0].astype(np.float64))
        bound = lm.bounds[-1]
        top = np.argsort(-remote)[: bound.k]
        assert np.abs(remote[top] - exact[top]).max() < 1e-3, "top-K values are the model's"
        outside = np.delete(exact, top)
        assert outside.max() <= bound.kth + 1e-4, "no token outside the top K is above the K-th"
        assert outside.sum() == pytest.approx(bound.rest, abs=1e-3), "the rest is the mass outside"
    assert lm.stats.states == 3


@pytest.mark.parametrize("api", API)
def test_a_needed_token_outside_the_top_k_widens_k(server, local, api):
    engine = remote_engine(server.url, top_k=4, api=api)
    lm = engine.lm
    prompt = lm.bos + tuple(engine.tokenizer.encode(b"import os\nprint(os."))
    # The server reads the prompt whole for K = 4, then only its last token again for the wider K:
    # the same split in-process (llama.cpp's logits depend on it).
    lm.reset()
    local.lm.reset()
    local.lm.next_logprobs([prompt])
    exact = np.exp(local.lm.next_logprobs([prompt])[0].astype(np.float64))
    rare = next(t for t in np.argsort(-exact)[40:].tolist() if engine.vocab.pieces[t][:1].isalpha())
    lm.expect(prompt, engine.vocab.pieces[rare])
    row = np.exp(lm.next_logprobs([prompt])[0].astype(np.float64))
    assert lm.widened >= 1 and lm.bounds[-1].k > 4
    assert row[rare] == pytest.approx(exact[rare], rel=0.02), "the needed token's value is exact after widening"


@pytest.mark.parametrize("api", API)
def test_prefill_reads_ahead_and_the_client_knows_what_its_slot_holds(server, api):
    engine = remote_engine(server.url, api=api)
    lm = engine.lm
    text = b"def read_ahead(path):\n    with open(path) as handle:\n        return handle.read()\n"
    prompt = lm.bos + tuple(engine.tokenizer.encode(text))
    assert 0 < lm.prefill(prompt) <= len(prompt)  # the slot may hold the start of an earlier prompt
    assert lm.cached_length(prompt + (1, 2)) == len(prompt)
    assert lm.prefill(prompt) == 0, "read already"
    before = lm.stats.tokens
    lm.next_logprobs([prompt + (1,)])
    assert lm.stats.tokens - before <= 2, "the slot kept the prompt: only the new token is read"


@pytest.mark.parametrize("api", API)
def test_remote_completion_is_the_in_process_one(server, local, api):
    """The identifier is the same; later tokens may differ on near-ties (the server batches differently)."""
    engine = remote_engine(server.url, top_k=4096, api=api)
    options = Options(max_tokens=8)
    remote = generate(engine, PREFIX, options=options).completions[0].text
    exact = generate(local, PREFIX, options=options).completions[0].text
    assert remote.startswith("th") and exact.startswith("th"), (remote, exact)


def test_a_server_of_another_model_is_refused_by_name():
    with LlamaServer("smollm2") as other:
        with pytest.raises(RemoteMismatch, match="remoteVocab"):
            remote_engine(other.url)


def test_the_states_of_a_call_go_one_request_each_and_greedy_steps_ask_one_token(server, local):
    engine = remote_engine(server.url, top_k=512)
    lm = engine.lm
    prompt = lm.bos + tuple(engine.tokenizer.encode(PREFIX.encode()))
    states = [prompt + (token,) for token in (594, 2016, 16)]
    requests = lm.profile.requests
    together = np.exp(lm.next_logprobs(states).astype(np.float64))
    # llama-server chooses each state's slot by its prompt: one request each, the later ones on the slot before
    assert lm.profile.requests == requests + 3, "three states, three requests"
    alone = np.exp(np.stack([lm.next_logprobs([state])[0] for state in states]).astype(np.float64))
    # llama.cpp's numbers for a state move with the batch it is computed in (kernels split the work by batch
    # size; AMX and AVX-512 reorder sums): on the default model by at most 0.111 in probability over thread
    # counts 1, 2 and 4 and decode splits (benchmarks/probe_batch_noise.py). So each row is compared with
    # every state's lone answer: its own state's is within that noise and nearer than any other's.
    distance = np.abs(together[:, None, :] - alone[None, :, :]).max(axis=2)
    assert (distance.diagonal() <= 0.15).all(), distance
    assert (distance.argmin(axis=1) == np.arange(len(states))).all(), ("answered in the order asked", distance)
    answered, read = lm.stats.states, lm.profile.bytes
    banned = engine.vocab.special.copy()
    chosen, logprobs = lm.greedy_next([prompt], banned)
    assert lm.stats.states == answered + 1 and lm.bounds[-1].k == 1, "a greedy step asks for one token"
    assert lm.profile.bytes - read < 2048, "and its answer is small"
    exact = local.lm.next_logprobs([prompt])[0]
    assert int(chosen[0]) == int(exact.argmax()), "greedy decoding's choice is the model's"
    # the same noise, in probability: in log-probability it is larger for an unlikely token (a 0.034 change of
    # a 0.14 probability is 0.23 in log-probability, seen when a busy core made cpc.threads decode with one
    # thread and the server with two)
    assert np.exp(logprobs[0]) == pytest.approx(np.exp(exact.max()), abs=0.15), "with its log-probability"


def test_a_greedy_step_whose_likeliest_tokens_are_banned_widens_until_one_is_allowed(server, local):
    engine = remote_engine(server.url)
    lm = engine.lm
    prompt = lm.bos + tuple(engine.tokenizer.encode(PREFIX.encode()))
    row = lm.next_logprobs([prompt])[0]
    banned = engine.vocab.special.copy()
    banned[np.argsort(-row)[:3]] = True  # the three likeliest: the choice is the fourth, found at K = 8
    widened = lm.widened
    chosen, logprobs = lm.greedy_next([prompt], banned)
    assert lm.widened == widened + 1 and lm.bounds[-1].k == 8
    token = int(chosen[0])
    assert not banned[token], "a banned token is never chosen"
    # the best allowed one (the server's numbers move a little with how it splits a prompt: within 0.15)
    assert np.exp(logprobs[0]) >= np.exp(np.where(banned, -np.inf, row).max()) - 0.15
    assert np.exp(logprobs[0]) == pytest.approx(np.exp(row[token]), abs=0.15)


def test_the_server_keeps_each_client_on_the_slot_that_holds_its_prompt():
    """No client keeps a slot: the server chooses each call's, the idle slot whose prompt is most like it."""
    with LlamaServer("default", parallel=2) as two:
        first, second = (remote_engine(two.url).lm for _ in range(2))
        prompt = first.bos + tuple(first.tokenizer.encode(PREFIX.encode()))
        first.next_logprobs([prompt])
        second.next_logprobs([second.bos + tuple(second.tokenizer.encode(b"import os\nprint(os.getcwd())\n"))])
        assert {first.slot, second.slot} == {0, 1}, "the second prompt went to the other (least recently used) slot"
        before = first.stats.tokens
        first.next_logprobs([prompt + (594,), prompt + (2016,)])
        assert first.stats.tokens - before <= 4, "each state read its last token only: the slot kept the prompt"


def test_an_engine_that_caps_k_is_read_in_its_own_shape_and_the_rows_stay_sound(local, caplog):
    """vLLM's ``/v1/completions`` (its answer shape and its refusal of K over ``--max-logprobs``), spoken by a
    stand-in over the in-process model: the client detects the API, lowers K to the cap and says so once."""
    with OpenAIShapeServer(local.lm, local.tokenizer, max_logprobs=20) as stand_in:
        engine = remote_engine(stand_in.url, top_k=512)
        lm = engine.lm
        assert lm.api.name == "openai" and lm.api.model == MODEL_ID and lm.slot is None
        prompt = lm.bos + tuple(engine.tokenizer.encode(PREFIX.encode()))
        local.lm.reset()
        exact = np.exp(local.lm.next_logprobs([prompt])[0].astype(np.float64))
        row = np.exp(lm.next_logprobs([prompt])[0].astype(np.float64))
        bound = lm.bounds[-1]
        assert lm.top_k_cap == 20 and bound.k == 20
        assert sum("--max-logprobs 512" in record.getMessage() for record in caplog.records) == 1
        top = np.argsort(-exact)[:20]
        assert np.abs(row[top] - exact[top]).max() < 1e-3
        assert np.delete(exact, top).sum() == pytest.approx(bound.rest, abs=1e-3)
        assert generate(engine, PREFIX, options=Options(max_tokens=4)).completions[0].text.startswith("th")
        asked = [body for body in stand_in.requests if "logprobs" in body]
        assert asked and all(body["return_tokens_as_token_ids"] and "id_slot" not in body for body in asked)
        assert all(body["model"] == MODEL_ID for body in asked)


@pytest.mark.parametrize("api", API)
def test_faults_are_clear_and_the_same_client_recovers(api):
    port = free_port()
    engine = remote_engine(f"http://127.0.0.1:{port}", timeout_s=15.0, retries=1, backoff_s=0.1, api=api)
    lm = engine.lm
    assert "refused the connection" in lm.last_error, "not started: said at load, the engine still loads"
    with pytest.raises(RemoteUnavailable, match=f"127.0.0.1:{port} refused the connection"):
        generate(engine, PREFIX, options=Options(max_tokens=4))

    server = LlamaServer("default", port=port).start()
    try:
        assert generate(engine, PREFIX, options=Options(max_tokens=4)).completions, "started: served"

        engine.clear()
        server.pause()  # slow: nothing answers
        started = time.monotonic()
        with pytest.raises(RemoteUnavailable, match="did not answer .* within 15 s"):
            generate(engine, PREFIX + "\n", options=Options(max_tokens=4))
        assert time.monotonic() - started < 30
        server.resume()
        engine.clear()
        assert generate(engine, PREFIX, options=Options(max_tokens=4)).completions, "resumed: served"

        # killed mid-request: the request is in flight (paused server), then the process dies
        errors: list[BaseException] = []

        def request() -> None:
            try:
                lm.next_logprobs([lm.bos + (1, 2, 3)])
            except BaseException as error:  # noqa: BLE001 - checked below
                errors.append(error)

        server.pause()
        worker = threading.Thread(target=request)
        worker.start()
        time.sleep(0.5)
        server.kill()
        worker.join(10)
        assert len(errors) == 1 and isinstance(errors[0], RemoteUnavailable), errors
        assert "dropped the connection" in str(errors[0]) or "refused the connection" in str(errors[0])

        server = LlamaServer("default", port=port).start()  # restarted on the same port
        engine.clear()
        assert generate(engine, PREFIX, options=Options(max_tokens=4)).completions, "restarted: served again"
        assert lm.last_error is None
    finally:
        server.stop()
