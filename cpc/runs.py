"""A line decoded greedily on the model's side, followed token by token: each kept only where it is the choice
a step of this process's decoding would make.

A model on a server pays a round trip per generated token when it is asked
step by step. A *run* asks once: the server decodes greedily and streams
each token with its position's likeliest tokens
(`cpc.lm.LanguageModel.greedy_run`). The server's sampler is not trusted
to be this process's choice: fusion adds the project's scores to the
model's, and control tokens are never chosen. So each streamed position is
decided here from what the server said of it (`cpc.lm.known_choice`): the
token is kept when it is the choice a whole row would give; a different
choice that the known tokens decide is kept and ends the run (the server
went on from another token); a position they cannot decide ends the run
too, and a plain step decides it. The text is the one step-by-step
decoding gives.

    >>> import numpy as np
    >>> from cpc.lm import RunStep
    >>> class Server:  # decodes tokens 5, 6, 7, each reported with itself first and token 0 second
    ...     def greedy_run(self, state, length, *, top_k, stop_at_line_end):
    ...         for token in (5, 6, 7)[:length]:
    ...             yield RunStep(token, np.array([token, 0]), np.log([0.9, 0.05]))
    >>> banned = np.zeros(8, bool); banned[6] = True  # 6 is a control token: never chosen
    >>> run = FollowedRun(Server(), (1,), 3, fused=False, stop_at_line_end=True)
    >>> run.next_pick(banned)[0], run.next_pick(banned)[0], run.open  # 6 is replaced by 0, which ends the run
    (5, 0, False)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from cpc.lm import LanguageModel, known_choice

if TYPE_CHECKING:
    from cpc.fusion import Fusion, FusionState

__all__ = ["FUSED_TOP_K", "FollowedRun"]

FUSED_TOP_K = 16
"""Likeliest tokens asked per position of a run when fusion scores the choice. Unfused, the likeliest allowed
token decides, and one is asked (as a plain greedy step asks). Fused, every token outside the top K may score
at most the K-th's log-probability plus its fusion score: the wider K, the more positions the known tokens
decide (docs/team-server.md, *A line in one request*)."""


class FollowedRun:
    """One stream's greedy run on the model's side, taken token by token while each is this process's choice."""

    def __init__(self, lm: LanguageModel, state: Sequence[int], length: int, *, fused: bool,
                 stop_at_line_end: bool) -> None:
        self._steps = lm.greedy_run(state, length, top_k=FUSED_TOP_K if fused else 1,
                                    stop_at_line_end=stop_at_line_end)
        self.open = True
        """False once the run has ended: every later choice is a plain step's (or a new run's)."""
        self.kept = 0
        """Tokens of the run taken."""

    def next_pick(self, banned: np.ndarray, fusion: Fusion | None = None,
                  fusion_state: FusionState | None = None) -> tuple[int, float, FusionState | None] | None:
        """The choice at the run's next position: the token, its score (with fusion, the fused score) and the
        fusion state it leads to; None when the run has ended or its known tokens do not decide (it is closed)."""
        step = next(self._steps, None) if self.open else None
        if step is None:
            self.close()
            return None
        next_states = None
        if fusion is None:
            choice = known_choice(step.ids, step.logprobs, banned)
        else:
            scores, next_states = fusion.advance([fusion_state])
            choice = known_choice(step.ids, step.logprobs, banned, scores[0])
        if choice is None:
            self.close()
            return None
        token, score = choice
        if token == step.token:
            self.kept += 1
        else:
            self.close()  # the server went on from its own token
        return token, score, None if next_states is None else next_states[0, token]

    def close(self) -> None:
        """Stop following: the model's side stops decoding."""
        if self.open:
            self.open = False
            self._steps.close()
