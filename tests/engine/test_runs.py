"""Greedy runs on the model's side (`cpc.runs`): the choice from a row's likeliest tokens against the full
row's, by brute force, and against a real llama-server, the texts of a line in one request against those of
one request per token, fused or not, single- and multi-line; a run closed early, a cancelled one, and a
server that dies mid-run.
"""

from __future__ import annotations

import threading
import time
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from cpc.engine import Engine
from cpc.fusion import FusionWeights, ProjectCorpus
from cpc.generate import Options, generate
from cpc.lm import Cancelled, best_allowed, known_choice
from cpc.remote import RemoteOptions, RemoteUnavailable, full_row
from harness.llama_server import LlamaServer
from tests.support.strategies import examples

VOCAB = 40


def _row(seed: int, spread: float) -> np.ndarray:
    logits = np.random.default_rng(seed).normal(0, spread, VOCAB)
    return logits - np.logaddexp.reduce(logits)


@settings(max_examples=examples(300), deadline=None)
@given(seed=st.integers(0, 2**32 - 1), spread=st.floats(0.1, 8), known=st.integers(1, 12),
       wide=st.integers(12, VOCAB), fusion_scale=st.floats(0, 6), fused=st.booleans(),
       banned=st.sets(st.integers(0, VOCAB - 1), max_size=6))
@example(seed=1, spread=0.1, known=1, wide=12, fusion_scale=6.0, fused=True, banned=set())
@example(seed=2, spread=4.0, known=3, wide=VOCAB, fusion_scale=0.0, fused=False, banned={0, 1, 2, 3})
def test_a_choice_from_the_likeliest_tokens_is_the_full_rows_or_none(seed, spread, known, wide, fusion_scale,
                                                                     fused, banned):
    """Whatever the server answers per step (a row from any wider top K), a run's decided choice is that step's:
    the same token and the same score."""
    logprobs = _row(seed, spread)
    order = np.argsort(-logprobs, kind="stable")
    mask = np.zeros(VOCAB, dtype=bool)
    mask[list(banned)] = True
    scores = (np.random.default_rng(seed + 1).normal(0, 1, VOCAB) * fusion_scale).astype(np.float32)
    ids = order[:known]
    choice = known_choice(ids, logprobs[ids], mask, scores if fused else None)
    if fused:  # a plain fused step builds a row from its own top K and adds fusion's scores
        step_row, _ = full_row(order[:wide], logprobs[order[:wide]], VOCAB)
        token, value = best_allowed(step_row[None] + scores, mask)
    else:  # a plain greedy step takes the likeliest allowed token's exact value
        token, value = best_allowed(logprobs[None].copy(), mask)
    if choice is not None:
        assert choice == (int(token[0]), float(value[0]))
    if not fused and not mask[ids].all():
        assert choice is not None, "unfused, an allowed token among the known decides"


PREFIX = ("import os\n\n\ndef sizes(folder):\n    total = 0\n    for name in os.listdir(folder):\n"
          "        path = os.path.join(folder, name)\n        if os.path.isfile(path):\n            total += os.")
DOCUMENT = PREFIX + "path.getsize(path)\n    return total\n"


@pytest.fixture(scope="module")
def server():
    # one slot, no host-memory prompt cache: each request's numbers come from the same decode splits
    with LlamaServer("default", extra=("--cache-ram", "0")) as running:
        yield running


def _engine(url: str, runs: bool) -> Engine:
    return Engine.load(url, remote=RemoteOptions(timeout_s=60.0, greedy_runs=runs))


@pytest.mark.slow
@pytest.mark.parametrize("multiline", [False, True])
@pytest.mark.parametrize("fused", [False, True])
def test_a_line_in_one_request_is_the_text_of_one_request_per_token(server, fused, multiline):
    corpus = None
    texts, calls = {}, {}
    for runs in (False, True):
        engine = _engine(server.url, runs)
        assert engine.lm.runs_greedily is runs
        if fused and corpus is None:
            corpus = ProjectCorpus(engine.tokenizer)
            corpus.update_document("file:///sizes.py", DOCUMENT)
        fusion = corpus.fusion("file:///sizes.py", FusionWeights()) if fused else None
        engine.clear()
        generation = generate(engine, PREFIX, options=Options(max_tokens=24, multiline=multiline), fusion=fusion)
        texts[runs] = [completion.text for completion in generation.completions]
        calls[runs] = generation.lm_calls
        assert (generation.run_tokens > 0) is runs
    assert texts[True] == texts[False] and texts[True][0], texts
    assert calls[True] < calls[False], calls


@pytest.mark.slow
def test_a_run_closed_early_stops_the_server_and_the_next_request_is_answered(server):
    engine = _engine(server.url, True)
    lm = engine.lm
    state = lm.bos + tuple(engine.tokenizer.encode(PREFIX.encode()))
    run = lm.greedy_run(state, 400, top_k=1, stop_at_line_end=False)
    first = next(run)
    run.close()  # the server sees the connection go and stops decoding its 400 tokens
    again = next(lm.greedy_run(state, 1, top_k=1, stop_at_line_end=False))
    assert again.token == first.token and again.ids[0] == first.ids[0]
    assert lm.greedy_next([state], engine.vocab.special.copy())[0][0] == first.token, "per step, the same token"


@pytest.mark.slow
def test_a_run_after_a_pause_longer_than_the_servers_keep_alive_goes_on_a_new_connection(server):
    """llama-server closes a connection idle for 5 s: the next run must not take that for a server gone."""
    engine = _engine(server.url, True)
    lm = engine.lm
    state = lm.bos + tuple(engine.tokenizer.encode(PREFIX.encode()))
    assert len(list(lm.greedy_run(state, 3, top_k=1, stop_at_line_end=False))) == 3
    time.sleep(6)
    requests = lm.profile.requests
    assert len(list(lm.greedy_run(state, 3, top_k=1, stop_at_line_end=False))) == 3
    assert lm.last_error is None and lm.profile.requests == requests + 1, "one request: no reconnection checks"


@pytest.mark.slow
def test_a_cancelled_run_stops_at_once_and_the_client_serves_on(server):
    engine = _engine(server.url, True)
    state = engine.lm.bos + tuple(engine.tokenizer.encode(PREFIX.encode()))
    stop = threading.Event()
    taken = []
    with pytest.raises(Cancelled), engine.lm.interruptible(stop.is_set):
        for step in engine.lm.greedy_run(state, 400, top_k=1, stop_at_line_end=False):
            taken.append(step.token)
            if len(taken) == 2:
                stop.set()
    assert len(taken) == 2
    assert generate(engine, PREFIX, options=Options(max_tokens=4)).completions[0].text.startswith("path")


@pytest.mark.slow
def test_a_server_that_dies_mid_run_ends_the_run_and_the_next_step_says_so():
    with LlamaServer("default") as dying:
        engine = _engine(dying.url, True)
        state = engine.lm.bos + tuple(engine.tokenizer.encode(PREFIX.encode()))
        run = engine.lm.greedy_run(state, 400, top_k=1, stop_at_line_end=False)
        next(run)
        dying.kill()
        assert len(list(run)) < 399, "the run ends when its server goes"
        engine.lm.options = replace(engine.lm.options, retries=0)
        with pytest.raises(RemoteUnavailable, match="refused the connection"):
            generate(engine, PREFIX, options=Options(max_tokens=4))
