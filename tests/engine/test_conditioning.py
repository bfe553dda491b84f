"""Character prefix conditioning with the real models: covering paths, weights, next byte."""

from __future__ import annotations

import math

import pytest

from cpc.conditioning import max_tail_bytes

TEXTS = [
    "import numpy as np\nx = np.zer",
    "def load_config(path):\n    with open(pa",
    "名前 = '日本",  # CJK inside a word
    "emoji = '😀😀",  # a 4-byte character, twice
    "    return resu",
]


@pytest.mark.parametrize("text", TEXTS)
def test_paths_cover_exactly_the_typed_text(engine, text):
    result = engine.conditioner.condition(text)
    data = text.encode()
    prompt_text = engine.vocab.decode(result.prompt)
    assert prompt_text + result.tail == data
    assert result.paths, "every typed text has at least one covering path"
    for path in result.paths[:20]:
        covered = engine.vocab.decode(path.tokens[len(result.prompt) :])
        assert covered.startswith(result.tail)
        assert covered[len(result.tail) :] == path.overhang
        # canonical: the path's own text re-encodes to the path
        assert tuple(engine.tokenizer.encode(covered)) == path.tokens[len(result.prompt) :]
    logprobs = [p.logprob for p in result.paths]
    assert logprobs == sorted(logprobs, reverse=True)
    assert result.logprob >= logprobs[0]


LONG_LAST_CHUNKS = [
    "key = '" + "Qm" * 1500,  # one pre-token chunk of 3,000 letters: a hash, base64, minified code
    "def f():\n" + " " * 3000,  # a run of spaces
    "s = '" + "😀" * 2000,  # emoji: more tokens than the context has room for after the window
]


@pytest.mark.parametrize("text", LONG_LAST_CHUNKS, ids=["letters", "spaces", "emoji"])
def test_a_long_last_chunk_is_read_as_a_bounded_tail(engine, text):
    """The beam reads the tail byte by byte: a chunk of thousands of characters took tens of seconds a key
    (and the emoji more context than there is). The tail keeps room for two of the longest tokens, and its
    start moves on with the keys, never back: a key's tokens are bounded by the tail's bytes, not the chunk's."""
    result = engine.conditioner.condition(text)
    # its start is the token boundary at or before the bound: up to a token's bytes more
    assert len(result.tail) < max_tail_bytes(engine.tokenizer) + engine.vocab.longest
    assert text.encode().endswith(engine.vocab.decode(result.prompt) + result.tail)  # the window's end, read once
    assert result.paths
    tokens = engine.lm.stats.tokens
    grown = engine.conditioner.condition(text + text[-1])
    assert grown.prompt[: len(result.prompt)] == result.prompt
    assert engine.lm.stats.tokens - tokens <= 2 * len(result.tail), engine.lm.stats.tokens - tokens


SENTENCES_WITHOUT_SPACES = [
    "# 这个函数读取配置文件并返回一个字典其中包含所有的设置项如果文件不存",  # Chinese: one pre-token chunk
    "# この関数は設定ファイルを読み込んで辞書を返しますファイルがなけ",  # Japanese
]


@pytest.mark.parametrize("text", SENTENCES_WITHOUT_SPACES, ids=["chinese", "japanese"])
def test_a_sentence_written_without_spaces_is_read_from_its_last_words(engine, text):
    """A pre-token chunk is a whole sentence in a script without spaces: the beam read up to `max_tail_bytes`
    of it, a model state at nearly every character. The tail holds what three tokens spell back from the
    cursor (`cpc.conditioning.tokens_reach`), and the paths still cover it."""
    result = engine.conditioner.condition(text)
    assert 0 < len(result.tail) < len(text.encode()) // 3  # the whole chunk before, up to max_tail_bytes
    assert engine.vocab.decode(result.prompt).endswith(text.encode()[: -len(result.tail)])
    assert result.paths and result.paths[0].tokens[: len(result.prompt)] == result.prompt


def test_a_byte_the_tokenizer_cannot_spell_is_read_once(engine):
    """SmolLM2's tokenizer has no token for the byte 0x04 and drops it: the
    prompt and the tail still read every other byte exactly once."""
    text = "x = '\x04' + self.userNa"
    result = engine.conditioner.condition(text)
    spelled = engine.vocab.decode(engine.tokenizer.encode(text.encode()))
    assert engine.vocab.decode(result.prompt) + result.tail == spelled
    assert result.tail.endswith(b"userNa") and result.paths


def test_the_model_completes_a_word_it_knows(engine):
    result = engine.conditioner.condition("import numpy as np\nx = np.zer")
    best = engine.vocab.decode(result.paths[0].tokens[len(result.prompt) :])
    assert best.endswith(b"zeros")


def test_one_more_character_reuses_model_and_beam(engine):
    conditioner = engine.conditioner
    text = "def load_config(path):\n    with open(path) as handle:\n        return json.lo"
    conditioner.condition(text)
    tokens, hits = engine.lm.stats.tokens, engine.beam.stats.cache_hits
    conditioner.condition(text + "a")
    assert engine.beam.stats.cache_hits > hits
    assert engine.lm.stats.tokens - tokens <= 4  # a keystroke costs a few tokens, not the prompt


def test_a_request_is_not_covered_by_the_ranking_of_an_earlier_prompt(engine):
    """A typed space starts thousands of tokens, so only the model's best ranked are validated: those after this
    prompt (here `` =``), not those an earlier request with the same tail ranked (after ``for``)."""
    earlier = "    months = [\n        self.monthdayscalendar(year, i)\n        for "
    text = "    self._tabsize = tabsize\n    self._wrapcolumn "
    engine.clear()
    alone = engine.conditioner.condition(text).paths[0].tokens
    engine.clear()
    engine.conditioner.condition(earlier)
    after_another = [path.tokens for path in engine.conditioner.condition(text).paths]
    assert alone in after_another


def test_prompt_is_the_same_while_typing_a_word(engine):
    first = engine.conditioner.condition("result = compute_tot")
    second = engine.conditioner.condition("result = compute_tota")
    assert first.prompt == second.prompt


def test_long_prompts_are_cut_in_stable_blocks(engine):
    text = "".join(f"value_{i} = {i}\n" for i in range(400)) + "total = val"
    first = engine.conditioner.condition(text)
    second = engine.conditioner.condition(text + "u")
    assert len(first.prompt) <= engine.prompt_tokens + 1
    assert first.prompt == second.prompt
    assert math.isfinite(second.logprob)
