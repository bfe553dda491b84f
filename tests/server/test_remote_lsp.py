"""End to end: `cpc-lsp` with ``model: http://127.0.0.1:PORT`` and a real llama-server, and its faults.

Once per API the client speaks (``remoteApi``): llama-server's own
``/completion``, and ``/v1/completions`` as vLLM and SGLang serve it. One
editor session per API, in order: the server is not started yet (one
warning, empty answers, the editor keeps working), then started
(`self.wid|` completes to ``width``, and an info message says it is back),
then paused (a timeout, one warning), resumed, killed, and started again on
the same port -- each time served again without restarting the editor.
"""

from __future__ import annotations

import asyncio
import sys
import time

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient

from harness.llama_server import LlamaServer, free_port
from tests.support.editor_client import editor_config
from tests.support.lsp_status import status, wait_for_status
from tests.server.test_lsp import (
    TEXTWRAP, apply, initialize_params, inline, open_document, textwrap_case, wait_until_loaded,
)

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.slow]

PORTS = {"llama-server": free_port(), "openai": free_port()}
"""A port per API: each editor session starts with no server on its port."""
SETTINGS = {"debounceMs": 0, "maxTokens": 8, "remoteTimeoutMs": 15000, "fusion": False}
_documents = iter(range(1000))


@pytest_lsp.fixture(scope="module", params=list(PORTS),
                    config=editor_config([sys.executable, "-m", "lsp_server"]))
async def client(lsp_client: LanguageClient, request):
    api = request.param
    settings = SETTINGS | {"model": f"http://127.0.0.1:{PORTS[api]}", "remoteApi": api}
    await lsp_client.initialize_session(initialize_params(options=settings))
    state = await wait_until_loaded(lsp_client)
    assert state.ready, state.error
    lsp_client.port = PORTS[api]
    yield
    await lsp_client.shutdown_session()


@pytest.fixture(scope="module")
def servers():
    """The llama-servers the editor sessions talk to, one per API's port; the tests start, pause, kill and
    restart them."""
    running = {port: LlamaServer("default", port=port) for port in PORTS.values()}
    yield running
    for server in running.values():
        server.stop()


@pytest.fixture
def server(client: LanguageClient, servers) -> LlamaServer:
    return servers[client.port]


async def complete_width(client: LanguageClient) -> list[types.InlineCompletionItem]:
    """`self.wid|` in textwrap's ``TextWrapper.__init__``, in a fresh document under a new first line each time:
    neither the suggestion cache nor the engine's own caches (per token prefix) can answer without the server.

    The method alone, not the whole file: a cold prompt of a whole file takes seconds to prefill on two
    busy cores, and the requests queued behind it on the slot would run into the timeout.
    """
    number = next(_documents)
    uri = f"file:///remote{number}.py"
    start = TEXTWRAP.index("    def __init__(self,\n                 width=70,")
    source = f"# edit {number}\nclass TextWrapper:\n" + TEXTWRAP[start:]
    text, line, character = textwrap_case("self.width = width", "self.width = wid", source)
    open_document(client, uri, text)
    items = list((await inline(client, uri, line, character)).items)
    if items:
        assert apply(text, items[0]).split("\n")[line].startswith("        self.width = width")
    return items


def shown(client: LanguageClient, since: int) -> list[types.ShowMessageParams]:
    return client.messages[since:]


async def test_not_started_one_warning_and_empty_answers(client: LanguageClient):
    # the status may say ready before the event loop has sent the load's warning: wait for it, within a deadline
    deadline = time.monotonic() + 30
    while not any(m.type == types.MessageType.Warning for m in client.messages) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    warnings = [m for m in client.messages if m.type == types.MessageType.Warning]
    url = f"http://127.0.0.1:{client.port}"
    assert len(warnings) == 1 and f"{url} refused the connection" in warnings[0].message, client.messages
    seen = len(client.messages)
    assert await complete_width(client) == []
    assert await complete_width(client) == []
    assert shown(client, seen) == [], "the user is told once, not on every keystroke"
    assert "refused the connection" in (await status(client)).serverError


async def test_started_completes_self_wid_to_width(client: LanguageClient, server: LlamaServer):
    server.start()
    seen = len(client.messages)
    items = await complete_width(client)
    assert items and items[0].insert_text.startswith("width"), (items, client.messages)
    assert [m.message for m in shown(client, seen)] == ["cpc-lsp: the model server answers again"]
    assert (await status(client)).serverError is None


async def test_paused_times_out_then_recovers(client: LanguageClient, server: LlamaServer):
    server.pause()
    seen = len(client.messages)
    try:
        assert await complete_width(client) == []
    finally:
        server.resume()
    messages = [m.message for m in shown(client, seen)]
    assert len(messages) == 1 and "did not answer" in messages[0] and "within 15 s" in messages[0], messages
    assert (await complete_width(client))[0].insert_text.startswith("width")


async def test_killed_then_restarted_on_the_same_port(client: LanguageClient, server: LlamaServer):
    server.kill()
    seen = len(client.messages)
    assert await complete_width(client) == []
    assert "refused the connection" in shown(client, seen)[0].message or "dropped" in shown(client, seen)[0].message
    server.start()
    assert (await complete_width(client))[0].insert_text.startswith("width")
    state = await wait_for_status(client, lambda s: s.serverError is None, "recovery")
    assert state.ready and state.error is None
