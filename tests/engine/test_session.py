"""`cpc.session.CompletionSession`, the one door from the server into the engine, used directly: the load,
where the model runs, a completion and the suggestion cache that answers the keys typed through it, a
cold start, and a closed document."""

from __future__ import annotations

from dataclasses import replace

import pytest

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from cpc.generate import Options, generate
from cpc.session import (CompletionSession, EngineSettings, FusionWeights, RemoteOptions, Script, SuggestionCache,
                         replaced_after)
from cpc.window import Window
from harness.bench.closers import auto_closed
from harness.llama_server import LlamaServer
from harness.threads import MODEL_THREADS
from tests.support.strategies import examples

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
        empty.complete(URI, PREFIX, None, OPTIONS)


def test_the_model_is_given_the_context_its_completions_read(session):
    """A model that reads no text after the cursor gets the window and the room for the completion, not the
    whole `contextSize`: every token of context is resident KV cache from the load on."""
    from cpc.window import GENERATION_ROOM

    assert session.engine.gguf.fim_tokens() is None
    assert session.engine.lm.n_ctx == session.engine.prompt_tokens + GENERATION_ROOM < session.settings.context_size


def test_the_engine_says_where_it_runs(session):
    placement = session.placement()
    assert session.ready and placement["backend"] == "CPU" and placement["greedyInGraph"] is False
    assert session.server_error is None, "a model in this process has no server to fail"


def test_a_completion_then_the_keys_typed_through_it_come_from_the_cache(session):
    session.update_document(URI, PREFIX)
    first = session.complete(URI, PREFIX, None, OPTIONS)
    assert not first.from_cache and first.lm_calls > 0
    text = first.completions[0]
    assert text.startswith("th"), "self.wid|th: the cursor inside `width`"
    typed = session.complete(URI, PREFIX + text[0], None, OPTIONS)
    assert typed.from_cache and typed.completions[0] == text[1:] and typed.lm_calls == 0


def _typing(line: str, typed: int) -> Window:
    """The window after typing ``line[:typed]`` into an empty line of an editor that closes pairs."""
    before = "x = 0\n" + line[:typed]
    return Window.at(before + auto_closed(line[:typed]) + "\nnext\n", len(before))


def _accepted(window: Window, text: str) -> str:
    """The text around the cursor once ``text`` is accepted there (closers it takes in replaced)."""
    return window.prefix + text + window.suffix[replaced_after(text, window.suffix) :]


@pytest.mark.parametrize("line, shown_at, text, asked_at, rests", [
    ("def f(a):", 5, "(a):", 6, ["a):"]),  # "(" typed, ")" closed with it: the suggestion takes it in
    ('print("Hello, world")', 14, 'world")', 20, [")"]),  # the quote typed over
    ('print("Hello, world")', 14, 'world")', 21, None),  # all typed
    ("def f(a):", 5, "(a", 6, None),  # accepted after the "(", it would leave the closer twice
    ("f(a)[0]", 1, "(a)[0]", 5, ["0]"]),  # a pair closed, its closer typed over, another closed
])
def test_keys_an_editor_types_with_its_closers_are_answered_from_the_cache(line, shown_at, text, asked_at, rests):
    """An editor that closes pairs changes the text after the cursor as a line is typed: a suggestion typed
    through is still the cache's answer, where accepting its rest makes the same line."""
    cache = SuggestionCache()
    cache.remember(URI, _typing(line, shown_at), "options", [text])
    assert cache.lookup(URI, _typing(line, asked_at), "options") == rests


CODE_CHARS = st.text(alphabet="ab1 =,.:()[]{}\"'", min_size=2, max_size=24)


@settings(max_examples=examples(300), deadline=None)
@given(line=CODE_CHARS, data=st.data())
def test_a_line_typed_with_an_editors_pairs_is_answered_from_the_cache_to_its_end(line, data):
    """Property: a suggestion that is the rest of the line answers every key typed through it from the cache,
    whatever pairs the editor closed or typed over on the way, and accepting any of the cache's answers makes
    the line that accepting the suggestion would have made."""
    assume(auto_closed(line) == "")  # the line ends with its pairs closed
    shown_at = data.draw(st.integers(0, len(line) - 2))
    asked_at = data.draw(st.integers(shown_at + 1, len(line) - 1))
    other = data.draw(CODE_CHARS)  # another suggestion, right or wrong
    earlier, now = _typing(line, shown_at), _typing(line, asked_at)
    cache = SuggestionCache()
    cache.remember(URI, earlier, "options", [line[shown_at:], other])
    rests = cache.lookup(URI, now, "options")
    assert rests is not None and rests[0] == line[asked_at:]
    typed = line[shown_at:asked_at]
    for rest in rests:
        assert _accepted(now, rest) == _accepted(earlier, typed + rest)


def test_clear_makes_the_next_request_cold(session):
    session.update_document(URI, PREFIX)
    session.complete(URI, PREFIX, None, OPTIONS)
    session.clear()
    again = session.complete(URI, PREFIX, None, OPTIONS)
    assert not again.from_cache and again.lm_calls > 0


def test_a_closed_document_forgets_its_suggestions(session):
    session.update_document(URI, PREFIX)
    text = session.complete(URI, PREFIX, None, OPTIONS).completions[0]
    session.close_document(URI)
    assert session.cached(URI, PREFIX + text[0], None, OPTIONS) is None


def test_a_notebook_cell_leaves_its_own_cursor_line_out_of_fusion(session, monkeypatch):
    """A cell read with the code cells above it (`Script`) is its own document in the corpus: fusion leaves out
    the cursor's line of the cell's text, counted from ``key_start``, not the script's line (past the cell's
    lines, nothing would have been left out, and the half-typed name would count as a known one)."""
    cell = "ys = [os.path.join(x, name) for name in nam\ntotal = len(ys)"
    script = Script.around(["import os\n\nx = '.'", cell], 1)
    session.update_document("cell", cell)
    asked, fusion = [], session.corpus.fusion
    monkeypatch.setattr(session.corpus, "fusion", lambda key, weights, cursor_line: asked.append((key, cursor_line))
                        or fusion(key, weights, cursor_line))
    session.clear()
    session.complete("cell", script.text, script.start + cell.index("\n"), OPTIONS, fusion=FusionWeights(),
                     key_start=script.start)
    session.close_document("cell")
    assert asked == [("cell", 0)]


def test_an_answer_from_the_whole_window_takes_the_place_of_a_cut_one(session):
    """The cache answers a request whatever its prompt budget (a whole window's answer serves a request that
    would cut it); ``refresh`` asks the model again and its answer replaces the one cached."""
    session.update_document(URI, PREFIX)
    session.clear()
    cut = session.complete(URI, PREFIX, None, replace(OPTIONS, prompt_budget_ms=1))
    assert session.cached(URI, PREFIX, None, replace(OPTIONS, prompt_budget_ms=None)).completions == cut.completions
    whole = session.complete(URI, PREFIX, None, replace(OPTIONS, prompt_budget_ms=None), refresh=True)
    assert not whole.from_cache and whole.lm_calls > 0 and not whole.cut_short
    assert session.cached(URI, PREFIX, None, replace(OPTIONS, prompt_budget_ms=1)).completions == whole.completions


def test_every_caller_reads_the_window_the_engine_cuts_and_the_cache_keeps_windows(session):
    """One way in: the session (the server's door) and `generate` itself (the command line, the benchmarks)
    read the same window of a long document, cut by the engine; the suggestion cache holds that window, not
    the document."""
    body = "".join(f"def f{n}(x):\n    return x + {n}\n\n" for n in range(3000))
    cursor = len(body) + len("def area(self):\n    return self.wid")
    document = body + "def area(self):\n    return self.wid\n\n" + body
    window = session.window(document, cursor)
    assert window == session.engine.window(document, cursor)
    assert window.prefix.endswith("self.wid") and len(window.prefix) < len(body) // 4
    assert document[cursor:].startswith(window.suffix) and len(window.suffix) < len(body) // 4
    session.clear()
    answer = session.complete(URI, document, cursor, OPTIONS)
    direct = generate(session.engine, document, cursor, OPTIONS)
    assert answer.completions and answer.completions == [completion.text for completion in direct.completions]
    [kept] = session.cache._shown[URI].values()
    assert kept.window == window, "the cache keeps the window the engine read"


def test_a_remote_setting_does_not_reload_a_model_in_this_process():
    """Only what the model in use depends on loads it again (`EngineSettings.loads_same_as`): the remote options
    leave a local model loaded, the threads do not."""
    local = CompletionSession()
    settings = EngineSettings("smollm2", threads=MODEL_THREADS)
    local.load(settings)
    engine = local.engine
    for remote in (RemoteOptions(top_k=64), RemoteOptions(api="openai", timeout_s=1.0, vocab="smollm2")):
        local.load(replace(settings, remote=remote))
        assert local.engine is engine, f"{remote} reloaded the local model"
    local.load(replace(settings, threads=MODEL_THREADS + 1))
    assert local.engine is not engine, "a change of threads left the model loaded with the old ones"


def test_a_local_setting_does_not_reconnect_to_a_model_server():
    """A model server's connection does not depend on the GPU layers or the threads; its remote options it does."""
    with LlamaServer("smollm2") as server:
        served = CompletionSession()
        settings = EngineSettings(server.url, remote=RemoteOptions(vocab="smollm2"))
        served.load(settings)
        engine = served.engine
        served.load(replace(settings, threads=3, gpu_layers=-1))
        assert served.engine is engine, "a change of threads or GPU layers reconnected to the model server"
        served.load(replace(settings, remote=RemoteOptions(vocab="smollm2", top_k=64)))
        assert served.engine is not engine and served.engine.lm.options.top_k == 64
