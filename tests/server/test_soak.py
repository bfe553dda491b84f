"""`make soak` in brief: its editor edits a real file through the real server for a few seconds, and every answer is
classified. The ten-minute run is not a test; this keeps the script working as the server changes under it."""

from __future__ import annotations

import asyncio

import pytest

from benchmarks import soak


@pytest.mark.slow
def test_a_short_soak_classifies_every_answer_with_no_error_or_desync():
    result = asyncio.run(soak.soak_run("smollm2", duration=8, seed=1, check_every=25, progress_every=60,
                                       drain_timeout=60))
    assert result["errors"] == 0, result["error_messages"]
    assert result["desyncs"] == 0 and result["sync_checks"] >= 1 and result["final_text_identical"]
    assert result["requests"] >= 10 and result["server_counts"]["from_model"] >= 1
    kinds = {request["kind"] for request in result["requests_timeline"]}
    assert None not in kinds and "model" in kinds, kinds
