"""Where the text before the cursor stops being stable: the cl100k pre-tokenizer.

Tokenizers with a pre-tokenizer regex (cl100k, GPT-2-style BPE) never let a
token cross a regex chunk, so the chunks before the last one are tokenized
the same however the user goes on typing. The last chunk -- the *unstable
tail* -- is where the cursor may sit inside a token; it is what
`cpc.candidates` has to cover. For tokenizers without such a regex
(SentencePiece) the same split is a good heuristic, and re-encode validation
with the model's own tokenizer keeps the candidates exact.

    >>> split = split_tail("He introduced an intermediar")
    >>> split.stable, split.tail
    ('He introduced an', ' intermediar')

The pattern is the one tiktoken's cl100k encoding carries (run with the
`regex` module, which supports its possessive quantifiers), written out here:
loading the encoding for it took 0.3-0.6 s and 37 MB of the server's memory
(tests/engine/test_pretokenize.py checks that the two are the same).
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from functools import cache

import regex

CL100K_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
"""tiktoken's cl100k pre-tokenizer regex (its ``_pat_str``)."""


@cache
def cl100k_pattern() -> regex.Pattern:
    """The compiled cl100k pre-tokenizer regex."""
    return regex.compile(CL100K_PATTERN)


def pretokens(text: str) -> list[str]:
    """Split ``text`` into cl100k pre-token chunks.

    >>> pretokens("def foo(x):  ")
    ['def', ' foo', '(x', '):', '  ']
    """
    return cl100k_pattern().findall(text)


@dataclass(frozen=True)
class TailSplit:
    """The text before the cursor, cut into a stable part and an unstable tail."""

    text: str
    start: int
    """Character offset where the unstable tail starts."""
    last_word: str
    """The last pre-token chunk (the "last word" of the character prefix conditioning problem); a suffix of ``tail``."""

    @property
    def stable(self) -> str:
        return self.text[: self.start]

    @property
    def tail(self) -> str:
        return self.text[self.start :]

    @property
    def byte_start(self) -> int:
        """Byte offset (UTF-8) where the tail starts."""
        return len(self.stable.encode("utf-8"))


# Only the end of the text is ever unstable, so the regex runs on a window
# that starts at a chunk boundary well before the end instead of on the
# whole document.
_WINDOW_CHARS = 256


def split_tail(text: str) -> TailSplit:
    """Split ``text`` at the start of its unstable tail.

    The tail is the last pre-token chunk, widened leftwards over earlier
    chunks that more typing could merge with it: a whitespace-only tail
    absorbs the whitespace-only chunks before it (newline runs and
    indentation re-chunk together as soon as more whitespace is typed).
    A code point this Python calls unassigned on either side of the tail's
    start moves the start one chunk back: the `regex` module's newer Unicode
    tables may call it a letter where tiktoken's do not (``'::\U0003d000'``
    is one chunk for tiktoken, two for `regex`), so that boundary is not certain.

    >>> split_tail("x = 1234").tail
    '4'
    >>> split_tail("userNa").tail
    'userNa'
    """
    window_start = _window_start(text)
    chunks = pretokens(text[window_start:])
    if not chunks:
        return TailSplit(text=text, start=len(text), last_word="")
    last = len(chunks) - 1
    first = last
    if chunks[last].isspace():
        while first > 0 and chunks[first - 1].isspace():
            first -= 1
    while first > 0 and "Cn" in (unicodedata.category(chunks[first][0]), unicodedata.category(chunks[first - 1][-1])):
        first -= 1
    start = len(text) - sum(len(chunk) for chunk in chunks[first:])
    return TailSplit(text=text, start=start, last_word=chunks[last])


def chunk_starts(text: str, end: int) -> list[int]:
    """Character offsets where a pre-token chunk starts, at or before ``end``, latest first.

    Only the chunks of `split_tail`'s window are listed: a long text's
    earlier starts are never wanted.

    >>> chunk_starts("x = 1234", 7)
    [7, 4, 3, 1, 0]
    """
    window_start = _window_start(text)
    starts, offset = [window_start], window_start
    for chunk in pretokens(text[window_start:]):
        offset += len(chunk)
        starts.append(offset)
    return [start for start in reversed(starts) if start <= end]


def _window_start(text: str) -> int:
    """A chunk boundary at least ``_WINDOW_CHARS`` before the end (or 0).

    The last line start before it whose line has more than whitespace: a
    newline followed by whitespace without another newline, then a
    character that is not whitespace, always ends a chunk (``\\s*[\\r\\n]`` backtracks to the last
    newline of a whitespace run, and punctuation's chunk takes the newlines
    right after it and no more), and the regex never looks back across a
    boundary. Nearly every line of code starts one: a rule that asked for a
    letter on both sides of the newline found none in indented code and
    read the whole window (20,000 characters: 3.4 ms a call instead of 0.07).

    >>> text = "def f():\\n    return 1\\n" * 20
    >>> start = _window_start(text)
    >>> text[start - 1 : start + 4], len(text) - start
    ('\\ndef ', 264)
    """
    limit = len(text) - _WINDOW_CHARS
    if limit <= 0:
        return 0
    match = _LINE_START.search(text, 0, limit)
    return match.start() + 1 if match else 0


_LINE_START = regex.compile(r"(?r)\n[^\S\r\n]*\S")


def ends_inside_character(data: bytes) -> bool:
    """Whether ``data`` ends with an incomplete UTF-8 character.

    >>> ends_inside_character("😀".encode()[:2]), ends_inside_character("😀".encode())
    (True, False)
    """
    return bool(unfinished_character(data))


def unfinished_character(data: bytes) -> bytes:
    """The bytes of the incomplete UTF-8 character that ``data`` ends with (empty if none).

    >>> unfinished_character("ab😀".encode()[:-1])
    b'\\xf0\\x9f\\x98'
    """
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte & 0xC0 != 0x80:
            length = 1 if byte < 0x80 else 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
            return data[-back:] if length > back else b""
    return b""


def is_utf8_prefix(data: bytes) -> bool:
    """Whether some valid UTF-8 text starts with ``data`` (Unicode's Table 3-7, byte by byte).

    A token path that fails this can never be typed, e.g. Ж followed by a
    stray continuation byte:

    >>> is_utf8_prefix("Ж".encode()[:1]), is_utf8_prefix("Ж".encode() + b"\\x89")
    (True, False)
    >>> is_utf8_prefix(b"\\xed\\xa0")  # the start of a surrogate, which UTF-8 excludes
    False
    """
    try:
        data.decode("utf-8")
        return True
    except UnicodeDecodeError:
        pass
    needed, low, high = 0, 0x80, 0xBF
    for byte in data:
        if needed:
            if not low <= byte <= high:
                return False
            needed, low, high = needed - 1, 0x80, 0xBF
        elif byte < 0x80:
            continue
        elif 0xC2 <= byte <= 0xDF:
            needed = 1
        elif 0xE0 <= byte <= 0xEF:
            needed = 2
            low, high = (0xA0, 0xBF) if byte == 0xE0 else (0x80, 0x9F) if byte == 0xED else (0x80, 0xBF)
        elif 0xF0 <= byte <= 0xF4:
            needed = 3
            low, high = (0x90, 0xBF) if byte == 0xF0 else (0x80, 0x8F) if byte == 0xF4 else (0x80, 0xBF)
        else:
            return False
    return True
