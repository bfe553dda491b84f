"""What the server's log may hold: its handler, pygls's log level, and document text kept out.

Document text would reach the log two ways: pygls logs every message it
sends at INFO (completions, ``cpc/documentText`` answers) and, at ERROR,
the whole params of a request or notification it failed to handle (a
``didChange`` carries the text). So pygls's loggers stay at WARNING, and a
filter on our handler withholds the protocol values pygls passes to its
log lines, keeping ids and method names. The ``logDocuments`` setting lifts
both: pygls logs at DEBUG, every message in full.
"""

from __future__ import annotations

import logging
import re
import sys
from typing import Any

_PYGLS = "pygls"
_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_PLAIN = re.compile(r"[\w./$:-]{0,100}")
"""A log argument that is safe to show: an id or a method name, not text."""
WITHHELD = "<withheld: set logDocuments to log protocol messages>"


class _DocumentFilter(logging.Filter):
    """Replaces pygls's protocol values (params, message bodies, tracebacks) in its records."""

    def __init__(self) -> None:
        super().__init__()
        self.allow_documents = False

    def filter(self, record: logging.LogRecord) -> bool:
        if self.allow_documents or not record.name.startswith(_PYGLS) or not record.args:
            return True
        if isinstance(record.args, tuple):
            record.args = tuple(_plain_or_withheld(arg) for arg in record.args)
        else:
            record.args = {key: _plain_or_withheld(arg) for key, arg in record.args.items()}
        return True


def _plain_or_withheld(value: Any) -> Any:
    if isinstance(value, int) or (isinstance(value, str) and _PLAIN.fullmatch(value)):
        return value
    return WITHHELD


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
