"""Request admission on the engine's one worker: newest wins, typed-on work is kept, suggestions grow, the idle model reads ahead.

The engine never runs on the event loop: completions run on one worker
thread, so ``didChange`` is handled while a completion runs. What a request
may do is one small object per request (`Ticket`):

- **Newest wins.** A request is *superseded* when a newer request for its
  document comes: it answers an empty list, before the model if it has not
  started. ``$/cancelRequest`` stops it the same way.
- **Only a burst waits** (``debounceMs``). A request that comes less than
  ``debounceMs`` after its document's previous one (a paste, auto-closed
  brackets, fast typing) waits that long for a newer one before it starts
  the model. A key after a pause starts it at once: were a newer key to
  come, the work would stop within a millisecond and what it read would
  stay in the KV cache.
- **Typed-on work is kept** (Continue's generator reuse). Model work that
  the newest request only types on from (`Cursor.typed_on_by`), or that was
  cancelled after the document was edited (the user types: the next
  request is on its way), runs on for the suggestion cache while its
  suggestion can still start with the characters typed since; the newest
  request, queued behind it, is answered from that cache when they do.
- **Growing suggestions** (``wordBudgetMs``), for a client that declares it
  asks again (`lsp_server.extensions.GROWTH_CAPABILITY`): a request whose
  generation runs past the word budget is answered at once with each
  suggestion cut after its first word, and the model goes on to the end of
  the line in the background. When the cache then holds more for the
  document's newest cursor than its request was answered, the editor is
  told (`lsp_server.extensions.SUGGESTION_READY`) and asks again. Growing
  work stops like any other, and also when a request comes for another
  document.
- **Alternatives when asked for** (`ALTERNATIVES`). A request the user
  invoked where a suggestion is already shown (VS Code's *Show Next Inline
  Suggestion*, Alt+], asks its providers again so) asks the engine for
  `ALTERNATIVES` suggestions at least (it finds fewer different ones at
  times), and the one shown comes first: cycling costs
  nothing until it is asked for, whatever ``items`` is. The editor's own
  refetch of a grown suggestion (`SUGGESTION_READY`) is no such request.
- **Waiting for the model.** A request that comes while the first model
  loads is held until the load ends (at most `HOLD_LIMIT_S`); with no model
  loaded and none loading, requests answer an empty list.
- **Reading ahead** (``warmCache``). When the editor has been quiet for
  `WARM_IDLE_S` and the worker is idle, the worker reads the prompt window
  at the last edit (at the end of a newly opened file), or where the
  editor's cursor came to rest since (`rest_at`: a click, a jump), into
  the KV cache.
- **Cut windows upgraded.** An answer from a window cut for
  ``promptBudgetMs`` (a long file the KV cache lacks) is followed at once
  by the whole window's answer, into the suggestion cache, and the editor
  is told when it differs (`SUGGESTION_READY`): the quick answer comes
  first, the better one replaces it. A key typed through the quick
  answer is answered from it meanwhile; a key that leaves it, or types it
  to its end, stops the read and gets its own answer at once, and the read
  goes on after it.
- **The next line foreseen** (``warmCache``). After the model's whole answer
  for a cursor at the end of its line, the worker prepares the suggestion
  for the line after it, as if the user accepted the answer and pressed
  Enter, into the suggestion cache: the request that comes after the
  accept and the Enter (and the editor's indentation, typed on from there)
  is answered from the cache. The work is wanted while the document's
  newest request is on the way there (the cursor answered, the suggestion
  typed through or accepted) or typed on from there; any other request
  stops it at once (`Foresight`), and so does a request for alternatives
  (the user wants another suggestion than the one it follows).
- **Memory given back when quiet.** After `RELEASE_IDLE_S` with no edit
  and no request, once its work is done, the worker keeps only the model
  snapshots a keystroke at the same place reads next and gives the heap's
  free pages back to the system (`cpc.session.CompletionSession.release_memory`).
- **Stale work stops at once.** Work that an edit, a request or a cancel
  makes stale (a read-ahead, a request not typed on) is broken into inside
  the model's evaluation (`cpc.session.CompletionSession.stop_now`), so the
  newest request gets the worker within a millisecond. So is work asked
  under settings the editor has since changed (another mode, fusion): its
  answer would be cached for requests that no longer come (`Requests.outdated`).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import math
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from pygls.workspace import Workspace

from cpc.session import MODEL_SERVER_ERRORS, Answer, Cancelled, CompletionSession, FusionWeights, Options, answer_key
from lsp_server.cursor import Cursor, Foresight
from lsp_server.documents import document_script
from lsp_server.extensions import SUGGESTION_READY
from lsp_server.progress import call_soon, settle, settle_from
from lsp_server.settings import Settings

T = TypeVar("T")

HOLD_LIMIT_S = 300.0
"""The longest a request waits for a loading model: more than a cold start on a slow
CPU (assembling the default model and loading it), and a hung load cannot hold requests forever."""
WARM_IDLE_S = 0.25
"""How long the editor must be quiet before the idle model reads a prompt window ahead (`warmCache`)."""
RELEASE_IDLE_S = 2.0
"""How long the editor must be quiet before the worker gives the memory that requests freed back to the system:
a pause, not the gap between two keys, so that a burst of typing reuses it instead."""
ALTERNATIVES = 3
"""Suggestions asked at least for an invoked request at a suggestion already shown: as Copilot answers
its cycling requests. Each one more delays that answer (on 2 cores, three came 238 ms after Alt+], p50, where one
suggestion's whole line comes 113 ms after its key: `benchmarks/bench_alternatives.py`)."""
log = logging.getLogger("cpc-lsp.requests")


class Loading:
    """Whether a model load is under way: requests that come meanwhile wait for its end."""

    def __init__(self) -> None:
        self.active = False
        self.ended = asyncio.Event()
        """Set when no load is under way."""
        self.ended.set()

    def start(self) -> bool:
        """A load starts; whether none was under way."""
        if self.active:
            return False
        self.active = True
        self.ended.clear()
        return True

    def finish(self) -> None:
        self.active = False
        self.ended.set()


class Ticket:
    """One completion request in the queue: whether its model work is still wanted.

    The policy of the module docstring, asked by the worker before and
    during the model work (`superseded`, `stale`, `wants`).
    """

    def __init__(self, requests: Requests, cursor: Cursor, number: int, since_previous_s: float) -> None:
        self.requests = requests
        self.cursor = cursor
        self.number = number
        self.since_previous_s = since_previous_s
        """Seconds since the document's previous request came (infinite for its first)."""
        self.edits = requests.edits.get(cursor.uri, 0)
        """The document's edits when the request came."""
        self.stop = threading.Event()
        """``$/cancelRequest`` came for it."""
        self.answered = threading.Event()
        """It was answered early, and its model work goes on growing the suggestion."""
        self.asked: tuple[Options, FusionWeights | None] | None = None
        """The options and fusion weights its work is asked with (set once the settings are read)."""

    def superseded(self) -> bool:
        """Cancelled, or a newer request for the document came: its answer is not wanted."""
        return self.stop.is_set() or self.requests.latest.get(self.cursor.uri) != self.number

    def stale(self) -> bool:
        """Whether its model work should stop: its answer is wanted neither by it nor by the cache."""
        cursor, newest = self.cursor, self.requests.newest.get(self.cursor.uri)
        if newest is not cursor:  # a newer request, or the document closed (None)
            return newest is None or not cursor.typed_on_by(newest) or self.requests.outdated(self.asked)
        if self.answered.is_set() and self.requests.last_cursor.uri != cursor.uri:
            return True  # growing a suggestion in a document the user has left
        return self.stop.is_set() and self.requests.edits.get(cursor.uri, 0) == self.edits

    def wants(self, text: str) -> bool:
        """Whether a suggestion ``text`` can still start what was typed since (kept work stops otherwise)."""
        typed = self.cursor.typed_since(self.requests.newest.get(self.cursor.uri, self.cursor))
        return text.startswith(typed) or typed.startswith(text)


def _counters() -> dict[str, int]:
    return dict.fromkeys((
        "requests", "debounced", "from_cache", "from_model", "superseded", "stopped", "not_ready",
        "held", "cut_short", "upgraded", "upgrade_stopped", "warmed", "warm_stopped", "kept", "grown", "foreseen",
        "foresight_stopped", "released", "alternatives",
    ), 0)


@dataclass(eq=False)
class Requests:
    """Admission of completion requests and read-ahead on the engine's worker thread."""

    session: CompletionSession
    worker: Executor
    settings: Callable[[], Settings]
    workspace: Callable[[], Workspace]
    loading: Loading
    notify: Callable[[str, Any], None]
    """Sends a notification to the client."""
    show_error: Callable[[str], None]
    """Tells the user a request failed."""
    server_down: Callable[[str], None]
    """The model's server does not answer."""
    model_answered: Callable[[], None]
    """The model answered (its server, if it was down, is back)."""
    counts: dict[str, int] = field(default_factory=_counters, init=False)
    """``debounced``: held for ``debounceMs`` because the document's previous request came less than that before;
    ``superseded``: dropped for a newer request before the model started;
    ``stopped``: model work stopped early (a newer request, or ``$/cancelRequest``);
    ``kept``: model work finished for the suggestion cache after a newer request typed on from it;
    ``held``: came while the model loaded and waited for it; ``not_ready``: answered empty for want of a model;
    ``cut_short``: model answers from a window cut for ``promptBudgetMs``; ``upgraded`` / ``upgrade_stopped``:
    their whole window's answers that followed, given / stopped (a newer request elsewhere, an edit);
    ``warmed`` / ``warm_stopped``: prompt windows read ahead while idle, whole / stopped by the user;
    ``grown``: suggestions answered early that grew, and the editor was told (`SUGGESTION_READY`);
    ``foreseen`` / ``foresight_stopped``: next lines prepared after an answer, whole / stopped (`Foresight`);
    ``released``: pauses after which the heap's free memory was given back (`RELEASE_IDLE_S`);
    ``alternatives``: invoked requests at a suggestion shown, asking for `ALTERNATIVES` at least."""
    client_grows: bool = field(default=False, init=False)
    """Whether the client asks again on `SUGGESTION_READY`: only then is a request answered early."""
    in_flight: int = field(default=0, init=False)
    """Requests waiting for the worker or running on it."""
    growing: int = field(default=0, init=False)
    """Suggestions answered early whose rest is still being generated, or answered from a cut window whose
    whole one is still being read (`_upgrade`)."""
    latest: dict[str, int] = field(default_factory=dict, init=False)
    """The number of the newest request per document."""
    newest: dict[str, Cursor] = field(default_factory=dict, init=False)
    """The cursor of the newest request per document."""
    last_cursor: Cursor | None = field(default=None, init=False)
    """The cursor of the newest request of all."""
    edits: dict[str, int] = field(default_factory=dict, init=False)
    """Edits per document (``didOpen`` and ``didChange``)."""
    _numbers: Iterator[int] = field(default_factory=itertools.count, init=False)
    _requested_at: dict[str, float] = field(default_factory=dict, init=False)
    """Per document, when its newest request came (`time.monotonic`)."""
    _shown: dict[str, tuple[Cursor, list[str]]] = field(default_factory=dict, init=False)
    """Per document, the last request answered and its texts."""
    _alternatives_asked: int = field(default=0, init=False)
    """Bumped by every request for alternatives: a next line foreseen before it is no longer wanted."""
    _told: dict[str, Cursor] = field(default_factory=dict, init=False)
    """Per document, the cursor whose suggestion grew (`SUGGESTION_READY`) while no request has come since: the
    editor's refetch is expected there."""
    _activity: int = field(default=0, init=False)
    """Bumped by every edit and request: read-ahead stops when it changes."""
    _rests: int = field(default=0, init=False)
    """Bumped by every cursor come to rest (`rest_at`): a read ahead asked before it is no longer wanted."""
    _running: Callable[[], bool] | None = field(default=None, init=False)
    """Whether the model work on the worker now is stale (its ``cancelled``), while there is some."""

    # -- completions -----------------------------------------------------------------

    def waits_elsewhere(self, uri: str) -> bool:
        """Whether a completion request waits for the worker (or runs on it) in a document other than ``uri``.

        Read on the worker thread: `in_flight` and `last_cursor` are swapped whole on the event loop.
        """
        cursor = self.last_cursor
        return self.in_flight > 0 and cursor is not None and cursor.uri != uri

    async def suggest(self, cursor: Cursor, may_grow: bool = False, invoked: bool = False) -> list[str]:
        """Completions for ``cursor``: from the cache, or from the model unless a newer request came.

        When ``may_grow`` (an automatic inline request) and the client asks
        again (`client_grows`), a first answer that ends after its first word
        (past ``wordBudgetMs``) is returned at once, and the model work goes on
        to the end of the line in the background (`_grow`). A request the user
        ``invoked`` gets the whole suggestion: VS Code does not ask again at a
        place where its items came from an invoked request; at a suggestion
        already shown, it gets the alternatives too (`ALTERNATIVES`).
        """
        shown = self._alternatives_to(cursor) if invoked else None
        self._alternatives_asked += shown is not None  # before the admission, which stops what this makes stale
        ticket = self._admit(cursor)
        if not await self._wait_for_model(ticket):
            self.counts["superseded" if ticket.superseded() else "not_ready"] += 1
            return []
        settings = self.settings()  # read after the wait: settings may have changed during the load
        options, fusion = settings.options, settings.fusion_weights
        if shown is not None:
            self.counts["alternatives"] += 1
            options = replace(options, n=max(options.n, ALTERNATIVES))
        ticket.asked = options, fusion
        cached = self.session.cached(cursor.uri, cursor.document, cursor.offset, options, fusion)
        if cached is not None:
            self.counts["from_cache"] += 1
            return self._shown_for(cursor, shown_first(shown, cached.completions, options.n))
        if ticket.since_previous_s * 1000 < settings.debounce_ms:  # keys come in a burst: wait for the next
            self.counts["debounced"] += 1
            await asyncio.sleep(settings.debounce_ms / 1000)
        if ticket.superseded():
            self.counts["superseded"] += 1
            return []
        answer, job = await self._answer(ticket, options, fusion, early=may_grow and self.client_grows)
        if answer is None:
            return []
        self.counts["from_cache" if answer.from_cache else "from_model"] += 1
        if answer.partial:
            asyncio.ensure_future(self._grow(ticket, job, options, fusion))
        else:
            self._answered_in_full(cursor, answer)
        return self._shown_for(cursor, shown_first(shown, answer.completions, options.n))

    def _alternatives_to(self, cursor: Cursor) -> str | None:
        """For a request the user invoked: the suggestion shown at its place, whose alternatives it asks for;
        None where none is shown, and for the editor's refetch of a suggestion that grew there."""
        told = self._told.pop(cursor.uri, None)
        shown_for, shown = self._shown.get(cursor.uri, (None, []))
        if not shown or shown_for.window != cursor.window or (told is not None and told.window == cursor.window):
            return None
        return shown[0]

    def _admit(self, cursor: Cursor) -> Ticket:
        """The request becomes its document's newest: older work there is superseded (and stopped if stale)."""
        self._told.pop(cursor.uri, None)
        self.counts["requests"] += 1
        now = time.monotonic()
        ticket = Ticket(self, cursor, next(self._numbers), now - self._requested_at.get(cursor.uri, -math.inf))
        self._requested_at[cursor.uri] = now
        self.latest[cursor.uri] = ticket.number
        self.newest[cursor.uri] = cursor
        self.last_cursor = cursor
        self.note_activity()
        return ticket

    async def _wait_for_model(self, ticket: Ticket) -> bool:
        """Hold a request that came while a model loads until the load ends; whether it should go on.

        No wait when a model serves (a reload keeps the old one serving) or
        none is loading. The wait ends early when a newer request for the
        document comes (it is held instead) and at `HOLD_LIMIT_S`;
        ``$/cancelRequest`` cancels it like any other await.
        """
        if self.session.ready or not self.loading.active:
            return self.session.ready
        self.counts["held"] += 1
        deadline = time.monotonic() + HOLD_LIMIT_S
        uri = ticket.cursor.uri
        while self.loading.active and not self.session.ready and self.latest.get(uri) == ticket.number:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:  # woken at the load's end, or each second to see whether a newer request came
                await asyncio.wait_for(self.loading.ended.wait(), min(left, 1.0))
            except TimeoutError:
                pass
        return self.session.ready and self.latest.get(uri) == ticket.number

    async def _answer(
        self, ticket: Ticket, options: Options, fusion: FusionWeights | None, early: bool
    ) -> tuple[Answer | None, Future]:
        """The model's answer (the first one, when ``early``), and the worker's job; None when there is none."""
        loop = asyncio.get_running_loop()
        first: asyncio.Future = loop.create_future()

        def answered_early(answer: Answer) -> None:  # on the worker: the first word, while the line goes on
            ticket.answered.set()
            call_soon(loop, settle, first, answer, None)

        self.in_flight += 1
        job = self.worker.submit(self._work, ticket, options, fusion, answered_early if early else None)
        job.add_done_callback(lambda done: call_soon(loop, settle_from, first, done))
        try:
            answer = await first
        except asyncio.CancelledError:
            ticket.stop.set()  # $/cancelRequest: pygls cancelled this task
            self.stop_stale_work()
            raise
        except Cancelled:
            return None, job
        except MODEL_SERVER_ERRORS as error:
            self.server_down(str(error))
            return None, job
        except Exception as error:  # a failed request must not take the server down
            log.exception("completion failed")
            self.show_error(f"cpc-lsp: completion failed: {error}")
            return None, job
        finally:
            self.in_flight -= 1
        if not answer.from_cache:
            self.model_answered()
        return answer, job

    def _work(self, ticket: Ticket, options: Options, fusion: FusionWeights | None,
              early: Callable[[Answer], None] | None) -> Answer:
        """The request's model work, on the worker thread."""
        if ticket.superseded():  # a newer request came while this one waited for the worker: skip it
            self.counts["superseded"] += 1
            raise Cancelled("superseded while queued")
        cursor = ticket.cursor
        try:
            answer = self._run(ticket.stale, lambda: self.session.complete(
                cursor.uri, cursor.document, cursor.offset, options, ticket.stale, fusion, ticket.wants, early,
                key_start=cursor.text_start))
        except Cancelled:
            self.counts["stopped"] += 1
            raise
        if ticket.superseded() and not ticket.answered.is_set():  # finished for the cache: the newer request answers from it
            self.counts["kept"] += 1
            raise Cancelled("superseded, kept for the suggestion cache")
        return answer

    def _shown_for(self, cursor: Cursor, texts: list[str]) -> list[str]:
        """Remember what ``cursor``'s request was answered (`_grow` tells the editor when the cache holds more)."""
        self._shown[cursor.uri] = (cursor, texts)
        return texts

    def _answered_in_full(self, cursor: Cursor, answer: Answer) -> None:
        """The model's whole answer for ``cursor`` is in: one from a window cut for ``promptBudgetMs`` is
        followed by the whole window's (`_upgrade`); an answer that ends the line has the next line foreseen."""
        if answer.cut_short:
            self.counts["cut_short"] += 1
            self._upgrade(cursor, answer.completions)
        elif answer.completions and self.settings().warm_cache:
            foresight = Foresight.after(cursor, answer.completions[0], self.session.window)
            if foresight is not None:
                self._foresee(foresight)

    def _upgrade(self, cursor: Cursor, shown: list[str]) -> None:
        """Answer ``cursor`` again from its whole prompt window, on the worker, into the suggestion cache; tell
        the editor when the answer differs from the one shown (``shown``: the cut window's texts). Stale once
        the document's newest request is neither this cursor nor typed on from it into one of ``shown``
        (with more of it left to show), a request comes for another document, or the settings change what
        an answer is (`outdated`).

        A request typed otherwise, or to the end of the suggestion, is not answered from ``shown`` and would
        wait for the whole window's read (3.5-6.8 s on a long file on a slow day, up to 31 s beside a model
        test); it gets its own answer at once instead, and the read goes on after it from the chunks already
        read (`cpc.llama`)."""
        settings = self.settings()
        options, fusion = settings.options, settings.fusion_weights
        whole = replace(options, prompt_budget_ms=None)  # with no early answer asked, no word budget either
        loop = asyncio.get_running_loop()

        def stale() -> bool:
            newest = self.newest.get(cursor.uri)
            if newest is None or self.last_cursor.uri != cursor.uri or self.outdated((options, fusion)):
                return True
            typed = cursor.typed_since(newest)  # what the cache answers it from: a suggestion with more to show
            return newest is not cursor and not (cursor.typed_on_by(newest) and any(
                text.startswith(typed) and len(text) > len(typed) for text in shown))

        def work() -> None:
            if stale():
                self.counts["upgrade_stopped"] += 1
                return
            try:
                answer = self._run(stale, lambda: self.session.complete(
                    cursor.uri, cursor.document, cursor.offset, whole, stale, fusion, refresh=True,
                    key_start=cursor.text_start))
            except Cancelled:
                self.counts["upgrade_stopped"] += 1
            except Exception:  # the quick answer was given: the better one is a favour
                log.exception("answering from the whole window failed")
            else:
                self.counts["upgraded"] += 1
                call_soon(loop, self._upgraded, cursor, answer, options, fusion)

        self.growing += 1  # the suggestion shown is still to be replaced: the editor should keep asking
        job = self.worker.submit(work)
        job.add_done_callback(lambda _: call_soon(loop, self._upgrade_ended))

    def _upgrade_ended(self) -> None:
        self.growing -= 1

    def _upgraded(self, cursor: Cursor, answer: Answer, options: Options, fusion: FusionWeights | None) -> None:
        """The whole window's answer for ``cursor`` is in the cache: the editor is told, the next line foreseen."""
        self._tell_grown(cursor, options, fusion, replaced=True)
        self._answered_in_full(cursor, answer)

    async def _grow(self, ticket: Ticket, job: Future, options: Options, fusion: FusionWeights | None) -> None:
        """Wait for the rest of a suggestion answered early; when the suggestion cache then holds more
        for the document's newest cursor (the ticket's, or one typed on from it) than its request was
        answered, tell the editor (`SUGGESTION_READY`): it asks again, and the cache answers."""
        self.growing += 1
        try:
            try:
                self._answered_in_full(ticket.cursor, await asyncio.wrap_future(job))
            except Cancelled:  # stopped, or finished for a newer request typed on from this one
                pass
            except Exception:  # the first answer was given: the rest is a favour
                log.exception("finishing a suggestion failed")
                return
            self._tell_grown(ticket.cursor, options, fusion)
        finally:
            self.growing -= 1

    def _tell_grown(self, cursor: Cursor, options: Options, fusion: FusionWeights | None,
                    replaced: bool = False) -> None:
        """Tell the editor when the cache holds more for the newest cursor than was shown there (with
        ``replaced``, anything else: an answer from the whole window after a cut one)."""
        newest = self.newest.get(cursor.uri)
        shown_for, shown = self._shown.get(cursor.uri, (None, []))
        document = self.workspace().text_documents.get(cursor.uri)
        if newest is None or shown_for is not newest or document is None or not (
                newest is cursor or cursor.typed_on_by(newest)):
            return
        more = self.session.cached(newest.uri, newest.document, newest.offset, options, fusion)
        if more is None or more.completions == shown or (
                shown and not replaced and not more.completions[0].startswith(shown[0])):
            return
        self.counts["grown"] += 1
        self._told[newest.uri] = newest
        position = newest.replace.end
        self.notify(SUGGESTION_READY, {
            "uri": newest.uri, "version": document.version,
            "position": {"line": position.line, "character": position.character},
        })

    def _foresee(self, foresight: Foresight) -> None:
        """Prepare the suggestion at ``foresight.target`` on the worker, for the suggestion cache."""
        settings = self.settings()
        options, fusion, target = settings.options, settings.fusion_weights, foresight.target
        asked = self._alternatives_asked

        def stale() -> bool:
            return (not foresight.wanted(self.newest.get(target.uri), self.last_cursor) or self.outdated((options, fusion))
                    or self._alternatives_asked != asked)

        def work() -> None:
            if stale():
                self.counts["foresight_stopped"] += 1
                return
            try:
                self._run(stale, lambda: self.session.complete(
                    target.uri, target.document, target.offset, options, stale, fusion, key_start=target.text_start))
            except Cancelled:
                self.counts["foresight_stopped"] += 1
            except Exception:  # foreseeing is a favour: it must not take the worker down
                log.exception("foreseeing the next line failed")
            else:
                self.counts["foreseen"] += 1

        self.worker.submit(work)

    # -- edits, and the documents closed ---------------------------------------------

    def note_edit(self, uri: str) -> None:
        """``uri`` was opened or changed."""
        self.note_activity()
        self.edits[uri] = self.edits.get(uri, 0) + 1

    def forget(self, uri: str) -> None:
        """Document ``uri`` was closed: its requests' work is stale, and kept work stops."""
        self.newest.pop(uri, None)
        self.edits.pop(uri, None)
        self._shown.pop(uri, None)
        self._told.pop(uri, None)
        self._requested_at.pop(uri, None)
        self.stop_stale_work()

    # -- reading ahead, and stale work stopped --------------------------------------------

    def note_activity(self) -> None:
        """An edit or a request came: read-ahead under way gives the worker back, and once the editor is quiet
        again the worker gives back the memory the work freed."""
        self._activity += 1
        self.stop_stale_work()
        asyncio.get_running_loop().call_later(RELEASE_IDLE_S, self._release_memory, self._activity)

    def _release_memory(self, activity: int) -> None:
        """`RELEASE_IDLE_S` after ``activity``, unless more came: the snapshots not needed next and the heap's free
        pages back to the system, on the worker once the work queued there is done."""
        if activity != self._activity:
            return

        def work() -> None:
            if activity == self._activity and self.session.release_memory():
                self.counts["released"] += 1

        self.worker.submit(work)

    def outdated(self, asked: tuple[Options, FusionWeights | None] | None) -> bool:
        """Whether work ``asked`` with these options and fusion weights serves no request any more: the settings
        changed what an answer is (the mode, fusion; not a time budget), so the suggestion cache would hold
        it under a key no request asks, and a request that needs the worker must not wait for it."""
        settings = self.settings()
        return asked is not None and answer_key(*asked) != answer_key(settings.options, settings.fusion_weights)

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

    def schedule_warm(self, uri: str, offset: int | None) -> None:
        """After `WARM_IDLE_S` of quiet, read the prompt window that ends at ``offset`` of ``uri``
        (None: at its end) into the KV cache, unless the worker is busy then."""
        if self.settings().warm_cache:
            asyncio.get_running_loop().call_later(WARM_IDLE_S, self._warm, uri, offset, self._activity, self._rests)

    def rest_at(self, uri: str, offset: int) -> None:
        """The editor's cursor came to rest at ``offset`` of ``uri`` (`lsp_server.extensions.CURSOR_REST`): after
        `WARM_IDLE_S` with no edit, request or other rest, read the prompt window that ends there, so that the first
        key typed there finds it read. It is no activity itself: it stops no work but the reads ahead asked before it
        (the newest place wins)."""
        self._rests += 1
        self.schedule_warm(uri, offset)

    def _warm(self, uri: str, offset: int | None, activity: int, rest: int) -> None:
        """Read ahead at ``offset`` of ``uri`` unless an edit or a request came since ``activity``, or a cursor came
        to rest since ``rest``."""
        script = document_script(self.workspace(), uri)
        busy = self.in_flight or self.growing or self.loading.active
        if activity != self._activity or rest != self._rests or busy or not self.session.ready or script is None:
            return
        source = script.text
        cut = script.start + (len(script.cell) if offset is None else min(offset, len(script.cell)))
        options = self.settings().options

        def cancelled() -> bool:
            return self._activity != activity or rest != self._rests

        def work() -> None:
            if cancelled():
                return
            try:
                self._run(cancelled, lambda: self.session.warm(source, cut, options, cancelled))
            except Cancelled:
                self.counts["warm_stopped"] += 1
            except Exception:  # reading ahead is a favour: it must not take the worker down
                log.exception("reading the prompt ahead failed")
            else:
                self.counts["warmed"] += 1

        self.worker.submit(work)


def shown_first(shown: str | None, texts: list[str], n: int) -> list[str]:
    """The answer to a request for alternatives to ``shown`` (None: no such request): the suggestion that
    shows ``shown`` on first (the editor keeps it on screen and cycles on from it), then the others, ``n`` at most.

    >>> shown_first("width", ["wrap(", "width)", "wid"], 3), shown_first("in", ["x", "y"], 2), shown_first(None, ["a"], 1)
    (['width)', 'wrap(', 'wid'], ['in', 'x'], ['a'])
    """
    if shown is None:
        return texts
    first = next((text for text in texts if text.startswith(shown)), shown)
    return ([first] + [text for text in texts if text != first])[:n]
