"""A raw LSP client for tests: the real `cpc-lsp` as a subprocess, spoken to in bytes over stdin/stdout.

pytest-lsp frames every message correctly; the protocol tests and the fuzzer
need what a buggy client sends too (broken JSON, a wrong Content-Length,
batches), so this client writes bytes and frames them itself. A thread reads
the server's output: it answers the server's own requests (progress tokens)
with ``null`` and files responses by id.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

SERVER = [sys.executable, "-m", "lsp_server", "--model", "default"]
SETTINGS = {"debounceMs": 0, "maxTokens": 8}
NULL_ID = "null"
"""Where answers with ``"id": null`` (to messages whose id could not be read) are filed."""


def frame(message: Any, length_change: int = 0, header: str = "Content-Length") -> bytes:
    """``message`` (bytes as they are, anything else as JSON) behind a header whose length is off by ``length_change``."""
    body = message if isinstance(message, bytes) else json.dumps(message).encode()
    return f"{header}: {len(body) + length_change}\r\n\r\n".encode() + body


def request(message_id: int | str, method: str, params: Any = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": message_id, "method": method}
    if params is not None:
        message["params"] = params
    return message


def notification(method: str, params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": method, "params": params}


def inline_params(uri: str, line: int, character: int) -> dict[str, Any]:
    return {
        "textDocument": {"uri": uri},
        "position": {"line": line, "character": character},
        "context": {"triggerKind": 2},
    }


class NoAnswer(AssertionError):
    """The server did not answer a request in time."""


class RawServer:
    """One `cpc-lsp` process on the default model; ``log`` receives its stderr."""

    def __init__(self, log: Path, args: tuple[str, ...] = ()) -> None:
        self.log = log
        self._log_file = open(log, "wb")
        self.process = subprocess.Popen([*SERVER, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log_file)
        self._answers: dict[Any, list[tuple[float, dict[str, Any]]]] = {}
        self.notifications: list[dict[str, Any]] = []
        self.output_errors: list[str] = []
        """Server output that was not a well-framed JSON message."""
        self._arrived = threading.Condition()
        self._write_lock = threading.Lock()
        self._ids = itertools.count(1)
        self._closed = False
        threading.Thread(target=self._read, daemon=True).start()

    # -- output ------------------------------------------------------------------

    def _read(self) -> None:
        stream = self.process.stdout
        assert stream is not None
        try:
            while True:
                length = None
                while (line := stream.readline()) not in (b"\r\n", b""):
                    name, _, value = line.decode("ascii").partition(":")
                    if name.lower() == "content-length":
                        length = int(value)
                if not line:
                    break
                if length is None:
                    raise ValueError("a frame without Content-Length")
                body = stream.read(length)
                self._file(json.loads(body))
        except Exception as error:  # the test that reads output_errors reports it
            self.output_errors.append(f"{type(error).__name__}: {error}")
        finally:
            with self._arrived:
                self._closed = True
                self._arrived.notify_all()

    def _file(self, message: dict[str, Any]) -> None:
        if "method" in message and "id" in message:  # the server asks something (a progress token): say yes
            reply = {"jsonrpc": "2.0", "id": message["id"], "result": None}
            # from another thread: this one must keep draining the server's output while a big write is under way
            threading.Thread(target=self.send, args=(reply,), daemon=True).start()
        with self._arrived:
            if "method" in message:
                self.notifications.append(message)
            else:
                key = NULL_ID if message.get("id") is None else message["id"]
                self._answers.setdefault(key, []).append((time.monotonic(), message))
            self._arrived.notify_all()

    def answer(self, message_id: Any, timeout: float = 30) -> dict[str, Any]:
        """The next answer to ``message_id`` (`NULL_ID` for answers with a null id)."""
        return self.answer_with_time(message_id, timeout)[1]

    def answer_with_time(self, message_id: Any, timeout: float = 30) -> tuple[float, dict[str, Any]]:
        """The next answer to ``message_id`` and the `time.monotonic` it arrived at."""
        deadline = time.monotonic() + timeout
        with self._arrived:
            while not self._answers.get(message_id):
                left = deadline - time.monotonic()
                if left <= 0 or self._closed:
                    why = "the server closed its output" if self._closed else f"within {timeout} s"
                    raise NoAnswer(f"no answer to id {message_id!r} ({why}); server log:\n{self.log_tail()}")
                self._arrived.wait(left)
            return self._answers[message_id].pop(0)

    def answered(self, message_id: Any) -> bool:
        with self._arrived:
            return bool(self._answers.get(message_id))

    # -- input ---------------------------------------------------------------------

    def send_bytes(self, data: bytes) -> None:
        with self._write_lock:
            assert self.process.stdin is not None
            self.process.stdin.write(data)
            self.process.stdin.flush()

    def send(self, message: Any, length_change: int = 0) -> None:
        self.send_bytes(frame(message, length_change))

    def next_id(self) -> int:
        return next(self._ids)

    def request(self, method: str, params: Any = None) -> int:
        """Send a request; its id."""
        message_id = self.next_id()
        self.send(request(message_id, method, params))
        return message_id

    def call(self, method: str, params: Any = None, timeout: float = 30) -> dict[str, Any]:
        """Send a request and wait for the answer (the whole response message)."""
        return self.answer(self.request(method, params), timeout)

    def notify(self, method: str, params: Any) -> None:
        self.send(notification(method, params))

    # -- the session -----------------------------------------------------------------

    def initialize(self, settings: dict[str, Any] | None = None) -> dict[str, Any]:
        answer = self.call("initialize", {"processId": None, "capabilities": {}, "initializationOptions": settings or SETTINGS})
        self.notify("initialized", {})
        return answer

    def status(self, timeout: float = 30) -> dict[str, Any]:
        answer = self.call("cpc/status", {}, timeout)
        assert "result" in answer, answer
        return answer["result"]

    def wait_until_ready(self, timeout: float = 180) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            state = self.status()
            if state["ready"] or state["error"]:
                assert state["ready"], state["error"]
                return state
            time.sleep(0.1)
        raise NoAnswer(f"the model did not load in {timeout} s; server log:\n{self.log_tail()}")

    def open(self, uri: str, text: str, version: int = 1) -> None:
        self.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": version, "text": text}})

    def document_text(self, uri: str, timeout: float = 60) -> dict[str, Any]:
        """The server's copy of ``uri`` (``{"text", "version"}``), or the error answer."""
        return self.call("cpc/documentText", {"uri": uri}, timeout)

    def alive(self) -> bool:
        return self.process.poll() is None

    def peak_rss_kib(self) -> int:
        """The server's peak resident memory (``VmHWM``)."""
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
        raise AssertionError("no VmHWM in /proc")

    def log_tail(self, lines: int = 30) -> str:
        self._log_file.flush()
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def close(self) -> int:
        """Shut the server down the LSP way (or kill it when it does not listen); its exit code."""
        if self.alive():
            try:
                self.call("shutdown", timeout=10)
                self.notify("exit", None)
                return self.process.wait(timeout=30)
            except (NoAnswer, OSError, subprocess.TimeoutExpired):
                self.process.kill()
        code = self.process.wait()
        self._log_file.close()
        return code

    def __enter__(self) -> RawServer:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.alive():
            self.process.kill()
            self.process.wait()
        self._log_file.close()
