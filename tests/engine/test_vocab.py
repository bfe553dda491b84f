"""Vocabularies from tiktoken and from GGUF models: exact bytes per token."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cpc.vocab import TokenGroups, Vocabulary, cl100k_encoding

SAMPLES = ["def main():\n    return 42", "名前 = 'こんにちは'", "emoji 😀👍🏽 done", "naïve café"]


def test_cl100k_pieces_are_tiktokens_bytes():
    vocab = Vocabulary.from_cl100k()
    encoding = cl100k_encoding()
    for token in [0, 1, 220, 1234, 50000, 100255]:
        assert vocab.pieces[token] == encoding.decode_single_token_bytes(token)
    assert vocab.special[encoding.eot_token]
    assert vocab.pieces[encoding.eot_token] == b""
    assert encoding.eot_token in vocab.eos_ids
    assert not vocab.special[220]


@pytest.mark.parametrize("text", SAMPLES)
def test_gguf_pieces_decode_the_models_own_tokenization(text, gemma_tokenizer, smollm2_tokenizer):
    for tokenizer in (gemma_tokenizer, smollm2_tokenizer):
        ids = tokenizer.encode(text.encode())
        assert tokenizer.vocab.decode(ids) == text.encode()


def test_sentencepiece_pieces_are_raw_bytes(gemma_tokenizer):
    vocab = gemma_tokenizer.vocab
    assert len(vocab) == 262144
    # "▁" is rendered as a space, "<0xNN>" byte-fallback tokens as that byte.
    assert all(b"\xe2\x96\x81" not in piece for piece in vocab.pieces)
    byte_tokens = [t for t, piece in enumerate(vocab.pieces) if len(piece) == 1 and piece[0] >= 0x80]
    assert len(byte_tokens) >= 64
    assert vocab.find(b" def")


def test_sentencepiece_duplicate_pieces_are_all_kept(gemma_tokenizer):
    vocab = gemma_tokenizer.vocab
    seen: dict[bytes, int] = {}
    duplicates = []
    for token, piece in enumerate(vocab.pieces):
        if piece and not vocab.special[token]:
            if piece in seen:
                duplicates.append((seen[piece], token))
            seen.setdefault(piece, token)
    assert duplicates, "Gemma is known to have several ids for the same bytes"
    first, second = duplicates[0]
    assert {first, second} <= set(vocab.find(vocab.pieces[first]))


def test_byte_level_bpe_pieces_are_raw_bytes(smollm2_tokenizer):
    vocab = smollm2_tokenizer.vocab
    assert len(vocab) == 49152
    assert all("Ġ".encode() not in piece for piece in vocab.pieces)
    assert vocab.find(b" def")
    assert vocab.eos_ids


def test_control_tokens_never_cover_text(gemma_tokenizer, smollm2_tokenizer):
    for vocab in (gemma_tokenizer.vocab, smollm2_tokenizer.vocab):
        assert vocab.special.any()
        assert all(vocab.special[t] for t in vocab.eos_ids)
        for token in vocab.special.nonzero()[0][:200]:
            assert token not in vocab.find(vocab.pieces[token])


members = st.lists(st.tuples(st.binary(max_size=2), st.integers(0, 30)), max_size=40)


@given(members, members)
def test_token_groups_hold_what_a_dict_of_lists_would(firsts, seconds):
    both, firsts_alone = TokenGroups.of_two_kinds(firsts, seconds)
    for groups, pairs in ((both, firsts + seconds), (firsts_alone, firsts)):
        expected: dict[bytes, list[int]] = {}
        for key, token in pairs:
            expected.setdefault(key, []).append(token)
        assert sorted(groups.keys()) == sorted(expected)
        for key in {key for key, _ in firsts + seconds} | {b"\xff\xff\xff"}:
            assert (key in groups) == (key in expected)
            if key in expected:
                assert groups[key].tolist() == expected[key]
            else:
                with pytest.raises(KeyError):
                    groups[key]
