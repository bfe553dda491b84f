"""A position in an open document as requests compare it: the window the engine reads there, the word a suggestion replaces, what a newer cursor types on, and the next line foreseen.

A request's `Cursor` holds the LSP position converted once (`Cursor.at`:
the client's units, a clear error off the text) and the engine's window
there (`cpc.window.Window`). Two cursors are compared through their windows:
a newer one *types on* from an older one when its text before the cursor
goes on from the older one's on the same line, with the same text after
the cursor past the closers an editor's pairs change
(`cpc.window.Window.typed_on_from`). A `Foresight` is the cursor after an
answer that ends its line is accepted and Enter pressed, where the next
line's suggestion is prepared ahead.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams
from pygls.workspace import Workspace

from cpc.session import Window, replaced_after
from lsp_server.documents import character_index, code_units, document_script

_WORD_BEFORE = re.compile(r"\w+$")
_LONGEST_WORD = 256
"""The longest word a cursor replaces, and the most characters a newer cursor types on from an older one."""

WindowAt = Callable[[str, int], Window]
"""The engine's window at an offset of a document (`cpc.session.CompletionSession.window`)."""


@dataclass(frozen=True)
class Cursor:
    """A position in an open document: the document's text (held, not copied), the offset, and the window the
    engine reads there, which is what requests compare."""

    uri: str
    document: str
    """The text the engine reads: the document's (`lsp_server.documents.document_script`: for a notebook's
    cell, its notebook's code cells)."""
    offset: int
    """The cursor's character offset into ``document``."""
    window: Window
    word: str
    """The part of the identifier before the cursor: suggestions replace it, so they start with it."""
    replace: types.Range
    """From the start of ``word`` to the cursor, in the client's units."""
    text_start: int = 0
    """Where the document's own text starts in ``document`` (a notebook's cell: past the cells above it)."""

    def range_for(self, text: str) -> types.Range:
        """What an answer ``text`` replaces: ``word``, and the closers after the cursor that the text takes in
        (`cpc.session.replaced_after`: ASCII, one unit each in any of the client's encodings).

        >>> cursor = _example('print("Hi, ', '")')
        >>> [cursor.range_for(text).end.character for text in ('" + name)', "there")]
        [13, 11]
        """
        end = self.replace.end
        return types.Range(self.replace.start, types.Position(end.line, end.character + replaced_after(text, self.window.suffix)))

    @classmethod
    def at(cls, workspace: Workspace, uri: str, position: types.Position, window_at: WindowAt) -> Cursor:
        """The cursor at ``position``; a clear error for an unknown document or a position off the text."""
        document = workspace.text_documents.get(uri)
        script = document_script(workspace, uri)
        if document is None or script is None:
            raise JsonRpcInvalidParams(f"unknown document {uri}: it was never opened (textDocument/didOpen)")
        lines = document.lines  # LSP's lines: see lsp_server.documents
        line, character = position.line, position.character
        if line > len(lines) or (line == len(lines) and character > 0) or line < 0 or character < 0:
            raise JsonRpcInvalidParams(f"position {line}:{character} is outside {uri} ({len(lines)} lines)")
        text = lines[line].rstrip("\r\n") if line < len(lines) else ""
        column, exact = character_index(text, character, workspace.position_codec)
        if not exact:
            raise JsonRpcInvalidParams(
                f"position {line}:{character} is past the end of line {line} or splits a character "
                f"(positions count {workspace.position_encoding} code units)"
            )
        start = script.start + document.line_start(line) + column
        source = script.text  # a notebook's cell reads the code cells around it
        # in a bounded window: over a whole line `\w+$` is quadratic in its runs of word characters (minified code)
        word = _WORD_BEFORE.search(text, max(0, column - _LONGEST_WORD), column)
        word_text = word.group() if word else ""
        units = code_units(text[: column - len(word_text)], workspace.position_codec)
        return cls(
            uri=uri,
            document=source,
            offset=start,
            window=window_at(source, start),
            word=word_text,
            replace=types.Range(start=types.Position(line, units), end=types.Position(line, character)),
            text_start=script.start,
        )

    def typed_on_by(self, newer: Cursor) -> bool:
        """Whether ``newer`` is this cursor after typing on (on the same line): an answer for this
        one may start with what was typed, and then answers ``newer`` from the suggestion cache.

        >>> sel, self_w, se = (_example(text, ")") for text in ("f(sel", "f(self.w", "f(se"))
        >>> sel.typed_on_by(self_w), sel.typed_on_by(se)
        (True, False)
        >>> _example("print", "\\n").typed_on_by(_example('print("', '")\\n'))  # the editor closed the pairs
        True
        """
        typed = newer.window.typed_on_from(self.window)
        return newer.uri == self.uri and typed is not None and len(typed) <= _LONGEST_WORD and "\n" not in typed

    def typed_since(self, newer: Cursor) -> str:
        """What ``newer`` has before it past this cursor: the characters typed on, when `typed_on_by`.

        >>> _example("f(sel", ")").typed_since(_example("f(self.w", ")"))
        'f.w'
        """
        return newer.window.prefix[len(self.window.prefix):]


@dataclass(frozen=True)
class Foresight:
    """The next line foreseen after an answer that ends its line: the cursor answered (``start``) and the
    cursor after its first text and a line break (``target``), where the next suggestion is prepared."""

    start: Cursor
    target: Cursor

    @classmethod
    def after(cls, cursor: Cursor, text: str, window_at: WindowAt) -> Foresight | None:
        """The foresight for ``text`` answered at ``cursor``, or None when the cursor's line goes on after it.

        >>> Foresight.after(_example("    x = ma", "\\r\\nreturn x"), "x(a, b)", Window.at).target.window
        Window(prefix='    x = max(a, b)\\r\\n', suffix='\\r\\nreturn x')
        >>> Foresight.after(_example("f(ma", ")\\n"), "x", Window.at)  # the line goes on: none
        >>> Foresight.after(_example("def f(a", ")\\nreturn x"), ", b):", Window.at).target.window  # takes in ")"
        Window(prefix='def f(a, b):\\n', suffix='\\nreturn x')
        """
        replaced = replaced_after(text, cursor.window.suffix)
        suffix = cursor.window.suffix[replaced:]
        line_end = "\r\n" if suffix.startswith("\r\n") else "\n"
        if not text or "\n" in text or not (suffix == "" or suffix.startswith(line_end)):
            return None
        document = cursor.document[: cursor.offset] + text + line_end + cursor.document[cursor.offset + replaced :]
        offset = cursor.offset + len(text) + len(line_end)
        return cls(cursor, replace(cursor, document=document, offset=offset, window=window_at(document, offset), word=""))

    def wanted(self, newest: Cursor | None, last: Cursor | None) -> bool:
        """Whether the document's newest request (``newest``; ``last``, the newest of all) still leads to the
        target: on the way there (the answer typed through, or accepted) or typed on from it.

        >>> at = lambda prefix: _example(prefix, "\\n")
        >>> foresight = Foresight.after(at("x = "), "1", Window.at)
        >>> [foresight.wanted(at(p), at(p)) for p in ("x = ", "x = 1", "x = 1\\n    ", "x = 2", "x = 1\\ny\\n")]
        [True, True, True, False, False]
        >>> closed = Foresight.after(_example("def f(a", ")\\n"), ", b):", Window.at)  # it takes in the ")"
        >>> [closed.wanted(c, c) for c in (_example("def f(a, b", ")\\n"), _example("def f(a, b):\\n", "\\n"))]
        [True, True]
        """
        if newest is None or last is None or last.uri != newest.uri:
            return False
        if self.target.window.prefix.startswith(newest.window.prefix):
            return newest.window.typed_on_from(self.start.window) is not None
        typed = newest.window.typed_on_from(self.target.window)
        return typed is not None and "\n" not in typed


def _example(prefix: str, suffix: str) -> Cursor:
    """A cursor between ``prefix`` and ``suffix`` of a document, for the examples above."""
    line, column = prefix.count("\n"), len(prefix) - (prefix.rfind("\n") + 1)  # ASCII examples: a unit a character
    word = _WORD_BEFORE.search(prefix[len(prefix) - column :])
    word_text = word.group() if word else ""
    replaced = types.Range(types.Position(line, column - len(word_text)), types.Position(line, column))
    return Cursor("file:///a.py", prefix + suffix, len(prefix), Window.at(prefix + suffix, len(prefix)), word_text,
                  replaced)
