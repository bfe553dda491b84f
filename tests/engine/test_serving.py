"""The two serving APIs' requests and answers, without a server: the shapes each engine documents.

The OpenAI legacy answer is the one vLLM writes for ``/v1/completions``
with ``logprobs`` and ``return_tokens_as_token_ids`` (vLLM's
``CompletionResponse`` / ``CompletionLogProbs``). llama.cpp's are tested
against the real llama-server in ``test_remote.py``; here their shapes
pin what the client reads.
"""

from __future__ import annotations

import pytest

from cpc.serving import AnswerError, LlamaServerAPI, OpenAICompletionsAPI, logprobs_cap

VLLM_ANSWER = {
    "id": "cmpl-8b2f0c",
    "object": "text_completion",
    "created": 1764000000,
    "model": "google/gemma-3-270m",
    "choices": [
        {
            "index": 1,
            "text": "th",
            "logprobs": {
                "text_offset": [0],
                "token_logprobs": [-0.02],
                "tokens": ["token_id:594"],
                "top_logprobs": [{"token_id:594": -0.02, "token_id:2016": -4.1, "token_id:16": -6.5}],
            },
            "finish_reason": "length",
            "stop_reason": None,
            "prompt_logprobs": None,
        },
        {
            "index": 0,
            "text": "(",
            "logprobs": {
                "text_offset": [0],
                "token_logprobs": [-0.7],
                "tokens": ["token_id:236769"],
                "top_logprobs": [{"token_id:236769": -0.7, "token_id:1": -0.9}],
            },
            "finish_reason": "length",
            "stop_reason": None,
            "prompt_logprobs": None,
        },
    ],
    "usage": {"prompt_tokens": 40, "total_tokens": 42, "completion_tokens": 2,
              "prompt_tokens_details": {"cached_tokens": 32}},
}


def test_the_vllm_answer_is_read_in_the_order_of_the_prompts():
    api = OpenAICompletionsAPI(model="google/gemma-3-270m")
    first, second = api.parse(VLLM_ANSWER, 2)
    assert first.ids.tolist() == [236769, 1] and first.logprobs.tolist() == [-0.7, -0.9]
    assert second.ids.tolist() == [594, 2016, 16], "best first"
    assert second.logprobs.tolist() == [-0.02, -4.1, -6.5]
    assert first.slot is None and first.prompt_tokens is None, "usage is per request, not per prompt"


def test_one_vllm_prompt_says_what_its_cache_lacked():
    answer = {**VLLM_ANSWER, "choices": VLLM_ANSWER["choices"][:1]}
    [top] = OpenAICompletionsAPI().parse(answer, 1)
    assert top.prompt_tokens == 8


def test_the_openai_request_asks_for_token_ids_and_one_token():
    body = OpenAICompletionsAPI(model="m").body([(2, 5, 9)], 512, None)
    assert body == {"prompt": [[2, 5, 9]], "max_tokens": 1, "logprobs": 512, "temperature": 0.0, "echo": False,
                    "return_tokens_as_token_ids": True, "model": "m"}


def test_on_a_llama_server_the_openai_request_keeps_its_slot_and_can_read_without_generating():
    body = OpenAICompletionsAPI(llama_fields=True).body([(2, 5)], 0, 3)
    assert body["id_slot"] == 3 and body["n_predict"] == 0 and body["max_tokens"] == 0 and body["cache_prompt"]


def test_llama_cpps_openai_dialect_is_read_too():
    answer = {"choices": [{"index": 0, "text": "x", "logprobs": {"content": [
        {"id": 7, "token": "x", "bytes": [120], "logprob": -0.1,
         "top_logprobs": [{"id": 7, "token": "x", "bytes": [120], "logprob": -0.1},
                          {"id": 9, "token": "y", "bytes": [121], "logprob": -2.4}]}]}}],
              "timings": {"prompt_n": 3, "prompt_ms": 4.5, "predicted_ms": 1.0}}
    [top] = OpenAICompletionsAPI(llama_fields=True).parse(answer, 1)
    assert top.ids.tolist() == [7, 9] and top.prompt_tokens == 3 and top.prompt_ms == 4.5


def test_llama_servers_answers_to_several_prompts_come_back_in_order():
    def result(index: int, token: int, slot: int) -> dict:
        return {"index": index, "id_slot": slot, "timings": {"prompt_n": index + 1, "prompt_ms": 1.0},
                "completion_probabilities": [{"id": token, "logprob": -0.5,
                                              "top_logprobs": [{"id": token, "logprob": -0.5}]}]}

    answers = LlamaServerAPI().parse([result(1, 20, 4), result(0, 10, 4)], 2)
    assert [a.ids.tolist() for a in answers] == [[10], [20]]
    assert [a.prompt_tokens for a in answers] == [1, 2] and answers[0].slot == 4
    body = LlamaServerAPI().body([(2, 3), (2, 4)], 64, None)
    assert body["prompt"] == [[2, 3], [2, 4]] and body["id_slot"] == -1 and body["n_probs"] == 64
    assert "completion_probabilities" in body["response_fields"]


@pytest.mark.parametrize("answer, count", [
    ({"choices": []}, 1),
    ({"choices": [{"index": 0, "logprobs": None}]}, 1),
    ({"choices": [{"index": 0, "logprobs": {"top_logprobs": [{" the": -0.1}]}}]}, 1),
    ("not an object", 1),
])
def test_an_answer_in_another_shape_is_refused(answer, count):
    with pytest.raises(AnswerError):
        OpenAICompletionsAPI().parse(answer, count)


def test_a_servers_cap_on_k_is_read_from_its_refusal():
    assert logprobs_cap("Requested sample logprobs of 512, which is greater than max allowed: 20") == 20
    assert logprobs_cap("logprobs must be at most 5") == 5
    assert logprobs_cap("The model `x` does not exist.") is None
