"""Encode adapters for re-encode validation: tiktoken or the model's own tokenizer.

Re-encoding must always use the tokenizer of the model that scores, so
validation goes through this one interface:

    >>> tokenizer = TiktokenTokenizer()
    >>> tokenizer.encode(b"userName")
    [29941]
    >>> ids = tokenizer.vocab.find(b"an") + tokenizer.vocab.find(b"ame")
    >>> tokenizer.continues(b"userN", ids).tolist()  # "userName" is one token
    [True, False]

``continues(context, tokens)`` answers, for every candidate token ``t``,
whether ``encode(context + t) == encode(context) + [t]`` -- the reference
validation rule, done on bytes (so tokens that end inside a UTF-8 character
are judged on what they are, not on a U+FFFD stand-in).
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import regex

from cpc.pretokenize import pretokens
from cpc.vocab import Vocabulary, cl100k_encoding, common_prefix

if TYPE_CHECKING:
    import tiktoken

    from cpc.gguf import GGUFModel


class Tokenizer(ABC):
    """Bytes -> token ids, plus the batched validation the candidate search needs."""

    vocab: Vocabulary

    @abstractmethod
    def encode(self, data: bytes) -> list[int]:
        """The canonical token ids of ``data`` (no BOS, special-token text kept as text)."""

    def encode_many(self, texts: Sequence[bytes]) -> list[list[int]]:
        """``[encode(text) for text in texts]``; a tokenizer may do it in fewer calls."""
        return [self.encode(text) for text in texts]

    def continues(self, context: bytes, token_ids: Sequence[int] | np.ndarray) -> np.ndarray:
        """Boolean mask: which ``token_ids`` re-encode as ``encode(context) + [t]``."""
        token_ids = np.asarray(token_ids, dtype=np.int64).tolist()
        pieces = self.vocab.pieces
        base, *extended = self.encode_many([context, *(context + pieces[t] for t in token_ids)])
        return np.fromiter(
            (tokens == [*base, t] for tokens, t in zip(extended, token_ids)),
            dtype=bool,
            count=len(token_ids),
        )


# A chunk the cl100k regex matched as "optional lead character, then
# letters". Appending letters only ever lengthens such a chunk (an apostrophe
# lead is left out: "'l" + "l" becomes the contraction "'ll").
_LETTER_CHUNK = regex.compile(r"[^\r\n\p{L}\p{N}']?\p{L}+")
_LETTERS = regex.compile(r"\p{L}+")


class TiktokenTokenizer(Tokenizer):
    """cl100k (or another tiktoken encoding with the same regex) on raw bytes."""

    def __init__(self, encoding: tiktoken.Encoding | None = None) -> None:
        self.encoding = encoding or cl100k_encoding()
        self.vocab = Vocabulary.from_cl100k()
        self._core = self.encoding._core_bpe
        self._all_letters = np.array(
            [_is_letters(piece) for piece in self.vocab.pieces], dtype=bool
        )

    def encode(self, data: bytes) -> list[int]:
        return self._core._encode_bytes(data)

    def continues(self, context: bytes, token_ids: Sequence[int] | np.ndarray) -> np.ndarray:
        """The reference rule, with BPE run on the last regex chunk only.

        When the context ends in a letter chunk (or is empty) and the
        candidate is all letters, the regex keeps ``chunk + token`` in one
        chunk, so one single-piece BPE call decides. Everything else takes the
        general path through a full encode.
        """
        token_ids = np.asarray(token_ids, dtype=np.int64)
        try:
            chunks = pretokens(context.decode("utf-8"))
        except UnicodeDecodeError:  # the context ends inside a character
            return super().continues(context, token_ids)
        last_chunk = chunks[-1] if chunks else ""
        if last_chunk and not _LETTER_CHUNK.fullmatch(last_chunk):
            return super().continues(context, token_ids)
        fast = self._all_letters[token_ids]
        result = np.zeros(len(token_ids), dtype=bool)
        chunk = last_chunk.encode("utf-8")
        single_piece = self._core.encode_single_piece
        chunk_tokens = single_piece(chunk) if chunk else []
        pieces = self.vocab.pieces
        fast_ids = token_ids[fast]
        result[fast] = [
            single_piece(chunk + pieces[t]) == [*chunk_tokens, t] for t in fast_ids.tolist()
        ]
        if not fast.all():
            result[~fast] = super().continues(context, token_ids[~fast])
        return result


REUSE_MIN_BYTES = 1024
"""`LlamaTokenizer` encodes a text this long against a recent one, re-encoding only what follows their
shared start: a keystroke's prompt (up to 32,000 characters, 36 ms for llama.cpp) differs from the last
one only at its end. A 3,400-byte prompt took 1.2 ms whole and 0.17 ms so."""

REUSE_TEXTS = 3
"""Long texts kept for that, so that a keystroke's prompt and another long text encoded between two keystrokes
(another open document's prompt, say) do not push one another out."""

_RESYNC_BYTES = 256
"""The re-encoding starts this far before the first changed byte, and must give the old tokens up to
there: an edit whose effect on the tokens reaches further back falls back to a full encode."""


JOINED_BYTES = 1024
"""`LlamaTokenizer.encode_many` tokenizes about this many bytes of short texts in one llama.cpp call. Each
call costs a fixed 35 us for Gemma 3 (llama.cpp looks at its 6,415 special tokens), several times a short
text's own tokenizing; llama.cpp's cutting of a text at special tokens grows with the square of the cuts,
so the joined texts stay short."""


class LlamaTokenizer(Tokenizer):
    """The tokenizer inside a GGUF model, run by llama.cpp."""

    def __init__(self, gguf: GGUFModel, vocab: Vocabulary | None = None) -> None:
        self.gguf = gguf
        self.vocab = vocab or Vocabulary.from_gguf(gguf)
        self._recent: list[tuple[bytes, list[int], np.ndarray]] = []
        """The last long texts encoded, newest first: each with its tokens and their ends."""
        self._lock = threading.Lock()
        splitter = gguf.splitting_token()
        self._splitter = splitter if splitter and self.vocab.pieces[splitter[0]] == splitter[1] else None
        """A token llama.cpp cuts out of any text on its own (`cpc.gguf.GGUFModel.splitting_token`), and its text."""

    def encode(self, data: bytes) -> list[int]:
        """The model's tokens of ``data``; a long text reuses the tokens of a recent one that starts as it does.

        >>> from cpc.gguf import GGUFModel
        >>> tokenizer = LlamaTokenizer(GGUFModel.open("smollm2", vocab_only=True))
        >>> code = b"def f(x):\\n    return x * 2\\n\\n" * 200
        >>> tokenizer.encode(code + b"y = f(3)") == tokenizer.gguf.tokenize(code + b"y = f(3)")
        True
        >>> tokenizer.encode(code + b"y = f(42)") == tokenizer.gguf.tokenize(code + b"y = f(42)")  # the end only
        True
        """
        if len(data) < REUSE_MIN_BYTES:
            return self.gguf.tokenize(data)
        with self._lock:
            recent = list(self._recent)
        base, tokens = None, None
        for last in recent:
            tokens = self._reencode_end(last, data)
            if tokens is not None:
                base = last
                break
        tokens = tokens or self.gguf.tokenize(data)
        ends = np.cumsum(self.vocab.lengths[tokens])
        if len(ends) and ends[-1] == len(data):  # the tokens spell the text: their ends are byte offsets
            with self._lock:  # in place of the text it came from, or of the oldest
                kept = [text for text in self._recent if text is not base]
                self._recent = [(data, tokens, ends), *kept[: REUSE_TEXTS - 1]]
        return tokens

    def encode_many(self, texts: Sequence[bytes]) -> list[list[int]]:
        """``[encode(text) for text in texts]``, short texts joined by the model's splitting token in one call.

        llama.cpp cuts that token out of the joined text first and tokenizes the pieces between apart, as
        it tokenizes each text alone. A join is kept only where it held: the tokens spell the joined
        text and the splitting token stands alone where each was put; otherwise its texts are encoded
        one by one.

        >>> from cpc.gguf import GGUFModel
        >>> tokenizer = LlamaTokenizer(GGUFModel.open("default", vocab_only=True))
        >>> texts = [b"def f(x):", b"", b"    return x", b"<start_of_image", b"\\n\\n"]
        >>> tokenizer.encode_many(texts) == [tokenizer.encode(text) for text in texts]
        True
        """
        if self._splitter is None:
            return super().encode_many(texts)
        encoded: list[list[int]] = []
        start = 0
        while start < len(texts):
            end, size = start + 1, len(texts[start])
            while end < len(texts) and size + len(texts[end]) <= JOINED_BYTES:
                size += len(texts[end])
                end += 1
            joined = self._encode_joined(texts[start:end]) if end - start > 1 else None
            encoded += joined if joined is not None else [self.encode(text) for text in texts[start:end]]
            start = end
        return encoded

    def _encode_joined(self, texts: Sequence[bytes]) -> list[list[int]] | None:
        """The texts' tokens from one call on them joined by the splitting token, or None where the join did not hold.

        It held when each splitting token put in is a token of its own, where it was put: no other
        user-defined token took a part of it, or it and its neighbours (Gemma 3's newline and space runs
        do). Token ends are byte offsets only when the tokens spell the joined text, which is checked too
        (a tokenizer may drop or normalise bytes).
        """
        splitter, joint = self._splitter, self._splitter[1].join(texts)
        tokens = np.array(self.gguf.tokenize(joint), dtype=np.int64)
        ends = np.cumsum(self.vocab.lengths[tokens])
        placed = np.cumsum(np.fromiter(map(len, texts[:-1]), np.int64, len(texts) - 1) + len(splitter[1]))
        at = np.searchsorted(ends, placed)  # the token that ends where each splitting token was put
        if (
            at[-1] >= len(tokens)
            or not np.array_equal(ends[at], placed)
            or (tokens[at] != splitter[0]).any()
            or self.vocab.decode(tokens.tolist()) != joint
        ):
            return None
        bounds = [-1, *at.tolist(), len(tokens)]
        return [tokens[bounds[k] + 1 : bounds[k + 1]].tolist() for k in range(len(texts))]

    def _reencode_end(self, last: tuple[bytes, list[int], np.ndarray], data: bytes) -> list[int] | None:
        """``data``'s tokens from the last text's: its tokens up to a boundary before the change, the rest
        encoded again. None when the texts share too little or the change reaches back past the boundary."""
        old_data, old_tokens, ends = last
        shared = common_prefix(np.frombuffer(old_data, np.uint8), np.frombuffer(data, np.uint8))
        kept = int(np.searchsorted(ends, shared - _RESYNC_BYTES, side="right"))
        start = int(np.searchsorted(ends, ends[kept - 1] - _RESYNC_BYTES, side="right")) if kept else 0
        if start == 0:
            return None
        tokens = self.gguf.tokenize(data[int(ends[start - 1]) :])
        if tokens[: kept - start] != old_tokens[start:kept]:
            return None
        return old_tokens[:start] + tokens


def load_tokenizer(model: str | None) -> Tokenizer:
    """cl100k (``model`` None or ``"cl100k"``) or a GGUF model's own tokenizer (a path, or ``"default"`` / ``"smollm2"``)."""
    if model is None or model == "cl100k":
        return TiktokenTokenizer()
    from cpc.gguf import GGUFModel

    return LlamaTokenizer(GGUFModel.open(model, vocab_only=True))


def _is_letters(piece: bytes) -> bool:
    try:
        return _LETTERS.fullmatch(piece.decode("utf-8")) is not None
    except UnicodeDecodeError:
        return False
