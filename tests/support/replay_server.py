"""A server that answers with an engine's recorded answers (``tests/engine/recorded/*.json``), for protocol tests.

vLLM and SGLang need a GPU stack this machine does not have; what the
client must handle of them is their answers. A recording maps ``"METHOD
/path"`` to the answers of that request in turn (``{"status", "body"}``);
the last one repeats, a path not recorded is answered 404 as FastAPI does.
Every request's body is kept (`ReplayServer.requests`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.support.json_server import JSONServer

RECORDED = Path(__file__).resolve().parent.parent / "engine" / "recorded"


class ReplayServer(JSONServer):
    """``with ReplayServer("vllm") as server: server.url``"""

    def __init__(self, name: str) -> None:
        super().__init__(self.answer)
        self.recording = json.loads((RECORDED / f"{name}.json").read_text())
        self.requests: list[tuple[str, Any]] = []
        """Every request: ``"METHOD /path"`` and its JSON body."""
        self._turns: dict[str, int] = {}

    def answer(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        request = f"{method} {path}"
        self.requests.append((request, body))
        answers = self.recording["answers"].get(request)
        if not answers:
            return 404, {"detail": "Not Found"}
        turn = self._turns.get(request, 0)
        self._turns[request] = turn + 1
        recorded = answers[min(turn, len(answers) - 1)]
        return recorded["status"], recorded["body"]
