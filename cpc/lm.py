"""The language-model interface every backend implements: token states in, next-token log-probabilities out.

The interface has the shape of a shallow-fusion decoder's models: *states in,
next-token log-probabilities for every state out*, plus an end-of-sequence
score. A state is simply the token sequence the model has read (BOS
included), so callers never manage model memory. `LanguageModel` is
implemented by `cpc.llama.LlamaLM` (llama.cpp in this process),
`cpc.remote.RemoteLM` (a shared inference server) and
`cpc.replicas.ReplicatedLM` (several such servers of one model).

A caller asks only for what it needs of a state, because every row is a
pass over the vocabulary (262,144 logits for Gemma 3) on the host:
`next_logprobs` for whole normalised rows (fusion adds its scores to them),
`next_scores` for rows it normalises itself (`cpc.beam.Snapshot`), and
`greedy_next` for a greedy step's token and log-probability, which
`greedy_choice` takes from the logits in one exponential pass and a maximum.
A model on a server can also decode greedily on its own side, many tokens
in one request (`greedy_run`); `known_choice` says whether what it reports
of a position (its likeliest tokens) decides the choice a full row would.
The arithmetic on a row of logits that backends and generation share
(`log_softmax`, `greedy_choice`, `best_allowed`) lives here too.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from cpc.vocab import Vocabulary

State = tuple[int, ...]

DEFAULT_CONTEXT_SIZE = 1536
"""Tokens of context per sequence in the KV cache (it keeps ``n_seq`` sequences)."""

INITIAL_PREFILL_RATE = 300.0
"""Tokens per second assumed for reading a prompt until one has been timed."""


@dataclass
class LMStats:
    """Counters a benchmark reads: how often and how much the model ran."""

    calls: int = 0
    """`next_logprobs` / `token_logprobs` calls that needed the model, and greedy runs (`greedy_run`)."""
    decodes: int = 0
    """``llama_decode`` invocations (one batch each)."""
    tokens: int = 0
    """Tokens evaluated."""
    states: int = 0
    """States answered."""
    prefilled: int = 0
    """Tokens read ahead by `LanguageModel.prefill` (warming the cache)."""
    summarised: int = 0
    """Greedy steps and rows of log-probabilities whose normaliser came from the model's graph
    (`LanguageModel.backend_greedy`)."""
    drafted: int = 0
    """Draft tokens checked (`LanguageModel.check_drafts`)."""
    accepted: int = 0
    """Draft tokens the caller kept."""
    run_tokens: int = 0
    """Tokens greedy runs on the model's side sent back (`LanguageModel.greedy_run`)."""


@dataclass(frozen=True)
class RunStep:
    """One token a model decoded greedily on its own side (`LanguageModel.greedy_run`), and what it reported of
    that position: its likeliest tokens, most likely first, with their exact log-probabilities."""

    token: int
    ids: np.ndarray
    logprobs: np.ndarray


class Cancelled(Exception):
    """The model's ``interrupt`` asked to stop: the request it served is obsolete."""


class LanguageModel(ABC):
    """A batched next-token model over a `Vocabulary`."""

    vocab: Vocabulary
    n_ctx: int
    """The longest state it takes."""
    bos: State
    """The tokens every state starts with: BOS, or the document separator."""
    stats: LMStats
    interrupt: Callable[[], bool] | None = None
    """Polled before each model evaluation (a backend may poll between batches too):
    when it returns True the call raises `Cancelled`, and the model stays usable."""

    def distinct_states(self, states: Sequence[Sequence[int]]) -> dict[State, int]:
        """Each distinct state once, numbered in order of first appearance; a clear error for one
        that is empty or longer than ``n_ctx``."""
        unique: dict[State, int] = {}
        for state in states:
            state = tuple(state)
            if not state:
                raise ValueError("a state needs at least one token (start from lm.bos or a prompt)")
            if len(state) > self.n_ctx:
                raise ValueError(f"a state of {len(state)} tokens does not fit the context of {self.n_ctx}")
            unique.setdefault(state, len(unique))
        return unique

    @contextmanager
    def interruptible(self, cancelled: Callable[[], bool] | None) -> Iterator[None]:
        """Poll ``cancelled`` as `interrupt` while the block runs: the model calls in it raise `Cancelled`
        once it returns True.

        >>> class Quiet(LanguageModel):
        ...     def next_logprobs(self, states, greedy=False): self.check_interrupt()
        >>> lm = Quiet()
        >>> with lm.interruptible(lambda: True):
        ...     lm.next_logprobs([(1,)])
        Traceback (most recent call last):
        cpc.lm.Cancelled
        >>> lm.interrupt is None
        True
        """
        self.interrupt = cancelled
        try:
            yield
        finally:
            self.interrupt = None

    def check_interrupt(self) -> None:
        if self.interrupt is not None and self.interrupt():
            raise Cancelled

    def stop_now(self) -> None:
        """Make the evaluation in flight poll ``interrupt`` now, not when it next would (any thread may ask).

        For whoever makes the work stale (a key, a cancel) while a long
        batch runs. A backend that cannot break into an evaluation polls at
        its usual points only.
        """

    @abstractmethod
    def next_logprobs(self, states: Sequence[Sequence[int]], *, greedy: bool = False) -> np.ndarray:
        """``log P(next token | state)`` for every state: shape ``(len(states), len(vocab))``.

        With ``greedy``, the caller takes each row's likeliest token that is
        no control token (EOS aside), and its value, and nothing else: a
        backend that knows only part of each distribution (`cpc.remote`)
        answers fewer tokens exactly then; an exact backend ignores it.
        """

    def next_scores(self, states: Sequence[Sequence[int]]) -> np.ndarray:
        """Next-token scores for every state, *unnormalised*: each row is `next_logprobs`' row plus a constant.

        For a caller that normalises anyway (`cpc.beam.Snapshot` renormalises
        over the text tokens): a backend that holds logits hands them over and
        skips a normalising pass over the vocabulary per state.
        """
        return self.next_logprobs(states)

    def greedy_next(self, states: Sequence[Sequence[int]], banned: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each state's likeliest next token that ``banned`` (a mask over the vocabulary) does not mark,
        and its log-probability: all that greedy decoding asks of a state.

        >>> class Fixed(LanguageModel):  # every state: token 0 at 0.5, 1 at 0.3, 2 at 0.2
        ...     stats = LMStats()
        ...     def next_logprobs(self, states, greedy=False): return np.log([[0.5, 0.3, 0.2]] * len(states))
        >>> tokens, logprobs = Fixed().greedy_next([(7,)], banned=np.array([True, False, False]))
        >>> int(tokens[0]), round(float(np.exp(logprobs[0])), 2)
        (1, 0.3)
        """
        return best_allowed(self.next_logprobs(states, greedy=True), banned)

    def check_cost(self, rows: int) -> float | None:
        """Milliseconds of a model call that reads ``rows`` rows of one state and its draft, as measured
        (None: not measured, or a backend where drafts do not pay)."""
        return None

    last_error: str | None = None
    """Why the model's server did not answer the last time it was asked (None while it does, and always for
    a model that runs in this process)."""
    backend_greedy: bool = False
    """Whether greedy steps are normalised in the model's graph (`cpc.backend_sampling`)."""

    checks_drafts_cheaply: bool = False
    """Whether `check_drafts` reads a state and its draft in one evaluation at a cost that a kept draft
    repays; without it, generation proposes no drafts. Off for every backend, as measured: on a CPU each
    row of a check costs the output layer (262,144 logits for Gemma 3), and drafts saved model calls but
    no time (docs/benchmarks.md); on an H200 a row was cheap on the device but cost the host 0.39 ms, so
    drafts saved no time either, and a draft's cells, computed in a batch, moved a later close choice in
    1 line of 40 (docs/gpu.md). Benchmarks set it to measure them."""

    def check_drafts(self, states: Sequence[Sequence[int]], drafts: Sequence[Sequence[int]],
                     choose: Callable[[int, int, np.ndarray], int | None]) -> list[State]:
        """Follow each state's draft as far as the caller's choices agree with it, in one call.

        ``choose(number, position, scores)`` gets the next-token scores of
        ``states[number] + drafts[number][:position]`` (unnormalised, as
        `next_scores`) and returns the token the caller takes there, or None
        where it would rather not decide from these scores. A state's walk
        stops at the first choice that is not its draft's next token, after
        the choice that follows the whole draft, or at a None; ``choose`` is
        asked in order of position, and never past that. Returns the tokens
        chosen for each state: the draft's accepted tokens, then the choice
        that ended the walk, if any. What is kept between calls (a KV cache)
        ends with each state's accepted tokens.

        >>> class Fixed(LanguageModel):  # every state: token 0 at 0.5, 1 at 0.3, 2 at 0.2
        ...     stats = LMStats()
        ...     def next_logprobs(self, states, greedy=False): return np.log([[0.5, 0.3, 0.2]] * len(states))
        >>> lm = Fixed()
        >>> lm.check_drafts([(7,)], [(0, 0, 1)], lambda number, position, scores: int(scores.argmax()))
        [(0, 0, 0)]
        >>> lm.stats.drafted, lm.stats.accepted
        (3, 2)
        """
        nested = [tuple(state) + tuple(draft[:length]) for state, draft in zip(states, drafts) for length in range(len(draft) + 1)]
        rows = iter(self.next_scores(nested))
        walks = [DraftWalk(draft) for draft in drafts]
        for number, walk in enumerate(walks):
            for position, row in zip(range(len(walk.draft) + 1), rows):
                if walk.goes_on(position):
                    walk.take(choose(number, position, row))
        self._count_drafts(walks)
        return [tuple(walk.tokens) for walk in walks]

    def _count_drafts(self, walks: list[DraftWalk]) -> None:
        self.stats.drafted += sum(len(walk.draft) for walk in walks)
        self.stats.accepted += sum(walk.accepted() for walk in walks)

    runs_greedily: bool = False
    """Whether `greedy_run` decodes on the model's side, a line's tokens in one call (a server's streamed
    greedy decoding): a line costs one round trip instead of one per token."""

    def greedy_run(self, state: Sequence[int], length: int, *, top_k: int,
                   stop_at_line_end: bool) -> Iterator[RunStep]:
        """Decode greedily after ``state`` on the model's side, up to ``length`` tokens (and the first line break
        with ``stop_at_line_end``), and yield each token as it comes, with its position's top ``top_k``.

        The model's own sampler picks the tokens: the caller takes one only where `known_choice` shows it
        is the choice a full row gives, and closes the iterator at the first it does not take (the model
        then stops). A run that fails ends early; the caller goes on step by step, where a failure is
        reported. Only a backend with `runs_greedily` implements it.
        """
        raise NotImplementedError(f"{type(self).__name__} does not decode on its own side")

    def reset(self) -> None:
        """Forget whatever is kept between calls (a KV cache); the default keeps nothing."""

    def expect(self, start: State, data: bytes) -> None:
        """A hint: the text after ``start`` begins with ``data`` (the typed tail a request conditions on).

        A backend that knows only part of each distribution (`cpc.remote`)
        makes sure the tokens that can spell ``data`` are known well; an
        exact backend has nothing to do.
        """

    prefill_rate: float = INITIAL_PREFILL_RATE
    """Prompt tokens read per second, as last measured: what a prompt-time budget is planned with."""

    def cached_length(self, state: Sequence[int]) -> int:
        """How many of ``state``'s first tokens are kept from earlier calls (none without a cache)."""
        return 0

    def prefill(self, state: Sequence[int]) -> int:
        """Read ``state`` ahead into what is kept between calls, so that a later call on it or on
        an extension of it costs only what follows; returns the tokens read. Polls ``interrupt``
        (raising `Cancelled`); what was read before keeps. Without a cache there is nothing to do."""
        return 0

    def eos_logprob(self, logprobs: np.ndarray) -> np.ndarray:
        """``log P(end of sequence | state)`` per row of `next_logprobs`' result."""
        eos = sorted(self.vocab.eos_ids)
        if not eos:
            return np.full(len(logprobs), -np.inf)
        return np.logaddexp.reduce(np.asarray(logprobs, dtype=np.float64)[:, eos], axis=1)

    def token_logprobs(self, tokens: Sequence[int]) -> np.ndarray:
        """``log P(tokens[i] | tokens[:i])`` for ``i`` in ``1 .. len(tokens)-1``.

        The score of one given token sequence; backends override it with a
        single pass over the sequence.
        """
        tokens = tuple(tokens)
        rows = self.next_logprobs([tokens[:i] for i in range(1, len(tokens))])
        return rows[np.arange(len(rows)), list(tokens[1:])].astype(np.float64)


class DraftWalk:
    """One state's way along its draft (`LanguageModel.check_drafts`): the choices so far, and whether it goes on."""

    def __init__(self, draft: Sequence[int]) -> None:
        self.draft = draft
        self.tokens: list[int] = []
        self.stopped = False

    def goes_on(self, position: int) -> bool:
        """Whether the choice at ``position`` is wanted: every choice before it took the draft's token."""
        return not self.stopped and len(self.tokens) == position and (not position or self.tokens[-1] == self.draft[position - 1])

    def take(self, token: int | None) -> None:
        if token is None:
            self.stopped = True
        else:
            self.tokens.append(token)

    def accepted(self) -> int:
        """The draft's tokens that were chosen."""
        count = min(len(self.tokens), len(self.draft))
        return count if self.tokens[:count] == list(self.draft[:count]) else count - 1


def best_allowed(rows: np.ndarray, banned: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row's largest entry that ``banned`` (a mask or ids over the columns) does not mark, and its
    value (float64); the rows are changed.

    >>> best_allowed(np.array([[0.5, 0.3, 0.2]]), np.array([True, False, False]))
    (array([1]), array([0.3]))
    """
    if banned.dtype == bool:
        np.copyto(rows, -np.inf, where=banned)  # a masked write: several times faster than rows[:, banned]
    else:
        rows[:, banned] = -np.inf
    chosen = rows.argmax(axis=1)
    return chosen, rows[np.arange(len(rows)), chosen].astype(np.float64)


KNOWN_MARGIN = 1e-4
"""Nats by which a choice from a row's likeliest tokens must beat the most any other token may score
(`known_choice`): float32 rounding of the bound never decides."""


def known_choice(ids: np.ndarray, logprobs: np.ndarray, banned: np.ndarray,
                 fused: np.ndarray | None = None) -> tuple[int, float] | None:
    """The choice greedy decoding makes from a whole row, known from its likeliest tokens only, or None when
    those do not decide it.

    ``ids`` and ``logprobs`` are the row's top K (exact values, most likely first), ``banned`` the tokens
    never chosen. Unfused, the choice is the likeliest allowed token, known when one of the top K is
    allowed, with its value as `LanguageModel.greedy_next` gives it. With ``fused`` (fusion's scores over
    the vocabulary), the choice maximises ``float32 log-probability + fused``, as `cpc.generate` does on a
    row built from any wider top K (`cpc.remote.full_row`): every other token's log-probability is at most
    the K-th's there, so the best known token decides when it beats that bound plus the largest score
    fusion gives any other allowed token by `KNOWN_MARGIN`.

    >>> ids, logprobs = np.array([2, 0]), np.log([0.6, 0.3])
    >>> known_choice(ids, logprobs, np.zeros(4, bool))[0]
    2
    >>> known_choice(ids, logprobs, np.zeros(4, bool), fused=np.float32([0.0, 0.0, 0.0, 9.0])) is None  # 3 may win
    True
    >>> known_choice(ids, logprobs, np.zeros(4, bool), fused=np.float32([2.0, 0.0, 0.0, 0.5]))[0]
    0
    """
    allowed = ~banned[ids]
    if not allowed.any():
        return None
    if fused is None:
        best = int(np.argmax(np.where(allowed, logprobs, -np.inf)))
        return int(ids[best]), float(logprobs[best])
    values = np.where(allowed, logprobs.astype(np.float32) + fused[ids], -np.inf)
    top = values.max()
    token = int(ids[values == top].min())  # a full row's argmax: the first of equal values
    others = fused.copy()
    np.copyto(others, -np.inf, where=banned)
    others[ids] = -np.inf
    bound = np.float32(logprobs.min()) + others.max()
    if not top > bound + KNOWN_MARGIN:
        return None
    return token, float(top)


Normaliser = tuple[np.float32, np.float32]
"""A row's maximum and ``log(sum(exp(logits - maximum)))``: its log-probabilities are
``(logits - maximum) - log_sum``, in float32 like llama.cpp's logits."""


def log_normaliser(logits: np.ndarray, scratch: np.ndarray, maximum: np.float32 | None = None) -> Normaliser:
    """The `Normaliser` of a row of logits, from float32 exponentials summed in float64 (as precise as
    llama.cpp's own logits); ``scratch`` is a float32 array of the same length, so nothing is allocated,
    and a ``maximum`` already known saves a pass.

    >>> maximum, log_sum = log_normaliser(np.log(np.array([0.5, 0.25, 0.25], dtype=np.float32)), np.empty(3, np.float32))
    >>> round(float(maximum), 4), round(float(log_sum), 4)
    (-0.6931, 0.6931)
    """
    maximum = logits.max() if maximum is None else maximum
    np.subtract(logits, maximum, out=scratch)
    np.exp(scratch, out=scratch)
    return maximum, np.float32(math.log(scratch.sum(dtype=np.float64)))


def logprob_of(logits: np.ndarray, token: int, normaliser: Normaliser) -> float:
    """One token's log-probability, rounded exactly as `log_softmax` rounds its row."""
    maximum, log_sum = normaliser
    return float((logits[token] - maximum) - log_sum)


def log_softmax(row: np.ndarray, logits: np.ndarray, normaliser: Normaliser | None = None) -> None:
    """Write ``logits``' log-probabilities into ``row`` (float32); a ``normaliser`` already known (a GPU's,
    `cpc.backend_sampling`) saves the exponentials' pass.

    >>> row = np.empty(2, np.float32); log_softmax(row, np.array([1.0, 1.0], np.float32)); [round(float(v), 4) for v in row]
    [-0.6931, -0.6931]
    """
    maximum, log_sum = normaliser or log_normaliser(logits, row)
    np.subtract(logits, maximum, out=row)
    row -= log_sum


def greedy_choice(logits: np.ndarray, banned: np.ndarray, scratch: np.ndarray) -> tuple[int, float]:
    """The likeliest token that ``banned`` does not mark, and its log-probability, from one row of logits:
    a maximum, the normaliser's exponentials and a sum, and nothing allocated (``scratch`` as for
    `log_normaliser`). Only when a banned token is the likeliest is the row copied and masked.

    >>> logits = np.log(np.array([0.5, 0.3, 0.2], dtype=np.float32))
    >>> token, logprob = greedy_choice(logits, np.array([True, False, False]), np.empty(3, np.float32))
    >>> token, round(logprob, 4)
    (1, -1.204)
    """
    token = int(logits.argmax())
    normaliser = log_normaliser(logits, scratch, logits[token])
    if banned[token]:
        np.copyto(scratch, logits)
        np.copyto(scratch, -np.inf, where=banned)
        token = int(scratch.argmax())
    return token, logprob_of(logits, token, normaliser)
