"""Fusion through the server: a real LSP client (pytest-lsp) against `cpc-lsp` on the default model.

The open documents and the workspace folder's files reach the decoder
(the server's side of fusion): a name defined in another open file, or only in a
file on disk, is completed; with ``fusion`` off the suggestion is recorded
(``fusion_off_suggestion`` in the test report, and printed) for comparison.
"""

from __future__ import annotations

import asyncio
import json
import sys
import warnings
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient, client_capabilities

from lsp_server.reading import REREAD_BAR_FILES
from tests.support.editor_client import editor_config
from tests.support.lsp_status import status, wait_for_status

pytestmark = pytest.mark.asyncio(loop_scope="module")

SERVER = [sys.executable, "-m", "lsp_server", "--model", "default"]
SETTINGS = {"debounceMs": 0, "maxTokens": 16, "promptBudgetMs": 0, "wordBudgetMs": 0}
"""No time budgets: what a request reads and writes must not depend on this machine's speed."""

LIB = '''\
"""Checksums over weighted samples."""


def compute_weighted_checksum(data, weights):
    total = 0
    for value, weight in zip(data, weights):
        total = (total + value * weight) % 65521
    return total
'''
MAIN = '''\
import sys


def main(argv):
    data = [int(arg) for arg in argv[1:]]
    weights = [1] * len(data)
    print()
'''
TYPED = "compute_wei"
CALL_LINE = 6  # `    print()`: the name is typed inside the parentheses
CALL_COLUMN = len("    print(")

DISK_NAME = "frobnicate_quaternion_ledger"
STORE = f'''\
"""Ledger entries, rotated."""


def {DISK_NAME}(entries, turns=1):
    return [entry for entry in entries[turns:] + entries[:turns]]
'''
IGNORED = '''\
def zephyr_ignored_helper():
    return 1
'''
PROJECT_MODULES = sorted(Path(json.__file__).parent.glob("*.py"))
"""The rest of the project: real modules, so that fusion has the evidence of a project (`ProjectCorpus.pull`)."""
EXPECTED_FILES = 2 + len(PROJECT_MODULES)  # .gitignore, store.py and the modules; ignored.py is ignored, logo.png binary


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """The workspace folder on disk: a file defining a unique name, an ignored file and a binary."""
    root = tmp_path_factory.mktemp("fusion_project")
    (root / ".gitignore").write_text("ignored.py\n")
    (root / "store.py").write_text(STORE)
    (root / "ignored.py").write_text(IGNORED)
    (root / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00")
    (root / "codec").mkdir()
    for module in PROJECT_MODULES:
        (root / "codec" / module.name).write_text(module.read_text())
    return root


@pytest_lsp.fixture(scope="module", config=editor_config(SERVER))
async def client(lsp_client: LanguageClient, project: Path):
    root = project.as_uri()
    await lsp_client.initialize_session(
        types.InitializeParams(
            capabilities=client_capabilities("visual-studio-code"),
            root_uri=root,
            workspace_folders=[types.WorkspaceFolder(uri=root, name="project")],
            initialization_options=SETTINGS,
        )
    )
    state = await wait_for_status(lsp_client, lambda s: s.ready or s.error, "the model load")
    assert state.ready, state.error
    yield
    await lsp_client.shutdown_session()


def open_document(client: LanguageClient, uri: str, text: str) -> None:
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text))
    )


def edit(client: LanguageClient, uri: str, version: int, start: tuple[int, int], end: tuple[int, int], text: str) -> None:
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[
                types.TextDocumentContentChangePartial(
                    range=types.Range(types.Position(*start), types.Position(*end)), text=text
                )
            ],
        )
    )


async def inline(client: LanguageClient, uri: str, line: int, character: int) -> types.InlineCompletionList:
    return await client.text_document_inline_completion_async(
        types.InlineCompletionParams(
            text_document=types.TextDocumentIdentifier(uri),
            position=types.Position(line, character),
            context=types.InlineCompletionContext(trigger_kind=types.InlineCompletionTriggerKind.Automatic),
        )
    )


def configure(client: LanguageClient, **settings) -> None:
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={"cpc": settings}))


async def settled(client: LanguageClient):
    """`cpc/status` once the worker has applied every queued document update."""
    return await wait_for_status(client, lambda s: s.workspace.pending == 0, "the corpus updates", 60)


async def test_a_name_defined_in_another_open_file_is_completed(client: LanguageClient, record_property):
    await wait_for_status(client, lambda s: s.workspace.state == "ready", "reading the workspace folder", 120)
    open_document(client, "file:///fusion/lib.py", LIB)
    # opened before: a request goes ahead of other documents' updates still queued (`CorpusFeeder`), and a
    # CI run asked before lib.py's was applied (`compute_weights(data, weights))`)
    await settled(client)
    uri = "file:///fusion/main.py"
    open_document(client, uri, MAIN)
    for k, char in enumerate(TYPED):  # typed key by key, as an editor sends it
        at = (CALL_LINE, CALL_COLUMN + k)
        edit(client, uri, k + 2, at, at, char)
    end = CALL_COLUMN + len(TYPED)
    result = await inline(client, uri, CALL_LINE, end)
    assert result.items, "a suggestion for `compute_wei|`"
    fused = result.items[0].insert_text
    record_property("fusion_on_suggestion", fused)
    print(f"\nfusion on:  {fused!r}")
    assert fused.startswith("compute_weighted_checksum"), fused

    # the same cursor without fusion: whatever it answers is recorded for the report
    configure(client, **SETTINGS, fusion=False)
    assert (await status(client)).settings.fusion is False
    plain = await inline(client, uri, CALL_LINE, end)
    assert plain.items is not None
    suggestion = plain.items[0].insert_text if plain.items else ""
    record_property("fusion_off_suggestion", suggestion)
    print(f"fusion off: {suggestion!r}")
    configure(client, **SETTINGS, fusion=True)
    state = await status(client)
    assert state.settings.fusion is True


async def test_the_workspace_folder_is_read_in_the_background(client: LanguageClient):
    state = await wait_for_status(
        client, lambda s: s.workspace.state in ("ready", "failed"), "reading the workspace folder", 120
    )
    workspace = state.workspace
    assert workspace.state == "ready", workspace.error
    assert workspace.files == EXPECTED_FILES and workspace.read.files == EXPECTED_FILES
    assert workspace.skipped.binary == 1 and workspace.stopped is None
    assert workspace.tokens > 0 and workspace.identifiers > 0 and workspace.seconds is not None
    kinds = {type(report).__name__ for reports in client.progress_reports.values() for report in reports}
    assert {"WorkDoneProgressBegin", "WorkDoneProgressEnd"} <= kinds
    assert any(f"workspace read: {EXPECTED_FILES} files" in message.message for message in client.log_messages)

    # a new document uses a name that only the file on disk defines
    uri = "file:///fusion/use.py"
    text = "def rotate(entries):\n    return frobnicate_qu"
    open_document(client, uri, text)
    result = await inline(client, uri, 1, len("    return frobnicate_qu"))
    assert result.items, "a suggestion for `frobnicate_qu|`"
    suggestion = result.items[0].insert_text
    print(f"\nfrom the disk file: {suggestion!r}")
    # it spells on along the name from the disk file (nothing else starts `frobnicate_qua`)
    spelled = suggestion[: len(DISK_NAME)]
    assert len(spelled) > len("frobnicate_qua") and DISK_NAME.startswith(spelled), suggestion
    if not suggestion.startswith(DISK_NAME):
        warnings.warn(f"fusion stopped inside the disk file's name: {suggestion!r}, not {DISK_NAME!r}", stacklevel=1)


async def test_turning_indexing_off_drops_the_files_and_on_reads_them_again(client: LanguageClient):
    await wait_for_status(client, lambda s: s.workspace.state == "ready", "reading the workspace folder", 120)
    configure(client, **SETTINGS, workspaceIndexing=False)
    state = await wait_for_status(client, lambda s: s.workspace.state == "off", "dropping the files", 60)
    assert state.workspace.files == 0
    configure(client, **SETTINGS, workspaceIndexing=True, workspaceMaxFiles=1)
    state = await wait_for_status(client, lambda s: s.workspace.state == "ready", "reading the folder again", 120)
    assert state.workspace.files == 1 and state.workspace.stopped == "max_files"
    configure(client, **SETTINGS, workspaceMaxFiles=5000)
    state = await wait_for_status(
        client, lambda s: s.workspace.state == "ready" and s.workspace.files == EXPECTED_FILES, "the full folder", 120
    )


async def test_a_removed_workspace_folder_is_dropped_and_an_added_one_read(client: LanguageClient, project: Path):
    await wait_for_status(client, lambda s: s.workspace.state == "ready", "reading the workspace folder", 120)
    folder = types.WorkspaceFolder(uri=project.as_uri(), name="project")

    def change(added: list, removed: list) -> None:
        client.workspace_did_change_workspace_folders(
            types.DidChangeWorkspaceFoldersParams(types.WorkspaceFoldersChangeEvent(added=added, removed=removed))
        )

    change([], [folder])
    state = await wait_for_status(client, lambda s: s.workspace.state == "no folders", "dropping the folder", 60)
    assert state.workspace.files == 0 and state.workspace.folders == []  # rootUri is not read instead
    change([folder], [])
    state = await wait_for_status(
        client, lambda s: s.workspace.state == "ready" and s.workspace.files == EXPECTED_FILES, "the folder again", 120
    )
    assert state.workspace.folders == [str(project)]


async def test_incremental_edits_count_the_same_as_the_final_text(client: LanguageClient):
    uri = "file:///fusion/edited.py"
    open_document(client, uri, "def alpha(x):\n    return x\n\n\nclass Beta:\n    pass\n")
    edit(client, uri, 2, (1, 11), (1, 12), "x + gamma_value")  # within a line
    edit(client, uri, 3, (3, 0), (3, 0), "DELTA = 4\nEPSILON = DELTA * 2\n")  # new lines
    edit(client, uri, 4, (0, 4), (0, 9), "omega")  # a renamed definition
    edit(client, uri, 5, (5, 0), (7, 0), "")  # lines deleted across a break
    edit(client, uri, 6, (5, 0), (5, 0), "    def method(self):\n        return EPSILON\n")
    edited = await settled(client)
    text = (await client.protocol.send_request_async("cpc/documentText", {"uri": uri})).text
    assert "omega" in text and "gamma_value" in text and "EPSILON" in text
    client.text_document_did_close(types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(uri)))
    closed = await settled(client)
    assert closed.workspace.documents == edited.workspace.documents - 1
    open_document(client, "file:///fusion/rebuilt.py", text)
    rebuilt = await settled(client)
    assert (rebuilt.workspace.tokens, rebuilt.workspace.identifiers) == (
        edited.workspace.tokens,
        edited.workspace.identifiers,
    )


LATER_NAME = "zanzibar_quokka_tally"
RENAMED = "rotated_octonion_register"


def watched(client: LanguageClient, path: Path, change: types.FileChangeType) -> None:
    client.workspace_did_change_watched_files(
        types.DidChangeWatchedFilesParams(changes=[types.FileEvent(uri=path.as_uri(), type=change)])
    )


async def spelled_along(client: LanguageClient, uri: str, typed: str, name: str) -> str:
    """A new document that ends in ``typed``: the suggestion, checked to spell on along ``name`` past
    ``name``'s first letters that nothing else starts."""
    open_document(client, uri, f"def use(entries):\n    return {typed}")
    result = await inline(client, uri, 1, len(f"    return {typed}"))
    assert result.items, f"a suggestion for `{typed}|`"
    suggestion = result.items[0].insert_text
    spelled = suggestion[: len(name)]
    assert len(spelled) > len(typed) + 1 and name.startswith(spelled), (name, suggestion)
    return suggestion


async def test_files_changed_on_disk_are_read_again(client: LanguageClient, project: Path):
    """A file created on disk after the reading (the client's file watcher tells), a file edited in the editor,
    saved and closed (read once it closes), and a file deleted: the corpus follows the disk, and suggestions
    the new names."""
    state = await wait_for_status(client, lambda s: s.workspace.state == "ready", "reading the workspace folder", 120)
    assert [(r.method, r.register_options) for r in client.registrations.values()] == [  # options arrive as JSON
        ("workspace/didChangeWatchedFiles", {"watchers": [{"globPattern": "**/*"}]})]
    files, reread = state.workspace.files, state.workspace.reread

    later = project / "later.py"
    later.write_text(f"def {LATER_NAME}(x):\n    return x\n")
    watched(client, later, types.FileChangeType.Created)
    state = await wait_for_status(client, lambda s: s.workspace.reread == reread + 1, "the created file read", 60)
    assert state.workspace.files == files + 1
    # after `zanzibar_qu` the model's `otes` or `ery` beat the name by a hair, or not, by the machine (AVX2 or
    # AVX-512), until the typed bytes were at stake (`cpc.identifiers.STAKE_CAP`): fusion now spells it from half
    # its weights on, as `rotated_oc` below
    typed = "zanzibar_qu"
    print(f"\ncreated on disk: {await spelled_along(client, 'file:///fusion/later_use.py', typed, LATER_NAME)!r}")

    store = project / "store.py"
    uri = store.as_uri()
    open_document(client, uri, STORE)
    renamed = STORE.replace(DISK_NAME, RENAMED)
    start = STORE.index(DISK_NAME)
    line, column = STORE[:start].count("\n"), start - STORE[:start].rfind("\n") - 1
    edit(client, uri, 2, (line, column), (line, column + len(DISK_NAME)), RENAMED)
    store.write_text(renamed)
    watched(client, store, types.FileChangeType.Changed)  # the save: not read while the document is open
    client.text_document_did_close(types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(uri)))
    state = await wait_for_status(client, lambda s: s.workspace.reread >= reread + 2, "the closed file read", 60)
    assert state.workspace.reread == reread + 2, "the file was read while its document was open"
    print(f"saved and closed: {await spelled_along(client, 'file:///fusion/renamed_use.py', 'rotated_oc', RENAMED)!r}")

    later.unlink()
    watched(client, later, types.FileChangeType.Deleted)
    state = await wait_for_status(client, lambda s: s.workspace.files == files, "the deleted file dropped", 60)
    store.write_text(STORE)  # as the other tests of the module found it
    watched(client, store, types.FileChangeType.Changed)
    await wait_for_status(client, lambda s: s.workspace.reread >= reread + 4, "the file put back", 60)


async def test_many_files_changed_at_once_show_a_progress_bar(client: LanguageClient, project: Path):
    """A branch checked out: dozens of files change on disk at once, and the editor shows their rereading (a
    file saved now and then shows none)."""
    state = await wait_for_status(client, lambda s: s.workspace.state == "ready", "reading the workspace folder", 120)
    files, reread = state.workspace.files, state.workspace.reread
    paths = [project / f"checked_out_{number}.py" for number in range(REREAD_BAR_FILES)]
    for number, path in enumerate(paths):
        path.write_text(f"def checked_out_function_{number}(x):\n    return x + {number}\n")
    bars_before = set(client.progress_reports)
    client.workspace_did_change_watched_files(types.DidChangeWatchedFilesParams(
        changes=[types.FileEvent(uri=path.as_uri(), type=types.FileChangeType.Created) for path in paths]))
    state = await wait_for_status(client, lambda s: s.workspace.reread >= reread + len(paths), "the files read", 60)
    assert state.workspace.files == files + len(paths)
    for _ in range(100):  # the bar ends just after the count is in
        bars = [reports for token, reports in client.progress_reports.items() if token not in bars_before]
        if any(isinstance(report, types.WorkDoneProgressEnd) for reports in bars for report in reports):
            break
        await asyncio.sleep(0.05)
    assert [(type(reports[0]).__name__, type(reports[-1]).__name__) for reports in bars] == [
        ("WorkDoneProgressBegin", "WorkDoneProgressEnd")]
    assert bars[0][0].title == "cpc: reading changed files" and bars[0][-1].message == f"{len(paths)} files"
    for path in paths:  # as the other tests of the module found it
        path.unlink()
    client.workspace_did_change_watched_files(types.DidChangeWatchedFilesParams(
        changes=[types.FileEvent(uri=path.as_uri(), type=types.FileChangeType.Deleted) for path in paths]))
    await wait_for_status(client, lambda s: s.workspace.files == files, "the files dropped", 60)
