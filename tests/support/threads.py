"""The model's thread count in the tests that compare numbers across batches (and in the engine fixtures).

``CPC_TEST_THREADS=1`` (or 2, 4) runs them with that many threads, to show
that their tolerances hold whatever the kernels' split of the work; unset,
the model takes every core, as the product does.
"""

from __future__ import annotations

import os

MODEL_THREADS: int | None = int(os.environ.get("CPC_TEST_THREADS") or 0) or None
