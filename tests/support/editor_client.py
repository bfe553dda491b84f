"""pytest-lsp clients that answer the server's requests as the editors do: capabilities registered at run time.

pytest-lsp's client declares VS Code's capabilities (`client_capabilities("visual-studio-code")`),
among them ``workspace/didChangeWatchedFiles`` with dynamic registration, but answers
``client/registerCapability`` with an error. VS Code and Neovim accept it; so does this client,
and it keeps what was registered (``client.registrations``) for the tests to read.
"""

from __future__ import annotations

from typing import Any

from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient
from pytest_lsp.client import make_test_lsp_client


def editor_client() -> LanguageClient:
    """A pytest-lsp client that accepts registrations and keeps them, by id."""
    client = make_test_lsp_client()
    client.registrations = {}

    @client.feature(types.CLIENT_REGISTER_CAPABILITY)
    def register(params: types.RegistrationParams) -> None:
        client.registrations.update((registration.id, registration) for registration in params.registrations)

    @client.feature(types.CLIENT_UNREGISTER_CAPABILITY)
    def unregister(params: types.UnregistrationParams) -> None:
        for registration in params.unregisterations:
            client.registrations.pop(registration.id, None)

    return client


def editor_config(server_command: list[str], **config: Any) -> ClientServerConfig:
    """pytest-lsp's `ClientServerConfig` with an `editor_client`."""
    return ClientServerConfig(server_command=server_command, client_factory=editor_client, **config)
