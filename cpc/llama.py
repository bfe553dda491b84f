"""The language model run in this process by llama.cpp: batched, stateful, each sequence in its own KV-cache stream.

`LlamaLM` implements `cpc.lm.LanguageModel` on llama-cpp-python's
low-level API:

    >>> from cpc.gguf import GGUFModel
    >>> from cpc.vocab import Vocabulary
    >>> model = GGUFModel.open("smollm2")
    >>> lm = LlamaLM(model, Vocabulary.from_gguf(model))
    >>> rows = lm.next_logprobs([lm.bos + (1604,), lm.bos + (1604, 1085)])  # "def", "def main"
    >>> rows.shape
    (2, 49152)

A greedy step's token and log-probability come from the logits in one
exponential pass and a maximum (`cpc.lm.greedy_choice`), or, for a model on
a GPU, from a normaliser computed in the model's graph (`cpc.backend_sampling`).

`LlamaLM` keeps ``n_seq`` sequences in llama.cpp's KV cache between calls,
each in its own stream. For every requested state it picks the sequence
that already holds the longest prefix of it, or copies a better one over
(``llama_memory_seq_cp``), drops what diverges (``llama_memory_seq_rm``)
and evaluates only the remaining tokens -- the states of a call together,
in one ``llama_batch``. A keystroke therefore costs a few tokens, not a
whole prompt. A prefix that several new states share (a cold prompt) is
evaluated once and then copied.

Why separate streams and not llama.cpp's unified cache, where a copy is
only metadata: with several sequences interleaved in a unified cache,
llama.cpp 0.3.36 returned logits that differ from a lone evaluation by up
to 0.08 in probability (tests/engine/test_llama.py pins the exact agreement we get
instead, on SmolLM2). What remains is llama.cpp's own: on the default model
(Gemma 3, mostly Q5_0 and Q8_0 weights) the logits depend on how a prompt's
tokens are split into decodes, by up to 0.09 in probability where two
tokens are close (docs/team-server.md measures what that does to texts).
"""

from __future__ import annotations

import ctypes
import math
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence

import llama_cpp
import numpy as np

from cpc.backend_sampling import GreedySummary
from cpc.gguf import GGUFModel, llama_log, llama_reason
from cpc.lm import (
    DEFAULT_CONTEXT_SIZE, INITIAL_PREFILL_RATE, DraftWalk, LanguageModel, LMStats, Normaliser, State, greedy_choice,
    log_normaliser, log_softmax, logprob_of,
)
from cpc.model_files import ModelError
from cpc.threads import ThreadTuner
from cpc.vocab import Vocabulary, common_prefix

OUTPUT_ROWS = 64
"""Rows of logits one ``llama_decode`` may make (llama.cpp's ``n_outputs_max``). llama.cpp sizes its
compute buffer by it, 1 MiB a row for Gemma 3's 262,144 logits: 514 MiB at its default (the batch
size, 512), 65 MiB at 64. The most a call asks is a draft's check (8 states of 7 tokens and the one
after) and a chunk of `LanguageModel.token_logprobs`; `_evaluate` splits any batch that asks more."""

KV_STREAMS = 3
"""Sequences (`n_seq`) kept in the KV cache when it is in the host's memory: 22.5 MiB each for the default
model (1,280 tokens, sliding-window layers kept whole; llama.cpp zeroes the cache, so all of it is
resident from the load on). Typing asks for few: on 10 lines typed key by key, 473 of 499 evaluations
asked for one state. The few that ask for more are split into decodes of three, which on a CPU cost
about what one decode of all of them does. Four instead of eight took 108 MiB off the server's resident
memory, three instead of four 22.5 MiB more: 20 cursors completed cold with long and short prompts made
the same 622 decodes (cpc) in the same time (`benchmarks/profile_request.py`), 20 lines typed key by key
the same model keystrokes in the same time (docs/reliability.md)."""

KV_STREAMS_ON_GPU = 8
"""`KV_STREAMS` for a model on a GPU: the cache lives in the device's memory, and there eight rows in a
decode cost little more than four (2.4 against 1.7 ms in docs/gpu.md's run)."""

PREFILL_CHUNK = 128
"""Tokens per ``llama_decode`` when a long prompt is read: the interrupt is polled between chunks
and each chunk read is kept, so the next request goes on from where an obsolete one stopped.
Work made obsolete is broken into at once (`LanguageModel.stop_now`), and then only the chunk in
flight is lost. On 2 cores the default model reads a 1,024-token prompt at 531 tokens/s in
128-token chunks against 467 in 32-token ones (556 in 256-token ones, which lose twice the work
to a stop); a cut window of 64-127 tokens is one decode."""

_DECODE_ABORTED = 2
_ABORT_WHEN_SET = llama_cpp.ggml_abort_callback(ctypes.cast(ctypes.CDLL(None).strlen, ctypes.c_void_p).value)
"""llama.cpp's abort callback, asked ``callback(data)`` after every graph node on its compute thread:
C's ``strlen`` over a zeroed two-byte flag, true once the first byte is set. A Python callback
would take the GIL hundreds of times per decode, waiting on the server's event loop."""


class LlamaLM(LanguageModel):
    """A GGUF model evaluated with llama.cpp, several sequences per batch."""

    def __init__(
        self,
        model: GGUFModel,
        vocab: Vocabulary,
        *,
        n_ctx: int = DEFAULT_CONTEXT_SIZE,
        n_seq: int | None = None,
        n_batch: int = 512,
        threads: int | None = None,
        states_per_decode: int | None = None,
        backend_greedy: bool | None = None,
    ) -> None:
        """``n_ctx`` tokens per sequence, ``n_seq`` sequences kept in the KV cache (by default `KV_STREAMS`, or
        `KV_STREAMS_ON_GPU` for a model whose layers are on a GPU).

        ``states_per_decode`` (default ``n_seq``) caps how many states share
        one ``llama_decode``; 1 evaluates one sequence per call.
        ``backend_greedy`` computes a greedy step's normaliser in the model's
        graph (`cpc.backend_sampling`); by default, when the model's layers
        are on a GPU. ``threads`` fixes the CPU threads; by default every
        core, or fewer while other processes hold cores (`cpc.threads`).
        """
        on_gpu = model.placement is not None and model.placement.offloaded > 0
        n_seq = n_seq or (KV_STREAMS_ON_GPU if on_gpu else KV_STREAMS)
        self.model = model
        self.vocab = vocab
        self.n_ctx = n_ctx
        self.n_seq = n_seq
        self.n_batch = n_batch
        self.states_per_decode = min(states_per_decode or n_seq, n_seq)
        self.n_vocab = model.n_vocab
        self.stats = LMStats()
        self._tuner = None if threads else ThreadTuner(len(os.sched_getaffinity(0)), device=on_gpu)
        self._threads = threads or len(os.sched_getaffinity(0))
        backend_greedy = on_gpu if backend_greedy is None else backend_greedy
        self._ctx = _new_context(model, n_ctx, n_seq, n_batch, self._threads, backend_greedy)
        self._memory = llama_cpp.llama_get_memory(self._ctx)
        self._greedy_summary = GreedySummary.on(self._ctx, n_seq) if backend_greedy else None
        self._batch = llama_cpp.llama_batch_init(n_batch, 0, 1)
        self._abort_flag = ctypes.create_string_buffer(2)
        llama_cpp.llama_set_abort_callback(self._ctx, _ABORT_WHEN_SET, ctypes.cast(self._abort_flag, ctypes.c_void_p))
        self._slots: list[np.ndarray] = [np.empty(0, dtype=np.int64) for _ in range(n_seq)]
        self._last_used = [0] * n_seq
        self._clock = 0
        self.bos = (model.document_start(),)
        self.prefill_rate = INITIAL_PREFILL_RATE
        self._rows_in_batch = 0
        self._decode_ms: dict[int, float] = {}
        """Milliseconds per decode whose every token has a row of logits, by rows (at most `_TIMED_ROWS`)."""

    def __del__(self) -> None:
        if sys.is_finalizing():  # finalizers run in any order then: the process frees it all
            return
        if getattr(self, "_batch", None) is not None:
            llama_cpp.llama_batch_free(self._batch)
            self._batch = None
        if getattr(self, "_ctx", None):
            if getattr(self, "_greedy_summary", None) is not None:
                self._greedy_summary.detach(self._ctx)
            llama_cpp.llama_free(self._ctx)
            self._ctx = None

    def check_interrupt(self) -> None:
        self._abort_flag[0] = 0  # a stop asked from now on breaks into the next decode
        super().check_interrupt()

    def stop_now(self) -> None:
        self._abort_flag[0] = 1  # llama.cpp stops after the graph node it computes and drops the batch

    def reset(self) -> None:
        """Forget the KV cache (the next call evaluates every token again)."""
        llama_cpp.llama_memory_clear(self._memory, False)
        self._last_used = [0] * self.n_seq
        self._slots = [np.empty(0, dtype=np.int64) for _ in range(self.n_seq)]

    def next_logprobs(self, states: Sequence[Sequence[int]], *, greedy: bool = False) -> np.ndarray:
        return self._rows(states, self._log_softmax)

    def next_scores(self, states: Sequence[Sequence[int]]) -> np.ndarray:
        # llama.cpp's logits as they are: one copy, no pass
        return self._rows(states, lambda row, batch_index: np.copyto(row, self._logits(batch_index)))

    @property
    def backend_greedy(self) -> bool:
        """Whether a greedy step's normaliser is computed in the model's graph (`cpc.backend_sampling`)."""
        return self._greedy_summary is not None

    def greedy_next(self, states: Sequence[Sequence[int]], banned: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        tokens = np.empty(len(states), dtype=np.int64)
        logprobs = np.empty(len(states))
        scratch = np.empty(self.n_vocab, dtype=np.float32)

        def choose(number: int, batch_index: int) -> None:
            logits = self._logits(batch_index)
            normaliser = self._backend_normaliser(batch_index, logits)
            token = int(logits.argmax()) if normaliser is not None else -1
            if normaliser is None or banned[token] or logits[token] != normaliser[0]:
                tokens[number], logprobs[number] = greedy_choice(logits, banned, scratch)  # the host's own path
            else:
                tokens[number], logprobs[number] = token, logprob_of(logits, token, normaliser)
                self.stats.summarised += 1

        order = self._answer(states, choose)
        return _as_asked(order, states, tokens), _as_asked(order, states, logprobs)

    def check_cost(self, rows: int) -> float | None:
        return self._decode_ms.get(rows)

    def check_drafts(self, states: Sequence[Sequence[int]], drafts: Sequence[Sequence[int]],
                     choose: Callable[[int, int, np.ndarray], int | None]) -> list[State]:
        """Each state and its draft in one sequence of the KV cache, read in one evaluation with logits for
        the rows the walk may need; a row past a state's first departure from its draft is not looked at,
        and the cells past its accepted tokens are dropped."""
        whole = [(*state, *draft) for state, draft in zip(states, drafts)]
        if len(self.distinct_states(whole)) < len(whole) or len(whole) > self.n_seq:
            return super().check_drafts(states, drafts, choose)  # the same sequence twice: the plain way
        arrays = [np.asarray(sequence, dtype=np.int64) for sequence in whole]
        self.check_interrupt()
        walks = [DraftWalk(draft) for draft in drafts]

        def take(number: int, position: int, batch_index: int) -> None:
            walk = walks[number]
            if walk.goes_on(position):
                walk.take(choose(number, position, self._logits(batch_index)))

        self.stats.calls += 1
        self.stats.states += sum(len(draft) + 1 for draft in drafts)
        targets = self._evaluate(arrays, take, outputs=[len(draft) + 1 for draft in drafts])
        for number, (state, walk) in enumerate(zip(states, walks)):
            kept = len(state) + walk.accepted()
            target = int(targets[number])
            if len(self._slots[target]) > kept:
                llama_cpp.llama_memory_seq_rm(self._memory, target, kept, -1)
                self._slots[target] = self._slots[target][:kept]
        self._count_drafts(walks)
        return [tuple(walk.tokens) for walk in walks]

    def _rows(self, states: Sequence[Sequence[int]], write: Callable[[np.ndarray, int], object]) -> np.ndarray:
        """One row per state: ``write(row, batch_index)`` makes it from that batch entry's logits."""
        rows = np.empty((len(states), self.n_vocab), dtype=np.float32)
        order = self._answer(states, lambda number, batch_index: write(rows[number], batch_index))
        return _as_asked(order, states, rows)

    def _log_softmax(self, row: np.ndarray, batch_index: int) -> None:
        """A batch entry's log-probabilities, normalised by the graph's summary where there is one (a fused
        greedy step's row on a GPU: three passes over the row instead of six, none of them exponentials)."""
        logits = self._logits(batch_index)
        normaliser = self._backend_normaliser(batch_index, logits)
        if normaliser is not None and logits.max() != normaliser[0]:
            normaliser = None  # not this row's summary: the host normalises it
        log_softmax(row, logits, normaliser)
        self.stats.summarised += normaliser is not None

    def _backend_normaliser(self, batch_index: int, logits: np.ndarray) -> Normaliser | None:
        """The greedy summary's normaliser of a batch entry (None without one, or when it cannot be
        right: a log-sum outside ``[0, log(vocabulary)]``)."""
        pointer = llama_cpp.llama_get_sampled_probs_ith(self._ctx, batch_index) if self.backend_greedy else None
        if not pointer:
            return None
        maximum, log_sum = np.ctypeslib.as_array(pointer, (2,))
        return (maximum, log_sum) if 0.0 <= log_sum <= math.log(len(logits)) + 1e-3 else None

    def _answer(self, states: Sequence[Sequence[int]], take: Callable[[int, int], None]) -> dict[State, int]:
        """Evaluate each distinct state once and call ``take(number, batch_index)`` right after the
        decode that made its logits (`_logits`); returns the states' numbers."""
        unique = self.distinct_states(states)
        self.check_interrupt()
        order = list(unique)
        self.stats.calls += 1
        self.stats.states += len(order)
        step = self.states_per_decode
        for start in range(0, len(order), step):
            self._evaluate(order[start : start + step], lambda number, _, batch_index, first=start: take(first + number, batch_index))
        return unique

    def cached_length(self, state: Sequence[int]) -> int:
        array = np.asarray(state, dtype=np.int64)
        return max(common_prefix(slot, array) for slot in self._slots)

    def prefill(self, state: Sequence[int]) -> int:
        state = tuple(state)
        if len(state) > self.n_ctx:
            raise ValueError(f"a state of {len(state)} tokens does not fit the context of {self.n_ctx}")
        missing = len(state) - self.cached_length(state)
        if missing <= 0:
            return 0
        self.check_interrupt()
        before = self.stats.tokens
        try:
            self._evaluate([state], None)
        finally:
            self.stats.prefilled += self.stats.tokens - before
        return missing

    def token_logprobs(self, tokens: Sequence[int]) -> np.ndarray:
        tokens = np.asarray(tokens, dtype=np.int64)
        if len(tokens) > self.n_ctx:
            raise ValueError(f"{len(tokens)} tokens do not fit the context of {self.n_ctx}")
        self.stats.calls += 1
        llama_cpp.llama_memory_seq_rm(self._memory, 0, -1, -1)
        self._slots[0] = tokens[:0]
        result = np.empty(len(tokens) - 1, dtype=np.float64)
        scratch = np.empty(self.n_vocab, dtype=np.float32)
        for start in range(0, len(tokens) - 1, OUTPUT_ROWS):  # every position needs its logits
            positions = range(start, min(start + OUTPUT_ROWS, len(tokens) - 1))
            self._fill([(int(tokens[pos]), pos, 0, pos) for pos in positions])
            self._decode()
            for k, pos in enumerate(positions):
                logits = self._logits(k)
                result[pos] = logprob_of(logits, tokens[pos + 1], log_normaliser(logits, scratch))
            self._slots[0] = tokens[: positions.stop]
        return result

    def _evaluate(self, states: list[State] | list[np.ndarray], take: Callable[[int, int, int], None] | None,
                  outputs: Sequence[int] | None = None) -> np.ndarray:
        """Call ``take(number, row, batch_index)`` for each of the last ``outputs[number]`` positions (one by
        default) of every state (at most ``n_seq``), in order, right after the decode that made its logits
        (``take`` None: read the states, no logits). Returns the sequence each state went to.

        Long work goes in chunks of `PREFILL_CHUNK`: between them the
        interrupt is polled, and each slot records what it holds so far, so
        an interrupted prompt is not read again.
        """
        arrays = [np.asarray(state, dtype=np.int64) for state in states]
        rows = np.zeros(len(arrays), dtype=np.int64) if take is None else np.asarray(outputs or [1] * len(arrays))
        lengths = np.array([len(state) for state in arrays])
        self._prefill_shared(arrays, rows)
        placed = self._one_past_a_slot(arrays, rows)
        if placed is None:
            cached = np.array([[common_prefix(slot, state) for slot in self._slots] for state in arrays])
            cached = np.minimum(cached, (lengths - rows)[:, None])  # the rows with logits are always evaluated
            placed = self._arrange(cached)
        targets, reuse = placed
        work: list[_Work] = []
        for i, state in enumerate(arrays):
            self._slots[targets[i]] = state[: reuse[i]]
            first_row = len(state) - rows[i]
            for pos in range(int(reuse[i]), len(state)):
                work.append((int(state[pos]), pos, int(targets[i]), i if pos >= first_row else -1))
        owner = {int(target): i for i, target in enumerate(targets)}
        for number, chunk in enumerate(_decodes(work)):
            if number:
                self.check_interrupt()
            self._fill(chunk)
            began = time.perf_counter()
            self._decode()
            self._time_prefill(len(chunk), time.perf_counter() - began)
            reached: dict[int, int] = {}
            for batch_index, (_, pos, seq, state) in enumerate(chunk):
                if state >= 0:
                    take(state, pos - int(lengths[state] - rows[state]), batch_index)
                reached[seq] = pos + 1
            for seq, length in reached.items():  # what each slot holds now, once per chunk
                self._slots[seq] = arrays[owner[seq]][:length]
        return targets

    def _time_prefill(self, tokens: int, seconds: float) -> None:
        """Keep `prefill_rate` current from the chunks of a long read."""
        if tokens >= PREFILL_CHUNK // 2 and seconds > 0:
            self.prefill_rate = 0.7 * self.prefill_rate + 0.3 * tokens / seconds

    def _prefill_shared(self, arrays: list[np.ndarray], rows: np.ndarray) -> None:
        """Evaluate once the new prefix that all states share (a cold prompt), before it is copied
        (up to the first position any state needs ``rows`` of logits from)."""
        if len(arrays) < 2:
            return
        shared = int(min(len(a) - max(r, 1) for a, r in zip(arrays, rows)))
        for other in arrays[1:]:
            shared = min(shared, common_prefix(arrays[0], other))
        best = max(range(self.n_seq), key=lambda k: common_prefix(self._slots[k], arrays[0]))
        have = min(common_prefix(self._slots[best], arrays[0]), shared)
        if shared - have < _COPY_GAIN:
            return
        llama_cpp.llama_memory_seq_rm(self._memory, best, have, -1)
        prefix = arrays[0][:shared]
        self._slots[best] = prefix[:have]
        for start in range(have, shared, PREFILL_CHUNK):
            stop = min(start + PREFILL_CHUNK, shared)
            self._fill([(int(prefix[pos]), pos, best, -1) for pos in range(start, stop)])
            began = time.perf_counter()
            self._decode()
            self._time_prefill(stop - start, time.perf_counter() - began)
            self._slots[best] = prefix[:stop]
            self.check_interrupt()

    def _one_past_a_slot(self, arrays: list[np.ndarray], rows: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """The placement of the commonest call, one state whose rows with logits start right after what a
        slot holds (a greedy step, a beam extension, a draft): that slot, without comparing the state to
        every slot. None otherwise."""
        if len(arrays) != 1 or rows[0] < 1 or len(arrays[0]) <= rows[0]:
            return None
        state = arrays[0]
        held = len(state) - int(rows[0])
        for slot_number, slot in enumerate(self._slots):
            if len(slot) == held and slot[-1] == state[held - 1] and np.array_equal(slot, state[:held]):
                self._clock += 1
                self._last_used[slot_number] = self._clock
                return np.array([slot_number]), np.array([held])
        return None

    def _arrange(self, cached: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Pick a slot per state and give it the state's reusable prefix.

        Returns the target slots and how many tokens each state reuses. A
        state extends the slot holding its longest prefix when it is free;
        otherwise it takes the least recently used slot that no one needs,
        and the prefix is copied there. Stream copies are applied lazily (at
        the next decode), so a copy target is never also a copy source.
        """
        memory = self._memory
        count, n_slots = cached.shape
        best = cached.argmax(axis=1)
        by_reuse = sorted(range(count), key=lambda i: -cached[i, best[i]])
        targets = np.full(count, -1)
        for i in by_reuse:
            # Extending in place is free, but cutting a slot back loses a
            # branch the beam may come back to: such a state moves to a
            # spare slot (with a copy) while there is one.
            if best[i] not in targets and cached[i, best[i]] >= len(self._slots[best[i]]) - 1:
                targets[i] = best[i]
        sources = {int(best[i]) for i in range(count) if targets[i] < 0}
        spare = sorted(
            (k for k in range(n_slots) if k not in targets and k not in sources), key=self._last_used.__getitem__
        )
        reuse = np.zeros(count, dtype=np.int64)
        for i in by_reuse:
            if targets[i] < 0:
                if spare:
                    target = spare.pop(0)
                elif best[i] not in targets:
                    target = best[i]
                else:
                    target = next(k for k in range(n_slots) if k not in targets)
                targets[i] = target
                if target not in sources and cached[i, best[i]] - cached[i, target] >= _COPY_GAIN:
                    llama_cpp.llama_memory_seq_rm(memory, target, -1, -1)
                    llama_cpp.llama_memory_seq_cp(memory, int(best[i]), target, -1, -1)
                    reuse[i] = cached[i, best[i]]
                    continue
            reuse[i] = cached[i, targets[i]]
        for i, target in enumerate(targets):
            llama_cpp.llama_memory_seq_rm(memory, int(target), int(reuse[i]), -1)
            self._clock += 1
            self._last_used[target] = self._clock
        return targets, reuse

    def _fill(self, items: list[_Work]) -> None:
        """Put work items into the batch: a token, its position, its sequence, logits or not."""
        batch = self._batch
        for k, (token, pos, seq, state) in enumerate(items):
            batch.token[k] = token
            batch.pos[k] = pos
            batch.n_seq_id[k] = 1
            batch.seq_id[k][0] = seq
            batch.logits[k] = state >= 0
        batch.n_tokens = len(items)
        self._rows_in_batch = sum(item[3] >= 0 for item in items)
        self.stats.tokens += len(items)

    def _decode(self) -> None:
        self.stats.decodes += 1
        rows = self._rows_in_batch
        # The tuner compares the times of one-token steps that read their logits: a token read without them
        # (the end of a prompt read ahead) skips the output layer, costs 0.4 of a step, and would pass for an
        # idle machine's speed that no step reaches again: the tuner would then hold one thread fewer on an
        # idle machine. How long the thread waited for a core it learns from every decode.
        one_step = self._batch.n_tokens == 1 and rows == 1
        if self._tuner is not None:
            self._use_threads(self._tuner.next() if one_step else self._tuner.current)
        began, began_cpu = time.perf_counter(), time.thread_time()
        status = llama_cpp.llama_decode(self._ctx, self._batch)
        while status == _DECODE_ABORTED:  # `stop_now`: llama.cpp dropped the batch's positions from the cache
            self.check_interrupt()  # stale work stops here; a stop asked of the work before is no reason
            status = llama_cpp.llama_decode(self._ctx, self._batch)
        elapsed = (time.perf_counter() - began) * 1000
        if status == 0 and self._tuner is not None:
            self._tuner.record(self._threads, elapsed, (time.thread_time() - began_cpu) * 1000, step=one_step)
        if status == 0 and rows == self._batch.n_tokens and rows <= _TIMED_ROWS:
            # what a check of this many rows costs (`check_cost`): a moving average, as the machine's load moves
            known = self._decode_ms.get(rows)
            self._decode_ms[rows] = elapsed if known is None else 0.7 * known + 0.3 * elapsed
        if status != 0:
            # The cache state is unknown after a failed batch: start clean next time.
            self.reset()
            raise RuntimeError(
                f"llama_decode failed with status {status}"
                + (" (the KV cache is full: raise n_ctx)" if status == 1 else "")
            )

    def _use_threads(self, threads: int) -> None:
        if threads != self._threads:
            llama_cpp.llama_set_n_threads(self._ctx, threads, threads)
            self._threads = threads

    def _logits(self, batch_index: int) -> np.ndarray:
        """The logits of a batch entry, in llama.cpp's buffer (a view, valid until the next decode); with
        the greedy summary on the backend, the row it passed on."""
        read = llama_cpp.llama_get_sampled_logits_ith if self.backend_greedy else llama_cpp.llama_get_logits_ith
        pointer = read(self._ctx, batch_index)
        if not pointer:
            raise RuntimeError(f"llama.cpp has no logits for batch entry {batch_index}")
        return np.ctypeslib.as_array(ctypes.cast(pointer, ctypes.POINTER(ctypes.c_float)), (self.n_vocab,))


def _decodes(work: list[_Work]) -> Iterator[list[_Work]]:
    """The work in ``llama_decode`` batches of at most `PREFILL_CHUNK` tokens and `OUTPUT_ROWS` rows of logits.

    >>> [len(batch) for batch in _decodes([(0, pos, 0, -1) for pos in range(300)])]
    [128, 128, 44]
    >>> [len(batch) for batch in _decodes([(0, pos, pos % 9, 0) for pos in range(72)])]
    [64, 8]
    """
    batch: list[_Work] = []
    rows = 0
    for item in work:
        if len(batch) == PREFILL_CHUNK or (item[3] >= 0 and rows == OUTPUT_ROWS):
            yield batch
            batch, rows = [], 0
        batch.append(item)
        rows += item[3] >= 0
    if batch:
        yield batch


def _as_asked(order: dict[State, int], states: Sequence[Sequence[int]], answers: np.ndarray) -> np.ndarray:
    """Answers numbered by distinct state (`LanguageModel.distinct_states`), one per state asked."""
    if len(order) == len(states):  # no state asked twice: the answers are in the order asked
        return answers
    return answers[[order[tuple(state)] for state in states]]


def _new_context(model: GGUFModel, n_ctx: int, n_seq: int, n_batch: int, threads: int,
                 backend_greedy: bool) -> llama_cpp.llama_context_p:
    """A llama.cpp context of ``n_seq`` sequences of ``n_ctx`` tokens, each in a KV stream of its own."""
    params = llama_cpp.llama_context_default_params()
    params.n_ctx = n_ctx * n_seq
    params.n_batch = params.n_ubatch = n_batch
    params.n_outputs_max = max(OUTPUT_ROWS, n_seq)  # llama.cpp keeps a row per sequence at least
    params.n_seq_max = n_seq
    params.n_threads = params.n_threads_batch = threads
    params.kv_unified = False  # one stream per sequence: exact results (see the module docstring)
    params.swa_full = True  # sliding-window layers keep every position, so any prefix can be reused
    params.no_perf = True
    if backend_greedy:
        params.n_outputs_max_per_seq = 0  # any number of outputs per sequence (token_logprobs asks 64)
    _check_context_fits(model, n_ctx, n_seq)
    with llama_log() as errors:
        context = llama_cpp.llama_init_from_model(model.handle, params)
    if not context:
        raise ModelError(
            f"llama.cpp could not create a context of {n_ctx} tokens x {n_seq} sequences for "
            f"{model.path.name} ({llama_reason(errors)}) -- lower the `contextSize` setting"
        )
    return context


def _check_context_fits(model: GGUFModel, n_ctx: int, n_seq: int) -> None:
    """Refuse a context llama.cpp cannot address or this machine cannot hold, before allocating it.

    llama.cpp zeroes its KV cache as soon as it is allocated: a cache larger
    than the free memory (but not the total) would bring in the OOM killer
    instead of a failed allocation.
    """
    tokens = n_ctx * n_seq
    if not 1 <= tokens < 2**32:
        raise ModelError(
            f"a context of {n_ctx} tokens x {n_seq} sequences is outside what llama.cpp can address -- "
            "set `contextSize` between 512 and a few thousand"
        )
    if model.gpu_layers and llama_cpp.llama_supports_gpu_offload():
        return  # the cache lives on the GPU; llama.cpp reports a failed allocation there itself
    needed = tokens * model.kv_bytes_per_token()
    available = _available_memory()
    if available is not None and needed > available:
        raise ModelError(
            f"a context of {n_ctx} tokens x {n_seq} sequences needs {needed / 2**30:.1f} GiB for the KV cache "
            f"of {model.path.name}, and {available / 2**30:.1f} GiB of memory is available -- "
            "lower the `contextSize` setting"
        )


def _available_memory() -> int | None:
    """Bytes of memory the system can give without swapping (Linux), or None when unknown."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


_Work = tuple[int, int, int, int]
"""One batch entry: token, position, sequence, and the state whose last token
it is (-1 when no logits are wanted)."""

_TIMED_ROWS = 16
"""Decodes of up to this many rows are timed for `LlamaLM.check_cost` (a draft's check is at most that)."""

_COPY_GAIN = 4  # copying a sequence's stream pays off once it saves this many tokens
