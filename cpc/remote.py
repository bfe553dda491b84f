"""The model on a shared inference server behind `cpc.lm`'s interface: llama-server, vLLM, SGLang.

A team runs one inference server and every editor talks to it. This module
owns that conversation and what the client must do to stay exact; how a
request is written and an answer read for each serving API
(llama-server's ``/completion``, OpenAI's ``/v1/completions``) is
`cpc.serving`'s.

- **Rows from top-K.** With one token to generate and ``K`` log-probabilities
  asked, the server answers the K likeliest next tokens with their exact
  pre-sampling probabilities (a softmax over the whole vocabulary). The
  other tokens' mass is known as a whole, ``rest = 1 - sum(top K)``, and
  each of them is at most the K-th probability. `full_row` spreads ``rest``
  evenly over them: no mass is invented or lost, no unknown token gets more
  than the bound allows, and the argmax (greedy generation's choice) is
  exact. Each answer's bound is logged (debug) and kept in `RemoteLM.bounds`.
- **Greedy steps ask for one token** (`RemoteLM.greedy_next`): the likeliest
  token and its exact log-probability (``n_probs: 1``), no row built; more
  only in the rare answer whose likeliest token is a control token.
- **A line in one request** (`RemoteLM.greedy_run`, llama-server): the
  server decodes greedily and streams each token with its top K; generation
  takes each token where `cpc.lm.known_choice` shows it is the choice a
  step of its own would make, and closes the stream at the first it does
  not (the server then stops). Token by token the same text, one round trip.
- **Widening where it matters.** `RemoteLM.expect` learns what the text
  after a start state begins with (the typed tail a request conditions on).
  For a state on such a path, the tokens that can spell the rest are the
  ones the beam weighs; when the mass the unknown ones may hold is not small
  next to the known ones' (`WIDEN_TOLERANCE`), the state is asked again with
  8 times K, up to ``max_top_k`` (and no further than the server allows:
  vLLM caps K with ``--max-logprobs``).
- **One request per call**, where the server has no slots to choose (vLLM,
  SGLang): the states of a call (a beam step's, a generation step's) go out
  together, as one request with a prompt per state, answered in one
  response. llama-server gets them one request each (see *Slots*).
- **Slots** (llama-server). A slot keeps the KV cache of the last prompt it
  read, and slots share nothing. The server chooses each call's slot: the
  idle one whose prompt is most like the call's first state (the client's
  own last prompt, unless another client's took its place), else its least
  recently used one, into which it restores the client's prompt from its
  host-memory prompt cache (``--cache-ram``) when it holds it. The states
  of a call go one request each, in turn, and each finds the slot of the
  one before: a beam step's states differ in their last token or two and
  cost a token or two each. So any number of editors share the slots: 16
  editors on 4 slots were served 2.1 times the requests of 4, where editors
  that each kept the slot the server first gave them (4 to a slot, reading
  each other's prompts away) got 0.15 times (docs/team-server.md). Other engines cache prefixes on their own (vLLM's
  automatic prefix caching).
  The client remembers the last prompt its slot read (`cached_length`, for
  prompt-time budgets), and `prefill` reads a prompt ahead with nothing
  generated (llama.vim's warm-up request) where the API allows.
- **The wire** is `cpc.connection`'s: keep-alive connections, the key
  (``Authorization: Bearer``, from `API_KEY_ENV`), TLS verification,
  timeouts and retries. A refused key (`RemoteRefused`) is final for the
  client: it asks the server nothing more. After any other failure
  (`RemoteUnavailable`) the next call tries again (the server may be back),
  and checks the server again first: another model may answer on that port
  now.
- **One vocabulary.** The vocabulary and tokenizer come from a local GGUF of
  the same model (loaded vocabulary-only: no weights). At the first
  connection a few probe strings must tokenize the same here and on the
  server (``/tokenize``) and the vocabulary sizes must agree where the
  server says them, or `RemoteMismatch` says which setting to change.
"""

from __future__ import annotations

import http.client
import logging
import math
import os
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import numpy as np

from cpc.connection import API_KEY_ENV, RemoteMismatch, RemoteRefused, RemoteUnavailable, ServerConnection
from cpc.index import PrefixIndex
from cpc.lm import Cancelled, LanguageModel, LMStats, RunStep, State, best_allowed
from cpc.model_files import ModelError
from cpc.serving import (
    LLAMA_SERVER, OPENAI, REMOTE_APIS, AnswerError, LlamaServerAPI, OpenAICompletionsAPI, TokenTexts, TopK,
    logprobs_cap, read_run_event,
)
from cpc.tokenizer import LlamaTokenizer

log = logging.getLogger(__name__)

REMOTE_SCHEMES = ("http://", "https://")

WIDEN_TOLERANCE = 0.05
"""Widen K for a state while the tokens that may spell the expected text and lie outside the top K
could hold more than this share of the mass the known ones hold."""

PROBES = (
    "def main():\n    return 0\n",
    "    self.width = width  # intermediary\n",
    "import os, sys\nfor i in range(10):\n\tprint(f'{i:>3}')\n",
    "Grüße aus München — 東京 🙂 \u00a0 x",
)
"""Texts tokenized here and on the server at the first connection: code, whitespace runs, digits, UTF-8."""

_POLL_S = 0.05  # how often a waiting call looks at its interrupt
GREEDY_TOP_K = 1
"""Tokens asked per state for a greedy step (`RemoteLM.greedy_next`): its choice is the likeliest token but a
control token, and its value; widened (8, 64, ...) in the rare answer whose top tokens are all control tokens."""


def is_remote(model: object) -> bool:
    """Whether a `model` setting names a server (``http://HOST:PORT``), or several, rather than a GGUF file."""
    return isinstance(model, str) and model.strip().startswith(REMOTE_SCHEMES)


def server_addresses(model: str) -> list[str]:
    """The servers a `model` setting names: one address, or several (replicas of one model) separated by spaces
    or commas.

    >>> server_addresses("http://gpu-box:8080, http://gpu-box:8081")
    ['http://gpu-box:8080', 'http://gpu-box:8081']
    """
    return [part for part in re.split(r"[\s,]+", model.strip()) if part]


def address_problem(model: str) -> str | None:
    """What is wrong with the server addresses of a `model` setting, or None.

    >>> address_problem("http://a:8080 a:8081")
    "'a:8081' is not a server address -- write each as http://HOST:PORT (several: separated by spaces or commas)"
    """
    addresses = server_addresses(model)
    for address in addresses:
        parts = urlsplit(address)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            return (f"{address!r} is not a server address -- write each as http://HOST:PORT (several: separated by "
                    "spaces or commas)")
    names = [address.rstrip("/") for address in addresses]
    twice = next((name for name in names if names.count(name) > 1), None)
    return f"{twice} is named twice" if twice else None


@dataclass(frozen=True)
class RemoteOptions:
    """How a client talks to the server."""

    vocab: str = "default"
    """The local GGUF (name or path) whose vocabulary and tokenizer are the served model's."""
    top_k: int = 512
    """Next tokens asked per state (``n_probs``); the rest is bounded, not known."""
    max_top_k: int = 4096
    """How far K widens for a state whose expected tokens lie outside the top K. Past 4,096 the answer
    is megabytes of JSON (32,768: 2.9 MiB) for no measured gain: at K = 4,096 the mass left to the bound
    is at most 0.02 where texts differ (docs/team-server.md)."""
    timeout_s: float = 10.0
    """Seconds one HTTP request may take before the server counts as unavailable."""
    retries: int = 2
    """Extra tries after a refused or dropped connection or a 5xx answer."""
    backoff_s: float = 0.2
    """Wait before the first retry; it doubles for each further one."""
    slot: int | None = None
    """A llama-server slot (``id_slot``) every request of this client goes to; None lets the server choose each call's."""
    api: str = "auto"
    """The serving API (`cpc.serving.REMOTE_APIS`): ``llama-server`` (``/completion``), ``openai``
    (``/v1/completions``: vLLM, SGLang), or ``auto`` (llama-server when ``/props`` answers)."""
    ca_file: str | None = None
    """A PEM file of certificate authorities that ``https://`` servers may be signed by, besides the system's."""
    replica_retry_s: float = 1.0
    """With several servers (replicas): how long one that failed is skipped before it is tried again (doubling
    while it keeps failing, up to `cpc.replicas.MAX_RETRY_S`)."""
    greedy_runs: bool = True
    """Let a llama-server decode a line's greedy tokens in one streamed request (`RemoteLM.greedy_run`); off,
    one request per token (benchmarks compare the two)."""
    api_key: str | None = field(default_factory=lambda: os.environ.get(API_KEY_ENV) or None, repr=False)
    """Sent as ``Authorization: Bearer`` on every request: from the environment (`API_KEY_ENV`), never a
    setting; left out of this object's ``repr``, so no log or message shows it."""


@dataclass
class RemoteProfile:
    """Where a client's time went, summed over its requests: its own side and what the server reported (the
    states asked and the prompt tokens the server read are `LMStats`' ``states`` and ``tokens``)."""

    requests: int = 0
    http_s: float = 0.0
    """From sending a request to reading its whole answer."""
    parse_s: float = 0.0
    """JSON decoding of the answers."""
    rows_s: float = 0.0
    """Building rows from the answers' top-K."""
    bytes: int = 0
    """Answer bytes read."""
    server_prompt_ms: float = 0.0
    server_predicted_ms: float = 0.0
    """The server's own timings of the answers (``timings``, where it sends them)."""


@dataclass(frozen=True)
class Bound:
    """What one answer leaves unknown: ``rest`` mass outside the top ``k``, none of it above ``kth`` per token."""

    k: int
    rest: float
    kth: float


def full_row(ids: np.ndarray, logprobs: np.ndarray, n_vocab: int) -> tuple[np.ndarray, Bound]:
    """A next-token log-probability row over the whole vocabulary from exact top-K values.

    The mass outside the top K is spread evenly over the other tokens: each
    gets ``rest / (n_vocab - K)``, which never exceeds the K-th probability
    (``rest`` is at most that many tokens times it).

    >>> row, bound = full_row(np.array([2, 0]), np.log([0.5, 0.3]), 4)
    >>> [round(float(p), 3) for p in np.exp(row)], round(bound.rest, 3), bound.kth
    ([0.3, 0.1, 0.5, 0.1], 0.2, 0.3)
    """
    bound = top_bound(logprobs, n_vocab)
    unknown = n_vocab - bound.k
    share = min(bound.rest / unknown, bound.kth) if unknown else 0.0
    row = np.full(n_vocab, math.log(share) if share > 0 else -np.inf, dtype=np.float32)
    row[ids] = logprobs
    return row, bound


def top_bound(logprobs: np.ndarray, n_vocab: int) -> Bound:
    """What exact top-K log-probabilities leave unknown of a row over ``n_vocab`` tokens."""
    probs = np.exp(np.asarray(logprobs, dtype=np.float64))
    k = len(probs)
    rest = max(0.0, 1.0 - float(probs.sum())) if k < n_vocab else 0.0
    return Bound(k=k, rest=rest, kth=float(probs.min()) if k else 1.0)


class RemoteLM(LanguageModel):
    """Next-token rows from a shared server: the states of a call in one request, top-K with a bound."""

    def __init__(
        self,
        url: str,
        tokenizer: LlamaTokenizer,
        index: PrefixIndex,
        *,
        n_ctx: int,
        options: RemoteOptions = RemoteOptions(),
    ) -> None:
        """``n_ctx``: the longest state this client sends; the server's context must hold it."""
        problem = address_problem(url)
        if problem is not None:
            raise ModelError(problem)
        if options.api not in REMOTE_APIS:
            raise ModelError(f"remoteApi {options.api!r} is not one of {', '.join(REMOTE_APIS)}")
        self.server = ServerConnection(url, options, lambda: self.server_name)
        """The wire (`cpc.connection`): requests, the key, TLS, faults."""
        self.url = self.server.url
        self.tokenizer = tokenizer
        self.vocab = tokenizer.vocab
        self.index = index
        self.n_ctx = n_ctx
        self.options = options
        self.n_vocab = len(self.vocab)
        self.bos = (tokenizer.gguf.document_start(),)
        self.stats = LMStats()
        self.profile = RemoteProfile()
        """Where this client's time went (`RemoteProfile`)."""
        self.widened = 0
        """States asked again with a wider K."""
        self.bounds: deque[Bound] = deque(maxlen=4096)
        """The bounds of the latest answers (one per state asked)."""
        self.api: LlamaServerAPI | OpenAICompletionsAPI | None = None
        """How this server is spoken to (`cpc.serving`), known after the first connection."""
        self.slot = options.slot
        """The llama-server slot that served the last call (the server chooses each call's: `_ask`)."""
        self.top_k_cap: int | None = None
        """The largest K the server allows, once it refused a larger one."""
        self.last_error: str | None = None
        """Why the last call failed (None after a call that worked)."""
        self._verified = False
        self._held: State = ()
        """The last prompt our slot read, as far as this client knows (another client may share the slot)."""
        self._expected: tuple[State, bytes] | None = None
        self._needed_cache: dict[bytes, np.ndarray] = {}
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="cpc-remote")
        self._slot_count = 1
        """llama-server's slots (``/props``)."""
        self._refused: str | None = None
        """Why the server refused this client's key: then nothing more is asked of it."""

    # -- the server -------------------------------------------------------------

    def connect(self) -> None:
        """Check the server once: which API it speaks, that it serves this vocabulary, that it holds ``n_ctx``.

        Raises `RemoteUnavailable` when it does not answer and `RemoteMismatch`
        when it serves something else.
        """
        props = self._llama_props()
        if props is None and self.options.api == LLAMA_SERVER:
            raise RemoteMismatch(f"{self.url} has no /props: is it a llama-server? (set `remoteApi` to openai for "
                                 "vLLM or SGLang)")
        models = self._request("GET", "/v1/models").get("data") or [{}]
        if props is not None:
            self._check_slots(props)
            self.api = LlamaServerAPI() if self.options.api != OPENAI else OpenAICompletionsAPI(llama_fields=True)
        else:
            self.api = OpenAICompletionsAPI(model=models[0].get("id"))
        served = (models[0].get("meta") or {}).get("n_vocab")
        if isinstance(served, int) and served != self.n_vocab:
            raise RemoteMismatch(
                f"{self.url} serves a model of {served} tokens and the local vocabulary {self.vocab.name} has "
                f"{self.n_vocab} -- set `remoteVocab` to a GGUF of the served model"
            )
        self._check_tokenizer(props is not None)
        self._verified = True
        log.info("%s at %s: %s", self.api.name, self.url, "llama.cpp" if props is not None else models[0].get("id"))

    def try_connect(self) -> bool:
        """`connect`, with an unreachable server (it may start later) or a refused key noted in `last_error`
        instead of raised."""
        try:
            self._call(lambda: None)
        except (RemoteUnavailable, RemoteRefused) as error:
            log.warning("%s", error)
            return False
        return True

    def _llama_props(self) -> dict | None:
        """llama-server's ``/props``, or None from a server that has none (another engine)."""
        try:
            props = self._request("GET", "/props")
        except RemoteMismatch:
            return None
        return props if "default_generation_settings" in props else None

    def _check_slots(self, props: dict) -> None:
        self._slot_count = int(props.get("total_slots", 1))
        slot_ctx = int(props.get("default_generation_settings", {}).get("n_ctx", 0))
        if slot_ctx and slot_ctx < self.n_ctx:
            raise RemoteMismatch(
                f"the slots of llama-server at {self.url} hold {slot_ctx} tokens and this client sends up to "
                f"{self.n_ctx} -- lower `contextSize` to {slot_ctx}, or start llama-server with a larger -c "
                "(per slot: -c divided by --parallel, unless -kvu)"
            )

    def _check_tokenizer(self, llama: bool) -> None:
        """The probes must tokenize the same on both sides; a server without ``/tokenize`` is taken on trust."""
        for probe in PROBES:
            ours = self.tokenizer.encode(probe.encode("utf-8"))
            body = ({"content": probe, "add_special": False, "parse_special": False} if llama else
                    {"model": self.api.model, "prompt": probe, "add_special_tokens": False})
            try:
                theirs = self._request("POST", "/tokenize", body).get("tokens")
            except RemoteMismatch as error:
                log.warning("%s cannot tokenize (%s): the vocabulary is not checked", self.url, error)
                return
            if theirs != ours:
                raise RemoteMismatch(
                    f"{self.url} tokenizes {probe!r} as {theirs} and the local vocabulary {self.vocab.name} as "
                    f"{ours}: they are different models -- set `remoteVocab` to a GGUF of the served model"
                )

    # -- the interface ----------------------------------------------------------

    def expect(self, start: State, data: bytes) -> None:
        self._expected = (tuple(start), bytes(data))

    def reset(self) -> None:
        """Erase the llama-server slot that served this client, or every slot before its first call (a cold
        start for benchmarks and tests, not for a shared server); a refusal only logs."""
        self._held = ()
        if self.api is None or not self.api.slots:
            return
        for slot in [self.slot] if self.slot is not None else range(self._slot_count):
            try:
                self._request("POST", f"/slots/{slot}?action=erase", {})
            except (RemoteUnavailable, RemoteMismatch, RemoteRefused) as error:
                log.debug("erasing slot %s failed: %s", slot, error)

    def cached_length(self, state: Sequence[int]) -> int:
        held, state = self._held, tuple(state)
        n = min(len(held), len(state))
        return next((k for k in range(n) if held[k] != state[k]), n)

    def prefill(self, state: Sequence[int]) -> int:
        """Have the server read ``state`` with nothing generated, where its API can; the tokens it read.

        An interrupt gives the caller back at once; the server finishes reading on its own.
        """
        state = tuple(state)
        if len(state) > self.n_ctx:
            raise ValueError(f"a state of {len(state)} tokens does not fit the context of {self.n_ctx}")
        if len(state) - self.cached_length(state) <= 0:
            return 0
        self.check_interrupt()
        read = self._call(lambda: self._ask([state], 0)[0].prompt_tokens if self.api.prefills else 0)
        read = len(state) - self.cached_length(state) if read is None else read
        with self._lock:
            self.stats.prefilled += read
        return read

    def next_logprobs(self, states: Sequence[Sequence[int]], *, greedy: bool = False) -> np.ndarray:
        """Rows from the top ``top_k`` of each state, widened where the beam needs it (a greedy step asks
        less through `greedy_next`)."""
        unique = self.distinct_states(states)
        self.check_interrupt()
        rows = self._call(lambda: self._rows(list(unique)))
        self._count(len(unique))
        return rows[[unique[tuple(state)] for state in states]]

    def greedy_next(self, states: Sequence[Sequence[int]], banned: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each state's likeliest token that ``banned`` does not mark, and its exact log-probability, from the
        top `GREEDY_TOP_K` of each (widened while all of them are banned): no row over the vocabulary is
        asked or built. The choice is the one a full row gives: the top K are the K likeliest tokens."""
        unique = self.distinct_states(states)
        self.check_interrupt()
        chosen, values = self._call(lambda: self._greedy(list(unique), banned))
        self._count(len(unique))
        order = [unique[tuple(state)] for state in states]
        return chosen[order], values[order]

    @property
    def runs_greedily(self) -> bool:
        return self.options.greedy_runs and isinstance(self.api, LlamaServerAPI)

    def greedy_run(self, state: Sequence[int], length: int, *, top_k: int,
                   stop_at_line_end: bool) -> Iterator[RunStep]:
        """llama-server decodes up to ``length`` tokens after ``state`` greedily and streams each with its top
        ``top_k``. Closing the iterator early drops the connection, and the server stops decoding. A server
        that fails ends the run (logged); a refused key is raised, as from any call."""
        state = tuple(state)
        self.check_interrupt()
        try:
            connection, response = self._call(lambda: self.server.open_stream(
                self.api.path, self.api.run_body(state, length, self._k(top_k), self.options.slot, stop_at_line_end)))
        except (RemoteUnavailable, RemoteMismatch) as error:
            log.debug("no greedy run: %s", error)
            return
        self._count(0)
        began, decoded, ended, end = time.perf_counter(), [], False, None
        try:
            while not ended:
                self.check_interrupt()
                line = self._gather(self._pool.submit(response.readline))
                event = read_run_event(line) if line else None
                for token, top in event.tokens if event else ():
                    decoded.append(token)
                    with self._lock:
                        self.stats.states += 1
                        self.stats.decodes += 1
                        self.stats.run_tokens += 1
                    yield RunStep(token, top.ids, top.logprobs)
                if not line:
                    raise http.client.IncompleteRead(b"")  # the server closed the stream before its end
                if event is not None and event.end is not None:
                    self._gather(self._pool.submit(response.read))  # the stream's last chunk: the connection is reused
                    ended, end = True, event.end
        except (OSError, http.client.HTTPException, AnswerError) as error:
            log.debug("greedy run of %s ended: %s", self.url, error)
        finally:
            if not ended:  # closed early, failed or cancelled: the server stops when it sees the connection go
                self.server.hang_up(connection)
            self._end_run(state + tuple(decoded[:-1]), end, began)

    def _end_run(self, held: State, end: TopK | None, began: float) -> None:
        """What a finished run cost, what its slot holds now (all but the last token, which it never read)."""
        with self._lock:
            self._held = held
            self.profile.requests += 1
            self.profile.http_s += time.perf_counter() - began
            if end is not None:
                self.stats.tokens += end.prompt_tokens or 0
                self.profile.server_prompt_ms += end.prompt_ms
                self.profile.server_predicted_ms += end.predicted_ms
                if end.slot is not None and self.options.slot is None:
                    self.slot = end.slot

    def _count(self, states: int) -> None:
        with self._lock:
            self.stats.calls += 1
            self.stats.states += states

    def _call(self, work):
        """``work()`` after the first connection; a failure is remembered (`last_error`) and raised. After a
        refused key, nothing is asked of the server (its refusal is raised again)."""
        if self._refused is not None:
            raise RemoteRefused(self._refused)
        try:
            if not self._verified:
                self.connect()
            result = work()
        except RemoteRefused as error:
            self._refused = self.last_error = str(error)
            raise
        except (RemoteUnavailable, RemoteMismatch) as error:
            self._verified = False  # after a failure nothing is known of the server: check it again,
            self._held = ()  # and assume its cache empty
            self.last_error = str(error)
            raise
        self.last_error = None
        return result

    def _rows(self, states: list[State]) -> np.ndarray:
        """Every state's row: one request for all of them, then one for those whose bound is loose where it
        matters (`_widens`)."""
        rows: list[np.ndarray | None] = [None] * len(states)

        def settle(n: int, top: TopK) -> bool:
            rows[n], bound = full_row(top.ids, top.logprobs, self.n_vocab)
            widen = self._widens(states[n], top, bound)
            log.debug("state of %d tokens: K=%d covers %.6f, rest %.3g, every other token <= %.3g%s",
                      len(states[n]), bound.k, 1 - bound.rest, bound.rest, bound.kth, ", widening" if widen else "")
            self._bound(bound)
            return not widen

        self._widening(states, self._k(self.options.top_k), settle)
        return np.stack(rows)

    def _greedy(self, states: list[State], banned: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Every state's best allowed token and its value: from the top `GREEDY_TOP_K`, then wider for those whose
        top tokens are all banned."""
        chosen = np.zeros(len(states), dtype=np.int64)
        values = np.zeros(len(states), dtype=np.float64)

        def settle(n: int, top: TopK) -> bool:
            allowed = ~banned[top.ids]
            bound = top_bound(top.logprobs, self.n_vocab)
            self._bound(bound)
            if allowed.any():
                best = int(np.argmax(np.where(allowed, top.logprobs, -np.inf)))
                chosen[n], values[n] = top.ids[best], top.logprobs[best]
                return True
            # none allowed among the top K: the row's best, unknown and within the bound, unless K widens
            row, _ = full_row(top.ids, top.logprobs, self.n_vocab)
            chosen[n : n + 1], values[n : n + 1] = best_allowed(row[None], banned)
            return not bound.rest

        self._widening(states, self._k(GREEDY_TOP_K), settle)
        return chosen, values

    def _widening(self, states: list[State], k: int, settle: Callable[[int, TopK], bool]) -> None:
        """Ask the top ``k`` of every state in one request; ``settle(n, answer)`` takes state n's answer and says
        whether it is enough. Those it is not enough for are asked again with 8 times K, while K can grow."""
        pending = list(range(len(states)))
        while pending:
            answers = self._ask([states[n] for n in pending], k)
            began = time.perf_counter()
            loose = [n for n, top in zip(pending, answers) if not settle(n, top)]
            with self._lock:
                self.profile.rows_s += time.perf_counter() - began
            wider = self._k(k * 8)
            if not loose or wider <= k:
                return
            with self._lock:
                self.widened += len(loose)
            pending, k = loose, wider

    def _bound(self, bound: Bound) -> None:
        with self._lock:
            self.bounds.append(bound)

    def _widens(self, state: State, top: TopK, bound: Bound) -> bool:
        """Whether a state's answer leaves the tokens that may spell the expected text unknown: their bound is
        loose."""
        needed = self._needed(state)
        return needed is not None and _loose(top.ids, top.logprobs, needed, bound, self.n_vocab)

    def _k(self, k: int) -> int:
        """K within what the client may ask (`RemoteOptions.max_top_k`), the vocabulary, and the server's cap."""
        return min(k, self.options.max_top_k, self.n_vocab, self.top_k_cap or self.n_vocab)

    def _ask(self, states: list[State], k: int, slot: int | None = None) -> list[TopK]:
        """One request for the states (``k`` 0: read them, nothing generated) on ``slot``; their answers in order.

        With no slot (and none fixed by `RemoteOptions.slot`), llama-server chooses each state's by its prompt,
        so the states go one request each, in turn: each finds the previous one's slot idle and most like it.
        (The rest of a call pinned to the slot of its first state: 16 editors on 4 slots got 2.6 requests/s
        instead of 7.0; states in one request with no slot: all but the first go to other slots.)
        """
        slot = self.options.slot if slot is None else slot
        if self.api.slots and slot is None and len(states) > 1:
            return [answer for state in states for answer in self._ask([state], k)]
        try:
            answer = self._gather(self._pool.submit(
                self._request, "POST", self.api.path, self.api.body(states, k, slot)))
        except RemoteMismatch as error:
            cap = logprobs_cap(error.server_message)
            if not k or not cap or cap >= k:
                raise
            self._capped(cap)
            return self._ask(states, self._k(k), slot)
        began = time.perf_counter()
        try:
            answers = self.api.parse(answer, len(states), probabilities=k > 0)
        except TokenTexts as error:
            raise RemoteMismatch(f"{self.server_name} {error}: this client needs the ids -- serve the model with "
                                 "vLLM or llama-server (SGLang's /v1/completions gives texts; docs/team-server.md)"
                                 ) from error
        except AnswerError as error:
            raise RemoteMismatch(f"{self.url}{self.api.path} answered in an unknown shape ({error}): is "
                                 f"{self.server_name} a server of 2025 or later?") from error
        with self._lock:
            self.profile.parse_s += time.perf_counter() - began
        self._note(states, answers)
        return answers

    def _capped(self, cap: int) -> None:
        """The server refused K over ``cap``: ask no more from now on, and say what it costs once."""
        if self.top_k_cap is None:
            log.warning(
                "%s answers at most %d log-probabilities per token: rows are bounded more loosely than "
                "remoteTopK=%d asks (vLLM: start it with --max-logprobs %d or more)",
                self.url, cap, self.options.top_k, self.options.top_k)
        self.top_k_cap = cap

    def _note(self, states: list[State], answers: list[TopK]) -> None:
        """What the slot that served us holds now, which slot it is, how fast the server read, what it said it cost."""
        read = [top.prompt_tokens for top in answers if top.prompt_tokens is not None]
        with self._lock:
            self._held = states[-1]
            self.stats.tokens += sum(read)
            self.stats.decodes += len(answers)
            self.profile.server_prompt_ms += sum(top.prompt_ms for top in answers)
            self.profile.server_predicted_ms += sum(top.predicted_ms for top in answers)
            first = answers[0]
            if first.prompt_tokens is not None and first.prompt_tokens >= 32 and first.prompt_ms > 0:
                self.prefill_rate = 0.7 * self.prefill_rate + 0.3 * first.prompt_tokens * 1000 / first.prompt_ms
            if first.slot is not None and self.options.slot is None:
                self.slot = first.slot

    def _gather(self, future: Future):
        """The request's result; an interrupt abandons it (the server finishes on its own)."""
        while True:
            done, _ = wait([future], timeout=_POLL_S)
            if done:
                return future.result()
            try:
                self.check_interrupt()
            except Cancelled:
                future.cancel()
                raise

    def _needed(self, state: State) -> np.ndarray | None:
        """The tokens that may spell what `expect` said comes after ``state``, or None (no expectation)."""
        if self._expected is None:
            return None
        start, data = self._expected
        if len(state) < len(start) or state[: len(start)] != start:
            return None
        covered = self.vocab.decode(state[len(start) :])
        if len(covered) >= len(data) or not data.startswith(covered):
            return None
        rest = data[len(covered) :]
        needed = self._needed_cache.get(rest)
        if needed is None:
            if len(self._needed_cache) > 256:
                self._needed_cache.clear()
            spelled = np.asarray(self.index.prefixes_of(rest), dtype=np.int64)
            needed = np.union1d(self.index.starting_with(rest), spelled)
            self._needed_cache[rest] = needed
        return needed

    # -- HTTP -----------------------------------------------------------------------

    @property
    def server_name(self) -> str:
        """The server as messages name it: ``llama-server at http://…``."""
        kind = "the model server" if self.api is None else self.api.title
        return f"{kind} at {self.url}"

    def _request(self, method: str, path: str, body: dict | None = None) -> dict:
        """One JSON request (`cpc.connection.ServerConnection.request`), its cost in `profile`."""
        exchange = self.server.request(method, path, body)
        with self._lock:
            self.profile.requests += 1
            self.profile.http_s += exchange.http_s
            self.profile.parse_s += exchange.parse_s
            self.profile.bytes += exchange.bytes
        return exchange.answer


def _loose(ids: np.ndarray, logprobs: np.ndarray, needed: np.ndarray, bound: Bound, n_vocab: int) -> bool:
    """Whether the row may be off by more than `WIDEN_TOLERANCE` of the mass it gives the needed tokens.

    The needed tokens outside the top K hold between 0 and
    ``min(rest, unknown * kth)``; the row gives them ``unknown * share``.
    """
    known = np.isin(ids, needed)
    unknown = len(needed) - int(known.sum())
    if unknown == 0 or bound.rest == 0:
        return False
    possible = min(bound.rest, unknown * bound.kth)
    given = unknown * min(bound.rest / (n_vocab - bound.k), bound.kth)
    error = max(given, possible - given)
    return error > WIDEN_TOLERANCE * (float(np.exp(logprobs[known]).sum()) + given)
