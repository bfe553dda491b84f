"""A local HTTP server whose every answer is JSON, for the stand-ins of model servers in the tests."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Respond = Callable[[str, str, Any], tuple[int, Any]]
"""``(method, path, body) -> (status, answer)``: the body is the request's JSON (None for a GET)."""


class JSONServer:
    """``with JSONServer(respond) as server: server.url``"""

    def __init__(self, respond: Respond) -> None:
        self.respond = respond
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._http.server_address[1]}"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:
                self._reply(None)

            def do_POST(self) -> None:
                self._reply(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))

            def _reply(self, body: Any) -> None:
                status, answer = server.respond(self.command, self.path, body)
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler

    def __enter__(self) -> JSONServer:
        threading.Thread(target=self._http.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._http.shutdown()
        self._http.server_close()
