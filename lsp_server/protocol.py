"""JSON-RPC checks and the LSP lifecycle over stdio and TCP, so that every request gets an answer.

pygls 2.1.1 leaves a client waiting forever in several cases: its read loop
(``pygls.io_.run_async``) only logs a body whose params do not structure, a
body that is not JSON, or a message without ``"jsonrpc": "2.0"``; it drops
requests after ``shutdown`` without a word and serves requests before
``initialize``; and its header parser loses the next message when a
``Content-Length`` is wrong. This module and `lsp_server.framing` replace
that loop:

- `CheckedProtocol` answers every request with an id: ``ParseError`` for a
  body that is not JSON, ``InvalidRequest`` for what is not a JSON-RPC
  request (and for batches, which LSP does not use, and for requests after
  ``shutdown``), ``ServerNotInitialized`` before ``initialize``,
  ``MethodNotFound``, and ``InvalidParams`` naming the method and the bad
  field. Params are checked strictly (``1.5`` is not a line number, ``5`` is
  not a URI). A bad notification is logged and dropped.
- `serve` reads frames with `lsp_server.framing.FrameDecoder` and hands
  them over in order: each handler starts (up to its first ``await``)
  before the next message is read, so a request sees the documents as they
  were when it came. No exception from one message ends the loop.
- `CheckedLanguageServer` is a pygls `LanguageServer` on both, over stdio
  and TCP.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import os
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO

import attrs
import cattrs
from cattrs.errors import IterableValidationNote
from lsprotocol import types
from pygls.exceptions import (
    JsonRpcException,
    JsonRpcInternalError,
    JsonRpcInvalidParams,
    JsonRpcInvalidRequest,
    JsonRpcParseError,
    JsonRpcServerNotInitialized,
)
from pygls.io_ import StdoutWriter
from pygls.lsp.server import LanguageServer
from pygls.protocol import (
    JsonRPCNotification,
    JsonRPCRequestMessage,
    JsonRPCResponseMessage,
    LanguageServerProtocol,
)

from lsp_server.framing import FrameDecoder, Unparseable

log = logging.getLogger("cpc-lsp.protocol")

STALL_SECONDS = 0.1
"""How long the input may pause inside a frame before the decoder settles it with what it has."""
READ_CHUNK = 1 << 16


# -- checking messages -------------------------------------------------------


def _strict(kind: str, accepts: Callable[[Any], bool]) -> Callable[[Any, type], Any]:
    """A structure hook that refuses JSON values of another kind instead of converting them."""

    def structure(value: Any, target: type) -> Any:
        if not accepts(value):
            raise TypeError(f"expected {kind}, got {_describe_value(value)}")
        return value if target in (int, str, bool, float) else target(value)  # an IntEnum or StrEnum

    return structure


_STRICT_PRIMITIVES: list[tuple[type, Callable[[Any, type], Any]]] = [
    (int, _strict("an integer", lambda value: type(value) is int)),
    (str, _strict("a string", lambda value: isinstance(value, str))),
    (bool, _strict("a boolean", lambda value: isinstance(value, bool))),
    (float, _strict("a number", lambda value: type(value) in (int, float))),
]


def _describe_value(value: Any) -> str:
    kind = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number"
    )
    text = "" if isinstance(value, (dict, list)) else json.dumps(value[:40] if isinstance(value, str) else value)
    return f"{kind} {text[:40]}".rstrip()


def _json_name(attribute: str) -> str:
    """The JSON key of an lsprotocol attribute (``text_document`` -> ``textDocument``, ``from_`` -> ``from``)."""
    first, *rest = attribute.removesuffix("_").split("_")
    return first + "".join(part.title() for part in rest)


def describe_structure_error(error: Exception, message: Any) -> list[str]:
    """Each problem cattrs found structuring ``message``, as ``path: what is wrong`` with JSON names."""
    problems: list[str] = []
    for path, leaf in _leaves(error, []):
        problem = _locate(path, leaf, message)
        if problem not in problems:
            problems.append(problem)
    return problems or [str(error)]


def _leaves(error: Exception, path: list[tuple[str | int, Any]]) -> Iterator[tuple[list[tuple[str | int, Any]], Exception]]:
    if not isinstance(error, cattrs.BaseValidationError):
        yield path, error
        return
    noted, others = error.group_exceptions()
    for inner, note in noted:
        step = note.index if isinstance(note, IterableValidationNote) else _json_name(note.name)
        yield from _leaves(inner, [*path, (step, note.type)])
    for inner in others:
        yield from _leaves(inner, path)


def _locate(path: list[tuple[str | int, Any]], leaf: Exception, message: Any) -> str:
    """Walk the raw message along ``path`` and say what is wrong where it first goes wrong."""
    value, where = message, "$"
    for step, expected in path:
        where += f"[{step}]" if isinstance(step, int) else f".{step}"
        container_ok = isinstance(value, list) if isinstance(step, int) else isinstance(value, dict)
        if not container_ok:
            break
        if isinstance(step, int) and step >= len(value) or isinstance(step, str) and step not in value:
            return f"{where.removeprefix('$.')}: missing"
        value = value[step]
        if attrs.has(expected) and not isinstance(value, dict):
            return f"{where.removeprefix('$.')}: expected an object ({expected.__name__}), got {_describe_value(value)}"
    detail = f"missing {leaf}" if isinstance(leaf, KeyError) else str(leaf) or type(leaf).__name__
    return f"{where.removeprefix('$.')}: {detail}"


def _valid_id(value: Any) -> bool:
    return type(value) is int or isinstance(value, str)


class CheckedProtocol(LanguageServerProtocol):
    """pygls' LSP protocol behind checks that answer every request with an id (see the module docstring)."""

    def __init__(self, server: LanguageServer, converter: cattrs.Converter) -> None:
        for primitive, hook in _STRICT_PRIMITIVES:
            converter.register_structure_hook(primitive, hook)
        super().__init__(server, converter)

    @property
    def initialized(self) -> bool:
        """Whether ``initialize`` was handled (pygls creates the workspace then)."""
        return self._workspace is not None

    def receive(self, item: Any) -> None:
        """Handle one decoded frame; a failure here answers the request instead of escaping."""
        request_id = item.get("id") if isinstance(item, dict) and "method" in item else None
        try:
            self._receive(item)
        except Exception as error:  # one message must not end the read loop
            log.exception("failed to handle a message")
            if _valid_id(request_id):
                self._reply_error(request_id, JsonRpcInternalError(f"{type(error).__name__}: {error}"))

    def _receive(self, item: Any) -> None:
        if isinstance(item, Unparseable):
            self._reply_error(None, JsonRpcParseError(f"Parse error: the message body is not JSON ({item.reason})"))
        elif isinstance(item, list):
            self._reject_batch(item)
        elif not isinstance(item, dict):
            problem = f"a message is a JSON object, got {_describe_value(item)}"
            self._reply_error(None, JsonRpcInvalidRequest(f"Invalid request: {problem}"))
        elif "method" not in item and ("result" in item or "error" in item):
            self._receive_response(item)
        else:
            self._receive_call(item)

    def _receive_call(self, message: dict[str, Any]) -> None:
        """A request (with an id) or a notification (without)."""
        is_request = "id" in message
        problem = _envelope_problem(message)
        if problem is not None:
            reply_id = message["id"] if _valid_id(message.get("id")) else None
            self._reply_error(reply_id, JsonRpcInvalidRequest(f"Invalid request: {problem}"))
            return
        method = message["method"]
        try:
            self._check_call(method, is_request, message.get("params"))
            typed = self.structure_message(message)
        except JsonRpcException as error:
            if is_request:
                self._reply_error(message["id"], error)
            else:
                # Logged, not shown: it is the client's bug, and the text it quotes may be the user's code.
                log.warning("dropped notification: %s", error.message)
            return
        self.handle_message(typed)

    def _check_call(self, method: str, is_request: bool, params: Any) -> None:
        """Raise what the client must hear: the lifecycle (initialize first, nothing but exit after shutdown), the kind, the params' shape."""
        if method == types.EXIT:
            pass
        elif self._shutdown:
            raise JsonRpcInvalidRequest(f"Invalid request: {method} after shutdown: the server only accepts exit now")
        elif method == types.INITIALIZE and self.initialized:
            raise JsonRpcInvalidRequest("Invalid request: initialize was already received")
        elif method != types.INITIALIZE and not self.initialized:
            raise JsonRpcServerNotInitialized(f"Server not initialized: {method} before initialize")
        message_type = self.get_message_type(method)
        if message_type is not None and is_request != ("id" in attrs.fields_dict(message_type)):
            kind = "a request: it needs an id" if not is_request else "a notification: send it without an id"
            raise JsonRpcInvalidRequest(f"Invalid request: {method} is {kind}")
        if params is not None and not isinstance(params, (dict, list)):
            raise JsonRpcInvalidParams(f"{method}: invalid params: params must be an object or an array, got {_describe_value(params)}")

    def _reject_batch(self, batch: list[Any]) -> None:
        error = JsonRpcInvalidRequest(
            "Invalid request: JSON-RPC batches are not part of the Language Server Protocol; send each message in its own frame"
        )
        ids = [m["id"] for m in batch if isinstance(m, dict) and "method" in m and _valid_id(m.get("id"))]
        for message_id in ids or [None]:
            self._reply_error(message_id, error)

    def _receive_response(self, message: dict[str, Any]) -> None:
        """A client's answer to one of the server's requests (a progress token, ...): logged when it is malformed."""
        if message.get("jsonrpc") != "2.0" or not _valid_id(message.get("id")):
            log.warning("dropped a response that is not JSON-RPC 2.0 with a valid id: %.200r", message)
            return
        try:
            self.handle_message(self.structure_message(message))
        except JsonRpcException as error:
            log.warning("dropped the response to request %r: %s", message["id"], error.message)

    def structure_message(self, data: dict[str, Any]) -> Any:
        """``data`` as its lsprotocol type; ``JsonRpcInvalidParams`` saying which field is wrong."""
        if "method" not in data:
            name = f"the response to {data['id']!r}"
            fallback = types.ResponseErrorMessage if "error" in data else JsonRPCResponseMessage
            message_type = self._result_types.pop(data["id"], None) or fallback
        else:
            name = data["method"]
            message_type = self.get_message_type(name)
            if message_type is None:  # a custom method: JSON-RPC lets params be omitted
                message_type = JsonRPCRequestMessage if "id" in data else JsonRPCNotification
                data = {"params": None, **data}
        try:
            return self._converter.structure(data, message_type)
        except Exception as error:  # lsprotocol's own hooks raise plain TypeErrors and KeyErrors too
            problems = describe_structure_error(error, data)
            raise JsonRpcInvalidParams(f"{name}: invalid params: {'; '.join(problems)}") from error

    def _reply_error(self, message_id: int | str | None, error: JsonRpcException) -> None:
        log.warning("answering %r with error %d: %s", message_id, error.code, error.message)
        if message_id is None:  # lsprotocol's ResponseErrorMessage would leave out a null id
            self._send_data({"jsonrpc": "2.0", "id": None, "error": {"code": error.code, "message": error.message}})
        else:
            self._send_response(message_id, error=error.to_response_error())


def _envelope_problem(message: dict[str, Any]) -> str | None:
    """What makes ``message`` no JSON-RPC 2.0 request or notification, if anything."""
    if "id" in message and not _valid_id(message["id"]):
        return f"the id must be an integer or a string, got {_describe_value(message['id'])}"
    if "jsonrpc" not in message:
        return 'the "jsonrpc": "2.0" member is missing'
    if message["jsonrpc"] != "2.0":
        return f'"jsonrpc" must be "2.0", got {_describe_value(message["jsonrpc"])}'
    if "method" not in message:
        return 'the "method" member is missing'
    if not isinstance(message["method"], str):
        return f'"method" must be a string, got {_describe_value(message["method"])}'
    return None


# -- transport -------------------------------------------------------------------


async def serve(chunks: asyncio.Queue[bytes], protocol: CheckedProtocol, stop: threading.Event) -> None:
    """Decode frames from ``chunks`` (``b""`` ends the input) and hand each to ``protocol``."""
    decoder = FrameDecoder()
    while not stop.is_set():
        stalled = False
        try:
            chunk = await asyncio.wait_for(chunks.get(), STALL_SECONDS if decoder.pending else None)
        except asyncio.TimeoutError:
            stalled = True
        else:
            if not chunk:
                break
            decoder.feed(chunk)
        try:
            for item in decoder.decode(stalled):
                protocol.receive(item)
                # Let the handler just started run up to its first await before the next message is
                # handled: a request then reads the document as it was when the request came.
                await asyncio.sleep(0)
        except Exception:  # a decoder bug must not end the session either
            log.exception("framing failed; dropping the buffered input")
            decoder = FrameDecoder()
    log.info("input closed")


def _pump_stream(stream: BinaryIO, loop: asyncio.AbstractEventLoop, chunks: asyncio.Queue[bytes]) -> None:
    """Read ``stream`` on its own daemon thread, so that a read blocked at exit holds nothing up.

    A file with a descriptor is read with `os.read`: a daemon thread blocked
    in a buffered reader holds its lock, and Python aborts at exit on it.
    """
    try:
        descriptor = stream.fileno()
    except (AttributeError, OSError, ValueError):
        read = getattr(stream, "read1", stream.read)
    else:
        read = functools.partial(os.read, descriptor)
    chunk = b"x"
    while chunk:
        try:
            chunk = read(READ_CHUNK)
        except (OSError, ValueError):
            chunk = b""
        try:
            loop.call_soon_threadsafe(chunks.put_nowait, chunk)
        except RuntimeError:  # the loop is closed: the server is exiting
            return


class CheckedLanguageServer(LanguageServer):
    """A pygls `LanguageServer` on `CheckedProtocol`, reading with `FrameDecoder` over stdio and TCP."""

    def __init__(self, name: str, version: str, protocol_cls: type[CheckedProtocol] = CheckedProtocol,
                 notebook_document_sync: types.NotebookDocumentSyncOptions | None = None) -> None:
        super().__init__(name, version, notebook_document_sync=notebook_document_sync, protocol_cls=protocol_cls)

    def start_io(self, stdin: BinaryIO | None = None, stdout: BinaryIO | None = None) -> None:
        self._stop_event = threading.Event()
        self.protocol.set_writer(StdoutWriter(stdout or sys.stdout.buffer))

        async def run() -> None:
            chunks: asyncio.Queue[bytes] = asyncio.Queue()
            reader = threading.Thread(
                target=_pump_stream, args=(stdin or sys.stdin.buffer, asyncio.get_running_loop(), chunks), daemon=True
            )
            reader.start()
            await serve(chunks, self.protocol, self._stop_event)

        try:
            asyncio.run(run())
        except BrokenPipeError:
            log.error("the client closed the connection")
        except KeyboardInterrupt:
            pass
        finally:
            self.shutdown()

    def start_tcp(self, host: str, port: int) -> None:
        self._stop_event = stop = threading.Event()

        async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self.protocol.set_writer(writer)
            chunks: asyncio.Queue[bytes] = asyncio.Queue()

            async def pump() -> None:
                while chunk := await reader.read(READ_CHUNK):
                    chunks.put_nowait(chunk)
                chunks.put_nowait(b"")

            pumping = asyncio.ensure_future(pump())
            await serve(chunks, self.protocol, stop)
            pumping.cancel()
            self.shutdown()

        async def listen() -> None:
            self._server = await asyncio.start_server(connection, host, port)
            log.info("serving on %s:%s", host, port)
            async with self._server:
                await self._server.serve_forever()

        try:
            asyncio.run(listen())
        except asyncio.CancelledError:
            log.debug("the TCP server was cancelled")
