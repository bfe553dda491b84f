"""cpc: character prefix conditioning for code completion, the engine behind ``cpc-lsp``.

Importing the package maps llama.cpp's shared libraries into the process
before any of its modules imports numpy. With a CUDA build of
llama-cpp-python, loading a model crashes the process (SIGSEGV inside
``llama_model_load_from_file``) when numpy's libraries were mapped first;
llama.cpp first, then numpy, works (docs/gpu.md). Every entry point (the
server, the CLI, the tests' conftest, the benchmark scripts) imports `cpc`
before numpy, and ``tests/codebase/test_import_order.py`` checks that they do.
"""

import llama_cpp  # noqa: F401  (loads libllama and libggml, then imports numpy itself)
