"""Framing: the byte stream of a JSON-RPC connection cut into message bodies, repairing what clients get wrong.

LSP frames each message as headers (``Content-Length``, optionally
``Content-Type``), a blank line and a JSON body. `FrameDecoder` accepts
header names in any case, extra headers and LF-only line ends, and repairs
a wrong ``Content-Length`` by resynchronising on the next
``Content-Length:`` header: a raw line break never occurs inside a valid
JSON body, so that header cannot be mistaken for body text. Bytes that
start no frame are skipped. No I/O here: `lsp_server.protocol` feeds it.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("cpc-lsp.framing")

_HEADER_LINE = re.compile(rb"([!#$%&'*+.^_`|~0-9A-Za-z-]+)[ \t]*:[ \t]*([^\r\n]*?)[ \t]*\r?\n")
_FRAME_START = re.compile(rb"(?i)(?:content-type[ \t]*:[^\r\n]*\r?\n)?content-length[ \t]*:[ \t]*\d+[ \t]*\r?\n")
_FRAME_START_LONGEST = 512
"""Bytes a `_FRAME_START` match may span across a chunk boundary (a long Content-Type included)."""
_PARTIAL_HEADER = re.compile(rb"[!#$%&'*+.^_`|~0-9A-Za-z-]*(?::[^\r\n]*)?\r?")
_LONGEST_PARTIAL_HEADER = 4096
_LINE_END = re.compile(rb"\r?\n")
_WHITESPACE = re.compile(rb"[ \t\r\n]*")


@dataclass(frozen=True)
class Unparseable:
    """A framed body that is not JSON; it is answered with ``ParseError``."""

    reason: str


_WAIT = object()


class FrameDecoder:
    """Splits a byte stream into JSON values (or `Unparseable` bodies), repairing wrong framing.

    Feed bytes as they come; `decode` yields every message they complete.
    With ``stalled=True`` (no bytes came for a while) it also settles what
    it was waiting for: a body shorter than its ``Content-Length`` that is
    whole JSON, or a body that is broken and not followed by anything.
    """

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._length: int | None = None
        """The declared length of the body at the start of the buffer, once its headers are read."""
        self._scanned = 0
        """How far the current body was searched for a following frame's headers."""

    @property
    def pending(self) -> bool:
        """Whether bytes of an unfinished frame are waiting."""
        return self._length is not None or _WHITESPACE.match(self._buffer).end() < len(self._buffer)

    def feed(self, data: bytes) -> None:
        self._buffer += data

    def decode(self, stalled: bool = False) -> Iterator[Any]:
        """The messages the buffered bytes complete: JSON values, or `Unparseable` bodies."""
        while True:
            if self._length is None and not self._read_headers():
                return
            item = self._read_body(stalled)
            if item is _WAIT:
                return
            yield item

    def _read_headers(self) -> bool:
        """Consume one header block and set the body length; False when more bytes are needed."""
        buffer = self._buffer
        while True:
            del buffer[: _WHITESPACE.match(buffer).end()]
            if not buffer:
                return False
            position, length = 0, None
            while True:
                line = _HEADER_LINE.match(buffer, position)
                if line is None:
                    break
                if line.group(1).lower() == b"content-length" and length is None:
                    value = line.group(2)
                    length = int(value) if value.isdigit() else -1
                position = line.end()
            blank = _LINE_END.match(buffer, position)
            if position and blank:
                body_start = blank.end()
            elif position and length is not None and buffer[position : position + 1] in (b"{", b"["):
                body_start = position  # the blank line is missing: the body follows the headers directly
                log.warning("frame headers without the blank line before the body")
            elif _PARTIAL_HEADER.fullmatch(buffer, position) and len(buffer) - position < _LONGEST_PARTIAL_HEADER:
                return False  # the rest of the header block is on its way, however slowly
            else:
                self._skip_noise()
                continue
            if length is None or length < 0:
                log.warning("frame without a valid Content-Length header: reading its body up to the next frame")
                length = 0
            del buffer[:body_start]
            self._length, self._scanned = length, 0
            return True

    def _skip_noise(self) -> None:
        """Drop bytes that start no frame, up to the next ``Content-Length`` header."""
        buffer = self._buffer
        start = _FRAME_START.search(buffer, 1)
        if start is not None:
            end = start.start()
        else:  # keep what follows the last line or body end: it may be the start of a header still arriving
            end = max(buffer.rfind(b"\n"), buffer.rfind(b"}"), buffer.rfind(b"]")) + 1 or len(buffer)
        log.warning("skipped %d bytes that are not a framed message: %r", end, bytes(buffer[:80]))
        del buffer[:end]

    def _read_body(self, stalled: bool) -> Any:
        buffer, length = self._buffer, self._length
        assert length is not None
        # A following frame's headers inside the declared body: the Content-Length was too long.
        # (Headers that start inside the body end within _FRAME_START_LONGEST bytes after it.)
        searched_to = min(len(buffer), length + _FRAME_START_LONGEST)
        if self._scanned < searched_to:
            found = _FRAME_START.search(buffer, max(0, self._scanned - _FRAME_START_LONGEST), searched_to)
            self._scanned = searched_to
            if found is not None and found.start() < length:
                log.warning("Content-Length %d is longer than the body (%d bytes)", length, found.start())
                return self._take(found.start(), _parse(buffer[: found.start()]))
        if len(buffer) >= length:
            value = _parse(buffer[:length])
            if not isinstance(value, Unparseable):
                return self._take(length, value)
            return self._repair_short_body(length, stalled)
        if stalled:
            value = _parse(buffer)
            if not isinstance(value, Unparseable):
                log.warning("Content-Length %d is longer than the body (%d bytes)", length, len(buffer))
                return self._take(len(buffer), value)
        return _WAIT

    def _repair_short_body(self, length: int, stalled: bool) -> Any:
        """The body at ``length`` is not JSON: when it goes on up to the next frame, the length was too short."""
        buffer = self._buffer
        rest = _WHITESPACE.match(buffer, length).end()
        if rest == len(buffer):
            return self._take(len(buffer), _parse(buffer[:length])) if stalled else _WAIT
        if _FRAME_START.match(buffer, rest):
            return self._take(length, _parse(buffer[:length]))
        following = _FRAME_START.search(buffer, rest)
        end = following.start() if following is not None else len(buffer)
        value = _parse(buffer[:end])
        if not isinstance(value, Unparseable):
            log.warning("Content-Length %d is shorter than the body (%d bytes)", length, end)
            return self._take(end, value)
        if following is not None or stalled:
            return self._take(end, _parse(buffer[:length]))
        return _WAIT

    def _take(self, end: int, value: Any) -> Any:
        """Consume ``end`` bytes as the current frame's body, whose value is ``value``."""
        del self._buffer[:end]
        self._length = None
        return value


def _parse(body: bytes | bytearray) -> Any:
    try:
        return json.loads(body)
    except (ValueError, RecursionError) as error:  # UnicodeDecodeError is a ValueError
        return Unparseable(f"{type(error).__name__}: {error}" if len(body) else "the body is empty")
