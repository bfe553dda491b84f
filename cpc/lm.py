"""The language model behind the beam: batched, stateful, llama.cpp underneath.

The interface has the shape of seed 004's fusion models: *states in,
next-token log-probabilities for every state out*, plus an end-of-sequence
score. A state is simply the token sequence the model has read (BOS
included), so callers never manage model memory:

    >>> from cpc.gguf import GGUFModel
    >>> from cpc.vocab import Vocabulary
    >>> model = GGUFModel.open("smollm2")
    >>> lm = LlamaLM(model, Vocabulary.from_gguf(model))
    >>> rows = lm.next_logprobs([lm.bos + (1604,), lm.bos + (1604, 1085)])  # "def", "def main"
    >>> rows.shape
    (2, 49152)

`LlamaLM` keeps up to ``n_seq`` sequences in llama.cpp's unified KV cache
between calls. For every requested state it finds the cached sequence that
shares the longest token prefix, shares those cells with
``llama_memory_seq_cp`` (a metadata copy in a unified cache), drops what
diverges with ``llama_memory_seq_rm``, and evaluates only the remaining
tokens -- all states of a call in one ``llama_batch``. A keystroke therefore
costs a few tokens, not a whole prompt.
"""

from __future__ import annotations

import ctypes
import os
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

import llama_cpp
import numpy as np

from cpc.gguf import GGUFModel
from cpc.models import ModelError
from cpc.vocab import Vocabulary

State = tuple[int, ...]


@dataclass
class LMStats:
    """Counters a benchmark reads: how often and how much the model ran."""

    calls: int = 0
    """`next_logprobs` / `token_logprobs` calls that needed the model."""
    decodes: int = 0
    """``llama_decode`` invocations (one batch each)."""
    tokens: int = 0
    """Tokens evaluated."""
    states: int = 0
    """States answered."""


class LanguageModel(ABC):
    """A batched next-token model over a `Vocabulary`."""

    vocab: Vocabulary
    bos: State
    """The tokens every state starts with: BOS, or the document separator."""
    stats: LMStats

    @abstractmethod
    def next_logprobs(self, states: Sequence[Sequence[int]]) -> np.ndarray:
        """``log P(next token | state)`` for every state: shape ``(len(states), len(vocab))``."""

    def eos_logprob(self, logprobs: np.ndarray) -> np.ndarray:
        """``log P(end of sequence | state)`` per row of `next_logprobs`' result."""
        eos = sorted(self.vocab.eos_ids)
        if not eos:
            return np.full(len(logprobs), -np.inf)
        return np.logaddexp.reduce(np.asarray(logprobs, dtype=np.float64)[:, eos], axis=1)

    def token_logprobs(self, tokens: Sequence[int]) -> np.ndarray:
        """``log P(tokens[i] | tokens[:i])`` for ``i`` in ``1 .. len(tokens)-1``.

        The score of one given token sequence; backends override it with a
        single pass over the sequence.
        """
        tokens = tuple(tokens)
        rows = self.next_logprobs([tokens[:i] for i in range(1, len(tokens))])
        return rows[np.arange(len(rows)), list(tokens[1:])].astype(np.float64)


class LlamaLM(LanguageModel):
    """A GGUF model evaluated with llama.cpp, several sequences per batch."""

    def __init__(
        self,
        model: GGUFModel,
        vocab: Vocabulary,
        *,
        n_ctx: int = 4096,
        n_seq: int = 8,
        n_batch: int = 512,
        threads: int | None = None,
    ) -> None:
        """``n_seq`` states are evaluated per batch (1 means one sequence per call)."""
        self.model = model
        self.vocab = vocab
        self.n_ctx = n_ctx
        self.n_seq = n_seq
        self.n_batch = n_batch
        self.n_vocab = model.n_vocab
        self.stats = LMStats()
        threads = threads or len(os.sched_getaffinity(0))
        params = llama_cpp.llama_context_default_params()
        params.n_ctx = n_ctx
        params.n_batch = params.n_ubatch = n_batch
        # Twice n_seq ids: the second half are scratch sequences that hold a
        # shared prefix while the first half are rearranged.
        params.n_seq_max = 2 * n_seq
        params.n_threads = params.n_threads_batch = threads
        params.kv_unified = True  # partial seq_cp is a metadata copy only in a unified cache
        params.swa_full = True  # sliding-window layers keep every position, so any prefix can be reused
        params.no_perf = True
        self._ctx = llama_cpp.llama_init_from_model(model.handle, params)
        if not self._ctx:
            raise ModelError(f"llama.cpp could not create a context for {model.path} (n_ctx={n_ctx})")
        self._memory = llama_cpp.llama_get_memory(self._ctx)
        self._batch = llama_cpp.llama_batch_init(n_batch, 0, n_seq)
        self._slots: list[np.ndarray] = [np.empty(0, dtype=np.int64) for _ in range(n_seq)]
        vocab_handle = model.vocab_handle
        self.bos = (_document_start(vocab_handle),)

    def __del__(self) -> None:
        if getattr(self, "_batch", None) is not None:
            llama_cpp.llama_batch_free(self._batch)
            self._batch = None
        if getattr(self, "_ctx", None):
            llama_cpp.llama_free(self._ctx)
            self._ctx = None

    @property
    def gpu_offload(self) -> bool:
        """Whether this llama-cpp-python build can offload layers to a GPU."""
        return bool(llama_cpp.llama_supports_gpu_offload())

    def reset(self) -> None:
        """Forget the KV cache (the next call evaluates every token again)."""
        llama_cpp.llama_memory_clear(self._memory, True)
        self._slots = [np.empty(0, dtype=np.int64) for _ in range(self.n_seq)]

    def next_logprobs(self, states: Sequence[Sequence[int]]) -> np.ndarray:
        unique: dict[State, int] = {}
        for state in states:
            state = tuple(state)
            if not state:
                raise ValueError("a state needs at least one token (start from lm.bos or a prompt)")
            if len(state) > self.n_ctx:
                raise ValueError(f"a state of {len(state)} tokens does not fit the context of {self.n_ctx}")
            unique.setdefault(state, len(unique))
        order = list(unique)
        rows = np.empty((len(order), self.n_vocab), dtype=np.float32)
        self.stats.calls += 1
        self.stats.states += len(order)
        for start in range(0, len(order), self.n_seq):
            self._evaluate(order[start : start + self.n_seq], rows[start : start + self.n_seq])
        return rows[[unique[tuple(state)] for state in states]]

    def token_logprobs(self, tokens: Sequence[int]) -> np.ndarray:
        tokens = np.asarray(tokens, dtype=np.int64)
        if len(tokens) > self.n_ctx:
            raise ValueError(f"{len(tokens)} tokens do not fit the context of {self.n_ctx}")
        self.stats.calls += 1
        llama_cpp.llama_memory_seq_rm(self._memory, 0, -1, -1)
        self._slots[0] = tokens[:0]
        result = np.empty(len(tokens) - 1, dtype=np.float64)
        # Every position needs its logits, and llama.cpp keeps n_outputs x
        # n_vocab floats per batch: small chunks keep that buffer small.
        chunk = 64
        for start in range(0, len(tokens) - 1, chunk):
            positions = range(start, min(start + chunk, len(tokens) - 1))
            self._fill([(int(tokens[pos]), pos, (0,), pos) for pos in positions])
            self._decode()
            for k, pos in enumerate(positions):
                result[pos] = self._logprobs(k)[tokens[pos + 1]]
            self._slots[0] = tokens[: positions.stop]
        return result

    def _evaluate(self, states: list[State], out: np.ndarray) -> None:
        """Logits after every state (at most ``n_seq``), in one or more batches."""
        arrays = [np.asarray(state, dtype=np.int64) for state in states]
        lengths = np.array([len(state) for state in arrays])
        cached = np.array([[_common_prefix(slot, state) for slot in self._slots] for state in arrays])
        cached = np.minimum(cached, (lengths - 1)[:, None])  # the last token is always evaluated
        targets = _assign_slots(cached)
        sources = cached.argmax(axis=1)
        reuse = cached[np.arange(len(arrays)), sources]
        sources = np.where(reuse > 0, sources, targets)
        self._arrange(sources, targets, reuse)
        for i, target in enumerate(targets):
            self._slots[target] = arrays[i][: reuse[i]]
        work = _shared_work(arrays, reuse, targets)
        for start in range(0, len(work), self.n_batch):
            chunk = work[start : start + self.n_batch]
            self._fill(chunk)
            self._decode()
            for batch_index, (_, _, _, state) in enumerate(chunk):
                if state >= 0:
                    out[state] = self._logprobs(batch_index)
        for i, target in enumerate(targets):
            self._slots[target] = arrays[i]

    def _arrange(self, sources: np.ndarray, targets: np.ndarray, reuse: np.ndarray) -> None:
        """Give each target slot the first ``reuse`` cached tokens of its source slot."""
        memory = self._memory
        scratch = self.n_seq
        # Phase 1: park each borrowed prefix on a scratch sequence, so that
        # rearranging the slots below cannot destroy a prefix still needed.
        for i, (source, target) in enumerate(zip(sources, targets)):
            if source != target:
                llama_cpp.llama_memory_seq_rm(memory, scratch + i, -1, -1)
                llama_cpp.llama_memory_seq_cp(memory, int(source), scratch + i, 0, int(reuse[i]))
        # Phase 2: each target slot keeps or receives its prefix and drops the rest.
        for i, (source, target) in enumerate(zip(sources, targets)):
            if source != target:
                llama_cpp.llama_memory_seq_rm(memory, int(target), -1, -1)
                llama_cpp.llama_memory_seq_cp(memory, scratch + i, int(target), -1, -1)
                llama_cpp.llama_memory_seq_rm(memory, scratch + i, -1, -1)
            else:
                llama_cpp.llama_memory_seq_rm(memory, int(target), int(reuse[i]), -1)

    def _fill(self, items: list[_Work]) -> None:
        """Put work items into the batch: a token, its position, its sequences, logits or not."""
        batch = self._batch
        for k, (token, pos, seqs, state) in enumerate(items):
            batch.token[k] = token
            batch.pos[k] = pos
            batch.n_seq_id[k] = len(seqs)
            for j, seq in enumerate(seqs):
                batch.seq_id[k][j] = seq
            batch.logits[k] = state >= 0
        batch.n_tokens = len(items)
        self.stats.tokens += len(items)

    def _decode(self) -> None:
        self.stats.decodes += 1
        status = llama_cpp.llama_decode(self._ctx, self._batch)
        if status != 0:
            # The cache state is unknown after a failed batch: start clean next time.
            self.reset()
            raise RuntimeError(
                f"llama_decode failed with status {status}"
                + (" (the KV cache is full: raise n_ctx)" if status == 1 else "")
            )

    def _logprobs(self, batch_index: int) -> np.ndarray:
        pointer = llama_cpp.llama_get_logits_ith(self._ctx, batch_index)
        if not pointer:
            raise RuntimeError(f"llama.cpp has no logits for batch entry {batch_index}")
        logits = np.ctypeslib.as_array(ctypes.cast(pointer, ctypes.POINTER(ctypes.c_float)), (self.n_vocab,))
        peak = logits.max()
        log_total = peak + np.log(np.exp(logits - peak, dtype=np.float64).sum())
        return (logits - log_total).astype(np.float32)


def _document_start(vocab_handle: llama_cpp.llama_vocab_p) -> int:
    """The token a document starts after: BOS, or end-of-text for models that add none.

    GPT-2-style models (SmolLM2) separate training documents with
    ``<|endoftext|>`` rather than starting them with BOS.
    """
    if llama_cpp.llama_vocab_get_add_bos(vocab_handle):
        return llama_cpp.llama_vocab_bos(vocab_handle)
    for token in (llama_cpp.llama_vocab_eot(vocab_handle), llama_cpp.llama_vocab_eos(vocab_handle)):
        if token >= 0:
            return token
    return llama_cpp.llama_vocab_bos(vocab_handle)


def _common_prefix(a: np.ndarray, b: np.ndarray) -> int:
    """Length of the longest common prefix of two token arrays."""
    n = min(len(a), len(b))
    if n == 0:
        return 0
    differ = np.flatnonzero(a[:n] != b[:n])
    return int(differ[0]) if len(differ) else n


_Work = tuple[int, int, tuple[int, ...], int]
"""One batch entry: token, position, the slots it is written to, the state whose
last token it is (-1 when no logits are wanted)."""


def _shared_work(arrays: list[np.ndarray], reuse: np.ndarray, targets: np.ndarray) -> list[_Work]:
    """The tokens to evaluate, each shared prefix once, in position order.

    State ``i`` needs positions ``reuse[i]:`` evaluated. A position that
    several states need and agree on up to there is evaluated once and
    written to all their slots (a token with several ``seq_id``s).
    """
    count = len(arrays)
    lengths = [len(a) for a in arrays]
    agree = [[_common_prefix(a, b) for b in arrays] for a in arrays]
    work: list[_Work] = []
    for i in range(count):
        pos = int(reuse[i])
        while pos < lengths[i]:
            members = [j for j in range(count) if agree[i][j] > pos and reuse[j] <= pos]
            if members[0] != i:  # an earlier state evaluates this stretch for both
                end = min([agree[i][j] for j in members] + [int(r) for r in reuse if r > pos] + [lengths[i]])
                pos = end
                continue
            end = min([agree[i][j] for j in members] + [int(r) for r in reuse if r > pos] + [lengths[i]])
            slots = tuple(int(targets[j]) for j in members)
            ends_here = {lengths[j] - 1: j for j in members}
            for p in range(pos, end):
                work.append((int(arrays[i][p]), p, slots, ends_here.get(p, -1)))
            pos = end
    work.sort(key=lambda item: item[1])  # every sequence sees its positions in order
    return work


def _assign_slots(shared: np.ndarray) -> np.ndarray:
    """A distinct slot per state, greedily keeping the longest shared prefixes in place."""
    n_states, n_slots = shared.shape
    targets = np.full(n_states, -1)
    taken = np.zeros(n_slots, dtype=bool)
    for flat in np.argsort(-shared, axis=None, kind="stable"):
        state, slot = divmod(int(flat), n_slots)
        if targets[state] < 0 and not taken[slot]:
            targets[state] = slot
            taken[slot] = True
    return targets
