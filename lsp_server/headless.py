"""A headless editor for `cpc-lsp`: what `make demo` and the latency benchmark drive.

It starts the real server as a subprocess, speaks LSP to it like an editor
does (incremental ``didChange`` per keystroke, then
``textDocument/inlineCompletion`` at the cursor), and keeps its own copy of
the document to apply suggestions to::

    async with HeadlessEditor(["--model", "smollm2"]) as editor:
        await editor.open("file:///x.py", "import os\\nos.listd")
        editor.type("i")
        await editor.suggest()  # 'r(path)' or so: the text after the cursor
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from lsprotocol import types
from pygls.lsp.client import LanguageClient

from lsp_server.server import STATUS


class HeadlessEditor:
    """One document, one cursor, one server."""

    def __init__(
        self,
        server_args: Sequence[str] = (),
        settings: dict[str, Any] | None = None,
        on_progress: Callable[[str, int | None], None] | None = None,
    ) -> None:
        self.server_args = list(server_args)
        self.settings = {"debounceMs": 0, **(settings or {})}
        self.client = LanguageClient("cpc-headless", "0.1.0")
        self.uri = ""
        self.text = ""
        self.cursor = 0
        self.version = 0
        self._on_progress = on_progress or (lambda message, percentage: None)

        @self.client.feature(types.WINDOW_WORK_DONE_PROGRESS_CREATE)
        def create_progress(params: types.WorkDoneProgressCreateParams) -> None:
            return None

        @self.client.feature(types.PROGRESS)
        def progress(params: types.ProgressParams) -> None:
            value = params.value
            message = getattr(value, "message", None) or getattr(value, "title", None) or ""
            self._on_progress(message, getattr(value, "percentage", None))

        @self.client.feature(types.WINDOW_LOG_MESSAGE)
        def log_message(params: types.LogMessageParams) -> None:
            self._on_progress(params.message, None)

        @self.client.feature(types.WINDOW_SHOW_MESSAGE)
        def show_message(params: types.ShowMessageParams) -> None:
            print(f"cpc-lsp: {params.message}", file=sys.stderr)

    async def __aenter__(self) -> HeadlessEditor:
        await self.client.start_io(sys.executable, "-m", "lsp_server", *self.server_args)
        capabilities = types.ClientCapabilities(
            window=types.WindowClientCapabilities(work_done_progress=True),
            general=types.GeneralClientCapabilities(position_encodings=[types.PositionEncodingKind.Utf16]),
        )
        await self.client.initialize_async(
            types.InitializeParams(capabilities=capabilities, initialization_options=self.settings)
        )
        self.client.initialized(types.InitializedParams())
        await self.wait_until_ready()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.client.shutdown_async(None)
        self.client.exit(None)
        await self.client.stop()

    async def status(self) -> Any:
        return await self.client.protocol.send_request_async(STATUS, {})

    async def wait_until_ready(self, timeout: float = 300) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            state = await self.status()
            if state.ready:
                return
            if state.error:
                raise RuntimeError(state.error)
            await asyncio.sleep(0.05)
        raise TimeoutError("cpc-lsp did not load its model in time")

    def configure(self, **settings: Any) -> None:
        self.settings.update(settings)
        self.client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={"cpc": self.settings}))

    async def open(self, uri: str, text: str, cursor: int | None = None) -> None:
        self.uri, self.text, self.version = uri, text, 1
        self.cursor = len(text) if cursor is None else cursor
        self.client.text_document_did_open(
            types.DidOpenTextDocumentParams(types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text))
        )

    def type(self, chars: str) -> None:
        """Insert ``chars`` at the cursor: one ``didChange``, as an editor sends per keystroke."""
        here = self.position(self.cursor)
        self.version += 1
        self.client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=self.uri, version=self.version),
                content_changes=[types.TextDocumentContentChangePartial(range=types.Range(here, here), text=chars)],
            )
        )
        self.text = self.text[: self.cursor] + chars + self.text[self.cursor :]
        self.cursor += len(chars)

    async def suggest(self) -> str:
        """The first inline suggestion at the cursor, as the text it inserts after it ('' when none)."""
        result = await self.client.text_document_inline_completion_async(
            types.InlineCompletionParams(
                text_document=types.TextDocumentIdentifier(self.uri),
                position=self.position(self.cursor),
                context=types.InlineCompletionContext(trigger_kind=types.InlineCompletionTriggerKind.Automatic),
            )
        )
        if not result or not result.items:
            return ""
        item = result.items[0]
        replaced = self.cursor - self.offset(item.range.start)
        return item.insert_text[replaced:]

    def position(self, offset: int) -> types.Position:
        before = self.text[:offset]
        line_start = before.rfind("\n") + 1
        return types.Position(before.count("\n"), len(before[line_start:].encode("utf-16-le")) // 2)

    def offset(self, position: types.Position) -> int:
        lines = self.text.split("\n")
        line = lines[position.line]
        units = 0
        column = 0
        while units < position.character:
            units += len(line[column].encode("utf-16-le")) // 2
            column += 1
        return sum(len(text) + 1 for text in lines[: position.line]) + column
