"""The peers' way to bring the project in: retrieve the most similar window of another file and paste it before the prompt.

What Continue, llama.vim and Tabby do, as a baseline for fusion
(``python -m harness.bench --cross-file``'s ``+context`` modes): the files
are cut into `WINDOW_LINES`-line windows, the window whose identifiers are
most like (Jaccard) those of the last `QUERY_LINES` lines before the
cursor is pasted as a comment block with its path, and the prefix loses its
oldest lines so that both fit the prompt window.

    >>> jaccard(frozenset("ab"), frozenset("bc"))
    0.3333333333333333
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from harness.bench.sources import Language

WINDOW_LINES = 30
WINDOW_STRIDE = 15
QUERY_LINES = 15
CONTEXT_MARGIN_TOKENS = 8
"""Room left for tokens that merge where the context block meets the prefix."""


@dataclass(frozen=True)
class Chunk:
    """A window of one of the project's files."""

    path: str
    """The path shown in the prompt."""
    first_line: int
    text: str
    names: frozenset[str]


def chunks_of(path: str, text: str, language: Language) -> list[Chunk]:
    """`WINDOW_LINES`-line windows every `WINDOW_STRIDE` lines (the last one reaching the end)."""
    lines = text.split("\n")
    starts = list(range(0, max(1, len(lines) - WINDOW_LINES + WINDOW_STRIDE), WINDOW_STRIDE))
    chunks = []
    for start in starts:
        body = "\n".join(lines[start : start + WINDOW_LINES])
        if body.strip():
            chunks.append(Chunk(path, start, body, frozenset(language.names_in(body))))
    return chunks


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 0.0


def best_chunk(chunks: Iterable[Chunk], prefix: str, language: Language) -> Chunk | None:
    """The chunk most like the last `QUERY_LINES` lines before the cursor (the first of equals), or None
    when none shares a name with them."""
    query = frozenset(language.names_in("\n".join(prefix.split("\n")[-QUERY_LINES:])))
    best, best_score = None, 0.0
    for chunk in chunks:
        similarity = jaccard(query, chunk.names)
        if similarity > best_score:
            best, best_score = chunk, similarity
    return best


def context_block(chunk: Chunk, comment: str) -> str:
    """The chunk as a comment block with its path, ending with a newline."""
    lines = [f"{comment} Path: {chunk.path}"] + [f"{comment} {line}".rstrip() for line in chunk.text.split("\n")]
    return "\n".join(lines) + "\n"


def with_context(tokenizer, prefix: str, chunk: Chunk | None, comment: str, max_tokens: int) -> str:
    """The prompt text: the chunk's comment block, then the prefix without its oldest lines so that
    both fit in ``max_tokens`` tokens of ``tokenizer`` (the block gets at most half)."""
    if chunk is None:
        return prefix

    def count(text: str) -> int:
        return len(tokenizer.encode(text.encode("utf-8")))

    lines = context_block(chunk, comment).split("\n")[:-1]
    while len(lines) > 1 and count("\n".join(lines) + "\n") > max_tokens // 2:
        lines.pop()
    block = "\n".join(lines) + "\n"
    budget = max_tokens - count(block) - CONTEXT_MARGIN_TOKENS
    prefix = _last_tokens(tokenizer, prefix, budget)
    while count(block + prefix) > max_tokens and "\n" in prefix:
        prefix = prefix.partition("\n")[2]
    return block + prefix


def _last_tokens(tokenizer, text: str, budget: int) -> str:
    """The end of ``text`` that its last ``budget`` tokens spell, from the next line start on (or from the
    first whole character when that is the only line)."""
    data = text.encode("utf-8")
    tokens = tokenizer.encode(data)
    if len(tokens) <= budget:
        return text
    pieces = tokenizer.vocab.pieces
    kept = sum(len(pieces[t]) for t in tokens[len(tokens) - max(0, budget) :])
    tail = data[len(data) - kept :].decode("utf-8", "ignore")
    newline = tail.find("\n")
    return tail[newline + 1 :] if 0 <= newline < len(tail) - 1 else tail
