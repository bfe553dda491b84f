"""cpc-lsp's additions to LSP: its custom methods and the capability a client declares to take growing suggestions.

    >>> declares_growth(types.ClientCapabilities(experimental={"cpc": {"suggestionReady": True}}))
    True
    >>> declares_growth(types.ClientCapabilities()), declares_growth(types.ClientCapabilities(experimental=[1]))
    (False, False)
"""

from __future__ import annotations

from lsprotocol import types

STATUS = "cpc/status"
"""A custom request (is the model ready, which one, the request counters), and the
notification of the same name and shape the server sends when the model's state changes."""
SUGGESTION_READY = "cpc/suggestionReady"
"""A notification (``{"uri", "version", "position"}``): a suggestion shown there has grown in the
background, so the editor asks again there (VS Code: ``editor.action.inlineSuggest.showNext``;
Neovim: the inline completion's own request) and the suggestion cache answers with the longer text."""
GROWTH_CAPABILITY = {"cpc": {"suggestionReady": True}}
"""The client's ``capabilities.experimental`` entry saying it asks again on `SUGGESTION_READY`."""
CURSOR_REST = "cpc/cursorRest"
"""A notification (``{"textDocument": {"uri"}, "position"}``) an editor sends when its cursor comes to rest
somewhere other than where a key was typed (a click, an arrow key, a jump, insert mode entered): the server
reads the prompt window there ahead of the first key, as it does at the end of a file just opened."""
DOCUMENT_TEXT = "cpc/documentText"
"""A custom request: the server's copy of a document (``{"uri"}`` -> ``{"text", "version"}``), to check sync."""


def declares_growth(capabilities: types.ClientCapabilities) -> bool:
    """Whether the client's experimental capabilities include `GROWTH_CAPABILITY`."""
    experimental = capabilities.experimental
    entry = experimental.get("cpc") if isinstance(experimental, dict) else None
    return isinstance(entry, dict) and entry.get("suggestionReady") is True
