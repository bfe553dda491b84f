"""Shared fixtures (the real cl100k tokenizer and the two real GGUF models) and Hypothesis profiles.

Models are opened vocabulary-only (no weights) once per session.

Hypothesis profiles: ``ci`` (when ``CI=true``) is derandomized, so a green
main stays green; ``fuzz`` (``make fuzz``, ``CPC_FUZZ=N``) draws fresh random
examples, N times as many (`tests.strategies.examples`). A failure a fuzz run
finds becomes a pinned ``@example`` before it is fixed.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import settings

from cpc.candidates import CandidateFinder
from cpc.gguf import GGUFModel
from cpc.tokenizer import LlamaTokenizer

MODEL_NAMES = ["default", "smollm2"]

settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
settings.register_profile("fuzz", derandomize=False, print_blob=True)
if os.environ.get("CPC_FUZZ"):
    settings.load_profile("fuzz")
elif os.environ.get("CI", "").lower() in ("true", "1"):
    settings.load_profile("ci")


@pytest.fixture(scope="session")
def cl100k_finder() -> CandidateFinder:
    return CandidateFinder.for_cl100k()


@pytest.fixture(scope="session", params=MODEL_NAMES)
def model_finder(request) -> CandidateFinder:
    """A finder over each test model's own vocabulary and tokenizer."""
    return CandidateFinder(LlamaTokenizer(GGUFModel.open(request.param, vocab_only=True)))


@pytest.fixture(scope="session")
def gemma_tokenizer() -> LlamaTokenizer:
    return LlamaTokenizer(GGUFModel.open("default", vocab_only=True))


@pytest.fixture(scope="session")
def smollm2_tokenizer() -> LlamaTokenizer:
    return LlamaTokenizer(GGUFModel.open("smollm2", vocab_only=True))


@pytest.fixture(scope="session", params=MODEL_NAMES)
def engine(request):
    """Each test model, loaded with weights, with every stage wired to it."""
    from cpc.engine import Engine

    return Engine.load(request.param)
