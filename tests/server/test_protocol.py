"""Every request is answered: the real `cpc-lsp` over stdio, fed malformed messages and frames as raw bytes.

Each case checks the error code (and that the message says what is wrong),
then that the server still answers ``cpc/status`` and an inline completion.
The decoder's own property (any chunking of a stream of frames decodes to
the same messages) is checked without a server at the end.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lsp_server.framing import FrameDecoder
from tests.support.raw_lsp import NULL_ID, RawServer, frame, inline_params, notification, request
from tests.support.strategies import examples

PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, NOT_INITIALIZED = -32700, -32600, -32601, -32602, -32002
URI = "file:///protocol.py"
TEXT = "class Box:\n    def __init__(self, width):\n        self.width = wid\n"
CURSOR = (2, len("        self.width = wid"))
INLINE = "textDocument/inlineCompletion"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    with RawServer(tmp_path_factory.mktemp("protocol") / "server.log") as raw:
        assert "result" in raw.initialize()
        raw.wait_until_ready()
        raw.open(URI, TEXT)
        yield raw
        assert raw.close() == 0
        assert raw.output_errors == []


def assert_still_serving(server: RawServer) -> None:
    """A valid ``cpc/status`` and a valid inline completion are still answered, with results."""
    assert server.status()["ready"]
    answer = server.call(INLINE, inline_params(URI, *CURSOR), timeout=60)
    items = answer["result"]["items"]
    assert items and items[0]["insertText"].startswith("wid"), answer
    assert server.alive()


def error_of(answer: dict[str, Any], code: int, *mentions: str) -> str:
    assert answer.get("jsonrpc") == "2.0" and "result" not in answer, answer
    assert answer["error"]["code"] == code, answer
    message = answer["error"]["message"]
    for text in mentions:
        assert text in message, f"{text!r} not in {message!r}"
    return message


GOOD = inline_params(URI, *CURSOR)
BAD_PARAMS = [
    pytest.param({**GOOD, "position": "2:24"}, ["params.position", "expected an object (Position), got a string"], id="position-a-string"),
    pytest.param({**GOOD, "position": {"line": -1, "character": 3}}, ["params.position", "was -1"], id="position-negative"),
    pytest.param({**GOOD, "position": {"line": 2, "character": 1.5}}, ["params.position.character", "expected an integer"], id="position-a-float"),
    pytest.param({k: v for k, v in GOOD.items() if k != "position"}, ["params.position: missing"], id="position-missing"),
    pytest.param({**GOOD, "textDocument": URI}, ["params.textDocument", "expected an object (TextDocumentIdentifier)"], id="text-document-a-string"),
    pytest.param({**GOOD, "textDocument": {"uri": 5}}, ["params.textDocument.uri", "expected a string, got a number 5"], id="uri-a-number"),
    pytest.param({**GOOD, "context": {"triggerKind": 9}}, ["params.context.triggerKind"], id="trigger-kind-unknown"),
    pytest.param(None, ["params: missing"], id="params-missing"),
    pytest.param("x", ["params must be an object or an array"], id="params-a-string"),
]


@pytest.mark.parametrize("params, mentions", BAD_PARAMS)
def test_invalid_params_are_answered_naming_the_method_and_the_field(server: RawServer, params: Any, mentions: list[str]):
    message_id = server.next_id()
    server.send(request(message_id, INLINE, params))
    error_of(server.answer(message_id), INVALID_PARAMS, INLINE, *mentions)
    assert_still_serving(server)


def test_null_params_are_invalid(server: RawServer):
    server.send({"jsonrpc": "2.0", "id": "null-params", "method": INLINE, "params": None})
    error_of(server.answer("null-params"), INVALID_PARAMS, INLINE, "params")
    assert_still_serving(server)


def test_unknown_method(server: RawServer):
    error_of(server.call("cpc/noSuchThing", {}), METHOD_NOT_FOUND, "cpc/noSuchThing")
    assert_still_serving(server)


def test_custom_requests_may_leave_params_out(server: RawServer):
    server.send({"jsonrpc": "2.0", "id": "bare-status", "method": "cpc/status"})
    assert server.answer("bare-status")["result"]["ready"]


def test_a_notification_with_bad_params_is_dropped_and_loses_nothing(server: RawServer):
    before = server.document_text(URI)["result"]
    server.notify("textDocument/didChange", {"textDocument": {"uri": URI, "version": 99}, "contentChanges": [{"range": "all", "text": "x"}]})
    server.notify("textDocument/didChange", None)
    server.notify("$/cancelRequest", {"id": 123456})  # an id that was never sent
    assert server.document_text(URI)["result"] == before
    assert_still_serving(server)


def test_notebook_messages_for_nothing_open_are_dropped_and_lose_nothing(server: RawServer):
    notebook = "file:///lab%20notes.ipynb"
    cell = {"uri": "vscode-notebook-cell:/lab%20notes.ipynb#a", "languageId": "python", "version": 1, "text": "import os\n"}
    server.notify("notebookDocument/didChange", {"notebookDocument": {"uri": "file:///never.ipynb", "version": 2},
                                                 "change": {"cells": {"textContent": [
                                                     {"document": {"uri": "c:never", "version": 2}, "changes": [{"text": "x"}]}]}}})
    server.notify("notebookDocument/didClose", {"notebookDocument": {"uri": "file:///never.ipynb"},
                                                "cellTextDocuments": [{"uri": "c:never"}]})
    server.notify("notebookDocument/didOpen", {"notebookDocument": {"uri": notebook, "notebookType": "jupyter-notebook",
                                                                    "version": 1, "cells": [{"kind": 2, "document": cell["uri"]},
                                                                                            {"kind": 2, "document": "c:unsent"}]},
                                               "cellTextDocuments": [cell]})
    for change in ({"textContent": [{"document": {"uri": "c:never", "version": 2}, "changes": [{"text": "x"}]}]},
                   {"structure": {"array": {"start": 9, "deleteCount": 5}, "didClose": [{"uri": "c:never"}]}},
                   {"data": [{"kind": 2, "document": "c:never"}]}):
        server.notify("notebookDocument/didChange", {"notebookDocument": {"uri": notebook, "version": 2}, "change": {"cells": change}})
    server.notify("notebookDocument/didOpen", {"cells": []})
    assert server.document_text(cell["uri"])["result"]["text"] == "import os\n"  # the cell sent, whatever came after
    answer = server.call(INLINE, inline_params(cell["uri"], 1, 0), timeout=60)
    assert "result" in answer, answer
    server.notify("notebookDocument/didClose", {"notebookDocument": {"uri": notebook}, "cellTextDocuments": [{"uri": cell["uri"]}]})
    assert "error" in server.document_text(cell["uri"])
    assert_still_serving(server)


def test_broken_json_is_a_parse_error_with_a_null_id(server: RawServer):
    server.send_bytes(frame(b'{"jsonrpc": "2.0", "id": 41, "method": "cpc/status", "params": {'))
    error_of(server.answer(NULL_ID), PARSE_ERROR, "not JSON")
    server.send_bytes(frame(b"\xff\xfe not even UTF-8"))
    error_of(server.answer(NULL_ID), PARSE_ERROR)
    assert not server.answered(41)
    assert_still_serving(server)


@pytest.mark.parametrize("change", [-7, -1, 1, 25, 4000])
def test_a_wrong_content_length_is_repaired_on_the_next_header(server: RawServer, change: int):
    """Too short or too long, followed at once by another message: both are answered, neither is lost."""
    first, second = server.next_id(), server.next_id()
    server.send_bytes(frame(request(first, "cpc/status", {}), change) + frame(request(second, "cpc/status", {})))
    assert server.answer(first)["result"]["ready"]
    assert server.answer(second)["result"]["ready"]
    assert_still_serving(server)


def test_a_too_long_content_length_on_the_last_message_is_settled_when_the_input_pauses(server: RawServer):
    server.send_bytes(frame(request("lonely", "cpc/status", {}), 30))
    assert server.answer("lonely", timeout=5)["result"]["ready"]
    assert_still_serving(server)


def test_headers_in_any_case_with_content_type_and_bare_line_feeds(server: RawServer):
    body = json.dumps(request("headers", "cpc/status", {})).encode()
    server.send_bytes(
        b"content-type: application/vscode-jsonrpc; charset=utf-8\r\nCONTENT-LENGTH:  %d\n\n" % len(body) + body
    )
    assert server.answer("headers")["result"]["ready"]
    server.send_bytes(b"garbage between frames\r\n" + frame(request("after-garbage", "cpc/status", {})))
    assert server.answer("after-garbage")["result"]["ready"]
    assert_still_serving(server)


@pytest.mark.parametrize("body", [5, "text", None, True], ids=["number", "string", "null", "boolean"])
def test_json_that_is_not_an_object_is_an_invalid_request(server: RawServer, body: Any):
    server.send(body)
    error_of(server.answer(NULL_ID), INVALID_REQUEST, "a message is a JSON object")
    assert_still_serving(server)


def test_a_batch_is_refused_with_an_error_for_each_request_in_it(server: RawServer):
    server.send([request("batch-1", "cpc/status", {}), notification("$/setTrace", {"value": "off"}), request("batch-2", INLINE, GOOD)])
    for message_id in ("batch-1", "batch-2"):
        error_of(server.answer(message_id), INVALID_REQUEST, "batches")
    server.send([])
    error_of(server.answer(NULL_ID), INVALID_REQUEST, "batches")
    assert_still_serving(server)


ENVELOPES = [
    pytest.param({"id": "no-version", "method": "cpc/status", "params": {}}, "no-version", '"jsonrpc": "2.0" member is missing', id="no-jsonrpc"),
    pytest.param({"jsonrpc": "1.0", "id": "old", "method": "cpc/status"}, "old", '"jsonrpc" must be "2.0"', id="wrong-jsonrpc"),
    pytest.param({"jsonrpc": "2.0", "id": 1.5, "method": "cpc/status"}, NULL_ID, "the id must be an integer or a string", id="id-a-float"),
    pytest.param({"jsonrpc": "2.0", "id": {"n": 1}, "method": "cpc/status"}, NULL_ID, "the id must be", id="id-an-object"),
    pytest.param({"jsonrpc": "2.0", "id": None, "method": "cpc/status"}, NULL_ID, "the id must be", id="id-null"),
    pytest.param({"jsonrpc": "2.0", "id": "no-method", "params": {}}, "no-method", '"method" member is missing', id="no-method"),
    pytest.param({"jsonrpc": "2.0", "id": "method-5", "method": 5}, "method-5", '"method" must be a string', id="method-a-number"),
    pytest.param({"jsonrpc": "2.0", "id": "open-as-request", "method": "textDocument/didOpen", "params": {}}, "open-as-request", "is a notification", id="notification-with-an-id"),
]


@pytest.mark.parametrize("message, answer_id, mentions", ENVELOPES)
def test_messages_that_are_not_json_rpc_requests_are_invalid_requests(server: RawServer, message: dict, answer_id: Any, mentions: str):
    server.send(message)
    error_of(server.answer(answer_id), INVALID_REQUEST, mentions)
    assert_still_serving(server)


def test_a_completion_inside_a_1_mb_line_is_answered_and_the_server_stays_live(server: RawServer):
    """Found by the fuzzer: the word before the cursor was searched with a regex quadratic in such a line."""
    uri = "file:///minified.js"
    line = "x = '" + "ab" * 500_000 + "(ab"
    server.open(uri, line + "';\n")
    completion = server.request(INLINE, inline_params(uri, 0, len(line)))
    assert server.status(timeout=30)["ready"]
    assert "result" in server.answer(completion, timeout=60)
    server.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
    assert_still_serving(server)


def test_a_second_initialize_is_an_invalid_request(server: RawServer):
    error_of(server.call("initialize", {"capabilities": {}}), INVALID_REQUEST, "already")
    assert_still_serving(server)


def test_requests_before_initialize_are_refused_and_exit_without_shutdown_is_code_1(tmp_path: Path):
    with RawServer(tmp_path / "server.log") as raw:
        error_of(raw.call("cpc/status", {}), NOT_INITIALIZED, "cpc/status before initialize")
        error_of(raw.call(INLINE, GOOD), NOT_INITIALIZED, INLINE)
        error_of(raw.call("shutdown"), NOT_INITIALIZED)
        raw.open(URI, TEXT)  # a notification before initialize is dropped
        assert "result" in raw.initialize()
        error_of(raw.document_text(URI), INVALID_PARAMS, "unknown document")
        raw.open(URI, TEXT)
        assert raw.document_text(URI)["result"]["text"] == TEXT
        assert isinstance(raw.call(INLINE, GOOD, timeout=60)["result"]["items"], list)
        raw.notify("exit", None)
        assert raw.process.wait(timeout=60) == 1
        assert raw.output_errors == []


def test_requests_after_shutdown_are_invalid_and_exit_ends_the_process_with_code_0(tmp_path: Path):
    with RawServer(tmp_path / "server.log") as raw:
        raw.initialize()
        raw.open(URI, TEXT)
        shutdown = raw.request("shutdown")
        assert raw.answer(shutdown) == {"jsonrpc": "2.0", "id": shutdown, "result": None}
        error_of(raw.call("cpc/status", {}), INVALID_REQUEST, "after shutdown")
        error_of(raw.call(INLINE, GOOD), INVALID_REQUEST, "after shutdown")
        error_of(raw.call("shutdown"), INVALID_REQUEST, "after shutdown")
        raw.notify("textDocument/didClose", {"textDocument": {"uri": URI}})  # dropped, nothing to answer
        raw.notify("exit", None)
        assert raw.process.wait(timeout=60) == 0
        assert raw.output_errors == []


# -- the decoder alone -------------------------------------------------------------

texts = st.one_of(st.text(max_size=40), st.sampled_from(["Content-Length: 3\r\n\r\n{}", "}\r\n\r\n", "日本😀"]))
messages = st.lists(st.fixed_dictionaries({"id": st.integers(0, 10**6), "text": texts}), min_size=1, max_size=6)


@settings(max_examples=examples(60), deadline=None)
@given(messages, st.lists(st.integers(1, 64), min_size=1, max_size=20), st.sampled_from([b"", b"\r\n", b"  \n"]))
def test_any_chunking_of_well_framed_messages_decodes_to_the_same_messages(batch, cuts, between):
    stream = between.join(frame(message) for message in batch)
    decoder, decoded, position = FrameDecoder(), [], 0
    for cut in cuts * (len(stream) // sum(cuts) + 1):
        decoder.feed(stream[position : position + cut])
        position += cut
        decoded += list(decoder.decode())
    decoded += list(decoder.decode(stalled=True))
    assert decoded == batch


@settings(max_examples=examples(60), deadline=None)
@given(messages, st.data())
def test_a_wrong_content_length_is_repaired(batch, data):
    """One frame's Content-Length off by any amount: it is repaired, and every message decodes."""
    wrong = data.draw(st.integers(0, len(batch) - 1))
    body = json.dumps(batch[wrong]).encode()
    change = data.draw(st.integers(-len(body), 200).filter(lambda n: n != 0))
    stream = b"".join(frame(m, change if i == wrong else 0) for i, m in enumerate(batch))
    decoder = FrameDecoder()
    decoder.feed(stream)
    decoded = list(decoder.decode()) + list(decoder.decode(stalled=True))
    assert decoded == batch
