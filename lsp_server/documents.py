"""The server's copy of each open document, with lines split exactly as LSP splits them.

pygls 2.1.1's ``TextDocument`` splits lines with ``str.splitlines``, which also
breaks at ``\\f``, ``\\v``, ``\\x1c``-``\\x1e``, ``\\x85``, U+2028 and U+2029. LSP
breaks lines only at ``\\n``, ``\\r\\n`` and ``\\r``, so after a form feed every
line number the editor sends meant another line to pygls, edits landed in the
wrong place and the server's text silently drifted from the editor's. This
module owns line splitting, applying ``didChange`` edits (ranges in the
negotiated position encoding: UTF-16, UTF-8 or UTF-32 code units), and turning
positions into offsets, and `use_lsp_documents` plugs it into pygls. It
also keeps each document under the URI the client sent (`LSPWorkspace`), and
says what the engine reads for a notebook's cell (`document_script`).

An edit position off the text is clamped, never refused (a notification has no
answer to carry an error), and every clamp is logged as a warning:

- a character past the end of its line means the end of that line (the spec:
  "it defaults back to the line length"), so a line break is never eaten;
- a line past the last one means the end of the document;
- a position inside a character (half of a UTF-16 surrogate pair, a byte inside
  a UTF-8 sequence) means the start of that character, as VS Code does;
- a range whose end comes before its start is read the other way round.

>>> from lsprotocol.types import Position, Range, TextDocumentContentChangePartial
>>> document = LSPTextDocument("file:///a.py", "x = 1\\f\\ny = 2\\n")
>>> document.lines
['x = 1\\x0c\\n', 'y = 2\\n']
>>> document.apply_change(TextDocumentContentChangePartial(range=Range(Position(1, 4), Position(1, 5)), text="3"))
>>> document.source
'x = 1\\x0c\\ny = 3\\n'
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from itertools import accumulate
from urllib.parse import unquote

from lsprotocol import types
from pygls.protocol import LanguageServerProtocol
from pygls.workspace import TextDocument, Workspace
from pygls.workspace.position_codec import PositionCodec, Utf8, Utf16, Utf32

from cpc.session import Script, new_file_header

log = logging.getLogger(__name__)

_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+")
_OTHER_BREAKS = re.compile("[\v\f\x1c-\x1e\x85\u2028\u2029]")
"""What ``str.splitlines`` breaks on besides LSP's line breaks."""


def lsp_lines(text: str) -> tuple[str, ...]:
    """``text``'s lines, each with its line break: ``str.splitlines(keepends=True)`` with LSP's line breaks only.

    >>> lsp_lines("a\\u2028b\\rc\\r\\nd\\x85")
    ('a\\u2028b\\r', 'c\\r\\n', 'd\\x85')
    """
    if _OTHER_BREAKS.search(text) is None:  # the usual case, at C speed
        return tuple(text.splitlines(keepends=True))
    return tuple(_LINE.findall(text))


_PYTHON_CODECS = {Utf8: ("utf-8", 1), Utf16: ("utf-16-le", 2), Utf32: ("utf-32-le", 4)}
"""Each of pygls' unit counters as a Python codec and its bytes per code unit."""
_CHUNK = 256
"""Characters `character_index` counts at a time in C before it walks the last ones one by one."""


def code_units(text: str, codec: PositionCodec) -> int:
    """How many of the client's code units ``text`` spans: pygls' ``client_num_units``, at C speed (it walks
    the characters in Python, half a second over a minified file's one line).

    >>> code_units("a😀b", PositionCodec()), code_units("a😀b", PositionCodec("utf-8"))
    (4, 6)
    """
    name, width = _PYTHON_CODECS.get(type(codec.impl), ("utf-16-le", 2))
    # surrogatepass: a lone surrogate (a str can hold one) counts as pygls counts it, one character
    return len(text.encode(name, "surrogatepass")) // width


def character_index(line: str, units: int, codec: PositionCodec) -> tuple[int, bool]:
    """The index in ``line`` (without its line break) ``units`` code units in, and whether it is exact.

    Inside a character it is that character's index (its start); past the end
    of the line it is the line's length; either way not exact.

    >>> character_index("a😀b", 2, PositionCodec())  # UTF-16: the emoji is units 1-2
    (1, False)
    """
    if units <= 0:
        return 0, units == 0
    if line.isascii():  # one unit a character in every encoding
        return min(units, len(line)), units <= len(line)
    total = index = 0
    while index < len(line):  # whole chunks first, then the one the position falls in character by character
        size = code_units(line[index : index + _CHUNK], codec)
        if total + size > units:
            break
        total, index = total + size, index + _CHUNK
    count = codec.impl.code_units_for_char
    for char in line[index : index + _CHUNK]:
        if total == units:
            return index, True
        total += count(char)
        if total > units:
            return index, False
        index += 1
    return len(line), total == units


class LineTable:
    """A document's lines (LSP's line breaks) and the offset where each starts, kept across edits.

    Splitting a 3 MB document again took 20-30 ms of the server's event loop at every key. An edit here
    splits again only the lines it touches; line starts are summed from the edit on, as far as they are asked.

    >>> table = LineTable("ab\\ncd\\nef")
    >>> table.replace(1, 1, 4, 4, "X\\nY")
    >>> table.lines, table.start(2), table.start(4)
    (['ab\\n', 'cX\\n', 'Yd\\n', 'ef'], 6, 11)
    """

    def __init__(self, text: str) -> None:
        self.lines = list(lsp_lines(text))
        self._starts = [0]  # the starts of lines 0, 1, ...: as many as have been asked since the last edit before them

    def start(self, line: int) -> int:
        """The offset where line ``line`` starts; ``len(lines)``: the end of the text."""
        starts = self._starts
        if line >= len(starts):
            known = len(starts) - 1
            starts += accumulate(map(len, self.lines[known:line]), initial=starts.pop())
        return starts[line]

    def replace(self, first: int, last: int, start: int, end: int, text: str) -> None:
        """Put ``text`` in place of the characters from offset ``start`` (on line ``first``) to ``end`` (on line
        ``last``; a line ``len(lines)`` is the end of the text)."""
        lines = self.lines
        first = min(first, max(len(lines) - 1, 0))  # text added at the end may continue the last line
        if first > 0 and lines[first - 1].endswith("\r"):  # a "\n" put after it makes one line break of the two
            first -= 1
        stop = min(last + 1, len(lines))  # an edit ends before its line's break: the lines after it stay as they are
        base = self.start(first)
        region = "".join(lines[first:stop])
        lines[first:stop] = lsp_lines(region[: start - base] + text + region[end - base :])
        del self._starts[first + 1 :]


class LSPTextDocument(TextDocument):
    """A pygls text document whose lines, edits and positions follow LSP's line breaks."""

    @property
    def lines(self) -> list[str]:
        return self._line_table().lines

    def line_start(self, line: int) -> int:
        """The offset where line ``line`` starts (``len(lines)``: the end of the text)."""
        return self._line_table().start(line)

    def offset_at_position(self, client_position: types.Position) -> int:
        """The index into `source` of ``client_position``, clamped onto the text as the module says."""
        return self._place(self._line_table(), client_position)[1]

    def _line_table(self) -> LineTable:
        # Kept per text: pygls sets a whole new text (didOpen, a full change) without a word to this class.
        source = self.source
        if getattr(self, "_table_of", None) is not source:
            self._table, self._table_of = LineTable(source), source
        return self._table

    def _apply_incremental_change(self, change: types.TextDocumentContentChangePartial) -> None:
        table = self._line_table()
        (first, start), (last, end) = self._place(table, change.range.start), self._place(table, change.range.end)
        if end < start:
            log.warning("%s: edit range %s ends before it starts: applied as reversed", self.uri, _show(change.range))
            (first, start), (last, end) = (last, end), (first, start)
        table.replace(first, last, start, end, change.text)
        source = self.source
        self._source = self._table_of = source[:start] + change.text + source[end:]

    def _place(self, table: LineTable, position: types.Position) -> tuple[int, int]:
        """``position``'s line (at most ``len(lines)``) and offset in the text, clamped as the module says."""
        lines, units = table.lines, position.character
        line = min(position.line, len(lines))
        before = table.start(line)
        if line == len(lines):
            # Line len(lines) is the empty line after a final line break (or the
            # only line of an empty document); its one position is the end.
            has_last_empty_line = not lines or lines[-1][-1] in "\r\n"
            if position.line > len(lines) or units > 0 or not has_last_empty_line:
                log.warning("%s: position %s is past the end of the document: clamped to it", self.uri, _show(position))
            return line, before
        text = lines[line].rstrip("\r\n")
        column, exact = character_index(text, units, self.position_codec)
        if not exact:
            past_end = column == len(text)
            where = "past the end of its line: clamped to it" if past_end else "inside a character: moved to its start"
            encoding = self.position_codec.encoding
            log.warning("%s: position %s is %s (%s code units)", self.uri, _show(position), where, encoding)
        return line, before + column


class LSPWorkspace(Workspace):
    """A pygls workspace whose text documents are `LSPTextDocument`s, found by the URI the client names them by.

    pygls 2.1.1 keys its documents by the URI with its escapes undone (``%20`` read as a space), and its
    ``text_documents`` map is read by that key: a document whose path the editor escapes (a space, a
    letter outside ASCII, a Windows drive's colon: VS Code and Neovim escape them all) was never found
    again. Here each document is kept under the URI the client sent, which every later message repeats.

    >>> workspace = LSPWorkspace(None)
    >>> workspace.put_text_document(types.TextDocumentItem("file:///my%20project/a.py", "python", 1, "x = 1\\n"))
    >>> workspace.text_documents["file:///my%20project/a.py"].source
    'x = 1\\n'
    """

    @classmethod
    def like(cls, workspace: Workspace) -> LSPWorkspace:
        """An empty workspace with ``workspace``'s root, folders, sync kind and position encoding."""
        folders = list(workspace.folders.values())
        return cls(workspace.root_uri, workspace._sync_kind, folders, workspace.position_encoding)

    def put_text_document(self, text_document: types.TextDocumentItem, notebook_uri: str | None = None) -> None:
        uri = text_document.uri
        self._text_documents[uri] = self._create_text_document(
            uri, source=text_document.text, version=text_document.version, language_id=text_document.language_id
        )
        if notebook_uri:  # pygls' own map, read by `get_notebook_document` with escapes undone
            self._cell_in_notebook[unquote(uri)] = unquote(notebook_uri)

    def update_text_document(
        self, text_doc: types.VersionedTextDocumentIdentifier, change: types.TextDocumentContentChangeEvent
    ) -> None:
        document = self._text_documents[text_doc.uri]
        document.apply_change(change)
        document.version = text_doc.version

    def remove_text_document(self, doc_uri: str) -> None:
        self._text_documents.pop(doc_uri, None)
        self._cell_in_notebook.pop(unquote(doc_uri), None)

    def get_text_document(self, doc_uri: str) -> TextDocument:
        return self._text_documents.get(doc_uri) or self._create_text_document(doc_uri)

    def _create_text_document(
        self,
        doc_uri: str,
        source: str | None = None,
        version: int | None = None,
        language_id: str | None = None,
    ) -> LSPTextDocument:
        return LSPTextDocument(
            doc_uri,
            source=source,
            version=version,
            language_id=language_id,
            sync_kind=self._sync_kind,
            position_codec=self.position_codec,
        )


def use_lsp_documents(protocol: LanguageServerProtocol) -> None:
    """Give ``protocol`` an `LSPWorkspace` in place of the plain one pygls made in ``initialize``.

    pygls has no hook for its document class: ``lsp_initialize`` builds a
    ``Workspace`` and then calls the server's initialize handler, which calls
    this before any document can be opened.
    """
    protocol._workspace = LSPWorkspace.like(protocol.workspace)


def document_script(workspace: Workspace, uri: str) -> Script | None:
    """What the engine reads for open document ``uri``: its text (a new file's after a comment naming it:
    `cpc.file_header`), or for a code cell of a notebook (LSP's
    notebook synchronization) the notebook's code cells of its language around it (`cpc.session.Script`);
    None when no such document is open.

    >>> workspace = LSPWorkspace(None)
    >>> cells = [("a", types.NotebookCellKind.Code, "import os"), ("b", types.NotebookCellKind.Markup, "# Notes"),
    ...          ("c", types.NotebookCellKind.Code, "os.pa")]
    >>> workspace.put_notebook_document(types.DidOpenNotebookDocumentParams(
    ...     types.NotebookDocument("file:///n.ipynb", "jupyter-notebook", 1,
    ...                            [types.NotebookCell(kind, f"cell:{name}") for name, kind, _ in cells]),
    ...     [types.TextDocumentItem(f"cell:{name}", "python", 1, text) for name, _, text in cells]))
    >>> document_script(workspace, "cell:c")
    Script(before='import os\\n\\n', cell='os.pa', after='')
    """
    document = workspace.text_documents.get(uri)
    if document is None:
        return None
    notebook = workspace.get_notebook_document(cell_uri=uri)
    documents = workspace.text_documents
    code = [cell.document for cell in (notebook.cells if notebook is not None else [])
            if cell.kind == types.NotebookCellKind.Code and cell.document in documents
            and documents[cell.document].language_id == document.language_id]
    if uri not in code:  # no notebook's cell, or a markdown one: its own text, a new file's after its name
        return Script(new_file_header(uri, document.source), document.source, "")
    return Script.around([documents[cell].source for cell in code], code.index(uri))


def edit_end(workspace: Workspace, uri: str, changes: Sequence[types.TextDocumentContentChangeEvent]) -> int | None:
    """Where the last of the ``changes`` made to document ``uri`` ends in its new text (None: a whole-text change)."""
    document = workspace.text_documents.get(uri)
    change = changes[-1] if changes else None
    if document is None or not isinstance(change, types.TextDocumentContentChangePartial):
        return None
    return document.offset_at_position(change.range.start) + len(change.text)


def _show(value: types.Position | types.Range) -> str:
    if isinstance(value, types.Range):
        return f"{_show(value.start)}-{_show(value.end)}"
    return f"{value.line}:{value.character}"
