"""The prefix index against brute-force scans of the vocabulary."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from cpc.index import PrefixIndex, _successor
from cpc.vocab import Vocabulary
from tests.support.strategies import examples

VOCAB = Vocabulary.from_cl100k()
INDEX = PrefixIndex(VOCAB)
TEXT_IDS = [t for t, piece in enumerate(VOCAB.pieces) if piece and not VOCAB.special[t]]


def _brute_starting_with(prefix: bytes) -> set[int]:
    return {t for t in TEXT_IDS if VOCAB.pieces[t].startswith(prefix)}


@settings(max_examples=examples(60), deadline=None)
@given(token=st.sampled_from(TEXT_IDS), cut=st.integers(min_value=0, max_value=8))
def test_starting_with_matches_brute_force(token, cut):
    prefix = VOCAB.pieces[token][:cut]
    assert set(INDEX.starting_with(prefix).tolist()) == _brute_starting_with(prefix)


@settings(max_examples=examples(60), deadline=None)
@given(data=st.binary(max_size=6))
def test_starting_with_arbitrary_bytes(data):
    assert set(INDEX.starting_with(data).tolist()) == _brute_starting_with(data)


@settings(max_examples=examples(100), deadline=None)
@given(token=st.sampled_from(TEXT_IDS), extra=st.binary(max_size=4))
def test_prefixes_of_matches_brute_force(token, extra):
    data = VOCAB.pieces[token] + extra
    brute = {t for t in TEXT_IDS if data.startswith(VOCAB.pieces[t])}
    assert set(INDEX.prefixes_of(data)) == brute
    assert token in INDEX.prefixes_of(data)


def test_ranges_are_contiguous_blocks_for_mass_prefix_sums():
    rng = np.random.default_rng(0)
    probabilities = rng.random(len(VOCAB))
    probabilities[VOCAB.special] = 0
    cumulative = np.concatenate([[0.0], np.cumsum(probabilities[INDEX.order])])
    for prefix in [b"a", b" int", b"user", b"\xe6", b""]:
        lo, hi = INDEX.range_starting_with(prefix)
        mass = cumulative[hi] - cumulative[lo]
        brute = sum(probabilities[t] for t in _brute_starting_with(prefix))
        assert abs(mass - brute) < 1e-6 * max(1.0, brute)


def test_positions_invert_order():
    assert (INDEX.position[INDEX.order] == np.arange(len(INDEX))).all()
    assert (INDEX.position[VOCAB.special] == -1).all()


def test_successor_handles_ff_bytes():
    assert _successor(b"ab") == b"ac"
    assert _successor(b"a\xff\xff") == b"b"
    assert _successor(b"\xff") is None
    assert _successor(b"") is None
