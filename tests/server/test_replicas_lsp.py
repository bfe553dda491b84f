"""End to end: `cpc-lsp` with two llama-server replicas in ``model``, each stopped and started again in turn.

While one replica answers, the editor is served and told nothing; with
neither, one warning and empty answers; when they are back, served again
and told so -- without restarting the editor.
"""

from __future__ import annotations

import sys

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient

from harness.llama_server import LlamaServer, all_running, free_port
from tests.server.test_lsp import initialize_params, wait_until_loaded
from tests.server.test_remote_lsp import SETTINGS, complete_width, shown
from tests.support.editor_client import editor_config
from tests.support.lsp_status import status

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.slow]

PORTS = (free_port(), free_port())


@pytest.fixture(scope="module")
def replicas():
    with all_running([LlamaServer("default", port=port) for port in PORTS]) as running:
        yield running


@pytest_lsp.fixture(scope="module", config=editor_config([sys.executable, "-m", "lsp_server"]))
async def client(lsp_client: LanguageClient, replicas):
    model = ", ".join(f"http://127.0.0.1:{port}" for port in PORTS)
    await lsp_client.initialize_session(initialize_params(options=SETTINGS | {"model": model}))
    state = await wait_until_loaded(lsp_client)
    assert state.ready and state.error is None, state
    yield
    await lsp_client.shutdown_session()


async def test_each_replica_stopped_in_turn_is_not_seen_by_the_user(client: LanguageClient, replicas):
    seen = len(client.messages)
    for server in replicas:
        server.kill()
        try:
            for _ in range(2):  # new documents: each goes to the replica its start ranks first, or the other
                items = await complete_width(client)
                assert items and items[0].insert_text.startswith("width"), (items, client.messages)
        finally:
            server.start()
    assert shown(client, seen) == [], "nothing to tell while a replica answers"
    assert (await status(client)).serverError is None


async def test_with_no_replica_one_warning_then_served_again(client: LanguageClient, replicas):
    for server in replicas:
        server.kill()
    seen = len(client.messages)
    try:
        assert await complete_width(client) == []
        assert await complete_width(client) == []
    finally:
        for server in replicas:
            server.start()
    warnings = [m.message for m in shown(client, seen) if m.type == types.MessageType.Warning]
    assert len(warnings) == 1 and "no model server answered" in warnings[0], client.messages[seen:]
    assert all(f"127.0.0.1:{port}" in warnings[0] for port in PORTS)
    items = await complete_width(client)
    assert items and items[0].insert_text.startswith("width")
    assert "cpc-lsp: the model server answers again" in [m.message for m in shown(client, seen)]
