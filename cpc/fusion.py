"""Shallow fusion: the project's own code in the decoder (log P_LM + λ·score per token), at no prompt cost.

Generation adds ``λ · score`` to the model's log-probabilities wherever it
chooses a token — the first token among the covering paths, and every
continuation step — for two fusion models over the scoring model's token ids:

- `cpc.ngram.NGramModel`: the nested-scope token n-gram cache (the current
  document, the other open documents, the workspace files);
- `cpc.identifiers.IdentifierModel`: the project's names, with a bonus for
  spelling one, a refund for starting one that is not finished, and a
  penalty for a word that leaves them all.

`ProjectCorpus` owns what they count: open documents (updated edit by edit,
re-counting only changed lines) and workspace files (added as they are read,
made visible by `ProjectCorpus.commit`). `ProjectCorpus.fusion` takes a
snapshot for one request: a `Fusion`, in the batched, stateful shape of
shallow-fusion decoders' language models — `init_states`,
`advance(states) -> (scores[n, V], next_states)`, `final(states)` — with
the weights scaled by the evidence behind them (`ProjectCorpus.pull`): a
lone short file, whose names the rest of its project would explain, gets
almost none of them, a project nearly all.

    >>> from cpc.engine import Engine
    >>> from cpc.generate import Options, generate
    >>> engine = Engine.load("smollm2")
    >>> corpus = ProjectCorpus(engine.tokenizer)
    >>> import json.decoder, pathlib  # a project's worth of text around the name: fusion pulls with its evidence
    >>> project = pathlib.Path(json.decoder.__file__).read_text()
    >>> corpus.add_file("lib.py", project + "def compute_weighted_checksum(data):\\n    return 0\\n")
    >>> corpus.commit()
    >>> prefix = "from lib import *\\nx = compute_wei"
    >>> plain = generate(engine, prefix, options=Options(max_tokens=16)).completions[0].text
    >>> fused = generate(engine, prefix, options=Options(max_tokens=16), fusion=corpus.fusion(None)).completions[0].text
    >>> plain.startswith("ghted_checksum"), fused.startswith("ghted_checksum")
    (False, True)
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING

import numpy as np

from cpc.identifiers import IdentifierModel, NameCounts, TokenShapes, language_names, names_in
from cpc.lm import State
from cpc.ngram import DocumentCounts, FileCounts, Line, Merged, NGramModel, WithoutLine, unchanged_ends
from cpc.syntax import Place, Syntax

if TYPE_CHECKING:
    from cpc.tokenizer import Tokenizer

__all__ = ["Fusion", "FusionWeights", "ProjectCorpus"]

SCOPE_WEIGHTS = (0.5, 0.2, 0.3)
"""The n-gram cache's mixture over (current document, other open documents, workspace files): most local first."""
LONG_LINE = 1_000
"""A line longer than this many characters is counted as an empty one: minified code and data (a sequence, a
hash) are not what anyone types next, and an open document's long line was counted again on every key (a
bundle's 300 KB line: a second a key). One line in 15,000 of the standard library is that long."""
FULL_PULL_TOKENS = 1_000
"""Tokens read (workspace files and open documents) from which fusion pulls as hard as its weights say, and
below which in proportion (`ProjectCorpus.pull`): a lone short file is too little evidence of what the next
names are. Nearly every directory of the cross-file benchmark holds more (its gain is kept)."""
MIN_PULL = 0.05
"""Below this, the pull is 0: scores so scaled move nothing that matters, and a request leaves fusion out
(`Fusion.is_off`), whose work costs every step time."""
FORESEEN_PRIOR = 8
"""A document's name occurrences are judged as if this many more had been foreseen: a new file's first few
names, all new, say little about how well the corpus knows it."""
FORESEEN_FULL = 0.5
"""The share of a document's names foreseen from which fusion pulls fully (a file of its project: 0.7 to 0.97
on the cross-file benchmark's directories), and below which in proportion (a file of names its corpus has
never seen)."""

_WORD_CONTEXT_TOKENS = 16


@dataclass(frozen=True)
class FusionWeights:
    """λ per fusion model (tuned with ``python -m harness.bench --cross-file`` on the development set)."""

    ngram: float = 0.3
    identifiers: float = 2.0

    @classmethod
    def off(cls) -> FusionWeights:
        return cls(0.0, 0.0)

    @classmethod
    def parse(cls, text: str | None) -> FusionWeights:
        """Weights from ``--fusion-weights`` text; the weights it does not name keep their defaults.

        >>> FusionWeights.parse("ngram=0.25")
        FusionWeights(ngram=0.25, identifiers=2.0)
        """
        if not text:
            return cls()
        values = {}
        known = {f.name for f in fields(cls)}
        for item in text.split(","):
            name, sep, value = item.partition("=")
            name = name.strip()
            if not sep or name not in known:
                raise ValueError(f"--fusion-weights: {item!r} is not NAME=NUMBER with NAME among {', '.join(sorted(known))}")
            try:
                values[name] = float(value)
            except ValueError as error:
                raise ValueError(f"--fusion-weights: {value!r} is not a number") from error
        return cls(**values)


FusionState = tuple[tuple[int, ...], tuple[bytes | None, float, float, Place]]
"""(n-gram context, identifier state)."""


class NextStates:
    """``next_states[i, token]``: the state stream ``i`` reaches by emitting ``token`` (computed when asked)."""

    def __init__(self, fusion: Fusion, states: Sequence[FusionState]) -> None:
        self._fusion = fusion
        self._states = states

    def __getitem__(self, key: tuple[int, int]) -> FusionState:
        row, token = key
        context, word = self._states[row]
        return self._fusion.ngram.next_state(context, token), self._fusion.identifiers.next_state(word, token)


class Fusion:
    """The fusion models of one request, weighted, over a snapshot of the corpus."""

    def __init__(self, ngram: NGramModel, identifiers: IdentifierModel, weights: FusionWeights) -> None:
        self.ngram = ngram
        self.identifiers = identifiers
        self.weights = weights

    @property
    def is_off(self) -> bool:
        """Whether these weights change nothing: a request may as well do without fusion."""
        return not (self.weights.ngram or self.weights.identifiers)

    def init_states(
        self, context: State, text: bytes, starts: Sequence[tuple[State, bytes]]
    ) -> tuple[np.ndarray, list[FusionState]]:
        """States of the streams generation starts from, and what their start already scores.

        ``context`` is the tokens before the cursor's unstable tail, ``text``
        the bytes before the cursor; each start is ``(path, overhang)``: the
        tokens that re-read the tail (``cpc``), and the bytes of them past
        the cursor. The path's tokens are scored by the n-gram model, the
        overhang by the identifier model (typed bytes earn nothing).
        """
        scores = np.zeros(len(starts))
        states: list[FusionState] = []
        (origin,) = self.ngram.init_states([context])
        for number, (path, overhang) in enumerate(starts):
            state = origin
            for token in path:
                scores[number] += self.weights.ngram * self.ngram.score(state, token) if self.weights.ngram else 0.0
                state = self.ngram.next_state(state, token)
            word_score, word = self.identifiers.start(text, overhang)
            scores[number] += self.weights.identifiers * word_score
            states.append((state, word))
        return scores, states

    def advance(self, states: Sequence[FusionState]) -> tuple[np.ndarray, NextStates]:
        """``λ_ngram · ngram + λ_identifiers · identifiers`` for every token after each state: ``[n, V]``."""
        ngram, identifiers = np.float32(self.weights.ngram), np.float32(self.weights.identifiers)
        scores = (np.empty if identifiers else np.zeros)((len(states), self.ngram.size), dtype=np.float32)
        for row, (context, word) in zip(scores, states):  # row by row: no [n, V] temporaries
            if identifiers:
                np.multiply(self.identifiers.row(word), identifiers, out=row)
            if ngram:  # the n-gram model scores a few tokens: one pass over the row, not three
                tokens, scored = self.ngram.scored(context)
                row[tokens] += scored * ngram
        return scores, NextStates(self, states)

    def final(self, states: Sequence[FusionState]) -> np.ndarray:
        """The end-of-text score of each state (a word left unfinished gives its bonus back)."""
        return self.weights.ngram * self.ngram.final([context for context, _ in states]) + (
            self.weights.identifiers * self.identifiers.final([word for _, word in states])
        )


@dataclass
class _Document:
    texts: list[str]
    counts: DocumentCounts
    names: Counter[bytes]


class ProjectCorpus:
    """What fusion knows of the project: the open documents and the workspace folders' files, counted in one
    model's token ids.

    Open documents change edit by edit (`update_document`); workspace files
    are added as they are read (`add_file`) and become visible to the n-gram
    model at `commit`. Call the document methods and `fusion` from one
    thread (the one that runs generation); files may be added from another.
    """

    def __init__(self, tokenizer: Tokenizer, *, order: int = 5) -> None:
        """Count in the token ids of ``tokenizer`` (the scoring model's own: `cpc.engine.Engine.tokenizer`)."""
        self.tokenizer = tokenizer
        self.vocabulary_size = len(tokenizer.vocab)
        self.order = order
        self.shapes = TokenShapes.of(tokenizer.vocab)
        self.names = NameCounts(self.shapes, base=language_names())
        self.files = FileCounts(order)
        self.documents: dict[str, _Document] = {}
        self._file_names: dict[str, Counter[bytes]] = {}
        self._file_bytes: dict[str, int] = {}
        self._lock = threading.RLock()

    def add_file(self, path: str, text: str) -> None:
        """Count a workspace file (again, if it was counted before)."""
        data = text.encode("utf-8", errors="replace")
        tokens = [token for line in self._tokenize(_lines(text)) for token in line]
        names = names_in(data)
        with self._lock:
            self.remove_file(path)
            self.files.add(path, tokens)
            self._file_names[path] = names
            self._file_bytes[path] = len(data)
            self.names.add(names)

    def remove_file(self, path: str) -> None:
        with self._lock:
            self.files.remove(path)
            self.names.remove(self._file_names.pop(path, Counter()))
            self._file_bytes.pop(path, None)

    def commit(self) -> None:
        """Make the files added so far visible to the n-gram model (seconds for tens of megabytes).

        The names are put in order here too, so that no request pays for sorting a corpus's worth.
        """
        self.files.commit()
        with self.names.lock:
            self.names.sort()

    def update_document(self, key: str, text: str) -> None:
        """An open document's new text: only the lines that changed are tokenized and counted again."""
        lines = _lines(text)
        document = self.documents.get(key)
        if document is None:
            document = self.documents[key] = _Document([], DocumentCounts(self.order), Counter())
        old = document.texts
        head, tail = unchanged_ends(old, lines)
        removed = old[head : len(old) - tail]
        added = lines[head : len(lines) - tail]
        kept = document.counts.lines
        document.counts.update(kept[:head] + self._tokenize(added) + kept[len(kept) - tail :])
        document.texts = lines
        gone = names_in("".join(removed).encode("utf-8", errors="replace"))
        new = names_in("".join(added).encode("utf-8", errors="replace"))
        document.names.subtract(gone)
        document.names.update(new)
        for name in gone:  # only these can have fallen to 0: the counts stay positive without a copy of them all
            if document.names[name] <= 0:
                del document.names[name]
        self.names.remove(gone)
        self.names.add(new)

    def close_document(self, key: str) -> None:
        document = self.documents.pop(key, None)
        if document is not None:
            self.names.remove(document.names)

    def fusion(self, current: str | None, weights: FusionWeights = FusionWeights(), cursor_line: int | None = None) -> Fusion:
        """The fusion models for a request in document ``current`` with the cursor on ``cursor_line``.

        The cursor's line is left out of the counts: the half-typed line is
        not evidence of what the corpus holds.
        """
        document = self.documents.get(current) if current is not None else None
        others = [d.counts for key, d in self.documents.items() if key != current]
        scopes = [
            (WithoutLine(document.counts, cursor_line) if document else Merged([]), SCOPE_WEIGHTS[0]),
            (Merged(others), SCOPE_WEIGHTS[1]),
            (self.files, SCOPE_WEIGHTS[2]),
        ]
        left_out: Counter[bytes] = Counter()
        if document is not None and cursor_line is not None and 0 <= cursor_line < len(document.texts):
            left_out = names_in(document.texts[cursor_line].encode("utf-8", errors="replace"))
        pull = self.pull(current)
        return Fusion(
            NGramModel(scopes, self.vocabulary_size, self.order),
            IdentifierModel(self.names, left_out, syntax=Syntax.of(current)),
            FusionWeights(ngram=weights.ngram * pull, identifiers=weights.identifiers * pull),
        )

    def pull(self, current: str | None) -> float:
        """How much of its weights fusion uses in document ``current``, from 0 to 1: the evidence behind it.

        The product of how much text it has read, ``min(1, tokens / FULL_PULL_TOKENS)``, and how well its
        names foresaw the document's own, ``min(1, foreseen / FORESEEN_FULL)``, where ``foreseen`` is the
        share of the document's name occurrences (the language's own aside) that were known when they
        came, from the corpus or from earlier in the document (so every name the corpus does not
        hold misses once), with `FORESEEN_PRIOR` more counted as known; 0 under `MIN_PULL`. A lone short file gets none of it: its names are new, and the names of the rest
        of its project, unseen, would be penalised as inventions.

        >>> from cpc.tokenizer import TiktokenTokenizer
        >>> corpus = ProjectCorpus(TiktokenTokenizer())
        >>> corpus.update_document("a.py", "def area(radius):\\n    return 3.14 * radius * radius\\n")
        >>> corpus.pull("a.py")
        0.0
        >>> corpus.add_file("lib.py", "def area(radius):\\n    return radius\\n" * 300)
        >>> corpus.pull("a.py")
        1.0
        """
        with self._lock:
            read = self.files.tokens + sum(document.counts.tokens for document in self.documents.values())
            document = self.documents.get(current) if current is not None else None
            foreseen = 1.0 if document is None else self._foreseen(document.names)
        pull = min(1.0, read / FULL_PULL_TOKENS) * min(1.0, foreseen / FORESEEN_FULL)
        return pull if pull >= MIN_PULL else 0.0

    def _foreseen(self, names: Counter[bytes]) -> float:
        """The share of these occurrences whose name was known when it came, `FORESEEN_PRIOR` more included."""
        counts, base = self.names.counts, self.names.base
        total = new = 0
        for name, count in names.items():
            if name not in base:
                total += count
                new += counts.get(name, 0) <= count  # no occurrence elsewhere: its first one here was new
        return 1.0 - new / (total + FORESEEN_PRIOR)

    def stats(self) -> dict:
        """Sizes for ``cpc/status``: files, bytes, tokens, open documents, distinct names (the language's own
        included, `cpc.identifiers.language_names`), memory."""
        document_tokens = sum(d.counts.tokens for d in self.documents.values())
        return {
            "files": self.files.files,
            "bytes": sum(self._file_bytes.values()),
            "tokens": self.files.tokens + document_tokens,
            "documents": len(self.documents),
            "identifiers": len(self.names),
            "memory_bytes": self.files.nbytes + 120 * sum(
                len(d.counts.counts) for d in self.documents.values()
            ),
        }

    def _tokenize(self, lines: Sequence[str]) -> list[Line]:
        encoded = self.tokenizer.encode_many([line.encode("utf-8", errors="replace") for line in lines])
        return [tuple(tokens) for tokens in encoded]


def _lines(text: str) -> list[str]:
    """The lines of ``text``, each with its ``\\n`` (the unit the counts are kept in); a line longer than
    `LONG_LINE` is counted as an empty one.

    >>> _lines("a = 1\\n" + "x" * 2000 + "\\nb")
    ['a = 1\\n', '\\n', 'b']
    """
    lines = [line if len(line) <= LONG_LINE else "" for line in text.split("\n")]
    last = lines.pop()
    counted = [line + "\n" for line in lines]
    if text and not text.endswith("\n"):  # a last line without its line break, kept even when not counted
        counted.append(last)
    return counted
