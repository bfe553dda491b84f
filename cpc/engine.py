"""One model, loaded once, with every stage of the engine wired to it.

The model's own vocabulary, prefix index and tokenizer (re-encoding must use
the tokenizer of the model that scores), the batched model, the byte beam
and the character prefix conditioner. The model runs in-process (llama.cpp),
or on a shared server when ``model`` is its address (``http://HOST:PORT``,
`cpc.remote`; several replicas' addresses: `cpc.replicas`), with the
vocabulary of a local GGUF of the same model:

    >>> engine = Engine.load("smollm2")
    >>> engine.vocab.name, len(engine.index) > 49000
    ('SmolLM2-135M-Instruct.Q4_1.gguf', True)
"""

from __future__ import annotations

import os
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cpc.beam import ByteBeam
from cpc.candidates import CandidateFinder
from cpc.conditioning import Conditioner
from cpc.draft import DraftPolicy
from cpc.gguf import GGUFModel
from cpc.index import PrefixIndex
from cpc.llama import LlamaLM
from cpc.lm import DEFAULT_CONTEXT_SIZE, INITIAL_PREFILL_RATE, LanguageModel
from cpc.model_files import Progress
from cpc.remote import RemoteLM, RemoteOptions, is_remote
from cpc.replicas import ReplicatedLM, remote_lm
from cpc.tokenizer import LlamaTokenizer
from cpc.vocab import Vocabulary
from cpc.window import MAX_PROMPT_TOKENS, Window, context_for, prompt_tokens_for

READING_SAMPLE_CHARS = 1200
"""Characters of real text (code and prose, some 300 tokens) `Engine.time_reading` reads and times."""


@dataclass(frozen=True)
class Score:
    """A text's byte-level log-probability next to its canonical tokenization's (natural logs)."""

    bytes: int
    tokens: int
    """Canonical tokens of the text."""
    logprob_bytes: float
    """The beam's sum over tokenizations: ``log P(the text starts with these bytes)``."""
    logprob_canonical: float
    """The canonical tokenization alone, with the same model numbers (one term of that sum)."""
    logprob_canonical_direct: float
    """The canonical tokenization scored in one straight pass (softmax over every token)."""
    elapsed_ms: float
    lm_calls: int

    @property
    def bits_per_byte(self) -> float:
        return -self.logprob_bytes / math.log(2) / max(1, self.bytes)


@dataclass(eq=False)
class Engine:
    """The loaded model and the stages that use it."""

    gguf: GGUFModel
    """The GGUF file: the whole model, or only its vocabulary when the model runs on a server."""
    lm: LanguageModel
    tokenizer: LlamaTokenizer
    index: PrefixIndex
    finder: CandidateFinder
    beam: ByteBeam
    conditioner: Conditioner
    prompt_tokens: int = MAX_PROMPT_TOKENS
    """The prompt window's size: tokens of text before the cursor the model reads at most (`cpc.window`)."""
    drafts: DraftPolicy = field(default_factory=DraftPolicy)
    """How much of a speculative draft to check (it learns how often drafts are kept)."""

    @property
    def vocab(self) -> Vocabulary:
        return self.tokenizer.vocab

    def window(self, document: str, cursor: int | None = None) -> Window:
        """The text this engine reads around ``cursor`` (a character offset into ``document``; None: its end).

        >>> Engine.load("smollm2").window("import os\\nos.getc", 12)
        Window(prefix='import os\\nos', suffix='.getc')
        """
        return Window.at(document, cursor, self.prompt_tokens)

    def placement(self) -> dict[str, Any]:
        """Where the model runs: llama.cpp's backend and device, the layers offloaded there
        (`cpc.gguf.Placement`) and whether greedy steps are normalised there (``greedyInGraph``), or the
        server's address for a shared one.

        >>> Engine.load("smollm2").placement()["backend"]
        'CPU'
        """
        if isinstance(self.lm, (RemoteLM, ReplicatedLM)):
            url = self.lm.url
            where = (f"the model server at {url}" if isinstance(self.lm, RemoteLM) else
                     f"the model servers at {', '.join(replica.url for replica in self.lm.replicas)}")
            return {"backend": "server", "device": url, "offloadedLayers": None, "layers": None,
                    "gpuBuild": None, "greedyInGraph": None, "text": where}
        placement = self.gguf.placement.as_json()
        placement["greedyInGraph"] = self.lm.backend_greedy  # `cpc.backend_sampling`
        if self.lm.backend_greedy:
            placement["text"] += "; greedy steps normalised there"
        return placement

    @property
    def server_error(self) -> str | None:
        """Why the model's server did not answer the last time it was asked (None while it does, and for a
        model that runs in this process)."""
        return self.lm.last_error

    def clear(self) -> None:
        """Make the next request cold, for benchmarks and tests: no cached candidates, beams, snapshots or
        KV cache (on a server: the slot that served this client)."""
        self.conditioner.clear()

    def time_reading(self) -> None:
        """Read a sample prompt and time it, so that the first prompt-time budget (`cpc.window.fit_window`) is
        planned with this machine's reading speed (`cpc.lm.LanguageModel.prefill_rate`) instead of a guess. A
        shared server's speed is learnt from its answers instead.

        >>> engine = Engine.load("smollm2")
        >>> engine.time_reading(); engine.lm.prefill_rate != INITIAL_PREFILL_RATE
        True
        """
        if not isinstance(self.lm, LlamaLM):  # a server's speed is learnt from its answers
            return
        sample = Path(__file__).with_name("window.py").read_text(encoding="utf-8")[:READING_SAMPLE_CHARS]
        tokens = self.lm.bos + tuple(self.tokenizer.encode(sample.encode("utf-8")))
        self.lm.next_scores([tokens[:16]])  # the first read pages the weights in (`cpc.resident.release_mapped_pages`),
        # the output layer's too: not what a request pays
        self.clear()
        started = time.perf_counter()
        read = self.lm.prefill(tokens)
        self.lm.prefill_rate = read / max(time.perf_counter() - started, 1e-6)
        self.clear()

    @classmethod
    def load(
        cls,
        model: str | os.PathLike | None = "default",
        *,
        n_ctx: int = DEFAULT_CONTEXT_SIZE,
        n_seq: int | None = None,
        states_per_decode: int | None = None,
        threads: int | None = None,
        gpu_layers: int = 0,
        width: int = 8,
        threshold: float = 1e-2,
        prompt_tokens: int = MAX_PROMPT_TOKENS,
        fit_context: bool = False,
        progress: Progress | None = None,
        remote: RemoteOptions = RemoteOptions(),
    ) -> Engine:
        """Load a model (name, path or server address) and build everything that depends on it.

        ``progress`` hears about each step (model file, weights, vocabulary,
        index); a missing or corrupt file raises `cpc.model_files.ModelError`. A
        server is checked at once when it answers (`cpc.remote.RemoteMismatch`
        when it serves another model); one that does not answer yet is
        tried again at the first request.

        The beam keeps at most ``width`` candidates, none under ``threshold``
        times the best one's weight. Every candidate kept past the cursor's
        token costs a model state. 1e-2, rather than `cpc.beam.ByteBeam`'s
        1e-3, needs 273 states instead of 327 on 30 npm cursors; word exact
        is the same on npm's JavaScript and one or two boundary cases of 100
        lower on the standard library (docs/benchmarks.md).

        ``fit_context`` gives a model in this process no more than ``n_ctx``
        tokens of context per sequence that completions read
        (`cpc.window.context_for`): 1,280 of 1,536 for the default model,
        which reads no text after the cursor; the KV cache is 18 MiB smaller.
        """
        report = progress or (lambda message, fraction: None)
        served = is_remote(model)
        report("loading the vocabulary" if served else "loading model weights", 0.0)
        gguf = (
            GGUFModel.open(remote.vocab, vocab_only=True, progress=progress) if served
            else GGUFModel.open(model, gpu_layers=gpu_layers, progress=progress)
        )
        report("reading the vocabulary", 0.5)
        vocab = Vocabulary.from_gguf(gguf)
        report("indexing the vocabulary", 0.7)
        index = PrefixIndex(vocab)
        tokenizer = LlamaTokenizer(gguf, vocab)
        lm: LanguageModel
        if served:
            lm = remote_lm(str(model), tokenizer, index, n_ctx=n_ctx, options=remote)
            report(f"connecting to {model}", 0.9)
            lm.try_connect()
        else:
            if fit_context:
                n_ctx = context_for(n_ctx, prompt_tokens, reads_suffix=gguf.fim_tokens() is not None)
            lm = LlamaLM(gguf, vocab, n_ctx=n_ctx, n_seq=n_seq, threads=threads, states_per_decode=states_per_decode)
        report("model ready", 1.0)
        return cls.wire(gguf, lm, tokenizer, index, width, threshold, prompt_tokens_for(n_ctx, prompt_tokens))

    @classmethod
    def wire(cls, gguf: GGUFModel, lm: LanguageModel, tokenizer: LlamaTokenizer, index: PrefixIndex, width: int,
             threshold: float, prompt_tokens: int) -> Engine:
        """The stages around a loaded model: candidates, the beam and the conditioner; a prompt window of
        ``prompt_tokens`` tokens."""
        beam = ByteBeam(lm, index, width=width, threshold=threshold)
        finder = CandidateFinder(tokenizer, index)
        conditioner = Conditioner(tokenizer, finder, beam)
        return cls(gguf=gguf, lm=lm, tokenizer=tokenizer, index=index, finder=finder, beam=beam,
                   conditioner=conditioner, prompt_tokens=prompt_tokens)

    def score(self, data: bytes, progress: Callable[[int], None] | None = None) -> Score:
        """Score ``data`` as a prefix: the beam's byte-level log-probability and the canonical path's.

        The canonical tokenization is pinned in the beam, so pruning cannot
        drop it and ``logprob_bytes >= logprob_canonical`` always holds.

        >>> engine = Engine.load("smollm2")
        >>> score = engine.score(b"import os\\n")
        >>> score.logprob_bytes >= score.logprob_canonical
        True
        """
        started = time.perf_counter()
        calls = self.lm.stats.calls
        canonical = tuple(self.tokenizer.encode(data))
        start = self.lm.bos
        if len(start) + len(canonical) + 64 > self.lm.n_ctx:
            raise ValueError(
                f"the text has {len(canonical)} tokens and the context holds {self.lm.n_ctx}: "
                "load the engine with a larger n_ctx or score a shorter text"
            )
        direct = float(self.lm.token_logprobs(start + canonical).sum())
        beam = self.beam.read(start, data, pin=canonical, progress=progress)
        pinned = beam.pinned
        return Score(
            bytes=len(data),
            tokens=len(canonical),
            logprob_bytes=beam.logprob,
            logprob_canonical=pinned.log_committed + math.log(pinned.snapshot.of(canonical[-1])),
            logprob_canonical_direct=direct,
            elapsed_ms=(time.perf_counter() - started) * 1000,
            lm_calls=self.lm.stats.calls - calls,
        )
