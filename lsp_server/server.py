"""The pygls server: thin LSP handlers around a `cpc.session.CompletionSession`.

Each handler converts (document and position in the client's encoding to
the text before and after the cursor), delegates, and converts back (texts
to inline-completion items). The engine never runs on the event loop: the
model loads and completes on one worker thread, so ``didChange`` is handled
while a completion runs. The newest request for a document wins: an older
one is stopped at its next model evaluation and answers an empty list, and
``$/cancelRequest`` stops it the same way, with one exception (Continue's
generator reuse): model work that the newest request only types on from
(`Cursor.typed_on_by`), or that was cancelled after the document was edited
(the user types: the next request is on its way), runs on for the
suggestion cache while its suggestion can still start with the characters
typed since, and the newest request, queued behind it, is answered from
that cache when they do. A request that comes while the first model loads
is held until the load ends (at most ``HOLD_LIMIT_S``;
``$/cancelRequest`` or a newer request for the document end the wait), so
typing before the model is ready still ends with a suggestion; with no
model loaded and none loading, requests answer an empty list. Each change of
the load's state (loading, ready, error) is pushed to the client as a
``cpc/status`` notification, which the editors show.

Growing suggestions (``wordBudgetMs``), for a client that declares it asks
again (`GROWTH_CAPABILITY`; any other gets each suggestion whole): a request
whose generation runs past the word budget is answered at once with each suggestion cut after
its first word, and the model goes on to the end of the line in the
background (`CPCServer.grow`); the suggestion cache then holds the whole
line. When the cache holds more for the document's newest cursor than its
request was answered, the server sends `SUGGESTION_READY` (the document,
its version, the position); the editors ask again there and show the
longer text, which only extends what they showed. Growing work stops like
any other (a newer request that does not type on, a closed document) and
also when a request comes for another document.

A model on a shared server (`cpc.remote`): when the server stops answering,
the user hears it once (``showMessage``), requests answer an empty list
meanwhile, and the first request the server answers again says so; nothing
is restarted.

Reading ahead (``warmCache``): when the editor has been quiet for
`WARM_IDLE_S` and the worker is idle, the worker reads the prompt window at
the last edit (at the end of a newly opened file) into the KV cache, and,
after an answer whose window was cut to keep within ``promptBudgetMs``,
the whole window. Work that an edit, a request or a cancel makes stale (a
read-ahead, a request not typed on) is broken into at once, inside the
model's evaluation (`cpc.session.CompletionSession.stop_now`), so the newest
request gets the worker within a millisecond.

Workspace fusion: the session's workspace model follows the open documents
(each ``didOpen``/``didChange`` queues the document's newest text on the
worker, so a completion submitted after it sees it) and reads the client's
``workspaceFolders`` on a background thread of its own, with work-done
progress; a setting change, a new folder or a model load starts that again.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import re
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams
from pygls.uris import to_fs_path, uri_scheme

from cpc.fusion import FusionWeights, WorkspaceModel
from cpc.generate import Options
from cpc.lm import Cancelled
from cpc.models import ModelError
from cpc.remote import LlamaServerLM, RemoteMismatch, RemoteUnavailable
from cpc.session import Answer, CompletionSession
from cpc.workspace import ScanReport, WorkspaceLimits
from lsp_server import logs
from lsp_server.documents import character_index, use_lsp_documents
from lsp_server.protocol import CheckedLanguageServer
from lsp_server.settings import Settings

T = TypeVar("T")

SERVER_NAME = "cpc-lsp"
SERVER_VERSION = "0.1.0"
STATUS = "cpc/status"
"""A custom request (is the model ready, which one, the request counters), and the
notification of the same name and shape the server sends when the model's state changes."""
SUGGESTION_READY = "cpc/suggestionReady"
GROWTH_CAPABILITY = {"cpc": {"suggestionReady": True}}
"""The client's ``capabilities.experimental`` entry saying it asks again on `SUGGESTION_READY`."""
"""A notification (``{"uri", "version", "position"}``): a suggestion shown there has grown in the
background, so the editor asks again there (VS Code: ``editor.action.inlineSuggest.showNext``;
Neovim: the inline completion's own request) and the suggestion cache answers with the longer text."""
DOCUMENT_TEXT = "cpc/documentText"
"""A custom request: the server's copy of a document (``{"uri"}`` -> ``{"text", "version"}``), to check sync."""

HOLD_LIMIT_S = 300.0
"""The longest a request waits for a loading model: more than a cold start on a slow
CPU (assembling the default model and loading it), and a hung load cannot hold requests forever."""
_WORD_BEFORE = re.compile(r"\w+$")
_LONGEST_WORD = 256
WARM_IDLE_S = 0.25
"""How long the editor must be quiet before the idle model reads a prompt window ahead (`warmCache`)."""
log = logging.getLogger(SERVER_NAME)


@dataclass(frozen=True)
class Cursor:
    """A position in an open document, split the way the engine needs it."""

    uri: str
    prefix: str
    suffix: str
    word: str
    """The part of the identifier before the cursor: suggestions replace it, so they start with it."""
    replace: types.Range
    """From the start of ``word`` to the cursor, in the client's units."""

    def typed_on_by(self, newer: Cursor) -> bool:
        """Whether ``newer`` is this cursor after typing on (on the same line): an answer for this
        one may start with what was typed, and then answers ``newer`` from the suggestion cache.

        >>> nowhere = types.Range(types.Position(0, 0), types.Position(0, 0))
        >>> sel, self_w, se = (Cursor("file:///a.py", text, ")", "", nowhere) for text in ("f(sel", "f(self.w", "f(se"))
        >>> sel.typed_on_by(self_w), sel.typed_on_by(se)
        (True, False)
        """
        typed = newer.prefix[len(self.prefix):]
        return (newer.uri == self.uri and newer.suffix == self.suffix and len(typed) <= _LONGEST_WORD
                and "\n" not in typed and newer.prefix.startswith(self.prefix))


@dataclass
class Indexing:
    """One reading of the workspace folders into the session's workspace model (or the lack of one)."""

    limits: WorkspaceLimits | None = None
    """None: no folder is read (``fusion`` or ``workspaceIndexing`` is off)."""
    folders: tuple[str, ...] = ()
    state: str = "off"
    """``off``, ``no folders``, ``waiting`` (for the model), ``indexing``, ``ready``, ``cancelled`` or ``failed``."""
    workspace: WorkspaceModel | None = None
    """The workspace model it reads into."""
    report: ScanReport = field(default_factory=ScanReport)
    seconds: float | None = None
    error: str | None = None
    stop: threading.Event = field(default_factory=threading.Event)

    def as_json(self) -> dict[str, Any]:
        report = self.report
        return {
            "state": self.state,
            "folders": list(self.folders),
            "read": {"files": report.files, "bytes": report.bytes},
            "skipped": {
                "binary": report.skipped_binary,
                "large": report.skipped_large,
                "unreadable": report.skipped_unreadable,
            },
            "stopped": report.stopped,
            "seconds": self.seconds,
            "error": self.error,
        }


class CPCServer(CheckedLanguageServer):
    """The language server: settings, the session, and the worker thread that runs it."""

    def __init__(self, model: str | None) -> None:
        super().__init__(SERVER_NAME, SERVER_VERSION)
        self.model_override = model
        self.settings = Settings(model=model or "default")
        self.session = CompletionSession()
        self.session.max_document_bytes = self.settings.workspace_max_file_bytes
        self.worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cpc-engine")
        self.load_error: str | None = None
        self.server_error: str | None = None
        """Why the model's server does not answer (None while it does, and for an in-process model)."""
        self.loading = False
        self.load_ended = asyncio.Event()
        """Set when no load is under way: requests held for the model wait on it."""
        self.load_ended.set()
        self.counts = {
            "requests": 0, "from_cache": 0, "from_model": 0, "superseded": 0, "stopped": 0, "not_ready": 0,
            "held": 0, "cut_short": 0, "warmed": 0, "warm_stopped": 0, "kept": 0, "grown": 0,
        }
        """``superseded``: dropped for a newer request before the model started;
        ``stopped``: model work stopped early (a newer request, or ``$/cancelRequest``);
        ``kept``: model work finished for the suggestion cache after a newer request typed on from it;
        ``held``: came while the model loaded and waited for it; ``not_ready``: answered empty for want of a model;
        ``cut_short``: model answers from a window cut for ``promptBudgetMs``;
        ``warmed`` / ``warm_stopped``: prompt windows read ahead while idle, whole / stopped by the user;
        ``grown``: suggestions answered early that grew, and the editor was told (`SUGGESTION_READY`)."""
        self._activity = 0
        """Bumped by every edit and request: read-ahead stops when it changes."""
        self._latest: dict[str, int] = {}
        self._tickets = itertools.count()
        self._newest: dict[str, Cursor] = {}
        """The cursor of the newest request per document."""
        self._last_cursor: Cursor | None = None
        """The cursor of the newest request of all."""
        self._shown: dict[str, tuple[Cursor, list[str]]] = {}
        """Per document, the last request answered and its texts."""
        self.client_grows = False
        """Whether the client asks again on `SUGGESTION_READY` (`GROWTH_CAPABILITY`): only then is a request
        answered early."""
        self.growing = 0
        """Suggestions answered early whose rest is still being generated (``cpc/status``: ``growing``)."""
        self._edits: dict[str, int] = {}
        """Edits per document (``didOpen`` and ``didChange``)."""
        self.in_flight = 0
        """Requests waiting for the worker or running on it."""
        self._running: Callable[[], bool] | None = None
        """Whether the model work on the worker now is stale (its ``cancelled``), while there is some."""
        self.indexing = Indexing()
        self.folders_given = False
        """Whether the client sent ``workspaceFolders`` (then ``rootUri`` is not read, even with no folder left)."""
        self._pending_texts: dict[str, str] = {}
        """Document texts queued for the workspace model: the newest per document."""
        self._pending_lock = threading.Lock()
        self._pending_updates = 0
        """Workspace model updates submitted to the worker and not done yet (``cpc/status``: ``pending``)."""

    # -- settings and the model ---------------------------------------------

    def configure(self, raw: Any) -> None:
        settings, problems = self.settings.updated(raw)
        if self.model_override:
            settings = replace(settings, model=self.model_override)
        for problem in problems:
            self.show(types.MessageType.Warning, f"cpc-lsp setting ignored: {problem}")
        logs.log_documents(settings.log_documents)
        reload = settings.engine != self.settings.engine
        recount = settings.workspace_max_file_bytes != self.settings.workspace_max_file_bytes
        self.settings = settings
        if recount:
            self.session.max_document_bytes = settings.workspace_max_file_bytes
            for uri in list(self.workspace.text_documents):
                self.queue_document(uri)
        if reload and (self.session.ready or self.loading or self.load_error):
            self.set_loading()  # before the next message is read, so `cpc/status` never shows the old state
            self.stop_indexing()
            asyncio.ensure_future(self.load_model())
        else:
            self.refresh_index()

    async def load_model(self) -> None:
        """Load the model on the worker thread, reporting work-done progress.

        A model that fails to load (a bad file, a context too large) is
        reported once, and the model loaded before goes on serving.
        """
        settings = self.settings.engine
        self.set_loading()
        token = str(uuid.uuid4())
        progress = await self._begin_progress(token, f"cpc: loading {settings.model}")
        loop = asyncio.get_running_loop()

        def report(message: str, fraction: float) -> None:
            if progress:
                value = types.WorkDoneProgressReport(message=message, percentage=int(fraction * 100))
                loop.call_soon_threadsafe(self.work_done_progress.report, token, value)

        started = time.perf_counter()
        try:
            await asyncio.wrap_future(
                self.worker.submit(
                    self.session.load,
                    settings.model,
                    gpu_layers=settings.gpu_layers,
                    threads=settings.threads,
                    context_size=settings.context_size,
                    remote=settings.remote,
                    progress=report,
                )
            )
        except Exception as error:  # whatever the file or llama.cpp did, the server goes on
            if not isinstance(error, ModelError):
                log.exception("loading %s failed", settings.model)
            serving = self.session.engine
            still = (
                f"still serving {serving.vocab.name}" if serving
                else "no model is loaded: suggestions stay empty until the `model` setting names one that loads"
            )
            self.load_error = f"could not load the model: {error}; {still}"
            self.show(types.MessageType.Error, f"cpc-lsp {self.load_error}")
        else:
            self.load_error = None
            self.server_error = None
            name = self.session.engine.vocab.name
            self.log(f"model ready: {name} in {time.perf_counter() - started:.1f} s, on {self.session.placement()['text']}")
            lm = self.session.engine.lm
            if isinstance(lm, LlamaServerLM) and lm.last_error:
                self.server_down(lm.last_error)
        finally:
            self.loading = False
            self.load_ended.set()
            if progress:
                self.work_done_progress.end(token, types.WorkDoneProgressEnd(message="done"))
            self.notify_status()
            self.refresh_index()

    def set_loading(self) -> None:
        """A model load starts: requests that come now wait for it; the client is told."""
        if not self.loading:
            self.loading = True
            self.load_ended.clear()
            self.notify_status()

    async def wait_for_model(self, uri: str, ticket: int) -> bool:
        """Hold a request that came while a model loads until the load ends; whether it should go on.

        No wait when a model serves (a reload keeps the old one serving) or
        none is loading. The wait ends early when a newer request for the
        document comes (it is held instead) and at ``HOLD_LIMIT_S``;
        ``$/cancelRequest`` cancels it like any other await.
        """
        if self.session.ready or not self.loading:
            return self.session.ready
        self.counts["held"] += 1
        deadline = time.monotonic() + HOLD_LIMIT_S
        while self.loading and not self.session.ready and self._latest.get(uri) == ticket:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:  # woken at the load's end, or each second to see whether a newer request came
                await asyncio.wait_for(self.load_ended.wait(), min(left, 1.0))
            except TimeoutError:
                pass
        return self.session.ready and self._latest.get(uri) == ticket

    # -- the workspace ----------------------------------------------------------

    def queue_document(self, uri: str) -> None:
        """Bring the workspace model up to date with document ``uri`` (open) on the worker thread.

        Queued behind whatever the worker has, so a completion requested
        after this edit sees it; edits queued meanwhile are coalesced: the
        update applies the newest text.
        """
        document = self.workspace.text_documents.get(uri)
        if document is None:
            return
        with self._pending_lock:
            queued = uri in self._pending_texts
            self._pending_texts[uri] = document.source
        if not queued:
            self._submit_update(self._apply_document, uri)

    def forget_document(self, uri: str) -> None:
        """Document ``uri`` was closed: drop it from the workspace model and the suggestion cache."""
        with self._pending_lock:
            self._pending_texts.pop(uri, None)
        self._newest.pop(uri, None)
        self._edits.pop(uri, None)
        self._shown.pop(uri, None)
        self.stop_stale_work()
        self.session.cache.forget(uri)
        self._submit_update(self.session.close_document, uri)

    def _apply_document(self, uri: str) -> None:
        with self._pending_lock:
            text = self._pending_texts.pop(uri, None)
        if text is not None:
            self.session.update_document(uri, text)

    def _submit_update(self, work, uri: str) -> None:
        def run() -> None:
            try:
                work(uri)
            except Exception:  # the workspace model must not take the worker down
                log.exception("updating the workspace model failed")
            finally:
                with self._pending_lock:
                    self._pending_updates -= 1

        with self._pending_lock:
            self._pending_updates += 1
        self.worker.submit(run)

    def workspace_folders(self) -> tuple[str, ...]:
        """The client's workspace folders (``workspaceFolders``, else ``rootUri``/``rootPath``) on this file system."""
        uris = [folder.uri for folder in self.workspace.folders.values()]
        if not self.folders_given and not uris and self.workspace.root_uri:
            uris = [self.workspace.root_uri]
        paths = []
        for uri in uris:
            path = to_fs_path(uri) if uri_scheme(uri) == "file" else None
            if path and path not in paths:
                paths.append(path)
        return tuple(paths)

    def stop_indexing(self) -> None:
        """Cancel the reading of the workspace folders, if one runs (a model load will start it again)."""
        self.indexing.stop.set()
        if self.indexing.state == "indexing":
            self.indexing = Indexing(self.indexing.limits, self.indexing.folders, state="waiting")

    def refresh_index(self) -> None:
        """Read the workspace folders again if what to read changed, or the workspace model did.

        Called when the settings change, the folders change and a model load
        ends. A reading under way for something else is cancelled first;
        with nothing to read, the files read before are dropped.
        """
        limits = self.settings.workspace_limits
        folders = self.workspace_folders() if limits is not None else ()
        current = self.indexing
        if not self.session.ready or self.loading:
            if (limits, folders) != (current.limits, current.folders) or current.state == "indexing":
                current.stop.set()
                self.indexing = Indexing(limits, folders, state="waiting" if limits and folders else "off")
            return
        workspace = self.session.workspace
        same = (limits, folders, workspace) == (current.limits, current.folders, current.workspace)
        if same and current.state != "cancelled":
            return
        current.stop.set()
        self.indexing = Indexing(limits, folders, state="indexing", workspace=workspace)
        asyncio.ensure_future(self.index_workspace(self.indexing))

    async def index_workspace(self, job: Indexing) -> None:
        """Read ``job``'s folders into its workspace model on a thread of its own, with work-done progress."""
        reading = bool(job.limits and job.folders)
        loop = asyncio.get_running_loop()
        token = str(uuid.uuid4())
        progress = reading and await self._begin_progress(token, "cpc: reading the workspace")
        done: asyncio.Future = loop.create_future()

        def report(message: str, fraction: float | None) -> None:
            if progress:
                value = types.WorkDoneProgressReport(
                    message=message, percentage=None if fraction is None else int(fraction * 100)
                )
                self._call_soon(loop, self.work_done_progress.report, token, value)

        def run() -> None:
            try:
                result = self.session.index_workspace(
                    job.folders if reading else (), job.limits or WorkspaceLimits(), report, job.stop.is_set, job.report
                )
            except BaseException as error:  # noqa: BLE001 - handed to the event loop
                self._call_soon(loop, _settle, done, None, error)
            else:
                self._call_soon(loop, _settle, done, result, None)

        started = time.perf_counter()
        threading.Thread(target=run, name="cpc-workspace", daemon=True).start()
        try:
            await done
        except Exception as error:
            log.error("reading the workspace failed", exc_info=error)
            if self.indexing is job:
                job.state, job.error = "failed", str(error)
            message = "failed"
        else:
            job.seconds = time.perf_counter() - started
            message = self._indexed(job)
        finally:
            if progress:
                self.work_done_progress.end(token, types.WorkDoneProgressEnd(message=message))

    def _indexed(self, job: Indexing) -> str:
        """Settle ``job``'s state after its reading ended; a log line; the progress's last message."""
        report = job.report
        if report.stopped == "cancelled":
            job.state = "cancelled" if self.indexing is job else job.state
            return "cancelled"
        if job.limits is None:
            job.state = "off"
            return "off"
        if not job.folders:
            job.state = "no folders"
            return "no folders"
        job.state = "ready"
        stats = self.session.workspace_stats() or {}
        stopped = f"; stopped at {report.stopped}" if report.stopped else ""
        self.log(
            f"workspace read: {report.files} files, {report.bytes} bytes, {stats.get('tokens', 0)} tokens, "
            f"{stats.get('identifiers', 0)} names in {job.seconds:.1f} s (skipped: {report.skipped_binary} binary, "
            f"{report.skipped_large} too large, {report.skipped_unreadable} unreadable{stopped})"
        )
        return f"{report.files} files"

    @staticmethod
    def _call_soon(loop: asyncio.AbstractEventLoop, callback, *args) -> None:
        try:
            loop.call_soon_threadsafe(callback, *args)
        except RuntimeError:  # the loop is closed: the server is exiting
            pass

    async def _begin_progress(self, token: str, title: str) -> bool:
        window = self.client_capabilities.window
        if not (window and window.work_done_progress):
            return False
        try:
            await self.work_done_progress.create_async(token)
        except Exception:  # the client refused the token: load without a progress bar
            return False
        self.work_done_progress.begin(token, types.WorkDoneProgressBegin(title=title, percentage=0))
        return True

    # -- reading ahead --------------------------------------------------------

    def note_activity(self) -> None:
        """An edit or a request came: read-ahead under way gives the worker back."""
        self._activity += 1
        self.stop_stale_work()

    def stop_stale_work(self) -> None:
        """Stop the model work on the worker now if what just happened made it stale; otherwise it would
        find out at its next poll, up to a chunk of prompt (~240 ms on 2 cores) later."""
        running = self._running
        if running is not None and running():
            self.session.stop_now()

    def _run(self, cancelled: Callable[[], bool], work: Callable[[], T]) -> T:
        """``work()`` on the worker thread, as the work `stop_stale_work` looks at."""
        self._running = cancelled
        try:
            return work()
        finally:
            self._running = None

    def note_edit(self, uri: str) -> None:
        """``uri`` was opened or changed."""
        self.note_activity()
        self._edits[uri] = self._edits.get(uri, 0) + 1

    def schedule_warm(self, uri: str, offset: int | None) -> None:
        """After `WARM_IDLE_S` of quiet, read the prompt window that ends at ``offset`` of ``uri``
        (None: at its end) into the KV cache, unless the worker is busy then."""
        if self.settings.warm_cache:
            asyncio.get_running_loop().call_later(WARM_IDLE_S, self._warm, uri, offset, self._activity)

    def _warm(self, uri: str, offset: int | None, ticket: int) -> None:
        document = self.workspace.text_documents.get(uri)
        if ticket != self._activity or self.in_flight or self.growing or not self.session.ready or self.loading or document is None:
            return
        source = document.source
        cut = len(source) if offset is None else min(offset, len(source))
        options = self.settings.options

        def cancelled() -> bool:
            return self._activity != ticket

        def work() -> None:
            if cancelled():
                return
            try:
                self._run(cancelled, lambda: self.session.warm(source[:cut], source[cut:], options, cancelled))
            except Cancelled:
                self.counts["warm_stopped"] += 1
            except Exception:  # reading ahead is a favour: it must not take the worker down
                log.exception("reading the prompt ahead failed")
            else:
                self.counts["warmed"] += 1

        self.worker.submit(work)

    # -- requests -------------------------------------------------------------

    def edit_end(self, params: types.DidChangeTextDocumentParams) -> int | None:
        """Where the last change of a ``didChange`` ends in the new text (None: a whole-text change)."""
        document = self.workspace.text_documents.get(params.text_document.uri)
        change = params.content_changes[-1] if params.content_changes else None
        if document is None or not isinstance(change, types.TextDocumentContentChangePartial):
            return None
        return document.offset_at_position(change.range.start) + len(change.text)

    def cursor(self, uri: str, position: types.Position) -> Cursor:
        """The text around ``position``; a clear error for an unknown document or a position off the text."""
        document = self.workspace.text_documents.get(uri)
        if document is None:
            raise JsonRpcInvalidParams(f"unknown document {uri}: it was never opened (textDocument/didOpen)")
        lines = document.lines  # LSP's lines: see lsp_server.documents
        line, character = position.line, position.character
        if line > len(lines) or (line == len(lines) and character > 0) or line < 0 or character < 0:
            raise JsonRpcInvalidParams(f"position {line}:{character} is outside {uri} ({len(lines)} lines)")
        text = lines[line].rstrip("\r\n") if line < len(lines) else ""
        column, exact = character_index(text, character, self.workspace.position_codec)
        if not exact:
            raise JsonRpcInvalidParams(
                f"position {line}:{character} is past the end of line {line} or splits a character "
                f"(positions count {self.workspace.position_encoding} code units)"
            )
        start = sum(len(previous) for previous in lines[:line]) + column
        source = document.source
        # in a bounded window: over a whole line `\w+$` is quadratic in its runs of word characters (minified code)
        word = _WORD_BEFORE.search(text, max(0, column - _LONGEST_WORD), column)
        word_text = word.group() if word else ""
        units = self.workspace.position_codec.client_num_units(text[: column - len(word_text)])
        return Cursor(
            uri=uri,
            prefix=source[:start],
            suffix=source[start:],
            word=word_text,
            replace=types.Range(start=types.Position(line, units), end=types.Position(line, character)),
        )

    async def suggest(self, cursor: Cursor, may_grow: bool = False) -> list[str]:
        """Completions for ``cursor``: from the cache, or from the model unless a newer request came.

        When ``may_grow`` (an automatic inline request) and the client asks
        again (`client_grows`), a first answer that ends after its first word
        (past ``wordBudgetMs``) is returned at once, and the model work goes on
        to the end of the line in the background (`grow`). A request the user
        invoked gets the whole suggestion: VS Code does not ask again at a
        place where its items came from an invoked request.
        """
        self.counts["requests"] += 1
        ticket = next(self._tickets)
        self._latest[cursor.uri] = ticket
        self._newest[cursor.uri] = cursor
        self._last_cursor = cursor
        self.note_activity()
        edits = self._edits.get(cursor.uri, 0)
        if not await self.wait_for_model(cursor.uri, ticket):
            self.counts["superseded" if self._latest.get(cursor.uri) != ticket else "not_ready"] += 1
            return []
        options = self.settings.options  # read after the wait: settings may have changed during the load
        fusion = self.settings.fusion_weights
        cached = self.session.cached(cursor.uri, cursor.prefix, cursor.suffix, options, fusion)
        if cached is not None:
            self.counts["from_cache"] += 1
            return self.answered(cursor, cached.completions)
        if self.settings.debounce_ms:
            await asyncio.sleep(self.settings.debounce_ms / 1000)
        stop = threading.Event()
        answered = threading.Event()
        loop = asyncio.get_running_loop()
        first: asyncio.Future = loop.create_future()

        def dropped() -> bool:
            return stop.is_set() or self._latest.get(cursor.uri) != ticket

        def stopped() -> bool:
            newest = self._newest.get(cursor.uri)
            if newest is not cursor:  # a newer request, or the document closed (None)
                return newest is None or not cursor.typed_on_by(newest)
            if answered.is_set() and self._last_cursor.uri != cursor.uri:
                return True  # growing a suggestion in a document the user has left
            return stop.is_set() and self._edits.get(cursor.uri, 0) == edits

        def wanted(text: str) -> bool:  # kept work stops once its suggestion cannot start what was typed on
            typed = self._newest.get(cursor.uri, cursor).prefix[len(cursor.prefix):]
            return text.startswith(typed) or typed.startswith(text)

        def early(answer: Answer) -> None:  # on the worker: the first word, while the line goes on
            answered.set()
            self._call_soon(loop, _settle, first, answer, None)

        if dropped():
            self.counts["superseded"] += 1
            return []

        def work():
            if dropped():  # a newer request came while this one waited for the worker: skip it
                self.counts["superseded"] += 1
                raise Cancelled("superseded while queued")
            try:
                answer = self._run(stopped, lambda: self.session.complete(
                    cursor.uri, cursor.prefix, cursor.suffix, options, stopped, fusion, wanted,
                    early if may_grow and self.client_grows else None))
            except Cancelled:
                self.counts["stopped"] += 1
                raise
            if dropped() and not answered.is_set():  # finished for the cache: the newer request answers from it
                self.counts["kept"] += 1
                raise Cancelled("superseded, kept for the suggestion cache")
            return answer

        self.in_flight += 1
        job = self.worker.submit(work)
        job.add_done_callback(lambda done: self._call_soon(loop, _settle_from, first, done))
        try:
            answer = await first
        except asyncio.CancelledError:
            stop.set()  # $/cancelRequest: pygls cancelled this task
            self.stop_stale_work()
            raise
        except Cancelled:
            return []
        except (RemoteUnavailable, RemoteMismatch) as error:
            self.server_down(str(error))
            return []
        except Exception as error:  # a failed request must not take the server down
            log.exception("completion failed")
            self.show(types.MessageType.Error, f"cpc-lsp: completion failed: {error}")
            return []
        finally:
            self.in_flight -= 1
        if self.server_error is not None and not answer.from_cache:
            self.server_error = None
            self.show(types.MessageType.Info, "cpc-lsp: the model server answers again")
        self.counts["from_cache" if answer.from_cache else "from_model"] += 1
        if answer.partial:
            asyncio.ensure_future(self.grow(cursor, job, options, fusion))
        else:
            self.answered_in_full(cursor, answer)
        return self.answered(cursor, answer.completions)

    def answered(self, cursor: Cursor, texts: list[str]) -> list[str]:
        """Remember what ``cursor``'s request was answered (`grow` tells the editor when the cache holds more)."""
        self._shown[cursor.uri] = (cursor, texts)
        return texts

    def answered_in_full(self, cursor: Cursor, answer: Answer) -> None:
        """The model's whole answer for ``cursor`` is in: a window cut for ``promptBudgetMs`` is read whole when idle."""
        if answer.cut_short:
            self.counts["cut_short"] += 1
            self.schedule_warm(cursor.uri, len(cursor.prefix))

    async def grow(self, cursor: Cursor, job: Future, options: Options, fusion: FusionWeights | None) -> None:
        """Wait for the rest of a suggestion answered early; when the suggestion cache then holds more
        for the document's newest cursor (``cursor``, or one typed on from it) than its request was
        answered, tell the editor (`SUGGESTION_READY`): it asks again, and the cache answers."""
        self.growing += 1
        try:
            try:
                self.answered_in_full(cursor, await asyncio.wrap_future(job))
            except Cancelled:  # stopped, or finished for a newer request typed on from this one
                pass
            except Exception:  # the first answer was given: the rest is a favour
                log.exception("finishing a suggestion failed")
                return
            newest = self._newest.get(cursor.uri)
            shown_for, shown = self._shown.get(cursor.uri, (None, []))
            document = self.workspace.text_documents.get(cursor.uri)
            if newest is None or shown_for is not newest or document is None or not (
                    newest is cursor or cursor.typed_on_by(newest)):
                return
            more = self.session.cached(newest.uri, newest.prefix, newest.suffix, options, fusion)
            if more is None or more.completions == shown or (shown and not more.completions[0].startswith(shown[0])):
                return
            self.counts["grown"] += 1
            position = newest.replace.end
            self.protocol.notify(SUGGESTION_READY, {
                "uri": newest.uri, "version": document.version,
                "position": {"line": position.line, "character": position.character},
            })
        finally:
            self.growing -= 1

    def state(self) -> str:
        """``starting`` (no load asked yet), ``loading``, ``error`` (the last load failed) or ``ready``."""
        if self.loading:
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
        self.server_error = reason

    def status(self) -> dict[str, Any]:
        engine = self.session.engine
        return {
            "state": self.state(),
            "ready": self.session.ready,
            "loading": self.loading,
            "model": engine.vocab.name if engine else None,
            "modelPath": str(engine.model.path) if engine else None,
            "placement": self.session.placement(),
            "error": self.load_error,
            "serverError": self.server_error,
            "running": self.in_flight,
            "growing": self.growing,
            "settings": self.settings.as_client_json(),
            **self.counts,
            "workspace": {
                **(self.session.workspace_stats() or {}),
                "pending": self._pending_updates,
                **self.indexing.as_json(),
            },
        }

    # -- messages -------------------------------------------------------------

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


def _settle(future: asyncio.Future, result: Any, error: BaseException | None) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


def _settle_from(future: asyncio.Future, done: Future) -> None:
    """Settle ``future`` as the finished ``done`` ended, unless an early answer settled it already."""
    error = done.exception()
    _settle(future, None if error is not None else done.result(), error)


def declares_growth(capabilities: types.ClientCapabilities) -> bool:
    """Whether the client's experimental capabilities include `GROWTH_CAPABILITY`.

    >>> declares_growth(types.ClientCapabilities(experimental={"cpc": {"suggestionReady": True}}))
    True
    >>> declares_growth(types.ClientCapabilities()), declares_growth(types.ClientCapabilities(experimental=[1]))
    (False, False)
    """
    experimental = capabilities.experimental
    entry = experimental.get("cpc") if isinstance(experimental, dict) else None
    return isinstance(entry, dict) and entry.get("suggestionReady") is True


def build_server(model: str | None = None) -> CPCServer:
    """A server ready to start on a transport; ``model`` (from ``--model``) wins over client settings."""
    server = CPCServer(model)

    @server.feature(types.INITIALIZE)
    def initialize(ls: CPCServer, params: types.InitializeParams) -> None:
        use_lsp_documents(ls.protocol)
        ls.folders_given = params.workspace_folders is not None
        ls.client_grows = declares_growth(params.capabilities)
        ls.configure(params.initialization_options)

    @server.feature(types.INITIALIZED)
    async def initialized(ls: CPCServer, params: types.InitializedParams) -> None:
        await ls.load_model()

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    def did_change_configuration(ls: CPCServer, params: types.DidChangeConfigurationParams) -> None:
        ls.configure(params.settings)

    @server.feature(types.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)
    def did_change_workspace_folders(ls: CPCServer, params: types.DidChangeWorkspaceFoldersParams) -> None:
        ls.refresh_index()  # pygls has updated ls.workspace.folders

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: CPCServer, params: types.DidOpenTextDocumentParams) -> None:
        ls.note_edit(params.text_document.uri)
        ls.queue_document(params.text_document.uri)
        ls.schedule_warm(params.text_document.uri, None)  # no cursor yet: new code often goes at the end

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: CPCServer, params: types.DidChangeTextDocumentParams) -> None:
        ls.note_edit(params.text_document.uri)
        ls.queue_document(params.text_document.uri)
        ls.schedule_warm(params.text_document.uri, ls.edit_end(params))

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: CPCServer, params: types.DidCloseTextDocumentParams) -> None:
        ls.forget_document(params.text_document.uri)

    @server.feature(types.SHUTDOWN)
    def shutdown(ls: CPCServer, params: Any) -> None:
        ls.stop_indexing()

    @server.feature(types.TEXT_DOCUMENT_INLINE_COMPLETION, types.InlineCompletionOptions())
    async def inline_completion(
        ls: CPCServer, params: types.InlineCompletionParams
    ) -> types.InlineCompletionList:
        cursor = ls.cursor(params.text_document.uri, params.position)
        automatic = params.context.trigger_kind == types.InlineCompletionTriggerKind.Automatic
        texts = await ls.suggest(cursor, may_grow=automatic)
        return types.InlineCompletionList(
            items=[types.InlineCompletionItem(insert_text=cursor.word + text, range=cursor.replace) for text in texts]
        )

    @server.feature(types.TEXT_DOCUMENT_COMPLETION, types.CompletionOptions(trigger_characters=["."]))
    async def completion(ls: CPCServer, params: types.CompletionParams) -> types.CompletionList:
        cursor = ls.cursor(params.text_document.uri, params.position)
        texts = await ls.suggest(cursor)
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
                    text_edit=types.TextEdit(range=cursor.replace, new_text=cursor.word + text),
                )
                for rank, text in enumerate(texts)
            ],
        )

    @server.feature(STATUS)
    def status(ls: CPCServer, params: Any) -> dict[str, Any]:
        return ls.status()

    @server.feature(DOCUMENT_TEXT)
    def document_text(ls: CPCServer, params: Any) -> dict[str, Any]:
        uri = getattr(params, "uri", None)
        document = ls.workspace.text_documents.get(uri) if isinstance(uri, str) else None
        if document is None:
            raise JsonRpcInvalidParams(f"unknown document {uri!r}: {DOCUMENT_TEXT} takes {{\"uri\": <an open document>}}")
        return {"text": document.source, "version": document.version}

    return server
