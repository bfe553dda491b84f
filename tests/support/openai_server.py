"""A server that speaks ``/v1/completions`` the way vLLM does, over an in-process model, for protocol tests.

vLLM needs a GPU stack this machine has not; what the client must handle of
it is its protocol, and that is what this server reproduces, with the real
model's numbers behind it: ``/v1/models``, vLLM's ``/tokenize``
(``{"model", "prompt", "add_special_tokens"}``), and ``/v1/completions``
with a prompt per token-id list, ``logprobs: K`` answered in OpenAI's legacy
shape (``top_logprobs`` maps, tokens written ``token_id:N``), ``usage``, and
vLLM's refusal of a K over ``--max-logprobs`` (its error object and
message). No slots, no ``/props``: an engine that caches prefixes on its own.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from cpc.lm import LanguageModel
from cpc.tokenizer import Tokenizer
from tests.support.json_server import JSONServer

MODEL_ID = "google/gemma-3-270m"


class OpenAIShapeServer(JSONServer):
    """``with OpenAIShapeServer(lm, tokenizer, max_logprobs=20) as server: server.url``"""

    def __init__(self, lm: LanguageModel, tokenizer: Tokenizer, *, max_logprobs: int = 20) -> None:
        super().__init__(self.answer)
        self.lm = lm
        self.tokenizer = tokenizer
        self.max_logprobs = max_logprobs
        self.requests: list[dict] = []
        """Every request body it received."""
        self._lock = threading.Lock()

    def answer(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        if method == "GET" and path == "/v1/models":
            return 200, {"object": "list", "data": [{"id": MODEL_ID, "object": "model", "max_model_len": 32768}]}
        if method == "POST":
            self.requests.append(body)
            if path == "/tokenize":
                tokens = self.tokenizer.encode(body["prompt"].encode("utf-8"))
                return 200, {"tokens": list(tokens), "count": len(tokens), "max_model_len": 32768}
            if path == "/v1/completions":
                return self.completions(body)
        return 404, {"detail": "Not Found"}

    def completions(self, body: dict) -> tuple[int, dict]:
        k = body.get("logprobs") or 0
        if k > self.max_logprobs:
            return 400, {"object": "error", "type": "BadRequestError", "param": None, "code": 400,
                         "message": f"Requested sample logprobs of {k}, which is greater than max allowed: "
                                    f"{self.max_logprobs}"}
        prompts = body["prompt"]
        with self._lock:  # the model is one sequence of calls
            rows = self.lm.next_logprobs([tuple(prompt) for prompt in prompts])
        choices = []
        for index, row in enumerate(rows):
            top = np.argsort(-row)[:k].tolist()
            token = f"token_id:{int(np.argmax(row))}"
            choices.append({
                "index": index, "text": "", "finish_reason": "length", "stop_reason": None,
                "logprobs": {"text_offset": [0], "tokens": [token], "token_logprobs": [float(row.max())],
                             "top_logprobs": [{f"token_id:{t}": float(row[t]) for t in top}]},
            })
        prompt_tokens = sum(len(prompt) for prompt in prompts)
        return 200, {"id": "cmpl-test", "object": "text_completion", "created": 0, "model": MODEL_ID,
                     "choices": choices, "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": len(prompts),
                                                   "total_tokens": prompt_tokens + len(prompts)}}
