"""The LSP fuzzer (`tests.support.lsp_fuzz`) against the real server over stdio: no crash, no hang, no desync.

`make test` runs the pinned seeds with a bounded number of steps; `make
fuzz` (``CPC_FUZZ=k``) runs k times the steps and one fresh random seed too,
printed in the report: a seed that fails becomes a pinned one before the
bug is fixed.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from tests.support.lsp_fuzz import Fuzzer
from tests.support.raw_lsp import RawServer
from tests.support.strategies import FUZZ_SCALE

PINNED_SEEDS = [1]
STEPS = 120
SEEDS = PINNED_SEEDS + ([random.SystemRandom().randrange(10**6)] if FUZZ_SCALE > 1 else [])


@pytest.mark.parametrize("seed", SEEDS)
def test_random_valid_and_invalid_messages_break_nothing(tmp_path: Path, seed: int):
    with RawServer(tmp_path / "server.log") as server:
        report = Fuzzer(server, seed, STEPS * FUZZ_SCALE).run()
        print(report.summary())
        failures = report.failures()
        assert failures == [], "\n - ".join([report.summary(), *failures[:15]])
        assert report.status_while_working_s, "cpc/status was never asked while the model worked"
        assert server.close() == 0
    assert server.output_errors == [], "the server wrote something that is not a framed JSON message"
