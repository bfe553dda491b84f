"""The prompt window: how much text around the cursor the model reads, cut so that the KV cache keeps serving it.

One rule holds every cut: **a window's start moves in fixed steps, never
with each keystroke.** The model keeps the KV cache of the last prompt, and
a keystroke that leaves the window's first tokens as they were costs only
the tokens after them; a start that moved with every key would cost the
whole window each time. So every cut snaps to a grid:

- the text before the cursor: at least `CHARS_PER_TOKEN` characters per
  token of the window, from a line start that moves in steps of a quarter
  of that (`Window.at`, which slices the window from the document and
  copies nothing else);
- its tokens: a prompt longer than the window drops whole blocks of
  `PROMPT_BLOCK` tokens from its start (`prompt_window`);
- a time budget (``promptBudgetMs``): a long window the cache lacks is cut
  further, in blocks of `SHORT_BLOCK`, to what the model reads within the
  budget (`fit_window`); a window the model reads within the budget at its
  measured reading speed is read whole. The server answers again from the
  whole window at once (`lsp_server.requests`);
- the text after the cursor (a fill-in-the-middle prompt): at most
  `MAX_SUFFIX_CHARS` characters (`Window.at`) and `MAX_SUFFIX_TOKENS` tokens of it.

`MAX_PROMPT_TOKENS` is the window's one default size; an engine whose
context is small keeps `GENERATION_ROOM` tokens of it for the completion
(`prompt_tokens_for`), and a model that serves completions is given no more
context than they read (`context_for`).

    >>> len(prompt_window(range(1000), 512)), prompt_window(range(1000), 512)[0]
    (488, 512)
    >>> prompt_tokens_for(1536), prompt_tokens_for(1024)
    (1024, 768)
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cpc.stops import past_closers

if TYPE_CHECKING:
    from cpc.lm import LanguageModel, State

MAX_PROMPT_TOKENS = 1024
"""Tokens of text before the cursor the model reads at most (the window)."""
GENERATION_ROOM = 256
"""Tokens of the context kept for the completion after the window."""
PROMPT_BLOCK = 256
"""A window longer than the prompt drops whole blocks of this many tokens from its start."""
SHORT_BLOCK = 64
"""A window cut short for a time budget starts on a multiple of this many tokens into the whole
window (and keeps at least this many)."""
CHARS_PER_TOKEN = 8
"""A request reads at least this many characters of text before the cursor per token of the window,
when there is that much: about twice what code spends per token, so the window is full, and a cold
request on a long file does not tokenize the whole file before the cursor."""
MAX_SUFFIX_CHARS = 4_000
MAX_SUFFIX_TOKENS = 256
"""Of the text after the cursor, a fill-in-the-middle prompt reads at most this much."""


def prompt_tokens_for(n_ctx: int, prompt_tokens: int = MAX_PROMPT_TOKENS) -> int:
    """The window's size in a context of ``n_ctx`` tokens per sequence: `GENERATION_ROOM` stays free."""
    return min(prompt_tokens, n_ctx - GENERATION_ROOM)


def context_for(n_ctx: int, prompt_tokens: int = MAX_PROMPT_TOKENS, *, reads_suffix: bool) -> int:
    """The context a sequence of completions needs, at most ``n_ctx``: the window (`prompt_tokens_for`), the
    text after the cursor where the model reads it (`MAX_SUFFIX_TOKENS`, a fill-in-the-middle prompt) and
    `GENERATION_ROOM`. llama.cpp zeroes its KV cache when it makes it: every token of context a sequence
    is given is resident memory from the start (18 KiB a token for the default model, in each sequence).

    >>> context_for(1536, reads_suffix=False), context_for(1536, reads_suffix=True), context_for(1024, reads_suffix=True)
    (1280, 1536, 1024)
    """
    suffix = MAX_SUFFIX_TOKENS if reads_suffix else 0
    return min(n_ctx, prompt_tokens_for(n_ctx, prompt_tokens) + suffix + GENERATION_ROOM)


@dataclass(frozen=True)
class Window:
    """The text a request reads around the cursor: the end of the text before it, the start of the text after it.

    Sliced from the document at the cursor (`Window.at`), nothing else of it
    copied: the window is what the engine reads and what its caches keep. A
    lone surrogate (a ``str`` from JSON's ``"\\ud800"`` holds one; UTF-8 has
    none) reads as U+FFFD, one character for one.

        >>> document = "x = 1\\n" * 10_000 + "y = "
        >>> window = Window.at(document, len(document) - 2, prompt_tokens=1024)
        >>> len(window.prefix) >= 1024 * CHARS_PER_TOKEN, window.prefix.endswith("y "), window.suffix
        (True, True, '= ')
        >>> Window.at(document + "2", len(document), 1024).prefix == Window.at(document, len(document), 1024).prefix
        True
    """

    prefix: str
    """The text before the cursor that is read: at least `CHARS_PER_TOKEN` characters per token of the window
    (when there are that many), from a line start that moves in steps of a quarter of that, not with every
    keystroke."""
    suffix: str
    """The text after the cursor that is read: at most `MAX_SUFFIX_CHARS` characters."""

    @classmethod
    def at(cls, document: str, cursor: int | None = None, prompt_tokens: int = MAX_PROMPT_TOKENS) -> Window:
        """The window of a prompt of ``prompt_tokens`` tokens at ``cursor`` (a character offset; None: the end)."""
        cursor = len(document) if cursor is None else cursor
        if not 0 <= cursor <= len(document):
            raise ValueError(f"cursor {cursor} is outside the document ({len(document)} characters)")
        chars = prompt_tokens * CHARS_PER_TOKEN
        start = 0
        if cursor > chars:
            step = max(1, chars // 4)
            cut = (cursor - chars) // step * step
            start = (document.rfind("\n", max(0, cut - step), cut) + 1) or cut
        return cls(_readable(document[start:cursor]), _readable(document[cursor : cursor + MAX_SUFFIX_CHARS]))

    @property
    def suffix_cut(self) -> bool:
        """Whether the suffix may end before the document does (it holds `MAX_SUFFIX_CHARS` characters)."""
        return len(self.suffix) == MAX_SUFFIX_CHARS

    def typed_on_from(self, earlier: Window) -> str | None:
        """What was typed since ``earlier`` when this window is ``earlier`` typed on, else None.

        Typed on: the text before the cursor grew by what was typed, and the
        text after it is the same, but for the closers that end the cursor's
        line (`cpc.stops.past_closers`): an editor that closes pairs types a
        bracket or a quote with its closer, and types over a closer.

        >>> Window("f(", ")\\nx").typed_on_from(Window("f", "\\nx"))  # "(" typed, ")" closed with it
        '('
        >>> Window("f(a)", "\\nx").typed_on_from(Window("f(", ")\\nx"))  # "a", then ")" typed over
        'a)'
        >>> Window("f(a", ") + 1").typed_on_from(Window("f(", ")")), Window("g", "").typed_on_from(Window("f", ""))
        (None, None)
        """
        if not self.prefix.startswith(earlier.prefix):
            return None
        if self.suffix != earlier.suffix and not same_after(
                past_closers(self.suffix), past_closers(earlier.suffix), cut=self.suffix_cut and earlier.suffix_cut):
            return None
        return self.prefix[len(earlier.prefix) :]


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _readable(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD: text the tokenizers can encode.

    >>> _readable("s = '\\ud800'")
    "s = '\ufffd'"
    """
    if text.isascii() or _LONE_SURROGATE.search(text) is None:
        return text
    return _LONE_SURROGATE.sub("\ufffd", text)


def same_after(first: str, second: str, *, cut: bool) -> bool:
    """Whether two ends of windows' suffixes are the same text after the cursor, as far as both were read:
    with ``cut`` (both windows' suffixes cut, `Window.suffix_cut`), up to the end of the shorter.

    >>> same_after("\\nx = 1", "\\nx = ", cut=True), same_after("\\nx = 1", "\\nx = ", cut=False)
    (True, False)
    """
    shared = min(len(first), len(second)) if cut else None
    return first[:shared] == second[:shared]


def prompt_window(tokens: State | Sequence[int], max_tokens: int) -> State:
    """The last tokens of a long prompt, at most ``max_tokens``, dropped in whole `PROMPT_BLOCK` blocks."""
    excess = len(tokens) - max_tokens
    dropped = -(-excess // PROMPT_BLOCK) * PROMPT_BLOCK if excess > 0 else 0
    return tuple(tokens[dropped:])


def fit_window(lm: LanguageModel, head: State, tokens: State, middle: State, budget_ms: float | None) -> State:
    """The longest end of the prompt window ``tokens`` whose uncached part the model reads within ``budget_ms``.

    What the model reads is ``head + window + middle``; the tokens its cache
    already holds cost nothing, the others ``1 / lm.prefill_rate`` seconds
    each (a few always pass: a keystroke's new tokens). The window is cut in
    `SHORT_BLOCK` blocks from its start; no budget, or a budget the whole
    window fits: ``tokens`` itself. A short file is no exception: on a
    machine that reads slowly its cut window's answer is on screen by 1 s
    where the whole window's is not yet, and the whole window's follows
    (docs/benchmarks.md, the cold set).
    """
    if budget_ms is None or budget_ms <= 0:
        return tokens
    affordable = max(budget_ms / 1000 * lm.prefill_rate, SHORT_BLOCK // 4)
    last = max(0, (len(tokens) - SHORT_BLOCK) // SHORT_BLOCK * SHORT_BLOCK)
    for start in range(0, last + 1, SHORT_BLOCK):
        window = tokens[start:]
        state = head + window + middle
        if len(state) - lm.cached_length(state) <= affordable or start == last:
            return window
    return tokens
