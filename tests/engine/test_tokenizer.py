"""The model's tokenizer: a long text encoded against the previous one gives llama.cpp's own tokens."""

from __future__ import annotations

import difflib
import threading

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from cpc.gguf import GGUFModel
from cpc.tokenizer import REUSE_MIN_BYTES, LlamaTokenizer
from tests.support.strategies import code_text, examples

SOURCE = open(difflib.__file__, "rb").read()[: 6 * REUSE_MIN_BYTES]


@pytest.fixture(scope="module", params=["default", "smollm2"])
def tokenizer(request) -> LlamaTokenizer:
    return LlamaTokenizer(GGUFModel.open(request.param, vocab_only=True))


edits = st.lists(
    st.tuples(st.floats(0.5, 1.0), st.integers(0, 12), st.text("abc_ ().\n\t\"'#é🙂0", max_size=12)),
    min_size=1,
    max_size=8,
)


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(edits=edits)
@example(edits=[(1.0, 0, "x"), (1.0, 1, ""), (0.99, 0, "\n\n    "), (0.5, 12, "é")])
def test_keystrokes_encode_as_a_whole_encode(tokenizer, edits):
    """Each edit (where in the text, characters deleted there, text inserted) changes the text; every
    version encodes as llama.cpp encodes it whole, whatever was encoded before."""
    text = SOURCE
    assert tokenizer.encode(text) == tokenizer.gguf.tokenize(text)
    for where, deleted, inserted in edits:
        at = int(where * len(text))
        text = text[:at] + inserted.encode("utf-8") + text[at + deleted :]
        assert tokenizer.encode(text) == tokenizer.gguf.tokenize(text)


def test_long_texts_edited_in_turn_each_reencode_only_their_end(tokenizer, monkeypatch):
    """A keystroke's prompt and another long text encoded between keystrokes keep their own tokens to
    start from: neither is encoded whole again."""
    whole = tokenizer.gguf.tokenize
    texts = [SOURCE[: 2 * REUSE_MIN_BYTES], SOURCE[2 * REUSE_MIN_BYTES : 5 * REUSE_MIN_BYTES]]
    for text in texts:
        tokenizer.encode(text)
    encoded: list[int] = []
    monkeypatch.setattr(tokenizer.gguf, "tokenize", lambda data: encoded.append(len(data)) or whole(data))
    for key in range(3):
        for number, text in enumerate(texts):
            texts[number] = text = text + b"x" * (key + 1)
            assert tokenizer.encode(text) == whole(text)
    assert len(encoded) == 6 and max(encoded) < REUSE_MIN_BYTES


def test_threads_that_tokenize_at_once_each_get_their_own_texts_tokens(tokenizer):
    """A request, the corpus's reading and a model server's first check tokenize at once."""
    gguf = tokenizer.gguf
    texts = [SOURCE[n * 700 : n * 700 + 600 + 50 * n] for n in range(4)]
    expected = [gguf.tokenize(text) for text in texts]
    found: list[list[bool]] = [[] for _ in texts]

    def tokenize(number: int) -> None:
        for _ in range(200):
            found[number].append(gguf.tokenize(texts[number]) == expected[number])

    threads = [threading.Thread(target=tokenize, args=(n,)) for n in range(len(texts))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(all(results) and len(results) == 200 for results in found)


# The pieces that could make a join go wrong: the splitting tokens' own texts whole and cut, other
# user-defined tokens (newline, space and tab runs, HTML tags), a lone byte of a character.
_NEAR_SPLITS = [b"<start_of_image>", b"<start_of_image", b"start_of_image>", b">", b"<", b"</td>", b"<td", b"\n", b"  ", b"\t"]
joinable_texts = st.lists(
    st.one_of(code_text.map(str.encode), st.sampled_from(_NEAR_SPLITS), st.binary(max_size=3)),
    max_size=40,
)


@pytest.fixture(scope="module", params=["default", "smollm2", "unigram"])
def any_tokenizer(request, gemma_tokenizer, smollm2_tokenizer, unigram_tokenizer) -> LlamaTokenizer:
    return {"default": gemma_tokenizer, "smollm2": smollm2_tokenizer, "unigram": unigram_tokenizer}[request.param]


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=joinable_texts, joiner=st.sampled_from([None, b"\n", b"  ", b"\t", b"<td>"]))
@example(texts=[b"a\n", b"\xef\xac\x81", b"\t<start_of_image", b"a\n"], joiner=b"\n")
@example(texts=[b"\xe2\x80\xa8<start_of_image>  ", b"\n", b"\xf5", b"<td\xc0"], joiner=b"  ")
@example(texts=[b">", b"\xef\xac\x81\t", b"\n\xe2\x91\xa0", b"\xef\xac\x81\xf5<start_of_image"], joiner=b"\t")
def test_texts_encoded_together_encode_as_each_alone(any_tokenizer, texts, joiner, monkeypatch):
    """Many texts in one llama.cpp call give each text's own tokens. Joined by the model's splitting token
    (``None``), or, in Gemma 3, by another user-defined token that can merge with what it joins (a newline
    after a newline, spaces after a space): such a join must be noticed and undone."""
    tokenizer = any_tokenizer
    if joiner is not None:
        assume(tokenizer._splitter is not None)  # only Gemma 3 has user-defined tokens
        monkeypatch.setattr(tokenizer, "_splitter", (tokenizer.vocab.find(joiner)[0], joiner))
    else:
        monkeypatch.setattr(tokenizer, "_splitter", tokenizer.gguf.splitting_token())
    assert tokenizer.encode_many(texts) == [tokenizer.gguf.tokenize(text) for text in texts]


def test_gemma_joins_short_texts_and_undoes_a_join_that_merged(gemma_tokenizer, monkeypatch):
    """The default model has a splitting token and uses it; a join that merges falls back to one call each."""
    calls = []
    tokenize = gemma_tokenizer.gguf.tokenize
    monkeypatch.setattr(gemma_tokenizer.gguf, "tokenize", lambda data: calls.append(data) or tokenize(data))
    texts = [b"    return x\n", b"def f(y):\n", b"    pass\n"] * 10
    assert gemma_tokenizer.encode_many(texts) == [tokenize(text) for text in texts]
    assert len(calls) == 1
    newline = gemma_tokenizer.vocab.find(b"\n")[0]
    monkeypatch.setattr(gemma_tokenizer, "_splitter", (newline, b"\n"))
    calls.clear()
    assert gemma_tokenizer.encode_many(texts) == [tokenize(text) for text in texts]
    assert len(calls) == 1 + len(texts)
