"""The server's fusion and workspace settings (`lsp_server.settings`), without a model."""

from __future__ import annotations

import pytest

from cpc.fusion import FusionWeights
from cpc.folder_files import ReadLimits
from lsp_server.settings import Settings


def test_defaults_turn_fusion_and_indexing_on_with_the_tuned_weights_and_caps():
    settings = Settings()
    assert settings.fusion_weights == FusionWeights()
    assert settings.read_limits == ReadLimits(max_file_bytes=512_000, max_total_bytes=20_000_000, max_files=5000)
    assert {key: settings.as_client_json()[key] for key in ("fusion", "fusionWeight", "workspaceIndexing")} == {
        "fusion": True,
        "fusionWeight": 1.0,
        "workspaceIndexing": True,
    }


def test_fusion_weight_scales_both_weights():
    settings, problems = Settings().updated({"cpc": {"fusionWeight": 2}})
    assert problems == [] and settings.fusion_weight == 2.0 and isinstance(settings.fusion_weight, float)
    tuned = FusionWeights()
    assert settings.fusion_weights == FusionWeights(tuned.ngram * 2, tuned.identifiers * 2)
    assert Settings().updated({"fusionWeight": 0})[0].fusion_weights is None  # weighs nothing: not run at all


def test_fusion_off_means_no_weights_and_no_workspace_reading():
    settings, _ = Settings().updated({"fusion": False})
    assert settings.fusion_weights is None and settings.read_limits is None
    settings, _ = Settings().updated({"workspaceIndexing": False})
    assert settings.fusion_weights == FusionWeights() and settings.read_limits is None


def test_workspace_caps_reach_the_limits():
    settings, problems = Settings().updated(
        {"workspaceMaxBytes": 1000, "workspaceMaxFileBytes": 100, "workspaceMaxFiles": 0}
    )
    assert problems == []
    assert settings.read_limits == ReadLimits(max_file_bytes=100, max_total_bytes=1000, max_files=0)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"fusion": "yes"}, "fusion must be true or false"),
        ({"workspaceIndexing": 1}, "workspaceIndexing must be true or false"),
        ({"fusionWeight": -0.5}, "fusionWeight must be a number of at least 0"),
        ({"fusionWeight": float("nan")}, "fusionWeight must be a number of at least 0"),
        ({"fusionWeight": True}, "fusionWeight must be a number of at least 0"),
        ({"fusionWeight": "1"}, "fusionWeight must be a number of at least 0"),
        ({"workspaceMaxFiles": -1}, "workspaceMaxFiles must be an integer of at least 0"),
        ({"workspaceMaxBytes": 1.5}, "workspaceMaxBytes must be an integer of at least 0"),
        ({"fusionWeight": float("inf")}, "fusionWeight must be a number of at least 0"),
        ({"fusionWeight": 10**400}, "fusionWeight must be a number of at least 0 (got 1000000000"),
        ({"items": 6}, "items must be an integer from 1 to 5 (got 6)"),
        ({"items": 0}, "items must be an integer from 1 to 5"),
    ],
)
def test_bad_values_are_refused_and_the_old_value_kept(raw, message):
    settings, problems = Settings().updated(raw)
    assert settings == Settings()
    assert len(problems) == 1 and problems[0].startswith(message)


@pytest.mark.parametrize("model", ["http://gpu-box:8080", "http://gpu-box:8080 http://gpu-box:8081",
                                   "https://a.example.com, https://b.example.com:8443"])
def test_one_server_or_several_replicas_are_a_model(model):
    settings, problems = Settings().updated({"model": model})
    assert problems == [] and settings.model == model


@pytest.mark.parametrize(("model", "problem"), [
    ("http://gpu-box:8080 gpu-box:8081", "'gpu-box:8081' is not a server address -- write each as http://HOST:PORT"),
    ("http://gpu-box:8080, http://gpu-box:8080/", "http://gpu-box:8080 is named twice"),
    ("http://", "'http://' is not a server address"),
])
def test_a_bad_server_address_is_refused_with_what_to_write(model, problem):
    settings, problems = Settings().updated({"model": model})
    assert settings.model == "default" and len(problems) == 1 and problems[0].startswith("model: ")
    assert problem in problems[0]
