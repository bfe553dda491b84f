"""A new file's name as a first comment line, as Copilot and Tabby write one (``# Path: utils.py``).

A file with little text gives the model nothing to read its language from:
in an empty ``.py`` file, ``imp`` became
``ort { Component, OnInit } from '@angular/core';``. Until the file has
`NEW_FILE_CHARS` characters, the engine reads a comment naming it first,
in the comment syntax of its extension; past that the code itself says
which language it is (a header there won nothing on the cold set, and
costs its tokens on every request: docs/benchmarks.md).

>>> new_file_header("file:///work/project/utils.py", "imp")
'# Path: utils.py\\n'
>>> new_file_header("file:///work/app/main.ts", ""), new_file_header("untitled:Untitled-1", "imp")
('// Path: main.ts\\n', '')
"""

from __future__ import annotations

from urllib.parse import unquote, urlsplit

NEW_FILE_CHARS = 200
"""A document shorter than this many characters is read after a header naming it."""

_COMMENTS = {
    "#": "py pyi pyw sh bash zsh fish rb pl pm r jl yaml yml toml cmake nim ex exs coffee tcl awk ps1 mk",
    "//": "js jsx mjs cjs ts tsx mts cts java kt kts scala go rs c h cc cpp cxx hpp hh hxx cs swift dart php "
          "groovy gradle zig sol proto scss less jsonc mm",
    "--": "lua sql hs elm ada",
    "%": "tex erl",
    ";": "clj cljs el scm lisp asm",
}
COMMENT_BY_EXTENSION = {extension: leader for leader, names in _COMMENTS.items() for extension in names.split()}
"""The line comment of each language, by its files' extension."""
COMMENT_BY_NAME = {name: "#" for name in ("makefile", "dockerfile", "gemfile", "rakefile", "vagrantfile",
                                           "justfile", "cmakelists.txt")} | {"jenkinsfile": "//"}
"""The line comment of files named for what they hold, whatever their extension."""


def new_file_header(uri: str, text: str) -> str:
    """The line the engine reads before ``text``, the document at ``uri``: its file name in a comment while
    the text is shorter than `NEW_FILE_CHARS`; nothing for a longer one, or a file whose extension has no
    known line comment (an untitled document, a notebook's cell, a Markdown file).

    >>> new_file_header("file:///a/My%20Module.py", ""), new_file_header("file:///a/long.py", "x" * 200)
    ('# Path: My Module.py\\n', '')
    >>> new_file_header("file:///a/Dockerfile", "FROM ")
    '# Path: Dockerfile\\n'
    """
    if len(text) >= NEW_FILE_CHARS:
        return ""
    parts = urlsplit(uri)
    if parts.fragment:  # a notebook's cell (vscode-notebook-cell:...ipynb#cell): the notebook says the language
        return ""
    name = unquote(parts.path.rsplit("/", 1)[-1])
    leader = COMMENT_BY_NAME.get(name.lower()) or (
        COMMENT_BY_EXTENSION.get(name.rpartition(".")[2].lower()) if "." in name else None)
    return f"{leader} Path: {name}\n" if leader and name.isprintable() else ""  # one line, whatever the URI escapes
