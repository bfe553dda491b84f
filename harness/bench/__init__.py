"""Benchmarks of completion quality on real code, run in process: ``python -m harness.bench`` (`harness.bench.__main__`).

- `harness.bench.quality`: does the cursor's position inside a word still
  matter? Cursors inside identifiers of real code, each mode from cold.
- `harness.bench.cross_file`: does the rest of the repository help? Cursors
  where only another file knows the name, with and without fusion, beside
  the peers' retrieval (`harness.bench.retrieval`).
- `harness.bench.sources`: the real code they draw from (the standard library,
  npm's packages) and the names a file can know.
- `harness.bench.report`: tables and bar charts.

The scripts that measure the product through the server (latency, the
server-level quality benchmark, the soak) are in ``benchmarks/``.
"""
