"""The token-to-byte beam (Vieira et al. 2024, tokens to characters): the model's probability of a byte prefix.

A model over tokens becomes a model over bytes by summing over the
tokenizations of the bytes read so far. Each *candidate* is one way of
covering them: committed tokens, plus the bytes read into the token still
open. Its weight is the probability that the model produces the committed
tokens and then some token that starts with the open bytes, so the byte
prefix's probability is the sum of the weights (Vieira et al. 2024, "From
Language Models over Tokens to Language Models over Characters").

- A `Snapshot` is the model's next-token distribution after one token
  prefix, read in the prefix index's byte order: the tokens of a trie
  node (every token starting with some bytes) are one contiguous range, so
  its mass is one numpy sum over it, and all its children's masses one
  ``np.add.reduceat`` over the same range. No per-token objects, no DFS.
- `ByteBeam.advance` (the paper's ``enum_cover``) reads one byte: each
  candidate narrows its open token (*stay*), and candidates whose open bytes
  are a whole token may commit it and open the next one (*extend*).
  Extensions are pruned on their upper bound before their snapshot exists;
  the survivors of a step are materialised together, in one batched model
  call.
- `prune` (``prune_top_K_buckets``): top-K above a threshold relative to the
  best weight.
- `ByteBeam.next_byte_logprobs` (``next_char_probability``): the next byte,
  or the end of the text (EOS), marginalised over the beam.
- Healing: when no candidate can read a byte (pruning dropped the path that
  could), the last bytes are read again from an earlier beam, wider and
  without the threshold.

Byte level means a token may end inside a UTF-8 character; nothing here
decodes text. Snapshots are cached per token prefix and beams per byte
prefix, so reading one more byte after a cached prefix costs one step.

    >>> from cpc.engine import Engine
    >>> engine = Engine.load("smollm2")
    >>> beam = engine.beam.read(engine.lm.bos, b"def main(")
    >>> round(beam.logprob, 2) < 0, len(beam.candidates) > 0
    (True, True)
"""

from __future__ import annotations

import math
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from cpc.index import Node, PrefixIndex
from cpc.lm import LanguageModel, State

EOS = 256
"""Index of end-of-text in a next-byte distribution (bytes are 0..255)."""

CommitFilter = Callable[[State, bytes], bool]
"""``allows(tokens, covered)``: may the tokens read since the start (the last
one just committed) cover exactly the bytes ``covered``?"""


class Snapshot:
    """The model's next-token distribution after ``tokens``: by token id, and by prefix-index range.

    Only text tokens and end-of-text are kept: control tokens that never
    produce bytes get probability zero and the rest is renormalised, so the
    byte model is a proper distribution. No per-token objects. It normalises
    itself, so it is made from the model's unnormalised scores
    (`LanguageModel.next_scores`): no log-softmax runs before it.

    A snapshot is made for every state the model evaluates, so it is kept
    cheap:
    - the probabilities are taken and kept at the precision of the model's
      rows (llama.cpp's are float32: their own rounding is as large as that
      of a float32 exponential; a float64 row, as the exactness tests' toy
      models give, stays float64) and always summed in float64;
    - they are kept by token id, as the model gives them, and laid out in
      the prefix index's order only where a range is asked for. Most
      snapshots are asked for a few narrow ranges, and a gather of the
      whole vocabulary into that order is a random-access pass. Once the
      ranges asked for add up to a quarter of the vocabulary, the whole
      order is laid out once and kept.
    Masses are summed over the ranges asked, never through prefix sums: a
    prefix sum costs a pass over the whole vocabulary per snapshot, and a
    difference of two prefix sums loses the tiny masses.
    """

    __slots__ = ("tokens", "by_token", "eos", "_order", "_in_order", "_gathered", "_text_mass")

    def __init__(self, tokens: State, scores: np.ndarray, index: PrefixIndex, eos_ids: np.ndarray):
        row = np.asarray(scores)
        by_token = row.astype(np.float32 if row.dtype == np.float32 else np.float64)  # a fresh copy, worked in place
        eos = row[eos_ids].astype(np.float64)
        by_token[index.outside] = -np.inf
        top = max(float(by_token.max()), float(eos.max())) if len(eos) else float(by_token.max())
        by_token -= by_token.dtype.type(top)
        np.exp(by_token, out=by_token)
        eos_mass = float(np.exp(eos - top).sum())
        text_mass = float(by_token.sum(dtype=np.float64))
        total = text_mass + eos_mass
        by_token /= total
        self.tokens = tokens
        self.by_token = by_token
        """``by_token[t]``: probability of token ``t`` (zero for control tokens and EOS)."""
        self.eos = eos_mass / total
        """Probability that the text ends here."""
        self._text_mass = text_mass / total
        self._order = index.order
        self._in_order: np.ndarray | None = None
        self._gathered = 0

    @property
    def nbytes(self) -> int:
        """The memory its probabilities hold: the row by token id, and the row in index order once laid out."""
        return self.by_token.nbytes + (0 if self._in_order is None else self._in_order.nbytes)

    def forget_order(self) -> None:
        """Drop the row laid out in index order: `in_order` lays it out again when ranges ask for it, with the
        same values. Half of what a wide snapshot holds, for a snapshot kept while the editor is quiet."""
        self._in_order = None
        self._gathered = 0

    def of(self, tokens: np.ndarray | int) -> np.ndarray | float:
        """The probability of a token, or of each of an array of tokens."""
        return self.by_token[tokens]

    def in_order(self, lo: int, hi: int) -> np.ndarray:
        """The probabilities of the tokens at sorted positions ``[lo, hi)``, in that order."""
        if self._in_order is None and self._gathered + hi - lo > len(self._order) // 4:
            self._in_order = self.by_token[self._order]
        if self._in_order is not None:
            return self._in_order[lo:hi]
        self._gathered += hi - lo
        return self.by_token[self._order[lo:hi]]

    def mass(self, lo: int, hi: int) -> float:
        """Probability that the next token lies in sorted positions ``[lo, hi)``."""
        if lo == 0 and hi == len(self._order):
            return self._text_mass
        return float(self.in_order(lo, hi).sum(dtype=np.float64))

    def masses(self, bounds: np.ndarray) -> np.ndarray:
        """Masses of the consecutive ranges ``[bounds[k], bounds[k + 1])``, in one pass over them.

        >>> from cpc.vocab import Vocabulary
        >>> index = PrefixIndex(Vocabulary.from_cl100k())
        >>> snapshot = Snapshot((), np.zeros(len(index.vocab)), index, np.array([], dtype=np.int64))
        >>> [round(float(m) * len(index), 6) for m in snapshot.masses(np.array([0, 1, 1, 4]))]
        [1.0, 0.0, 3.0]
        """
        result = np.zeros(len(bounds) - 1)
        filled = bounds[1:] > bounds[:-1]  # reduceat would give an empty range its first element
        if filled.any():
            result[filled] = np.add.reduceat(
                self.in_order(bounds[0], bounds[-1]), bounds[:-1][filled] - bounds[0], dtype=np.float64
            )
        return result


SNAPSHOT_BUDGET = 16 << 20
"""Bytes of next-token snapshots kept between requests: a snapshot of Gemma 3's 262,144 tokens holds 1 MiB,
2 once laid out in index order. Typing reuses snapshots from the last few keystrokes only (none older than
the 24th newest over 20 lines of `benchmarks/profile_keystrokes.py`; with the beams' share, `ByteBeam._store`,
16 MiB keeps 24 by token id), and each MiB kept is a MiB of the editor's machine: 16 MiB instead of 24 took
12 MB off a typing server with the same model keystrokes and times (docs/reliability.md)."""


class SnapshotCache:
    """Snapshots per token prefix, fetched from the model in batches, kept LRU within a budget of bytes."""

    MINIMUM = 8
    """Snapshots kept whatever their size: a request's own."""

    def __init__(self, lm: LanguageModel, index: PrefixIndex, budget_bytes: int = SNAPSHOT_BUDGET):
        self.lm = lm
        self.index = index
        self.budget_bytes = budget_bytes
        self._eos_ids = np.asarray(sorted(lm.vocab.eos_ids), dtype=np.int64)
        self._cache: OrderedDict[State, Snapshot] = OrderedDict()

    def __len__(self) -> int:
        return len(self._cache)

    def held_bytes(self) -> int:
        """What the cached snapshots hold (`Snapshot.nbytes`): a snapshot grows when laid out in index order."""
        return sum(snapshot.nbytes for snapshot in self._cache.values())

    def get(self, tokens: State) -> Snapshot:
        return self.get_many([tokens])[0]

    def get_many(self, states: Sequence[State]) -> list[Snapshot]:
        """Snapshots for every state; the missing ones come from one model call."""
        missing = list(dict.fromkeys(s for s in states if s not in self._cache))
        if missing:
            rows = self.lm.next_scores(missing)
            for state, row in zip(missing, rows):
                self._cache[state] = Snapshot(state, row, self.index, self._eos_ids)
        found = []
        for state in states:
            self._cache.move_to_end(state)
            found.append(self._cache[state])
        held = self.held_bytes()
        while len(self._cache) > max(self.MINIMUM, len(found)) and held > self.budget_bytes:
            held -= self._cache.popitem(last=False)[1].nbytes
        return found

    def rest(self) -> None:
        """Keep the newest `MINIMUM` snapshots, by token id only (`Snapshot.forget_order`)."""
        while len(self._cache) > self.MINIMUM:
            self._cache.popitem(last=False)
        for snapshot in self._cache.values():
            snapshot.forget_order()

    def known(self, tokens: State) -> Snapshot | None:
        """The snapshot of ``tokens`` if it is cached (no model call)."""
        return self._cache.get(tokens)

    def holds(self, snapshot: Snapshot) -> bool:
        """Whether this very snapshot is still in the cache."""
        return self._cache.get(snapshot.tokens) is snapshot

    def clear(self) -> None:
        self._cache.clear()


@dataclass(frozen=True, slots=True)
class Candidate:
    """One covering of the bytes read: committed tokens plus an open token."""

    snapshot: Snapshot
    """The model after the committed tokens (``snapshot.tokens``)."""
    open: bytes
    """Bytes read into the token still open."""
    lo: int
    hi: int
    """Sorted positions of the tokens that start with ``open``."""
    log_committed: float
    """``log P(committed tokens)``, from the beam's start."""
    logweight: float
    """``log_committed + log mass(lo, hi)``."""
    pinned: bool = False
    """On the path that `ByteBeam.read` was asked never to prune."""

    @property
    def tokens(self) -> State:
        return self.snapshot.tokens


@dataclass(frozen=True, eq=False)
class Beam:
    """The candidates after reading ``data`` from the token prefix ``start``."""

    start: State
    data: bytes
    candidates: tuple[Candidate, ...]
    logprob: float
    """``log P(the text starts with data | start)`` as the beam estimates it."""
    healed: int = 0
    """Steps on the way here that needed healing."""

    @property
    def pinned(self) -> Candidate | None:
        """The candidate on the pinned path, if `ByteBeam.read` was given one."""
        return next((c for c in self.candidates if c.pinned), None)


@dataclass
class BeamStats:
    """Counters a benchmark reads: how the beam spent its steps."""

    steps: int = 0
    materialised: int = 0
    """Extensions whose snapshot was requested (cached or not)."""
    pruned: int = 0
    healed: int = 0
    cache_hits: int = 0
    """`ByteBeam.read` calls that resumed from a cached beam."""


@dataclass(eq=False)
class ByteBeam:
    """Reads bytes through a token model: the beam of Vieira et al. (2024), at byte level."""

    lm: LanguageModel
    index: PrefixIndex
    width: int = 8
    """K: the most candidates kept after a step."""
    threshold: float = 1e-3
    """Candidates below ``threshold`` times the best weight are dropped."""
    snapshot_budget: int = SNAPSHOT_BUDGET
    beam_cache_size: int = 256
    snapshots: SnapshotCache = field(init=False)
    stats: BeamStats = field(default_factory=BeamStats)

    def __post_init__(self) -> None:
        self.snapshots = SnapshotCache(self.lm, self.index, self.snapshot_budget)
        self._beams: OrderedDict[tuple, Beam] = OrderedDict()

    def start(self, tokens: Sequence[int]) -> Beam:
        """The beam before any byte: one candidate with every token open."""
        tokens = tuple(tokens)
        snapshot = self.snapshots.get(tokens)
        everything = math.log(snapshot.mass(0, len(self.index)))
        root = Candidate(snapshot, b"", 0, len(self.index), 0.0, everything)
        return Beam(start=tokens, data=b"", candidates=(root,), logprob=0.0)

    def read(
        self,
        start: Sequence[int],
        data: bytes,
        *,
        allows: CommitFilter | None = None,
        pin: Sequence[int] | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> Beam:
        """The beam after reading ``data`` from the token prefix ``start``.

        Resumes from the longest cached beam of a prefix of ``data`` (one
        more typed character costs one step). ``allows`` restricts which
        tokens may be committed; ``pin`` is a token path (from ``start``)
        that pruning must keep, e.g. the canonical tokenization, so that the
        result can never fall below that path's probability. ``progress``
        hears the number of bytes read, every 256 bytes.
        """
        start = tuple(start)
        beam = self._cached(start, data, allows) if pin is None else None
        if beam is None:
            beam = self.start(start)
            if pin is not None:
                root = beam.candidates[0]
                beam = Beam(start, b"", (replace(root, pinned=True),), 0.0)
        pin = tuple(pin) if pin is not None else None
        history: deque[Beam] = deque([beam], maxlen=self.index.max_piece_len + 1)
        for byte in data[len(beam.data) :]:
            beam = self.advance(beam, byte, allows=allows, pin=pin)
            if not beam.candidates:
                beam = self._heal(history, data[: len(history[-1].data) + 1], allows, pin)
                if not beam.candidates:
                    return beam
            history.append(beam)
            if progress is not None and len(beam.data) % 256 == 0:
                progress(len(beam.data))
        if pin is None:
            self._store(beam, allows)
        return beam

    def advance(
        self,
        beam: Beam,
        byte: int,
        *,
        allows: CommitFilter | None = None,
        pin: State | None = None,
        width: int | None = None,
        threshold: float | None = None,
    ) -> Beam:
        """Read one byte: stay in the open token, or commit it and open the next."""
        self.stats.steps += 1
        width = width or self.width
        threshold = self.threshold if threshold is None else threshold
        log_threshold = math.log(threshold) if threshold > 0 else -math.inf
        stays, extensions = self._moves(beam, byte, allows, pin)
        # Extensions compete on their upper bound (the whole next token open)
        # before any of them costs a model call. Only extensions are dropped
        # here: a bound overstates its extension, so it must not push out a
        # stay, whose weight is exact (the prune below judges them all).
        weights = [c.logweight for c in stays] + [e[0] for e in extensions]
        pinned = [c.pinned for c in stays] + [e[3] for e in extensions]
        keep = _prune(weights, pinned, width, log_threshold)
        kept_extensions = [extensions[k - len(stays)] for k in keep if k >= len(stays)]
        self.stats.pruned += len(extensions) - len(kept_extensions)
        self.stats.materialised += len(kept_extensions)
        snapshots = self.snapshots.get_many([(*c.tokens, token) for _, c, token, _ in kept_extensions])
        opened = []
        child = self.index.node(b"").child(byte)
        for (bound, _, _, is_pinned), snapshot in zip(kept_extensions, snapshots):
            mass = snapshot.mass(*child) if child is not None else 0.0
            if mass > 0:
                opened.append(
                    Candidate(snapshot, bytes([byte]), child[0], child[1], bound, bound + math.log(mass), is_pinned)
                )
        candidates = stays + opened
        keep = _prune([c.logweight for c in candidates], [c.pinned for c in candidates], width, log_threshold)
        self.stats.pruned += len(candidates) - len(keep)
        candidates = [candidates[k] for k in keep]
        logprob = logsumexp([c.logweight for c in candidates])
        return Beam(beam.start, beam.data + bytes([byte]), tuple(candidates), logprob, beam.healed)

    def _moves(
        self, beam: Beam, byte: int, allows: CommitFilter | None, pin: State | None
    ) -> tuple[list[Candidate], list[tuple[float, Candidate, int, bool]]]:
        """What each candidate can do with the byte: *stay* (the open token goes on with it: exact weights),
        and *extend* (commit the open token, open the next: upper bounds, snapshots not fetched yet)."""
        start_length = len(beam.start)
        stays: list[Candidate] = []
        extensions: list[tuple[float, Candidate, int, bool]] = []
        for candidate in beam.candidates:
            node = self.index.node(candidate.open)
            child = node.child(byte)
            committed = candidate.tokens[start_length:]
            if child is not None:
                mass = candidate.snapshot.mass(*child)
                if mass > 0:
                    opened = candidate.open + bytes([byte])
                    stays.append(
                        Candidate(
                            candidate.snapshot,
                            opened,
                            child[0],
                            child[1],
                            candidate.log_committed,
                            candidate.log_committed + math.log(mass),
                            candidate.pinned and self._pin_opens(pin, committed, opened),
                        )
                    )
            if not candidate.open:
                continue
            for token, probability in self._commits(candidate, node, committed, beam.data, allows):
                pinned = candidate.pinned and len(committed) < len(pin) and pin[len(committed)] == token
                bound = candidate.log_committed + math.log(probability)
                extensions.append((bound, candidate, token, pinned))
        return stays, extensions

    def next_byte_logprobs(self, beam: Beam, *, allows: CommitFilter | None = None) -> np.ndarray:
        """``log P(next byte | data)`` for bytes 0..255, and end of text at `EOS`.

        Candidates whose open bytes are a whole token also commit it and
        contribute the first bytes of the token after (and its EOS); those
        snapshots are fetched in one batched call.
        """
        if not beam.candidates:
            raise ValueError("the beam is empty: the text has probability zero under the model")
        top = max(c.logweight for c in beam.candidates)
        total = np.zeros(EOS + 1)
        index = self.index
        start_length = len(beam.start)
        commits: list[tuple[float, Candidate, int]] = []
        for candidate in beam.candidates:
            node = index.node(candidate.open)
            scale = math.exp(candidate.log_committed - top)
            total[node.child_bytes] += scale * candidate.snapshot.masses(node.bounds)
            if not candidate.open:
                total[EOS] += scale * candidate.snapshot.eos
                continue
            committed = candidate.tokens[start_length:]
            for token, probability in self._commits(candidate, node, committed, beam.data, allows):
                commits.append((scale * probability, candidate, token))
        snapshots = self.snapshots.get_many([(*c.tokens, token) for _, c, token in commits])
        for (weight, _, _), snapshot in zip(commits, snapshots):
            self.add_next_token(total, weight, snapshot)
        return normalised_log(total)

    def add_next_token(self, total: np.ndarray, weight: float, snapshot: Snapshot) -> None:
        """Add ``weight`` times the snapshot's next-byte masses (first bytes of its next token, and EOS)."""
        root = self.index.node(b"")
        total[root.child_bytes] += weight * snapshot.masses(root.bounds)
        total[EOS] += weight * snapshot.eos

    def _commits(
        self, candidate: Candidate, node: Node, committed: State, covered: bytes, allows: CommitFilter | None
    ) -> Iterator[tuple[int, float]]:
        """The tokens the candidate may commit (its open bytes exactly), with their probability."""
        probabilities = candidate.snapshot.in_order(node.lo, node.exact_end).tolist()
        for token, probability in zip(self.index.order[node.lo : node.exact_end].tolist(), probabilities):
            if probability > 0 and (allows is None or allows((*committed, token), covered)):
                yield token, probability

    def _pin_opens(self, pin: State, committed: State, opened: bytes) -> bool:
        """Whether the pinned path's next token starts with ``opened``."""
        return len(committed) < len(pin) and self.lm.vocab.pieces[pin[len(committed)]].startswith(opened)

    def clear(self) -> None:
        """Drop cached beams and snapshots."""
        self._beams.clear()
        self.snapshots.clear()

    def rest(self) -> None:
        """The editor is quiet: keep what a keystroke at the same place reads next, the newest beam and the
        newest snapshots (`SnapshotCache.rest`), each snapshot by token id only. At most about 10 MiB of the 24
        that typing keeps for the next keystroke (docs/reliability.md); the texts do not change, a snapshot
        let go is asked of the model again."""
        while len(self._beams) > 1:
            self._beams.popitem(last=False)
        self.snapshots.rest()
        for (root, _, _), beam in self._beams.items():
            root.forget_order()
            for candidate in beam.candidates:
                candidate.snapshot.forget_order()

    def _heal(self, history: deque[Beam], data: bytes, allows: CommitFilter | None, pin: State | None) -> Beam:
        """Read the bytes up to the failed one again from earlier beams, wider and unthresholded."""
        self.stats.healed += 1
        # Beams resumed from the cache have a short history: the start beam is the last resort.
        for base in [*reversed(history), self.start(history[0].start)]:
            beam = base
            for byte in data[len(base.data) :]:
                beam = self.advance(beam, byte, allows=allows, pin=pin, width=4 * self.width, threshold=0)
                if not beam.candidates:
                    break
            if beam.candidates:
                return Beam(beam.start, beam.data, beam.candidates, beam.logprob, beam.healed + 1)
        return Beam(history[-1].start, data, (), -math.inf, history[-1].healed + 1)

    def _cached(self, start: State, data: bytes, allows: CommitFilter | None) -> Beam | None:
        root = self.snapshots.get(start)
        for length in range(len(data), max(-1, len(data) - 2 * self.index.max_piece_len), -1):
            beam = self._beams.get((root, allows, data[:length]))
            if beam is not None:
                self._beams.move_to_end((root, allows, data[:length]))
                self.stats.cache_hits += 1
                return beam
        return None

    def _store(self, beam: Beam, allows: CommitFilter | None) -> None:
        """Keep ``beam`` for the next keystroke, dropping the oldest beams.

        Beams hold snapshots the snapshot cache may have evicted (1-2 MiB each
        for a 262k vocabulary): beams go while those hold more than half the
        cache's budget, so all snapshots together stay within 1.5 x its budget.
        """
        key = (self.snapshots.get(beam.start), allows, beam.data)
        self._beams[key] = beam
        while len(self._beams) > 1 and (
            len(self._beams) > self.beam_cache_size
            or self.bytes_held_by_beams_only() > self.snapshots.budget_bytes // 2
        ):
            self._beams.popitem(last=False)

    def bytes_held_by_beams_only(self) -> int:
        """What the snapshots hold that the cached beams keep alive and the snapshot cache has let go."""
        held = {id(root): root for root, _, _ in self._beams}
        held.update((id(c.snapshot), c.snapshot) for beam in self._beams.values() for c in beam.candidates)
        return sum(snapshot.nbytes for snapshot in held.values() if not self.snapshots.holds(snapshot))


def _prune(weights: list[float], pinned: list[bool], width: int, log_threshold: float) -> list[int]:
    """Indices to keep: the best ``width`` above ``best + log_threshold``, plus pinned ones."""
    if not weights:
        return []
    best = max(weights)
    ranked = sorted(range(len(weights)), key=weights.__getitem__, reverse=True)
    keep = [k for k in ranked[:width] if weights[k] >= best + log_threshold]
    keep.extend(k for k in ranked[width:] if pinned[k])
    keep.extend(k for k in ranked[:width] if pinned[k] and weights[k] < best + log_threshold)
    return keep


def normalised_log(total: np.ndarray) -> np.ndarray:
    """``log(total / total.sum())``, with -inf where ``total`` is 0."""
    with np.errstate(divide="ignore"):
        return np.log(total) - math.log(total.sum())


def logsumexp(values: list[float]) -> float:
    """``log(sum(exp(values)))``, -inf for no values."""
    if not values:
        return -math.inf
    top = max(values)
    return top + math.log(sum(math.exp(v - top) for v in values))
