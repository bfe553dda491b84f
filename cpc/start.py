"""Where generation starts: the first token after the cursor, chosen by the byte-level marginal over starts.

A *start* is a state generation may continue from: for ``cpc``, a covering
path of the typed characters (`cpc.conditioning`), whose last token may
already reach past the cursor; for ``naive``, the prompt; for ``heal``, the
prompt without its last token, the next token held to start with that
token's bytes. Each start with each of its likeliest next tokens is a
*pair*, and a pair spells some bytes after the cursor.

Paths of different lengths cut the same text differently, so they are not
compared token by token: from the cursor, the byte with the most mass summed
over every pair that spells it wins, until stopping holds more mass than
any next byte (`by_byte_marginal`). A start's next-token distribution costs
the model's output layer, so a start is expanded into pairs only when the
marginal cannot decide without it (`first_tokens`). With fusion
(`cpc.fusion`), every pair is ranked on the model's score plus the fused
models'.

Everything here takes plain values: the starts, the snapshot cache that
fetches model states (`cpc.beam.SnapshotCache`) and the prefix index.

    >>> by_byte_marginal({b"frame": 0.3, b"getframe": 0.25, b"get": 0.2})
    b'getframe'
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from cpc.lm import State

if TYPE_CHECKING:
    from cpc.beam import Snapshot, SnapshotCache
    from cpc.fusion import Fusion, FusionState
    from cpc.index import PrefixIndex

MARGINAL_TOKENS = 256
"""First tokens per start whose mass the byte-level marginal sums."""


@dataclass
class Start:
    """A state generation starts from, and what its bytes already hold."""

    tokens: State
    logprob: float
    typed: bytes = b""
    """Bytes after the prompt that were typed (they are not part of the completion)."""
    shown: bytes = b""
    """Bytes after the typed ones that the start already holds (a path's overhang)."""
    allowed: tuple[int, int] | None = None
    """Index range the first generated token must lie in (token healing)."""
    path: State = ()
    """The tokens after the prompt that re-read the typed tail (``cpc``)."""


@dataclass(frozen=True)
class FirstToken:
    """A start and the token generation continues it with."""

    start: Start
    token: int | None
    """None: the text ends right after the start."""
    logprob: float
    """The start's and the token's log-probability (with fusion, plus the fused scores)."""
    fusion_state: FusionState | None = None


@dataclass
class Fused:
    """Fusion for one request: the tokens and bytes before the cursor's tail, where its states start."""

    fusion: Fusion
    context: State
    text: bytes

    def best(self, starts: list[Start], count: int) -> tuple[list[Start], list[float]]:
        """The ``count`` starts with the best model + fusion score (the order kept among equals), and those scores."""
        scores, _ = self.starts(starts)
        fused = [start.logprob + float(score) for start, score in zip(starts, scores)]
        ranked = sorted(range(len(starts)), key=lambda k: -fused[k])[:count]
        return [starts[k] for k in ranked], [fused[k] for k in ranked]

    def starts(self, starts: list[Start]) -> tuple[np.ndarray, list[FusionState]]:
        """Each start's own fusion score (its path and overhang), and its state."""
        text = [self.text[: len(self.text) - len(s.typed)] if s.allowed else self.text for s in starts]
        scores, states = [], []
        for start, before in zip(starts, text):
            score, (state,) = self.fusion.init_states(self.context, before, [(start.path, start.shown)])
            scores.append(float(score[0]))
            states.append(state)
        return np.asarray(scores), states



def rank_starts(starts: list[Start], count: int, fused: Fused | None) -> tuple[list[Start], list[float]]:
    """The starts in the order they compete, and their scores: as they come without fusion (their model
    scores), else the ``count`` best on model + fusion score."""
    if fused is None:
        return starts, [start.logprob for start in starts]
    return fused.best(starts, count)


def contenders(starts: list[Start], scores: list[float], margin: float, keep: int) -> list[Start]:
    """The starts (best first) that can still win the first token: within ``margin`` of the best, at least ``keep``."""
    if not starts:
        return starts
    best = max(scores)
    return [start for k, (start, score) in enumerate(zip(starts, scores)) if k < keep or score >= best - margin]

def first_tokens(
    starts: list[Start], snapshots: SnapshotCache, index: PrefixIndex, *, n: int, by_marginal: bool,
    fused: Fused | None = None,
) -> list[FirstToken]:
    """The ``n`` best (start, first token) pairs, distinct in their bytes; with ``by_marginal``, the
    byte-level marginal's choice first (`by_byte_marginal`), the others best first.

    A start's snapshot costs the model's output layer, so for one
    marginal's choice a start is expanded into its pairs only when the
    marginal cannot decide without it: until then it counts as a leaf that
    holds its path's mass at its overhang's bytes (with fusion, between
    bounds). A start whose snapshot is cached already (a path that ends at
    the cursor, read by the conditioning) is expanded at once; the others
    are fetched in one batched call when needed. With fusion, each pair is
    ranked on its fused score.
    """
    pairs = _Pairs(starts, snapshots, index, max(n, MARGINAL_TOKENS if by_marginal else 0), fused)
    lazy = by_marginal and n == 1
    pairs.expand([k for k, start in enumerate(starts) if not lazy or snapshots.known(start.tokens) is not None])
    chosen: bytes | None = None
    while by_marginal and (pairs.mass_by_bytes or pairs.pending):
        decided = by_byte_marginal(pairs.mass_by_bytes, pairs.leaves())
        if not isinstance(decided, frozenset):
            chosen = decided
            break
        if not decided:
            break
        pairs.expand(sorted(decided))
    ranked = sorted(pairs.options_by_bytes, key=lambda data: pairs.options_by_bytes[data][0], reverse=True)
    if chosen is not None and ranked:
        ranked.remove(chosen)
        ranked.insert(0, chosen)
    return [
        FirstToken(starts[number], token, logprob, pairs.fusion_state(number, token))
        for logprob, number, token in (pairs.options_by_bytes[data] for data in ranked[:n])
    ]


class _Pairs:
    """The (start, first token) pairs of the starts expanded so far, by the bytes they spell after the cursor."""

    def __init__(
        self, starts: list[Start], snapshots: SnapshotCache, index: PrefixIndex, per_start: int, fused: Fused | None
    ) -> None:
        self.starts = starts
        self.snapshots = snapshots
        self.index = index
        self.fused = fused
        self.per_start = per_start
        self.options_by_bytes: dict[bytes, tuple[float, int, int | None]] = {}
        """The best pair per byte string: (log score, start's number, token or None for the end)."""
        self.mass_by_bytes: dict[bytes, float] = {}
        self.pending = set(range(len(starts)))
        # per start, the log of the least and most mass its pairs can hold (equal without fusion)
        if fused is None:
            self._bounds = [(start.logprob, start.logprob) for start in starts]
        else:
            self.start_scores, states = fused.starts(starts)
            self.rows, self.next_states = fused.fusion.advance(states)
            self.ends = fused.fusion.final(states)
            self._bounds = [
                (start.logprob + score + min(float(row.min()), float(end)),
                 start.logprob + score + max(float(row.max()), float(end)))
                for start, score, row, end in zip(starts, self.start_scores, self.rows, self.ends)
            ]

    def leaves(self) -> dict[int, tuple[bytes, float, float]]:
        """The starts not expanded yet: their overhang's bytes and the bounds on their mass."""
        return {k: (self.starts[k].shown, math.exp(self._bounds[k][0]), math.exp(self._bounds[k][1]))
                for k in self.pending}

    def expand(self, numbers: list[int]) -> None:
        """Add the pairs of these starts (their snapshots come from one batched call)."""
        numbers = [k for k in numbers if k in self.pending]
        snapshots = self.snapshots.get_many([self.starts[k].tokens for k in numbers])
        for number, snapshot in zip(numbers, snapshots):
            self.pending.discard(number)
            self._add(number, snapshot)

    def _add(self, number: int, snapshot: Snapshot) -> None:
        start, fused, index = self.starts[number], self.fused, self.index
        lo, hi = start.allowed or (0, len(index))
        total = snapshot.mass(lo, hi) + (snapshot.eos if start.allowed is None else 0.0)
        if total <= 0:
            return
        # Every token may come first (by id, no layout in index order), or only a healed range.
        tokens = None if start.allowed is None else index.order[lo:hi]
        probs = snapshot.by_token if tokens is None else snapshot.in_order(lo, hi)
        bonus = np.zeros(0)
        if fused is None:
            top = _best(probs, self.per_start)
        else:
            # ranked in float32, the precision of the model's own rows
            bonus = self.rows[number] if tokens is None else self.rows[number][tokens]
            bonus = bonus + np.float32(self.start_scores[number])
            with np.errstate(divide="ignore"):
                score = np.log(probs, dtype=np.float32)
            score += bonus
            top = _best(score, self.per_start)
        # as Python floats and ints at once (exactly the values, no numpy scalar per choice)
        choices: list[tuple[float, float, int | None]] = list(zip(
            probs[top].tolist(), bonus[top].tolist() if len(bonus) else [0.0] * len(top),
            (top if tokens is None else tokens[top]).tolist()))
        if start.allowed is None:
            end_bonus = float(self.ends[number]) + self.start_scores[number] if fused is not None else 0.0
            choices.append((snapshot.eos, end_bonus, None))
        pieces, shown, base = index.vocab.pieces, start.shown, start.logprob
        masses, options, log, exp = self.mass_by_bytes, self.options_by_bytes, math.log, math.exp
        for probability, fusion_score, token in choices:
            if probability <= 0:
                continue
            data = shown + pieces[token] if token is not None else shown
            logprob = base + log(probability / total) + fusion_score
            masses[data] = masses.get(data, 0.0) + exp(logprob)
            known = options.get(data)
            if known is None or known[0] < logprob:
                options[data] = (logprob, number, token)

    def fusion_state(self, number: int, token: int | None) -> FusionState | None:
        """The fusion state a stream reaches from start ``number`` through ``token`` (asked only for the winners)."""
        return self.next_states[number, token] if self.fused is not None and token is not None else None


def by_byte_marginal(
    masses: dict[bytes, float], leaves: dict[int, tuple[bytes, float, float]] | None = None
) -> bytes | frozenset[int]:
    """The first token's bytes that the byte-level marginal leads to.

    ``masses`` holds, per byte string a (covering path, first token) pair
    spells after the cursor, the probability of the pairs that spell it. From
    the cursor, follow the next byte with the most mass summed over every
    pair that spells it, until stopping here holds more mass than any next
    byte. So segmentations of different lengths are compared on the bytes
    they agree on: ``sys._|`` goes on with ``g`` when the paths through
    ``._`` + ``getframe`` and ``.`` + ``_get…`` together outweigh ``.`` +
    ``_frame``, however the best single pair scores.

    ``leaves`` are starts not expanded into pairs yet, keyed by number: the
    bytes they spell, and the least and most mass their pairs hold. When
    the walk reaches a leaf's bytes (what follows them is unknown) or the
    bounds leave the next step open, the answer is the leaves to expand.

    >>> by_byte_marginal({b"frame": 0.3, b"getframe": 0.25, b"get": 0.2})
    b'getframe'
    >>> by_byte_marginal({b"frame": 0.3}, {7: (b"get", 0.45, 0.45)})
    frozenset({7})
    >>> by_byte_marginal({b"frame": 0.3, b"getframe": 0.25}, {7: (b"ge", 0.01, 0.02)})
    b'frame'
    """
    prefix = b""
    live, waiting = masses, leaves or {}
    while True:
        reached = frozenset(k for k, (data, _, _) in waiting.items() if data == prefix)
        if reached:
            return reached
        depth = len(prefix)
        least: dict[int, float] = {}
        going_on: dict[int, list[bytes]] = {}  # by next byte, in the order of ``live``: the next step's ``live``
        for data, mass in live.items():
            if len(data) > depth:
                byte = data[depth]
                least[byte] = least.get(byte, 0.0) + mass
                going_on.setdefault(byte, []).append(data)
        most = dict(least)
        for data, low, high in waiting.values():
            least[data[depth]] = least.get(data[depth], 0.0) + low
            most[data[depth]] = most.get(data[depth], 0.0) + high
        stop = live.get(prefix, 0.0)
        if not least or stop >= max(most.values()):
            if prefix in live or not waiting:
                return prefix if prefix in live else max(live, key=live.__getitem__)
            return frozenset(waiting)  # every mass here is zero but the leaves': look inside them
        byte = max(least, key=least.__getitem__)
        if waiting and least[byte] < max([stop, *(high for b, high in most.items() if b != byte)]):
            return frozenset(waiting)  # the bounds overlap: expand the leaves still in the race
        prefix += bytes([byte])
        live = {data: live[data] for data in going_on.get(byte, ())}
        waiting = {k: leaf for k, leaf in waiting.items() if leaf[0].startswith(prefix)}


_SAMPLE_STRIDE = 64


def _best(values: np.ndarray, n: int) -> np.ndarray:
    """Positions of the ``n`` largest values, largest first, without partitioning the whole vocabulary.

    A strided sample's ``4n / stride``-th largest value is a threshold that
    about ``4n`` values pass; when at least ``n`` do, the ``n`` largest are
    among them, and one comparison pass replaces a partition of every value
    (0.05 ms against 0.36 ms over Gemma's 262,144). Otherwise, or on short
    rows, the whole row is partitioned.

    >>> _best(np.array([0.1, 0.4, 0.2, 0.3]), 2).tolist()
    [1, 3]
    """
    if n >= len(values):
        return np.argsort(-values)
    sample = values[::_SAMPLE_STRIDE]
    rank = n * 4 // _SAMPLE_STRIDE + 1
    if rank < len(sample):
        threshold = np.partition(sample, len(sample) - rank)[len(sample) - rank]
        passed = np.flatnonzero(values >= threshold)
        if len(passed) >= n:
            return passed[_largest_first(values[passed], n)]
    return _largest_first(values, n)


def _largest_first(values: np.ndarray, n: int) -> np.ndarray:
    top = np.argpartition(values, len(values) - n)[len(values) - n :]  # no negated copy of the vocabulary
    return top[np.argsort(-values[top])]
