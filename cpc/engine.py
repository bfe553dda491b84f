"""One model, loaded once, with every stage of the engine wired to it.

The model's own vocabulary, prefix index and tokenizer (re-encoding must use
the tokenizer of the model that scores), the batched model, the byte beam
and the character prefix conditioner:

    >>> engine = Engine.load("smollm2")
    >>> engine.vocab.name, len(engine.index) > 49000
    ('SmolLM2-135M-Instruct.Q4_1.gguf', True)
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from cpc.beam import ByteBeam
from cpc.candidates import CandidateFinder
from cpc.conditioning import Conditioner
from cpc.gguf import GGUFModel
from cpc.index import PrefixIndex
from cpc.lm import LlamaLM
from cpc.models import Progress
from cpc.tokenizer import LlamaTokenizer
from cpc.vocab import Vocabulary


@dataclass(eq=False)
class Engine:
    """The loaded model and the stages that use it."""

    model: GGUFModel
    lm: LlamaLM
    tokenizer: LlamaTokenizer
    index: PrefixIndex
    finder: CandidateFinder
    beam: ByteBeam
    conditioner: Conditioner

    @property
    def vocab(self) -> Vocabulary:
        return self.tokenizer.vocab

    @classmethod
    def load(
        cls,
        model: str | os.PathLike | None = "default",
        *,
        n_ctx: int = 4096,
        n_seq: int = 8,
        threads: int | None = None,
        gpu_layers: int = 0,
        width: int = 16,
        threshold: float = 1e-6,
        max_prompt_tokens: int = 1024,
        progress: Progress | None = None,
    ) -> Engine:
        """Load a model (name or path) and build everything that depends on it.

        ``progress`` hears about each step (model file, weights, vocabulary,
        index); a missing or corrupt file raises `cpc.models.ModelError`.
        """
        report = progress or (lambda message, fraction: None)
        report("loading model weights", 0.0)
        gguf = GGUFModel.open(model, gpu_layers=gpu_layers, progress=progress)
        report("reading the vocabulary", 0.5)
        vocab = Vocabulary.from_gguf(gguf)
        report("indexing the vocabulary", 0.7)
        index = PrefixIndex(vocab)
        tokenizer = LlamaTokenizer(gguf, vocab)
        lm = LlamaLM(gguf, vocab, n_ctx=n_ctx, n_seq=n_seq, threads=threads)
        beam = ByteBeam(lm, index, width=width, threshold=threshold)
        finder = CandidateFinder(tokenizer, index)
        report("model ready", 1.0)
        return cls(
            model=gguf,
            lm=lm,
            tokenizer=tokenizer,
            index=index,
            finder=finder,
            beam=beam,
            conditioner=Conditioner(tokenizer, finder, beam, max_prompt_tokens=min(max_prompt_tokens, n_ctx - 512)),
        )
