"""The client against vLLM's and SGLang's answers as they write them (`tests/support/replay_server.py`).

vLLM: found without ``/props``, the served model's id in every request, the
vocabulary checked with its ``/tokenize``, K lowered to ``--max-logprobs``
from its refusal with one warning, its ``token_id:N`` answer read into a
sound row, and a greedy step that asks one token. SGLang: its
``/v1/completions`` names the likeliest tokens by text, and the client says
so and what to do instead of guessing ids.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest

from cpc.engine import Engine
from cpc.remote import RemoteMismatch, RemoteOptions
from tests.support.replay_server import ReplayServer

pytestmark = pytest.mark.slow


def load(server: ReplayServer) -> Engine:
    return Engine.load(server.url, remote=RemoteOptions(top_k=512, timeout_s=30.0))


def test_vllm_is_read_and_its_cap_on_k_is_kept(caplog):
    with ReplayServer("vllm") as vllm:
        engine = load(vllm)
        lm = engine.lm
        assert lm.last_error is None and lm.api.name == "openai" and lm.api.model == "google/gemma-3-270m"
        state = tuple(vllm.recording["state"])
        recorded = vllm.recording["answers"]["POST /v1/completions"][1]["body"]["choices"][0]["logprobs"]
        top = {int(token.removeprefix("token_id:")): value for token, value in recorded["top_logprobs"][0].items()}
        with caplog.at_level(logging.WARNING, logger="cpc.remote"):
            row = lm.next_logprobs([state])[0]
        assert lm.top_k_cap == 20 and lm.bounds[-1].k == 20
        assert [r.getMessage() for r in caplog.records if "--max-logprobs 512" in r.getMessage()], caplog.records
        assert all(row[token] == pytest.approx(value) for token, value in top.items())
        rest = 1 - sum(np.exp(list(top.values())))
        assert np.exp(row.astype(np.float64)).sum() == pytest.approx(1.0, abs=1e-4)
        assert lm.bounds[-1].rest == pytest.approx(rest) and np.exp(row).max() == pytest.approx(np.exp(max(top.values())))

        chosen, logprobs = lm.greedy_next([state], engine.vocab.special.copy())
        assert int(chosen[0]) == max(top, key=top.get) and logprobs[0] == pytest.approx(max(top.values()))
        asked = [body for request, body in vllm.requests if request == "POST /v1/completions"]
        assert [body["logprobs"] for body in asked] == [512, 20, 1], "refused, capped, then a greedy step's one"
        assert all(body["model"] == "google/gemma-3-270m" and body["return_tokens_as_token_ids"]
                   and body["echo"] is False and body["max_tokens"] == 1 and "id_slot" not in body for body in asked)
        assert any(request == "POST /tokenize" for request, _ in vllm.requests), "the vocabulary was checked"


def test_sglangs_token_texts_are_refused_with_what_to_do():
    with ReplayServer("sglang") as sglang:
        engine = load(sglang)
        assert engine.lm.last_error is None, "models and tokenizer check answer as vLLM's do"
        with pytest.raises(RemoteMismatch) as refused:
            engine.lm.next_logprobs([tuple(sglang.recording["state"])])
        message = str(refused.value)
        assert "by their text" in message and "' ='" in message, message
        assert "serve the model with vLLM or llama-server" in message
        assert engine.lm.last_error == message
