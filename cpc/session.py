"""A completion session: the engine behind an editor, request after request.

What an editor needs around `cpc.generate`, with no protocol in sight:

- the engine is loaded once (and again when its model settings change), and
  every model call runs on one worker thread the caller provides;
- a request can be abandoned: its ``cancelled`` flag is polled before each
  model evaluation, so a newer keystroke stops older work early;
- a keystroke that types the start of a suggestion just shown is answered
  from the suggestion cache, without the model (llama.vim's trick): the
  rest of the suggestion is still the model's greedy choice.

The engine keeps its own caches across requests (KV cache per token prefix,
snapshots, beams per byte prefix), so the next keystroke after a model
answer costs a few tokens.

    >>> session = CompletionSession()
    >>> session.load("smollm2")
    >>> answer = session.complete("doc", "import os\\nos.listd", "", Options(max_tokens=2))
    >>> answer.completions[0].startswith("ir"), answer.from_cache
    (True, False)
    >>> session.complete("doc", "import os\\nos.listdi", "", Options(max_tokens=2)).from_cache
    True
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from cpc.engine import Engine
from cpc.generate import Options, generate
from cpc.lm import DEFAULT_CONTEXT_SIZE
from cpc.models import Progress

MAX_PREFIX_CHARS = 32_000
"""Text before the cursor that a request reads at most (the prompt window is shorter still)."""
MAX_SUFFIX_CHARS = 4_000


@dataclass(frozen=True)
class EngineSettings:
    """What loading the engine depends on: change one and the model is loaded again."""

    model: str = "default"
    gpu_layers: int = 0
    threads: int = 0
    context_size: int = DEFAULT_CONTEXT_SIZE


@dataclass(frozen=True)
class Answer:
    completions: list[str]
    """Texts to insert after the cursor, best first."""
    from_cache: bool
    engine_ms: float
    """Time spent in the engine (zero for a cache answer)."""
    lm_calls: int = 0


@dataclass(frozen=True)
class _Shown:
    """Suggestions answered for one text around the cursor."""

    prefix: str
    suffix: str
    options: Options
    texts: tuple[str, ...]


class SuggestionCache:
    """The last suggestions per document, for keystrokes that type them."""

    def __init__(self, per_document: int = 16) -> None:
        self.per_document = per_document
        self._shown: dict[str, OrderedDict[str, _Shown]] = {}
        self._lock = threading.Lock()

    def remember(self, key: str, prefix: str, suffix: str, options: Options, texts: list[str]) -> None:
        if not texts:
            return
        with self._lock:
            shown = self._shown.setdefault(key, OrderedDict())
            shown[prefix] = _Shown(prefix, suffix, options, tuple(texts))
            shown.move_to_end(prefix)
            while len(shown) > self.per_document:
                shown.popitem(last=False)

    def lookup(self, key: str, prefix: str, suffix: str, options: Options) -> list[str] | None:
        """The rest of earlier suggestions that ``prefix`` has started typing, or None."""
        with self._lock:
            entries = list(self._shown.get(key, {}).values())
        for entry in reversed(entries):
            if entry.suffix != suffix or entry.options != options or not prefix.startswith(entry.prefix):
                continue
            typed = prefix[len(entry.prefix) :]
            rests = [text[len(typed) :] for text in entry.texts if text.startswith(typed) and len(text) > len(typed)]
            if rests:
                return rests
        return None

    def forget(self, key: str) -> None:
        with self._lock:
            self._shown.pop(key, None)


class CompletionSession:
    """One engine, its settings, and the suggestion cache; call it from one worker thread."""

    def __init__(self) -> None:
        self.engine: Engine | None = None
        self.settings: EngineSettings | None = None
        self.cache = SuggestionCache()

    @property
    def ready(self) -> bool:
        return self.engine is not None

    def load(self, model: str = "default", *, gpu_layers: int = 0, threads: int = 0,
             context_size: int = DEFAULT_CONTEXT_SIZE, progress: Progress | None = None) -> None:
        """Load the engine unless it is loaded with these settings already.

        Raises `cpc.models.ModelError` for a missing or corrupt model, or a
        context too large to allocate; the engine loaded before stays in
        service.
        """
        settings = EngineSettings(model, gpu_layers, threads, context_size)
        if settings == self.settings and self.engine is not None:
            return
        engine = Engine.load(
            model, gpu_layers=gpu_layers, threads=threads or None, n_ctx=context_size, progress=progress
        )
        self.engine, self.settings = engine, settings
        self.cache = SuggestionCache()

    def cached(self, key: str, prefix: str, suffix: str, options: Options) -> Answer | None:
        """A cache answer, cheap enough for an event loop (no model)."""
        texts = self.cache.lookup(key, prefix, suffix, options)
        return None if texts is None else Answer(texts, from_cache=True, engine_ms=0.0)

    def complete(
        self,
        key: str,
        prefix: str,
        suffix: str,
        options: Options,
        cancelled: Callable[[], bool] | None = None,
    ) -> Answer:
        """Suggestions for the cursor between ``prefix`` and ``suffix`` of document ``key``.

        Raises `cpc.lm.Cancelled` when ``cancelled`` turns True on the way.
        """
        answer = self.cached(key, prefix, suffix, options)
        if answer is not None:
            return answer
        if self.engine is None:
            raise RuntimeError("the model is not loaded yet")
        started = time.perf_counter()
        generation = generate(
            self.engine, prefix[-MAX_PREFIX_CHARS:], suffix[:MAX_SUFFIX_CHARS], options, cancelled=cancelled
        )
        texts = [completion.text for completion in generation.completions]
        self.cache.remember(key, prefix, suffix, options, texts)
        return Answer(texts, from_cache=False, engine_ms=(time.perf_counter() - started) * 1000,
                      lm_calls=generation.lm_calls)
