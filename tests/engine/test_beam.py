"""The byte beam: exact against brute force on a toy model, and the chain rule on the real one."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cpc.beam import EOS, ByteBeam, SnapshotCache
from cpc.index import PrefixIndex
from tests.support.strategies import examples
from tests.support.toy_lm import TOY_PIECES, BruteForce, ToyLM

TOY_TEXTS = [b"a", b"ab", b"abba", b"ba ab", b"\xc3\xa9", b"a\xc3\xa9 a", b"a\xc3", b" aab\xc3\xa9b"]


@pytest.fixture(scope="module")
def toy():
    lm = ToyLM()
    return lm, ByteBeam(lm, PrefixIndex(lm.vocab), width=10**6, threshold=0.0), BruteForce(lm)


@pytest.mark.parametrize("text", TOY_TEXTS)
def test_unpruned_beam_equals_the_brute_force_marginal(toy, text):
    lm, beam, brute = toy
    read = beam.read(lm.bos, text)
    assert math.exp(read.logprob) == pytest.approx(brute.prefix(lm.bos, text), abs=1e-12, rel=1e-9)


@pytest.mark.parametrize("text", TOY_TEXTS)
def test_next_byte_distribution_is_exact_and_sums_to_one(toy, text):
    lm, beam, brute = toy
    logprobs = beam.next_byte_logprobs(beam.read(lm.bos, text))
    assert np.exp(logprobs).sum() == pytest.approx(1.0, abs=1e-12)
    prefix = brute.prefix(lm.bos, text)
    for byte in {piece[0] for piece in TOY_PIECES}:
        expected = brute.prefix(lm.bos, text + bytes([byte])) / prefix
        assert math.exp(logprobs[byte]) == pytest.approx(expected, abs=1e-12, rel=1e-9)
    assert math.exp(logprobs[EOS]) == pytest.approx(brute.ends(lm.bos, text) / prefix, abs=1e-12, rel=1e-9)


@settings(max_examples=examples(40), deadline=None)
@given(st.lists(st.sampled_from([b"a", b"b", b" ", b"\xc3\xa9"]), min_size=1, max_size=6).map(b"".join))
def test_unpruned_beam_matches_brute_force_on_random_texts(text):
    lm = ToyLM(seed=3)
    beam = ByteBeam(lm, PrefixIndex(lm.vocab), width=10**6, threshold=0.0)
    assert math.exp(beam.read(lm.bos, text).logprob) == pytest.approx(
        BruteForce(lm).prefix(lm.bos, text), abs=1e-12, rel=1e-9
    )


def test_pruned_beam_never_exceeds_the_exact_marginal_and_heals(toy):
    lm, _, brute = toy
    narrow = ByteBeam(lm, PrefixIndex(lm.vocab), width=1, threshold=0.5)
    for text in TOY_TEXTS:
        read = narrow.read(lm.bos, text)
        assert read.candidates, "healing must recover any text the vocabulary can cover"
        assert len(read.candidates) <= 4  # healing widens to 4K
        assert math.exp(read.logprob) <= brute.prefix(lm.bos, text) * (1 + 1e-9)
    assert narrow.stats.pruned > 0


def test_an_extension_bound_does_not_prune_an_exact_candidate():
    # Reading "ab": the open token "ab" has its exact weight; committing the likely "a" is bounded
    # by P("a") before its state is read, and P("b" | "a") turns out tiny. Both paths end up
    # within the threshold: the bound alone must not push "ab" out.
    lm = ToyLM(pieces=[b"a", b"b", b"ab"], bias={b"a": 8.0})
    beam = ByteBeam(lm, PrefixIndex(lm.vocab), width=8, threshold=1e-2)
    read = beam.read(lm.bos, b"ab")
    assert sorted(c.open for c in read.candidates) == [b"ab", b"b"]
    assert math.exp(read.logprob) == pytest.approx(BruteForce(lm).prefix(lm.bos, b"ab"), rel=1e-9)


def test_healing_recovers_after_pruning_drops_the_only_live_path():
    # "abc" has one tokenization, "a" "bc"; a width-1 beam prefers the likelier
    # open token "ab", which no token can continue with "c".
    lm = ToyLM(pieces=[b"a", b"b", b"ab", b"bc"], bias={b"ab": 6.0})
    beam = ByteBeam(lm, PrefixIndex(lm.vocab), width=1, threshold=1.0)
    assert [c.open for c in beam.read(lm.bos, b"ab").candidates] == [b"ab"]
    healed = beam.read(lm.bos, b"abc")
    assert beam.stats.healed == 1 and healed.healed == 1
    assert math.exp(healed.logprob) == pytest.approx(BruteForce(lm).prefix(lm.bos, b"abc"), rel=1e-9)
    assert not beam.read(lm.bos, b"abcc").candidates  # no tokenization at all: empty, not an error


def test_pin_keeps_the_given_path(toy):
    lm, _, _ = toy
    narrow = ByteBeam(lm, PrefixIndex(lm.vocab), width=1, threshold=0.5)
    ids = {piece: i for i, piece in enumerate(TOY_PIECES)}
    path = (ids[b"a"], ids[b"b"], ids[b"b"], ids[b"a"])
    read = narrow.read(lm.bos, b"abba", pin=path)
    pinned = read.pinned
    assert pinned is not None and pinned.tokens[1:] == path[:-1] and pinned.open == b"a"
    exact = sum(lm._row(lm.bos + path[:k])[path[k]] for k in range(len(path)))
    # PAD is renormalised away by the beam, so the beam's path is at least as likely
    assert pinned.log_committed + math.log(pinned.snapshot.of(path[-1])) >= exact


def test_one_more_byte_resumes_from_the_cached_beam(toy):
    lm = ToyLM(seed=5)
    beam = ByteBeam(lm, PrefixIndex(lm.vocab), width=8, threshold=1e-9)
    beam.read(lm.bos, b"abab")
    steps = beam.stats.steps
    beam.read(lm.bos, b"ababa")
    assert beam.stats.cache_hits == 1 and beam.stats.steps == steps + 1


CHAIN_TEXTS = ["def f(", "x = 1", "日本語", "a😀b", "\tret"]


@pytest.mark.parametrize("text", CHAIN_TEXTS)
def test_chain_rule_with_the_real_model(engine, text):
    """log P(ab) = log P(a) + log P(b | a) for a beam wide enough to prune nothing."""
    # a cache big enough that no snapshot is evaluated twice: llama.cpp rounds differently
    # with batch composition, so a re-evaluated state may differ in the last digits
    beam = ByteBeam(engine.lm, engine.index, width=4096, threshold=0.0, snapshot_budget=1 << 30)
    data = text.encode()
    start = engine.lm.bos
    for cut in range(1, len(data)):
        pruned = beam.stats.pruned
        a = beam.read(start, data[:cut])
        next_byte = beam.next_byte_logprobs(a)
        ab = beam.read(start, data[: cut + 1])
        assert beam.stats.pruned == pruned, "the beam must be exact here"
        assert np.exp(next_byte).sum() == pytest.approx(1.0, abs=1e-9)
        assert ab.logprob == pytest.approx(a.logprob + next_byte[data[cut]], abs=1e-6)


@pytest.mark.parametrize("text", CHAIN_TEXTS)
def test_beam_covers_the_canonical_tokenization(engine, text):
    data = text.encode()
    canonical = tuple(engine.tokenizer.encode(data))
    read = engine.beam.read(engine.lm.bos, data, pin=canonical)
    pinned = read.pinned
    assert pinned.tokens[len(engine.lm.bos) :] == canonical[:-1]
    path = pinned.log_committed + math.log(pinned.snapshot.of(canonical[-1]))
    assert read.logprob >= path


def test_cached_beams_keep_few_snapshots_beyond_the_cache():
    """Beams hold snapshots the snapshot cache has evicted; the beam cache
    lets go of old beams so those hold at most half the cache's budget."""
    lm = ToyLM(seed=3)
    row_bytes = len(lm.vocab.pieces) * 8  # the toy model's rows are float64
    beam = ByteBeam(lm, PrefixIndex(lm.vocab), width=4, threshold=0.0, snapshot_budget=8 * row_bytes)
    for k in range(60):  # 60 distinct prompts, each read on for a few bytes
        beam.read((*lm.bos, k % 6, (k // 6) % 6), b"ab ba"[: 2 + k % 4])
        assert beam.snapshots.held_bytes() <= 8 * 2 * row_bytes  # 8 snapshots, some laid out in index order
        assert beam.bytes_held_by_beams_only() <= 4 * row_bytes
    assert beam.read((*lm.bos, 59 % 6, (59 // 6) % 6), b"ab ba"[: 2 + 59 % 4]).data  # the newest beam is kept
    assert beam.stats.cache_hits >= 1


def test_a_beam_at_rest_keeps_the_newest_snapshots_by_token_and_reads_the_same():
    """While the editor is quiet the beam keeps its newest beam and `SnapshotCache.MINIMUM` snapshots, each
    without its copy in index order; what it reads next is what a beam that kept everything reads."""
    lm = ToyLM(seed=5)
    row_bytes = len(lm.vocab.pieces) * 8
    resting, busy = (ByteBeam(lm, PrefixIndex(lm.vocab), width=4, threshold=0.0) for _ in range(2))
    prompts = [(*lm.bos, k % 5, (k // 5) % 5) for k in range(20)]
    for prompt in prompts:
        for beam in (resting, busy):
            beam.read(prompt, b"ab ba")
    assert busy.snapshots.held_bytes() > len(busy.snapshots) * row_bytes  # some laid out in index order
    resting.rest()
    assert len(resting.snapshots) == SnapshotCache.MINIMUM < len(busy.snapshots)
    assert resting.snapshots.held_bytes() == SnapshotCache.MINIMUM * row_bytes
    assert resting.bytes_held_by_beams_only() <= 4 * row_bytes
    for prompt in (prompts[-1], prompts[0]):  # at the same place, and elsewhere
        for data in (b"ab ba", b"ab bab", b"a"):
            rested, kept = resting.read(prompt, data), busy.read(prompt, data)
            assert [(c.tokens, c.open, c.logweight) for c in rested.candidates] == [
                (c.tokens, c.open, c.logweight) for c in kept.candidates
            ]
