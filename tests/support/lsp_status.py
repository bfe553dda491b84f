"""The server's `cpc/status` from a pytest-lsp client, and waiting on it (shared by the server tests)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from pytest_lsp import LanguageClient


async def status(client: LanguageClient) -> Any:
    return await client.protocol.send_request_async("cpc/status", {})


async def wait_for_status(client: LanguageClient, done: Callable[[Any], bool], what: str, timeout: float = 120) -> Any:
    """The first `cpc/status` for which ``done`` holds, polled; an assertion error naming ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = await status(client)
        if done(state):
            return state
        await asyncio.sleep(0.05)
    raise AssertionError(f"{what} did not happen in {timeout:.0f} s")
