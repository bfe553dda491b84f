"""Character prefix conditioning: the weighted covering paths of the text before the cursor.

This is the engine's answer to "what may come after exactly these typed
characters", the input generation works from:

1. The model's own tokens of the stable part form the *prompt*. They are
   taken from the canonical tokenization of the whole text (tokenized in
   context), up to the last token boundary at or before the unstable tail
   that `cpc.pretokenize` isolates (its last `max_tail_bytes` at most, and
   no more than `REREAD_TOKENS` tokens spell: `tokens_reach`).
2. `cpc.candidates` lists the re-encode-validated covering paths of the rest
   (the *tail*): canonical tokens of the tail up to a split point, then one
   token that crosses or ends at the cursor.
3. The byte beam reads the tail from the prompt, committing only canonical
   tokens, and weighs each path: ``P(tail tokens | prompt) * P(last token |
   ...)``. Every snapshot the beam can need is fetched first, in one batched
   model call.

    >>> from cpc.engine import Engine
    >>> engine = Engine.load("smollm2")
    >>> result = engine.conditioner.condition("import numpy as np\\nx = np.zer")
    >>> engine.vocab.decode(result.paths[0].tokens[len(result.prompt):])
    b'.zeros'
"""

from __future__ import annotations

import math
from collections import OrderedDict
from bisect import bisect_left
from dataclasses import dataclass

import numpy as np

from cpc.beam import Beam, ByteBeam, logsumexp
from cpc.candidates import Analysis, CandidateFinder
from cpc.lm import State
from cpc.pretokenize import chunk_starts, ends_inside_character, split_tail
from cpc.tokenizer import Tokenizer
from cpc.vocab import Vocabulary
from cpc.window import GENERATION_ROOM, MAX_PROMPT_TOKENS, fit_window, prompt_window

_PREFETCH_LIMIT = 48  # canonical tail states fetched up front; the beam fetches any others itself


TAIL_TOKENS = 2
"""The unstable tail holds at most this many of the vocabulary's longest tokens' bytes (`max_tail_bytes`)."""

REREAD_TOKENS = 3
"""The tail holds no more than this many tokens can spell back from the cursor (`tokens_reach`): the token that
covers the cursor and the two before it vary, the text before them is read as the whole text's tokens."""


def max_tail_bytes(tokenizer: Tokenizer) -> int:
    """The most bytes the tail holds from its bound on: `TAIL_TOKENS` of the longest tokens, and never more
    tokens (a byte each at most) than half the room the window leaves in the context
    (`cpc.window.GENERATION_ROOM`). The tail starts at the token boundary at or before that bound, so it
    holds up to one token more: within the room still.

    >>> from cpc.tokenizer import TiktokenTokenizer
    >>> max_tail_bytes(TiktokenTokenizer())  # cl100k's longest token is 128 bytes
    128
    """
    return min(TAIL_TOKENS * tokenizer.vocab.longest, GENERATION_ROOM // 2)


def bounded_tail_start(text: str, start: int, max_bytes: int) -> int:
    """``start``, the tail's start, moved on so that the tail holds at most ``max_bytes`` bytes (UTF-8).

    The byte beam reads the tail byte by byte, and the pre-tokenizer's last
    chunk has no length limit: a long string of letters, a run of spaces or a
    line of emoji (minified code, base64, an ASCII-art comment) made one
    keystroke cost the beam a model state per byte, tens of seconds, and
    a tail longer than the context's room. Room for two of the longest
    tokens still lets every token cover the cursor and the one before it
    vary; the rest of the chunk is read as the whole text's tokens. The
    start moves in steps of half of ``max_bytes`` (then on to a character's
    start), not with each key, so that the next key finds the tail's first
    tokens in the cache (`cpc.window`'s rule).

    >>> text = "x = '" + "a" * 500
    >>> bounded_tail_start(text, 4, 96), bounded_tail_start(text + "a", 4, 96), bounded_tail_start("x = 'ab", 4, 96)
    (436, 436, 4)
    """
    data = text[start:].encode("utf-8")
    if len(data) <= max_bytes:
        return start
    step = max(1, max_bytes // 2)
    cut = ((len(data) - max_bytes) // step + 1) * step
    while cut < len(data) and data[cut] & 0xC0 == 0x80:  # a UTF-8 continuation byte: not a character's start
        cut += 1
    return start + len(data[:cut].decode("utf-8"))


def tokens_reach(vocab: Vocabulary, data: bytes, start: int, count: int = REREAD_TOKENS) -> int:
    """The earliest byte offset at or after ``start`` from which ``count`` tokens at most spell the rest of
    ``data``, the last one a token that starts with what it covers (it may go on past the cursor).

    A pre-tokenizer chunk is a word where words are written with spaces
    between them, and a whole sentence where they are not: a comment in
    Chinese or Japanese is one run of letters, and the byte beam read up to
    `max_tail_bytes` of it, a model state at nearly every character (24 model
    calls, 0.44 s, for a cold key 20 characters into a comment). Paths of more
    tokens than ``count`` inside the tail do not start earlier than this.
    Of 400 cursors in the development sets' and the cold set's code, three
    tails got shorter (identifiers of four tokens or more).

    >>> from cpc.vocab import Vocabulary
    >>> vocab = Vocabulary.from_cl100k()
    >>> data = "# 这个函数读取配置文件".encode()
    >>> data[tokens_reach(vocab, data, 2):].decode(), data[tokens_reach(vocab, data, 2, 1):].decode()
    ('取配置文件', '文件')
    >>> tokens_reach(vocab, b"x = self.wid", 8)  # a word: the whole chunk
    8
    """
    pieces = vocab.sorted_pieces
    longest = vocab.longest
    end = len(data)

    def spelled_by_a_token(piece: bytes, whole: bool) -> bool:
        found = bisect_left(pieces, piece)
        return found < len(pieces) and (pieces[found] == piece if whole else pieces[found].startswith(piece))

    starts = {at for at in range(max(start, end - longest), end) if spelled_by_a_token(data[at:], whole=False)}
    starts.add(end)
    earliest = min(starts)
    for _ in range(count - 1):
        starts = {before for at in starts for before in range(max(start, at - longest), at)
                  if spelled_by_a_token(data[before:at], whole=True)}
        if not starts:
            break
        earliest = min(earliest, *starts)
    if earliest == end:
        return start  # no token spells the text's end (a character the vocabulary lacks): all of it is the tail
    while earliest > start and data[earliest] & 0xC0 == 0x80:  # a UTF-8 continuation byte: not a character's start
        earliest -= 1
    return earliest


def stable_tokens(tokenizer: Tokenizer, text: str, max_tokens: int) -> tuple[State, int]:
    """The model's tokens of the stable part of ``text`` (taken in context, at most ``max_tokens``
    of the last), and the byte offset where they end: where the tail starts for this tokenizer.

    That is the last token boundary at or before the pre-tokenizer's split (in a last chunk longer
    than `max_tail_bytes`, before its last bytes: `bounded_tail_start`; in a chunk longer than a few
    tokens, before the bytes `REREAD_TOKENS` tokens spell: `tokens_reach`); a tokenizer whose tokens
    cross the split (Gemma's ``"  "`` in ``"  def"``) starts the tail earlier.

    >>> from cpc.tokenizer import TiktokenTokenizer
    >>> stable_tokens(TiktokenTokenizer(), "x = self.wid", 100)
    ((87, 284, 659), 8)
    """
    data = text.encode("utf-8")
    start = bounded_tail_start(text, split_tail(text).start, max_tail_bytes(tokenizer))
    tail_start = tokens_reach(tokenizer.vocab, data, len(data) - len(text[start:].encode("utf-8")))
    start = len(data[:tail_start].decode("utf-8"))
    pieces = tokenizer.vocab.pieces
    tokens = tokenizer.encode(data)
    ends = np.cumsum(tokenizer.vocab.lengths[tokens])
    count = int(np.searchsorted(ends, tail_start, side="right"))  # the tokens that end by the split
    end = int(ends[count - 1]) if count else 0
    if tokenizer.vocab.decode(tokens[:count]) != data[:end]:
        # The tokenizer did not spell the stable part (a byte it has no
        # token for, NFKC): token lengths no longer say where the tail starts.
        return _stable_encoded_alone(tokenizer, text, tokens, start, max_tokens)
    # The tail must start on a character boundary (byte-level tokens may not).
    while count and ends_inside_character(data[:end]):
        count -= 1
        end -= len(pieces[tokens[count]])
    return prompt_window(tokens[:count], max_tokens), end


def _stable_encoded_alone(
    tokenizer: Tokenizer, text: str, tokens: list[int], split_start: int, max_tokens: int
) -> tuple[State, int]:
    """The stable part encoded alone, for a tokenizer that does not spell it.

    It ends at the split, or the latest chunk start before it, whose text,
    encoded alone, begins the whole text's tokens: a tokenizer without the
    pre-tokenizer's digit groups may take ``"123"`` as one token across the
    split of ``"\\x1f0123"``. Where no chunk start agrees, the split itself.
    """
    for start in dict.fromkeys([split_start, *chunk_starts(text, split_start)]):
        prefix = text[:start].encode("utf-8")
        stable = tokenizer.encode(prefix)
        if list(tokens[: len(stable)]) == stable:
            return prompt_window(stable, max_tokens), len(prefix)
    prefix = text[:split_start].encode("utf-8")
    return prompt_window(tokenizer.encode(prefix), max_tokens), len(prefix)


@dataclass(frozen=True)
class CoveringPath:
    """One tokenization of the tail: the state to continue generating from."""

    tokens: State
    """Prompt, canonical tail tokens, then the token that crosses or ends at the cursor."""
    logprob: float
    """``log P(tokens after the prompt | prompt)``."""
    overhang: bytes
    """What the last token adds after the cursor (empty when it ends there)."""


@dataclass(frozen=True, eq=False)
class Conditioning:
    """The covering paths of one text before the cursor, best first."""

    text: str
    prompt: State
    """BOS (or a FIM head), the model's tokens of the stable part, and the FIM middle: shared by every path."""
    cut_short: bool
    """The stable part was cut shorter than the window to keep within a prompt-time budget."""
    tail: bytes
    """The bytes after the prompt, up to the cursor."""
    paths: list[CoveringPath]
    logprob: float
    """``log P(tail | prompt)`` summed over all validated paths in the beam."""
    analysis: Analysis
    beam: Beam


class Conditioner:
    """Turns the text before the cursor into weighted covering paths."""

    def __init__(
        self,
        tokenizer: Tokenizer,
        finder: CandidateFinder,
        beam: ByteBeam,
        *,
        max_paths: int = 64,
        max_validated: int = 256,
    ) -> None:
        """``max_validated``: at a split point where more tokens start with the typed rest, only
        the likeliest (under the model, after the tail's tokens) are re-encoded and become paths."""
        self.tokenizer = tokenizer
        self.finder = finder
        self.beam = beam
        self.max_paths = max_paths
        self.max_validated = max_validated
        self._canonical_cache: OrderedDict[bytes, tuple[int, ...]] = OrderedDict()

    def condition(
        self, text: str, *, head: State | None = None, middle: State = (), budget_ms: float | None = None,
        prompt_tokens: int = MAX_PROMPT_TOKENS,
    ) -> Conditioning:
        """The covering paths of ``text`` (everything before the cursor), weighed by the model.

        The model reads ``head`` (default: the document start), the stable
        part's tokens, ``middle``, then the tail: a fill-in-the-middle
        prompt puts the FIM-prefix token in ``head`` and the suffix between
        the FIM-suffix and FIM-middle tokens in ``middle``. With
        ``budget_ms``, the stable part is cut (`cpc.window.fit_window`) so that reading
        what the cache lacks of it takes about that long at most. The stable
        part keeps at most ``prompt_tokens`` tokens (the engine's window:
        `cpc.engine.Engine.prompt_tokens`).
        """
        data = text.encode("utf-8")
        full, anchor = stable_tokens(self.tokenizer, text, prompt_tokens)
        head = self.beam.lm.bos if head is None else head
        prompt = fit_window(self.beam.lm, head, full, middle, budget_ms)
        tail = data[anchor:]
        lm_start = head + prompt + middle
        self.beam.lm.expect(lm_start, tail)
        self._prefetch(lm_start, tail)
        beam = self.beam.read(lm_start, tail, allows=self.allows)
        # Only split points after a candidate's committed tokens become paths: the others are not
        # validated, and never cost a model call to rank their tokens (the beam pruned their context).
        reached = {c.tokens[len(lm_start) :]: c.snapshot for c in beam.candidates}

        def likelihood(tail_tokens: tuple[int, ...], token_ids: np.ndarray) -> np.ndarray:
            return reached[tail_tokens].of(token_ids)

        analysis = self.finder.analyze(
            text, start=len(data[:anchor].decode("utf-8")), rank=likelihood, limit=self.max_validated,
            contexts=reached.keys(),
        )
        paths = self._paths(beam, analysis, data, anchor) if tail else [CoveringPath(lm_start, 0.0, b"")]
        if not paths:
            # Pruning can lose every validated path (rare, for odd text); then the canonical one
            # serves, unless the tokenizer cannot even spell the tail (a few unassigned code points).
            canonical = self._canonical_path(lm_start, tail)
            paths = [canonical] if self.tokenizer.vocab.decode(canonical.tokens[len(lm_start) :]) == tail else []
        return Conditioning(
            text=text,
            prompt=lm_start,
            cut_short=len(prompt) < len(full),
            tail=tail,
            paths=paths[: self.max_paths],
            logprob=logsumexp([p.logprob for p in paths]),
            analysis=analysis,
            beam=beam,
        )

    def clear(self) -> None:
        """Make the next request cold: no cached candidates, beams, snapshots or KV cache."""
        self.finder.clear()
        self.beam.clear()
        self.beam.lm.reset()
        self._canonical_cache.clear()

    def allows(self, tokens: State, covered: bytes) -> bool:
        """The beam's commit filter: committed tail tokens must be the canonical tokens of what they cover.

        Inside a multi-byte character (byte-level tokens split them) there
        is no canonical encoding to compare with: such commits pass, and the
        next commit at a character boundary, or the candidate search at the
        cursor, judges the whole path.
        """
        return ends_inside_character(covered) or self._canonical(covered) == tokens

    def _canonical(self, data: bytes) -> tuple[int, ...]:
        tokens = self._canonical_cache.get(data)
        if tokens is None:
            tokens = self._canonical_cache[data] = tuple(self.tokenizer.encode(data))
            if len(self._canonical_cache) > 4096:
                self._canonical_cache.popitem(last=False)
        return tokens

    def _prefetch(self, start: State, tail: bytes) -> None:
        """Fetch the canonical tail states the beam is likely to need, a batched call per token depth.

        Each state costs the model's output layer, so one is fetched only
        when its path (canonical tail tokens after the prompt) is within the
        beam's threshold of the likeliest such path so far; the beam prunes
        the others, and fetches any state it does need itself, so this
        choice changes no result.
        """
        snapshots = self.beam.snapshots
        text = tail.decode("utf-8", "ignore")
        ends = sorted({len(text[:k].encode("utf-8")) for k in range(1, len(text) + 1)})[-_PREFETCH_LIMIT:]
        wanted = {tokens[:depth] for end in ends for tokens in [self._canonical(tail[:end])]
                  for depth in range(1, len(tokens) + 1)}
        known = {(): (snapshots.get(start), 1.0)}
        best = 0.0
        for depth in range(1, max(map(len, wanted), default=0) + 1):
            reach = {}
            for tokens in wanted:
                if len(tokens) == depth and tokens[:-1] in known:
                    snapshot, before = known[tokens[:-1]]
                    reach[tokens] = before * float(snapshot.of(tokens[-1]))
            best = max([best, *reach.values()])
            fetch = [tokens for tokens, probability in reach.items() if probability >= self.beam.threshold * best > 0]
            for tokens, snapshot in zip(fetch, snapshots.get_many([start + tokens for tokens in fetch])):
                known[tokens] = (snapshot, reach[tokens])

    def _paths(self, beam: Beam, analysis: Analysis, data: bytes, anchor: int) -> list[CoveringPath]:
        """Each beam candidate's validated last tokens, with their path probability."""
        points = {len(point.before) - anchor: point for point in analysis.positions}
        pieces = self.tokenizer.vocab.pieces
        tail_length = len(data) - anchor
        start_length = len(beam.start)
        paths = []
        for candidate in beam.candidates:
            point = points.get(tail_length - len(candidate.open))
            if point is None or point.tail_tokens != candidate.tokens[start_length:]:
                continue
            probs = candidate.snapshot.of(point.token_ids)
            for token, probability in zip(point.token_ids.tolist(), probs.tolist()):
                if probability > 0:
                    paths.append(
                        CoveringPath(
                            tokens=(*candidate.tokens, token),
                            logprob=candidate.log_committed + math.log(probability),
                            overhang=pieces[token][len(candidate.open) :],
                        )
                    )
        paths.sort(key=lambda path: path.logprob, reverse=True)
        return paths

    def _canonical_path(self, start: State, tail: bytes) -> CoveringPath:
        """The canonical tokenization of the tail, weighed token by token (one batched call)."""
        tokens = self._canonical(tail)
        snapshots = self.beam.snapshots.get_many([start + tokens[:k] for k in range(len(tokens))])
        logprob = sum(math.log(s.of(t)) for s, t in zip(snapshots, tokens))
        return CoveringPath(start + tokens, logprob, b"")
