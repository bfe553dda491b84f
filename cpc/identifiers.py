"""The identifier model: the workspace's names, as a fusion model that rewards spelling them.

A soft version of monitor-guided decoding (Agrawal et al. 2023). The names
defined or used anywhere in the workspace are kept sorted, so the names
that start with a given byte string are one contiguous run (a trie laid out
flat, like `cpc.index`). While the model spells an identifier, each byte
that keeps it on the way to a known name earns a bonus of 1; a token that
leaves every known name — or ends the word on something that is not a
name — gives back everything the word earned (TurboBias's refund), so a
name that is started and not finished nets exactly zero. Tokens that do not
touch an identifier score 0 (NeMo's neutral non-advancing tokens).

The bonus is per byte, so a greedy step prefers the token that spells more
of a known name (``checksum`` over ``c``: the model's ``c`` leads to
``compute_weighted_c_values``) instead of the one the model likes best now
and cannot finish later. But a token earns for no more bytes than the
shortest rest of a name the word may still become, so a long name does not
beat a short one for its length (uncapped, ``lo|okup`` beat ``lo|ad`` and
``options`` beat ``opts`` on the workspace benchmark). The first token of a word
earns nothing, like the typed bytes of the word at the cursor: a bonus for
starting names would reward starting another word over ending the line.

Token shapes are precomputed once per vocabulary: how many identifier bytes
a token starts with, and whether it ends the word (``ghted(`` spells
``ghted``, then ends it).

    >>> names = NameCounts(TokenShapes([b"comp", b"ute", b" comp", b"(", b"x"]))
    >>> names.add(Counter({b"compute": 1}))
    >>> model = IdentifierModel(names)
    >>> state = model.start(b"x = comp")[1]
    >>> [float(score) for score in model.row(state)]  # "ute" spells "compute"
    [0.0, 3.0, 0.0, 0.0, 0.0]
    >>> state = model.next_state(state, 1)  # "compute", three earned
    >>> [float(score) for score in model.row(state)]  # going on past the name gives them back; "(" keeps them
    [-3.0, -3.0, 0.0, 0.0, -3.0]
"""

from __future__ import annotations

import re
import threading
import weakref
from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from cpc.vocab import Vocabulary

BONUS = 1.0
"""What one byte on the way to a known name earns (the fusion weight scales it)."""



NAME = re.compile(rb"[A-Za-z_$\x80-\xff]*[A-Za-z$\x80-\xff][A-Za-z0-9_$\x80-\xff]*")
"""Identifiers in Python, JavaScript and most C-like languages; bytes >= 0x80 are letters of non-ASCII names.

A run of underscores alone (a ``# ______`` rule in a comment) is no name: as one, it led the decoder
to spell ``___________________________`` after a typed ``__``."""

_WORD_BYTES = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_$") | frozenset(range(0x80, 0x100))


def names_in(text: bytes) -> Counter[bytes]:
    """Every identifier occurrence in ``text``.

    >>> sorted(names_in(b"def f(x): return x.y1").items())
    [(b'def', 1), (b'f', 1), (b'return', 1), (b'x', 2), (b'y1', 1)]
    """
    return Counter(NAME.findall(text))


def trailing_word(data: bytes) -> bytes:
    """The identifier bytes at the end of ``data`` (the word being typed)."""
    end = len(data)
    start = end
    while start > 0 and data[start - 1] in _WORD_BYTES:
        start -= 1
    return data[start:end]


class TokenShapes:
    """Per token of a vocabulary: leading identifier bytes, whether it ends a word, its trailing identifier bytes."""

    def __init__(self, pieces: Sequence[bytes]) -> None:
        size = len(pieces)
        self.pieces = pieces
        self.lead = np.zeros(size, dtype=np.int32)
        self.breaks = np.zeros(size, dtype=bool)
        for token, piece in enumerate(pieces):
            if not piece:
                continue
            lead = _lead(piece)
            self.lead[token] = lead
            self.breaks[token] = lead < len(piece)
        self.words = _grouped(pieces, (t for t in range(size) if pieces[t] and not self.breaks[t]), None)
        """Tokens made only of identifier bytes, by their bytes."""
        self.finishers = _grouped(pieces, np.flatnonzero(self.breaks & (self.lead > 0)).tolist(), self.lead.__getitem__)
        """Tokens that end a word after identifier bytes, by those bytes (``ghted(`` under ``ghted``)."""
        self.length = np.fromiter((len(piece) for piece in pieces), dtype=np.float32, count=size)
        self.ends_first = self.breaks & (self.lead == 0)
        """Tokens whose first byte ends the word (``(``, ``" ."``, ``"\\n"``)."""

    def __len__(self) -> int:
        return len(self.pieces)

    @classmethod
    def of(cls, vocab: Vocabulary) -> TokenShapes:
        """The shapes of ``vocab``'s tokens, computed once per vocabulary (a second for 262k tokens)."""
        with _SHAPES_LOCK:
            shapes = _SHAPES.get(id(vocab))
            if shapes is None or shapes[0] is not vocab:
                shapes = _SHAPES[id(vocab)] = (vocab, cls(vocab.pieces))
                weakref.finalize(vocab, _SHAPES.pop, id(vocab), None)
        return shapes[1]


_SHAPES: dict[int, tuple[Vocabulary, TokenShapes]] = {}
_SHAPES_LOCK = threading.Lock()


def _grouped(pieces: Sequence[bytes], tokens: Iterable[int], length: Callable[[int], int] | None) -> dict[bytes, np.ndarray]:
    """Token ids by their bytes (the first ``length(token)`` of them)."""
    grouped: dict[bytes, list[int]] = {}
    for token in tokens:
        grouped.setdefault(pieces[token][: length(token)] if length else pieces[token], []).append(token)
    return {key: np.asarray(ids, dtype=np.int64) for key, ids in grouped.items()}


def _lead(piece: bytes) -> int:
    lead = 0
    while lead < len(piece) and piece[lead] in _WORD_BYTES:
        lead += 1
    return lead


class NameCounts:
    """How often each name occurs in the workspace, and the names in byte order."""

    def __init__(self, shapes: TokenShapes) -> None:
        self.shapes = shapes
        self.counts: Counter[bytes] = Counter()
        self._sorted: list[bytes] = []
        self._unsorted: set[bytes] = set()
        """New names not yet in ``_sorted``: a workspace of files adds hundreds of thousands, sorted once."""
        self.lock = threading.Lock()

    def add(self, names: Counter[bytes]) -> None:
        with self.lock:
            for name, count in names.items():
                if count <= 0:
                    continue
                if not self.counts[name]:
                    self._unsorted.add(name)
                self.counts[name] += count

    def remove(self, names: Counter[bytes]) -> None:
        with self.lock:
            for name, count in names.items():
                left = self.counts.get(name, 0) - count
                if count <= 0 or name not in self.counts:
                    continue
                if left > 0:
                    self.counts[name] = left
                    continue
                del self.counts[name]
                if name in self._unsorted:
                    self._unsorted.discard(name)
                else:
                    del self._sorted[bisect_left(self._sorted, name)]

    @property
    def sorted(self) -> list[bytes]:
        """Every name, in byte order (call with ``lock`` held)."""
        if len(self._unsorted) > 64:
            self._sorted = sorted(self.counts)
        else:
            for name in self._unsorted:
                self._sorted.insert(bisect_left(self._sorted, name), name)
        self._unsorted.clear()
        return self._sorted

    def __len__(self) -> int:
        return len(self.counts)


@dataclass(frozen=True)
class _Prefix:
    """What a word-so-far allows next: tokens that extend it toward a name, tokens that finish one."""

    extend: np.ndarray
    finish: np.ndarray
    is_name: bool
    cap: int
    """The most bytes one token earns for: the shortest rest of a name that starts with the word."""


State = tuple[bytes | None, float]
"""(identifier bytes so far, or None when they lead to no known name; bonus earned by them so far)."""


class IdentifierModel:
    """The fusion model over a snapshot of the names (``left_out``: occurrences that do not count)."""

    def __init__(self, names: NameCounts, left_out: Counter[bytes] | None = None) -> None:
        shapes = names.shapes
        self.shapes = shapes
        with names.lock:
            self.sorted = list(names.sorted)
            self.excluded = {name for name, count in (left_out or {}).items() if names.counts.get(name, 0) <= count}
        self._prefixes: dict[bytes, _Prefix] = {}

    def start(self, text: bytes, overhang: bytes = b"") -> tuple[float, State]:
        """The state after ``text`` (typed bytes earn nothing), then the score of ``overhang`` bytes beyond them."""
        word = trailing_word(text)
        state: State = (word if self._leads_to_name(word) else None, 0.0)
        if not overhang:
            return 0.0, state
        return self._step(state, overhang, None)

    def advance(self, states: Sequence[State]) -> np.ndarray:
        return np.stack([self.row(state) for state in states]) if states else np.zeros((0, len(self.shapes)))

    def row(self, state: State) -> np.ndarray:
        """Every token's score from ``state``: bonus on the way to a name, refund when leaving it."""
        word, earned = state
        if not word:  # outside a word, or in one that leads to no name: nothing to earn or give back
            return np.zeros(len(self.shapes), dtype=np.float32)
        row = np.full(len(self.shapes), 0.0 - earned, dtype=np.float32)  # 0.0, not -0.0, when nothing was earned
        prefix = self._prefix(word)
        if prefix.is_name:
            row[self.shapes.ends_first] += np.float32(earned)
        row[prefix.extend] = _earned(self.shapes.length[prefix.extend], prefix.cap)
        row[prefix.finish] = _earned(self.shapes.lead[prefix.finish], prefix.cap)
        return row

    def next_state(self, state: State, token: int) -> State:
        return self._step(state, self.shapes.pieces[token], token)[1]

    def final(self, states: Sequence[State]) -> np.ndarray:
        """A word left unfinished at the end gives its bonus back."""
        return np.array([
            -earned if word is not None and earned and not self._prefix(word).is_name else 0.0
            for word, earned in states
        ])

    def _step(self, state: State, piece: bytes, token: int | None) -> tuple[float, State]:
        word, earned = state
        lead = int(self.shapes.lead[token]) if token is not None else _lead(piece)
        if lead == len(piece):
            if word is None:
                return 0.0, (None, 0.0)
            if not word:
                return 0.0, (piece if self._leads_to_name(piece) else None, 0.0)
            longer = word + piece
            if self._leads_to_name(longer):
                gain = float(_earned(len(piece), self._prefix(word).cap))
                return gain, (longer, earned + gain)
            return -earned, (None, 0.0)
        score = 0.0
        if word:  # a word this token starts and ends earned nothing, and gives nothing back
            finished = word + piece[:lead]
            if self._is_name(finished):
                score += float(_earned(lead, self._prefix(word).cap))
            else:
                score -= earned
        trail = trailing_word(piece)
        if not trail:
            return score, (b"", 0.0)
        return score, (trail if self._leads_to_name(trail) else None, 0.0)

    def _names_starting(self, prefix: bytes) -> Iterable[bytes]:
        names = self.sorted
        position = bisect_left(names, prefix)
        while position < len(names) and names[position].startswith(prefix):
            if names[position] not in self.excluded:
                yield names[position]
            position += 1

    def _leads_to_name(self, word: bytes) -> bool:
        return not word or next(iter(self._names_starting(word)), None) is not None

    def _is_name(self, word: bytes) -> bool:
        position = bisect_left(self.sorted, word)
        return position < len(self.sorted) and self.sorted[position] == word and word not in self.excluded

    def _prefix(self, word: bytes) -> _Prefix:
        prefix = self._prefixes.get(word)
        if prefix is None:
            prefix = self._prefixes[word] = self._build_prefix(word)
        return prefix

    def _build_prefix(self, word: bytes) -> _Prefix:
        shapes = self.shapes
        parts: set[bytes] = set()
        rests: set[bytes] = set()
        for name in self._names_starting(word):
            rest = name[len(word) :]
            rests.add(rest)
            parts.update(rest[:length] for length in range(1, len(rest) + 1))
        return _Prefix(
            _union(shapes.words, parts),
            _union(shapes.finishers, rests),
            self._is_name(word),
            min((len(rest) for rest in rests if rest), default=1),
        )


def _union(groups: dict[bytes, np.ndarray], keys: Iterable[bytes]) -> np.ndarray:
    found = [groups[key] for key in keys if key in groups]
    return np.concatenate(found) if found else np.zeros(0, dtype=np.int64)


def _earned(spelled, cap: int):
    """The bonus for spelling ``spelled`` bytes of a name in one token (a number or an array)."""
    return BONUS * np.minimum(spelled, cap)
