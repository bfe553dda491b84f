"""What the server's log may hold: its handler, pygls's log level, and document text kept out.

Document text would reach the log three ways: pygls logs every message it
sends at INFO (completions, ``cpc/documentText`` answers); at ERROR it logs
the whole params of a request or notification it failed to handle (a
``didChange`` carries the text); and an exception's message may quote the
value it failed on (``invalid literal for int(): '<text>'``). So pygls's
loggers stay at WARNING, and a filter on our handler withholds the protocol
values pygls passes to its log lines (ids and method names stay), the
values our own transport's error texts quote (field paths stay) and the
bytes it skips, and the messages of logged exceptions (their types and
frames stay). The
``logDocuments`` setting lifts all three: pygls logs at DEBUG, every
message in full.
"""

from __future__ import annotations

import logging
import re
import sys
import textwrap
import traceback
from typing import Any

_PYGLS = "pygls"
_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_PLAIN = re.compile(r"[\w./$:-]{0,100}")
"""A log argument that is safe to show: an id or a method name, not text."""
WITHHELD = "<withheld: set logDocuments to log protocol messages>"
_TRANSPORT = ("cpc-lsp.protocol", "cpc-lsp.framing")
_QUOTED = re.compile(r'"(?:[^"\\]|\\.)*(?:"|$)')
"""A JSON string quoted in an error message (the value that failed to parse; cut short, it has no closing quote)."""


class _DocumentFilter(logging.Filter):
    """Withholds what may quote a document: pygls's protocol values, exception messages."""

    def __init__(self) -> None:
        super().__init__()
        self.allow_documents = False

    def filter(self, record: logging.LogRecord) -> bool:
        if self.allow_documents:
            return True
        if record.name.startswith(_PYGLS) and record.args:
            if isinstance(record.args, tuple):
                record.args = tuple(_plain_or_withheld(arg) for arg in record.args)
            else:
                record.args = {key: _plain_or_withheld(arg) for key, arg in record.args.items()}
        elif record.name.startswith(_TRANSPORT) and isinstance(record.args, tuple):
            record.args = tuple(_unquoted(arg) for arg in record.args)
        if record.exc_info and record.exc_info[1] is not None:
            record.exc_text = _traceback_without_messages(record.exc_info[1], set())  # the formatter uses it as is
        return True


def _unquoted(value: Any) -> Any:
    """Our protocol's log values: error texts keep their field paths, not the values they quote."""
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, str):
        return _QUOTED.sub('"<withheld>"', value)
    return WITHHELD  # raw bytes or a message skipped by the framing


def _plain_or_withheld(value: Any) -> Any:
    if isinstance(value, int) or (isinstance(value, str) and _PLAIN.fullmatch(value)):
        return value
    return WITHHELD


def _traceback_without_messages(error: BaseException, seen: set[int]) -> str:
    """A traceback with every frame and exception type, causes and group members included, but no messages."""
    seen.add(id(error))
    parts = []
    cause = error.__cause__ if error.__cause__ is not None else (
        None if error.__suppress_context__ else error.__context__
    )
    if cause is not None and id(cause) not in seen:
        parts += [_traceback_without_messages(cause, seen), "\nwhich led to:\n\n"]
    parts.append("Traceback (most recent call last):\n")
    parts += traceback.format_tb(error.__traceback__)
    parts.append(f"{type(error).__module__}.{type(error).__qualname__}: {WITHHELD}")
    for member in getattr(error, "exceptions", ()):  # an exception group's
        parts.append("\n" + textwrap.indent(_traceback_without_messages(member, seen), "  | "))
    return "".join(parts)


_filter = _DocumentFilter()


def setup(log_file: str | None) -> None:
    """Send the log to ``log_file`` (INFO and up), or warnings to stderr; no document text either way."""
    handler: logging.Handler
    if log_file:
        handler = logging.FileHandler(log_file, encoding="utf-8")
        handler.setLevel(logging.INFO)
    else:
        handler = logging.StreamHandler(sys.stderr)
        handler.setLevel(logging.WARNING)
    handler.setFormatter(logging.Formatter(_FORMAT))
    handler.addFilter(_filter)
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    log_documents(False)


def log_documents(allow: bool) -> None:
    """Whether the log may show whole protocol messages, document text included (a debugging aid)."""
    _filter.allow_documents = allow
    logging.getLogger(_PYGLS).setLevel(logging.DEBUG if allow else logging.WARNING)
