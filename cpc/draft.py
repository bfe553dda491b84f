"""Speculative drafts from the text the model reads (prompt lookup decoding), checked only where they pay.

Code repeats itself: a name, an argument list, the shape of the line above.
When the last tokens generated also occur earlier in the model's state (the
window before the cursor, the text after it in a FIM prompt, or what was
generated already), the tokens that followed them there are a cheap guess
at what comes next (Saxena 2023, "prompt lookup decoding"; the draft of
speculative decoding, Leviathan et al. 2023, with no draft model).

- `Lookup` finds the longest such match (up to ``max_match`` tokens) and
  proposes what followed its latest occurrence.
- `DraftPolicy` decides how much of it to check. Each drafted token costs
  its row of the model's output layer whether it is kept or not (262,144
  logits a row for Gemma 3: most of a step on a CPU, little on a GPU), so
  it weighs the tokens a draft is expected to keep (how often drafts of
  that match length were kept so far) against what checking its rows
  costs on this machine (`cpc.lm.LanguageModel.check_cost`, measured as
  the model runs), and checks a draft only where the tokens per
  millisecond beat a plain step's.

`cpc.generate` checks a draft in one model call
(`cpc.lm.LanguageModel.check_drafts`) and keeps only the tokens greedy
decoding chooses there too, plus the model's own next token. It does so
for a model whose rows are cheap (`LanguageModel.checks_drafts_cheaply`).
No backend is that yet, as measured: on this project's 2-core CPU and on
an H200, drafts saved model calls but no time (docs/benchmarks.md,
docs/gpu.md).

    >>> lookup = Lookup(DraftParameters(max_tokens=4))
    >>> lookup.propose((5, 1, 2, 3, 4, 9, 1, 2))  # "1 2" was followed by "3 4 9 1"
    Draft(tokens=(3, 4, 9, 1), match=2)
    >>> lookup.propose((5, 1, 2, 3, 4, 9, 7))  # 7 was never seen: no draft
    Draft(tokens=(), match=0)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

__all__ = ["Draft", "DraftParameters", "DraftPolicy", "Lookup", "kept"]


@dataclass(frozen=True)
class DraftParameters:
    """Where drafts come from and how long they may be.

    ``max_tokens = 0`` turns drafts off. With ``cost_aware`` off, every
    draft found is checked whole (tests use it to check drafts of any kind).
    """

    max_tokens: int = 7
    """The longest draft checked: 8 rows, the most a CPU step's time buys (benchmarks/bench_drafts.py)."""
    min_match: int = 1
    """Tokens the end of the state must share with an earlier place for that place to be followed."""
    max_match: int = 6
    """Longer matches are not looked for: past 6 tokens, drafts are kept about as often."""
    cost_aware: bool = True
    clear_margin: float = 0.5
    """A row of a draft's check decides only where its choice leads the runner-up by this many nats;
    a closer call goes to a plain step. llama.cpp's numbers move with the batch they are computed in
    (on the default model, the gap between the two likeliest tokens moved by up to 0.46 nats between
    batch compositions: benchmarks/probe_batch_noise.py), and a plain step is what decoding without
    drafts would have made."""

    def __post_init__(self) -> None:
        if self.max_tokens < 0 or not 1 <= self.min_match <= self.max_match:
            raise ValueError("draft lengths must be 0 or more, and 1 <= min_match <= max_match")


class Draft(NamedTuple):
    tokens: tuple[int, ...]
    match: int
    """How many tokens at the end of the state matched where the draft comes from (0: no draft)."""


NO_DRAFT = Draft((), 0)


def kept(draft: Sequence[int], chosen: Sequence[int]) -> int:
    """How many of the draft's tokens the choices made along it took.

    >>> kept((5, 6, 7), [5, 6, 9]), kept((5, 6), [5, 6, 1]), kept((5, 6), [5])
    (2, 2, 1)
    """
    return next((i for i, (token, choice) in enumerate(zip(draft, chosen)) if token != choice), min(len(draft), len(chosen)))

class Lookup:
    """Proposes drafts for a growing state: what followed the latest earlier occurrence of its longest ending.

    One `Lookup` follows one sequence of tokens as it grows (a generation's
    stream): each call converts only the tokens added since the last one.
    A search is a few vectorised passes over the state (about 1,500 tokens).
    """

    def __init__(self, parameters: DraftParameters = DraftParameters()) -> None:
        self.parameters = parameters
        self._tokens = np.empty(0, dtype=np.int64)
        self._state: tuple[int, ...] = ()

    def propose(self, state: Sequence[int], limit: int | None = None) -> Draft:
        """The draft for ``state``: what followed the longest match of its last tokens (``min_match``
        to ``max_match`` of them, the latest occurrence on a tie), at most ``limit`` tokens.

        >>> Lookup().propose((1, 2, 3, 1, 2), limit=1).tokens
        (3,)
        """
        parameters = self.parameters
        wanted = parameters.max_tokens if limit is None else min(limit, parameters.max_tokens)
        tokens = self._follow(state)
        end = len(tokens)
        if wanted <= 0 or end <= parameters.min_match:
            return NO_DRAFT
        # Candidates: earlier places i whose token is the state's last one; keep those whose previous
        # tokens go on matching, one offset at a time.
        places = np.flatnonzero(tokens[: end - 1] == tokens[end - 1])
        matched, length = places, 1
        while length < parameters.max_match and len(places):
            places = places[places >= length]
            places = places[tokens[places - length] == tokens[end - 1 - length]]
            if len(places):
                matched, length = places, length + 1
        if length < parameters.min_match or not len(matched):
            return NO_DRAFT
        start = int(matched[-1]) + 1
        return Draft(tuple(tokens[start : start + wanted].tolist()), length)

    def _follow(self, state: Sequence[int]) -> np.ndarray:
        """The state as an array, converting only what it adds to the state of the last call."""
        state = tuple(state)
        known = len(self._state)
        if state[:known] == self._state:
            added = np.asarray(state[known:], dtype=np.int64)
        else:
            known, added = 0, np.asarray(state, dtype=np.int64)
        if known + len(added) > len(self._tokens):
            grown = np.empty(max(2 * len(self._tokens), known + len(added) + 64), dtype=np.int64)
            grown[:known] = self._tokens[:known]
            self._tokens = grown
        self._tokens[known : known + len(added)] = added
        self._state = state
        return self._tokens[: len(state)]


PRIOR_KEPT = {1: (0.33, 0.55), 2: (0.6, 0.6), 3: (0.5, 0.75), 4: (0.6, 0.9), 5: (0.7, 0.9), 6: (0.85, 0.9)}
"""By match length: how often a draft's first token was kept, and each next one after a kept one.
Measured over 60 standard-library cursors with short prompts (``benchmarks/bench_drafts.py
--acceptance``); `DraftPolicy` starts from them and learns the machine's own."""

PRIOR_WEIGHT = 10.0
"""The priors count as this many drafts seen."""

GAIN_MARGIN = 1.25
"""A draft is checked when it is expected to give this much more text per millisecond than a plain step:
a check that only breaks even still moves llama.cpp's numbers (`DraftParameters.clear_margin`)."""

CHECKED_LENGTHS = (1, 3, 7)
"""Draft lengths considered: 2, 4 and 8 rows, what batched kernels take best (on a CPU the repacked
Q4_K kernels take rows four at a time: 4 rows cost 2.4 steps, 5 rows 3.7; benchmarks/bench_drafts.py)."""


class DraftPolicy:
    """How much of a draft to check: the length with the most tokens expected per millisecond.

    A check of ``L`` drafted tokens costs ``cost(L + 1)`` (one decode, a row
    per token) and gives ``1 + E[kept]`` tokens, where ``E[kept] = p1 (1 +
    pn + ... + pn^(L-1))`` from how often drafts of this match length had
    their first token (``p1``) and each next token (``pn``) kept. A plain
    step gives one token for ``cost(1)``. Rows never timed are assumed
    cheap enough to try once (``cost(1)`` and half a step per extra row),
    so each length the policy considers gets measured.

    On this project's 2-core test machine (ms per decode of 1 to 8 rows; the
    repacked Q4_K kernels take rows four at a time):

    >>> cpu = {1: 13.1, 2: 24.9, 3: 29.4, 4: 31.5, 5: 48.0, 6: 53.9, 7: 58.3, 8: 47.4}.get
    >>> policy = DraftPolicy()
    >>> policy.length(Draft((1,) * 7, match=1), cpu), policy.length(Draft((1,) * 7, match=6), cpu)
    (0, 7)
    """

    def __init__(self, parameters: DraftParameters = DraftParameters()) -> None:
        self.parameters = parameters
        self._first = {match: [p * PRIOR_WEIGHT, PRIOR_WEIGHT] for match, (p, _) in PRIOR_KEPT.items()}
        self._next = {match: [p * PRIOR_WEIGHT, PRIOR_WEIGHT] for match, (_, p) in PRIOR_KEPT.items()}

    def length(self, draft: Draft, cost: Callable[[int], float | None]) -> int:
        """How many of ``draft``'s tokens to check, with ``cost(rows)`` the milliseconds of a decode that
        reads that many rows (None where not measured yet)."""
        if not draft.tokens or not self.parameters.cost_aware:
            return len(draft.tokens)
        step = cost(1)
        if step is None:
            return 0  # not one step timed yet
        first, following = self._rates(draft.match)
        best, best_rate = 0, GAIN_MARGIN / step
        for length in CHECKED_LENGTHS:
            if length > len(draft.tokens):
                break
            kept = first * (1 - following**length) / (1 - following)
            measured = cost(length + 1)
            rate = (1 + kept) / (measured if measured is not None else step * (1 + 0.5 * length))
            if rate > best_rate:
                best, best_rate = length, rate
        return best

    def record(self, match: int, checked: int, kept: int) -> None:
        """What a check of ``checked`` tokens of a draft found with a match of ``match`` tokens kept."""
        if not checked:
            return
        bucket = min(match, max(PRIOR_KEPT))
        first, following = self._first[bucket], self._next[bucket]
        first[0] += kept >= 1
        first[1] += 1
        following[0] += max(0, kept - 1)
        following[1] += max(0, min(kept + 1, checked) - 1)

    def _rates(self, match: int) -> tuple[float, float]:
        bucket = min(max(match, min(PRIOR_KEPT)), max(PRIOR_KEPT))
        (first, seen), (following, reached) = self._first[bucket], self._next[bucket]
        return first / seen, min(following / reached, 0.99)
