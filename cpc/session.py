"""A completion session: the engine behind an editor, request after request.

What an editor needs around `cpc.generate`, with no protocol in sight:

- the engine is loaded once (and again when its model settings change), and
  every model call runs on one worker thread the caller provides;
- a request can be abandoned: its ``cancelled`` flag is polled before each
  model evaluation, so a newer keystroke stops older work early;
- a keystroke that types the start of a suggestion just shown is answered
  from the suggestion cache, without the model (llama.vim's trick): the
  rest of the suggestion is still the model's greedy choice. So is a key
  with which the editor closes a pair or types over a closer, where
  accepting the rest makes the line the suggestion made
  (`cpc.window.Window.typed_on_from`).

The engine keeps its own caches across requests (KV cache per token prefix,
snapshots, beams per byte prefix), so the next keystroke after a model
answer costs a few tokens.

Fusion (`cpc.fusion`): the session owns a `ProjectCorpus` built
with the engine (it counts in the engine's token ids, so it is built again
when the model is), fed the open documents (`update_document`, on the worker
thread: only changed lines are counted again) and the workspace folders'
files (`read_folders`, on a background thread; a file changed on disk
since, or whose document closed, is read again alone: `reread_files`). ``complete(...,
fusion=FusionWeights())`` fuses it into every token choice; without
``fusion`` a completion is exactly what it was without one.

A request names the document and the cursor in it (a character offset);
the engine reads its window there (`cpc.window.Window`), and the cache
keeps windows, not documents:

    >>> session = CompletionSession()
    >>> session.load(EngineSettings(model="smollm2"))
    >>> answer = session.complete("doc", "import os\\nos.listd", 18, Options(max_tokens=2))
    >>> answer.completions[0].startswith("ir"), answer.from_cache
    (True, False)
    >>> session.complete("doc", "import os\\nos.listdi", 19, Options(max_tokens=2)).from_cache
    True
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from cpc.engine import Engine
from cpc.file_header import new_file_header
from cpc.folder_files import ReadLimits, ReadProgress, ReadReport, folder_file, folder_files
from cpc.fusion import LONG_LINE, FusionWeights, ProjectCorpus
from cpc.generate import MODES, Options, generate, warm
from cpc.lm import DEFAULT_CONTEXT_SIZE, Cancelled
from cpc.model_files import ModelError, Progress
from cpc.notebooks import Script
from cpc.remote import RemoteMismatch, RemoteOptions, RemoteRefused, RemoteUnavailable, address_problem, is_remote
from cpc.resident import give_back_free_heap
from cpc.serving import REMOTE_APIS
from cpc.stops import replaced_after
from cpc.window import Window, same_after

__all__ = [
    # the door
    "Answer", "CompletionSession", "EngineSettings", "SuggestionCache", "answer_key",
    # what a caller passes and reads: value types
    "DEFAULT_CONTEXT_SIZE", "LONG_LINE", "MODES", "REMOTE_APIS", "FusionWeights", "Options", "ReadLimits", "ReadReport",
    "RemoteOptions", "Window",
    # a notebook's cell read with the code cells around it, a new file after its name
    "Script", "new_file_header",
    # checks of a setting before a load
    "address_problem", "is_remote",
    # how an answer meets the text after the cursor
    "replaced_after",
    # the errors a caller catches
    "Cancelled", "ModelError", "MODEL_SERVER_ERRORS", "RemoteMismatch", "RemoteRefused", "RemoteUnavailable",
]

HEAP_SLACK = 32 << 20
"""Free bytes the C heap may keep after a model answer; past them they go back to the system
(`CompletionSession.complete`). A request frees the rows of 262,144 logits it made (1 MiB each) and glibc
keeps their pages for the next one; typing key by key leaves 16-32 MiB free that way, and a burst of cold
requests more (57 MB at the peak of a soak), which stayed resident until the editor was quiet. Keys typed
into 20 lines (`benchmarks/profile_keystrokes.py`) gave back once in 630 requests at 32 MiB, 150 times at
16, which cost every model keystroke 3 ms of page faults (docs/reliability.md)."""


MODEL_SERVER_ERRORS = (RemoteUnavailable, RemoteMismatch, RemoteRefused)
"""What a request raises when the model's server does not answer, serves another model, or refused the
key: the server is out of reach, not the request wrong (``except MODEL_SERVER_ERRORS``)."""


@dataclass(frozen=True)
class EngineSettings:
    """What loading the engine depends on: change one that the model in use depends on (`loads_same_as`) and
    the model is loaded again."""

    model: str = "default"
    gpu_layers: int = 0
    """A model in this process only."""
    threads: int = 0
    """A model in this process only."""
    context_size: int = DEFAULT_CONTEXT_SIZE
    remote: RemoteOptions = RemoteOptions()
    """How to talk to the server, when ``model`` is one's address (a model in this process ignores it)."""

    def loads_same_as(self, other: EngineSettings) -> bool:
        """Whether an engine loaded with ``other`` is the one these settings load: a model in this process does
        not depend on the remote options, nor a model server's connection on the GPU layers or the threads.

        >>> local = EngineSettings("smollm2")
        >>> local.loads_same_as(replace(local, remote=RemoteOptions(top_k=64))), local.loads_same_as(replace(local, threads=2))
        (True, False)
        >>> served = EngineSettings("http://gpu:8080")
        >>> served.loads_same_as(replace(served, threads=2)), served.loads_same_as(replace(served, remote=RemoteOptions(top_k=64)))
        (True, False)
        """
        return self._what_loads() == other._what_loads()

    def _what_loads(self) -> EngineSettings:
        """These settings with those the model does not depend on at their defaults."""
        if is_remote(self.model):
            return replace(self, gpu_layers=0, threads=0)
        return replace(self, remote=_IN_PROCESS)


_IN_PROCESS = RemoteOptions()
"""The remote options of every model in this process: it has none (one object, so that the key read from the
environment when `RemoteOptions` is made cannot tell two apart)."""


@dataclass(frozen=True)
class Answer:
    completions: list[str]
    """Texts to insert after the cursor, best first."""
    from_cache: bool
    engine_ms: float
    """Time spent in the engine (zero for a cache answer)."""
    lm_calls: int = 0
    cut_short: bool = False
    """The prompt window was cut for the time budget: `CompletionSession.warm` reads it whole."""
    partial: bool = False
    """A first answer (`CompletionSession.complete`'s ``early``): the rest of the line follows."""


@dataclass(frozen=True)
class _Shown:
    """Suggestions answered for one window around the cursor."""

    window: Window
    options: Hashable
    """Everything else the texts depend on (`Options`, and the session's fusion weights)."""
    texts: tuple[str, ...]


class SuggestionCache:
    """The last suggestions per document, for keystrokes that type them: each kept with the window it
    answered (`cpc.window.Window`, at most some 12,000 characters), not the document, and with what else its
    texts depend on (one suggestion and three alternatives at the same place are two entries)."""

    def __init__(self, per_document: int = 16) -> None:
        self.per_document = per_document
        self._shown: dict[str, OrderedDict[tuple[str, Hashable], _Shown]] = {}
        self._lock = threading.Lock()

    def remember(self, key: str, window: Window, options: Hashable, texts: list[str]) -> None:
        if not texts:
            return
        with self._lock:
            shown = self._shown.setdefault(key, OrderedDict())
            shown[window.prefix, options] = _Shown(window, options, tuple(texts))
            shown.move_to_end((window.prefix, options))
            while len(shown) > self.per_document:
                shown.popitem(last=False)

    def lookup(self, key: str, window: Window, options: Hashable) -> list[str] | None:
        """The rest of earlier suggestions that ``window`` has started typing, or None."""
        with self._lock:
            entries = list(self._shown.get(key, {}).values())
        for entry in reversed(entries):
            typed = window.typed_on_from(entry.window)
            if typed is None or entry.options != options:
                continue
            rests = [text[len(typed) :] for text in entry.texts if text.startswith(typed) and len(text) > len(typed)
                     and _same_once_accepted(entry.window, text, window)]
            if rests:
                return rests
        return None

    def forget(self, key: str) -> None:
        with self._lock:
            self._shown.pop(key, None)


def _same_once_accepted(earlier: Window, text: str, window: Window) -> bool:
    """Whether the rest of ``text`` (answered at ``earlier``) past what was typed since, accepted at ``window``,
    leaves the text after the cursor that ``text`` accepted at ``earlier`` leaves: the closers each replaces
    (`replaced_after`) aside, the two suffixes are the same. A pair the editor closed or a closer typed over on
    the way keeps a suggestion that takes the closers in (``f`` + ``(a):``, typed ``(``: ``a):`` replaces ``)``).

    >>> [_same_once_accepted(Window("f", "\\n"), text, Window("f(", ")\\n")) for text in ("(a):", "(a")]
    [True, False]
    """
    rest = text[len(window.prefix) - len(earlier.prefix) :]
    before = earlier.suffix[replaced_after(text, earlier.suffix) :]
    after = window.suffix[replaced_after(rest, window.suffix) :]
    return same_after(after, before, cut=window.suffix_cut and earlier.suffix_cut)


class CompletionSession:
    """One engine, its settings, the suggestion cache and the corpus.

    Call `load`, `complete` and the document methods from one worker thread;
    `read_folders` from another (background) thread; `cached` and
    `corpus_stats` from anywhere.
    """

    def __init__(self) -> None:
        self.engine: Engine | None = None
        self.settings: EngineSettings | None = None
        self.cache = SuggestionCache()
        self.corpus: ProjectCorpus | None = None
        """What fusion knows of the project: the open documents and the workspace folders' files; built with
        the engine."""
        self.documents: dict[str, str] = {}
        """The open documents' texts, to feed a corpus built for another engine."""
        self.max_document_bytes: int | None = None
        """An open document larger than this (UTF-8) is not counted (like a workspace file over its size cap)."""
        self._read_lock = threading.Lock()
        self._files_read: tuple[ProjectCorpus | None, set[str]] = (None, set())
        """The corpus the last `read_folders` read into, and the paths it holds."""

    @property
    def ready(self) -> bool:
        return self.engine is not None

    @property
    def model_name(self) -> str | None:
        """The loaded model's name (its file's), None before a load."""
        return self.engine.vocab.name if self.engine is not None else None

    @property
    def model_path(self) -> str | None:
        """The loaded model's file (for a model on a server: its vocabulary's), None before a load."""
        return str(self.engine.gguf.path) if self.engine is not None else None

    @property
    def server_error(self) -> str | None:
        """Why the model's server did not answer the last time it was asked (None while it does, and for
        a model that runs in this process)."""
        return self.engine.server_error if self.engine is not None else None

    def limit_documents(self, max_bytes: int | None) -> None:
        """Leave open documents larger than ``max_bytes`` (UTF-8) out of the corpus from their
        next update on, like workspace files over their size cap (None: no limit)."""
        self.max_document_bytes = max_bytes

    def placement(self) -> dict[str, Any] | None:
        """Where the model runs (`cpc.engine.Engine.placement`); None before a load."""
        return self.engine.placement() if self.engine is not None else None

    def clear(self) -> None:
        """Make the next request cold (benchmarks): the engine's caches and the suggestions remembered."""
        if self.engine is not None:
            self.engine.clear()
        self.cache = SuggestionCache(self.cache.per_document)

    def load(self, settings: EngineSettings, progress: Progress | None = None) -> None:
        """Load the engine unless it is loaded with these settings already.

        A new engine gets a new corpus, fed the open documents (the
        folders' files are read again by `read_folders`). Raises
        `cpc.model_files.ModelError` for a missing or corrupt model, or a context
        too large to allocate; the engine loaded before stays in service.
        Settings the loaded model does not depend on (`EngineSettings.loads_same_as`) load nothing.
        """
        if self.engine is not None and settings.loads_same_as(self.settings):
            self.settings = settings
            return
        engine = Engine.load(
            settings.model, gpu_layers=settings.gpu_layers, threads=settings.threads or None,
            n_ctx=settings.context_size, fit_context=True, progress=progress, remote=settings.remote,
        )
        engine.time_reading()
        corpus = ProjectCorpus(engine.tokenizer)
        for key, text in self.documents.items():
            corpus.update_document(key, text)
        self.engine, self.settings, self.corpus = engine, settings, corpus
        self.cache = SuggestionCache()
        self.release_memory()  # what the load built and let go (sorting the vocabulary): about 18 MB

    # -- the corpus -------------------------------------------------------------

    def update_document(self, key: str, text: str) -> None:
        """Document ``key`` is open with ``text`` (only the lines that changed are counted again).

        A document over `max_document_bytes` is left out of the corpus
        (counting a 10 MB file would hold up the worker for seconds).
        """
        cap = self.max_document_bytes
        if cap is not None and len(text) > cap // 4:
            size = len(text) if text.isascii() else len(text.encode("utf-8", errors="replace"))
            if size > cap:
                self.documents.pop(key, None)
                if self.corpus is not None:
                    self.corpus.close_document(key)
                return
        self.documents[key] = text
        if self.corpus is not None:
            self.corpus.update_document(key, text)

    def forget(self, key: str) -> None:
        """Drop document ``key``'s suggestions at once, from any thread (it closed: its cache must not
        answer while `close_document` waits for the worker)."""
        self.cache.forget(key)

    def close_document(self, key: str) -> None:
        self.documents.pop(key, None)
        self.cache.forget(key)
        if self.corpus is not None:
            self.corpus.close_document(key)

    def read_folders(
        self,
        folders: Sequence[str | os.PathLike[str]],
        limits: ReadLimits = ReadLimits(),
        progress: ReadProgress | None = None,
        cancelled: Callable[[], bool] | None = None,
        report: ReadReport | None = None,
    ) -> ReadReport:
        """Read the text files of ``folders`` (`cpc.folder_files.folder_files`) into the corpus.

        They replace the files an earlier call read (no folders: the corpus
        keeps no file). Call it on a background thread, not the worker: it
        tokenizes every file and builds the n-gram tables, seconds for tens
        of megabytes, while completions go on. One call runs at a time: a
        call waits for the one before, so cancel that one first. When
        ``cancelled`` turns True the walk stops (``report.stopped ==
        "cancelled"``) and the n-gram tables are left as they were; the
        next call puts things right. ``report`` fills in as the walk goes.
        """
        report = report if report is not None else ReadReport()
        with self._read_lock:
            corpus = self.corpus
            if corpus is None:
                raise RuntimeError("the model is not loaded yet")
            held, earlier = self._files_read
            if held is not corpus:
                earlier = set()
            read: set[str] = set()
            complete = False
            try:
                for file in folder_files(folders, limits, progress, cancelled, report=report):
                    path = str(file.path)
                    corpus.add_file(path, file.text)
                    read.add(path)
                if report.stopped == "cancelled":
                    return report
                for path in earlier - read:
                    corpus.remove_file(path)
                complete = True
                if progress is not None:
                    progress(f"Folders: {report.files} files read, counting their n-grams", None)
                corpus.commit()
            finally:
                self._files_read = (corpus, read if complete else earlier | read)
        return report

    def reread_files(
        self, folders: Sequence[str | os.PathLike[str]], paths: Sequence[str | os.PathLike[str]],
        limits: ReadLimits = ReadLimits(), progress: ReadProgress | None = None,
    ) -> int:
        """Read these files of ``folders`` again, as `read_folders` would read them now: each is counted
        anew, added (within ``limits.max_files``), or dropped when the walk would pass it over or it is
        gone. For files saved, created, changed or deleted after a reading; nothing happens before
        `read_folders` has read into the corpus. Returns how many files changed in the corpus. Call it on
        a background thread, as `read_folders` (one n-gram commit for them all); ``progress`` hears how
        far it is, as `read_folders`' does.
        """
        with self._read_lock:
            corpus = self.corpus
            held, read = self._files_read
            if corpus is None or held is not corpus:
                return 0
            changed = 0
            every = max(1, len(paths) // 50)
            for number, path in enumerate(paths, 1):
                if progress is not None and number % every == 0:
                    progress(f"Changed files: {number} of {len(paths)} read", number / len(paths))
                file = folder_file(folders, path, limits)
                key = str(Path(os.path.abspath(os.fspath(path))))
                if file is not None and (key in read or len(read) < limits.max_files):
                    corpus.add_file(key, file.text)
                    read.add(key)
                elif file is None and key in read:
                    corpus.remove_file(key)
                    read.discard(key)
                else:
                    continue
                changed += 1
            if changed:
                if progress is not None:
                    progress(f"Changed files: {len(paths)} read, counting their n-grams", None)
                corpus.commit()
        return changed

    def corpus_stats(self) -> dict[str, Any] | None:
        """`ProjectCorpus.stats` of the corpus, from any thread (None before the model loads)."""
        corpus = self.corpus
        if corpus is None:
            return None
        for _ in range(100):
            try:
                return corpus.stats()
            except (RuntimeError, KeyError):  # a dict changed as it was read (a file added, a document edited)
                time.sleep(0.001)
        return None

    # -- completions --------------------------------------------------------------

    def window(self, document: str, cursor: int | None = None) -> Window:
        """The text the engine reads around ``cursor`` of ``document`` (`cpc.engine.Engine.window`; before a
        load, a window of the default size)."""
        return self.engine.window(document, cursor) if self.engine is not None else Window.at(document, cursor)

    def cached(
        self, key: str, document: str, cursor: int | None, options: Options, fusion: FusionWeights | None = None
    ) -> Answer | None:
        """A cache answer for ``cursor`` of ``document``, cheap enough for an event loop (no model)."""
        texts = self.cache.lookup(key, self.window(document, cursor), answer_key(options, fusion))
        return None if texts is None else Answer(texts, from_cache=True, engine_ms=0.0)

    def complete(
        self,
        key: str,
        document: str,
        cursor: int | None,
        options: Options,
        cancelled: Callable[[], bool] | None = None,
        fusion: FusionWeights | None = None,
        wanted: Callable[[str], bool] | None = None,
        early: Callable[[Answer], None] | None = None,
        refresh: bool = False, key_start: int = 0,
    ) -> Answer:
        """Suggestions at ``cursor`` (a character offset; None: the end) of document ``key``, whose text is
        ``document``: the engine reads its window there (`window`).

        With ``fusion``, the corpus scores every token choice with these weights, document ``key`` as the
        current file (its cursor line left out, counted from ``key_start``: where key's own text starts in
        ``document``, past the cells above in a notebook's `Script`). Raises `cpc.lm.Cancelled` when ``cancelled`` turns True on
        the way, or when ``wanted`` wants none of the texts so far
        (`cpc.generate.generate`).

        Past `Options.word_budget_ms`, ``early`` (called on this thread) gets
        a first answer, each text cut after its first word (``partial``), and
        the suggestion cache holds it; the answer returned later finishes the
        line, and its first text extends the first text of that early one
        (`grown`), so that an editor showing the early answer can show this
        one instead with no change to what is on screen.

        With ``refresh``, the model answers even where the cache holds an answer, and its answer takes the
        cached one's place (a window cut for `Options.prompt_budget_ms`, read whole).
        """
        answer = None if refresh else self.cached(key, document, cursor, options, fusion)
        if answer is not None:
            return answer
        if self.engine is None:
            raise RuntimeError("the model is not loaded yet")
        started = time.perf_counter()
        window, asked = self.engine.window(document, cursor), answer_key(options, fusion)
        fused = None
        if fusion is not None and self.corpus is not None:
            line = document.count("\n", key_start, len(document) if cursor is None else cursor)
            fused = self.corpus.fusion(key, weights=fusion, cursor_line=line)
        shown: list[str] = []

        def first_answer(texts: list[str]) -> None:
            shown.extend(texts)
            self.cache.remember(key, window, asked, texts)
            early(Answer(texts, from_cache=False, engine_ms=(time.perf_counter() - started) * 1000, partial=True))

        generation = generate(
            self.engine, document, cursor, options, cancelled=cancelled, fusion=fused,
            wanted=wanted, early=first_answer if early is not None else None,
        )
        texts = [completion.text for completion in generation.completions]
        if shown:
            texts = grown(shown, texts)
        self.cache.remember(key, window, asked, texts)
        give_back_free_heap(HEAP_SLACK)
        return Answer(texts, from_cache=False, engine_ms=(time.perf_counter() - started) * 1000,
                      lm_calls=generation.lm_calls, cut_short=generation.cut_short)

    def warm(self, document: str, cursor: int | None, options: Options,
             cancelled: Callable[[], bool] | None = None) -> int:
        """Read the prompt window of a request at ``cursor`` of ``document`` into the KV cache ahead of it
        (`cpc.generate.warm`): the tokens read. Raises `cpc.lm.Cancelled` when ``cancelled`` turns True."""
        if self.engine is None:
            raise RuntimeError("the model is not loaded yet")
        return warm(self.engine, document, cursor, options, cancelled)

    def release_memory(self) -> bool:
        """The editor is quiet: keep only the snapshots a keystroke at the same place reads next
        (`cpc.beam.ByteBeam.rest`), and give the heap's free pages back to the system (`cpc.resident`):
        whether it gave any (never where the C library has no such call: macOS, musl). A burst of requests
        leaves freed numpy rows of 262,144 logits in the heap that glibc keeps for the next burst: about 100 MB
        of resident memory on the default model (docs/reliability.md).

        >>> CompletionSession().release_memory() in (True, False)
        True
        """
        if self.engine is not None:
            self.engine.beam.rest()
        return give_back_free_heap()

    def stop_now(self) -> None:
        """Make the work in flight (`complete`, `warm`) ask its ``cancelled`` now rather than at its next
        model call (`cpc.lm.LanguageModel.stop_now`): for whoever just made that work stale, on any thread."""
        engine = self.engine
        if engine is not None:
            engine.lm.stop_now()


def answer_key(options: Options, fusion: FusionWeights | None) -> Hashable:
    """What a cached answer answers: the options but the prompt budget (an answer read from the whole window
    serves a request that would have cut it), and the fusion weights. Work asked under another key than the
    settings' now serves no request.

    >>> answer_key(Options(prompt_budget_ms=200), None) == answer_key(Options(), None)
    True
    >>> answer_key(Options(mode="naive"), None) == answer_key(Options(mode="cpc"), None)
    False
    """
    return replace(options, prompt_budget_ms=None), fusion


def grown(shown: list[str], final: list[str]) -> list[str]:
    """What replaces the suggestions ``shown`` once their generation ``final``-ly ends: the final texts, led by
    the one that extends the first text shown; the texts shown when none does (what is on screen never changes).

    >>> grown(["in"], ["in(path)"]), grown(["in", "out"], ["out(x)", "in(path)"]), grown(["in"], ["on"])
    (['in(path)'], ['in(path)', 'out(x)'], ['in'])
    """
    head = next((text for text in final if text.startswith(shown[0])), None)
    if head is None:
        return shown
    return [head, *(text for text in final if text != head)]
