"""End to end: `cpc-lsp` whose key a real llama-server (``--api-key``) refuses.

The key travels in the server's environment (`cpc.remote.API_KEY_ENV`, as
the VS Code extension passes it from its secret storage). The editor hears
once that the server refused it and where it is set; ``cpc/status`` says
so (``serverError``, which `:CpcStatus` and the VS Code status item show);
requests answer empty lists without asking the server again; no local
model is loaded in its place; and the key is in no message, status or log.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest
import pytest_lsp
from pytest_lsp import LanguageClient

from cpc.remote import API_KEY_ENV
from harness.llama_server import LlamaServer, free_port
from tests.server.test_lsp import inline, initialize_params, open_document, textwrap_case
from tests.support.editor_client import editor_config
from tests.support.lsp_status import status, wait_for_status

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.slow]

PORT = free_port()
KEY = "team-key-0b1c55e2"
WRONG = "stale-key-93ad7f10"
LOG = Path(tempfile.mkdtemp(prefix="cpc-key-")) / "cpc-lsp.log"
"""The server's log; its folder goes when the test run ends (pytest_lsp may start the server before a fixture of
this module runs, and the module is imported even when it is not run)."""
atexit.register(shutil.rmtree, LOG.parent, ignore_errors=True)
SETTINGS = {"model": f"http://127.0.0.1:{PORT}", "debounceMs": 0, "maxTokens": 8, "fusion": False,
            "remoteTimeoutMs": 15000, "logDocuments": True}
"""``logDocuments``: the log holds whole messages, and still no key."""


@pytest.fixture(scope="module")
def llama_server():
    with LlamaServer("default", port=PORT, api_key=KEY) as running:
        yield running


@pytest_lsp.fixture(scope="module", config=editor_config(
    server_command=[sys.executable, "-m", "lsp_server", "--log-file", str(LOG)],
    server_env={**os.environ, API_KEY_ENV: WRONG}))
async def client(lsp_client: LanguageClient, llama_server):
    await lsp_client.initialize_session(initialize_params(options=SETTINGS))
    yield
    await lsp_client.shutdown_session()


async def test_a_refused_key_is_said_in_the_status_and_nothing_else_breaks(client: LanguageClient):
    # the load's end: `ready` turns true when the engine is in, `state` once the load has said what it found
    state = await wait_for_status(client, lambda s: s.state in ("ready", "error"), "the model load")
    assert state.ready and f"model server at http://127.0.0.1:{PORT}" in state.placement.text, "no local model instead"
    assert "refused this client's key" in state.serverError and API_KEY_ENV in state.serverError
    text, line, character = textwrap_case("self.width = width", "self.width = wid")
    open_document(client, "file:///key.py", text)
    before = await status(client)
    for _ in range(3):
        assert list((await inline(client, "file:///key.py", line, character)).items) == []
    after = await status(client)
    assert after.requests == before.requests + 3 and after.from_model == before.from_model
    told = [shown.message for shown in client.messages if "refused" in shown.message]  # window/showMessage
    assert len(told) == 1, "the user is told once, not on every keystroke"
    logged = [entry.message for entry in client.log_messages]  # window/logMessage
    for where in (str(state), *told, *logged, LOG.read_text(encoding="utf-8")):
        assert WRONG not in where and KEY not in where
