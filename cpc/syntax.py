"""Where a word is written: in code or in prose, as a new name or as a use of one (a line-level reading, no parser).

The identifier model (`cpc.identifiers`) holds each word the decoder spells
against the corpus's names. That is right for a use (``self.widht``
is a slip, ``outputStream`` an invention) and wrong elsewhere:

- in prose, a comment or a string, words are not names at all;
- a definition brings a new name in: ``def xor(i, j)``, ``for idx, elem in``,
  ``as f``, ``lambda x``, ``let``/``const``/``var`` (and Rust's
  ``if let Some(x)``), ``function f(a, b)``, ``catch (e)`` (Dart's
  ``catch (e, stack)``); Go's, Rust's, Kotlin's and Swift's ``func``/``fn``/``fun``
  and their parameters' names (``fn area(width: u32, ``), a Rust closure's
  ``|x|``; in the languages that write a type before the name (C, C++, Java,
  C#, Dart: `TYPES_FIRST`, `DART`), the name after a declaration's type
  (``int count``, ``const char *name``, ``List<String> names``, a
  parameter's ``(int width, ``, ``catch (IOException e``) and the names
  after the first (``int a = 0, b``), a template's ``typename T``. An
  imported name is not one: it names what another module defines;
- the first word of a statement may be a new name (``result = []``,
  ``self.total = 0``, Go's ``n := 0`` and ``if v, ok := m[k]``) as well as
  a use (``print(...)``, ``if done {``).

`Place` follows the text as it is written: which string or comment it is
inside (opened and closed as the bytes come, escapes and all, the same
whether the text comes whole or a token at a time), and the current line.
`Place.role` reads the role of a word that starts there:

    >>> [Place.of(text, PYTHON).role() for text in (b"def f(a, ", b"for idx, ", b"x = f(a, ")]
    ['define', 'define', 'use']
    >>> [Place.of(text, PYTHON).role() for text in (b"    # the ", b"s = 'a ", b"'''Doc\\n", b"    ")]
    ['prose', 'prose', 'prose', 'start']
    >>> Place.of(b"const { a, ", C_LIKE).role(), Place.of(b"x = y // a ", C_LIKE).role()
    ('define', 'prose')
    >>> [Place.of(text, TYPES_FIRST).role() for text in (b"    int ", b"    return ", b"void f(const char *", b"    if (")]
    ['define', 'use', 'define', 'use']
    >>> [Place.of(text, C_LIKE).role() for text in (b"func (s *Server) ", b"fn area(width: u32, ", b"    n := f(a, ")]
    ['define', 'define', 'use']
    >>> [Place.of(text, TYPES_FIRST).role() for text in (b"    int a = 0, ", b"} catch (", b"} catch (IOException ")]
    ['define', 'use', 'define']

In Rust a ``'`` is a lifetime or a character literal, and opens no string; a raw string ends at its own
quote and ``#``s:

    >>> Place.of(b"fn get(buf: &'a mut [u8], ", RUST).role(), Place.of(b"let s: &'static str = ", RUST).role()
    ('define', 'use')
    >>> Place.of(b'let s = r#"say "hi" ', RUST).role(), Place.of(b'let s = r#"say "hi""#; let ', RUST).role()
    ('prose', 'define')
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import PurePosixPath

USE, START, DEFINE, PROSE = "use", "start", "define", "prose"
"""The roles of a word: a use of a name; the first word of a statement (a new name or a use); a new name;
not a name (in a comment or a string)."""

MAX_LINE = 512
"""The bytes of the current line a place keeps (its start tells a definition, its end the rest)."""
ASSIGNMENT = re.compile(rb"\s*(?:=(?!=)|(?:[-+*/%&|^@]|//|\*\*|>>|<<)=|:|,|\Z)")
"""What follows a name being assigned, where a statement's first word is a new name (`START`): ``=`` (not
``==``), an augmented assignment, an annotation's ``:``, a declaration's ``:=`` (Go, Python's walrus), another
target's ``,``; or nothing yet."""

_DEFINES = rb"""
    (?:^|[^\w.$])(?:def|class|function|let|const|var|val|as|global|nonlocal|lambda|func|fn|fun|type|interface|enum
       |trait|mod|namespace)\s+\Z                                   # the name after the keyword
    | ^\s*(?:async\s+)?def\s+\w+\s*\((?:[^()]|\([^()]*\))*\Z       # a def's parameters
    | (?:^|[^\w.$])function\b[^(]*\([^)]*\Z                         # a function's parameters
    | (?:^|[^\w.$])(?:func|fn|fun)\s+\w+\s*(?:<[^<>(){}]*>|\[[^\[\](){}]*\])?\s*\((?:[^(){}]*,)?\s*(?:mut\s+|&\s*(?:mut\s+)?)?\Z
                                                                    # a parameter's name (Go, Rust, Kotlin, Swift)
    | (?:^|[^\w.$])func\s*\((?:\s*|[^()]*\)\s*|[^()]*\)\s*\w+\s*\((?:[^(){}]*,)?\s*)\Z
                                                                    # Go: a method's receiver, name, parameters
    | ^\s*(?:async\s+)?for\s+(?:(?!\b(?:in|of)\b)[\w\s,()\[\]*])*\Z  # a for loop's targets, before `in`/`of`
    | (?:^|[^\w.$])lambda\s+[\w\s,=*]*\Z                            # a lambda's parameters
    | (?:^|[^\w.$])(?:let|const|var|val)\s+(?:(?!\b(?:in|of)\b)[\w\s,{}\[\]:()&])*\Z  # declared names, destructured
                                                                    # or in a pattern (Rust's if let Some(x))
    | (?:[=(,]\s*|\bmove\s+)\|[\w\s,&]*\Z                           # a closure's parameters (Rust)
"""
_UNTYPED_CATCH = rb"""
    | (?:^|[^\w.$])catch\s*\(\s*(?:[\w$]+\s*,\s*)?\Z                # a caught exception (JavaScript), Dart's stack too
"""
_MODIFIERS = rb"""
    (?:(?:const|static|final|volatile|unsigned|signed|register|extern|inline|struct|enum|union|public|private
       |protected|internal|readonly|abstract|synchronized|transient|virtual|mutable|constexpr|override|typedef
       |sealed|partial|unsafe)\s+)*
"""
_TYPE = rb"""
    (?!(?:return|else|elif|elseif|if|for|foreach|while|do|switch|case|default|goto|break|continue|throw|throws
       |new|delete|typeof|instanceof|await|yield|export|import|package|using|in|of|is|as|not|and|or|sizeof
       |try|catch|finally|assert|extends|implements|co_await|co_return|co_yield|struct|enum|union|class
       |interface|function|let|const|var|typedef|typename|until|then|lock|checked|when)\b)
    [A-Za-z_$][\w$]*(?:(?:\.|::)[A-Za-z_$][\w$]*)*                  # a type, not a keyword an expression follows
    \s*(?:<[^;(){}=]*>)?(?:\s*\[\s*\])*                             # its arguments, an array
    (?:\s+[*&]*|\s*[*&]+\s*)                                         # a blank or a pointer: the name comes next
"""
_DECLARED = rb"""
    [A-Za-z_$][\w$]*(?:\s*\[[^\[\]]*\])*                              # a declared name, an array's size
    (?:\s*=(?:[^;,(){}\[\]]|\([^()]*\)|\[[^\[\]]*\]|\{[^{}]*\})*)?       # its initial value
    \s*,\s*[*&]*                                                     # another name comes next
"""
_TYPED_DECLARATION = rb"""
    | (?:^|[;{(,])\s*(?:@\w+(?:\([^()]*\))?\s+)*""" + _MODIFIERS + _TYPE + rb"""\Z      # the name after a type
    | (?:^|[;{])\s*""" + _MODIFIERS + _TYPE + rb"(?:" + _DECLARED + rb""")+\Z      # the names after the first (int a, b)
    | \btemplate\s*<(?:[^<>]*,)?\s*typename(?:\s*\.\.\.)?\s*\Z                # a template's type parameter (C++)
"""
_STARTS = rb"""
    \s*                                   # a statement's start
    | \s*[\w$]+(?:\s*,\s*[\w$]+)*\s*,\s*  # more targets of an assignment (`a, b = ...`)
    | \s*[\w$]+(?:\.[\w$]+)*\.            # an attribute at a statement's start (`self.total = 0`, or a call)
"""
_CONDITION_STARTS = rb"""
    | \s*(?:\}\s*)?(?:else\s+)?(?:if|switch)\s+(?:[\w$]+\s*,\s*)*   # a condition's own statement (Go's if v, ok :=)
"""


@dataclass(frozen=True)
class Syntax:
    """How a language writes comments and strings."""

    line_comment: bytes
    block_comment: tuple[bytes, bytes] | None
    quotes: tuple[bytes, ...]
    """String delimiters, longer first (a triple quote before a single one)."""
    multiline: frozenset[bytes]
    """The delimiters whose strings may span lines (the others end at the line's end)."""
    types_first: bool = False
    """A declaration writes its type before the name (``int count``): the word after a type is a new name."""
    typed_catch: bool = False
    """``catch (`` takes the exception's type first (``catch (IOException e)``): the word after it is a use."""
    bare_conditions: bool = False
    """``if`` and ``switch`` may take no parentheses and open with a statement of their own (Go's
    ``if v, ok := m[k]; ok``): the words after them are a statement's first ones."""
    character: bytes = b""
    """A whole character literal, read past as code, where ``'`` opens no string (Rust: ``'x'``, ``'\\n'``; a
    lone ``'`` names a lifetime, ``&'a str``)."""
    verbatim: frozenset[bytes] = frozenset()
    """The delimiters whose strings take no escapes: a backslash in them is a character (Go's backquoted
    strings: ``strings.ReplaceAll(name, `\\`, `/`)``)."""
    raw_string: bytes = b""
    """A raw string's opener, whose quote and ``#``s close it with no escapes (Rust: ``r"C:\\"``,
    ``r#"say "hi""#``, ``br"..."``)."""
    openers: re.Pattern = field(init=False, repr=False, compare=False)
    defines: re.Pattern = field(init=False, repr=False, compare=False)
    """Where a word is a new name (`DEFINE`): the line up to it matches."""
    starts: re.Pattern = field(init=False, repr=False, compare=False)
    """Where a word is a statement's first (`START`): the whole line up to it matches."""

    def __post_init__(self) -> None:
        block = (self.block_comment[0],) if self.block_comment else ()
        found = b"|".join(re.escape(token) for token in (b"\n", self.line_comment, *block, *self.quotes))
        literal = b"(?P<character>" + self.character + b")|" if self.character else b""  # matched first: its ' opens nothing
        raw = b"(?P<raw>" + self.raw_string + b")|" if self.raw_string else b""  # before the quote it ends with
        object.__setattr__(self, "openers", re.compile(literal + raw + found))
        defines = _DEFINES + (_TYPED_DECLARATION if self.types_first else b"") + (b"" if self.typed_catch else _UNTYPED_CATCH)
        object.__setattr__(self, "defines", re.compile(defines, re.X))
        object.__setattr__(self, "starts", re.compile(_STARTS + (_CONDITION_STARTS if self.bare_conditions else b""), re.X))

    @staticmethod
    def of(name: str | None) -> Syntax:
        """The syntax of a document by its name or URI's extension: `PYTHON` for ``#``-comment languages
        (and Jupyter notebooks: Python's, R's, Julia's), `TYPES_FIRST` for C, C++, Java and C#, `DART`,
        `RUST`, `GO`, `C_LIKE` for the others (JavaScript, TypeScript...) and for no extension. A URI's fragment
        is not its name's (a notebook's cell).

        >>> Syntax.of("file:///w/a.py") is PYTHON, Syntax.of("file:///w/b.ts") is C_LIKE, Syntax.of(None) is C_LIKE
        (True, True, True)
        >>> Syntax.of("file:///w/Main.java") is TYPES_FIRST, Syntax.of("file:///w/main.go") is GO
        (True, True)
        >>> Syntax.of("vscode-notebook-cell:/w/lab%20notes.ipynb#W2sZmlsZQ%3D%3D") is PYTHON
        True
        """
        suffix = PurePosixPath((name or "").partition("#")[0]).suffix.lower()
        if suffix in _OWN_SYNTAX:
            return _OWN_SYNTAX[suffix]
        return PYTHON if suffix in _HASH_COMMENTS else TYPES_FIRST if suffix in _TYPES_FIRST else C_LIKE


PYTHON = Syntax(b"#", None, (b'"""', b"'''", b'"', b"'"), frozenset({b'"""', b"'''"}))
"""Python, and the other languages with ``#`` comments."""
C_LIKE = Syntax(b"//", (b"/*", b"*/"), (b"`", b'"', b"'"), frozenset({b"`"}), bare_conditions=True)
"""JavaScript and the languages that comment like C."""
TYPES_FIRST = replace(
    C_LIKE, quotes=(b'"""', b"`", b'"', b"'"), multiline=frozenset({b"`", b'"""'}), types_first=True, typed_catch=True
)
"""The languages that comment like C and write a declaration's type before its name (Java's text blocks in
three double quotes span lines)."""
DART = replace(
    TYPES_FIRST, quotes=(b'"""', b"'''", b'"', b"'"), multiline=frozenset({b'"""', b"'''"}), typed_catch=False
)
"""Dart: types first, but ``catch (e, stack)`` takes no type (``on FormatException catch (e)``); strings in three
quotes span lines."""
RUST = replace(
    C_LIKE, quotes=(b'"',), multiline=frozenset({b'"'}),
    character=rb"'(?:\\(?:u\{[0-9a-fA-F]{1,6}\}|x[0-9a-fA-F]{2}|.)|[^\\'\n\x80-\xff]|[\xc0-\xf7][\x80-\xbf]{1,3})'",
    raw_string=rb'(?<![\w])[bc]?r#*"',
)
"""Rust: a ``'`` is a character literal (``'x'``) or a lifetime (``'a``, ``'static``), which opens nothing; strings
span lines, raw ones (``r#"..."#``) end at their own quote and ``#``s."""
GO = replace(C_LIKE, verbatim=frozenset({b"`"}))
"""Go: a backquoted string is raw, a backslash in it escapes nothing."""
_OWN_SYNTAX = {".dart": DART, ".rs": RUST, ".go": GO}
_TYPES_FIRST = frozenset(".c .h .cc .cpp .cxx .c++ .hpp .hh .hxx .ino .java .cs .m .mm .groovy".split())
_HASH_COMMENTS = frozenset(
    ".py .pyi .pyw .ipynb .sh .bash .zsh .rb .pl .pm .r .yaml .yml .toml .cfg .cmake .jl .ex .exs .nim .tcl .ps1".split()
)


@dataclass(frozen=True)
class Place:
    """A point in a text being written: the current line, and the string or comment it is inside."""

    syntax: Syntax
    line: bytes = b""
    """The current line up to here (its last `MAX_LINE` bytes)."""
    inside: bytes | None = None
    """The delimiter of the string or comment the text is inside; None in code."""
    line_opened: bytes | None = None
    """`inside` where the current line starts: a piece written next is read with the line again from there."""
    long_line: bool = False
    """The line is longer than `MAX_LINE`: a piece written next is read on from here alone."""

    @classmethod
    def of(cls, text: bytes, syntax: Syntax) -> Place:
        """The place at the end of ``text`` (read from its start: a text that starts inside a string is misread).

        The place where its last line starts is kept (`_line_start`): the texts of a request's starts, and
        of the keystrokes after it, differ in their last line, which is all that is read again. Reading on
        from a line's start gives what reading from the text's start gives: no delimiter holds a newline.
        """
        cut = text.rfind(b"\n") + 1
        return _line_start(text[:cut], syntax).after(text[cut:])

    def after(self, data: bytes) -> Place:
        """The place once ``data`` is written here: as if the text were read whole, where a delimiter, a
        character literal or an escape is split between pieces (a model's tokens: ``r`` then ``#"``, ``'"``
        then ``'``), on lines up to `MAX_LINE` bytes.

        >>> Place(RUST).after(b"if c == '\\"").after(b"' { ").inside is None  # a quote in a character literal
        True
        """
        if self.long_line and b"\n" not in data:  # the line's start is not kept: read on from here alone
            return replace(self, line=(self.line + data)[-MAX_LINE:], inside=self._read(self.inside, data))
        opened, text = (self.inside, data) if self.long_line else (self.line_opened, self.line + data)
        cut = text.rfind(b"\n") + 1
        if cut:
            opened, text = self._read(opened, text[:cut]), text[cut:]
        return Place(self.syntax, text[-MAX_LINE:], self._read(opened, text), opened, len(text) > MAX_LINE)

    def _read(self, inside: bytes | None, data: bytes) -> bytes | None:
        """What the text is inside once ``data`` is read from inside ``inside``."""
        syntax, position = self.syntax, 0
        while position < len(data):
            if inside is None:
                found = syntax.openers.search(data, position)
                if found is None:
                    break
                position, inside = found.end(), _opened(found)
            else:
                position, inside = self._close(data, position, inside)
        return inside

    def _close(self, data: bytes, position: int, inside: bytes) -> tuple[int, bytes | None]:
        """Where the string or comment opened by ``inside`` ends in ``data`` (after ``position``)."""
        syntax = self.syntax
        if inside == syntax.line_comment:
            end = data.find(b"\n", position)
            return (len(data), inside) if end < 0 else (end + 1, None)
        if syntax.raw_string and inside[:1] == b"r":  # see `_opened`
            end = data.find(b'"' + inside[1:-1], position)
            return (len(data), inside) if end < 0 else (end + len(inside) - 1, None)
        if syntax.block_comment and inside == syntax.block_comment[0]:
            end = data.find(syntax.block_comment[1], position)
            return (len(data), inside) if end < 0 else (end + len(syntax.block_comment[1]), None)
        while True:  # a string: its closing delimiter, not an escaped one
            end = data.find(inside, position)
            newline = -1 if inside in syntax.multiline else data.find(b"\n", position, None if end < 0 else end)
            if newline >= 0:
                return newline + 1, None  # an unclosed string ends with its line
            if end < 0:
                return len(data), inside
            before = b"" if inside in syntax.verbatim else data[position:end]
            backslashes = len(before) - len(before.rstrip(b"\\"))
            position = end + len(inside)
            if backslashes % 2 == 0:
                return position, None

    def role(self) -> str:
        """The role of a word that starts here: `PROSE`, `DEFINE`, `START` or `USE`."""
        if self.inside is not None:
            return PROSE
        if self.syntax.defines.search(self.line):
            return DEFINE
        return START if self.syntax.starts.fullmatch(self.line) else USE


def _opened(found: re.Match) -> bytes | None:
    """What an opener (`Syntax.openers`) leaves the text inside: its delimiter, a raw string's ``r#"`` (its
    prefix dropped), or None after a line's end or a character literal."""
    if found.lastgroup == "raw":
        return found.group().lstrip(b"bc")
    return None if found.lastgroup or found.group() == b"\n" else found.group()


@lru_cache(maxsize=16)
def _line_start(text: bytes, syntax: Syntax) -> Place:
    """The place at the end of ``text``, which ends a line (or is empty): a few documents' windows at a time."""
    return Place(syntax).after(text)
