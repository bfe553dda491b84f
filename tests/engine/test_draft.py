"""Speculative drafts: the lookup proposes what the text says, and no draft ever changes a suggestion.

Generation with drafts must give the texts of generation without them, for
any draft: right, wrong, partly right, past the line's end, past the token
budget. That is checked exactly over `Memo`, a model that answers each state
with the row of its first evaluation, so both runs see the same numbers
whatever the batch (llama.cpp's own batch noise is `test_llama`'s business);
`cpc.llama.LlamaLM.check_drafts` itself is checked against lone evaluations, and for
what it leaves in the KV cache.
"""

from __future__ import annotations

import importlib
import random
from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import cpc.generate
from cpc.draft import Draft, DraftParameters, Lookup
from cpc.fusion import ProjectCorpus
from cpc.generate import Options, generate
from cpc.llama import LlamaLM
from cpc.lm import LanguageModel, State
from harness.threads import MODEL_THREADS
from tests.support.strategies import examples

TEXTWRAP = open(importlib.import_module("textwrap").__file__, encoding="utf-8").read()


def _brute_force(state: Sequence[int], parameters: DraftParameters, limit: int) -> tuple[int, ...]:
    """The longest ending (min_match..max_match) seen earlier, its latest occurrence, what followed."""
    state = list(state)
    for length in range(parameters.max_match, parameters.min_match - 1, -1):
        if length >= len(state):
            continue
        ending = state[-length:]
        for start in range(len(state) - length - 1, -1, -1):
            if state[start : start + length] == ending:
                follow = start + length
                return tuple(state[follow : follow + min(limit, parameters.max_tokens)])
    return ()


@settings(max_examples=examples(200), deadline=None)
@given(
    st.lists(st.lists(st.integers(0, 5), min_size=1, max_size=40), min_size=1, max_size=4),
    st.integers(1, 3), st.integers(0, 3), st.integers(0, 9),
)
@example([[0], [0, 0], [0, 1, 0]], 1, 0, 1).via("a new sequence that starts and ends like the last one")
def test_the_lookup_proposes_what_followed_the_longest_latest_match(growth, min_match, extra, limit):
    """Over a state that grows (and sometimes starts anew), each proposal is the brute force's."""
    parameters = DraftParameters(max_tokens=6, min_match=min_match, max_match=min_match + extra)
    lookup = Lookup(parameters)
    state: list[int] = []
    for number, added in enumerate(growth):
        state = added if number == 2 else state + added  # the third state is another sequence
        assert lookup.propose(tuple(state), limit).tokens == _brute_force(state, parameters, limit)


class Memo(LanguageModel):
    """A model answering every state with the row of its first evaluation: any batch gives the same numbers."""

    checks_drafts_cheaply = True

    def __init__(self, inner: LanguageModel) -> None:
        self.inner, self.vocab, self.n_ctx, self.bos, self.stats = inner, inner.vocab, inner.n_ctx, inner.bos, inner.stats
        self.rows: dict[State, np.ndarray] = {}

    def next_logprobs(self, states, *, greedy=False) -> np.ndarray:
        missing = list(dict.fromkeys(tuple(s) for s in states if tuple(s) not in self.rows))
        if missing:
            self.rows.update(zip(missing, self.inner.next_logprobs(missing)))
        else:
            self.stats.calls += 1
        return np.stack([self.rows[tuple(s)] for s in states])


class RandomDrafts:
    """Drafts of every kind: the right tokens (what a plain run chose next), wrong ones, partly right,
    and too many (past the line's end and the token budget)."""

    def __init__(self, answers: list[State], prompt_length: int, seed: int, vocabulary: int) -> None:
        self.answers, self.prompt_length = answers, prompt_length
        self.random, self.vocabulary = random.Random(seed), vocabulary

    def propose(self, state: State, limit: int | None = None) -> Draft:
        so_far = tuple(state[self.prompt_length :])
        right = next((answer[len(so_far) :] for answer in self.answers if answer[: len(so_far)] == so_far), ())
        kind = self.random.choice(["right", "wrong", "partly", "long", "none"])
        wrong = tuple(self.random.randrange(self.vocabulary) for _ in range(self.random.randint(1, 6)))
        cut = self.random.randint(0, len(right))
        tokens = {"right": right, "wrong": wrong, "partly": right[:cut] + wrong, "long": right + wrong, "none": ()}[kind]
        return Draft(tokens, match=1)


CURSORS = [  # in textwrap.py: mid-word, with a suffix, a signature, a line that ends in a colon
    ("self.width = wid", ""),
    ("        return self._wrap_chun", "ks)\n"),
    ("def wrap(text, width=70, **kw", ""),
    ("            if self.drop_whitespace and cur_line and cur_line[-1].strip() == '':", ""),
]


@pytest.fixture(scope="module")
def smollm2_memo():
    from cpc.engine import Engine

    engine = Engine.load("smollm2", threads=MODEL_THREADS)
    return replace(engine, lm=Memo(engine.lm))


@settings(max_examples=examples(8), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(0, 3), st.sampled_from(["naive", "heal", "cpc"]), st.booleans(), st.booleans(), st.integers(0, 2**32 - 1))
@example(0, "cpc", False, True, 0)
@example(3, "naive", True, False, 1)
def test_drafts_of_any_kind_never_change_the_text(smollm2_memo, monkeypatch, cursor, mode, multiline, fused, seed):
    engine = smollm2_memo
    marker, suffix = CURSORS[cursor]
    prefix = TEXTWRAP[: TEXTWRAP.index(marker) + len(marker)]
    fusion = None
    if fused:
        corpus = ProjectCorpus(engine.tokenizer)
        corpus.update_document("textwrap.py", prefix + suffix)
        fusion = corpus.fusion("textwrap.py", cursor_line=prefix.count("\n"))
    options = Options(mode=mode, multiline=multiline, max_tokens=12, n=2, drafts=DraftParameters(max_tokens=0))
    plain = generate(engine, prefix + suffix, len(prefix), options, fusion=fusion)
    assert plain.drafted == 0
    answers = [completion.tokens for completion in plain.completions]
    drafts = RandomDrafts(answers, plain.prompt_tokens, seed, len(engine.vocab.pieces))
    monkeypatch.setattr(cpc.generate, "Lookup", lambda parameters: drafts)
    drafted = generate(engine, prefix + suffix, len(prefix), replace(options, drafts=DraftParameters(cost_aware=False)),
                       fusion=fusion)
    assert [c.text for c in drafted.completions] == [c.text for c in plain.completions]
    assert [c.tokens for c in drafted.completions] == [c.tokens for c in plain.completions]
    np.testing.assert_allclose([c.logprob for c in drafted.completions], [c.logprob for c in plain.completions], atol=1e-4)


def test_right_drafts_save_model_calls(smollm2_memo, monkeypatch):
    """A right draft of the whole answer (every row's call taken, however close): the answer comes in one
    call after its first token."""
    engine = smollm2_memo
    prefix = TEXTWRAP[: TEXTWRAP.index("def wrap(text, width=70, **kw") + len("def wrap(text, width=70, **kw")]
    options = Options(mode="naive", multiline=True, max_tokens=12, drafts=DraftParameters(max_tokens=0))
    plain = generate(engine, prefix, options=options)
    answer = plain.completions[0].tokens
    assert len(answer) >= 6

    class Right:
        def propose(self, state, limit=None):
            return Draft(answer[len(state) - plain.prompt_tokens :][:limit], match=1)

    monkeypatch.setattr(cpc.generate, "Lookup", lambda parameters: Right())
    drafts = DraftParameters(max_tokens=16, cost_aware=False, clear_margin=0.0)
    drafted = generate(engine, prefix, options=replace(options, drafts=drafts))
    assert drafted.completions[0].text == plain.completions[0].text
    # the start's call may come from a cache the first run filled: at most one call after it
    assert drafted.lm_calls <= plain.lm_calls - (len(answer) - 2), "one call for all the tokens after the first"
    assert drafted.accepted == len(answer) - 2


def test_llama_checks_a_draft_in_one_decode_and_keeps_only_what_was_accepted(smollm2_memo):
    """`LlamaLM.check_drafts`: one decode for a state and its draft, the rows those states have alone (within
    llama.cpp's batch noise), no row asked past the walk's end, the KV cache cut back to the accepted tokens,
    and the decode's time kept for `check_cost`."""
    engine = smollm2_memo
    lm = LlamaLM(engine.gguf, engine.vocab, n_seq=2, n_ctx=256, threads=MODEL_THREADS)
    tokens = lm.bos + tuple(engine.tokenizer.encode(TEXTWRAP[:600].encode()))
    state, draft = tokens[:40], tokens[40:46]
    lm.prefill(state[:-1])
    asked: list[int] = []

    def choose(number: int, position: int, scores: np.ndarray) -> int:
        asked.append(position)
        row = scores - np.logaddexp.reduce(scores.astype(np.float64))
        alone = LlamaLM(engine.gguf, engine.vocab, n_seq=1, n_ctx=256, threads=MODEL_THREADS).next_logprobs([state + draft[:position]])[0]
        # llama.cpp's batch noise on SmolLM2: at most 2.7e-3 in probability across thread counts 1, 2 and 4 and
        # decode splits (benchmarks/probe_batch_noise.py); 1e-2 still catches a row of the wrong state.
        np.testing.assert_allclose(np.exp(row), np.exp(alone.astype(np.float64)), rtol=0, atol=1e-2)
        return draft[position] if position < 3 else -1

    decodes = lm.stats.decodes
    chosen = lm.check_drafts([state], [draft], choose)
    assert chosen == [draft[:3] + (-1,)] and asked == [0, 1, 2, 3]
    assert lm.stats.decodes == decodes + 1, "the state's last token and the draft in one decode"
    assert lm.cached_length(state + draft) == len(state) + 3, "the cells past the accepted tokens are dropped"
    assert lm.check_cost(len(draft) + 1) > 0 and lm.check_cost(3) is None
    before = lm.stats.tokens
    lm.next_logprobs([state + draft[:3] + (tokens[46],)])
    assert lm.stats.tokens - before == 1, "the next step reads one token"
