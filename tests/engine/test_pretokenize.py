"""The cl100k pre-tokenizer split: stable prefix vs unstable tail."""

from hypothesis import given, settings
from hypothesis import strategies as st

from cpc.pretokenize import pretokens, split_tail
from cpc.vocab import cl100k_encoding
from tests.support.strategies import code_text, examples


def test_pattern_is_tiktokens_cl100k_pattern():
    from cpc.pretokenize import cl100k_pattern

    assert cl100k_pattern().pattern == cl100k_encoding()._pat_str


def test_seed_last_words():
    cases = {
        "I bought some apple": " apple",
        "https:": ":",
        "userNa": "userNa",
        "We found a hidden causali": " causali",
        "He introduced an intermediar": " intermediar",
        "indivi": "indivi",
    }
    for text, last_word in cases.items():
        split = split_tail(text)
        assert split.last_word == last_word
        assert split.tail == last_word
        assert split.stable + split.tail == text


def test_offsets_are_characters_and_bytes():
    split = split_tail("名前 = 'こんにち")
    assert split.tail == "こんにち"
    assert split.start == len("名前 = '")
    assert split.byte_start == len("名前 = '".encode())


def test_trailing_whitespace_is_the_tail():
    assert split_tail("def f():\n    ").tail == "    "  # "):\n" swallows the newline
    assert split_tail("x = 1\n\n  ").tail == "\n\n  "
    assert split_tail("x = 1  ").tail == "  "


def test_digit_groups():
    assert split_tail("x = 1234").tail == "4"
    assert split_tail("x = 123").tail == "123"


def test_empty_text():
    split = split_tail("")
    assert split.tail == "" and split.start == 0


def test_long_document_uses_a_window_but_agrees_with_full_regex():
    from cpc.pretokenize import _window_start

    body = "def f(argument):\n    return argument * 2\nvalue = f(1)\n" * 40
    text = body + "result = function_numb"
    assert _window_start(text) > 0
    split = split_tail(text)
    full = pretokens(text)
    assert split.tail == full[-1] == "_numb"
    assert split.start == len(text) - len("_numb")


# Lines as code has them, with every kind of line end and whitespace the regex treats apart.
_ENDS = ["\n", "\r\n", "\n\n", "\r", " \n", ":\n", ")\n\n", "\n\x0b", "\x85", "\u2028", "\x0c\n"]
_INDENTS = ["", " ", "    ", "\t", "  \t", "\x0b", "\u3000"]
long_code = st.lists(
    st.tuples(st.sampled_from(_INDENTS), code_text, st.sampled_from(_ENDS)).map("".join), min_size=30, max_size=90,
).map("".join)


@settings(max_examples=examples(300), deadline=None)
@given(text=long_code, end=code_text)
def test_the_window_starts_on_a_boundary_of_the_whole_texts_chunks(text, end):
    """The regex run from the window's start gives the whole text's own chunks from there on."""
    from cpc.pretokenize import _window_start

    text += end
    start = _window_start(text)
    before = _chunks_before(pretokens(text), start)
    assert before is not None
    assert before + pretokens(text[start:]) == pretokens(text)


@settings(max_examples=examples(400), deadline=None)
@given(text=code_text, more=code_text)
def test_typing_more_never_changes_the_stable_part(text, more):
    """The tail starts on a chunk boundary, and the chunks before it stay as
    they are (in context) whatever the user types next."""
    split = split_tail(text)
    now = _chunks_before(pretokens(text), split.start)
    later = _chunks_before(pretokens(text + more), split.start)
    assert now is not None and later is not None
    assert later == now


def test_stable_part_alone_chunks_differently_than_in_context():
    """Why the stable tokens must be taken in context, not re-encoded alone."""
    split = split_tail(" \t(")
    assert split.stable == " \t"
    assert _chunks_before(pretokens(" \t("), split.start) == [" ", "\t"]
    assert pretokens(split.stable) == [" \t"]


def _chunks_before(chunks: list[str], boundary: int) -> list[str] | None:
    """The chunks that end at or before ``boundary`` (None if one straddles it)."""
    position = 0
    for count, chunk in enumerate(chunks):
        if position == boundary:
            return chunks[:count]
        position += len(chunk)
        if position > boundary:
            return None
    return chunks if position == boundary else None


@settings(max_examples=examples(200), deadline=None)
@given(text=st.text(max_size=30))
def test_split_is_a_partition_for_any_unicode(text):
    split = split_tail(text)
    assert split.stable + split.tail == text
    assert split.tail.endswith(split.last_word)
