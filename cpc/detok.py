"""The incremental detokenizer: token ids to text as soon as it is whole, over raw token bytes (window and diff).

Generation produces token ids; the editor wants text, and wants it as soon
as it exists. A token may end inside a UTF-8 character (byte-level BPE
splits emoji and CJK into several tokens; SentencePiece models fall back to
``<0xNN>`` byte tokens), so decoding each token alone garbles text, and
decoding the whole history at each step costs O(N²).

Because the vocabulary gives every token's exact bytes, the textbook window
and ``\\ufffd`` bookkeeping reduce to one incremental UTF-8 decoder: it
holds back at most the 3 bytes of an unfinished character and emits each
character at the token that completes it. Work per push is proportional to
the token's own bytes; the emitted pieces concatenate to exactly
``bytes.decode("utf-8", "replace")`` of everything pushed.

    >>> import numpy as np
    >>> from cpc.vocab import Vocabulary
    >>> vocab = Vocabulary("toy", [b"a", "😀".encode()[:2], "😀".encode()[2:]], np.zeros(3, bool))
    >>> detok = Detokenizer(vocab)
    >>> detok.push(0), detok.push(1), detok.push(2), detok.flush()
    ('a', '', '😀', '')
"""

from __future__ import annotations

import codecs

from cpc.vocab import Vocabulary


class Detokenizer:
    """Turns a stream of token ids into a stream of text, character-exact."""

    def __init__(self, vocab: Vocabulary, context: bytes = b"") -> None:
        """``context``: bytes already on screen before the first token (not emitted again).

        Only its unfinished last character matters: a token that completes
        it emits the whole character.
        """
        self._pieces = vocab.pieces
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._decoder.decode(context[-3:])

    def push(self, token: int) -> str:
        """The text that ``token`` completes (empty while a character is unfinished)."""
        return self.push_bytes(self._pieces[token])

    def push_bytes(self, data: bytes) -> str:
        """Like `push`, for bytes that do not come as one token (a path's overhang)."""
        return self._decoder.decode(data)

    def flush(self) -> str:
        """What is left at the end of generation: an unfinished character becomes U+FFFD."""
        return self._decoder.decode(b"", final=True)

