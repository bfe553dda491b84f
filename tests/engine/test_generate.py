"""Generation with the real models: the three modes, where a suggestion ends, FIM framing, cancellation."""

from __future__ import annotations

import importlib
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cpc.window import SHORT_BLOCK
from cpc.generate import Cancelled, Options, generate, prompt_frame, warm
from cpc.stops import replaced_after
from tests.support.strategies import code_text, examples

TEXTWRAP = open(importlib.import_module("textwrap").__file__, encoding="utf-8").read()


_WIDTH_AT = TEXTWRAP.index("        if self.width <= 0:") + len("        if self.wid")
WIDTH_TYPED = _WIDTH_AT, TEXTWRAP[:_WIDTH_AT] + TEXTWRAP[_WIDTH_AT + len("th") :]
"""A cursor far into textwrap.py, ``if self.wid| <= 0:``: the word being typed, the rest of its line after it (where
the word's rest followed the cursor, a suggestion would be what is missing before it: nothing)."""


def rereads_the_prefix(engine, prefix: str, completion) -> bool:
    """The completion's tokens decode to typed bytes of the prefix, then the completion."""
    decoded = engine.vocab.decode(completion.tokens)
    return prefix.encode().endswith(completion.typed) and decoded.startswith(completion.typed + completion.text.encode())


@pytest.mark.parametrize("mode", ["naive", "heal", "cpc"])
def test_every_mode_completes_real_code(engine, mode):
    cursor = TEXTWRAP.index("self.width = width") + len("self.wid")
    generation = generate(engine, TEXTWRAP[:cursor], options=Options(mode=mode, max_tokens=8))
    assert generation.mode == mode and generation.lm_calls >= 1
    assert generation.completions, "the model offered something"
    completion = generation.completions[0]
    assert "\n" not in completion.text
    assert rereads_the_prefix(engine, TEXTWRAP[:cursor], completion)


def test_cpc_finishes_a_word_cut_inside_a_token(engine):
    """`self.wid|th`: the canonical tokens of `width` do not end at the cursor."""
    cursor = TEXTWRAP.index("self.width = width") + len("self.wid")
    completion = generate(engine, TEXTWRAP[:cursor], options=Options(max_tokens=6)).completions[0]
    assert completion.text.startswith("th")
    assert completion.typed.endswith(b"wid")


def test_n_alternatives_are_distinct(engine):
    generation = generate(engine, "def load_config(pa", options=Options(n=3, max_tokens=6))
    texts = [c.text for c in generation.completions]
    assert len(texts) >= 2 and len(set(texts)) == len(texts)
    # The first is the byte-level marginal's choice (`cpc.start.by_byte_marginal`); the others come best first.
    rest = [c.logprob for c in generation.completions[1:]]
    assert rest == sorted(rest, reverse=True)


def test_multiline_stops_at_a_dedent(engine):
    prefix = "def add(a, b):\n    total = a + b\n    ret"
    completion = generate(engine, prefix, options=Options(multiline=True, max_tokens=40)).completions[0]
    assert completion.text.startswith("urn")
    for line in completion.text.split("\n")[1:]:
        assert not line.strip() or line.startswith("    "), completion.text


def test_the_text_after_the_cursor_is_not_repeated(engine):
    """A completion that holds the closing bracket after the cursor replaces it (`cpc.stops`); any other ends before it."""
    generation = generate(engine, "print(max(a, b)\n", 14, options=Options(n=3, max_tokens=8))
    for completion in generation.completions:
        replaced = replaced_after(completion.text, ")\n")
        assert replaced == 1 or ")" not in completion.text, completion.text


def test_cancellation_stops_the_request(engine):
    calls = []

    def cancelled() -> bool:
        calls.append(1)
        return len(calls) > 1

    with pytest.raises(Cancelled):
        generate(engine, TEXTWRAP[:2000], options=Options(max_tokens=40), cancelled=cancelled)


def test_work_stops_when_no_text_so_far_is_wanted(engine):
    """`wanted` sees each completion's text as it grows; the same text when it wants them all."""
    cursor = TEXTWRAP.index("self.width = width") + len("self.wid")
    seen = []

    def anything(text: str) -> bool:
        seen.append(text)
        return True

    options = Options(max_tokens=6)
    wanted = generate(engine, TEXTWRAP[:cursor], options=options, wanted=anything).completions[0].text
    assert wanted == generate(engine, TEXTWRAP[:cursor], options=options).completions[0].text
    assert wanted.startswith(seen[-1]) and len(seen) >= 2
    with pytest.raises(Cancelled):  # the user typed `wide`: a suggestion starting `th` is no use
        generate(engine, TEXTWRAP[:cursor], options=options, wanted=lambda text: "e".startswith(text[:1]))


def test_fim_prompt_frames_the_tail_after_fim_middle(engine, monkeypatch):
    """The framing logic, with three of the model's control tokens standing in for FIM tokens
    (neither test model ships FIM tokens; llama.cpp reports none)."""
    assert engine.gguf.fim_tokens() is None
    assert prompt_frame(engine, "rest()") == (engine.lm.bos, ())
    special = [t for t in range(len(engine.vocab)) if engine.vocab.special[t] and t not in engine.vocab.eos_ids]
    fim = tuple(special[-3:])
    monkeypatch.setattr(engine.gguf, "fim_tokens", lambda: fim)
    head, middle = prompt_frame(engine, "    return x\n")
    assert head[-1] == fim[0] and middle[0] == fim[1] and middle[-1] == fim[2]
    assert engine.vocab.decode(middle[1:-1]) == b"    return x\n"
    assert prompt_frame(engine, "") == (engine.lm.bos, ())
    assert prompt_frame(engine, "x", Options(fim=False)) == (engine.lm.bos, ())
    result = engine.conditioner.condition("def f(x):\n    y = x.stri", head=head, middle=middle)
    assert result.prompt[: len(head)] == head and result.prompt[-len(middle) :] == middle
    assert result.tail.endswith(b"stri") and result.paths


@pytest.mark.parametrize("prefix, first_word", [
    ('flags = (True, False, True, False, True, False, True, False, True, False, True, Fa', "lse"),
    ('parts = ["ab", "cd", "ab", "cd", "ab", "cd", "ab", "cd", "ab", "cd", "ab", "c', 'd"'),
])
def test_a_suggestion_that_loops_stops_early(engine, prefix, first_word):
    """Both models continue these loops to the token budget: the suggestion ends in the first round, and
    the model is not asked for the rounds after the fourth."""
    max_tokens = 48
    generation = generate(engine, prefix, options=Options(max_tokens=max_tokens))
    text = generation.completions[0].text
    assert text.startswith(first_word) and len(text) < 16, text
    assert generation.lm_calls < max_tokens - 10


@settings(max_examples=examples(8), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=code_text, cut=st.integers(1, 400))
def test_cpc_completions_never_contradict_what_was_typed(engine, text, cut):
    """Property: the typed tail plus the completion re-reads as a continuation of the prefix."""
    start = TEXTWRAP.index("class TextWrapper")
    prefix = TEXTWRAP[start : start + cut] + text
    for completion in generate(engine, prefix, options=Options(n=2, max_tokens=3)).completions:
        assert rereads_the_prefix(engine, prefix, completion), (prefix[-30:], completion)


def test_paths_far_behind_the_best_do_not_compete_for_the_first_token(engine):
    """A path more than ``lookahead_margin`` nats behind the best is not evaluated (at least ``n`` are)."""
    from cpc.start import Start, contenders

    starts = [Start((1, k), logprob) for k, logprob in enumerate([-0.1, -2.0, -4.2, -9.0])]
    scores = [start.logprob for start in starts]
    assert [s.logprob for s in contenders(starts, scores, 4.0, 1)] == [-0.1, -2.0]
    assert [s.logprob for s in contenders(starts, scores, 4.0, 3)] == [-0.1, -2.0, -4.2]
    assert len(contenders(starts, scores, float("inf"), 1)) == 4
    prefix = "import numpy as np\nx = np.zer"
    evaluated = []
    for margin in (float("inf"), 0.0):
        engine.clear()
        before = engine.lm.stats.states
        result = generate(engine, prefix, options=Options(max_tokens=1, lookahead_margin=margin))
        evaluated.append(engine.lm.stats.states - before)
        assert result.completions[0].text.startswith("o")
    assert evaluated[1] < evaluated[0]


LAZY_CASES = [
    "const { stat } = require('no",
    "function init () {\n  let headers = rawHeader",
    "const colors = {\n    yellow,\n    white,\n    se",
    "    message += ` (attempt",
    "import numpy as np\nx = np.zer",
]


def test_a_covering_path_is_expanded_only_when_the_byte_marginal_needs_it(engine, monkeypatch):
    """The first token comes out as if every covering path were expanded, from fewer model states."""
    lazy, eager = [], []
    for prefix in LAZY_CASES:
        for expanded, runs in ((False, lazy), (True, eager)):
            with monkeypatch.context() as patch:
                if expanded:  # every path looks cached, so every one is expanded up front
                    patch.setattr(engine.beam.snapshots, "known", lambda tokens: True)
                engine.clear()
                before = engine.lm.stats.states
                result = generate(engine, prefix, options=Options(max_tokens=4))
                runs.append((result.completions[0].text, engine.lm.stats.states - before))
    assert [text for text, _ in lazy] == [text for text, _ in eager]
    assert all(a <= b for (_, a), (_, b) in zip(lazy, eager))
    assert sum(states for _, states in lazy) < sum(states for _, states in eager)


@pytest.mark.parametrize("mode", ["naive", "cpc"])
def test_a_cold_request_reads_a_cut_window_and_warm_reads_the_whole(engine, mode):
    """A prompt-time budget cuts the window of a cold request; `warm` reads the whole window, and the
    same request then reads it all, as without a budget."""
    cursor, document = WIDTH_TYPED
    tight = Options(mode=mode, max_tokens=4, fim=False, prompt_budget_ms=1)
    engine.clear()
    cut = generate(engine, document, cursor, options=tight)
    assert cut.cut_short
    assert SHORT_BLOCK <= cut.prompt_tokens - 1 < 2 * SHORT_BLOCK + 8  # the last block or two, and the tail
    assert cut.completions
    typed_on = document[:cursor] + "t" + document[cursor:]
    again = generate(engine, typed_on, cursor + 1, options=tight)
    assert again.cut_short and again.prompt_tokens >= cut.prompt_tokens - 2, "the cut stays put while typing"
    read = warm(engine, document, cursor, tight)
    assert read > cut.prompt_tokens and warm(engine, document, cursor, tight) == 0
    whole = generate(engine, document, cursor, options=tight)
    assert not whole.cut_short
    engine.clear()
    unbudgeted = generate(engine, document, cursor, options=replace(tight, prompt_budget_ms=None))
    assert whole.prompt_tokens == unbudgeted.prompt_tokens and whole.completions


def test_warm_reads_the_beams_root_so_a_keystroke_in_the_word_saves_a_model_step(engine):
    """For cpc, reading ahead also fetches the next-token row where the word at the cursor starts: the
    keystroke's request then makes one model call fewer than after a plain read, with the same text."""
    cursor, document = WIDTH_TYPED
    options = Options(mode="cpc", max_tokens=4, fim=False)
    typed_on = document[:cursor] + "t" + document[cursor:]
    runs = []
    for read_ahead in (replace(options, mode="naive"), options):  # the prompt alone, then with the root
        engine.clear()
        warm(engine, document, cursor, read_ahead)
        runs.append(generate(engine, typed_on, cursor + 1, options=options))
    plain, rooted = runs
    assert rooted.completions[0].text == plain.completions[0].text
    assert rooted.lm_calls == plain.lm_calls - 1


def test_a_short_file_is_read_whole_when_the_budget_reads_it_and_cut_when_it_does_not(engine):
    """Whether a cold window is cut depends on the time the model takes to read it, not on its length."""
    prefix = TEXTWRAP[: TEXTWRAP.index("        if self.width <= 0:") + len("        if self.wid")]
    short = prefix[prefix.index("\n", len(prefix) - 1500) + 1 :]  # whole lines, some 400 tokens
    tokens = len(engine.tokenizer.encode(short.encode()))
    assert 2 * SHORT_BLOCK < tokens <= 512
    engine.clear()
    ample = 2000 * (tokens + 8) / engine.lm.prefill_rate  # twice what the whole window takes to read
    read = generate(engine, short, options=Options(max_tokens=4, prompt_budget_ms=ample))
    assert not read.cut_short and read.completions
    engine.clear()
    cut = generate(engine, short, options=Options(max_tokens=4, prompt_budget_ms=1))
    assert cut.cut_short and cut.prompt_tokens < read.prompt_tokens and cut.completions


def test_past_the_word_budget_the_first_word_comes_early_and_the_line_goes_on(engine):
    cursor = TEXTWRAP.index("self.width = width") + len("self.wid")
    whole = generate(engine, TEXTWRAP[:cursor], options=Options(max_tokens=8)).completions[0].text
    heard: list[list[str]] = []
    budgeted = Options(max_tokens=8, word_budget_ms=0)
    grown = generate(engine, TEXTWRAP[:cursor], options=budgeted, early=heard.append).completions[0].text
    assert whole.startswith("th ") and heard == [["th"]] and grown == whole
    # nobody to hear a first answer: the budget changes nothing
    assert generate(engine, TEXTWRAP[:cursor], options=budgeted).completions[0].text == whole
