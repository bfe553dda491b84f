"""Covering paths for the unstable tail: prefix search + re-encode validation.

Character prefix conditioning's candidate search, generalised to every
split point. For every split point inside the unstable tail (from
the cursor back to the tail's start) the rest of the typed text must be the
beginning of the next token. The candidates are the tokens that start with
that rest (one range of the prefix index), kept only when
``encode(text_before_split + token) == encode(text_before_split) + [token]``
with the scoring model's own tokenizer. A *covering path* is then the
canonical tokens of the tail up to the split (tokens that end inside the
tail) followed by one validated token that crosses or ends at the cursor.

A path is also dropped when its bytes cannot start valid UTF-8 text (Ж then
a stray continuation byte, say): nobody can type it, whatever the tokenizer
family says about re-encoding it.

    >>> finder = CandidateFinder.for_cl100k()
    >>> analysis = finder.analyze("He introduced an intermediar")
    >>> [(p.prefix, p.count) for p in analysis.positions]
    [('He introduced an intermedia', 52), ('He introduced an intermedi', 215), ('He introduced an', 1)]

Validation only looks at the text from the tail's start: the stable part
before it tokenizes the same whatever follows (see `cpc.pretokenize`).
Results are cached per (tail context, typed rest): when one more character
is typed, the candidates of an older, shorter rest are narrowed with one
range query instead of being validated again.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Container, Iterator
from dataclasses import dataclass

import numpy as np

from cpc.index import PrefixIndex
from cpc.pretokenize import (
    TailSplit,
    cl100k_pattern,
    ends_inside_character,
    is_utf8_prefix,
    split_tail,
    unfinished_character,
)
from cpc.tokenizer import TiktokenTokenizer, Tokenizer


@dataclass(frozen=True, eq=False)
class SplitPoint:
    """The candidates whose token starts at one split point of the tail."""

    offset: int
    """Character offset of the split in the analysed text (of the character it is in, if inside one)."""
    before: bytes
    """The whole text before the split, as bytes (a split may fall inside a character)."""
    prefix: str
    """The same text as a string (an incomplete last character shown as ``\\xNN`` escapes)."""
    tail_tokens: tuple[int, ...]
    """Canonical tokens of the tail up to the split (they end inside the tail)."""
    token_ids: np.ndarray
    """Validated tokens that start here and cover the rest of the typed text."""

    @property
    def count(self) -> int:
        return len(self.token_ids)


@dataclass(frozen=True, eq=False)
class Analysis:
    """All covering paths of the unstable tail, grouped by split point."""

    split: TailSplit
    positions: list[SplitPoint]
    """Split points with at least one candidate, from the cursor leftwards."""

    @property
    def count(self) -> int:
        return sum(point.count for point in self.positions)

    def paths(self) -> Iterator[tuple[int, ...]]:
        """Every covering path of the tail, as a tuple of token ids.

        The stable part's tokens are not included: they are the same for all
        paths.
        """
        for point in self.positions:
            for token in point.token_ids.tolist():
                yield (*point.tail_tokens, token)


Ranker = Callable[[tuple[int, ...], np.ndarray], np.ndarray]
"""``rank(tail_tokens, token_ids)``: a score per candidate token after the tail's tokens; higher is likelier."""


class CandidateFinder:
    """Finds the validated covering paths of the text before the cursor."""

    def __init__(self, tokenizer: Tokenizer, index: PrefixIndex | None = None, cache_size: int = 512):
        self.tokenizer = tokenizer
        self.index = index or PrefixIndex(tokenizer.vocab)
        cl100k_pattern()  # compiled here, at load, rather than in the first request's analysis
        self._cache: OrderedDict[bytes, _ContextEntry] = OrderedDict()
        self._cache_size = cache_size
        self._typable_after: dict[bytes, np.ndarray] = {}
        """Per unfinished character before a split: 1 where the token can follow it in UTF-8, 0 not, -1 unknown."""

    @classmethod
    def for_cl100k(cls) -> CandidateFinder:
        """A finder over tiktoken's cl100k vocabulary and tokenizer."""
        return cls(TiktokenTokenizer())

    def analyze(
        self, text: str, start: int | None = None, *, rank: Ranker | None = None, limit: int = 512,
        contexts: Container[tuple[int, ...]] | None = None,
    ) -> Analysis:
        """Split ``text`` (everything before the cursor) and cover its tail.

        ``start`` moves the tail's start to an earlier character offset,
        e.g. to where the model's own tokens of the stable part end.
        ``rank(tail_tokens, token_ids)`` scores candidates (e.g. the model's
        probabilities after the tail tokens): where more than ``limit``
        tokens start with the typed rest (a single space starts half of a
        SentencePiece vocabulary), only the ``limit`` best are re-encoded.
        With ``contexts``, a split point whose tail tokens are not among them
        is left out (a byte beam that pruned them needs no candidates there).
        """
        split = split_tail(text)
        start = split.start if start is None else start
        data = text.encode("utf-8")
        start_byte = len(text[:start].encode("utf-8"))
        positions = []
        # Byte offsets, not characters: byte-level vocabularies start tokens
        # inside multi-byte characters (SmolLM2 splits an emoji in three).
        for offset in range(len(data) - 1, start_byte - 1, -1):
            rest = data[offset:]
            lo, hi = self.index.range_starting_with(rest)
            if lo == hi:
                continue
            entry = self._entry(data[start_byte:offset])
            if contexts is not None and entry.tokens is not None and entry.tokens not in contexts:
                continue
            token_ids = entry.valid(rest, lo, hi, self.index, self.tokenizer, rank if hi - lo > limit else None, limit)
            before = data[:offset]
            token_ids = self._typable(before, token_ids)
            if len(token_ids):
                positions.append(
                    SplitPoint(
                        offset=len(before.decode("utf-8", "ignore")),
                        before=before,
                        prefix=before.decode("utf-8", "backslashreplace"),
                        tail_tokens=entry.tokens,
                        token_ids=token_ids,
                    )
                )
        return Analysis(split=split, positions=positions)

    def clear(self) -> None:
        """Forget every validated candidate (the next analysis is cold)."""
        self._cache.clear()

    def _typable(self, before: bytes, token_ids: np.ndarray) -> np.ndarray:
        """The tokens whose bytes, right after ``before``, can still start valid UTF-8 text."""
        pending = unfinished_character(before)
        known = self._typable_after.get(pending)
        if known is None:
            if len(self._typable_after) >= 64:  # one entry per distinct unfinished character typed
                self._typable_after.clear()
            known = self._typable_after[pending] = np.full(len(self.index.vocab.pieces), -1, dtype=np.int8)
        pieces = self.index.vocab.pieces
        for token in token_ids[known[token_ids] < 0].tolist():
            known[token] = is_utf8_prefix(pending + pieces[token])
        return token_ids[known[token_ids] == 1]

    def _entry(self, context: bytes) -> _ContextEntry:
        entry = self._cache.get(context)
        if entry is None:
            # A context that ends inside a character has no encoding of its
            # own: its tokens are learnt from the candidates that complete it.
            tokens = None if ends_inside_character(context) else tuple(self.tokenizer.encode(context))
            # A tokenizer may drop bytes it cannot spell (SmolLM2's has no token
            # for 0xF1): paths after such a context do not cover what was typed.
            spelled = tokens is None or self.tokenizer.vocab.decode(tokens) == context
            entry = _ContextEntry(context, tokens, spelled)
            self._cache[context] = entry
            if len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(context)
        return entry


_CHECKED_LIMIT = 1 << 14
"""Validity results a context keeps for its best ranked candidates (a few prompts' worth of the ``limit`` best)."""


class _ContextEntry:
    """Validated candidates after one tail context, for the rests seen so far.

    Validity of a token after a context does not depend on the typed rest, so
    the candidates for a longer rest are the cached candidates of any shorter
    rest that starts it, narrowed to the longer rest's index range.
    """

    def __init__(self, context: bytes, tokens: tuple[int, ...] | None, spelled: bool = True):
        self.context = context
        self.tokens = tokens
        self.inside_character = tokens is None
        """The context ends inside a character: its tokens are learnt from the candidates that complete it."""
        self.spelled = spelled
        """False when the tokenizer's tokens of the context do not spell it: then no token is valid."""
        self._by_rest: dict[bytes, np.ndarray] = {}  # rest -> sorted valid positions, all of them
        self._checked: dict[int, bool] = {}  # position -> valid, for the best ranked ones validated so far

    def valid(
        self,
        rest: bytes,
        lo: int,
        hi: int,
        index: PrefixIndex,
        tokenizer: Tokenizer,
        rank: Ranker | None = None,
        limit: int = 0,
    ) -> np.ndarray:
        """Valid token ids starting with ``rest``, whose index range is ``[lo, hi)``
        (with ``rank``: among the ``limit`` best ranked)."""
        if not self.spelled:
            return index.order[:0]
        positions = self._by_rest.get(rest)
        if positions is None:
            positions = self._narrowed(rest, lo, hi)
        if positions is None and rank is not None and self.tokens is not None:
            # The ranking is the model's after this request's whole prompt, not after the tail's context
            # alone: the best are ranked again for every analysis, and only their validity is remembered.
            scores = rank(self.tokens, index.order[lo:hi])
            top = np.sort(lo + np.argpartition(-scores, limit)[:limit])
            return index.order[top[self._checked_valid(top, index, tokenizer)]]
        if positions is None:
            positions = np.arange(lo, hi)[self._validate(index.order[lo:hi], tokenizer)]
        self._by_rest[rest] = positions
        return index.order[positions]

    def _checked_valid(self, positions: np.ndarray, index: PrefixIndex, tokenizer: Tokenizer) -> np.ndarray:
        """Which of these sorted positions are valid, each validated once after this context."""
        checked = self._checked
        if len(checked) > _CHECKED_LIMIT:
            checked.clear()
        unknown = [position for position in positions.tolist() if position not in checked]
        if unknown:
            found = self._validate(index.order[np.array(unknown)], tokenizer)
            checked.update(zip(unknown, found.tolist()))
        return np.fromiter(map(checked.__getitem__, positions.tolist()), dtype=bool, count=len(positions))

    def _validate(self, candidates: np.ndarray, tokenizer: Tokenizer) -> np.ndarray:
        """Which candidates re-encode as themselves after the context."""
        if self.inside_character:
            # The context alone has no encoding (a lone lead byte is not text), even once its
            # tokens are learnt: only encodings of context + candidate can be compared.
            return self._completes(candidates, tokenizer)
        return tokenizer.continues(self.context, candidates)

    def _completes(self, candidates: np.ndarray, tokenizer: Tokenizer) -> np.ndarray:
        """Validation inside a character: ``encode(context + t)`` must end with ``t``
        and the tokens before it must cover exactly the context."""
        pieces = tokenizer.vocab.pieces
        mask = np.zeros(len(candidates), dtype=bool)
        encoded = tokenizer.encode_many([self.context + pieces[token] for token in candidates.tolist()])
        for k, (token, full) in enumerate(zip(candidates.tolist(), encoded)):
            before = tuple(full[:-1])
            if full[-1] == token and tokenizer.vocab.decode(before) == self.context:
                if self.tokens is None:
                    self.tokens = before
                mask[k] = before == self.tokens
        return mask

    def _narrowed(self, rest: bytes, lo: int, hi: int) -> np.ndarray | None:
        for length in range(len(rest) - 1, 0, -1):
            shorter = self._by_rest.get(rest[:length])
            if shorter is not None:
                return shorter[np.searchsorted(shorter, lo) : np.searchsorted(shorter, hi)]
        return None
