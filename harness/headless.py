"""A headless editor for `cpc-lsp`: what `make demo`, the latency benchmark and the soak run drive.

It starts the real server as a subprocess, speaks LSP to it like an editor
does (incremental ``didChange`` per keystroke, paste or deletion, then
``textDocument/inlineCompletion`` at the cursor, with ``$/cancelRequest``
for a stale one), and keeps its own copy of the document to apply
suggestions to and to compare with the server's (``cpc/documentText``)::

    async with HeadlessEditor(["--model", "smollm2"]) as editor:
        await editor.open("file:///x.py", "import os\\nos.listd")
        editor.type("i")
        await editor.suggest()  # 'r(path)' or so: the text after the cursor

A notebook opens as VS Code sends one (`HeadlessEditor.open_notebook`:
``notebookDocument/*``, the document its last cell).

Like the editors, it keeps the last ``cpc/status`` the server pushed, and
`suggest_over_time` follows ``cpc/suggestionReady`` (a suggestion grew in
the background) by asking again. Settings are the server's own defaults
except those given.

The server's stderr is read all along: nothing else reads that pipe, and a
server blocked on a full pipe would stop answering.
"""

from __future__ import annotations

import asyncio
import re
import sys
import time
import uuid
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from lsprotocol import types
from pygls.lsp.client import LanguageClient

from lsp_server.extensions import CURSOR_REST, DOCUMENT_TEXT, GROWTH_CAPABILITY, STATUS, SUGGESTION_READY


_LINE_BREAK = re.compile(r"\r\n|\r|\n")
"""LSP's line breaks, and only those (written here, not taken from the server: the editor keeps its own count)."""


@dataclass(eq=False)
class Request:
    """One ``textDocument/inlineCompletion`` request: sent, then answered (or refused)."""

    id: str
    version: int
    """The document version it asked about."""
    cursor: int
    sent: float
    """``time.perf_counter()`` when it was sent."""
    answer: asyncio.Future = field(repr=False)
    """The ``InlineCompletionList`` (or None); an exception for an error response."""
    answered: float | None = None
    """When the response arrived (set by the transport, not when a caller awaits it)."""
    cancelled: bool = False
    """The editor sent ``$/cancelRequest`` for it."""

    @property
    def latency_ms(self) -> float | None:
        return None if self.answered is None else (self.answered - self.sent) * 1000


class HeadlessEditor:
    """One document, one cursor, one server."""

    def __init__(
        self,
        server_args: Sequence[str] = (),
        settings: dict[str, Any] | None = None,
        on_progress: Callable[[str, int | None], None] | None = None,
    ) -> None:
        self.server_args = list(server_args)
        self.settings = dict(settings or {})
        self.client = LanguageClient("cpc-headless", "0.1.0")
        self.uri = ""
        self.text = ""
        self.cursor = 0
        self.version = 0
        self.notebook: types.NotebookDocument | None = None
        """The notebook the document is the last cell of (`open_notebook`), or None."""
        self.shown: list[types.ShowMessageParams] = []
        """Every ``window/showMessage`` from the server (warnings, failed requests)."""
        self.server_stderr: deque[str] = deque(maxlen=200)
        """The server's last stderr lines."""
        self._stderr_reader: asyncio.Task | None = None
        self._on_progress = on_progress or (lambda message, percentage: None)
        self.last_status: Any = None
        """The last ``cpc/status`` notification (the model's state changed)."""
        self._grown: list[Any] = []
        """``cpc/suggestionReady`` notifications not handled yet."""
        self._grown_event = asyncio.Event()

        @self.client.feature(STATUS)
        def status_changed(params: Any) -> None:
            self.last_status = params

        @self.client.feature(SUGGESTION_READY)
        def suggestion_ready(params: Any) -> None:
            self._grown.append(params)
            self._grown_event.set()

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
            self.shown.append(params)
            print(f"cpc-lsp: {params.message}", file=sys.stderr)

    async def __aenter__(self) -> HeadlessEditor:
        await self.client.start_io(sys.executable, "-m", "lsp_server", *self.server_args)
        self._stderr_reader = asyncio.create_task(self._read_stderr(self.client._server.stderr))
        capabilities = types.ClientCapabilities(
            window=types.WindowClientCapabilities(work_done_progress=True),
            general=types.GeneralClientCapabilities(position_encodings=[types.PositionEncodingKind.Utf16]),
            experimental=GROWTH_CAPABILITY,  # it follows cpc/suggestionReady (suggest_over_time)
            notebook_document=types.NotebookDocumentClientCapabilities(  # as VS Code: open_notebook
                synchronization=types.NotebookDocumentSyncClientCapabilities()),
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
        if self._stderr_reader is not None:
            await self._stderr_reader

    async def _read_stderr(self, stream: asyncio.StreamReader) -> None:
        async for line in stream:
            self.server_stderr.append(line.decode(errors="replace").rstrip())

    @property
    def server_pid(self) -> int:
        """The server process's id (to read its memory from ``/proc``)."""
        return self.client._server.pid

    @property
    def server_exit_status(self) -> int | None:
        """None while the server runs."""
        return self.client._server.returncode

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

    async def open_notebook(self, uri: str, cells: Sequence[str], cursor: int | None = None) -> None:
        """Open a notebook of Python code ``cells`` (``notebookDocument/didOpen``, as VS Code sends one); the
        document is its last cell, the cursor at ``cursor`` in it (None: its end)."""
        path = uri.partition(":")[2]
        items = [types.TextDocumentItem(uri=f"vscode-notebook-cell:{path}#cell{number}", language_id="python",
                                        version=1, text=text) for number, text in enumerate(cells)]
        self.notebook = types.NotebookDocument(uri=uri, notebook_type="jupyter-notebook", version=1, cells=[
            types.NotebookCell(kind=types.NotebookCellKind.Code, document=item.uri) for item in items])
        self.uri, self.text, self.version = items[-1].uri, items[-1].text, 1
        self.cursor = len(self.text) if cursor is None else cursor
        self.client.notebook_document_did_open(types.DidOpenNotebookDocumentParams(self.notebook, items))

    def close(self) -> None:
        if self.notebook is not None:
            cells = [types.TextDocumentIdentifier(cell.document) for cell in self.notebook.cells]
            self.client.notebook_document_did_close(
                types.DidCloseNotebookDocumentParams(types.NotebookDocumentIdentifier(self.notebook.uri), cells))
            self.notebook = None
            return
        self.client.text_document_did_close(types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(self.uri)))

    def rest(self) -> None:
        """Tell the server the cursor has come to rest (``cpc/cursorRest``), as both editors do on a click or a jump."""
        here = self.position(self.cursor)
        self.client.protocol.notify(CURSOR_REST, {"textDocument": {"uri": self.uri},
                                                  "position": {"line": here.line, "character": here.character}})

    def type(self, chars: str) -> None:
        """Insert ``chars`` at the cursor: one ``didChange``, as an editor sends per keystroke or paste."""
        self.replace(self.cursor, self.cursor, chars)

    def replace(self, start: int, end: int, text: str) -> None:
        """Replace the characters ``[start, end)`` with ``text`` (one ``didChange``); the cursor ends after it."""
        change = types.TextDocumentContentChangePartial(
            range=types.Range(self.position(start), self.position(end)), text=text
        )
        self.version += 1
        document = types.VersionedTextDocumentIdentifier(uri=self.uri, version=self.version)
        if self.notebook is not None:  # a cell changes as a change of its notebook
            self.notebook.version += 1
            self.client.notebook_document_did_change(types.DidChangeNotebookDocumentParams(
                types.VersionedNotebookDocumentIdentifier(version=self.notebook.version, uri=self.notebook.uri),
                types.NotebookDocumentChangeEvent(cells=types.NotebookDocumentCellChanges(
                    text_content=[types.NotebookDocumentCellContentChanges(document, [change])])),
            ))
        else:
            self.client.text_document_did_change(
                types.DidChangeTextDocumentParams(text_document=document, content_changes=[change]))
        self.text = self.text[:start] + text + self.text[end:]
        self.cursor = start + len(text)

    def request_suggestions(self, invoked: bool = False) -> Request:
        """Ask for inline suggestions at the cursor without waiting for them: as a key does, or ``invoked`` by
        the user (VS Code's Alt+\\, or Alt+] where a suggestion is shown)."""
        kind = types.InlineCompletionTriggerKind.Invoked if invoked else types.InlineCompletionTriggerKind.Automatic
        params = types.InlineCompletionParams(
            text_document=types.TextDocumentIdentifier(self.uri),
            position=self.position(self.cursor),
            context=types.InlineCompletionContext(trigger_kind=kind),
        )
        request_id = str(uuid.uuid4())
        sent = time.perf_counter()
        pending = self.client.protocol.send_request(types.TEXT_DOCUMENT_INLINE_COMPLETION, params, msg_id=request_id)
        request = Request(request_id, self.version, self.cursor, sent, asyncio.wrap_future(pending))

        def arrived(_: object) -> None:
            request.answered = time.perf_counter()

        pending.add_done_callback(arrived)
        return request

    def cancel(self, request: Request) -> None:
        """``$/cancelRequest``, as VS Code sends for a request it no longer needs."""
        request.cancelled = True
        self.client.cancel_request(types.CancelParams(id=request.id))

    async def suggest(self) -> str:
        """The first inline suggestion at the cursor, as the text it inserts after it ('' when none)."""
        return self.shown_text(await self.request_suggestions().answer)

    def shown_text(self, result: types.InlineCompletionList | None, index: int = 0) -> str:
        """What an answer shows after the cursor: its first item's (or item ``index``'s) text past the typed
        part ('' when none)."""
        if not result or len(result.items) <= index:
            return ""
        item = result.items[index]
        replaced = self.cursor - self.offset(item.range.start)
        return item.insert_text[replaced:]

    def accepted_rest(self, result: types.InlineCompletionList | None, index: int = 0) -> str:
        """What the cursor's line holds after the cursor once the answer's first item (or item ``index``) is
        accepted: its text past the typed part, then what is left of the line after its range (closers it took
        in are gone); '' when there is nothing to accept."""
        if not result or len(result.items) <= index:
            return ""
        line_end = self.text.find("\n", self.cursor)
        line_end = len(self.text) if line_end < 0 else line_end
        return self.shown_text(result, index) + self.text[self.offset(result.items[index].range.end) : line_end]

    async def suggest_over_time(self, horizon_s: float = 2.0, accepted: bool = False) -> list[tuple[float, str]]:
        """Ask for a suggestion at the cursor, then follow it as the editors do: each ``cpc/suggestionReady``
        for this document, version and cursor asks again, and the answer replaces what is shown.

        Returns ``(seconds after the request, text shown after the cursor)`` per answer (with ``accepted``:
        the rest of the line once it is accepted, `accepted_rest`), until ``horizon_s`` or until the server
        has nothing more coming for it (no request running, no suggestion growing), whichever is first.
        """
        read = self.accepted_rest if accepted else self.shown_text
        self._grown.clear()
        self._grown_event.clear()
        started = time.perf_counter()
        pending = [self.request_suggestions()]
        shown: list[tuple[float, str]] = []
        here = self.position(self.cursor)
        while (left := horizon_s - (time.perf_counter() - started)) > 0:
            grown = asyncio.ensure_future(self._grown_event.wait())
            waiting = [request.answer for request in pending]
            await asyncio.wait([*waiting, grown], timeout=left if waiting else min(left, 0.05),
                               return_when=asyncio.FIRST_COMPLETED)
            grown.cancel()
            for request in [r for r in pending if r.answer.done()]:
                pending.remove(request)
                answer = None if request.answer.exception() else request.answer.result()
                shown.append((request.answered - started, read(answer)))
            for note in self._grown:
                if note.uri == self.uri and note.version == self.version and (
                        note.position.line, note.position.character) == (here.line, here.character):
                    pending.append(self.request_suggestions())
            self._grown.clear()
            self._grown_event.clear()
            if not pending:
                state = await self.status()
                if not state.running and not getattr(state, "growing", 0) and not self._grown:
                    break
        return shown

    def accept(self, item: types.InlineCompletionItem) -> None:
        """Apply a suggestion as an editor does when Tab accepts it: its range becomes its text."""
        self.replace(self.offset(item.range.start), self.offset(item.range.end), item.insert_text)

    async def server_text(self) -> tuple[str, int]:
        """The server's copy of the document and its version (``cpc/documentText``)."""
        answer = await self.client.protocol.send_request_async(DOCUMENT_TEXT, {"uri": self.uri})
        return answer.text, answer.version

    def position(self, offset: int) -> types.Position:
        """The LSP position of ``offset``: lines end at ``\\r\\n``, ``\\r`` or ``\\n``, columns count UTF-16 units."""
        before = self.text[:offset]  # counted in C: a 3 MB document is no reason for a slow client
        line = before.count("\n") + before.count("\r") - before.count("\r\n")
        column = before[max(before.rfind("\n"), before.rfind("\r")) + 1 :]
        return types.Position(line, len(column.encode("utf-16-le")) // 2)

    def offset(self, position: types.Position) -> int:
        starts = [0] + [match.end() for match in _LINE_BREAK.finditer(self.text)]
        line_start = starts[position.line]
        column, units = line_start, 0
        while units < position.character:
            units += len(self.text[column].encode("utf-16-le")) // 2
            column += 1
        return column
