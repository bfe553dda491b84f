"""Shared fixtures (the real cl100k tokenizer, the two real GGUF models, a unigram vocabulary) and Hypothesis profiles.

Models are opened vocabulary-only (no weights) once per session. The
vocabulary-only finders also run llama.cpp's third tokenizer family, T5's
unigram, on a vocabulary trained for the tests (`tests.support.unigram_model`);
it has no weights, so the engine stays on the two real models.

Hypothesis profiles: ``ci`` (when ``CI=true``) is derandomized, so a green
main stays green; ``fuzz`` (``make fuzz``, ``CPC_FUZZ=N``) draws fresh random
examples, N times as many (`tests.support.strategies.examples`). A failure a fuzz run
finds becomes a pinned ``@example`` before it is fixed.
"""

from __future__ import annotations

import cpc  # noqa: F401  (first: llama.cpp's libraries before numpy, see cpc/__init__.py)

import os

import pytest
from hypothesis import settings

from cpc.candidates import CandidateFinder
from cpc.gguf import GGUFModel
from cpc.tokenizer import LlamaTokenizer
from harness.threads import MODEL_THREADS
from tests.support.unigram_model import unigram_gguf

MODEL_NAMES = ["default", "smollm2"]
VOCABULARY_NAMES = [*MODEL_NAMES, "unigram"]

settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
settings.register_profile("fuzz", derandomize=False, print_blob=True)
if os.environ.get("CPC_FUZZ"):
    settings.load_profile("fuzz")
elif os.environ.get("CI", "").lower() in ("true", "1"):
    settings.load_profile("ci")


@pytest.fixture(scope="session")
def cl100k_finder() -> CandidateFinder:
    return CandidateFinder.for_cl100k()


@pytest.fixture(scope="session", params=VOCABULARY_NAMES)
def model_finder(request) -> CandidateFinder:
    """A finder over each test vocabulary's own tokenizer (Gemma's SentencePiece, SmolLM2's byte-level BPE, unigram)."""
    model = unigram_gguf() if request.param == "unigram" else request.param
    return CandidateFinder(LlamaTokenizer(GGUFModel.open(model, vocab_only=True)))


@pytest.fixture(scope="session")
def gemma_tokenizer() -> LlamaTokenizer:
    return LlamaTokenizer(GGUFModel.open("default", vocab_only=True))


@pytest.fixture(scope="session")
def smollm2_tokenizer() -> LlamaTokenizer:
    return LlamaTokenizer(GGUFModel.open("smollm2", vocab_only=True))


@pytest.fixture(scope="session")
def unigram_tokenizer() -> LlamaTokenizer:
    return LlamaTokenizer(GGUFModel.open(unigram_gguf(), vocab_only=True))


@pytest.fixture(scope="session", params=MODEL_NAMES)
def engine(request):
    """Each test model, loaded with weights, with every stage wired to it."""
    from cpc.engine import Engine

    return Engine.load(request.param, threads=MODEL_THREADS)
