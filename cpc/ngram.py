"""The token n-gram cache model: what the corpus says comes next, in the scoring model's token ids.

A cache language model for code (Tu et al. 2014; Hellendoorn & Devanbu
2017): n-gram counts over the project's own text, nested by scope — the
document being completed, the other open documents, the workspace files —
the most local scope weighted highest. Each scope is an interpolated
absolute-discount model (orders 1 to ``order``) that backs off to a uniform
distribution over the vocabulary.

Two count stores answer the same query, ``continuations(context)``:

- `DocumentCounts`: an editor buffer, tokenized line by line, so an edit
  re-counts only the changed lines and the n-grams that reach into them.
- `FileCounts`: the workspace files, megabytes of them. Per-file token
  arrays, merged by `FileCounts.commit` into sorted numpy arrays keyed by a
  64-bit hash of each context: a query is two binary searches. A file read
  again later is counted alone, into small tables added to (its new text)
  and taken from (its old) the full ones.

`NGramModel` is a fusion model in `cpc.fusion`'s shape. Its state is the last
``order - 1`` tokens, and its score for token ``t`` is ``log(1 + κ·P(t))``
where ``P(t)`` is the probability the contexts give ``t`` — the part of the
interpolated estimate that comes from contexts of length 1 and more, so a
context the corpus never saw scores every token 0 (no evidence, no
push). The score is bounded by ``log(1 + κ)``: log-probability ratios
(``log P(t | context) - log P(t)``) reward rare tokens without bound, and
in a small corpus that makes the decoder loop over any pair of tokens
seen together once.

    >>> counts = DocumentCounts(order=3)
    >>> counts.update([(1, 2, 3), (1, 2, 4), (1, 2, 3)])
    >>> counts.continuations((1, 2))
    ({3: 2, 4: 1}, 3)
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterable, Sequence
from itertools import repeat
from dataclasses import dataclass
from typing import Protocol

import numpy as np

DISCOUNT = 0.5
"""Absolute discount (Ney, Essen & Kneser 1994): each distinct continuation gives this much to the shorter context.

Lower than the 0.75 of large corpora: a project's cache sees most contexts once or twice."""

SCALE = 10.0
"""κ in ``log(1 + κ·P)``: the score is about ``κ·P`` for weak evidence and at most ``log(1 + κ)``."""

Line = tuple[int, ...]
"""The tokens of one line, its line break included."""
Context = tuple[int, ...]

_MASK = (1 << 64) - 1
_MULTIPLIER = 0x9E3779B97F4A7C15
_SEED = 0xCBF29CE484222325


def ngram_counts(tokens: Sequence[int], first: int, order: int) -> Counter[tuple[Context, int]]:
    """How often each (context, token) pair ends at positions ``first`` onwards, contexts of length 0 to
    ``order - 1``. Tokens before ``first`` serve only as context.

    Counted a context length at a time by ``zip`` and `Counter` (C loops): a pair at a time in Python, a
    100 KB paste's counts took a third of a second while the request after it waited.

    >>> sorted(ngram_counts([7, 8, 9], 2, 3).items())
    [(((), 9), 1), (((7, 8), 9), 1), (((8,), 9), 1)]
    """
    found: Counter[tuple[Context, int]] = Counter()
    for length in range(order):
        start = max(first, length)
        if start >= len(tokens):
            break
        shifted = [tokens[start - length + i : len(tokens) - length + i] for i in range(length)]
        contexts = zip(*shifted) if length else repeat((), len(tokens) - start)
        found.update(zip(contexts, tokens[start:]))
    return found


class Counts(Protocol):
    def continuations(self, context: Context) -> tuple[dict[int, int], int]:
        """The tokens seen after ``context`` with their counts, and the counts' total."""
        ...

    @property
    def empty(self) -> bool:
        """No token counted (a scope that has nothing to say)."""
        ...


class DocumentCounts:
    """N-gram counts of one editor buffer, kept up to date edit by edit."""

    def __init__(self, order: int) -> None:
        self.order = order
        self.lines: list[Line] = []
        self.counts: dict[Context, dict[int, int]] = {}
        """Per context, each token that follows it and how often (plain dicts: a paste makes tens of thousands)."""

    @property
    def tokens(self) -> int:
        return sum(self.counts[()].values()) if () in self.counts else 0

    @property
    def empty(self) -> bool:
        return () not in self.counts

    def update(self, lines: Sequence[Line]) -> None:
        """Make the counts those of ``lines``, re-counting only what changed since the last update.

        The changed region is what lies between the longest common head and
        tail of the old and new lines; the n-grams ending in it, or in the
        ``order - 1`` tokens after it, are taken out and counted again.
        """
        old = self.lines
        head, tail = unchanged_ends(old, lines)
        before = _last_tokens(old[:head], self.order - 1)
        after = _first_tokens(old[len(old) - tail :], self.order - 1)
        self._add(before, _flat(old[head : len(old) - tail]) + after, -1)
        self._add(before, _flat(lines[head : len(lines) - tail]) + after, +1)
        self.lines = list(lines)

    def _add(self, context: list[int], changed: list[int], sign: int) -> None:
        counts = self.counts
        for (key, token), times in ngram_counts(context + changed, len(context), self.order).items():
            continuation = counts.get(key)
            if continuation is None:
                continuation = counts[key] = {}
            count = continuation.get(token, 0) + sign * times
            if count:
                continuation[token] = count
            else:
                del continuation[token]
                if not continuation:
                    del counts[key]

    def continuations(self, context: Context) -> tuple[dict[int, int], int]:
        continuation = self.counts.get(context)
        if not continuation:
            return {}, 0
        return dict(continuation), sum(continuation.values())

    def line_ngrams(self, line: int) -> Counter[tuple[Context, int]]:
        """The n-grams that involve line ``line`` (0-based): they are left out while the cursor is on it."""
        if not 0 <= line < len(self.lines):
            return Counter()
        before = _last_tokens(self.lines[:line], self.order - 1)
        after = _first_tokens(self.lines[line + 1 :], self.order - 1)
        sequence = before + list(self.lines[line]) + after
        end = len(before) + len(self.lines[line])
        found: Counter[tuple[Context, int]] = Counter()
        for position in range(len(before), len(sequence)):
            # After the line, only the n-grams whose context reaches back into it.
            shortest = position - end + 1 if position >= end else 0
            for length in range(shortest, min(self.order - 1, position) + 1):
                found[tuple(sequence[position - length : position]), sequence[position]] += 1
        return found


class WithoutLine:
    """A document's counts without the n-grams of the cursor's line (the half-typed line is no evidence)."""

    def __init__(self, document: DocumentCounts, line: int | None) -> None:
        self.document = document
        self.left_out: dict[Context, Counter[int]] = {}
        for (context, token), count in (document.line_ngrams(line) if line is not None else {}).items():
            self.left_out.setdefault(context, Counter())[token] += count

    @property
    def empty(self) -> bool:
        return not self.continuations(())[1]

    def continuations(self, context: Context) -> tuple[dict[int, int], int]:
        found, total = self.document.continuations(context)
        for token, count in self.left_out.get(context, {}).items():
            remaining = found.get(token, 0) - count
            total -= min(count, found.get(token, 0))
            if remaining > 0:
                found[token] = remaining
            else:
                found.pop(token, None)
        return found, total


class Merged:
    """Several count stores read as one (the other open documents)."""

    def __init__(self, parts: Sequence[Counts]) -> None:
        self.parts = list(parts)

    @property
    def empty(self) -> bool:
        return all(part.empty for part in self.parts)

    def continuations(self, context: Context) -> tuple[dict[int, int], int]:
        merged: Counter[int] = Counter()
        total = 0
        for part in self.parts:
            found, count = part.continuations(context)
            merged.update(found)
            total += count
        return dict(merged), total


@dataclass(frozen=True)
class _Table:
    """One context length's counts: sorted context hashes, and the token and count of each row."""

    keys: np.ndarray
    tokens: np.ndarray
    counts: np.ndarray

    @property
    def nbytes(self) -> int:
        return self.keys.nbytes + self.tokens.nbytes + self.counts.nbytes


REBUILD_SHARE = 0.125
"""`FileCounts.commit` counts every file again when the files changed since the last full count hold more
than this share of the tokens; fewer are counted into small tables read beside the full ones."""


@dataclass(frozen=True)
class _FileTables:
    """What queries read, swapped whole at a commit: the full count of the files as they were (``base``), and
    the n-grams of the files changed since, as they are now (``added``) and as they were (``removed``)."""

    base: tuple[_Table, ...] = ()
    added: tuple[_Table, ...] = ()
    removed: tuple[_Table, ...] = ()
    tokens: int = 0
    """The tokens the tables count."""


class FileCounts:
    """N-gram counts of the workspace files; `commit` makes added and removed files visible to queries.

    A file read again after the full count (saved, changed on disk) costs a commit its own n-grams, not the
    corpus's: 20 MB of files take seconds to count whole.

        >>> counts = FileCounts(order=2)
        >>> counts.add("a.py", [1, 2] * 20); counts.add("b.py", [1, 3]); counts.commit()
        >>> counts.continuations((1,))
        ({2: 20, 3: 1}, 21)
        >>> counts.add("b.py", [1, 2]); counts.commit()  # b.py again, 4 of 42 tokens: counted alone
        >>> counts.continuations((1,)), counts.continuations((3,))
        (({2: 21}, 21), ({}, 0))
    """

    def __init__(self, order: int) -> None:
        self.order = order
        self._files: dict[str, np.ndarray] = {}
        self._counted: dict[str, np.ndarray] = {}
        """Each file's tokens as the full count holds them."""
        self._view = _FileTables()
        self._lock = threading.Lock()

    def add(self, path: str, tokens: Sequence[int]) -> None:
        with self._lock:
            self._files[path] = np.asarray(tokens, dtype=np.int32)

    def remove(self, path: str) -> None:
        with self._lock:
            self._files.pop(path, None)

    @property
    def empty(self) -> bool:
        """Nothing committed yet (files added since the last commit do not count)."""
        return not self._view.tokens

    @property
    def files(self) -> int:
        return len(self._files)

    @property
    def tokens(self) -> int:
        return sum(len(tokens) for tokens in self._files.values())

    @property
    def nbytes(self) -> int:
        """Memory held: the per-file tokens and the committed tables."""
        view = self._view
        return sum(tokens.nbytes for tokens in self._files.values()) + sum(
            table.nbytes for table in (*view.base, *view.added, *view.removed))

    def commit(self) -> None:
        """Make the files added and removed so far visible to queries: only the files changed since the last
        full count when they hold at most `REBUILD_SHARE` of the tokens (milliseconds for a file), else all
        of them (seconds for tens of megabytes; call it off the editor's path).

        Queries keep reading the old tables until the new ones are complete.
        """
        with self._lock:
            files = dict(self._files)
        counted = self._counted
        changed = [path for path in files.keys() | counted.keys() if files.get(path) is not counted.get(path)]
        now = [files[path] for path in changed if path in files]
        before = [counted[path] for path in changed if path in counted]
        total = sum(len(tokens) for tokens in files.values())
        if self._view.base and sum(map(len, now)) + sum(map(len, before)) <= REBUILD_SHARE * total:
            self._view = _FileTables(self._view.base, self._tables_of(now), self._tables_of(before), total)
        else:
            self._view = _FileTables(self._tables_of(list(files.values())), tokens=total)
            self._counted = files

    def _tables_of(self, files: list[np.ndarray]) -> tuple[_Table, ...]:
        """The count tables of these files' n-grams, one per context length."""
        if not files:
            return ()
        tables = []
        hashes = [np.full(len(tokens), _SEED, dtype=np.uint64) for tokens in files]
        for length in range(self.order):
            keys, tokens = [], []
            for file_tokens, file_hashes in zip(files, hashes):
                if length:
                    # Extend each position's context by one older token; positions without it drop out.
                    older = np.zeros(len(file_tokens), dtype=np.uint64)
                    older[length:] = file_tokens[:-length].astype(np.uint64) + np.uint64(1)
                    file_hashes[:] = (file_hashes ^ older) * np.uint64(_MULTIPLIER)
                keys.append(file_hashes[length:])
                tokens.append(file_tokens[length:])
            tables.append(_table(np.concatenate(keys), np.concatenate(tokens)))
        return tuple(tables)

    def continuations(self, context: Context) -> tuple[dict[int, int], int]:
        view = self._view
        found, total = _continuations(view.base, context)
        if view.added or view.removed:
            added, plus = _continuations(view.added, context)
            removed, minus = _continuations(view.removed, context)
            if added or removed:
                merged = Counter(found)
                merged.update(added)
                merged.subtract(removed)
                found, total = {token: count for token, count in merged.items() if count > 0}, total + plus - minus
        return found, total


def _continuations(tables: Sequence[_Table], context: Context) -> tuple[dict[int, int], int]:
    """The tokens these tables count after ``context``, with their counts, and the counts' total."""
    if len(context) >= len(tables):
        return {}, 0
    table = tables[len(context)]
    key = np.uint64(context_hash(context))
    lo = int(np.searchsorted(table.keys, key, side="left"))
    hi = int(np.searchsorted(table.keys, key, side="right"))
    if lo == hi:
        return {}, 0
    counts = table.counts[lo:hi]
    return dict(zip(table.tokens[lo:hi].tolist(), counts.tolist())), int(counts.sum())


def context_hash(context: Context) -> int:
    """The 64-bit key of a context, the most recent token hashed first (as `FileCounts.commit` extends them)."""
    value = _SEED
    for token in reversed(context):
        value = ((value ^ (token + 1)) * _MULTIPLIER) & _MASK
    return value


def _table(keys: np.ndarray, tokens: np.ndarray) -> _Table:
    order = np.lexsort((tokens, keys))
    keys, tokens = keys[order], tokens[order]
    if not len(keys):
        return _Table(keys, tokens, np.zeros(0, np.uint32))
    starts = np.flatnonzero(np.r_[True, (keys[1:] != keys[:-1]) | (tokens[1:] != tokens[:-1])])
    counts = np.diff(np.r_[starts, len(keys)]).astype(np.uint32)
    return _Table(keys[starts], tokens[starts], counts)


_CHUNK = 64
"""Lines `unchanged_ends` compares at a time, as one slice."""


def unchanged_ends(old: Sequence, new: Sequence) -> tuple[int, int]:
    """How many items at the start and at the end of ``old`` and ``new`` are the same (not overlapping).

    >>> unchanged_ends("abcxd", "abyd")
    (2, 1)
    """
    limit = min(len(old), len(new))
    head = 0
    # whole chunks first: a slice comparison runs in C, where a document of thousands of lines is compared
    # item by item in Python on every keystroke otherwise
    while head + _CHUNK <= limit and old[head : head + _CHUNK] == new[head : head + _CHUNK]:
        head += _CHUNK
    while head < limit and old[head] == new[head]:
        head += 1
    tail, end_old, end_new = 0, len(old), len(new)
    while tail + _CHUNK <= limit - head and (
            old[end_old - tail - _CHUNK : end_old - tail] == new[end_new - tail - _CHUNK : end_new - tail]):
        tail += _CHUNK
    while tail < limit - head and old[-1 - tail] == new[-1 - tail]:
        tail += 1
    return head, tail


def _flat(lines: Iterable[Line]) -> list[int]:
    return [token for line in lines for token in line]


def _last_tokens(lines: Sequence[Line], count: int) -> list[int]:
    found: list[int] = []
    for line in reversed(lines):
        if len(found) >= count:
            break
        found[:0] = line
    return found[max(0, len(found) - count) :] if count else []


def _first_tokens(lines: Sequence[Line], count: int) -> list[int]:
    found: list[int] = []
    for line in lines:
        if len(found) >= count:
            break
        found.extend(line)
    return found[:count]


class NGramModel:
    """Nested-scope cache model over token ids, a fusion model (`cpc.fusion.Fusion` batches its rows).

    ``scopes`` go from the most local to the widest, each with its weight;
    a scope without any token is left out and the others share its weight.
    """

    def __init__(self, scopes: Sequence[tuple[Counts, float]], vocabulary_size: int, order: int) -> None:
        self.order = order
        self.size = vocabulary_size
        present = [(counts, weight) for counts, weight in scopes if weight > 0 and not counts.empty]
        total = sum(weight for _, weight in present)
        self.scopes = [(counts, weight / total) for counts, weight in present]
        self._scored: dict[Context, tuple[np.ndarray, np.ndarray]] = {}

    def init_states(self, histories: Sequence[Sequence[int]]) -> list[Context]:
        keep = self.order - 1
        return [tuple(history[-keep:]) if keep else () for history in histories]

    def next_state(self, state: Context, token: int) -> Context:
        return (state + (token,))[-(self.order - 1) :] if self.order > 1 else ()

    def final(self, states: Sequence[Context]) -> np.ndarray:
        return np.zeros(len(states))

    def scored(self, state: Context) -> tuple[np.ndarray, np.ndarray]:
        """The tokens that score after ``state``, and their scores ``log(1 + κ·P(t | state))`` (float32); every
        other token scores 0. A few tokens of the vocabulary, kept per state (do not write to them).

        >>> counts = DocumentCounts(order=2)
        >>> counts.update([(5, 6, 5, 7)])
        >>> tokens, scores = NGramModel([(counts, 1.0)], vocabulary_size=10, order=2).scored((5,))
        >>> tokens.tolist(), [round(float(score), 3) for score in scores]
        ([6, 7], [1.253, 1.253])
        """
        scored = self._scored.get(state)
        if scored is None:
            found = self.probabilities(state)
            tokens = np.fromiter(found.keys(), dtype=np.int64, count=len(found))
            values = np.fromiter(found.values(), dtype=np.float64, count=len(found))
            inside = tokens < self.size
            scored = self._scored[state] = (tokens[inside], np.log1p(SCALE * values[inside]).astype(np.float32))
        return scored

    def score(self, state: Context, token: int) -> float:
        """One token's score after ``state`` (`scored`)."""
        tokens, scores = self.scored(state)
        found = np.flatnonzero(tokens == token)
        return float(scores[found[0]]) if len(found) else 0.0

    def probabilities(self, state: Context) -> dict[int, float]:
        """``P(t | state)`` from contexts of length 1 and more, for the tokens that have any (the rest: 0).

        Interpolated absolute discounting, longest context first: each context
        keeps ``max(count - D, 0) / total`` and passes ``D · distinct / total``
        on to the next shorter one; a context never seen passes everything on.
        """
        mixture: Counter[int] = Counter()
        for counts, weight in self.scopes:
            remaining = weight
            for length in range(len(state), 0, -1):
                found, total = counts.continuations(state[len(state) - length :])
                if not total:
                    continue
                for token, count in found.items():
                    if count > DISCOUNT:
                        mixture[token] += remaining * (count - DISCOUNT) / total
                remaining *= DISCOUNT * len(found) / total
        return dict(mixture)

