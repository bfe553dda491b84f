"""Benchmarks of completion quality on real code, behind ``cpc bench``: no part of the server imports them.

- `cpc.bench.quality`: does the cursor's position inside a word still
  matter? Cursors inside identifiers of real code, each mode from cold.
- `cpc.bench.workspace`: does the rest of the repository help? Cursors
  where only another file knows the name, with and without fusion, beside
  the peers' retrieval (`cpc.bench.retrieval`).
- `cpc.bench.corpus`: the real code they draw from (the standard library,
  npm's packages) and the names a file can know.
- `cpc.bench.report`: tables and bar charts.

The scripts that measure the product through the server (latency, the
server-level quality benchmark, the soak) are in ``benchmarks/``.
"""
