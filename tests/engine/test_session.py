"""`cpc.session.CompletionSession`, the one door from the server into the engine, used directly: the load,
where the model runs, a completion and the suggestion cache that answers the keys typed through it, a
cold start, and a closed document."""

from __future__ import annotations

from dataclasses import replace

import pytest

from cpc.generate import Options
from cpc.session import CompletionSession, EngineSettings
from harness.threads import MODEL_THREADS

URI = "file:///session/shapes.py"
PREFIX = "class Box:\n    def __init__(self, width):\n        self.width = width\n\n    def area(self):\n        return self.wid"
OPTIONS = Options(max_tokens=6)


@pytest.fixture(scope="module")
def session() -> CompletionSession:
    loaded = CompletionSession()
    loaded.load(EngineSettings("smollm2", threads=MODEL_THREADS))
    return loaded


def test_before_a_load_the_door_says_so():
    empty = CompletionSession()
    assert not empty.ready and empty.placement() is None and empty.server_error is None
    with pytest.raises(RuntimeError, match="not loaded"):
        empty.complete(URI, PREFIX, "", OPTIONS)


def test_the_engine_says_where_it_runs(session):
    placement = session.placement()
    assert session.ready and placement["backend"] == "CPU" and placement["greedyInGraph"] is False
    assert session.server_error is None, "a model in this process has no server to fail"


def test_a_completion_then_the_keys_typed_through_it_come_from_the_cache(session):
    session.update_document(URI, PREFIX)
    first = session.complete(URI, PREFIX, "", OPTIONS)
    assert not first.from_cache and first.lm_calls > 0
    text = first.completions[0]
    assert text.startswith("th"), "self.wid|th: the cursor inside `width`"
    typed = session.complete(URI, PREFIX + text[0], "", OPTIONS)
    assert typed.from_cache and typed.completions[0] == text[1:] and typed.lm_calls == 0


def test_clear_makes_the_next_request_cold(session):
    session.update_document(URI, PREFIX)
    session.complete(URI, PREFIX, "", OPTIONS)
    session.clear()
    again = session.complete(URI, PREFIX, "", OPTIONS)
    assert not again.from_cache and again.lm_calls > 0


def test_a_closed_document_forgets_its_suggestions(session):
    session.update_document(URI, PREFIX)
    text = session.complete(URI, PREFIX, "", OPTIONS).completions[0]
    session.close_document(URI)
    assert session.cached(URI, PREFIX + text[0], "", OPTIONS) is None


def test_an_answer_from_the_whole_window_takes_the_place_of_a_cut_one(session):
    """The cache answers a request whatever its prompt budget (a whole window's answer serves a request that
    would cut it); ``refresh`` asks the model again and its answer replaces the one cached."""
    session.update_document(URI, PREFIX)
    session.clear()
    cut = session.complete(URI, PREFIX, "", replace(OPTIONS, prompt_budget_ms=1))
    assert session.cached(URI, PREFIX, "", replace(OPTIONS, prompt_budget_ms=None)).completions == cut.completions
    whole = session.complete(URI, PREFIX, "", replace(OPTIONS, prompt_budget_ms=None), refresh=True)
    assert not whole.from_cache and whole.lm_calls > 0 and not whole.cut_short
    assert session.cached(URI, PREFIX, "", replace(OPTIONS, prompt_budget_ms=1)).completions == whole.completions
