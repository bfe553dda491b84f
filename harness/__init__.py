"""What drives and measures the product from outside, shared by the tests, the benchmarks and the demo: no part of it ships.

- `harness.headless`: a headless editor, an LSP client of the real server.
- `harness.bench`: the in-process benchmarks of completion quality (``python -m harness.bench``).
- `harness.llama_server`: a real llama-server process for the remote backend.
- `harness.threads`: the model's fixed thread count where numbers are compared.
- `harness.token_view`: a model's tokens of a line, with the cursor's cut shown (`make demo`).

The product (``cpc``, ``lsp_server``) never imports it
(tests/codebase/test_architecture.py).
"""
