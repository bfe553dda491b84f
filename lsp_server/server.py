"""The pygls server: thin LSP handlers around the `cpc` engine.

For now it serves the LSP lifecycle and full document sync (pygls keeps the
documents); inline completion arrives with the generation stage.
"""

from __future__ import annotations

from pygls.lsp.server import LanguageServer

SERVER_NAME = "cpc-lsp"
SERVER_VERSION = "0.1.0"


class CPCServer(LanguageServer):
    """The language server, with the engine settings it was started with."""

    def __init__(self, model: str | None) -> None:
        super().__init__(SERVER_NAME, SERVER_VERSION)
        self.model = model


def build_server(model: str | None = None) -> CPCServer:
    """A server ready to start on a transport."""
    return CPCServer(model)
