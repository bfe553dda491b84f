"""What fusion's corpus reads: the open documents, queued on the engine's worker, and the workspace folders.

The session's corpus (`cpc.session.CompletionSession.corpus`) follows the
open documents: each ``didOpen``/``didChange`` queues the document's newest
text on the worker thread, so a completion submitted after it sees it, and
edits queued meanwhile are coalesced (`queue_document`); a completion
waiting in another document goes first. It reads the
client's ``workspaceFolders`` (else ``rootUri``) on a thread of its own,
with a work-done progress bar; a setting change, a new folder or a model
load starts that again, and a reading under way for something else is
cancelled first (`refresh`). A file closed in the editor, or changed on
disk (``workspace/didChangeWatchedFiles``) after the reading, is read
again alone (`files_changed`), so that a name written since counts, and
one deleted since does not; many at once (a branch checked out) show a
progress bar too.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any

from pygls.uris import to_fs_path, uri_scheme
from pygls.workspace import Workspace

from cpc.session import CompletionSession, ReadLimits, ReadReport
from lsp_server.progress import ProgressBar, call_soon, settle

log = logging.getLogger("cpc-lsp.reading")


REREAD_BAR_FILES = 20
"""Changed files read again in one round from which the editor shows a progress bar (a branch checked out);
a file saved now and then has none, which would only flash."""


@dataclass
class ReadingJob:
    """One reading of the workspace folders into the session's corpus (or the lack of one)."""

    limits: ReadLimits | None = None
    """None: no folder is read (``fusion`` or ``workspaceIndexing`` is off)."""
    folders: tuple[str, ...] = ()
    state: str = "off"
    """``off``, ``no folders``, ``waiting`` (for the model), ``indexing`` (the status's word for reading), ``ready``,
    ``cancelled`` or ``failed``."""
    corpus: object | None = None
    """The corpus it reads into."""
    report: ReadReport = field(default_factory=ReadReport)
    seconds: float | None = None
    error: str | None = None
    stop: threading.Event = field(default_factory=threading.Event)
    reread: int = 0
    """Files read again since (`CorpusFeeder.files_changed`) that changed in the corpus."""

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
                "installed": report.skipped_installed,
            },
            "stopped": report.stopped,
            "seconds": self.seconds,
            "error": self.error,
            "reread": self.reread,
        }


@dataclass(eq=False)
class CorpusFeeder:
    """Feeds the session's corpus: open documents on the worker, folders on a thread of their own."""

    session: CompletionSession
    worker: Executor
    workspace: Callable[[], Workspace]
    """The client's documents and folders."""
    limits: Callable[[], ReadLimits | None]
    """What a reading may read (None: no folder is read)."""
    model_ready: Callable[[], bool]
    """A model is loaded and none is loading: the corpus is the one that will serve."""
    progress_bar: Callable[[str], ProgressBar]
    log_line: Callable[[str], None]
    request_waits_elsewhere: Callable[[str], bool] = lambda uri: False
    """Whether a completion request waits for the worker in a document other than ``uri``: ``uri``'s update
    then goes after it (`queue_document`)."""
    job: ReadingJob = field(default_factory=ReadingJob, init=False)
    folders_given: bool = field(default=False, init=False)
    """Whether the client sent ``workspaceFolders`` (then ``rootUri`` is not read, even with no folder left)."""
    pending: int = field(default=0, init=False)
    """Corpus updates submitted to the worker and not done yet (``cpc/status``: ``pending``)."""
    _pending_texts: dict[str, str] = field(default_factory=dict, init=False)
    """Document texts queued for the corpus: the newest per document."""
    _pending_lock: threading.Lock = field(default_factory=threading.Lock, init=False)
    _changed_files: set[str] = field(default_factory=set, init=False)
    """Files to read again (`files_changed`), gathered while a rereading runs."""
    _rereading: bool = field(default=False, init=False)

    # -- open documents ------------------------------------------------------------

    def queue_document(self, uri: str) -> None:
        """Bring the corpus up to date with document ``uri`` (open) on the worker thread.

        Queued behind whatever the worker has, so a completion requested
        after this edit sees it; edits queued meanwhile are coalesced: the
        update applies the newest text. A completion in another document
        goes first: when an editor opens or reloads many documents at once
        (a session restored, a branch checked out), counting them all took
        seconds before the next suggestion; they count as evidence from the
        other open documents, which can wait a request.
        """
        document = self.workspace().text_documents.get(uri)
        if document is None:
            return
        with self._pending_lock:
            queued = uri in self._pending_texts
            self._pending_texts[uri] = document.source
        if not queued:
            self._submit(self._apply_document, uri)

    def forget_document(self, uri: str) -> None:
        """Document ``uri`` was closed: its suggestions go now, its text leaves the corpus on the worker."""
        with self._pending_lock:
            self._pending_texts.pop(uri, None)
        self.session.forget(uri)
        self._submit(self.session.close_document, uri)

    def _apply_document(self, uri: str) -> None:
        if self.request_waits_elsewhere(uri):
            self._submit(self._apply_document, uri)  # to the back of the queue, behind the request
            return
        with self._pending_lock:
            text = self._pending_texts.pop(uri, None)
        if text is not None:
            self.session.update_document(uri, text)

    def _submit(self, work: Callable[[str], None], uri: str) -> None:
        def run() -> None:
            try:
                work(uri)
            except Exception:  # the corpus must not take the worker down
                log.exception("updating the corpus failed")
            finally:
                with self._pending_lock:
                    self.pending -= 1

        with self._pending_lock:
            self.pending += 1
        self.worker.submit(run)

    # -- workspace folders ---------------------------------------------------------

    def folders(self) -> tuple[str, ...]:
        """The client's workspace folders (``workspaceFolders``, else ``rootUri``/``rootPath``) on this file system."""
        workspace = self.workspace()
        uris = [folder.uri for folder in workspace.folders.values()]
        if not self.folders_given and not uris and workspace.root_uri:
            uris = [workspace.root_uri]
        paths = []
        for uri in uris:
            path = to_fs_path(uri) if uri_scheme(uri) == "file" else None
            if path and path not in paths:
                paths.append(path)
        return tuple(paths)

    def stop(self) -> None:
        """Cancel the reading of the workspace folders, if one runs (a model load will start it again)."""
        self.job.stop.set()
        if self.job.state == "indexing":
            self.job = ReadingJob(self.job.limits, self.job.folders, state="waiting")

    def refresh(self) -> None:
        """Read the workspace folders again if what to read changed, or the corpus did.

        Called when the settings change, the folders change and a model load
        ends. A reading under way for something else is cancelled first;
        with nothing to read, the files read before are dropped.
        """
        limits = self.limits()
        folders = self.folders() if limits is not None else ()
        current = self.job
        if not self.model_ready():
            if (limits, folders) != (current.limits, current.folders) or current.state == "indexing":
                current.stop.set()
                self.job = ReadingJob(limits, folders, state="waiting" if limits and folders else "off")
            return
        corpus = self.session.corpus
        same = (limits, folders, corpus) == (current.limits, current.folders, current.corpus)
        if same and current.state != "cancelled":
            return
        current.stop.set()
        self.job = ReadingJob(limits, folders, state="indexing", corpus=corpus)
        asyncio.ensure_future(self._read(self.job))

    async def _read(self, job: ReadingJob) -> None:
        """Read ``job``'s folders into its corpus on a thread of its own, with work-done progress."""
        reading = bool(job.limits and job.folders)
        bar = self.progress_bar("cpc: reading the workspace")
        if reading:
            await bar.begin()
        loop = asyncio.get_running_loop()
        done: asyncio.Future = loop.create_future()

        def run() -> None:
            try:
                result = self.session.read_folders(
                    job.folders if reading else (), job.limits or ReadLimits(), bar.report, job.stop.is_set,
                    job.report,
                )
            except BaseException as error:  # noqa: BLE001 - handed to the event loop
                call_soon(loop, settle, done, None, error)
            else:
                call_soon(loop, settle, done, result, None)

        started = time.perf_counter()
        threading.Thread(target=run, name="cpc-reading", daemon=True).start()
        try:
            await done
        except Exception as error:
            log.error("reading the workspace failed", exc_info=error)
            if self.job is job:
                job.state, job.error = "failed", str(error)
            message = "failed"
        else:
            job.seconds = time.perf_counter() - started
            message = self._settled(job)
        finally:
            bar.end(message)

    def _settled(self, job: ReadingJob) -> str:
        """Settle ``job``'s state after its reading ended; a log line; the progress's last message."""
        report = job.report
        if report.stopped == "cancelled":
            job.state = "cancelled" if self.job is job else job.state
            return "cancelled"
        if job.limits is None:
            job.state = "off"
            return "off"
        if not job.folders:
            job.state = "no folders"
            return "no folders"
        job.state = "ready"
        stats = self.session.corpus_stats() or {}
        stopped = f"; stopped at {report.stopped}" if report.stopped else ""
        self.log_line(
            f"workspace read: {report.files} files, {report.bytes} bytes, {stats.get('tokens', 0)} tokens, "
            f"{stats.get('identifiers', 0)} names in {job.seconds:.1f} s (skipped: {report.skipped_binary} binary, "
            f"{report.skipped_large} too large, {report.skipped_unreadable} unreadable, {report.skipped_installed} "
            f"folders of installed packages or caches{stopped})"
        )
        return f"{report.files} files"

    def files_changed(self, uris: Iterable[str]) -> None:
        """These files changed on disk (created, changed or deleted), or their documents closed: once the
        folders are read, read them again on a thread of their own
        (`cpc.session.CompletionSession.reread_files`).

        A file open in the editor is not read while it is open (its document is counted edit by edit, and
        an editor that saves every second would have it read every second), only once it closes. Changes
        that come while a rereading runs are gathered and read in one more round; before the folders'
        reading is done, nothing is asked (the reading reads what is on disk).
        """
        job = self.job
        open_documents = self.workspace().text_documents
        paths = {to_fs_path(uri) for uri in uris if uri_scheme(uri) == "file" and uri not in open_documents}
        if job.state != "ready" or job.limits is None or not paths:
            return
        with self._pending_lock:
            self._changed_files.update(path for path in paths if path)
            if self._rereading:
                return
            self._rereading = True
        loop = asyncio.get_running_loop()
        threading.Thread(target=self._reread, args=(job, loop), name="cpc-rereading", daemon=True).start()

    def _reread(self, job: ReadingJob, loop: asyncio.AbstractEventLoop) -> None:
        while True:
            with self._pending_lock:
                paths, self._changed_files = sorted(self._changed_files), set()
                if not paths or self.job is not job:
                    self._rereading = False
                    return
            bar = self._reread_bar(loop) if len(paths) >= REREAD_BAR_FILES else None
            try:
                changed = self.session.reread_files(
                    job.folders, paths, job.limits or ReadLimits(), bar.report if bar else None)
            except Exception:  # the corpus must not take the thread down: the next reading puts it right
                log.exception("reading changed files again failed")
                message = "failed"
            else:
                job.reread += changed
                log.info("workspace: %d changed files read again, %d changed in the corpus", len(paths), changed)
                message = f"{len(paths)} files"
            if bar is not None:
                call_soon(loop, bar.end, message)

    def _reread_bar(self, loop: asyncio.AbstractEventLoop) -> ProgressBar | None:
        """A progress bar for a rereading, begun on the event loop (None when the client takes none in time)."""
        bar = self.progress_bar("cpc: reading changed files")
        try:
            return bar if asyncio.run_coroutine_threadsafe(bar.begin(), loop).result(timeout=5) else None
        except Exception:  # no answer in time (or the loop closed): the rereading goes on without a bar
            return None

    def as_json(self) -> dict[str, Any]:
        """``cpc/status``'s ``workspace``: the corpus's counts, the updates pending, the reading."""
        return {**(self.session.corpus_stats() or {}), "pending": self.pending, **self.job.as_json()}
