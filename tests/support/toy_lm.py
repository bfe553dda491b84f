"""A toy language model whose byte-level distribution can be enumerated exactly.

The one place a fake model is right: the beam's exactness is checked
against a brute-force sum over every tokenization, which only a tiny
vocabulary makes possible. Its next-token distribution depends on the whole
state (seeded by the state's tokens), so no tokenization is special.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache

import numpy as np

from cpc.lm import LanguageModel, LMStats
from cpc.vocab import Vocabulary

# Multi-byte pieces, pieces that end inside a UTF-8 character (b"\xc3"),
# tokens sharing a prefix, and two control tokens: EOS ends the text, PAD
# never produces bytes.
TOY_PIECES = [b"a", b"b", b"ab", b"ba", b"aa", b"abb", b" ", b" a", b"\xc3", b"\xa9", b"\xc3\xa9", b"a\xc3"]


class ToyLM(LanguageModel):
    def __init__(self, seed: int = 0, pieces: Sequence[bytes] = TOY_PIECES, bias: dict[bytes, float] | None = None) -> None:
        """``pieces`` are the text tokens (EOS and PAD follow them); ``bias`` favours some pieces."""
        eos = len(pieces)
        all_pieces = [*pieces, b"", b""]
        special = np.zeros(len(all_pieces), dtype=bool)
        special[[eos, eos + 1]] = True
        self.vocab = Vocabulary("toy", all_pieces, special, eos_ids=frozenset({eos}))
        self.bos = (eos,)
        self.stats = LMStats()
        self.seed = seed
        self.bias = np.zeros(len(all_pieces))
        for piece, value in (bias or {}).items():
            self.bias[list(pieces).index(piece)] = value

    def next_logprobs(self, states: Sequence[Sequence[int]], *, greedy: bool = False) -> np.ndarray:
        self.stats.calls += 1
        self.stats.states += len(states)
        return np.array([self._row(tuple(state)) for state in states])

    @cache
    def _row(self, state: tuple[int, ...]) -> np.ndarray:
        rng = np.random.default_rng([self.seed, *state])
        logits = 1.5 * rng.normal(size=len(self.vocab.pieces)) + self.bias
        return logits - np.logaddexp.reduce(logits)


class BruteForce:
    """Exact byte-level probabilities by summing over every tokenization."""

    def __init__(self, lm: ToyLM) -> None:
        self.lm = lm
        self.text_ids = [i for i, piece in enumerate(lm.vocab.pieces) if piece]

    def probs(self, state: tuple[int, ...]) -> tuple[dict[int, float], float]:
        """Text-token probabilities and P(EOS), renormalised without PAD (as the beam does)."""
        p = np.exp(self.lm._row(state))
        eos = self.lm.bos[0]
        total = p[self.text_ids].sum() + p[eos]
        return {t: p[t] / total for t in self.text_ids}, p[eos] / total

    def prefix(self, state: tuple[int, ...], data: bytes) -> float:
        """P(the text after ``state`` starts with ``data``)."""
        if not data:
            return 1.0
        probs, _ = self.probs(state)
        total = 0.0
        for token, p in probs.items():
            piece = self.lm.vocab.pieces[token]
            if piece.startswith(data):
                total += p
            elif data.startswith(piece):
                total += p * self.prefix((*state, token), data[len(piece) :])
        return total

    def ends(self, state: tuple[int, ...], data: bytes) -> float:
        """P(the text after ``state`` is exactly ``data``, then EOS)."""
        probs, eos = self.probs(state)
        if not data:
            return eos
        return sum(
            p * self.ends((*state, token), data[len(self.lm.vocab.pieces[token]) :])
            for token, p in probs.items()
            if data.startswith(self.lm.vocab.pieces[token])
        )
