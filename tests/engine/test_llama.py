"""The llama.cpp model runtime: batching and KV reuse never change the numbers."""

from __future__ import annotations

import os

import numpy as np
import pytest

from cpc.engine import Engine
from cpc.llama import PREFILL_CHUNK, LlamaLM
from cpc.lm import Cancelled
from harness.beside import beside
from harness.threads import MODEL_THREADS

SOURCE = b'def fibonacci(n):\n    """Return the n-th number."""\n    if n < 2:\n        return n\n    return fibonacci(n - 1) + fibonacci(n - 2)\n'


@pytest.fixture(scope="module")
def smollm2(request):
    return Engine.load("smollm2", threads=MODEL_THREADS)


def _alone(engine, state) -> np.ndarray:
    """The state evaluated in a fresh context, all its tokens in one batch."""
    fresh = LlamaLM(engine.gguf, engine.vocab, n_seq=1, n_ctx=512, threads=MODEL_THREADS)
    return fresh.next_logprobs([state])[0]


def _states(engine):
    tokens = engine.lm.bos + tuple(engine.tokenizer.encode(SOURCE))
    # nested prefixes, siblings that diverge, and one that shares only BOS
    return tokens, [
        tokens[:12],
        tokens[:20],
        tokens[:19] + (tokens[25],),
        tokens[:19] + (tokens[26], tokens[27]),
        tokens[:30],
        tokens[:1] + tokens[5:9],
    ]


BATCH_NOISE = 1e-2
"""How far, in probability, a SmolLM2 state's next-token distribution may move with the batch it is computed
in. llama.cpp promises no batch invariance (kernels split the work by batch size and thread count; AVX-512,
AMX and ARM's repacked kernels reorder sums): measured at most 2.7e-3 over thread counts 1, 2 and 4 and
decode splits (benchmarks/probe_batch_noise.py). 1e-2 still catches what this test once caught:
llama.cpp's unified KV cache mixing sequences moved probabilities by 0.08."""


def _assert_same_distribution(row: np.ndarray, expected: np.ndarray) -> None:
    np.testing.assert_allclose(np.exp(row.astype(np.float64)), np.exp(expected.astype(np.float64)), rtol=0, atol=BATCH_NOISE)


def test_batched_calls_with_kv_reuse_match_lone_evaluation(smollm2):
    """Any mix of cached prefixes, copies and batches gives the numbers of a lone evaluation, within
    llama.cpp's batch noise."""
    tokens, states = _states(smollm2)
    lm = LlamaLM(smollm2.gguf, smollm2.vocab, n_seq=3, n_ctx=256, threads=MODEL_THREADS)
    for call in ([states[0]], states[1:4], [states[4], states[1]], states[2:], [states[3]], states):
        rows = lm.next_logprobs(call)
        for state, row in zip(call, rows):
            _assert_same_distribution(row, _alone(smollm2, state))


def test_keystroke_evaluates_only_the_new_tokens(smollm2):
    tokens, _ = _states(smollm2)
    lm = LlamaLM(smollm2.gguf, smollm2.vocab, n_seq=4, n_ctx=256, threads=MODEL_THREADS)
    lm.next_logprobs([tokens[:30]])
    before = lm.stats.tokens
    lm.next_logprobs([tokens[:31], tokens[:30] + (tokens[35],)])
    assert lm.stats.tokens - before == 2
    assert lm.stats.decodes == 2  # one per call


def test_a_cold_shared_prompt_is_evaluated_once(smollm2):
    tokens, _ = _states(smollm2)
    lm = LlamaLM(smollm2.gguf, smollm2.vocab, n_seq=4, n_ctx=256, threads=MODEL_THREADS)
    lm.next_logprobs([tokens[:30] + (t,) for t in tokens[31:35]])
    assert lm.stats.tokens == 30 + 4


def test_token_logprobs_scores_a_sequence_in_one_pass(smollm2):
    tokens, _ = _states(smollm2)
    lm = smollm2.lm
    scores = lm.token_logprobs(tokens[:24])
    expected = [_alone(smollm2, tokens[:k])[tokens[k]] for k in (1, 10, 23)]
    # 64 rows in one decode against each prefix alone: two batch shapes, so within the batch noise
    np.testing.assert_allclose(np.exp(scores[[0, 9, 22]]), np.exp(np.asarray(expected, np.float64)), rtol=0, atol=BATCH_NOISE)


def test_rows_are_normalised_log_probabilities(engine):
    rows = engine.lm.next_logprobs([engine.lm.bos, engine.lm.bos + tuple(engine.tokenizer.encode(b"import"))])
    assert rows.shape == (2, engine.gguf.n_vocab)
    np.testing.assert_allclose(np.exp(rows.astype(np.float64)).sum(axis=1), 1.0, atol=1e-4)
    assert (engine.lm.eos_logprob(rows) < 0).all()


def test_scores_and_greedy_steps_answer_what_the_rows_would(engine):
    """`next_scores` rows are the log-probability rows up to a constant, and a greedy step's token and
    log-probability are exactly those of the row with the banned tokens masked (its first state
    banning the likeliest token, so the masked path is taken too). Each call starts from an empty
    cache, so that every call computes its states in the same decodes (llama.cpp's numbers move with
    the batch a state is computed in, and with what the other tests left in the cache)."""
    lm = engine.lm
    states = [lm.bos + tuple(engine.tokenizer.encode(text)) for text in (b"import", b"def main(", b"import")]
    lm.reset()
    rows = lm.next_logprobs(states)
    lm.reset()
    scores = lm.next_scores(states)
    shift = (scores.astype(np.float64) - rows).mean(axis=1, keepdims=True)
    np.testing.assert_allclose(scores - shift, rows, atol=1e-4)
    for banned_top in (False, True):
        banned = engine.vocab.special.copy()
        banned[sorted(engine.vocab.eos_ids)] = False
        if banned_top:
            banned[int(rows[0].argmax())] = True
        lm.reset()
        tokens, logprobs = lm.greedy_next(states, banned)
        masked = np.where(banned, -np.inf, rows)
        np.testing.assert_array_equal(tokens, masked.argmax(axis=1))
        np.testing.assert_array_equal(logprobs, rows[np.arange(len(rows)), tokens])
        assert tokens[0] == tokens[2] and not banned[tokens].any()


def test_a_greedy_step_normalised_in_the_graph_answers_as_the_host_does(engine):
    """With the greedy summary on the backend (`cpc.backend_sampling`, here on the CPU backend), a greedy
    step takes its normaliser from the graph and answers the host's token and log-probability (to
    float32 rounding), rows of log-probabilities take it too (the same to float32 rounding), and the
    other calls read the same rows as without it. Both models get the
    same calls (llama.cpp's sums depend on the batch's shape). The states end at different lengths,
    so one call's outputs span several micro-batches; the second state bans its likeliest token
    (the host's masked path)."""
    def fresh(backend_greedy: bool) -> LlamaLM:
        return LlamaLM(engine.gguf, engine.vocab, n_seq=4, n_ctx=512, backend_greedy=backend_greedy, threads=MODEL_THREADS)

    host, graph = fresh(False), fresh(True)
    assert graph.backend_greedy and not host.backend_greedy
    text = engine.tokenizer.encode(b"import os\nimport sys\n\n\ndef main(argv):\n    for name in os.listdir(argv[1]):\n")
    states = [host.bos + tuple(text[:length]) for length in (5, 9, 13, 30)]
    banned = engine.vocab.special.copy()
    banned[int(fresh(False).next_logprobs(states)[1].argmax())] = True
    for _ in ("cold", "warm"):
        expected, got = host.greedy_next(states, banned), graph.greedy_next(states, banned)
        np.testing.assert_array_equal(got[0], expected[0])
        np.testing.assert_allclose(got[1], expected[1], rtol=0, atol=1e-6)
    assert graph.stats.summarised == 2 * (len(states) - 1)  # all but the banned state's, from the graph
    rows, expected = graph.next_logprobs(states), host.next_logprobs(states)
    assert graph.stats.summarised == 2 * (len(states) - 1) + len(states)
    np.testing.assert_allclose(rows, expected, rtol=0, atol=1e-5)  # a float32 ulp at 64 is 7.6e-6
    np.testing.assert_array_equal(rows.argmax(axis=1), expected.argmax(axis=1))
    np.testing.assert_array_equal(graph.next_scores(states), host.next_scores(states))
    np.testing.assert_array_equal(graph.token_logprobs(states[-1]), host.token_logprobs(states[-1]))


@pytest.mark.parametrize(
    ("n_ctx", "expected"),
    [(10**8, "GiB for the KV cache .* GiB of memory is available"), (2**31, "outside what llama.cpp can address")],
)
def test_a_context_too_large_for_the_machine_is_refused_before_it_is_made(smollm2, n_ctx, expected):
    """llama.cpp zeroes its KV cache as it makes it: a cache larger than the free memory would bring in the OOM
    killer, and one past 2**32 tokens cannot be addressed. Both are refused with the setting to lower."""
    from cpc.model_files import ModelError

    with pytest.raises(ModelError, match=f"{expected}.*contextSize"):
        LlamaLM(smollm2.gguf, smollm2.vocab, n_ctx=n_ctx, n_seq=3, threads=MODEL_THREADS)


def test_states_that_do_not_fit_are_refused(smollm2):
    lm = LlamaLM(smollm2.gguf, smollm2.vocab, n_seq=1, n_ctx=16)
    with pytest.raises(ValueError, match="does not fit"):
        lm.next_logprobs([tuple(range(1, 40))])
    with pytest.raises(ValueError, match="at least one token"):
        lm.next_logprobs([()])


def test_prefill_reads_ahead_so_the_request_evaluates_only_what_follows(smollm2):
    tokens, _ = _states(smollm2)
    lm = LlamaLM(smollm2.gguf, smollm2.vocab, n_seq=2, n_ctx=256, threads=MODEL_THREADS)
    assert lm.prefill(tokens[:30]) == 30
    assert lm.cached_length(tokens[:31]) == 30
    assert lm.prefill(tokens[:30]) == 0  # nothing left to read
    before = lm.stats.tokens
    row = lm.next_logprobs([tokens[:31]])[0]
    assert lm.stats.tokens - before == 1
    assert lm.stats.prefilled == 30
    _assert_same_distribution(row, _alone(smollm2, tokens[:31]))


def test_an_interrupted_prompt_keeps_what_was_read(smollm2):
    """A request made obsolete stops between chunks; the next one goes on from where it stopped."""
    tokens = smollm2.lm.bos + tuple(smollm2.tokenizer.encode(SOURCE * 10))
    assert len(tokens) > 2 * PREFILL_CHUNK
    lm = LlamaLM(smollm2.gguf, smollm2.vocab, n_seq=2, n_ctx=512, threads=MODEL_THREADS)
    polls = []
    lm.interrupt = lambda: polls.append(1) or len(polls) > 2  # the call's own poll, one chunk, then stop
    with pytest.raises(Cancelled):
        lm.next_logprobs([tokens])
    lm.interrupt = None
    kept = lm.cached_length(tokens)
    assert kept == 2 * PREFILL_CHUNK
    before = lm.stats.tokens
    row = lm.next_logprobs([tokens])[0]
    assert lm.stats.tokens - before == len(tokens) - kept
    np.testing.assert_allclose(row, _alone(smollm2, tokens), atol=1e-4)


def test_stop_now_breaks_into_a_decode_and_the_model_stays_exact(smollm2):
    """`LlamaLM.stop_now` stops llama.cpp inside a batch: the batch is dropped, what came before keeps.

    The interrupt asks for the stop itself just after its first poll, so the break-in lands in the
    second chunk's decode every time: a stop that only took effect between chunks would keep that chunk.
    """
    tokens = smollm2.lm.bos + tuple(smollm2.tokenizer.encode(SOURCE * 10))
    lm = LlamaLM(smollm2.gguf, smollm2.vocab, n_seq=2, n_ctx=512, threads=MODEL_THREADS)
    polls = []

    def interrupt() -> bool:  # the call's poll, the poll before the second chunk (a stop arrives), then stale
        polls.append(1)
        if len(polls) == 2:
            lm.stop_now()
        return len(polls) > 2

    lm.interrupt = interrupt
    with pytest.raises(Cancelled):
        lm.next_logprobs([tokens])
    lm.interrupt = None
    assert len(polls) == 3 and lm.cached_length(tokens) == PREFILL_CHUNK  # the broken chunk is not kept
    np.testing.assert_allclose(lm.next_logprobs([tokens])[0], _alone(smollm2, tokens), atol=1e-4)


def test_a_stop_asked_of_work_that_is_not_stale_changes_nothing(smollm2):
    """A stop that finds the interrupt false (the work was typed on) lets the broken batch run again."""
    tokens = smollm2.lm.bos + tuple(smollm2.tokenizer.encode(SOURCE * 2))
    lm = LlamaLM(smollm2.gguf, smollm2.vocab, n_seq=1, n_ctx=512, threads=MODEL_THREADS)
    polls = []

    def interrupt() -> bool:  # the call's poll and the two after it leave a stop: the first chunk breaks thrice
        polls.append(1)
        if len(polls) <= 3:
            lm.stop_now()
        return False

    lm.interrupt = interrupt
    decodes = lm.stats.decodes
    row = lm.next_logprobs([tokens])[0]
    lm.interrupt = None
    chunks = -(-len(tokens) // PREFILL_CHUNK)
    # decodes that ran through, one per chunk; a poll per call, per break and between chunks
    assert lm.stats.decodes - decodes == chunks and len(polls) == 1 + 3 + (chunks - 1)
    np.testing.assert_allclose(row, _alone(smollm2, tokens), atol=1e-4)


def _resident_kib(path: str) -> int | None:
    """This process's resident pages of the mappings of the file at ``path`` (Linux), in KiB."""
    import os
    import re

    target, resident, inside = os.path.realpath(path), 0, False
    try:
        smaps = open("/proc/self/smaps", encoding="utf-8", errors="replace")
    except OSError:
        return None
    with smaps:
        for line in smaps:
            if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
                fields = line.split(maxsplit=5)
                inside = len(fields) == 6 and fields[5].rstrip("\n") == target
            elif inside and line.startswith("Rss:"):
                resident += int(line.split()[1])
    return resident


def test_the_model_files_pages_let_go_come_back_with_the_same_numbers(smollm2):
    """`release_mapped_pages` drops the weights' pages from this process (the copied ones stay out), and
    the pages the model computes with come back from the file at their first use, with the same numbers."""
    from cpc.resident import release_mapped_pages

    tokens, states = _states(smollm2)
    smollm2.lm.reset()  # both evaluations from an empty cache, in the same batches: bit for bit on any machine
    before = smollm2.lm.next_logprobs([states[4]])[0]
    smollm2.lm.reset()
    path = str(smollm2.gguf.path)
    if _resident_kib(path) is None:
        pytest.skip("no /proc/self/smaps on this system")
    assert release_mapped_pages(path) > 0
    assert _resident_kib(path) == 0
    after = smollm2.lm.next_logprobs([states[4]])[0]
    assert _resident_kib(path) > 0
    np.testing.assert_array_equal(after, before)


def test_the_thread_tuner_times_only_steps_that_read_their_logits(smollm2):
    """A token read ahead without its logits skips the output layer: timed as a step, it set an idle figure no
    step reached again, and the tuner held one thread fewer on an idle machine (prompts read 1.8x slower)."""
    tokens, _ = _states(smollm2)
    lm = LlamaLM(smollm2.gguf, smollm2.vocab, n_seq=1, n_ctx=256)  # no fixed count: the tuner chooses
    steps: list[bool] = []
    record = lm._tuner.record

    def recorded(threads: int, milliseconds: float, cpu_milliseconds: float, step: bool = True) -> None:
        steps.append(step)
        record(threads, milliseconds, cpu_milliseconds, step)

    lm._tuner.record = recorded
    lm.next_logprobs([tokens[:20]])  # a prompt: many tokens in one decode
    lm.prefill(tokens[:21])  # one token read without its logits
    assert steps == [False, False], "every decode tells whether the thread waited; only a step is timed"
    lm.next_logprobs([tokens[:22]])  # one step: its token and its logits
    assert steps == [False, False, True]


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="one core: the tuner has no thread to give up")
def test_the_thread_tuner_gives_a_core_up_beside_another_model_from_the_start():
    """Beside another llama.cpp process with two threads on the same two cores, each process's threads spun at
    their barriers while the other's held the cores: a step took 2.1 s with two threads, 27 ms with one. The
    tuner took its first such steps for the idle machine's speed and kept every core. The decoding thread's
    wait for a core tells it from the first decode."""
    cores = set(sorted(os.sched_getaffinity(0))[:2])
    mask = os.sched_getaffinity(0)
    with beside("model", cores):
        try:
            os.sched_setaffinity(0, cores)  # this process's model threads on the same two cores
            engine = Engine.load("default", n_seq=1, n_ctx=256)  # no fixed count: the tuner chooses
            tokens, _ = _states(engine)
            engine.lm.next_logprobs([tokens[:20]])  # a prompt: no one-token step yet, so only the wait can tell
            after_the_prompt = engine.lm._tuner.current
            for end in range(21, 29):
                engine.lm.next_logprobs([tokens[:end]])
        finally:
            os.sched_setaffinity(0, mask)
    assert engine.lm._tuner.cores == 2
    assert after_the_prompt == 1, "the prompt's read, its thread waiting for a core, left the tuner with both"
    assert engine.lm._tuner.current == 1, "the tuner went back to both cores beside a model"
