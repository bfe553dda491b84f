"""The model's tokenizer: a long text encoded against the previous one gives llama.cpp's own tokens."""

from __future__ import annotations

import difflib
import threading

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from cpc.gguf import GGUFModel
from cpc.tokenizer import REUSE_MIN_BYTES, LlamaTokenizer
from tests.support.strategies import examples

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
