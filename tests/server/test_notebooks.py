"""Notebooks through the server: a cell is completed with the code cells around it, as in a script.

A real LSP client (pytest-lsp) that synchronizes notebooks as VS Code does (``notebookDocument/*``)
against `cpc-lsp` on the default model, fusion off: a name the cell uses is defined only in a cell
above it, so only the cells read around it can complete it. The same text in a file alone does not.
"""

from __future__ import annotations

import sys

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient, client_capabilities

from tests.server.test_lsp import wait_until_loaded
from tests.support.editor_client import editor_config

pytestmark = pytest.mark.asyncio(loop_scope="module")

SERVER = [sys.executable, "-m", "lsp_server", "--model", "default"]
SETTINGS = {"debounceMs": 0, "maxTokens": 16, "promptBudgetMs": 0, "wordBudgetMs": 0, "fusion": False}
"""No time budgets (what a request reads must not depend on this machine's speed), and no fusion: the cells
are open documents, and fusion would bring their names in without the script."""

NOTEBOOK = "file:///work/ledger%20notes.ipynb"
DEFINITION = "def frobnicate_quaternion_ledger(entries, turns=1):\n    return entries[turns:] + entries[:turns]"
RENAMED = "def zanzibar_octonion_register(entries, turns=1):\n    return entries[turns:] + entries[:turns]"
USE = "ledger = [3, 1, 4, 1, 5]\nrotated = "


def cell_uri(name: str) -> str:
    return f"vscode-notebook-cell:/work/ledger%20notes.ipynb#{name}"


@pytest_lsp.fixture(scope="module", config=editor_config(SERVER))
async def client(lsp_client: LanguageClient):
    capabilities = client_capabilities("visual-studio-code")
    capabilities.notebook_document = types.NotebookDocumentClientCapabilities(
        synchronization=types.NotebookDocumentSyncClientCapabilities()
    )
    result = await lsp_client.initialize_session(
        types.InitializeParams(capabilities=capabilities, initialization_options=SETTINGS)
    )
    assert result.capabilities.notebook_document_sync is not None
    assert (await wait_until_loaded(lsp_client)).ready
    yield
    await lsp_client.shutdown_session()


def open_notebook(client: LanguageClient, cells: list[tuple[str, str, str]]) -> None:
    """Open ``NOTEBOOK`` with ``cells`` (name, "code" or "markdown", text)."""
    kinds = {"code": types.NotebookCellKind.Code, "markdown": types.NotebookCellKind.Markup}
    client.notebook_document_did_open(types.DidOpenNotebookDocumentParams(
        types.NotebookDocument(NOTEBOOK, "jupyter-notebook", 1,
                               [types.NotebookCell(kinds[kind], cell_uri(name)) for name, kind, _ in cells]),
        [types.TextDocumentItem(cell_uri(name), "python" if kind == "code" else "markdown", 1, text)
         for name, kind, text in cells],
    ))


def change_notebook(client: LanguageClient, version: int, cells: types.NotebookDocumentCellChanges) -> None:
    client.notebook_document_did_change(types.DidChangeNotebookDocumentParams(
        types.VersionedNotebookDocumentIdentifier(uri=NOTEBOOK, version=version), types.NotebookDocumentChangeEvent(cells=cells)
    ))


async def suggestion(client: LanguageClient, uri: str, text: str) -> str:
    """The first suggestion at the end of ``text``, the text of document ``uri``."""
    lines = text.split("\n")
    answer = await client.text_document_inline_completion_async(types.InlineCompletionParams(
        text_document=types.TextDocumentIdentifier(uri),
        position=types.Position(len(lines) - 1, len(lines[-1])),
        context=types.InlineCompletionContext(trigger_kind=types.InlineCompletionTriggerKind.Invoked),
    ))
    return answer.items[0].insert_text if answer.items else ""


async def test_a_cell_is_completed_with_the_code_cells_above_it(client: LanguageClient):
    typed = USE + "frobnicate_qu"
    client.text_document_did_open(types.DidOpenTextDocumentParams(
        types.TextDocumentItem("file:///work/lone.py", "python", 1, typed)))
    alone = await suggestion(client, "file:///work/lone.py", typed)
    assert not alone.startswith("frobnicate_quaternion_ledger"), alone  # the cell alone cannot know the name

    open_notebook(client, [("title", "markdown", "# Rotating ledgers"), ("define", "code", DEFINITION),
                           ("use", "code", typed), ("after", "code", "print(rotated)")])
    assert (await suggestion(client, cell_uri("use"), typed)).startswith("frobnicate_quaternion_ledger(ledger")
    assert await suggestion(client, cell_uri("title"), "# Rotating ledgers") is not None  # a markdown cell alone

    # A cell renamed the function: the next request reads the new name.
    change_notebook(client, 2, types.NotebookDocumentCellChanges(text_content=[types.NotebookDocumentCellContentChanges(
        types.VersionedTextDocumentIdentifier(uri=cell_uri("define"), version=2),
        [types.TextDocumentContentChangeWholeDocument(RENAMED)],
    )]))
    renamed = USE + "zanzibar_oc"
    change_notebook(client, 3, types.NotebookDocumentCellChanges(text_content=[types.NotebookDocumentCellContentChanges(
        types.VersionedTextDocumentIdentifier(uri=cell_uri("use"), version=2),
        [types.TextDocumentContentChangeWholeDocument(renamed)],
    )]))
    assert (await suggestion(client, cell_uri("use"), renamed)).startswith("zanzibar_octonion_register(")

    # A cell inserted above it, and one taken away: the notebook's cells as the editor has them now.
    inserted = "def quokka_tally_checksum(values):\n    return sum(values) % 65521"
    change_notebook(client, 4, types.NotebookDocumentCellChanges(structure=types.NotebookDocumentCellChangeStructure(
        types.NotebookCellArrayChange(1, 1, [types.NotebookCell(types.NotebookCellKind.Code, cell_uri("tally"))]),
        did_open=[types.TextDocumentItem(cell_uri("tally"), "python", 1, inserted)],
        did_close=[types.TextDocumentIdentifier(cell_uri("define"))],
    )))
    with pytest.raises(Exception, match="unknown document"):
        await client.protocol.send_request_async("cpc/documentText", {"uri": cell_uri("define")})
    tally = USE + "total = quokka_ta"
    change_notebook(client, 5, types.NotebookDocumentCellChanges(text_content=[types.NotebookDocumentCellContentChanges(
        types.VersionedTextDocumentIdentifier(uri=cell_uri("use"), version=3),
        [types.TextDocumentContentChangeWholeDocument(tally)],
    )]))
    assert (await suggestion(client, cell_uri("use"), tally)).startswith("quokka_tally_checksum(")

    client.notebook_document_did_close(types.DidCloseNotebookDocumentParams(
        types.NotebookDocumentIdentifier(NOTEBOOK),
        [types.TextDocumentIdentifier(cell_uri(name)) for name in ("title", "tally", "use", "after")],
    ))
    with pytest.raises(Exception, match="unknown document"):
        await client.protocol.send_request_async("cpc/documentText", {"uri": cell_uri("use")})
