"""Several servers of one model behind one `LanguageModel`: which replica serves each prompt, and skipping those that fail.

A team whose GPU one llama-server leaves idle (its main loop does each
state's host work in turn) runs several, on one GPU or on several machines,
and names them all in ``model``: ``http://gpu-box:8080 http://gpu-box:8081``
(spaces or commas between). Each replica is a `RemoteLM` of its own (its
connection, its check of the vocabulary at its first connection, what its
slot holds, its errors); this module only chooses among them:

- **A prompt stays on one replica**, so that the KV cache its slots keep
  serves the document's next keystroke. A call goes to the replica that
  ranks first for the start of its prompt (rendezvous hashing: each
  replica's score is a hash of the start and the replica's address), so
  every editor ranks alike with nothing shared, and a replica that leaves
  or comes back moves only its own prompts. The start is the prompt's first
  `ROUTE_LENGTHS` tokens (256), or for a shorter prompt its first 64 or 16:
  a document moves at most twice while it is short (a few dozen tokens read
  again), and files that begin alike (a licence header) spread over the
  replicas once they are past it. The prompt window's start moves in fixed
  steps (`cpc.window`), so a document's keystrokes share their start.
- **A replica that fails is tried last** (`RemoteUnavailable`: a refused
  or dropped connection, a 5xx answer, a timeout; or a refused key) for
  `RemoteOptions.replica_retry_s`, doubling while it keeps failing, up to
  `MAX_RETRY_S`. Its prompts go to the replica that ranks next, and come
  back when it answers again (checked again then: another model may answer
  on its port). The next replica is the retry: a replica's own request is
  not retried. A call tries every replica before it gives up, those that
  failed last (one that came back is used at once, when the others fail);
  when none answers, it raises `RemoteUnavailable` as one server's client
  does, and the next call tries again.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, fields, replace
from typing import TypeVar

import numpy as np

from cpc.index import PrefixIndex
from cpc.lm import LanguageModel, LMStats, RunStep, State
from cpc.remote import RemoteLM, RemoteOptions, RemoteProfile, RemoteRefused, RemoteUnavailable, server_addresses
from cpc.tokenizer import LlamaTokenizer

log = logging.getLogger(__name__)

ROUTE_LENGTHS = (256, 64, 16)
"""A prompt is routed by its first 256 tokens, or the first 64 or 16 of a shorter one (the whole of one shorter still)."""
MAX_RETRY_S = 30.0
"""The longest a failing replica is skipped before it is tried again."""

T = TypeVar("T")


def remote_lm(model: str, tokenizer: LlamaTokenizer, index: PrefixIndex, *, n_ctx: int,
              options: RemoteOptions) -> RemoteLM | ReplicatedLM:
    """The client of the server(s) a ``model`` setting names: a `RemoteLM`, or a `ReplicatedLM` of several."""
    addresses = server_addresses(model)
    if len(addresses) == 1:
        return RemoteLM(addresses[0], tokenizer, index, n_ctx=n_ctx, options=options)
    one_try = replace(options, retries=0)  # the next replica is the retry
    return ReplicatedLM([RemoteLM(address, tokenizer, index, n_ctx=n_ctx, options=one_try) for address in addresses],
                        options.replica_retry_s)


def route_key(states: Sequence[Sequence[int]]) -> bytes:
    """What a call is routed by: the start its states share, as long as `ROUTE_LENGTHS` allows.

    >>> route_key([(2, *range(300))]) == route_key([(2, *range(256), 7)])
    True
    >>> route_key([(2, 5, 6)]) == route_key([(2, 5, 6, 7)])
    False
    """
    shortest = min(len(state) for state in states)
    length = next((n for n in ROUTE_LENGTHS if n <= shortest), shortest)
    return np.asarray(states[0][:length], dtype=np.int32).tobytes()


def rank(key: bytes, addresses: Sequence[str]) -> list[int]:
    """The replicas' indexes, first the one that serves ``key`` (rendezvous hashing: the highest hash of key and
    address), then the one that takes over when it fails, and so on.

    >>> sorted(rank(b"x", ["http://a", "http://b", "http://c"]))
    [0, 1, 2]
    """
    scores = [int.from_bytes(hashlib.blake2b(key + address.encode(), digest_size=8).digest(), "big")
              for address in addresses]
    return sorted(range(len(addresses)), key=lambda n: -scores[n])


@dataclass
class _Health:
    """A replica's failures in a row and when it may be tried again."""

    failures: int = 0
    retry_at: float = 0.0


class ReplicatedLM(LanguageModel):
    """Next-token rows from several servers of one model: each prompt on one, failed ones skipped for a while."""

    def __init__(self, replicas: Sequence[RemoteLM], retry_s: float) -> None:
        """``retry_s``: how long a replica that failed is skipped first (it doubles while it keeps failing)."""
        self.replicas = list(replicas)
        first = self.replicas[0]
        self.vocab, self.n_ctx, self.bos = first.vocab, first.n_ctx, first.bos
        self.url = " ".join(replica.url for replica in self.replicas)
        """Every replica's address, as the ``model`` setting writes them."""
        self.retry_s = retry_s
        self.last_error: str | None = None
        self._addresses = [replica.url for replica in self.replicas]
        self._health = [_Health() for _ in self.replicas]
        self._last = first
        self._lock = threading.Lock()
        for replica in self.replicas:
            replica.interrupt = self._interrupted  # the callers interrupt this model; its replicas poll that

    def _interrupted(self) -> bool:
        return self.interrupt is not None and self.interrupt()

    # -- what the replicas count, summed ---------------------------------------------

    @property
    def stats(self) -> LMStats:
        return LMStats(**{f.name: sum(getattr(r.stats, f.name) for r in self.replicas) for f in fields(LMStats)})

    @property
    def profile(self) -> RemoteProfile:
        return RemoteProfile(**{f.name: sum(getattr(r.profile, f.name) for r in self.replicas)
                                for f in fields(RemoteProfile)})

    @property
    def prefill_rate(self) -> float:
        """The rate of the replica that served last: what the next prompt's budget is planned with."""
        return self._last.prefill_rate

    # -- the interface ----------------------------------------------------------------

    def try_connect(self) -> bool:
        """Check every replica (`RemoteLM.try_connect`): those that answer are used again at once, those that do
        not are tried last; whether one answers. One of another model is an error."""
        answered = [replica.try_connect() for replica in self.replicas]
        for number, ok in enumerate(answered):
            if ok:
                self._answered(number)
            else:
                self._failed(number, self.replicas[number].last_error or "")
        self.last_error = None if any(answered) else "; ".join(r.last_error or "" for r in self.replicas)
        return any(answered)

    def next_logprobs(self, states: Sequence[Sequence[int]], *, greedy: bool = False) -> np.ndarray:
        return self._serve(states, lambda replica: replica.next_logprobs(states, greedy=greedy))

    def greedy_next(self, states: Sequence[Sequence[int]], banned: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self._serve(states, lambda replica: replica.greedy_next(states, banned))

    @property
    def runs_greedily(self) -> bool:
        return self._last.runs_greedily

    def greedy_run(self, state: Sequence[int], length: int, *, top_k: int,
                   stop_at_line_end: bool) -> Iterator[RunStep]:
        """On the replica that keeps the state's prompt. A failure ends the run; the step after it fails over."""
        replica = self.replicas[self._order(route_key([state]))[0]]
        return replica.greedy_run(state, length, top_k=top_k, stop_at_line_end=stop_at_line_end)

    def prefill(self, state: Sequence[int]) -> int:
        return self._serve([state], lambda replica: replica.prefill(state))

    def cached_length(self, state: Sequence[int]) -> int:
        return self.replicas[self._order(route_key([state]))[0]].cached_length(state)

    def expect(self, start: State, data: bytes) -> None:
        for replica in self.replicas:
            replica.expect(start, data)

    def reset(self) -> None:
        for replica in self.replicas:
            replica.reset()

    # -- choosing -----------------------------------------------------------------------

    def _order(self, key: bytes) -> list[int]:
        """The replicas to try for ``key``, in turn: by rank those that did not fail lately, then the others,
        the one whose wait ends first first."""
        ranked = rank(key, self._addresses)
        now = time.monotonic()
        with self._lock:
            up = [n for n in ranked if self._health[n].retry_at <= now]
            return up + sorted(set(ranked) - set(up), key=lambda n: self._health[n].retry_at)

    def _serve(self, states: Sequence[Sequence[int]], work: Callable[[RemoteLM], T]) -> T:
        """``work`` on the replica that keeps these states' prompt, or on the next ones while they fail."""
        errors: list[RemoteUnavailable | RemoteRefused] = []
        for number in self._order(route_key(states)):
            replica = self.replicas[number]
            try:
                result = work(replica)
            except (RemoteUnavailable, RemoteRefused) as error:
                self._failed(number, str(error))
                errors.append(error)
                continue
            self._answered(number)
            self._last = replica
            self.last_error = None
            return result
        if len(errors) == 1 or all(isinstance(error, RemoteRefused) for error in errors):
            self.last_error = str(errors[0])
            raise errors[0]
        self.last_error = f"no model server answered: {'; '.join(str(error) for error in errors)}"
        raise RemoteUnavailable(self.last_error) from errors[-1]

    def _failed(self, number: int, error: str) -> None:
        with self._lock:
            health = self._health[number]
            health.failures += 1
            wait = min(MAX_RETRY_S, self.retry_s * 2 ** (health.failures - 1))
            health.retry_at = time.monotonic() + wait
        log.warning("%s is tried last for %g s: %s", self._addresses[number], wait, error)

    def _answered(self, number: int) -> None:
        with self._lock:
            health = self._health[number]
            back = health.failures > 0
            health.failures = 0
            health.retry_at = 0.0
        if back:
            log.info("%s answers again: its prompts go to it again", self._addresses[number])
