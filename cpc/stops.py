"""Where a completion ends, and how it meets the text after the cursor.

A completion ends at the end of its line (single-line), before a line
indented less than the cursor's or the next line after the cursor
(multi-line), in the first round of a loop it runs into, and never repeats
what follows the cursor (`StopRules`). When the rest of the cursor's line
only closes what the line opened (`CLOSERS`: what an editor's auto-closed
pairs leave after the cursor while a line is typed), a completion may go
on past them: one that holds them in their order replaces them
(`replaced_after`), so that ``print("Hello, |")`` can become
``print("Hello, " + name)`` and ``def f(a|)`` becomes ``def f(a, b):``.
When the cursor touches a word after it (``pr|nt(x)``, ``x = |foo()``), a
completion is what it writes before it meets that word (``i``, ``self.``),
or nothing: anything else would be glued to the word. When a blank and more
follow it (``nam| = sys.stdin``), a completion ends where it meets that
blank and the word or symbols after it, or else, if it goes on the word at
the cursor, at that word's end (``e``, not ``e = io.open(fd) = sys.stdin``).

    >>> rules = StopRules.around('    print("Hello, ', '")\\n', multiline=False)
    >>> text = rules.cut('" + name)\\n'); text, replaced_after(text, '")\\n')
    ('" + name)', 2)
    >>> rules.cut('world")\\n'), StopRules.around("f(a", ", c)", multiline=False).cut("a, b, c)\\n")
    ('world")', 'a, b')
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property

CLOSERS = re.compile(r"[)\]}\"'`]+\s*[:;,{]?\s*")
"""A rest of the line that only closes brackets and quotes the line opened (what an editor's auto-closed pairs
leave after the cursor), with perhaps a colon, semicolon or comma: a completion may take it in."""


def _closers(suffix_line: str) -> str:
    """The rest of the cursor's line when it is closers only (`CLOSERS`), without its trailing blanks; else ''."""
    return suffix_line.rstrip() if CLOSERS.fullmatch(suffix_line) else ""


def _closers_after(suffix: str) -> str:
    """The closers (`_closers`) at the start of ``suffix``, the text after the cursor, that end the cursor's line."""
    return _closers(suffix.partition("\n")[0].rstrip("\r"))


def _takes_in(text: str, closers: str) -> bool:
    """Whether ``closers`` are in ``text`` in their order (a subsequence): the text closes what they close."""
    rest = iter(text)
    return all(char in rest for char in closers)


def replaced_after(text: str, suffix: str) -> int:
    """How many characters of ``suffix``, the text after the cursor, a completion ``text`` replaces: the
    closers that end the cursor's line (`CLOSERS`) when the text takes them in, else none.

    >>> replaced_after('" + name)', '")\\nreturn'), replaced_after("name", '")'), replaced_after("b)", ") + 1")
    (2, 0, 0)
    """
    closers = _closers_after(suffix)
    return len(closers) if closers and _takes_in(text, closers) else 0


def past_closers(suffix: str) -> str:
    """``suffix``, the text after the cursor, past the closers that end the cursor's line (`CLOSERS`): what the
    editor's auto-closed pairs change as a line is typed (a bracket typed with its closer, a closer typed over).

    >>> past_closers('")\\nreturn'), past_closers(") + 1\\n")
    ('\\nreturn', ') + 1\\n')
    """
    return suffix[len(_closers_after(suffix)) :]


_SYMBOL = re.compile(r"[^\w\s]")
_WORD_AFTER = re.compile(r"[\w$]+")
"""The word the text after the cursor starts with, when the cursor touches it (``$`` as in JavaScript's names)."""
_BLANK_LED = re.compile(r"[ \t]+(?:[\w$]+|[^\w\s$]+)")
"""Blanks after the cursor and what comes first after them: a word, or a run of symbols."""


def _meeting(text: str, word: str, complete: bool = True) -> int | None:
    """Where ``text`` first writes ``word`` as the end of one of its words (of its runs of symbols, when ``word``
    ends in one), having closed the brackets and quotes it opened before it (``complete``: the text is whole, so
    its end ends a word too); None where it does not.

    >>> _meeting("ait fetch(url)", "fetch"), _meeting("int(x)", "nt"), _meeting("self.foo()", "foo")
    (4, 1, 5)
    >>> _meeting("bar(foo)", "foo"), _meeting('"foo"', "foo"), _meeting("ntf(nt)", "nt"), _meeting("bar()", "foo")
    (None, None, None, None)
    >>> _meeting("fetch", "fetch", complete=False), _meeting("fetch", "fetch")
    (None, 0)
    >>> _meeting("e = io.open(fd)", " ="), _meeting("a == b", " ="), _meeting("x)) && g(i + ", " +")
    (1, None, None)
    """
    same_kind = _WORD_AFTER if _WORD_AFTER.fullmatch(word[-1]) else _SYMBOL
    at = text.find(word)
    while at >= 0:
        end = at + len(word)
        ends_there = (complete and end == len(text)) or (end < len(text) and not same_kind.match(text, end))
        if ends_there and _balanced(text[:at]):
            return at
        at = text.find(word, at + 1)
    return None


def _balanced(text: str) -> bool:
    """Whether ``text`` closes each bracket it opens and none it does not, and holds each quote an even number of
    times.

    >>> _balanced("f(a)[0]"), _balanced("f("), _balanced(")) && g(("), _balanced("'a")
    (True, False, False, False)
    """
    depth = 0
    for char in text:
        depth += (char in "([{") - (char in ")]}")
        if depth < 0:
            return False
    return depth == 0 and all(text.count(quote) % 2 == 0 for quote in "\"'`")


def _before_symbol(text: str, symbol: str) -> str:
    """``text`` up to its first ``symbol`` outside the brackets it opens itself (all of it without one).

    >>> _before_symbol("g(a, b), d", ","), _before_symbol("x) + 1", ")"), _before_symbol("name", "(")
    ('g(a, b)', 'x', 'name')
    """
    depth = 0
    for at, char in enumerate(text):
        if char == symbol and depth <= 0:
            return text[:at]
        depth += (char in "([{") - (char in ")]}")
    return text


@dataclass(frozen=True)
class StopRules:
    """When a completion ends, from what surrounds the cursor.

    A text that goes round in a loop (`_first_round`) ends in the loop's first round, at the end of a
    word or after a separator (`_clean_end`): a small model that starts repeating itself rarely stops
    before the token budget, and what it shows meanwhile runs off the screen.

    >>> rules = StopRules.around("def f():\\n    x = ma", "(a, b) + c\\n    return x", multiline=False)
    >>> rules.cut("max(a, b) + c\\n"), rules.cut("max(a, b")
    ('max', None)
    >>> StopRules.around("    ass", "", multiline=False).cut(
    ...     "ert(this[kUsed] && this[kUsed] && this[kUsed] && this[kUsed] && this[k")
    'ert(this[kUsed]'
    """

    multiline: bool
    indent: int
    """Width of the cursor line's indentation: a multi-line completion ends before a line indented less."""
    suffix_line: str
    """The rest of the cursor's line: never repeated."""
    suffix_next: str = field(default="")
    """The next non-blank line after the cursor's: a multi-line completion ends before it."""

    @cached_property
    def closers(self) -> str:
        """The rest of the cursor's line when it only closes what the line opened (`CLOSERS`): a completion that
        takes it in replaces it (`replaced_after`)."""
        return _closers(self.suffix_line)

    @cached_property
    def word_after(self) -> str:
        """The word the rest of the cursor's line starts with, when the cursor touches it; else ''. A completion
        ends where it meets that word (`_meeting`), and one that does not meet it is none: it would make one word
        of its own last word and that one.

        >>> StopRules.around("    pr", "nt(x)", multiline=False).word_after, StopRules.around("f(", ")", multiline=False).word_after
        ('nt', '')
        """
        found = _WORD_AFTER.match(self.suffix_line)
        return found.group() if found else ""

    @cached_property
    def piece_after(self) -> str:
        """Where the rest of the cursor's line starts with blanks and then more: those blanks and its first word or
        run of symbols (`_BLANK_LED`); else ''. A completion ends where it meets them (`_meeting`); one that does not
        and goes on the word at the cursor ends at that word's end: the rest of the line is the user's.

        >>> StopRules.around("    nam", " = sys.stdin", multiline=False).piece_after
        ' ='
        """
        found = _BLANK_LED.match(self.suffix_line)
        return found.group() if found else ""

    @classmethod
    def around(cls, prefix: str, suffix: str, *, multiline: bool) -> StopRules:
        line = prefix.rpartition("\n")[2]
        suffix_line, _, rest = suffix.partition("\n")
        following = next((text for text in rest.split("\n") if text.strip()), "")
        return cls(
            multiline=multiline,
            indent=len(line) - len(line.lstrip(" \t")),
            suffix_line=suffix_line,
            suffix_next=following.strip(),
        )

    def cut(self, text: str) -> str | None:
        """The final completion when ``text`` has reached a stop, else None."""
        ended = not self.multiline and "\n" in text
        if ended:
            text = text.partition("\n")[0]
        if self.word_after:
            at = _meeting(text, self.word_after, complete=ended)
            if at is not None:
                return text[:at]  # its blanks too: they part it from the word
            if ended:
                return ""
        if self.piece_after:
            at = _meeting(text, self.piece_after, complete=ended)
            if at is not None:
                return text[:at].rstrip(" \t")
            if ended:
                return self.trim(text)
        head = self.suffix_line.strip()
        if head and head in text and not self.closers and not self.word_after:
            return self.trim(text[: text.index(head)], meets=True)
        if ended:
            return self.trim(text)
        lines = text.split("\n")
        for number, line in enumerate(lines[1:], start=1):
            complete = number < len(lines) - 1
            if not line.strip():
                continue
            indent = len(line) - len(line.lstrip(" \t"))
            if (complete or indent < len(line)) and (
                indent < self.indent or (self.suffix_next and line.strip() == self.suffix_next)
            ):
                return self.trim("\n".join(lines[:number]))
        loop = _first_round(text)
        return None if loop is None else self.trim(text[: _clean_end(text, *loop)])

    def trim(self, text: str, meets: bool = False) -> str:
        """Drop trailing blanks and whatever the text after the cursor already starts with. With closers after the
        cursor, keep a text that takes them in whole, and cut any other before their first character; with other
        text after the cursor that starts with a symbol, a text that does not meet it (``meets``: it ends where
        that text begins) ends before that symbol's first use at its own bracket depth.

        >>> StopRules.around("os.listd", "(path)", multiline=False).trim('ir("data", x)')
        'ir'

        Where the cursor touches a word after it (`word_after`), the text is what it writes before it meets that word,
        blanks included, or nothing:

        >>> rules = StopRules.around("    x = ", "foo()", multiline=False)
        >>> rules.trim("self.foo()"), rules.trim("await foo"), rules.trim("bar()")
        ('self.', 'await ', '')

        Where blanks and more follow the cursor (`piece_after`), what it writes before it meets them, or else the
        word at the cursor finished; a text that starts no word keeps the rules above:

        >>> rules = StopRules.around("    nam", " = sys.stdin", multiline=False)
        >>> rules.trim("e = io.open(fd)"), rules.trim("espace.stdin()"), StopRules.around("x = f", "  # y", multiline=False).trim("(a)")
        ('e', 'espace', '(a)')
        """
        if self.word_after:
            at = _meeting(text, self.word_after)
            return "" if at is None else text[:at]
        if self.piece_after and not meets:
            at = _meeting(text, self.piece_after)
            if at is not None:
                return text[:at].rstrip(" \t")
            word = _WORD_AFTER.match(text)
            if word:
                return word.group()
        text = text.rstrip() if self.multiline else text.rstrip(" \t")
        if self.closers:
            if _takes_in(text, self.closers):
                return text
            # the text closes on its own, otherwise than the closers after the cursor: it ends where they begin
            text = text.partition(self.closers[0])[0].rstrip(" \t")
        elif not meets and _SYMBOL.match(self.suffix_line):
            # the model never saw the text after the cursor: what it wrote past that text's first symbol is
            # another line than the one the user is editing
            text = _before_symbol(text, self.suffix_line[0]).rstrip(" \t")
        for overlap in range(min(len(text), len(self.suffix_line)), 0, -1):
            if text.endswith(self.suffix_line[:overlap]):
                return text[:-overlap]
        return text


LOOP_PERIODS = range(4, 41)
"""The lengths in characters of a loop's round that `_first_round` looks for. Shorter periods are left alone: a
row of zeros (``0, 0, 0``), a rule of dashes (``-+-+-+``), an indentation."""
LOOP_ROUNDS = 4
"""Rounds a text ends with before it counts as a loop. Of 100,000 lines of the standard library's Python
and npm's JavaScript, 14 hold four rounds of a period from `LOOP_PERIODS` (UUIDs, ASCII tables); of the
model's suggestions through the server, 0.5-3.5 % ran in such a loop to the token budget (docs/benchmarks.md)."""


def _first_round(text: str) -> tuple[int, int] | None:
    """Where the loop that ``text`` ends in makes its first round (start, end); None without one.

    A loop: the last `LOOP_ROUNDS` rounds of a period from `LOOP_PERIODS` (its shortest) repeat each other,
    and a round holds two different characters that are not blanks.

    >>> _first_round("x, false, false, false, false"), _first_round("[0, 0, 0, 0, 0, 0]"), _first_round("ab" * 20)
    ((1, 8), None, None)
    """
    for period in range(1, LOOP_PERIODS.stop):
        tail = text[-LOOP_ROUNDS * period :]
        if len(tail) < LOOP_ROUNDS * period:
            return None
        if tail[-1] != tail[-1 - period] or tail[period:] != tail[:-period]:
            continue
        if period < LOOP_PERIODS.start or len(set(tail[:period].strip())) < 2:
            return None
        start = len(text) - len(tail)
        while start > 0 and text[start - 1] == text[start - 1 + period]:
            start -= 1
        return start, start + period
    return None


_CLEAN_END = re.compile(r"[,;)\]}]|\w\b")


def _clean_end(text: str, start: int, end: int) -> int:
    """Where a text that loops from ``start`` is cut: the last end of a word, or of a separator or a closing
    bracket, in its first round (up to ``end``); without one, before the word the round's end cuts.

    >>> text = 'd", "ab", "cd", "ab", "cd", "ab", "cd", "ab", "c'
    >>> text[: _clean_end(text, *_first_round(text))]
    'd", "ab",'
    """
    ends = [match.end() for match in _CLEAN_END.finditer(text, start, end + 1) if match.end() <= end]
    return ends[-1] if ends else len(whole_words(text[:end]))


FIRST_WORD = re.compile(r"\W*\w+")
"""A text's first word, with what comes before it."""
_LAST_WORD = re.compile(r"\w+$")


def whole_words(text: str) -> str:
    """A text cut short (the time budget, a loop), without the word it may have been in the middle of (its first word
    stays).

    >>> whole_words('in(directory, "config_'), whole_words("in"), whole_words("in(a, b)")
    ('in(directory, "', 'in', 'in(a, b)')
    """
    first, last = FIRST_WORD.match(text), _LAST_WORD.search(text)
    return text[: last.start()] if first and last and last.start() >= first.end() else text
