"""The pygls server: thin LSP handlers around a `cpc.session.CompletionSession`.

Each handler converts (a document and a position in the client's encoding
to the text before and after the cursor), delegates, and converts back
(texts to inline-completion items). What a request may do (newest wins,
typed-on work kept, growing suggestions, reading ahead) is
`lsp_server.requests`'; what fusion's corpus reads (the open documents, the
workspace folders) is `lsp_server.reading`'s. The server class itself
holds the settings and the model's load:

- the model loads on the engine's one worker thread, with work-done
  progress; a model that fails to load is reported once, and the model
  loaded before goes on serving;
- each change of the load's state (loading, ready, error) is pushed to the
  client as a ``cpc/status`` notification, which the editors show;
- a model on a shared server (`cpc.remote`): when the server stops
  answering, the user hears it once (``showMessage``), requests answer an
  empty list meanwhile, and the first request the server answers again
  says so; nothing is restarted.
"""

from __future__ import annotations

import asyncio
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams

from cpc.session import CompletionSession, ModelError
from lsp_server import logs
from lsp_server.cursor import Cursor
from lsp_server.documents import edit_end, use_lsp_documents
from lsp_server.extensions import (
    CURSOR_REST, DOCUMENT_TEXT, GROWTH_CAPABILITY, STATUS, SUGGESTION_READY, declares_growth,
)
from lsp_server.reading import CorpusFeeder
from lsp_server.progress import ProgressBar
from lsp_server.protocol import CheckedLanguageServer
from lsp_server.requests import Loading, Requests
from lsp_server.settings import Settings

__all__ = ["CPCServer", "DOCUMENT_TEXT", "GROWTH_CAPABILITY", "STATUS", "SUGGESTION_READY", "build_server"]

SERVER_NAME = "cpc-lsp"
SERVER_VERSION = "0.1.0"
log = logging.getLogger(SERVER_NAME)


NOTEBOOK_SYNC = types.NotebookDocumentSyncOptions(
    notebook_selector=[types.NotebookDocumentFilterWithNotebook(notebook="*")]
)
"""Every notebook's cells, each a text document (`lsp_server.documents.document_script` reads a code cell with
the code cells around it); advertised to a client that synchronizes notebooks (VS Code)."""


class CPCServer(CheckedLanguageServer):
    """The language server: the settings, the session, the model's load, and what the client is told."""

    def __init__(self, model: str | None) -> None:
        super().__init__(SERVER_NAME, SERVER_VERSION, notebook_document_sync=NOTEBOOK_SYNC)
        self.model_override = model
        self.settings = Settings(model=model or "default")
        self.session = CompletionSession()
        self.session.limit_documents(self.settings.workspace_max_file_bytes)
        self.worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cpc-engine")
        self.loading = Loading()
        self.load_error: str | None = None
        self.server_error: str | None = None
        """Why the model's server does not answer (None while it does, and for an in-process model)."""
        self.requests = Requests(
            self.session, self.worker, lambda: self.settings, lambda: self.workspace, self.loading,
            notify=lambda method, params: self.protocol.notify(method, params),
            show_error=lambda message: self.show(types.MessageType.Error, message),
            server_down=self.server_down, model_answered=self.model_answered,
        )
        self.feeder = CorpusFeeder(
            self.session, self.worker, lambda: self.workspace, lambda: self.settings.read_limits,
            model_ready=lambda: self.session.ready and not self.loading.active,
            progress_bar=lambda title: ProgressBar(self, title), log_line=self.log,
            request_waits_elsewhere=self.requests.waits_elsewhere,
        )

    def configure(self, raw: Any) -> None:
        """Apply the client's settings: the model loads again when what it depends on changed."""
        settings, problems = self.settings.updated(raw)
        if self.model_override:
            settings = replace(settings, model=self.model_override)
        for problem in problems:
            self.show(types.MessageType.Warning, f"cpc-lsp setting ignored: {problem}")
        logs.log_documents(settings.log_documents)
        before, after = self.settings.as_client_json(), settings.as_client_json()
        # (a model server's address is named, not shown: it could carry a user's credentials)
        changed = [key if key == "model" else f"{key} {after[key]!r}" for key in after if after[key] != before[key]]
        if changed:
            log.info("settings changed: %s", ", ".join(changed))
        reload = not settings.engine.loads_same_as(self.settings.engine)
        recount = settings.workspace_max_file_bytes != self.settings.workspace_max_file_bytes
        self.settings = settings
        self.requests.stop_stale_work()  # work asked under the old settings (`Requests.outdated`)
        if recount:
            self.session.limit_documents(settings.workspace_max_file_bytes)
            for uri in list(self.workspace.text_documents):
                self.feeder.queue_document(uri)
        if reload and (self.session.ready or self.loading.active or self.load_error):
            self.set_loading()  # before the next message is read, so `cpc/status` never shows the old state
            self.feeder.stop()
            asyncio.ensure_future(self.load_model())
        else:
            self.feeder.refresh()

    async def watch_files(self) -> None:
        """Ask the client to tell of files changed on disk (``workspace/didChangeWatchedFiles``), where it can
        register that at run time: a branch checked out, a file written by another program."""
        workspace = self.client_capabilities.workspace
        watched = workspace.did_change_watched_files if workspace else None
        if not (watched and watched.dynamic_registration):
            return
        options = types.DidChangeWatchedFilesRegistrationOptions(watchers=[types.FileSystemWatcher(glob_pattern="**/*")])
        registration = types.Registration(id="cpc-workspace-files", method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES,
                                          register_options=options)
        try:
            await self.client_register_capability_async(types.RegistrationParams(registrations=[registration]))
        except Exception as error:  # a client that declines: files saved and closed in the editor still count
            log.info("the client did not watch the workspace's files: %s", error)

    async def load_model(self) -> None:
        """Load the model on the worker thread, reporting work-done progress.

        A model that fails to load (a bad file, a context too large) is
        reported once, and the model loaded before goes on serving.
        """
        settings = self.settings.engine
        self.set_loading()
        bar = ProgressBar(self, f"cpc: loading {settings.model}")
        await bar.begin()
        started = time.perf_counter()
        try:
            await asyncio.wrap_future(self.worker.submit(self.session.load, settings, bar.report))
        except Exception as error:  # whatever the file or llama.cpp did, the server goes on
            if not isinstance(error, ModelError):
                log.exception("loading %s failed", settings.model)
            serving = self.session.model_name
            still = (
                f"still serving {serving}" if serving
                else "no model is loaded: suggestions stay empty until the `model` setting names one that loads"
            )
            self.load_error = f"could not load the model: {error}; {still}"
            self.show(types.MessageType.Error, f"cpc-lsp {self.load_error}")
        else:
            self.load_error = None
            self.server_error = None
            placement = self.session.placement()["text"]
            self.log(f"model ready: {self.session.model_name} in {time.perf_counter() - started:.1f} s, on {placement}")
            if self.session.server_error:
                self.server_down(self.session.server_error)
        finally:
            self.loading.finish()
            bar.end("done")
            self.notify_status()
            self.feeder.refresh()

    def set_loading(self) -> None:
        """A model load starts: requests that come now wait for it; the client is told."""
        if self.loading.start():
            self.notify_status()

    def state(self) -> str:
        """``starting`` (no load asked yet), ``loading``, ``error`` (the last load failed) or ``ready``."""
        if self.loading.active:
            return "loading"
        if self.load_error:
            return "error"
        return "ready" if self.session.ready else "starting"

    def server_down(self, reason: str) -> None:
        """The model's server does not answer (or another model does): tell the user once, not on every keystroke."""
        if self.server_error is None:
            self.show(types.MessageType.Warning, f"cpc-lsp: {reason}")
        else:
            log.info("the model server still does not answer: %s", reason)
        changed = reason != self.server_error
        self.server_error = reason
        if changed:  # the editors' status items show it (`serverError`)
            self.notify_status()

    def model_answered(self) -> None:
        """The model answered a request: if its server did not answer before, the user hears it is back."""
        if self.server_error is not None:
            self.server_error = None
            self.show(types.MessageType.Info, "cpc-lsp: the model server answers again")
            self.notify_status()

    def status(self) -> dict[str, Any]:
        """``cpc/status``: the model's state, where it runs, the settings, the request counters, the corpus and its reading."""
        return {
            "state": self.state(),
            "ready": self.session.ready,
            "loading": self.loading.active,
            "model": self.session.model_name,
            "modelPath": self.session.model_path,
            "placement": self.session.placement(),
            "error": self.load_error,
            "serverError": self.server_error,
            "running": self.requests.in_flight,
            "growing": self.requests.growing,
            "settings": self.settings.as_client_json(),
            **self.requests.counts,
            "workspace": self.feeder.as_json(),
        }

    def notify_status(self) -> None:
        """Send ``cpc/status`` (the request's answer) as a notification: the editors' status items follow it."""
        self.protocol.notify(STATUS, self.status())

    def log(self, message: str) -> None:
        """A line in the log file and the client's log (``window/logMessage``)."""
        log.info(message)
        self.window_log_message(types.LogMessageParams(type=types.MessageType.Info, message=message))

    def show(self, kind: types.MessageType, message: str) -> None:
        """A message for the user (``window/showMessage``), kept in both logs too."""
        log.log(logging.ERROR if kind == types.MessageType.Error else logging.WARNING, message)
        self.window_log_message(types.LogMessageParams(type=kind, message=message))
        self.window_show_message(types.ShowMessageParams(type=kind, message=message))


# -- the handlers: convert, delegate, convert back ---------------------------------------------------


def initialize(ls: CPCServer, params: types.InitializeParams) -> None:
    use_lsp_documents(ls.protocol)
    ls.feeder.folders_given = params.workspace_folders is not None
    ls.requests.client_grows = declares_growth(params.capabilities)
    ls.configure(params.initialization_options)


async def initialized(ls: CPCServer, params: types.InitializedParams) -> None:
    asyncio.ensure_future(ls.watch_files())
    await ls.load_model()


def did_change_configuration(ls: CPCServer, params: types.DidChangeConfigurationParams) -> None:
    ls.configure(params.settings)


def did_change_workspace_folders(ls: CPCServer, params: types.DidChangeWorkspaceFoldersParams) -> None:
    ls.feeder.refresh()  # pygls has updated ls.workspace.folders


def did_open(ls: CPCServer, params: types.DidOpenTextDocumentParams) -> None:
    uri = params.text_document.uri
    ls.requests.note_edit(uri)
    ls.feeder.queue_document(uri)
    ls.requests.schedule_warm(uri, None)  # no cursor yet: new code often goes at the end


def did_change(ls: CPCServer, params: types.DidChangeTextDocumentParams) -> None:
    uri = params.text_document.uri
    ls.requests.note_edit(uri)
    ls.feeder.queue_document(uri)
    ls.requests.schedule_warm(uri, edit_end(ls.workspace, uri, params.content_changes))


def cursor_rest(ls: CPCServer, params: Any) -> None:
    try:
        uri, position = params.textDocument.uri, types.Position(params.position.line, params.position.character)
    except (AttributeError, TypeError, ValueError) as error:
        log.warning("%s ignored: it takes {\"textDocument\": {\"uri\"}, \"position\"} (%s)", CURSOR_REST, error)
        return
    document = ls.workspace.text_documents.get(uri)
    if document is None:
        log.warning("%s ignored: %r is no open document", CURSOR_REST, uri)
        return
    ls.requests.rest_at(uri, document.offset_at_position(position))


def did_close(ls: CPCServer, params: types.DidCloseTextDocumentParams) -> None:
    forget(ls, params.text_document.uri)
    ls.feeder.files_changed([params.text_document.uri])  # what is on disk now, saved or not, is the file


def did_open_notebook(ls: CPCServer, params: types.DidOpenNotebookDocumentParams) -> None:
    for cell in params.cell_text_documents:  # pygls has put them among the text documents
        ls.requests.note_edit(cell.uri)
        ls.feeder.queue_document(cell.uri)
    code = [cell.document for cell in params.notebook_document.cells if cell.kind == types.NotebookCellKind.Code]
    if code:
        ls.requests.schedule_warm(code[-1], None)  # as for a file: new code often goes at the end


def did_change_notebook(ls: CPCServer, params: types.DidChangeNotebookDocumentParams) -> None:
    cells = params.change.cells
    if cells is None:
        return  # the notebook's metadata only
    for cell in (cells.structure.did_open or []) if cells.structure else []:
        ls.requests.note_edit(cell.uri)
        ls.feeder.queue_document(cell.uri)
    for cell in (cells.structure.did_close or []) if cells.structure else []:
        forget(ls, cell.uri)
    for change in cells.text_content or []:
        ls.requests.note_edit(change.document.uri)
        ls.feeder.queue_document(change.document.uri)
        ls.requests.schedule_warm(change.document.uri, edit_end(ls.workspace, change.document.uri, change.changes))


def did_close_notebook(ls: CPCServer, params: types.DidCloseNotebookDocumentParams) -> None:
    for cell in params.cell_text_documents:
        forget(ls, cell.uri)


def forget(ls: CPCServer, uri: str) -> None:
    """Document ``uri`` closed: its requests and its counts go."""
    ls.requests.forget(uri)
    ls.feeder.forget_document(uri)


def did_change_watched_files(ls: CPCServer, params: types.DidChangeWatchedFilesParams) -> None:
    ls.feeder.files_changed(change.uri for change in params.changes)


def shutdown(ls: CPCServer, params: Any) -> None:
    ls.feeder.stop()


async def inline_completion(ls: CPCServer, params: types.InlineCompletionParams) -> types.InlineCompletionList:
    cursor = Cursor.at(ls.workspace, params.text_document.uri, params.position, ls.session.window)
    automatic = params.context.trigger_kind == types.InlineCompletionTriggerKind.Automatic
    texts = await ls.requests.suggest(cursor, may_grow=automatic, invoked=not automatic)
    return types.InlineCompletionList(
        items=[types.InlineCompletionItem(insert_text=cursor.word + text, range=cursor.range_for(text)) for text in texts]
    )


async def completion(ls: CPCServer, params: types.CompletionParams) -> types.CompletionList:
    cursor = Cursor.at(ls.workspace, params.text_document.uri, params.position, ls.session.window)
    texts = await ls.requests.suggest(cursor)
    return types.CompletionList(
        is_incomplete=True,
        items=[
            types.CompletionItem(
                label=cursor.word + text.partition("\n")[0],
                kind=types.CompletionItemKind.Text,
                detail="cpc",
                sort_text=f"{rank:04d}",
                filter_text=cursor.word + text,
                insert_text_format=types.InsertTextFormat.PlainText,
                text_edit=types.TextEdit(range=cursor.range_for(text), new_text=cursor.word + text),
            )
            for rank, text in enumerate(texts)
        ],
    )


def status(ls: CPCServer, params: Any) -> dict[str, Any]:
    return ls.status()


def document_text(ls: CPCServer, params: Any) -> dict[str, Any]:
    uri = getattr(params, "uri", None)
    document = ls.workspace.text_documents.get(uri) if isinstance(uri, str) else None
    if document is None:
        raise JsonRpcInvalidParams(f"unknown document {uri!r}: {DOCUMENT_TEXT} takes {{\"uri\": <an open document>}}")
    return {"text": document.source, "version": document.version}


HANDLERS = (
    (types.INITIALIZE, None, initialize),
    (types.INITIALIZED, None, initialized),
    (types.WORKSPACE_DID_CHANGE_CONFIGURATION, None, did_change_configuration),
    (types.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS, None, did_change_workspace_folders),
    (types.TEXT_DOCUMENT_DID_OPEN, None, did_open),
    (types.TEXT_DOCUMENT_DID_CHANGE, None, did_change),
    (types.TEXT_DOCUMENT_DID_CLOSE, None, did_close),
    (CURSOR_REST, None, cursor_rest),
    (types.NOTEBOOK_DOCUMENT_DID_OPEN, None, did_open_notebook),
    (types.NOTEBOOK_DOCUMENT_DID_CHANGE, None, did_change_notebook),
    (types.NOTEBOOK_DOCUMENT_DID_CLOSE, None, did_close_notebook),
    (types.WORKSPACE_DID_CHANGE_WATCHED_FILES, None, did_change_watched_files),
    (types.SHUTDOWN, None, shutdown),
    # without InlineCompletionOptions pygls does not advertise the feature, and Neovim never asks for it
    (types.TEXT_DOCUMENT_INLINE_COMPLETION, types.InlineCompletionOptions(), inline_completion),
    (types.TEXT_DOCUMENT_COMPLETION, types.CompletionOptions(trigger_characters=["."]), completion),
    (STATUS, None, status),
    (DOCUMENT_TEXT, None, document_text),
)
"""Each LSP method the server answers, its options (what the server advertises), and its handler."""


def build_server(model: str | None = None) -> CPCServer:
    """A server ready to start on a transport; ``model`` (from ``--model``) wins over client settings."""
    server = CPCServer(model)
    for method, options, handler in HANDLERS:
        server.feature(method, options)(handler)
    return server
