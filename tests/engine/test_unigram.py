"""llama.cpp's unigram (UGM) tokenizer under the candidate search: layout, normalisation, unknown characters, the cache.

Its tokenizer does not spell every text back (NFKC, ``<unk>``), and neither
does SmolLM2's byte-level BPE quite (llama.cpp drops the bytes its
vocabulary has no token for): the candidate search must not offer paths
that spell other text than the typed one.
"""

import llama_cpp
import pytest

from cpc.candidates import CandidateFinder
from cpc.model_files import cache_dir
from tests.support.unigram_model import unigram_gguf


def test_the_vocabulary_is_llama_cpps_unigram_family(unigram_tokenizer):
    vocab = unigram_tokenizer.vocab
    handle = unigram_tokenizer.gguf.vocab_handle
    assert llama_cpp.llama_vocab_type(handle) == llama_cpp.LLAMA_VOCAB_TYPE_UGM
    assert vocab.special[:3].all()  # <pad>, </s>, <unk>: T5's ids
    assert vocab.eos_ids == {1}
    assert len(vocab) == 4000


@pytest.mark.parametrize(
    "text",
    ["userNa", "    def f(x):\n        return  x  \n\n", " leading space", "trailing   ", "x = '±'  # “quoted”"],
)
def test_code_layout_round_trips(unigram_tokenizer, text):
    """No dummy space prefix, no collapsed whitespace, newlines kept: code comes back as typed."""
    data = text.encode()
    assert unigram_tokenizer.vocab.decode(unigram_tokenizer.encode(data)) == data


@pytest.mark.parametrize(
    ("model", "text"),
    [
        ("unigram", "x = 'ﬁle"),  # NFKC: the ligature becomes "fi"
        ("unigram", "a = ℌx"),  # NFKC: a letterlike symbol becomes "H"
        ("unigram", "x = 1²3"),  # NFKC: a superscript becomes "2"
        ("unigram", "\tretu"),  # no piece has a tab: <unk>
        ("unigram", "x = 名前"),  # nor CJK
        ("smollm2", "x = a\x04bc"),  # no token for the byte 0x04: llama.cpp drops it
    ],
)
def test_a_tail_the_tokenizer_does_not_spell_has_no_path(request, model, text):
    tokenizer = request.getfixturevalue(f"{model}_tokenizer")
    analysis = CandidateFinder(tokenizer).analyze(text)
    tail = text.encode()[analysis.split.byte_start :]
    assert tokenizer.vocab.decode(tokenizer.encode(tail)) != tail
    assert analysis.positions == []


def test_no_path_goes_through_a_context_it_does_not_spell(unigram_tokenizer):
    """The bare re-encode rule accepts tokens after the normalised ligature,
    but a path through them would spell 'fil...', not the typed 'ﬁl...'."""
    vocab = unigram_tokenizer.vocab
    context = "ﬁ".encode()
    after_le = [t for t, piece in enumerate(vocab.pieces) if piece.startswith(b"le") and not vocab.special[t]]
    base = unigram_tokenizer.encode(context)
    bare_rule = [t for t in after_le if unigram_tokenizer.encode(context + vocab.pieces[t]) == [*base, t]]
    assert bare_rule
    analysis = CandidateFinder(unigram_tokenizer).analyze("ﬁle")
    assert [point for point in analysis.positions if point.before == context] == []


def test_an_unknown_character_before_the_tail_leaves_the_tail_covered(unigram_tokenizer):
    text = "print('😀 hel"
    analysis = CandidateFinder(unigram_tokenizer).analyze(text)
    tail = text.encode()[analysis.split.byte_start :]
    assert tail == b" hel"
    assert analysis.count > 0
    vocab = unigram_tokenizer.vocab
    for path in analysis.paths():
        assert vocab.decode(path).startswith(tail)


def test_the_gguf_is_built_once_into_the_cache():
    path = unigram_gguf()
    modified = path.stat().st_mtime_ns
    assert unigram_gguf() == path
    assert path.stat().st_mtime_ns == modified
    assert path.parent == cache_dir() / "models"
    assert path.name.startswith("unigram-stdlib-") and path.suffix == ".gguf"
