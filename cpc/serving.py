"""The two serving APIs a shared model answers on: llama-server's ``/completion`` and OpenAI's ``/v1/completions``.

`cpc.remote` asks a server for the K likeliest next tokens of several
token-id prompts at once. Each API here says how that request is written and
how its answer is read; nothing here does I/O.

- `LlamaServerAPI`: llama.cpp's own ``/completion``. ``prompt`` is a list
  of token-id lists (one task per list, answered as an array), ``n_probs: K``
  with ``post_sampling_probs: false`` (the softmax over the whole
  vocabulary), ``id_slot`` pins the client's slot, and ``response_fields``
  trims the answer to what the client reads. A *greedy run*
  (`LlamaServerAPI.run_body`) has the server decode one prompt greedily for
  many tokens and stream each with its top K (``stream: true``: one
  server-sent event per token, `read_run_event`), stopping at the line's end
  when asked: the per-token answers of a whole line in one request.
- `OpenAICompletionsAPI`: ``/v1/completions``, which vLLM and SGLang serve
  (and llama-server too). ``prompt`` is a list of token-id lists,
  ``max_tokens: 1``, ``logprobs: K``. Answers come in two dialects, and both
  are read: llama.cpp's (``logprobs.content[0].top_logprobs``, a list of
  ``{"id", "logprob"}``) and OpenAI's legacy one that vLLM writes
  (``logprobs.top_logprobs[0]``, a map from token to log-probability, the
  token written ``token_id:N`` when the request says
  ``return_tokens_as_token_ids``; SGLang's ``/v1/completions`` names them by
  their text, which says no id: `TokenTexts`). On a llama-server the llama.cpp fields
  (``id_slot``, ``cache_prompt``) go along; other engines cache prefixes on
  their own.

    >>> api = OpenAICompletionsAPI(llama_fields=False)
    >>> body = api.body([(2, 9), (2, 7)], 4, None)
    >>> body["prompt"], body["max_tokens"], body["logprobs"], body["return_tokens_as_token_ids"]
    ([[2, 9], [2, 7]], 1, 4, True)
    >>> answer = {"choices": [{"index": 0, "logprobs": {"top_logprobs": [{"token_id:5": -0.1, "token_id:8": -2.5}]}}]}
    >>> [(a.ids.tolist(), a.logprobs.tolist()) for a in api.parse(answer, 1)]
    [([5, 8], [-0.1, -2.5])]
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

State = tuple[int, ...]

LLAMA_SERVER = "llama-server"
OPENAI = "openai"
REMOTE_APIS = ("auto", LLAMA_SERVER, OPENAI)
"""``remoteApi``: detect the API (``/props`` answers: llama-server), or name it."""

_TOKEN_ID = re.compile(r"token_id:(-?\d+)$")
_NUMBER = re.compile(r"\d+")


class AnswerError(ValueError):
    """An answer that is not in any shape this API writes (another server on that address, or a new version)."""


class TokenTexts(AnswerError):
    """An answer that names its top tokens by their text, not their ids (SGLang's ``/v1/completions``): a text
    does not say which of the tokens that spell it was meant, so no row can be built from it."""


@dataclass(frozen=True)
class TopK:
    """One state's answer: the K likeliest next tokens with their exact log-probabilities, and what it cost."""

    ids: np.ndarray
    logprobs: np.ndarray
    prompt_tokens: int | None = None
    """Prompt tokens the server evaluated for it (those its cache lacked), where it says."""
    prompt_ms: float = 0.0
    predicted_ms: float = 0.0
    slot: int | None = None
    """The llama-server slot that answered."""


@dataclass(frozen=True)
class LlamaServerAPI:
    """llama.cpp's ``/completion``."""

    name: str = LLAMA_SERVER
    title: str = "llama-server"
    """How messages name it."""
    path: str = "/completion"
    slots: bool = True
    """Whether the server keeps a client's prompt in a slot the client can pin (``id_slot``)."""
    prefills: bool = True
    """Whether a prompt can be read with nothing generated (``n_predict: 0``)."""

    def body(self, states: list[State], k: int, slot: int | None) -> dict[str, Any]:
        """The request for the top ``k`` next tokens of every state (``k`` 0: read the prompts, nothing more)."""
        return {
            "prompt": [list(state) for state in states],  # BOS included by us: the server adds nothing to ids
            "n_predict": 1 if k else 0,
            "n_probs": k,
            "post_sampling_probs": False,  # the softmax over the whole vocabulary, before any sampler
            "temperature": 0.0,  # the sampled token is not used: greedy is the cheapest sampler chain
            "cache_prompt": True,
            "id_slot": -1 if slot is None else slot,
            "stream": False,
            "response_fields": ["index", "completion_probabilities", "timings", "id_slot"],
        }

    def run_body(self, state: State, length: int, k: int, slot: int | None, stop_at_line_end: bool) -> dict[str, Any]:
        """The request for a greedy run: up to ``length`` tokens after ``state``, each streamed with its top ``k``,
        the sampler plain greedy (no penalty: each token is the likeliest one), ended by the first line break
        when ``stop_at_line_end``."""
        return {
            "prompt": list(state),
            "n_predict": length,
            "n_probs": k,
            "post_sampling_probs": False,
            "temperature": 0.0,
            "repeat_penalty": 1.0, "presence_penalty": 0.0, "frequency_penalty": 0.0, "dry_multiplier": 0.0,
            "stop": ["\n"] if stop_at_line_end else [],
            "cache_prompt": True,
            "id_slot": -1 if slot is None else slot,
            "stream": True,
        }

    def parse(self, answer: Any, count: int, probabilities: bool = True) -> list[TopK]:
        """``count`` answers, in the order of the request's prompts (without ``probabilities``: what they cost)."""
        results = answer if isinstance(answer, list) else [answer]
        if len(results) != count or not all(isinstance(result, dict) for result in results):
            raise AnswerError(f"{len(results)} answers to {count} prompts")
        results = sorted(results, key=lambda result: result.get("index", 0))
        return [_llama_top(result.get("completion_probabilities"), result, probabilities) for result in results]


@dataclass(frozen=True)
class OpenAICompletionsAPI:
    """OpenAI's ``/v1/completions``, as vLLM, SGLang and llama-server serve it."""

    llama_fields: bool = False
    """The server is a llama-server: its slot and cache fields go along, and ``max_tokens: 0`` reads a prompt."""
    name: str = OPENAI
    title: str = "the OpenAI-compatible server"
    path: str = "/v1/completions"
    model: str | None = None
    """The served model's id (``/v1/models``), which engines other than llama-server require."""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def slots(self) -> bool:
        return self.llama_fields

    @property
    def prefills(self) -> bool:
        return self.llama_fields

    def body(self, states: list[State], k: int, slot: int | None) -> dict[str, Any]:
        body: dict[str, Any] = {
            "prompt": [list(state) for state in states],
            "max_tokens": 1 if k or not self.llama_fields else 0,
            "logprobs": k or None,
            "temperature": 0.0,
            "echo": False,
            "return_tokens_as_token_ids": True,  # vLLM: ``token_id:N`` keys, unambiguous for any vocabulary
            **self.extra,
        }
        if self.model is not None:
            body["model"] = self.model
        if self.llama_fields:
            body |= {"n_predict": 1 if k else 0, "n_probs": k, "post_sampling_probs": False, "cache_prompt": True,
                     "id_slot": -1 if slot is None else slot}
            if slot is None:  # the slot the server assigns is said only in llama.cpp's own fields
                body["verbose"] = True
        return body

    def parse(self, answer: Any, count: int, probabilities: bool = True) -> list[TopK]:
        choices = answer.get("choices") if isinstance(answer, dict) else None
        if not isinstance(choices, list) or len(choices) != count:
            raise AnswerError(f"{len(choices) if isinstance(choices, list) else 'no'} choices for {count} prompts")
        choices = sorted(choices, key=lambda choice: choice.get("index", 0) if isinstance(choice, dict) else 0)
        timings = answer.get("timings") if count == 1 else None  # llama-server times the first task only
        usage = answer.get("usage") if count == 1 else None
        slot = (answer.get("__verbose") or {}).get("id_slot") if count == 1 else None
        found = []
        for choice in choices:
            logprobs = choice.get("logprobs") if isinstance(choice, dict) else None
            if not probabilities:
                found.append(_llama_top(None, {"timings": timings, "id_slot": slot}, False))
            elif not isinstance(logprobs, dict):
                raise AnswerError("a choice without logprobs (does the server return them for prompt token ids?)")
            elif "content" in logprobs:  # llama.cpp's dialect
                found.append(_llama_top(logprobs["content"], {"timings": timings, "id_slot": slot}))
            else:
                found.append(_legacy_top(logprobs, usage))
        return found


@dataclass(frozen=True)
class RunEvent:
    """One server-sent event of a greedy run: the tokens it decoded, each with its top K, or the run's end."""

    tokens: list[tuple[int, TopK]]
    """Each token decoded, in order, and what the server said of its position."""
    end: TopK | None = None
    """At the run's end (the last event): what the run cost and which slot served it."""


def read_run_event(line: bytes) -> RunEvent | None:
    """One line of a greedy run's event stream: its event, or None for a line that carries none.

    >>> event = read_run_event(b'data: {"tokens": [585], "stop": false, "completion_probabilities": '
    ...                        b'[{"id": 585, "logprob": -0.5, "top_logprobs": [{"id": 585, "logprob": -0.5}]}]}')
    >>> [(token, top.ids.tolist()) for token, top in event.tokens], event.end
    ([(585, [585])], None)
    >>> read_run_event(b'data: {"tokens": [], "stop": true, "id_slot": 0, "timings": {"prompt_n": 1}}').end.slot
    0
    """
    line = line.strip()
    if line.startswith(b"error:"):
        raise AnswerError(line.decode("utf-8", "replace"))
    if not line.startswith(b"data:"):
        return None
    try:
        event = json.loads(line[5:])
    except ValueError as error:
        raise AnswerError(f"an event that is not JSON: {line[:80]!r}") from error
    if not isinstance(event, dict):
        raise AnswerError(f"an event that is no object: {line[:80]!r}")
    if "error" in event:
        raise AnswerError(str(event["error"]))
    try:
        tokens = [(int(entry["id"]), _llama_top([entry], {})) for entry in event.get("completion_probabilities") or []]
    except (KeyError, TypeError, ValueError) as error:
        raise AnswerError(f"a token without its id: {line[:80]!r}") from error
    return RunEvent(tokens, _llama_top(None, event, False) if event.get("stop") else None)


def _llama_top(probabilities: Any, result: dict, required: bool = True) -> TopK:
    try:
        top = probabilities[0]["top_logprobs"] if required else []
        ids = np.fromiter((item["id"] for item in top), dtype=np.int64, count=len(top))
        logprobs = np.fromiter((item["logprob"] for item in top), dtype=np.float64, count=len(top))
    except (KeyError, IndexError, TypeError) as error:
        raise AnswerError("no completion_probabilities[0].top_logprobs") from error
    timings = result.get("timings") or {}
    slot = result.get("id_slot")
    return TopK(ids, logprobs, int(timings["prompt_n"]) if "prompt_n" in timings else None,
                float(timings.get("prompt_ms", 0.0)), float(timings.get("predicted_ms", 0.0)),
                slot if isinstance(slot, int) and slot >= 0 else None)


def _legacy_top(logprobs: dict, usage: Any) -> TopK:
    """OpenAI's legacy shape: ``top_logprobs[0]`` maps each token (``token_id:N``) to its log-probability."""
    try:
        top = logprobs["top_logprobs"][0]
        pairs = [(_token_id(token), value) for token, value in top.items()]
    except (KeyError, IndexError, TypeError, AttributeError) as error:
        raise AnswerError("no logprobs.top_logprobs[0]") from error
    pairs.sort(key=lambda pair: -pair[1])
    ids = np.fromiter((token for token, _ in pairs), dtype=np.int64, count=len(pairs))
    values = np.fromiter((value for _, value in pairs), dtype=np.float64, count=len(pairs))
    read = None
    if isinstance(usage, dict) and isinstance(usage.get("prompt_tokens"), int):
        cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
        read = usage["prompt_tokens"] - int(cached)
    return TopK(ids, values, read)


def _token_id(token: str) -> int:
    found = _TOKEN_ID.match(token)
    if found is None:
        raise TokenTexts(f"names its likeliest tokens by their text ({token!r}), not by their ids (token_id:N, as "
                         "vLLM writes them for return_tokens_as_token_ids)")
    return int(found.group(1))


def logprobs_cap(message: str) -> int | None:
    """The largest K a server allows, from its refusal of a larger one (vLLM: ``--max-logprobs``): the
    smallest number the refusal names (it names the K asked and the cap).

    >>> logprobs_cap("Requested sample logprobs of 512, which is greater than max allowed: 20")
    20
    >>> logprobs_cap("model not found") is None
    True
    """
    if "logprob" not in message.lower():
        return None
    numbers = [int(number) for number in _NUMBER.findall(message)]
    return min(numbers) if numbers else None
