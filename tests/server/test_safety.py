"""Safe by default: TCP on loopback only, no file read outside the workspace folders' text files
(none with ``workspaceIndexing`` off), no document text in logs.

The servers are real (`python -m lsp_server`, the default model); the file
check runs the server under a Python audit hook that records every file it
opens, so a read of the workspace cannot hide.
"""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import pytest_asyncio
from lsprotocol import types
from pygls.lsp.client import LanguageClient as PlainClient
from pytest_lsp import LanguageClient, client_capabilities

from tests.support.editor_client import editor_config
from tests.support.lsp_status import status

module_loop = pytest.mark.asyncio(loop_scope="module")

SERVER = [sys.executable, "-m", "lsp_server"]
SECRET = f"SECRET_{uuid.uuid4().hex}"
"""In the editor's copy of a document: it must not reach the log."""
ON_DISK = f"ON_DISK_{uuid.uuid4().hex}"
"""In the workspace's files on disk: the server must not read them (with ``workspaceIndexing`` off) nor log them."""

AUDITED_SERVER = """
import sys
opened = open(sys.argv.pop(1), "a", encoding="utf-8")
def record(event, args):
    if event == "open" and isinstance(args[0], (str, bytes)):
        opened.write(f"{args[0]!s}\\n")
        opened.flush()
sys.addaudithook(record)
from lsp_server.__main__ import main
main()
"""
"""The real server, writing the path of every file Python opens (``open`` audit events) to its first argument."""


# -- TCP ---------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def listening_addresses(port: int) -> set[str]:
    """The IPv4 addresses that listen on ``port`` (from /proc/net/tcp: state 0A is LISTEN)."""
    found = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        address, _, hex_port = local.partition(":")
        if state == "0A" and int(hex_port, 16) == port:
            found.add(socket.inet_ntoa(bytes.fromhex(address)[::-1]))
    return found


async def answers_over_tcp(port: int) -> tuple[dict, set[str]]:
    """Connect to 127.0.0.1:``port`` (waiting for the server to listen), initialize, ask `cpc/status`, shut down.

    Returns the status and the addresses the server listened on while it answered.
    """
    deadline = time.monotonic() + 60
    while not listening_addresses(port):
        assert time.monotonic() < deadline, "the server did not listen in time"
        await asyncio.sleep(0.1)
    client = PlainClient("safety-test", "0")
    await client.start_tcp("127.0.0.1", port)
    try:
        result = await client.initialize_async(types.InitializeParams(capabilities=types.ClientCapabilities()))
        assert result.server_info.name == "cpc-lsp"
        state = await client.protocol.send_request_async("cpc/status", {})
        addresses = listening_addresses(port)
        await client.shutdown_async(None)
        client.exit(None)
        return state, addresses
    finally:
        await client.stop()


def start_tcp_server(*args: str) -> subprocess.Popen:
    return subprocess.Popen([*SERVER, "--model", "default", *args], stderr=subprocess.PIPE, text=True)


def test_help_says_tcp_is_loopback_unless_allowed():
    result = subprocess.run([*SERVER, "--help"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0
    assert "--allow-remote" in result.stdout and "loopback" in result.stdout


@pytest.mark.parametrize("address", ["0.0.0.0", "[::]", "8.8.8.8"])
def test_tcp_on_a_non_loopback_address_is_refused(address):
    port = free_port()
    result = subprocess.run([*SERVER, "--tcp", f"{address}:{port}"], capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert "not a loopback address" in result.stderr and "--allow-remote" in result.stderr
    assert not listening_addresses(port)


def test_tcp_needs_a_port():
    result = subprocess.run([*SERVER, "--tcp", "127.0.0.1:http"], capture_output=True, text=True, timeout=60)
    assert result.returncode != 0 and "HOST:PORT" in result.stderr


@module_loop
@pytest.mark.parametrize(
    ("args", "bound"),
    [
        (["--tcp", ":{port}"], "127.0.0.1"),  # no host: loopback
        (["--tcp", "localhost:{port}"], "127.0.0.1"),
        (["--tcp", "0.0.0.0:{port}", "--allow-remote"], "0.0.0.0"),
    ],
)
async def test_tcp_listens_where_allowed_and_serves(args, bound):
    port = free_port()
    server = start_tcp_server(*[arg.format(port=port) for arg in args])
    try:
        state, addresses = await answers_over_tcp(port)
        assert addresses == {bound}
        assert state.ready is False and state.error is None  # no `initialized` sent: the model is not loading
        server.wait(timeout=30)  # `exit` ends it
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    assert server.returncode == 0, server.stderr.read()


# -- files and logs ------------------------------------------------------------


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Path:
    """A project on disk whose files the server must leave alone."""
    root = tmp_path_factory.mktemp("project")
    (root / "app.py").write_text(f"# on disk: {ON_DISK}\nimport os\n")
    (root / "other.py").write_text(f"TOKEN = '{ON_DISK}'\n")
    (root / ".vscode").mkdir()
    (root / ".vscode" / "settings.json").write_text(f'{{"cpc.model": "{ON_DISK}"}}')
    (root / "pyproject.toml").write_text(f'[project]\nname = "{ON_DISK}"\n')
    (root / ".gitignore").write_text("*.env\n")
    (root / "secrets.env").write_text(f"TOKEN={ON_DISK}\n")
    return root


@pytest.fixture(scope="module")
def server_files(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("server")
    return {"log": folder / "server.log", "opened": folder / "opened.txt"}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def client(workspace: Path, server_files):
    """The audited server with a log file, initialized on the workspace, the model loaded."""
    command = [sys.executable, "-c", AUDITED_SERVER, str(server_files["opened"]), "--log-file", str(server_files["log"])]
    client = await editor_config(command).start()
    root = workspace.as_uri()
    try:
        await client.initialize_session(
            types.InitializeParams(
                capabilities=client_capabilities("visual-studio-code"),
                root_uri=root,
                workspace_folders=[types.WorkspaceFolder(uri=root, name="project")],
                initialization_options={"debounceMs": 0, "maxTokens": 4, "workspaceIndexing": False},
            )
        )
        deadline = time.monotonic() + 120
        while not (await status(client)).ready:
            assert time.monotonic() < deadline, "the model did not load in time"
            await asyncio.sleep(0.1)
        yield client
        await client.shutdown_session()
    finally:
        await client.stop()


def open_document(client: LanguageClient, uri: str, text: str) -> None:
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text))
    )


async def inline(client: LanguageClient, uri: str, line: int, character: int) -> types.InlineCompletionList:
    return await client.text_document_inline_completion_async(
        types.InlineCompletionParams(
            text_document=types.TextDocumentIdentifier(uri),
            position=types.Position(line, character),
            context=types.InlineCompletionContext(trigger_kind=types.InlineCompletionTriggerKind.Invoked),
        )
    )


async def a_session_with_a_secret(client: LanguageClient, workspace: Path, secret: str) -> None:
    """Open, complete, read back, and error paths: a bad position, an edit to an unknown document,
    a notification whose params do not parse."""
    uri = (workspace / f"session_{uuid.uuid4().hex[:8]}.py").as_uri()
    text = f"API_KEY = '{secret}'\nimport os\nos.getcw"
    open_document(client, uri, text)
    assert (await inline(client, uri, 2, len("os.getcw"))).items
    assert (await client.protocol.send_request_async("cpc/documentText", {"uri": uri})).text == text
    with pytest.raises(Exception, match="outside"):
        await inline(client, uri, 7, 0)
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri + ".never-opened", version=2),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=f"{secret} again")],
        )
    )
    # params that do not parse: pygls logs the failure
    bad_open = {"uri": uri + ".bad", "languageId": "python", "version": secret, "text": secret}
    # raw JSON: the client's typed `notify` would refuse to send it
    client.protocol._send_data({"jsonrpc": "2.0", "method": types.TEXT_DOCUMENT_DID_OPEN,
                                "params": {"textDocument": bad_open}})
    assert (await status(client)).ready  # the server goes on


@module_loop
async def test_the_server_reads_no_workspace_file(client: LanguageClient, workspace: Path, server_files):
    # the editor's copy of app.py differs from the disk's: the editor's is the one used
    uri = (workspace / "app.py").as_uri()
    open_document(client, uri, "import os\nos.getcw")
    assert (await client.protocol.send_request_async("cpc/documentText", {"uri": uri})).text == "import os\nos.getcw"
    assert (await inline(client, uri, 1, len("os.getcw"))).items
    # a file on disk that was never opened is not read to answer
    other = (workspace / "other.py").as_uri()
    with pytest.raises(Exception, match="never opened"):
        await inline(client, other, 0, 3)
    with pytest.raises(Exception, match="unknown document"):
        await client.protocol.send_request_async("cpc/documentText", {"uri": other})
    await status(client)  # every message above has been handled
    opened = server_files["opened"].read_text().splitlines()
    assert any(path.endswith(".gguf") for path in opened)  # the audit hook sees the model's check
    assert not [path for path in opened if path.startswith(str(workspace))]


@module_loop
async def test_no_document_text_in_the_logs(client: LanguageClient, workspace: Path, server_files):
    await a_session_with_a_secret(client, workspace, SECRET)
    await status(client)
    log = server_files["log"].read_text()
    assert "model ready" in log and "Traceback" in log  # the log is written, errors included
    assert SECRET not in log, [line for line in log.splitlines() if SECRET in line]
    assert not [m.message for m in client.log_messages if SECRET in m.message]
    assert not [m.message for m in client.messages if SECRET in m.message]


@module_loop
async def test_log_documents_lets_the_log_show_them(client: LanguageClient, workspace: Path, server_files):
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={"logDocuments": True}))
    debug_secret = f"DEBUG_{uuid.uuid4().hex}"
    await a_session_with_a_secret(client, workspace, debug_secret)
    await status(client)
    log = server_files["log"].read_text()
    assert debug_secret in log and SECRET not in log


@module_loop
async def test_workspace_indexing_reads_only_the_text_files_git_would_see(client: LanguageClient, workspace: Path, server_files):
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={"workspaceIndexing": True}))
    deadline = time.monotonic() + 60
    while (state := await status(client)).workspace.state != "ready":
        assert time.monotonic() < deadline and state.workspace.state != "failed", state.workspace
        await asyncio.sleep(0.1)
    assert state.workspace.files == 5
    opened = {path for path in server_files["opened"].read_text().splitlines() if path.startswith(str(workspace))}
    expected = {".gitignore", "app.py", "other.py", "pyproject.toml", ".vscode/settings.json"}
    assert opened == {str(workspace / name) for name in expected}  # never secrets.env: git ignores it
    log = server_files["log"].read_text()
    assert "workspace read: 5 files" in log and ON_DISK not in log
    assert not [m.message for m in client.log_messages if ON_DISK in m.message]
