"""The model's thread count in the tests that compare numbers across batches (and in the engine fixtures and
the llama-servers the tests start).

``CPC_TEST_THREADS=1`` (or 2, 4) runs them with that many threads, to show
that their tolerances hold whatever the kernels' split of the work; unset,
the model takes every core. The count is always fixed here: left to
`cpc.threads`, it would drop to fewer while the test run loads the
machine, and a decode's numbers depend on its thread count.
"""

from __future__ import annotations

import os

MODEL_THREADS: int = int(os.environ.get("CPC_TEST_THREADS") or 0) or len(os.sched_getaffinity(0))
