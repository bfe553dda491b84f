"""Bad models through the real server: one clear message each, and the model loaded before goes on serving.

One server on the default model; each test switches its ``model`` (or
``contextSize``) setting to something broken with
``workspace/didChangeConfiguration``, checks the single message, the log
line and ``cpc/status``, asks for a completion (answered by the old model),
and switches back. The broken files are built in ``tmp_path`` from the real
default model.
"""

from __future__ import annotations

import itertools
import os
import shutil
import sys
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient, client_capabilities

from cpc.model_files import resolve_model
from tests.support.editor_client import editor_config
from tests.support.lsp_status import status, wait_for_status

pytestmark = pytest.mark.asyncio(loop_scope="module")

DEFAULT = resolve_model("default")
SETTINGS = {"debounceMs": 0, "maxTokens": 4}
_documents = itertools.count()


@pytest_lsp.fixture(scope="module", config=editor_config([sys.executable, "-m", "lsp_server"]))
async def client(lsp_client: LanguageClient):
    capabilities = client_capabilities("visual-studio-code")
    await lsp_client.initialize_session(
        types.InitializeParams(capabilities=capabilities, initialization_options=SETTINGS)
    )
    state = await settled(lsp_client)
    assert state.ready and state.model == DEFAULT.name
    yield
    await lsp_client.shutdown_session()


async def settled(client: LanguageClient, timeout: float = 120):
    """`cpc/status` once no model load is under way."""
    return await wait_for_status(client, lambda state: not state.loading, "the end of the model load", timeout)


async def configure(client: LanguageClient, **settings):
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={"cpc": settings}))
    return await settled(client)


async def served_by_the_model(client: LanguageClient) -> list[str]:
    """A completion for a fresh document (not from the suggestion cache): the texts inserted."""
    uri = f"file:///served{next(_documents)}.py"
    text = "import os\nprint(os.getcw"
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text))
    )
    before = await status(client)
    result = await client.text_document_inline_completion_async(
        types.InlineCompletionParams(
            text_document=types.TextDocumentIdentifier(uri),
            position=types.Position(1, len("print(os.getcw")),
            context=types.InlineCompletionContext(trigger_kind=types.InlineCompletionTriggerKind.Invoked),
        )
    )
    assert (await status(client)).from_model == before.from_model + 1
    return [item.insert_text for item in result.items]


async def fails_cleanly(client: LanguageClient, expected: list[str], **settings) -> str:
    """Switch to a broken setting: one error message, the same model serving; the message."""
    shown, logged = len(client.messages), len(client.log_messages)
    serving = (await status(client)).model
    state = await configure(client, **settings)
    new_messages = client.messages[shown:]
    assert len(new_messages) == 1, [m.message for m in new_messages]
    message = new_messages[0]
    assert message.type == types.MessageType.Error
    for phrase in [*expected, " -- ", f"still serving {serving}"]:
        assert phrase in message.message, (phrase, message.message)
    assert message.message in [m.message for m in client.log_messages[logged:]]
    assert state.ready and state.model == serving and state.error in message.message
    assert (await served_by_the_model(client))[0].startswith("getcw")
    return message.message


async def back_to_the_default(client: LanguageClient) -> None:
    state = await configure(client, model="default", contextSize=1536)
    assert state.ready and state.error is None and state.model == DEFAULT.name


def truncated_copy(folder: Path, name: str, size: int) -> Path:
    path = folder / name
    with DEFAULT.open("rb") as source, path.open("wb") as target:
        target.write(source.read(size))
    return path


def bad_file(kind: str, folder: Path) -> tuple[Path, list[str]]:
    """A broken model file of ``kind`` and the phrases its message must contain."""
    if kind == "directory":
        folder.joinpath("models").mkdir()
        return folder / "models", ["is a directory"]
    if kind == "empty":
        (folder / "empty.gguf").touch()
        return folder / "empty.gguf", ["is empty"]
    if kind == "text":
        (folder / "notes.gguf").write_text("These are notes, not a model.\n")
        return folder / "notes.gguf", ["not a GGUF model", "b'Thes'"]
    if kind == "first megabyte":
        return truncated_copy(folder, "head.gguf", 1 << 20), ["could not load", "truncated"]
    if kind == "cut in the tensor data":
        size = DEFAULT.stat().st_size
        return truncated_copy(folder, "cut.gguf", size // 2), ["not within the file bounds", "truncated"]
    raise ValueError(kind)


@pytest.mark.parametrize("kind", ["directory", "empty", "text", "first megabyte", "cut in the tensor data"])
async def test_a_bad_model_file_is_reported_once_and_the_old_model_serves(client: LanguageClient, tmp_path, kind):
    path, expected = bad_file(kind, tmp_path)
    message = await fails_cleanly(client, [str(path), *expected], model=str(path))
    state = await status(client)
    assert state.settings.model == str(path) and state.modelPath == str(DEFAULT)
    assert "Error in server" not in message  # ours, not pygls's fallback for an exception
    await back_to_the_default(client)


async def test_a_model_file_deleted_after_loading_keeps_serving_until_a_reload_fails(client: LanguageClient, tmp_path):
    copy = tmp_path / "copy.gguf"
    try:
        os.link(DEFAULT, copy)  # the same bytes without copying 250 MB when tmp_path shares the disk
    except OSError:
        shutil.copyfile(DEFAULT, copy)
    state = await configure(client, model=str(copy))
    assert state.ready and state.model == "copy.gguf" and state.error is None
    copy.unlink()
    assert (await served_by_the_model(client))[0].startswith("getcw")  # the loaded weights do not need the file
    await fails_cleanly(client, ["model file not found", str(copy)], contextSize=1024)
    assert (await status(client)).modelPath == str(copy)
    await back_to_the_default(client)


async def test_a_context_larger_than_completions_read_loads_what_they_read(client: LanguageClient):
    """`contextSize` is the most a model gets: 10**8 tokens, more than any machine holds, loads the context the
    default model's completions read (`cpc.window.context_for`), and it serves. A context the machine cannot hold
    is refused before llama.cpp makes it (tests/engine/test_llama.py)."""
    state = await configure(client, contextSize=10**8)
    assert state.ready and state.error is None and state.settings.contextSize == 10**8
    assert (await served_by_the_model(client))[0].startswith("getcw")
    await back_to_the_default(client)


async def test_a_smaller_context_loads_and_serves(client: LanguageClient):
    state = await configure(client, contextSize=512)
    assert state.ready and state.error is None and state.settings.contextSize == 512
    assert (await served_by_the_model(client))[0].startswith("getcw")
    await back_to_the_default(client)
