"""From background threads to the editor: results handed to the event loop, and work-done progress bars.

The engine's worker and the reading of the workspace folders run off the event loop; what
they finish or report goes back through ``loop.call_soon_threadsafe``
(`call_soon`), and a request's future is settled once, whichever answer
comes first (`settle`). A `ProgressBar` is one ``$/progress`` bar, begun on
the loop and reported to from any thread.

    >>> import asyncio
    >>> async def demo():
    ...     future = asyncio.get_running_loop().create_future()
    ...     settle(future, "first", None); settle(future, "second", None)
    ...     return await future
    >>> asyncio.run(demo())
    'first'
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from lsprotocol import types
from pygls.lsp.server import LanguageServer


def call_soon(loop: asyncio.AbstractEventLoop, callback: Callable[..., Any], *args: Any) -> None:
    """``callback(*args)`` on the event loop, from any thread (nothing once the loop has closed)."""
    try:
        loop.call_soon_threadsafe(callback, *args)
    except RuntimeError:  # the loop is closed: the server is exiting
        pass


def settle(future: asyncio.Future, result: Any, error: BaseException | None) -> None:
    """Settle ``future`` with ``result`` or ``error``, unless it is settled already."""
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


def settle_from(future: asyncio.Future, done: Future) -> None:
    """Settle ``future`` as the finished ``done`` ended, unless an earlier answer settled it already."""
    error = done.exception()
    settle(future, None if error is not None else done.result(), error)


class ProgressBar:
    """One work-done progress bar in the editor, when the client takes them (nothing otherwise)."""

    def __init__(self, server: LanguageServer, title: str) -> None:
        self.server = server
        self.title = title
        self.token = str(uuid.uuid4())
        self.shown = False
        self._loop: asyncio.AbstractEventLoop | None = None

    async def begin(self) -> bool:
        """Ask the client for the bar and show it at 0 %; whether the client took it."""
        self._loop = asyncio.get_running_loop()
        window = self.server.client_capabilities.window
        if not (window and window.work_done_progress):
            return False
        try:
            await self.server.work_done_progress.create_async(self.token)
        except Exception:  # the client refused the token: the work goes on without a bar
            return False
        self.server.work_done_progress.begin(self.token, types.WorkDoneProgressBegin(title=self.title, percentage=0))
        self.shown = True
        return True

    def report(self, message: str, fraction: float | None) -> None:
        """A step of the work, from any thread (``fraction`` None: the total is not known)."""
        if self.shown and self._loop is not None:
            value = types.WorkDoneProgressReport(
                message=message, percentage=None if fraction is None else int(fraction * 100)
            )
            call_soon(self._loop, self.server.work_done_progress.report, self.token, value)

    def end(self, message: str) -> None:
        """Close the bar (on the event loop)."""
        if self.shown:
            self.server.work_done_progress.end(self.token, types.WorkDoneProgressEnd(message=message))
