"""The incremental detokenizer over both test models' real vocabularies."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cpc.detok import Detokenizer
from tests.support.strategies import examples


@pytest.fixture(scope="module", params=["gemma_tokenizer", "smollm2_tokenizer"])
def tokenizer(request):
    return request.getfixturevalue(request.param)


def stream(vocab, tokens, context=b""):
    detok = Detokenizer(vocab, context)
    return [detok.push(token) for token in tokens], detok.flush(), detok


@pytest.mark.parametrize("text", ["🫨", "x = '🫨' # 你好, 日本語のテキスト", "👍🏽 e\u0301 Ж"])
def test_multi_token_characters_emit_at_the_token_that_completes_them(tokenizer, text):
    vocab = tokenizer.vocab
    tokens = tokenizer.encode(text.encode())
    pieces, tail, _ = stream(vocab, tokens)
    assert "".join(pieces) == text and tail == ""
    assert "\ufffd" not in "".join(pieces)
    emitted = b""
    for k, piece in enumerate(pieces):
        covered = vocab.decode(tokens[: k + 1])
        # exactly the whole characters of the bytes so far: nothing held back, nothing early
        whole = covered.decode("utf-8", "ignore") if _ends_clean(covered) else _whole_chars(covered)
        emitted += piece.encode()
        assert emitted.decode() == whole


def test_seed_emoji_is_split_by_the_byte_level_model(smollm2_tokenizer):
    """The textbook case: an emoji of several byte tokens emits at the last one, not at flush."""
    tokens = smollm2_tokenizer.encode("🫨".encode())
    assert len(tokens) > 1
    pieces, tail, _ = stream(smollm2_tokenizer.vocab, tokens)
    assert pieces == [""] * (len(tokens) - 1) + ["🫨"] and tail == ""


def test_context_bytes_are_not_emitted_again(gemma_tokenizer):
    vocab = gemma_tokenizer.vocab
    prompt, rest = gemma_tokenizer.encode("名前 = ".encode()), gemma_tokenizer.encode("'日本'".encode())
    pieces, tail, _ = stream(vocab, rest, context=vocab.decode(prompt))
    assert "".join(pieces) + tail == "'日本'"


@settings(max_examples=examples(300), deadline=None)
@given(data=st.data())
def test_random_token_streams_decode_like_the_whole(tokenizer, data):
    vocab = tokenizer.vocab
    tokens = data.draw(st.lists(st.integers(0, len(vocab) - 1), max_size=40))
    pieces, tail, detok = stream(vocab, tokens)
    assert "".join(pieces) + tail == vocab.decode(tokens).decode("utf-8", "replace")


@settings(max_examples=examples(100), deadline=None)
@given(text=st.text(max_size=40))
def test_valid_text_streams_without_replacement_characters(tokenizer, text):
    tokens = tokenizer.encode(text.encode())
    # llama.cpp's tokenizers are lossy on a few unassigned code points; the output is what counts
    text = tokenizer.vocab.decode(tokens).decode("utf-8", "replace")
    detok = Detokenizer(tokenizer.vocab)
    out = []
    for token in tokens:
        out.append(detok.push(token))
        # constant work per push: the decoder never holds more than one unfinished character
        assert len(detok._decoder.getstate()[0]) <= 3
    assert "\ufffd" not in "".join(out) or "\ufffd" in text
    # everything is out at the token that completes it: nothing waits for flush
    assert "".join(out) == text and detok.flush() == ""


def _ends_clean(data: bytes) -> bool:
    try:
        data.decode()
        return True
    except UnicodeDecodeError:
        return False


def _whole_chars(data: bytes) -> str:
    for cut in range(len(data), -1, -1):
        try:
            return data[:cut].decode()
        except UnicodeDecodeError:
            continue
    return ""
