"""The model on a shared inference server: llama-server's ``/completion`` behind `cpc.lm`'s interface.

A team runs one inference server and every editor talks to it. This module
owns that conversation and what the client must do to stay exact:

- **Rows from top-K.** With ``n_predict: 1`` and ``n_probs: K``, llama-server
  answers the K likeliest next tokens with their exact pre-sampling
  probabilities (a softmax over the whole vocabulary). The other tokens'
  mass is known as a whole, ``rest = 1 - sum(top K)``, and each of them is at
  most the K-th probability. `full_row` spreads ``rest`` evenly over them:
  no mass is invented or lost, no unknown token gets more than the bound
  allows, and the argmax (greedy generation's choice) is exact. Each answer's
  bound is logged (debug) and kept in `LlamaServerLM.bounds`.
- **Widening where it matters.** `LlamaServerLM.expect` learns what the text
  after a start state begins with (the typed tail a request conditions on).
  For a state on such a path, the tokens that can spell the rest are the
  ones the beam weighs; when the mass the unknown ones may hold is not small
  next to the known ones' (`WIDEN_TOLERANCE`), the state is asked again with
  8 times K, up to ``max_top_k``.
- **KV reuse.** ``cache_prompt`` reuses the longest common prefix of a slot's
  last prompt, and slots share nothing, so a client keeps its requests on
  one slot (``id_slot``): a beam step's states differ in their last token or
  two and cost a token or two each. The client remembers the last prompt
  its slot read (`cached_length`, for prompt-time budgets), and `prefill`
  reads a prompt ahead with ``n_predict: 0`` (llama.vim's warm-up request).
- **Concurrency.** The states of one call go out together on a bounded pool
  of keep-alive connections; the server queues a slot's requests and runs
  other clients' slots in parallel.
- **Faults.** Every request has a timeout. A refused or dropped connection
  and a 5xx answer are retried with backoff; then `RemoteUnavailable` says
  what happened and where, and the next call tries again (the server may be
  back). After a failure the vocabulary is checked again on the next
  connection: another model may answer on that port now.
- **One vocabulary.** The vocabulary and tokenizer come from a local GGUF of
  the same model (loaded vocabulary-only: no weights). At the first
  connection a few probe strings must tokenize the same here and on the
  server (``/tokenize``) and the vocabulary sizes must agree, or
  `RemoteMismatch` says which setting to change.

vLLM's ``/v1/completions`` fits the same design (token-id prompt lists,
``logprobs: K``, ``logprob_token_ids`` for exact values of chosen tokens,
automatic prefix caching); only llama-server is implemented.
"""

from __future__ import annotations

import http.client
import json
import logging
import math
import os
import socket
import threading
import time
from collections import deque
from collections.abc import Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from urllib.parse import urlsplit

import numpy as np

from cpc.index import PrefixIndex
from cpc.lm import Cancelled, LanguageModel, LMStats, State, document_start
from cpc.models import ModelError
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


def is_remote(model: object) -> bool:
    """Whether a `model` setting names a server (``http://HOST:PORT``) rather than a GGUF file."""
    return isinstance(model, str) and model.startswith(REMOTE_SCHEMES)


class RemoteUnavailable(RuntimeError):
    """The server did not answer (refused, dropped, timed out, 5xx): says where and what happened."""


class RemoteMismatch(ModelError):
    """The server serves another model than the local vocabulary file, or cannot serve our states."""


@dataclass(frozen=True)
class RemoteOptions:
    """How a client talks to the server."""

    vocab: str = "default"
    """The local GGUF (name or path) whose vocabulary and tokenizer are the served model's."""
    top_k: int = 512
    """Next tokens asked per state (``n_probs``); the rest is bounded, not known."""
    max_top_k: int = 32768
    """How far K widens for a state whose expected tokens lie outside the top K."""
    timeout_s: float = 10.0
    """Seconds one HTTP request may take before the server counts as unavailable."""
    retries: int = 2
    """Extra tries after a refused or dropped connection or a 5xx answer."""
    backoff_s: float = 0.2
    """Wait before the first retry; it doubles for each further one."""
    concurrency: int = 4
    """Requests in flight at once for one call's states."""
    slot: int | None = None
    """The server slot (``id_slot``) this client pins; None picks one from the process id."""


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
    probs = np.exp(np.asarray(logprobs, dtype=np.float64))
    k = len(ids)
    kth = float(probs.min()) if k else 1.0
    rest = max(0.0, 1.0 - float(probs.sum()))
    unknown = n_vocab - k
    share = min(rest / unknown, kth) if unknown else 0.0
    row = np.full(n_vocab, math.log(share) if share > 0 else -np.inf, dtype=np.float32)
    row[ids] = logprobs
    return row, Bound(k=k, rest=rest if unknown else 0.0, kth=kth)


class LlamaServerLM(LanguageModel):
    """Next-token rows from a llama-server, one ``/completion`` per state, top-K with a bound."""

    def __init__(
        self,
        url: str,
        tokenizer: LlamaTokenizer,
        index: PrefixIndex,
        *,
        n_ctx: int,
        options: RemoteOptions = RemoteOptions(),
    ) -> None:
        """``n_ctx``: the longest state this client sends; the server's slots must hold it."""
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ModelError(f"{url!r} is not a server address -- write it as http://HOST:PORT")
        self.url = url.rstrip("/")
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port or (443 if self._https else 80)
        self._base = parts.path.rstrip("/")
        self.tokenizer = tokenizer
        self.vocab = tokenizer.vocab
        self.index = index
        self.n_ctx = n_ctx
        self.options = options
        self.n_vocab = len(self.vocab)
        self.bos = (document_start(tokenizer.model.vocab_handle),)
        self.stats = LMStats()
        self.widened = 0
        """States asked again with a wider K."""
        self.bounds: deque[Bound] = deque(maxlen=4096)
        """The bounds of the latest answers (one per state asked)."""
        self.slot = options.slot
        self.last_error: str | None = None
        """Why the last call failed (None after a call that worked)."""
        self._verified = False
        self._held: State = ()
        """The last prompt our slot read, as far as this client knows (another client may share the slot)."""
        self._expected: tuple[State, bytes] | None = None
        self._needed_cache: dict[bytes, np.ndarray] = {}
        self._lock = threading.Lock()
        self._local = threading.local()
        self._pool = ThreadPoolExecutor(max_workers=max(1, options.concurrency), thread_name_prefix="cpc-remote")

    # -- the server -------------------------------------------------------------

    def connect(self) -> None:
        """Check the server once: it answers, serves this vocabulary, and its slots hold ``n_ctx`` tokens.

        Raises `RemoteUnavailable` when it does not answer and `RemoteMismatch`
        when it serves something else.
        """
        props = self._request("GET", "/props")
        slot_ctx = int(props.get("default_generation_settings", {}).get("n_ctx", 0))
        slots = max(1, int(props.get("total_slots", 1)))
        if slot_ctx and slot_ctx < self.n_ctx:
            raise RemoteMismatch(
                f"the slots of llama-server at {self.url} hold {slot_ctx} tokens and this client sends up to "
                f"{self.n_ctx} -- lower `contextSize` to {slot_ctx}, or start llama-server with a larger -c "
                "(per slot: -c divided by --parallel, unless -kvu)"
            )
        served = self._served_vocab_size()
        if served is not None and served != self.n_vocab:
            raise RemoteMismatch(
                f"llama-server at {self.url} serves a model of {served} tokens and the local vocabulary "
                f"{self.vocab.name} has {self.n_vocab} -- set `remoteVocab` to a GGUF of the served model"
            )
        for probe in PROBES:
            ours = self.tokenizer.encode(probe.encode("utf-8"))
            theirs = self._request(
                "POST", "/tokenize", {"content": probe, "add_special": False, "parse_special": False}
            ).get("tokens")
            if theirs != ours:
                raise RemoteMismatch(
                    f"llama-server at {self.url} tokenizes {probe!r} as {theirs} and the local vocabulary "
                    f"{self.vocab.name} as {ours}: they are different models -- set `remoteVocab` to a GGUF "
                    "of the served model"
                )
        if self.slot is None:
            self.slot = os.getpid() % slots
        self._verified = True
        log.info("llama-server at %s: %d slots of %d tokens, this client on slot %d", self.url, slots, slot_ctx,
                 self.slot)

    def try_connect(self) -> bool:
        """`connect`, with an unreachable server noted in `last_error` instead of raised (it may start later)."""
        try:
            self.connect()
        except RemoteUnavailable as error:
            self.last_error = str(error)
            log.warning("%s", error)
            return False
        return True

    def _served_vocab_size(self) -> int | None:
        models = self._request("GET", "/v1/models").get("data") or [{}]
        size = (models[0].get("meta") or {}).get("n_vocab")
        return int(size) if isinstance(size, int) else None

    # -- the interface ----------------------------------------------------------

    def expect(self, start: State, data: bytes) -> None:
        self._expected = (tuple(start), bytes(data))

    def reset(self) -> None:
        """Erase this client's slot on the server (a cold start for benchmarks); a refusal only logs."""
        self._held = ()
        if self.slot is None:
            return
        try:
            self._request("POST", f"/slots/{self.slot}?action=erase", {})
        except (RemoteUnavailable, RemoteMismatch) as error:
            log.debug("erasing slot %s failed: %s", self.slot, error)

    def cached_length(self, state: Sequence[int]) -> int:
        held, state = self._held, tuple(state)
        n = min(len(held), len(state))
        return next((k for k in range(n) if held[k] != state[k]), n)

    def prefill(self, state: Sequence[int]) -> int:
        """Have our slot read ``state`` (``n_predict: 0``: no token is generated); the tokens it read.

        An interrupt gives the caller back at once; the server finishes reading on its own.
        """
        state = tuple(state)
        if len(state) > self.n_ctx:
            raise ValueError(f"a state of {len(state)} tokens does not fit the context of {self.n_ctx}")
        if len(state) - self.cached_length(state) <= 0:
            return 0
        self.check_interrupt()
        try:
            if not self._verified:
                self.connect()
            body = self._body(state, 0) | {"n_predict": 0}
            [answer] = self._gather([self._pool.submit(self._request, "POST", "/completion", body)])
        except (RemoteUnavailable, RemoteMismatch) as error:
            self._failed(error)
            raise
        read = self._read(state, answer)
        with self._lock:
            self.stats.prefilled += read
        return read

    def next_logprobs(self, states: Sequence[Sequence[int]]) -> np.ndarray:
        unique = self.distinct_states(states)
        self.check_interrupt()
        try:
            if not self._verified:
                self.connect()
            rows = self._rows(list(unique))
        except (RemoteUnavailable, RemoteMismatch) as error:
            self._failed(error)
            raise
        self.last_error = None
        with self._lock:
            self.stats.calls += 1
            self.stats.states += len(unique)
        return rows[[unique[tuple(state)] for state in states]]

    def _failed(self, error: Exception) -> None:
        """After a failure nothing is known of the server: check it again, assume its cache empty."""
        self._verified = False
        self._held = ()
        self.last_error = str(error)

    def _read(self, state: State, answer: dict) -> int:
        """Note what our slot holds after answering ``state``, and how fast it read the prompt; the tokens read."""
        timings = answer.get("timings") or {}
        read = int(timings.get("prompt_n", 0))
        seconds = float(timings.get("prompt_ms", 0)) / 1000
        with self._lock:
            self._held = state
            self.stats.tokens += read
            if read >= 32 and seconds > 0:
                self.prefill_rate = 0.7 * self.prefill_rate + 0.3 * read / seconds
        return read

    def _rows(self, order: list[State]) -> np.ndarray:
        """Every state's row, asked concurrently."""
        return np.stack(self._gather([self._pool.submit(self._row, state) for state in order]))

    def _gather(self, futures: list[Future]) -> list:
        """The futures' results; the first failure, or an interrupt, abandons the answers still out."""
        try:
            pending = set(futures)
            while pending:
                done, pending = wait(pending, timeout=_POLL_S, return_when=FIRST_EXCEPTION)
                for future in done:
                    future.result()  # the first failure ends the call
                if pending:
                    self.check_interrupt()
        except (Cancelled, RemoteUnavailable, RemoteMismatch):
            for future in futures:
                future.cancel()
            raise
        return [future.result() for future in futures]

    def _row(self, state: State) -> np.ndarray:
        """One state's row: top K, widened while the expected tokens' bound is loose."""
        needed = self._needed(state)
        k = min(self.options.top_k, self.n_vocab)
        while True:
            answer = self._request("POST", "/completion", self._body(state, k))
            ids, logprobs = _parse_completion(answer, self.url)
            self._read(state, answer)
            row, bound = full_row(ids, logprobs, self.n_vocab)
            loose = needed is not None and _loose(ids, logprobs, needed, bound, self.n_vocab)
            log.debug(
                "state of %d tokens: K=%d covers %.6f, rest %.3g, every other token <= %.3g%s",
                len(state), bound.k, 1 - bound.rest, bound.rest, bound.kth, ", widening" if loose else "",
            )
            with self._lock:
                self.stats.decodes += 1
                self.bounds.append(bound)
                self.widened += bool(loose and k < self.options.max_top_k)
            if not loose or k >= min(self.options.max_top_k, self.n_vocab):
                return row
            k = min(k * 8, self.options.max_top_k, self.n_vocab)

    def _body(self, state: State, k: int) -> dict:
        return {
            "prompt": list(state),  # token ids, BOS included by us: the server adds nothing to an id list
            "n_predict": 1,
            "n_probs": k,
            "post_sampling_probs": False,  # the softmax over the whole vocabulary, before any sampler
            "temperature": 0.0,  # the sampled token is not used: greedy is the cheapest sampler chain
            "cache_prompt": True,
            "id_slot": -1 if self.slot is None else self.slot,
            "stream": False,
        }

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

    def _request(self, method: str, path: str, body: dict | None = None) -> dict:
        """One JSON request, retried with backoff on a refused or dropped connection and on a 5xx answer."""
        payload = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"} if payload is not None else {}
        tries = 1 + max(0, self.options.retries)
        attempt = 0
        while True:
            reused = getattr(self._local, "connection", None) is not None
            try:
                connection = self._connection()
                connection.request(method, self._base + path, body=payload, headers=headers)
                response = connection.getresponse()
                data = response.read()
            except (TimeoutError, socket.timeout) as error:
                self._drop_connection()
                # No retry: a slow server only gets slower with more requests.
                raise RemoteUnavailable(
                    f"llama-server at {self.url} did not answer {path} within {self.options.timeout_s:g} s "
                    "(overloaded, or stopped?) -- suggestions resume when it answers"
                ) from error
            except (OSError, http.client.HTTPException) as error:
                self._drop_connection()
                if reused and isinstance(error, _DROPPED):
                    continue  # the server closed an idle keep-alive connection: a new one, at once
                problem = _describe(error)
            else:
                if response.status < 400:
                    try:
                        return json.loads(data)
                    except ValueError as error:
                        raise RemoteMismatch(
                            f"{self.url}{path} answered something that is not JSON: is it a llama-server?"
                        ) from error
                message = _error_message(data)
                if response.status < 500:
                    if response.status == 404:
                        raise RemoteMismatch(
                            f"{self.url} has no {path} ({message}): is it a llama-server? "
                            "(vLLM is not supported yet)"
                        )
                    raise RemoteMismatch(f"llama-server at {self.url} refused {path}: HTTP {response.status} {message}")
                problem = f"answered HTTP {response.status} ({message})"
            attempt += 1
            if attempt == tries:
                raise RemoteUnavailable(
                    f"llama-server at {self.url} {problem} after {tries} tries -- suggestions resume when it answers"
                )
            time.sleep(self.options.backoff_s * 2 ** (attempt - 1))

    def _connection(self) -> http.client.HTTPConnection:
        """This thread's keep-alive connection."""
        connection = getattr(self._local, "connection", None)
        if connection is None:
            kind = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
            connection = kind(self._host, self._port, timeout=self.options.timeout_s)
            self._local.connection = connection
        return connection

    def _drop_connection(self) -> None:
        connection = getattr(self._local, "connection", None)
        if connection is not None:
            connection.close()
            self._local.connection = None


def _parse_completion(answer: dict, url: str) -> tuple[np.ndarray, np.ndarray]:
    """Top-K ids and log-probabilities of the first generated position."""
    try:
        top = answer["completion_probabilities"][0]["top_logprobs"]
    except (KeyError, IndexError, TypeError) as error:
        raise RemoteMismatch(
            f"llama-server at {url} answered /completion without completion_probabilities[0].top_logprobs: "
            "is it a llama-server of 2025 or later?"
        ) from error
    ids = np.fromiter((item["id"] for item in top), dtype=np.int64, count=len(top))
    logprobs = np.fromiter((item["logprob"] for item in top), dtype=np.float64, count=len(top))
    return ids, logprobs


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


_DROPPED = (ConnectionResetError, BrokenPipeError, http.client.RemoteDisconnected, http.client.BadStatusLine)


def _describe(error: BaseException) -> str:
    if isinstance(error, ConnectionRefusedError):
        return "refused the connection (is it running?)"
    if isinstance(error, _DROPPED):
        return "dropped the connection mid-request (did it stop?)"
    if isinstance(error, socket.gaierror):
        return f"cannot be found ({error.strerror})"
    return f"failed: {error}"


def _error_message(data: bytes) -> str:
    """The message of a llama-server error answer (``{"error": {"message": ...}}``), or the text."""
    try:
        error = json.loads(data).get("error")
    except (ValueError, AttributeError):
        return data[:200].decode("utf-8", "replace")
    if isinstance(error, dict):
        return str(error.get("message", error))
    return str(error)
