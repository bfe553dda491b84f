"""JSON over HTTP to an inference server: a keep-alive connection per thread, the key, TLS, and what a failure means.

`cpc.remote.RemoteLM` speaks to its server through one `ServerConnection`,
which owns the wire and nothing of the model:

- **Connections.** Each thread keeps its own keep-alive connection (the
  worker's calls, and a pool's requests, never wait on each other's), and a
  greedy run's stream gets another (`open_stream`, `hang_up`). A connection the server
  closed while idle is replaced at once; other faults are retried with
  backoff (``retries``, ``backoff_s``) and then raise `RemoteUnavailable`,
  which says what happened and where. A timeout is not retried: a slow
  server only gets slower with more requests.
- **The key.** With a key (`API_KEY_ENV` in the environment: never a
  setting, never in a log or a message), every request carries it as
  ``Authorization: Bearer``, as llama-server's, vLLM's and SGLang's
  ``--api-key`` expect. A refused key (HTTP 401 or 403) raises
  `RemoteRefused`, which says where the key is set; an answer that echoes
  the key has it masked.
- **TLS.** ``https://`` addresses are verified against the system's
  certificate authorities and ``ca_file`` (a company's own CA); there is no
  way to turn verification off.

    >>> from cpc.remote import RemoteOptions
    >>> connection = ServerConnection("http://127.0.0.1:9/", RemoteOptions(retries=0, api_key=None), lambda: "a server")
    >>> connection.request("GET", "/props")
    Traceback (most recent call last):
    cpc.connection.RemoteUnavailable: a server refused the connection (is it running?) after 1 tries -- suggestions resume when it answers
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from cpc.model_files import ModelError

if TYPE_CHECKING:
    from cpc.remote import RemoteOptions

API_KEY_ENV = "CPC_REMOTE_API_KEY"
"""The environment variable whose value is sent as the server's key (VS Code sets it from its secret storage)."""
WHERE_THE_KEY_GOES = (f"set the server's key in {API_KEY_ENV} where the editor starts (VS Code: the command "
                      "\"CPC: Set Remote API Key\")")


class RemoteUnavailable(RuntimeError):
    """The server did not answer (refused, dropped, timed out, 5xx): says where and what happened."""


class RemoteRefused(ModelError):
    """The server refused this client's key, or asked for one it lacks (HTTP 401 or 403): final for the client."""


class RemoteMismatch(ModelError):
    """The server serves another model than the local vocabulary file, or cannot serve our states."""

    def __init__(self, text: str, server_message: str = "") -> None:
        super().__init__(text)
        self.server_message = server_message
        """What the server said, where it refused a request."""


@dataclass(frozen=True)
class Exchange:
    """One request's decoded answer, and what it cost."""

    answer: dict
    http_s: float
    """From sending the request to reading its whole answer."""
    parse_s: float
    """Decoding its JSON."""
    bytes: int
    """Answer bytes read."""


class ServerConnection:
    """JSON requests to one server (``url``: its address, perhaps with a path), as ``options`` says (timeout,
    retries, key, CA file); ``name()`` names the server in messages (``llama-server at http://…``)."""

    def __init__(self, url: str, options: RemoteOptions, name: Callable[[], str]) -> None:
        parts = urlsplit(url)
        self.url = url.rstrip("/")
        self.options = options
        self._name = name
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port or (443 if self._https else 80)
        self._base = parts.path.rstrip("/")
        self._tls = _tls_context(options.ca_file) if self._https else None
        self._local = threading.local()

    def request(self, method: str, path: str, body: dict | None = None) -> Exchange:
        """One JSON request, retried with backoff on a refused or dropped connection and on a 5xx answer."""
        payload = None if body is None else json.dumps(body).encode()
        headers = self._headers(json_body=payload is not None)
        tries = 1 + max(0, self.options.retries)
        attempt = 0
        while True:
            reused = getattr(self._local, "connection", None) is not None
            try:
                connection = self._connection()
                began = time.perf_counter()
                connection.request(method, self._base + path, body=payload, headers=headers)
                response = connection.getresponse()
                data = response.read()
                answered = time.perf_counter()
            except (TimeoutError, socket.timeout) as error:
                self._drop_connection()
                # No retry: a slow server only gets slower with more requests.
                raise RemoteUnavailable(
                    f"{self._name()} did not answer {path} within {self.options.timeout_s:g} s "
                    "(overloaded, or stopped?) -- suggestions resume when it answers"
                ) from error
            except ssl.SSLCertVerificationError as error:
                self._drop_connection()
                # No retry: the same certificate comes back. The next call tries again (it may be renewed).
                raise RemoteUnavailable(
                    f"{self.url} presented a certificate this client does not trust ({error.verify_message}) -- "
                    "set `remoteCaFile` to the PEM file of the authority that signed it"
                ) from error
            except (OSError, http.client.HTTPException) as error:
                self._drop_connection()
                if reused and isinstance(error, _DROPPED):
                    continue  # the server closed an idle keep-alive connection: a new one, at once
                problem = _describe(error)
            else:
                if response.status < 400:
                    try:
                        decoded = json.loads(data)
                    except ValueError as error:
                        raise RemoteMismatch(
                            f"{self.url}{path} answered something that is not JSON: is it a model server?"
                        ) from error
                    return Exchange(decoded, answered - began, time.perf_counter() - answered, len(data))
                problem = self.refusal(path, response.status, data)
            attempt += 1
            if attempt == tries:
                raise RemoteUnavailable(
                    f"{self._name()} {problem} after {tries} tries -- suggestions resume when it answers"
                )
            time.sleep(self.options.backoff_s * 2 ** (attempt - 1))

    def open_stream(self, path: str, body: dict) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        """Send a streaming request on this thread's stream connection; the connection and its answer, to be read
        line by line. Read to its end, the connection serves the next stream; else `hang_up` it."""
        payload = json.dumps(body).encode()
        while True:
            reused = getattr(self._local, "stream", None) is not None
            connection = self._local.stream = self._local.stream if reused else self._new_connection()
            try:
                connection.request("POST", self._base + path, body=payload, headers=self._headers(json_body=True))
                response = connection.getresponse()
                break
            except (OSError, http.client.HTTPException) as error:
                self.hang_up(connection)
                if reused and isinstance(error, _DROPPED):
                    continue  # the server closed the idle keep-alive connection (after 5 s): a new one, at once
                raise RemoteUnavailable(f"{self._name()} {_describe(error)}") from error
        if response.status >= 400:
            problem = self.refusal(path, response.status, response.read())
            raise RemoteUnavailable(f"{self._name()} {problem}")
        return connection, response

    def hang_up(self, connection: http.client.HTTPConnection) -> None:
        """Close a stream's connection while its answer may still stream: the server sees it closed and stops,
        and a thread blocked reading it wakes up."""
        if getattr(self._local, "stream", None) is connection:
            self._local.stream = None
        if connection.sock is not None:
            try:
                connection.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        connection.close()

    def refusal(self, path: str, status: int, data: bytes) -> str:
        """Raise what an error answer means for the client (a refused key, a wrong server or request); for a
        5xx answer, return what happened, for a retry."""
        message = _error_message(data)
        if self.options.api_key:  # a server or proxy that echoes the request must not put the key in a log
            message = message.replace(self.options.api_key, "****")
        if status in (401, 403):
            given = "this client's key" if self.options.api_key else "requests without a key"
            raise RemoteRefused(f"{self._name()} refused {given} (HTTP {status} {message}) -- {WHERE_THE_KEY_GOES}")
        if status == 404:
            raise RemoteMismatch(f"{self.url} has no {path} ({message}): is it a model server?")
        if status < 500:
            raise RemoteMismatch(f"{self._name()} refused {path}: HTTP {status} {message}", message)
        return f"answered HTTP {status} ({message})"

    def _headers(self, *, json_body: bool) -> dict[str, str]:
        headers = {"Content-Type": "application/json"} if json_body else {}
        if self.options.api_key:
            headers["Authorization"] = f"Bearer {self.options.api_key}"
        return headers

    def _connection(self) -> http.client.HTTPConnection:
        """This thread's keep-alive connection."""
        connection = getattr(self._local, "connection", None)
        if connection is None:
            connection = self._local.connection = self._new_connection()
        return connection

    def _new_connection(self) -> http.client.HTTPConnection:
        if self._https:
            return http.client.HTTPSConnection(self._host, self._port, timeout=self.options.timeout_s,
                                               context=self._tls)
        return http.client.HTTPConnection(self._host, self._port, timeout=self.options.timeout_s)

    def _drop_connection(self) -> None:
        connection = getattr(self._local, "connection", None)
        if connection is not None:
            connection.close()
            self._local.connection = None


def _tls_context(ca_file: str | None) -> ssl.SSLContext:
    """Verification against the system's certificate authorities, and those of ``ca_file`` where one is named."""
    context = ssl.create_default_context()
    if ca_file:
        try:
            context.load_verify_locations(cafile=os.path.expanduser(ca_file))
        except (OSError, ssl.SSLError) as error:
            raise ModelError(f"remoteCaFile {ca_file!r} cannot be read as PEM certificates ({error})") from error
    return context


_DROPPED = (ConnectionResetError, BrokenPipeError, http.client.RemoteDisconnected, http.client.BadStatusLine)


def _describe(error: BaseException) -> str:
    if isinstance(error, ConnectionRefusedError):
        return "refused the connection (is it running?)"
    if isinstance(error, _DROPPED):
        return "dropped the connection mid-request (did it stop?)"
    if isinstance(error, socket.gaierror):
        return f"cannot be found ({error.strerror})"
    return f"failed: {error}"


def _error_message(data: bytes) -> str:
    """The message of an error answer: llama-server's ``{"error": {"message": ...}}``, vLLM's
    ``{"object": "error", "message": ...}``, FastAPI's ``{"detail": ...}``; else the text."""
    try:
        answer = json.loads(data)
    except ValueError:
        return data[:200].decode("utf-8", "replace")
    if not isinstance(answer, dict):
        return str(answer)[:200]
    error = answer.get("error", answer)
    if isinstance(error, dict):
        return str(error.get("message") or error.get("detail") or error)
    return str(error)
