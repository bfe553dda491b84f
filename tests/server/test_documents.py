"""The server's documents stay in sync with the editor's, whatever the line breaks and characters.

Unit tests of `lsp_server.documents` against hand-written cases, then a
property over the real server on stdio: random edit sequences in UTF-16,
UTF-8 and UTF-32, checked against a client-side model of the text after
every step (``cpc/documentText``).
"""

from __future__ import annotations

import doctest
import itertools
import logging
import re
import sys

import pytest
import pytest_lsp
from hypothesis import example, given, settings
from hypothesis import strategies as st
from lsprotocol import types
from pygls.workspace.position_codec import PositionCodec
from pytest_lsp import LanguageClient, client_capabilities

from lsp_server import documents
from cpc.session import Script
from lsp_server.documents import LSPTextDocument, lsp_lines
from tests.support.editor_client import editor_config
from tests.support.strategies import code_text, examples
from tests.server.test_lsp import wait_until_loaded

ENCODINGS = ["utf-16", "utf-8", "utf-32"]
_PYTHON_CODECS = {"utf-16": ("utf-16-le", 2), "utf-8": ("utf-8", 1), "utf-32": ("utf-32-le", 4)}
NOT_LSP_LINE_BREAKS = ["\f", "\v", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]
"""`str.splitlines` breaks at these; LSP does not."""


def units(text: str, encoding: str) -> int:
    """``text``'s length in ``encoding`` code units (the client's count, by encoding, not by the server's loop)."""
    codec, size = _PYTHON_CODECS[encoding]
    return len(text.encode(codec)) // size


def position_of(text: str, offset: int, encoding: str) -> types.Position:
    """The LSP position of ``offset`` in ``text``, counted from the text before it."""
    lines_before = re.split(r"\r\n|\r|\n", text[:offset])
    return types.Position(len(lines_before) - 1, units(lines_before[-1], encoding))


def document(text: str, encoding: str = "utf-16") -> LSPTextDocument:
    return LSPTextDocument("file:///t.py", text, position_codec=PositionCodec(encoding))


def edit(doc: LSPTextDocument, start: tuple[int, int], end: tuple[int, int], text: str) -> str:
    rng = types.Range(types.Position(*start), types.Position(*end))
    doc.apply_change(types.TextDocumentContentChangePartial(range=rng, text=text))
    assert doc.lines == list(lsp_lines(doc.source))  # the lines kept across edits are the new text's
    return doc.source


# -- the document, by hand ---------------------------------------------------------


def test_the_module_examples_hold():
    assert doctest.testmod(documents).failed == 0


@pytest.mark.parametrize("char", NOT_LSP_LINE_BREAKS)
def test_only_lsp_line_breaks_split_lines(char):
    text = f"a{char}b\nc"
    assert lsp_lines(text) == (f"a{char}b\n", "c")
    assert edit(document(text), (1, 0), (1, 1), "C") == f"a{char}b\nC"


def test_lone_cr_and_crlf_break_lines_once():
    assert lsp_lines("a\rb\r\nc\n\rd\r\r\n") == ("a\r", "b\r\n", "c\n", "\r", "d\r", "\r\n")
    assert lsp_lines("") == ()


def test_an_edit_after_a_form_feed_lands_on_the_editors_line():
    text = "import os\n\f\ndef f():\n    return 1\n"  # as in many stdlib files
    assert edit(document(text), (3, 11), (3, 12), "2") == "import os\n\f\ndef f():\n    return 2\n"


def test_cr_and_lf_joined_and_split_by_edits():
    doc = document("a\rx\nb")
    assert len(doc.lines) == 3
    assert edit(doc, (1, 0), (1, 1), "") == "a\r\nb"  # the CR and the LF now make one line break
    assert doc.lines == ["a\r\n", "b"]
    assert edit(doc, (1, 1), (1, 1), "c") == "a\r\nbc"
    assert edit(doc, (0, 1), (1, 0), "\r-\n") == "a\r-\nbc"  # and split again
    assert edit(doc, (1, 1), (2, 0), "") == "a\r-bc"


def test_a_lone_cr_then_an_lf_typed_after_it():
    doc = document("a")
    assert edit(doc, (0, 1), (0, 1), "\r") == "a\r"
    assert edit(doc, (1, 0), (1, 0), "\n") == "a\r\n"
    assert edit(doc, (1, 0), (1, 0), "z") == "a\r\nz"


@pytest.mark.parametrize(
    "encoding, after_emoji, after_cjk",
    [("utf-16", 3, 5), ("utf-8", 5, 11), ("utf-32", 2, 4)],
)
def test_positions_count_the_negotiated_code_units(encoding, after_emoji, after_cjk):
    doc = document("a😀日本b\n", encoding)
    assert edit(doc, (0, after_emoji), (0, after_emoji), "X") == "a😀X日本b\n"
    assert edit(doc, (0, after_cjk + 1), (0, after_cjk + 1), "Y") == "a😀X日本Yb\n"
    assert doc.offset_at_position(types.Position(0, after_emoji)) == 2


def test_combining_marks_are_characters_of_their_own():
    doc = document("e\u0301x")
    assert edit(doc, (0, 1), (0, 1), "|") == "e|\u0301x"  # between the letter and its accent: a valid position
    assert edit(doc, (0, 3), (0, 4), "") == "e|\u0301"


@pytest.mark.parametrize("encoding, inside", [("utf-16", 2), ("utf-8", 2), ("utf-8", 4)])
def test_a_position_inside_a_character_moves_to_its_start(encoding, inside, caplog):
    doc = document("a😀b", encoding)
    with caplog.at_level(logging.WARNING, logger=documents.__name__):
        assert edit(doc, (0, inside), (0, inside), "X") == "aX😀b"
    assert "inside a character" in caplog.text


def walked_index(line: str, units: int, codec: PositionCodec) -> tuple[int, bool]:
    """`documents.character_index` the slow way: pygls' own count, one character after another."""
    total = 0
    for index, char in enumerate(line):
        if total == units:
            return index, True
        total += codec.impl.code_units_for_char(char)
        if total > units:
            return index, False
    return len(line), total == units


# pieces whose code units differ by encoding (a lone surrogate: a str can hold one), repeated past a chunk
line_pieces = st.sampled_from(["a", "é", "日", "😀", "\ud800", "\u0301", " " * 40, "x" * 300])


@settings(max_examples=examples(200))
@given(pieces=st.lists(line_pieces, max_size=12), encoding=st.sampled_from(ENCODINGS), data=st.data())
@example(pieces=["x" * 300, "😀", "a"], encoding="utf-16", data=None)
def test_positions_on_long_lines_are_counted_as_pygls_counts_them(pieces, encoding, data):
    line, codec = "".join(pieces), PositionCodec(encoding)
    total = sum(codec.impl.code_units_for_char(char) for char in line)
    assert documents.code_units(line, codec) == codec.client_num_units(line) == total
    targets = range(-1, total + 3) if data is None else [data.draw(st.integers(-1, total + 2), label="units")]
    for units_in in targets:
        assert documents.character_index(line, units_in, codec) == walked_index(line, units_in, codec), units_in


def test_edits_at_the_end_of_a_line_and_of_the_document(caplog):
    doc = document("ab\ncd\n")
    with caplog.at_level(logging.WARNING, logger=documents.__name__):
        assert edit(doc, (0, 2), (0, 2), "!") == "ab!\ncd\n"
        assert edit(doc, (0, 3), (1, 0), "") == "ab!cd\n"  # the line break, deleted as a range to the next line
        assert edit(doc, (1, 0), (1, 0), "ef") == "ab!cd\nef"  # the empty last line
        assert edit(doc, (1, 2), (1, 2), "\n") == "ab!cd\nef\n"
    assert caplog.text == ""


def test_positions_off_the_text_are_clamped_and_logged(caplog):
    doc = document("ab\ncd")
    with caplog.at_level(logging.WARNING, logger=documents.__name__):
        assert edit(doc, (0, 1), (0, 99), "X") == "aX\ncd"  # the line break stays
        assert "past the end of its line" in caplog.text
        assert edit(doc, (7, 0), (9, 3), "!") == "aX\ncd!"
        assert "past the end of the document" in caplog.text
        assert edit(doc, (1, 0), (0, 2), "") == "aXcd!"
        assert "ends before it starts" in caplog.text


def test_full_text_changes_and_an_empty_document():
    doc = document("old\f\n")
    doc.apply_change(types.TextDocumentContentChangeWholeDocument(text=""))
    assert doc.source == "" and doc.lines == []
    assert edit(doc, (0, 0), (0, 0), "x\u2028y") == "x\u2028y"
    assert doc.offset_at_position(types.Position(0, 3)) == 3


def test_a_new_file_is_read_after_a_line_naming_it():
    workspace = documents.LSPWorkspace(None)
    for uri, text in (("file:///p/new%20tool.py", "imp"), ("file:///p/long.py", "x = 1\n" * 40), ("untitled:Untitled-1", "imp")):
        workspace.put_text_document(types.TextDocumentItem(uri, "python", 1, text))
    assert documents.document_script(workspace, "file:///p/new%20tool.py") == Script("# Path: new tool.py\n", "imp", "")
    assert documents.document_script(workspace, "file:///p/long.py").before == ""  # its code tells the language
    assert documents.document_script(workspace, "untitled:Untitled-1").before == ""  # no name to tell it


# -- the real server -----------------------------------------------------------------

SERVER = [sys.executable, "-m", "lsp_server", "--model", "smollm2"]
SETTINGS = {"debounceMs": 0, "maxTokens": 1, "mode": "naive", "threads": 1}
"""The cheapest real completion: the request at the end is about the position, not the suggestion (one
thread: llama.cpp's threads wait for each other, ten times slower when the cores are shared)."""
_uris = (f"file:///sync/{n}.py" for n in itertools.count())


@pytest_lsp.fixture(scope="module", params=ENCODINGS, config=editor_config(SERVER))
async def client(lsp_client: LanguageClient, request):
    capabilities = client_capabilities("visual-studio-code")
    capabilities.general = types.GeneralClientCapabilities(position_encodings=[request.param])
    result = await lsp_client.initialize_session(
        types.InitializeParams(capabilities=capabilities, initialization_options=SETTINGS)
    )
    assert result.capabilities.position_encoding == request.param
    lsp_client.encoding = request.param
    assert (await wait_until_loaded(lsp_client)).ready
    yield
    await lsp_client.shutdown_session()


_ATOMS = ["\n", "\r\n", "\r", "\f", "\v", "\u2028", "\x85", "😀", "👍🏽", "日本", "e\u0301", "x", "def f():", "    "]
texts = st.lists(st.one_of(st.sampled_from(_ATOMS), code_text), max_size=6).map("".join)
one_edit = st.tuples(st.integers(0, 10**6), st.integers(0, 12), texts)
"""Where it starts (taken modulo the text's length + 1), how many characters it replaces, and the new text."""
steps = st.lists(st.lists(one_edit, min_size=1, max_size=3), min_size=1, max_size=4)
"""Each step is one ``didChange`` with one to three changes, applied in order."""


def resolve(text: str, start: int, span: int) -> tuple[int, int]:
    """The offsets an abstract edit covers in ``text``; LSP has no position between a CR and its LF."""
    start = start % (len(text) + 1)
    end = min(start + span, len(text))
    return _off_crlf(text, start), _off_crlf(text, end)


def _off_crlf(text: str, offset: int) -> int:
    return offset - 1 if text[offset - 1 : offset + 1] == "\r\n" else offset


@settings(max_examples=examples(300))
@example(initial="a\rx\nb", edits=[[(2, 1, "")]], asked=[0], encoding="utf-16")  # the CR and the LF after the edit make one break
@example(initial="a\r", edits=[[(2, 0, "\nz")]], asked=[1], encoding="utf-16")  # text added after a final CR
@example(initial="ab", edits=[[(2, 0, "c\nd")]], asked=[1], encoding="utf-16")  # text added to a last line without a break
@given(initial=texts, edits=steps, asked=st.lists(st.integers(0, 40), max_size=4), encoding=st.sampled_from(ENCODINGS))
def test_lines_kept_across_edits_are_the_lines_of_the_new_text(initial, edits, asked, encoding):
    # The document splits again only the lines an edit touches and sums line starts as they are asked:
    # after any edits, and line starts asked in any order between them, both are those of the whole text.
    doc, text = document(initial, encoding), initial
    for step in edits:
        for (start, span, new_text), line in zip(step, itertools.cycle(asked or [0])):
            doc.line_start(min(line, len(doc.lines)))
            start, end = resolve(text, start, span)
            span = [position_of(text, offset, encoding) for offset in (start, end)]
            edit(doc, *[(position.line, position.character) for position in span], new_text)
            text = text[:start] + new_text + text[end:]
            assert doc.source == text
            assert doc.lines == list(lsp_lines(text))
    assert [doc.line_start(line) for line in range(len(doc.lines) + 1)] == [
        len("".join(doc.lines[:line])) for line in range(len(doc.lines) + 1)]


@pytest.mark.slow
@pytest.mark.asyncio(loop_scope="module")
@settings(max_examples=examples(10), deadline=None)
# What Hypothesis found against pygls's own document (lines split at \f): a
# range over a form feed deleted the wrong text, and the end of a line holding
# form feeds was refused as past its end.
@example(initial="\n", edits=[[(0, 0, "\f"), (0, 2, "")]])
@example(initial="", edits=[[(0, 0, "\f\f")]])
@given(initial=texts, edits=steps)
async def test_the_servers_text_follows_random_edits(client: LanguageClient, initial: str, edits):
    encoding, uri = client.encoding, next(_uris)
    text, version = initial, 1
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(types.TextDocumentItem(uri=uri, language_id="python", version=version, text=text))
    )
    for step in edits:
        changes = []
        for start, span, new_text in step:
            start, end = resolve(text, start, span)
            rng = types.Range(position_of(text, start, encoding), position_of(text, end, encoding))
            changes.append(types.TextDocumentContentChangePartial(range=rng, text=new_text))
            text = text[:start] + new_text + text[end:]
            last_edit_end = start + len(new_text)
        version += 1
        client.text_document_did_change(
            types.DidChangeTextDocumentParams(types.VersionedTextDocumentIdentifier(uri=uri, version=version), changes)
        )
        server = await client.protocol.send_request_async("cpc/documentText", {"uri": uri})
        assert (server.text, server.version) == (text, version)
    line = position_of(text, last_edit_end, encoding).line
    end_of_line = types.Position(line, units(re.split(r"\r\n|\r|\n", text)[line], encoding))
    answer = await client.text_document_inline_completion_async(
        types.InlineCompletionParams(
            text_document=types.TextDocumentIdentifier(uri),
            position=end_of_line,
            context=types.InlineCompletionContext(trigger_kind=types.InlineCompletionTriggerKind.Automatic),
        )
    )
    assert all(item.range.end == end_of_line for item in answer.items)
    client.text_document_did_close(types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(uri)))


@pytest.mark.asyncio(loop_scope="module")
async def test_a_document_whose_path_the_editor_escapes_is_served(client: LanguageClient):
    # VS Code and Neovim escape a path's spaces and non-ASCII letters (and, on Windows, a drive's colon); pygls
    # keys its documents by the unescaped URI, so each request for such a document found none.
    uri = "file:///my%20project/caf%C3%A9%2Bx.py"
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(types.TextDocumentItem(uri=uri, language_id="python", version=1, text="x = 1\n"))
    )
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        types.VersionedTextDocumentIdentifier(uri=uri, version=2),
        [types.TextDocumentContentChangePartial(range=types.Range(types.Position(1, 0), types.Position(1, 0)),
                                                text="print(x")],
    ))
    server = await client.protocol.send_request_async("cpc/documentText", {"uri": uri})
    assert (server.text, server.version) == ("x = 1\nprint(x", 2)
    answer = await client.text_document_inline_completion_async(
        types.InlineCompletionParams(
            text_document=types.TextDocumentIdentifier(uri),
            position=types.Position(1, 7),
            context=types.InlineCompletionContext(trigger_kind=types.InlineCompletionTriggerKind.Invoked),
        )
    )
    assert answer.items and all(item.range.end == types.Position(1, 7) for item in answer.items)
    client.text_document_did_close(types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(uri)))
    with pytest.raises(Exception, match="unknown document"):
        await client.protocol.send_request_async("cpc/documentText", {"uri": uri})
