"""cpc-lsp: the language server around `cpc.session` (LSP types here, algorithms in `cpc`)."""

import cpc  # noqa: F401  (llama.cpp's libraries before numpy: see cpc/__init__.py)
