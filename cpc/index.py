"""The vocabulary prefix index (the "trie"): every text token sorted by bytes.

In byte-sorted order the tokens that start with a given byte string form one
contiguous block, so a prefix query is two binary searches and its answer is
a range ``[lo, hi)`` of positions. The same order turns the seed-000 trie
node masses into prefix sums: lay the LM's probabilities out in index order
once, and the mass of every node is ``cumsum[hi] - cumsum[lo]``.

A dict-of-dicts trie of a 262k vocabulary costs seconds and hundreds of MB
in Python; this costs one sort and two arrays.

    >>> from cpc.vocab import Vocabulary
    >>> index = PrefixIndex(Vocabulary.from_cl100k())
    >>> [index.vocab.pieces[t] for t in index.starting_with(b" intermediar")]
    [b' intermediary']
"""

from __future__ import annotations

from bisect import bisect_left

import numpy as np

from cpc.vocab import Vocabulary


class PrefixIndex:
    """Text tokens of a vocabulary in byte-sorted order."""

    def __init__(self, vocab: Vocabulary) -> None:
        pieces = vocab.pieces
        special = vocab.special
        ids = [i for i, piece in enumerate(pieces) if piece and not special[i]]
        ids.sort(key=pieces.__getitem__)  # stable: duplicate pieces keep id order
        self.vocab = vocab
        self.order = np.asarray(ids, dtype=np.int64)
        """``order[k]`` is the token id at sorted position ``k``."""
        self.sorted_pieces = [pieces[i] for i in ids]
        self.position = np.full(len(vocab), -1, dtype=np.int64)
        """``position[token_id]`` is its sorted position (-1 for special tokens)."""
        self.position[self.order] = np.arange(len(ids))
        self.max_piece_len = max((len(p) for p in self.sorted_pieces), default=0)

    def __len__(self) -> int:
        return len(self.sorted_pieces)

    def range_starting_with(self, prefix: bytes) -> tuple[int, int]:
        """Sorted positions ``[lo, hi)`` of the tokens whose bytes start with ``prefix``.

        >>> index = PrefixIndex(Vocabulary.from_cl100k())
        >>> lo, hi = index.range_starting_with(b"userNam")
        >>> sorted(index.sorted_pieces[lo:hi])
        [b'userName']
        """
        lo = bisect_left(self.sorted_pieces, prefix)
        upper = _successor(prefix)
        hi = len(self.sorted_pieces) if upper is None else bisect_left(self.sorted_pieces, upper, lo)
        return lo, hi

    def starting_with(self, prefix: bytes) -> np.ndarray:
        """Token ids whose bytes start with ``prefix``, in sorted order."""
        lo, hi = self.range_starting_with(prefix)
        return self.order[lo:hi]

    def prefixes_of(self, data: bytes) -> list[int]:
        """Token ids whose bytes are a (non-empty) prefix of ``data``, shortest first.

        >>> index = PrefixIndex(Vocabulary.from_cl100k())
        >>> [index.vocab.pieces[t] for t in index.prefixes_of(b"userName")]
        [b'u', b'us', b'use', b'user', b'userName']
        """
        found: list[int] = []
        for length in range(1, min(len(data), self.max_piece_len) + 1):
            found.extend(self.vocab.find(data[:length]))
        return found


def _successor(prefix: bytes) -> bytes | None:
    """The smallest byte string greater than every string starting with ``prefix``.

    None when there is none (empty prefix, or all 0xFF bytes).
    """
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return None
    return stripped[:-1] + bytes([stripped[-1] + 1])
