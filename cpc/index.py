"""The vocabulary prefix index (the "trie"): every text token sorted by bytes.

In byte-sorted order the tokens that start with a given byte string form one
contiguous block, so a prefix query is two binary searches and its answer is
a range ``[lo, hi)`` of positions. The same order turns the byte beam's trie
node masses (`cpc.beam`) into range sums: lay the LM's probabilities out in index order
once, and the mass of every node is ``probs[lo:hi].sum()``.

A dict-of-dicts trie of a 262k vocabulary costs seconds and hundreds of MB
in Python; this costs one sort and two arrays.

    >>> from cpc.vocab import Vocabulary, prefix_ranges
    >>> index = PrefixIndex(Vocabulary.from_cl100k())
    >>> [index.vocab.pieces[t] for t in index.starting_with(b" intermediar")]
    [b' intermediary']
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass

import numpy as np

from cpc.vocab import Vocabulary, prefix_ranges


_NODE_CACHE_SIZE = 1 << 16


@dataclass(frozen=True, eq=False)
class Node:
    """A trie node: the tokens starting with some bytes, split by their next byte."""

    lo: int
    hi: int
    """Sorted positions ``[lo, hi)`` of every token that starts with the node's bytes."""
    exact_end: int
    """``[lo, exact_end)`` are the tokens that are exactly the node's bytes (several ids may share them)."""
    child_bytes: np.ndarray
    """The next bytes that some token continues with, ascending."""
    bounds: np.ndarray
    """Child ``k`` (next byte ``child_bytes[k]``) covers positions ``[bounds[k], bounds[k + 1])``."""

    def child(self, byte: int) -> tuple[int, int] | None:
        """The sorted range of the child reached by ``byte``, or None."""
        k = int(np.searchsorted(self.child_bytes, byte))
        if k < len(self.child_bytes) and self.child_bytes[k] == byte:
            return int(self.bounds[k]), int(self.bounds[k + 1])
        return None


class PrefixIndex:
    """Text tokens of a vocabulary in byte-sorted order."""

    def __init__(self, vocab: Vocabulary) -> None:
        self.vocab = vocab
        self.order = vocab.text_order
        """``order[k]`` is the token id at sorted position ``k`` (the vocabulary's own order, not a copy)."""
        self.sorted_pieces = vocab.sorted_pieces
        self.position = np.full(len(vocab), -1, dtype=np.int64)
        """``position[token_id]`` is its sorted position (-1 for special tokens)."""
        self.position[self.order] = np.arange(len(self.order))
        self.outside = np.flatnonzero(self.position < 0)
        """The token ids that are not text (special tokens, empty pieces): never in a range."""
        self.max_piece_len = max((len(p) for p in self.sorted_pieces), default=0)
        self._nodes: dict[bytes, Node] = {}

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

    def node(self, prefix: bytes) -> Node:
        """The trie node of ``prefix``: its whole-token ids and one child range per next byte.

        >>> index = PrefixIndex(Vocabulary.from_cl100k())
        >>> node = index.node(b"userNam")
        >>> bytes(node.child_bytes), node.hi - node.lo
        (b'e', 1)
        """
        node = self._nodes.get(prefix)
        if node is None:
            if len(self._nodes) >= _NODE_CACHE_SIZE:
                self._nodes.clear()
            node = self._nodes[prefix] = self._build_node(prefix)
        return node

    def _build_node(self, prefix: bytes) -> Node:
        pieces = self.sorted_pieces
        lo, hi = self.range_starting_with(prefix) if prefix else (0, len(pieces))
        depth = len(prefix)
        exact_end = lo
        while exact_end < hi and len(pieces[exact_end]) == depth:
            exact_end += 1
        child_bytes: list[int] = []
        starts: list[int] = []
        pos = exact_end
        while pos < hi:
            byte = pieces[pos][depth]
            child_bytes.append(byte)
            starts.append(pos)
            pos = hi if byte == 0xFF else bisect_left(pieces, prefix + bytes([byte + 1]), pos, hi)
        starts.append(hi)
        return Node(
            lo=lo,
            hi=hi,
            exact_end=exact_end,
            child_bytes=np.asarray(child_bytes, dtype=np.uint8),
            bounds=np.asarray(starts, dtype=np.int64),
        )

    def prefixes_of(self, data: bytes) -> list[int]:
        """Token ids whose bytes are a (non-empty) prefix of ``data``, shortest first.

        >>> index = PrefixIndex(Vocabulary.from_cl100k())
        >>> [index.vocab.pieces[t] for t in index.prefixes_of(b"userName")]
        [b'u', b'us', b'use', b'user', b'userName']
        """
        order = self.order
        return [token for lo, hi in prefix_ranges(self.sorted_pieces, data[:self.max_piece_len])
                for token in order[lo:hi].tolist()]


def _successor(prefix: bytes) -> bytes | None:
    """The smallest byte string greater than every string starting with ``prefix``.

    None when there is none (empty prefix, or all 0xFF bytes).
    """
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return None
    return stripped[:-1] + bytes([stripped[-1] + 1])
