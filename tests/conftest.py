"""Shared fixtures: the real cl100k tokenizer and the two real GGUF models.

Models are opened vocabulary-only (no weights) once per session.
"""

from __future__ import annotations

import pytest

from cpc.candidates import CandidateFinder
from cpc.gguf import GGUFModel
from cpc.tokenizer import LlamaTokenizer

MODEL_NAMES = ["default", "smollm2"]


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
