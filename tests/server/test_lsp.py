"""End to end: a real LSP client (pytest-lsp) against `cpc-lsp` on the default model."""

from __future__ import annotations

import asyncio
import importlib
import re
import sys
import time

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient, client_capabilities

from lsp_server.requests import ALTERNATIVES, RELEASE_IDLE_S
from lsp_server.extensions import CURSOR_REST
from lsp_server.server import GROWTH_CAPABILITY, STATUS, SUGGESTION_READY
from tests.support.editor_client import editor_config
from tests.support.lsp_status import status, wait_for_status

pytestmark = pytest.mark.asyncio(loop_scope="module")

SERVER = [sys.executable, "-m", "lsp_server"]
TEXTWRAP = open(importlib.import_module("textwrap").__file__, encoding="utf-8").read()
SETTINGS = {"debounceMs": 0, "maxTokens": 16, "promptBudgetMs": 0, "wordBudgetMs": 0, "warmCache": False}
"""No time budgets: what a request reads and writes must not depend on this machine's speed; no
read-ahead: a request must find the worker free (a test counts whether model work was stopped)."""


def initialize_params(encodings: list[str] | None = None, options: dict | None = None,
                      grows: bool = True) -> types.InitializeParams:
    capabilities = client_capabilities("visual-studio-code")
    if grows:  # as the project's editors do: it asks again on cpc/suggestionReady
        capabilities.experimental = GROWTH_CAPABILITY
    if encodings:
        capabilities.general = types.GeneralClientCapabilities(position_encodings=encodings)
    return types.InitializeParams(capabilities=capabilities, initialization_options=options or SETTINGS)


async def wait_until_loaded(client: LanguageClient, timeout: float = 120):
    return await wait_for_status(client, lambda state: state.ready or state.error, "the model load", timeout)


@pytest_lsp.fixture(scope="module", config=editor_config([*SERVER, "--model", "default"]))
async def client(lsp_client: LanguageClient):
    lsp_client.status_notifications = []
    lsp_client.grown = []

    @lsp_client.feature(STATUS)
    def status_changed(params) -> None:
        lsp_client.status_notifications.append(params)

    @lsp_client.feature(SUGGESTION_READY)
    def suggestion_ready(params) -> None:
        lsp_client.grown.append(params)

    result = await lsp_client.initialize_session(initialize_params())
    lsp_client.initialize_result = result
    # asked while the model loads: held, not answered empty, and answered once the model is ready
    text, line, character = textwrap_case("self.width = width", "self.width = wid")
    for uri in ("file:///early.py", "file:///early_superseded.py", "file:///early_cancelled.py"):
        open_document(lsp_client, uri, text)
    lsp_client.early_state = await status(lsp_client)
    early = asyncio.ensure_future(inline(lsp_client, "file:///early.py", line, character))
    # a newer request for the same document ends the older one's wait; $/cancelRequest ends a wait too
    older = asyncio.ensure_future(inline(lsp_client, "file:///early_superseded.py", line, character))
    newer = asyncio.ensure_future(inline(lsp_client, "file:///early_superseded.py", line, character))
    cancelled = asyncio.ensure_future(lsp_client.protocol.send_request_async(
        types.TEXT_DOCUMENT_INLINE_COMPLETION, inline_params("file:///early_cancelled.py", line, character),
        msg_id="held-then-cancelled",
    ))
    await asyncio.sleep(0.1)
    lsp_client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id="held-then-cancelled"))
    lsp_client.cancelled_while_loading = await asyncio.gather(cancelled, return_exceptions=True)
    lsp_client.superseded_while_loading = await older
    lsp_client.state_after_waits = await status(lsp_client)
    lsp_client.early_answer, lsp_client.newer_answer = await early, await newer
    assert (await wait_until_loaded(lsp_client)).ready
    yield
    await lsp_client.shutdown_session()


def open_document(client: LanguageClient, uri: str, text: str, version: int = 1) -> None:
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(types.TextDocumentItem(uri=uri, language_id="python", version=version, text=text))
    )


def insert(client: LanguageClient, uri: str, version: int, line: int, character: int, text: str) -> None:
    here = types.Position(line, character)
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[types.TextDocumentContentChangePartial(range=types.Range(here, here), text=text)],
        )
    )


def inline_params(uri: str, line: int, character: int,
                  trigger: types.InlineCompletionTriggerKind = types.InlineCompletionTriggerKind.Automatic,
                  ) -> types.InlineCompletionParams:
    return types.InlineCompletionParams(
        text_document=types.TextDocumentIdentifier(uri),
        position=types.Position(line, character),
        context=types.InlineCompletionContext(trigger_kind=trigger),
    )


async def inline(client: LanguageClient, uri: str, line: int, character: int,
                 trigger: types.InlineCompletionTriggerKind = types.InlineCompletionTriggerKind.Automatic,
                 ) -> types.InlineCompletionList:
    return await client.text_document_inline_completion_async(inline_params(uri, line, character, trigger))


def apply(text: str, item: types.InlineCompletionItem) -> str:
    """What an editor does when the user accepts ``item``; VS Code shows it as ghost text only when what it
    replaces is in its text in order (the typed word, and closers it takes in)."""
    lines = text.split("\n")
    start, end = item.range.start, item.range.end
    assert start.line == end.line
    line = lines[start.line]
    inserted = iter(item.insert_text)
    assert line[start.character : end.character] and all(char in inserted for char in line[start.character : end.character])
    lines[start.line] = line[: start.character] + item.insert_text + line[end.character :]
    return "\n".join(lines)


def textwrap_case(anchor: str, typed: str, source: str = TEXTWRAP) -> tuple[str, int, int]:
    """A real file with the rest of the line after ``typed`` (inside ``anchor``) deleted, and the cursor."""
    start = source.index(anchor)
    cursor = start + len(typed)
    line_end = source.index("\n", cursor)
    text = source[:cursor] + source[line_end:]
    before = source[:cursor]
    return text, before.count("\n"), len(before) - before.rfind("\n") - 1


async def test_initialize_advertises_inline_completion_and_reports_loading(client: LanguageClient):
    capabilities = client.initialize_result.capabilities
    assert capabilities.inline_completion_provider is not None
    assert capabilities.completion_provider is not None
    assert capabilities.text_document_sync.change == types.TextDocumentSyncKind.Incremental
    assert client.early_state.loading and client.early_state.state == "loading"
    # the requests made while the model loaded: held (not answered empty), then answered by the model
    assert client.early_answer.items and client.early_answer.items[0].insert_text.startswith("wid")
    assert client.newer_answer.items
    assert list(client.superseded_while_loading.items) == []
    assert "cancel" in str(client.cancelled_while_loading[0]).lower()
    assert client.state_after_waits.loading, "the superseded and the cancelled waits ended before the model was ready"
    assert client.state_after_waits.held == 4 and client.state_after_waits.not_ready == 0
    # the client was told of each change of the model's state
    assert [note.state for note in client.status_notifications] == ["loading", "ready"]
    assert client.status_notifications[-1].model
    kinds = [type(report).__name__ for reports in client.progress_reports.values() for report in reports]
    assert kinds[0] == "WorkDoneProgressBegin" and kinds[-1] == "WorkDoneProgressEnd" and "WorkDoneProgressReport" in kinds
    assert any("model ready" in message.message for message in client.log_messages)
    # where the model runs, from llama.cpp's own load report: this machine's build has no GPU support
    placement = client.status_notifications[-1].placement
    assert (placement.backend, placement.offloadedLayers, placement.layers, placement.gpuBuild) == ("CPU", 0, 19, False)
    assert placement.greedyInGraph is False  # on the CPU the greedy step's pass stays on the host
    assert any(f"on {placement.text}" in message.message for message in client.log_messages)


async def test_completion_inside_an_identifier_is_accepted_into_the_document(client: LanguageClient):
    uri = "file:///textwrap_inside.py"
    text, line, character = textwrap_case("self.width = width", "self.width = wid")
    open_document(client, uri, text)
    result = await inline(client, uri, line, character)
    assert result.items, "a suggestion for `wid|`"
    item = result.items[0]
    assert item.range.end == types.Position(line, character)
    assert item.insert_text.startswith("wid")
    accepted = apply(text, item)
    assert accepted.split("\n")[line].startswith("        self.width = width")


async def test_a_suggestion_takes_in_the_closers_the_editor_put_after_the_cursor(client: LanguageClient):
    """An editor closes a quote or a bracket as it is typed: the rest of the line is the model's, and it replaces
    the closer it holds (before, it stopped at the closer and the line lacked its colon)."""
    uri = "file:///closers.py"
    text = 'import sys\n\n\ndef main():\n    return 0\n\n\nif __name__ == "__ma"\n'
    line, character = 7, len('if __name__ == "__ma')
    open_document(client, uri, text)
    item = (await inline(client, uri, line, character)).items[0]
    assert item.range.end == types.Position(line, character + 1)  # the closing quote
    assert apply(text, item).split("\n")[line] == 'if __name__ == "__main__":'


async def test_a_letter_typed_inside_a_word_is_completed_up_to_the_rest_of_the_word(client: LanguageClient):
    """The cursor inside a word whose rest follows it (a letter missing, or the word whole again): the suggestion
    is what is missing before that rest, or nothing. Before, the model's own line was inserted there and glued
    to the rest: ``pr|nt(os.path.basename(path))`` got ``int(os.path.join(path, "data"))`` and Tab gave
    ``print(os.path.join(path, "data"))nt(os.path.basename(path))``."""
    uri = "file:///inside_a_word.py"
    line = 4
    for version, typed in enumerate(("pr", "pri"), start=1):
        text = f"import os\n\ndef main(paths):\n    for path in paths:\n        {typed}nt(os.path.basename(path))\n"
        open_document(client, uri, text, version)
        answer = await inline(client, uri, line, len(f"        {typed}"))
        if typed == "pr":
            assert len(answer.items) == 1 and apply(text, answer.items[0]).split("\n")[line] == (
                "        print(os.path.basename(path))")
        else:
            assert not answer.items  # the word is whole: nothing to add
        client.text_document_did_close(types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(uri)))


async def test_a_new_files_first_line_is_written_in_its_language(client: LanguageClient):
    """An empty file gives the model nothing to read its language from: ``imp`` in a new ``.py`` file became
    ``ort { Component, OnInit } from '@angular/core';``. The engine reads the file's name first
    (`cpc.file_header`); what the editor shows and replaces is the document's own text."""
    for uri in ("file:///new/tool.py", "file:///new/fetch_prices.py"):
        open_document(client, uri, "imp")
        item = (await inline(client, uri, 0, 3)).items[0]
        assert item.range == types.Range(types.Position(0, 0), types.Position(0, 3))
        assert re.fullmatch(r"import [\w.]+( as \w+)?(, [\w.]+)*", item.insert_text), item.insert_text


async def test_a_closer_typed_over_is_answered_from_the_cache(client: LanguageClient):
    """Typing through a suggestion that takes in a closer, the editor types over the closer (the cursor moves
    past it): the suggestion cache answers that key too, with the line the suggestion made."""
    uri = "file:///closers_typed.py"
    text = 'import sys\n\n\ndef main():\n    return 0\n\n\nif __name__ == "__ma"\n'
    line, character = 7, len('if __name__ == "__ma')
    open_document(client, uri, text)
    item = (await inline(client, uri, line, character)).items[0]
    rest = item.insert_text[character - item.range.start.character :]
    typed = rest[: rest.index('"')]  # up to the closing quote, then over it
    insert(client, uri, 2, line, character, typed)
    cursor = character + len(typed) + 1
    before = await status(client)
    again = (await inline(client, uri, line, cursor)).items[0]
    after = await status(client)
    assert after.from_cache == before.from_cache + 1 and after.from_model == before.from_model
    assert again.range.start == again.range.end == types.Position(line, cursor)  # nothing typed of a word: inserted
    typed_line = f'if __name__ == "__ma{typed}"'
    assert typed_line + again.insert_text == apply(text, item).split("\n")[line] == 'if __name__ == "__main__":'


async def test_typing_the_suggestion_is_answered_from_cache(client: LanguageClient):
    uri = "file:///textwrap_cache.py"
    text, line, character = textwrap_case("self.initial_indent = initial_indent", "self.initial_indent = initial_ind")
    open_document(client, uri, text)
    first = (await inline(client, uri, line, character)).items[0]
    rest = first.insert_text[character - first.range.start.character :]
    before = await status(client)
    insert(client, uri, 2, line, character, rest[0])
    second = (await inline(client, uri, line, character + 1)).items[0]
    after = await status(client)
    assert after.from_cache == before.from_cache + 1 and after.from_model == before.from_model
    assert second.insert_text == first.insert_text  # the same suggestion, one more character typed


async def test_fallback_completion_item_edits_the_word(client: LanguageClient):
    uri = "file:///fallback.py"
    text, line, character = textwrap_case("self.width = width", "self.width = wid")
    open_document(client, uri, text)
    result = await client.text_document_completion_async(
        types.CompletionParams(text_document=types.TextDocumentIdentifier(uri), position=types.Position(line, character))
    )
    item = result.items[0]
    assert item.text_edit.new_text.startswith("wid") and item.filter_text.startswith("wid")
    assert item.text_edit.range.end == types.Position(line, character)


async def test_bad_requests_get_clear_errors_and_the_server_keeps_serving(client: LanguageClient):
    uri = "file:///bad.py"
    open_document(client, uri, "def f():\n    return 1\n")
    cases = [
        ("file:///never-opened.py", 0, 0, "unknown document"),
        (uri, 1, 40, "past the end of line 1"),
        (uri, 9, 0, "outside"),
    ]
    for target, line, character, message in cases:
        with pytest.raises(Exception, match=message):
            await inline(client, target, line, character)
    assert (await inline(client, uri, 1, 9)).items is not None
    assert (await status(client)).ready


async def test_utf16_positions_around_emoji_and_cjk(client: LanguageClient):
    uri = "file:///emoji.py"
    line = 'label = "😀 日本" + self.wid'
    open_document(client, uri, "class A:\n    def f(self):\n        " + line + "\n")
    units = len(("        " + line).encode("utf-16-le")) // 2
    assert units == len("        " + line) + 1  # the emoji is two UTF-16 units
    result = await inline(client, uri, 2, units)
    assert result.items
    item = result.items[0]
    assert item.range.end == types.Position(2, units)
    assert item.range.start == types.Position(2, units - len("wid"))
    assert item.insert_text.startswith("wid")
    inside_the_emoji = len('        label = "') + 1
    with pytest.raises(Exception, match="splits a character"):
        await inline(client, uri, 2, inside_the_emoji)


async def test_a_lone_surrogate_in_the_text_is_read_and_answered(client: LanguageClient):
    """JSON can carry an unpaired ``\\ud800`` (a UTF-16 file with half an emoji), UTF-8 cannot: every request
    in such a document failed with ``surrogates not allowed``, shown to the user at every key."""
    uri = "file:///surrogate.py"
    open_document(client, uri, "s = '\ud800abc'\nprint(s.up")
    shown = len(client.messages)
    result = await inline(client, uri, 1, len("print(s.up"))
    assert result.items and result.items[0].insert_text.startswith("up")
    assert client.messages[shown:] == []


async def test_a_storm_of_keystrokes_keeps_only_the_newest_request(client: LanguageClient):
    uri = "file:///storm.py"
    text, line, character = textwrap_case("self.break_on_hyphens = break_on_hyphens", "self.break_on_hyphens = brea")
    open_document(client, uri, text)
    # the worker counts the new document for fusion first: the storm below is about the model's work
    await wait_for_status(client, lambda state: state.workspace.pending == 0, "the document counted", 30)
    before = await status(client)
    pending = []
    for k, char in enumerate("k_on_hyph"):
        insert(client, uri, k + 2, line, character + k, char)
        request = client.text_document_inline_completion_async(inline_params(uri, line, character + k + 1))
        pending.append(asyncio.ensure_future(request))
        await asyncio.sleep(0.01)
    started = time.perf_counter()
    await status(client)  # answered while the model works: didChange and requests are not blocked
    assert time.perf_counter() - started < 0.5
    results = await asyncio.gather(*pending)
    assert results[-1].items and results[-1].items[0].insert_text.startswith("break_on_hyph")
    assert sum(1 for r in results[:-1] if not r.items) >= 1, "older requests were dropped"
    final = await status(client)
    # each key types on from the request before: the one the model works on is kept for the cache, the
    # queued ones are dropped
    assert final.kept > before.kept and final.superseded > before.superseded and final.stopped == before.stopped


async def test_only_a_burst_of_keys_waits_for_the_debounce(client: LanguageClient):
    text, line, character = textwrap_case("self.drop_whitespace = drop_whitespace", "self.drop_whitespace = drop_w")
    open_document(client, "file:///after_a_pause.py", text)
    # a first line of its own: the KV cache shares nothing of burst.py's window, so its first request still reads
    # it when the second key comes (were it done, the second would be answered from the suggestion cache)
    open_document(client, "file:///burst.py", "# a burst of keys\n" + text)
    await wait_for_status(client, lambda state: state.workspace.pending == 0, "the documents counted", 30)
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"cpc": {**SETTINGS, "debounceMs": 500}}))
    try:
        before = await status(client)
        assert before.settings.debounceMs == 500
        # a key after a pause: the model starts at once
        lone = await inline(client, "file:///after_a_pause.py", line, character)
        after_lone = await status(client)
        assert lone.items and after_lone.debounced == before.debounced
        assert after_lone.from_model == before.from_model + 1
        # two keys 5 ms apart (where nothing is cached): the second waits for a third (none comes), then answers
        first = asyncio.ensure_future(inline(client, "file:///burst.py", line + 1, character))
        await asyncio.sleep(0.005)
        insert(client, "file:///burst.py", 2, line + 1, character, "h")
        second = await inline(client, "file:///burst.py", line + 1, character + 1)
        await first
        after_burst = await status(client)
        assert after_burst.debounced == before.debounced + 1
        assert second.items and second.items[0].insert_text.startswith("drop_wh")
    finally:
        client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={"cpc": SETTINGS}))


async def test_the_memory_requests_freed_is_given_back_after_a_pause_not_while_typing(client: LanguageClient):
    uri = "file:///release.py"
    open_document(client, uri, "import os\n\ndef f():\n    return os.pa")
    insert(client, uri, 2, 3, 16, "t")
    before = await status(client)  # just after an edit: nothing is given back for RELEASE_IDLE_S
    gaps, last = [], time.monotonic()
    for version in range(3, 12):  # typing, a key every 0.3 s for 2.7 s: never quiet long enough
        await asyncio.sleep(0.3)
        gaps.append(round(time.monotonic() - last, 2))
        last = time.monotonic()
        insert(client, uri, version, 3, 14 + version, "h")
    # (once, beside a busy core, it was given back while typing: the keys' gaps tell whether this side was late)
    assert (await status(client)).released == before.released, f"given back while typing; seconds between keys: {gaps}"
    await wait_for_status(client, lambda state: state.released == before.released + 1, "memory given back", 10)
    await asyncio.sleep(RELEASE_IDLE_S + 0.5)
    assert (await status(client)).released == before.released + 1, "once per pause"


async def test_cancel_request_stops_the_work(client: LanguageClient):
    uri = "file:///cancel.py"
    difflib = open(importlib.import_module("difflib").__file__, encoding="utf-8").read()
    # another file: a cold prompt, nothing in the KV cache
    text, line, character = textwrap_case("self.fullbcount = None", "self.fullbco", source=difflib)
    open_document(client, uri, text)
    # the worker counts the new document for fusion first: then `running` below means the model
    await wait_for_status(client, lambda state: state.workspace.pending == 0, "the document counted", 30)
    before = await status(client)
    future = asyncio.ensure_future(
        client.protocol.send_request_async(
            types.TEXT_DOCUMENT_INLINE_COMPLETION, inline_params(uri, line, character), msg_id="to-cancel"
        )
    )
    while not (await status(client)).running:  # wait until the model is at work on the cold prompt
        await asyncio.sleep(0.01)
    client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id="to-cancel"))
    with pytest.raises(Exception, match="cancel"):
        await future
    deadline = time.monotonic() + 10
    while (await status(client)).stopped == before.stopped and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    after = await status(client)
    assert after.stopped == before.stopped + 1 and after.from_model == before.from_model
    # the server goes on: the same request, asked again, is answered
    assert (await inline(client, uri, line, character)).items


async def start_cold_request(client: LanguageClient, module: str, anchor: str, typed: str, uri: str,
                             msg_id: str) -> tuple[asyncio.Future, int, int]:
    """A request on a prompt no cache holds, once the model is at work on it: (its answer, line, character)."""
    source = open(importlib.import_module(module).__file__, encoding="utf-8").read()
    text, line, character = textwrap_case(anchor, typed, source=source)
    open_document(client, uri, text)
    await wait_for_status(client, lambda state: state.workspace.pending == 0, "the document counted", 30)
    future = asyncio.ensure_future(client.protocol.send_request_async(
        types.TEXT_DOCUMENT_INLINE_COMPLETION, inline_params(uri, line, character), msg_id=msg_id))
    while not (await status(client)).running:
        await asyncio.sleep(0.01)
    return future, line, character


async def test_typing_on_keeps_the_work_for_the_suggestion_cache(client: LanguageClient):
    # as VS Code types: the edit, then $/cancelRequest for the request it made stale, then a request
    before = await status(client)
    uri = "file:///typing_on.py"
    older, line, character = await start_cold_request(
        client, "difflib", "self.fullbcount = fullbcount", "self.fullbc", uri, "typed-on")
    insert(client, uri, 2, line, character, "o")
    client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id="typed-on"))
    newer = await inline(client, uri, line, character + 1)
    with pytest.raises(Exception, match="cancel"):
        await older
    after = await status(client)
    assert after.kept == before.kept + 1 and after.stopped == before.stopped
    # the older request's answer ("ount ...", the line before says `self.fullbcount`) answers the newer one
    assert after.from_cache == before.from_cache + 1 and after.from_model == before.from_model
    assert newer.items and newer.items[0].insert_text.startswith("fullbcount")


async def test_a_request_elsewhere_stops_the_work(client: LanguageClient):
    before = await status(client)
    uri = "file:///elsewhere.py"
    older, line, character = await start_cold_request(
        client, "shlex", "self.whitespace_split = False", "self.whitespace_sp", uri, "left-behind")
    # a backspace: the newer cursor does not type on from the older one
    gone = types.Range(types.Position(line, character - 1), types.Position(line, character))
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
        content_changes=[types.TextDocumentContentChangePartial(range=gone, text="")]))
    newer = await inline(client, uri, line, character - 1)
    assert list((await older).items) == []
    after = await status(client)
    assert after.stopped == before.stopped + 1 and after.kept == before.kept and after.from_model == before.from_model + 1
    assert newer.items and newer.items[0].insert_text.startswith("whitespace_split")


async def test_an_early_answer_grows_to_the_end_of_the_line_and_the_editor_is_told(client: LanguageClient):
    """``wordBudgetMs``: past it the request is answered with the first word, the model goes on to the end of
    the line, and ``cpc/suggestionReady`` names the document, version and position: asked again there, the
    suggestion cache answers with the whole line, which extends the word shown."""
    uri = "file:///grow.py"
    text, line, character = textwrap_case("self.break_on_hyphens = break_on_hyphens", "self.break_on_h")
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"cpc": {**SETTINGS, "wordBudgetMs": 1}}))
    try:
        open_document(client, uri, text)
        before = await status(client)
        first = await inline(client, uri, line, character)
        grown = await wait_for_status(client, lambda s: s.grown > before.grown, "the rest of the line")
        # as VS Code asks again (`showNext`: an invoked request), which is no request for alternatives
        again = await inline(client, uri, line, character, types.InlineCompletionTriggerKind.Invoked)
    finally:
        client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={"cpc": SETTINGS}))
    assert [item.insert_text for item in first.items] == ["break_on_hyphens"], "the first word, at once"
    assert len(again.items) == 1, "the grown suggestion alone"
    longer = again.items[0].insert_text
    assert longer.startswith("break_on_hyphens =") and longer.rstrip() != "break_on_hyphens"
    note = client.grown[-1]
    assert (note.uri, note.version, note.position.line, note.position.character) == (uri, 1, line, character)
    after = await status(client)
    assert after.from_cache == grown.from_cache + 1 and after.from_model == before.from_model + 1
    assert after.growing == 0 and after.running == 0 and after.alternatives == before.alternatives


async def test_asking_for_the_next_suggestion_brings_alternatives(client: LanguageClient):
    """VS Code's *Show Next Inline Suggestion* (Alt+]) asks again, invoked, where a suggestion is shown: that
    answer holds `ALTERNATIVES` different suggestions, the one shown first, and the next ask is answered from the
    cache. Invoked where nothing is shown yet (Alt+\\), a request gets ``items`` (one), as a typed key does."""
    text, line, character = textwrap_case("self.width = width", "self.width = wid")
    uri = "file:///alternatives.py"
    invoked = types.InlineCompletionTriggerKind.Invoked
    # a first line of its own: the KV cache holds no window of another test's document after this one
    open_document(client, uri, "# alternatives\n" + text)
    line += 1
    before = await status(client)
    shown = await inline(client, uri, line, character, invoked)
    alternatives = await inline(client, uri, line, character, invoked)
    cycled = await status(client)
    again = await inline(client, uri, line, character, invoked)
    typed = await inline(client, uri, line, character)
    after = await status(client)
    texts = [item.insert_text for item in alternatives.items]
    assert len(shown.items) == 1 and len(typed.items) == 1
    # (the engine's alternatives are its best different starts, each text once: `self.width = wid` has three)
    assert 2 <= len(texts) <= ALTERNATIVES and len(set(texts)) == len(texts), texts
    assert texts[0] == shown.items[0].insert_text, "the suggestion shown comes first: the editor cycles on from it"
    assert all(text.startswith("width") for text in texts), texts
    assert [item.insert_text for item in again.items] == texts
    assert cycled.alternatives == before.alternatives + 1 and cycled.from_model == before.from_model + 2
    assert after.alternatives == before.alternatives + 2 and after.from_cache == cycled.from_cache + 2


async def test_asking_for_alternatives_stops_the_next_line_foreseen(client: LanguageClient):
    """Alt+] the moment a whole line shows: the next line, prepared as if that line were accepted, is not wanted
    any more and stops, where the alternatives used to wait for it (404 ms p50 instead of 238 ms)."""
    uri = "file:///alternatives_foreseen.py"
    text, line, character = textwrap_case("self.break_on_hyphens = break_on_hyphens", "self.break_on_h")
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"cpc": {**SETTINGS, "warmCache": True}}))
    try:
        open_document(client, uri, "# foreseen\n" + text)  # its own first line: no other test's window in the cache
        await wait_for_status(client, lambda state: state.workspace.pending == 0, "the document counted", 30)
        before = await status(client)
        first = await inline(client, uri, line + 1, character)  # it ends its line: the next line is foreseen
        alternatives = await inline(client, uri, line + 1, character, types.InlineCompletionTriggerKind.Invoked)
        after = await wait_for_status(client, lambda s: s.foresight_stopped > before.foresight_stopped,
                                      "the next line's work stopped", 30)
    finally:
        client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={"cpc": SETTINGS}))
    assert first.items and alternatives.items
    assert after.alternatives == before.alternatives + 1 and after.foresight_stopped == before.foresight_stopped + 1


async def test_the_next_line_is_foreseen_after_an_answer_that_ends_its_line(client: LanguageClient):
    """``warmCache``: after the model's whole answer for a cursor at the end of its line, the worker prepares the
    next line's suggestion as if the answer were accepted and Enter pressed: accepted, with Enter typed, the
    suggestion cache answers there, with no model work."""
    uri = "file:///foresee.py"
    text, line, character = textwrap_case("self.break_on_hyphens = break_on_hyphens", "self.break_on_h")
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"cpc": {**SETTINGS, "warmCache": True}}))
    try:
        open_document(client, uri, text)
        before = await status(client)
        first = (await inline(client, uri, line, character)).items[0]
        foreseen = await wait_for_status(client, lambda s: s.foreseen > before.foreseen, "the next line foreseen")
        insert(client, uri, 2, line, character, first.insert_text[character - first.range.start.character :] + "\n")
        following = await inline(client, uri, line + 1, 0)
        after = await status(client)
    finally:
        client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={"cpc": SETTINGS}))
    assert first.insert_text.startswith("break_on_hyphens")
    assert following.items and following.items[0].insert_text.strip(), "the next line, from the cache"
    assert after.from_cache == foreseen.from_cache + 1 and after.from_model == foreseen.from_model


async def test_an_invoked_request_gets_the_whole_line(client: LanguageClient):
    """A request the user invoked is not answered early: VS Code does not ask again at a place where its items
    came from an invoked request, so the first word would stay on screen."""
    text, line, character = textwrap_case("self.break_on_hyphens = break_on_hyphens", "self.break_on_h")
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"cpc": {**SETTINGS, "wordBudgetMs": 1}}))
    try:
        open_document(client, "file:///invoked.py", text)
        before = await status(client)
        answer = await inline(client, "file:///invoked.py", line, character, types.InlineCompletionTriggerKind.Invoked)
        after = await status(client)
    finally:
        client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={"cpc": SETTINGS}))
    assert answer.items[0].insert_text.startswith("break_on_hyphens ="), "the line, not its first word"
    assert after.from_model == before.from_model + 1 and after.growing == 0


async def test_a_client_that_does_not_ask_again_gets_the_whole_line_however_long_it_takes():
    """Without `GROWTH_CAPABILITY` nothing would ever show the rest of a line answered early: such a
    client (a generic LSP client, a one-shot script) gets each suggestion whole, whatever ``wordBudgetMs``."""
    client = await editor_config([*SERVER, "--model", "default"]).start()
    try:
        await client.initialize_session(initialize_params(options={**SETTINGS, "wordBudgetMs": 1}, grows=False))
        await wait_until_loaded(client)
        text, line, character = textwrap_case("self.break_on_hyphens = break_on_hyphens", "self.break_on_h")
        open_document(client, "file:///whole.py", text)
        answer = await inline(client, "file:///whole.py", line, character)
        assert answer.items[0].insert_text.startswith("break_on_hyphens ="), "the line, not its first word"
        state = await status(client)
        assert (state.from_model, state.grown, state.growing) == (1, 0, 0)
    finally:
        await client.shutdown_session()
        await client.stop()


def cold_windows_cut(client: LanguageClient) -> tuple[int, int, int]:
    """Settings that cut every window not in the KV cache (``promptBudgetMs`` 1) and read ahead (``warmCache``),
    and a cursor far into textwrap.py, after ``if self.wid``: its offset, line and character."""
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"cpc": {**SETTINGS, "promptBudgetMs": 1, "warmCache": True}})
    )
    cursor = TEXTWRAP.index("        if self.width <= 0:") + len("        if self.wid")
    before = TEXTWRAP[:cursor]
    return cursor, before.count("\n"), len(before.rpartition("\n")[2])


async def test_a_cold_request_is_answered_from_a_cut_window_then_from_the_whole_one(client: LanguageClient):
    """``promptBudgetMs``: a request far into a new file reads the text just before the cursor; its answer is
    followed by the whole window's, which the suggestion cache then serves, and the next request there reads
    the whole window from the KV cache. A file just opened is read ahead at its end."""
    cursor, line, character = cold_windows_cut(client)
    uri = "file:///warm/textwrap.py"
    try:
        open_document(client, uri, TEXTWRAP[:cursor] + "\n" + TEXTWRAP[cursor:])
        start = await status(client)
        assert (await inline(client, uri, line, character)).items
        cut = await wait_for_status(client, lambda s: s.from_model > start.from_model, "the first answer")
        assert cut.cut_short == start.cut_short + 1, "a cold request far into the file reads a cut window"
        upgraded = await wait_for_status(client, lambda s: s.upgraded > cut.upgraded, "the whole window's answer")
        assert (await inline(client, uri, line, character)).items
        assert (await status(client)).from_cache == upgraded.from_cache + 1, "the cache holds the whole window's answer"
        insert(client, uri, 2, line, character, "x")
        assert (await inline(client, uri, line, character + 1)) is not None
        after = await wait_for_status(client, lambda s: s.from_model + s.from_cache > upgraded.from_model + upgraded.from_cache + 1,
                                      "the next answer")
        assert after.cut_short == cut.cut_short, "the window read for the upgrade serves the next request whole"

        opened = await status(client)
        open_document(client, "file:///warm/opened.py", TEXTWRAP)
        await wait_for_status(client, lambda s: s.warmed > opened.warmed, "reading a new file's end ahead")
    finally:
        client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={"cpc": SETTINGS}))


async def test_a_cursor_come_to_rest_is_read_ahead_there(client: LanguageClient):
    """``cpc/cursorRest``: the editor's cursor put somewhere far from a new file's end (a click, a jump) has the
    window there read ahead instead of the end's, so that the first key there reads no cut window; a rest the
    server cannot place is ignored, and the server goes on serving."""
    cursor, line, character = cold_windows_cut(client)
    uri = "file:///rest/textwrap.py"
    try:
        start = await status(client)
        open_document(client, uri, TEXTWRAP[:cursor] + "\n" + TEXTWRAP[cursor:])  # the rest of the word on a line of its own
        client.protocol.notify(CURSOR_REST, {"textDocument": {"uri": uri}, "position": {"line": line, "character": character}})
        read = await wait_for_status(client, lambda s: s.warmed > start.warmed, "reading ahead where the cursor rests")
        assert (await inline(client, uri, line, character)).items
        answered = await wait_for_status(client, lambda s: s.from_model > read.from_model, "the answer")
        assert answered.cut_short == start.cut_short, "the first key where the cursor rested read a cut window"
        assert answered.warmed == start.warmed + 1, "the new file's end was read too, after the cursor rested elsewhere"
        for bad in ({"position": 3}, {"textDocument": {"uri": "file:///rest/not-open.py"}, "position": {"line": 0, "character": 0}},
                    {"textDocument": {"uri": uri}, "position": {"line": -1, "character": 0}}):
            client.protocol.notify(CURSOR_REST, bad)
        assert (await status(client)).state == "ready"
    finally:
        client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={"cpc": SETTINGS}))


async def test_work_asked_under_settings_since_changed_gives_the_worker_up(client: LanguageClient):
    """A mode switched while the whole window of a cut one is still being read (`make demo` does this): that
    work would be cached under the old mode, which no request asks any more, so it stops, and the request
    in the new mode has the worker instead of waiting seconds for it. So does that work when the user goes
    on in another file."""
    naive = {**SETTINGS, "promptBudgetMs": 1, "mode": "naive"}
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={"cpc": naive}))
    try:
        for name, this in (("switched", "it"), ("left", "me")):  # texts no other test reads: cold in the KV cache
            uri, text = f"file:///{name}/textwrap.py", TEXTWRAP.replace("self", this)
            cursor = text.index(f"        if {this}.width <= 0:") + len(f"        if {this}.wid")
            line, character = text[:cursor].count("\n"), len(text[:cursor].rpartition("\n")[2])
            open_document(client, uri, text[:cursor] + "\n" + text[cursor:])
            start = await status(client)
            assert (await inline(client, uri, line, character)).items
            await wait_for_status(client, lambda s: s.cut_short > start.cut_short, "the cut window's answer")
            if name == "switched":  # the editor switches the mode and asks again here
                client.workspace_did_change_configuration(
                    types.DidChangeConfigurationParams(settings={"cpc": {**naive, "mode": "cpc"}}))
                assert (await inline(client, uri, line, character)).items
            else:  # the user types in another file
                open_document(client, "file:///left/other.py", "import os\nos.pa")
                assert (await inline(client, "file:///left/other.py", 1, 5)) is not None
            after = await wait_for_status(client, lambda s: s.running == 0 and s.growing == 0, "the worker idle")
            assert after.upgrade_stopped == start.upgrade_stopped + 1, "the whole window's read stopped, not finished for nobody"
            client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={"cpc": naive}))
    finally:
        client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={"cpc": SETTINGS}))


async def test_a_key_typed_past_a_cut_windows_suggestion_does_not_wait_for_the_whole_window(client: LanguageClient):
    """A key typed on from a cut window's answer, into its suggestion, is answered from it while the whole
    window is read; a key that leaves the suggestion, or types it to its end, is not, and waited for that
    read: 3.5-6.8 s on a long file on this machine, up to 31 s beside a model test. The read stops for it
    instead, and the key gets its own answer."""
    budget = {**SETTINGS, "promptBudgetMs": 1}
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={"cpc": budget}))
    try:
        # texts no other test reads: cold in the KV cache
        for name, this in (("through", "us"), ("past", "them"), ("to_the_end", "our")):
            uri, text = f"file:///{name}/textwrap.py", TEXTWRAP.replace("self", this)
            cursor = text.index(f"        if {this}.width <= 0:") + len(f"        if {this}.wid")
            line, character = text[:cursor].count("\n"), len(text[:cursor].rpartition("\n")[2])
            open_document(client, uri, text[:cursor] + "\n" + text[cursor:])
            start = await status(client)
            shown = (await inline(client, uri, line, character)).items[0].insert_text
            after_cut = await wait_for_status(client, lambda s: s.cut_short > start.cut_short, "the cut window's answer")
            assert shown.startswith("wid") and len(shown) > 3, shown
            # a key the suggestion shows, one it does not, or the whole suggestion typed
            keys = {"through": shown[3], "past": "Q", "to_the_end": shown[3:]}[name]
            insert(client, uri, 2, line, character, keys)
            assert (await inline(client, uri, line, character + len(keys))) is not None
            after = await wait_for_status(client, lambda s: s.running == 0 and s.growing == 0, "the worker idle")
            if name == "through":
                assert after.from_cache > after_cut.from_cache, "the key was not answered from the cut window's text"
                assert after.upgrade_stopped == start.upgrade_stopped, "the whole window's read stopped for a key it serves"
            else:
                assert after.upgrade_stopped == start.upgrade_stopped + 1, "the key waited for the whole window's read"
    finally:
        client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={"cpc": SETTINGS}))


async def test_a_missing_model_is_reported_and_the_server_keeps_serving(tmp_path):
    config = editor_config([*SERVER, "--model", str(tmp_path / "missing.gguf")])
    client = await config.start()
    try:
        await client.initialize_session(initialize_params())
        state = await wait_until_loaded(client, timeout=30)
        assert not state.ready and "missing.gguf" in state.error and state.state == "error"
        assert any("missing.gguf" in message.message for message in client.messages)
        open_document(client, "file:///x.py", "import o")
        assert list((await inline(client, "file:///x.py", 0, 8)).items) == []
    finally:
        await client.shutdown_session()
        await client.stop()


async def test_utf8_positions_when_the_client_offers_them():
    client = await editor_config([*SERVER, "--model", "smollm2"]).start()
    try:
        result = await client.initialize_session(initialize_params(encodings=["utf-8", "utf-16"]))
        assert result.capabilities.position_encoding == types.PositionEncodingKind.Utf8
        await wait_until_loaded(client)
        line = "name = '日本語' + self.wid"
        open_document(client, "file:///utf8.py", "class A:\n  def f(self):\n    " + line + "\n")
        end = len(("    " + line).encode())
        item = (await inline(client, "file:///utf8.py", 2, end)).items[0]
        assert item.range.start == types.Position(2, end - 3) and item.insert_text.startswith("wid")
    finally:
        await client.shutdown_session()
        await client.stop()
