"""`cpc analyze` as design.md's command-line contract states it."""

import json
import subprocess
import sys

import pytest


def run_cpc(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cpc.cli", *args], capture_output=True, text=True, timeout=120)


def test_analyze_json_contract():
    result = run_cpc("analyze", "I bought some apple", "--vocab", "cl100k", "--json")
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    assert payload["last_word"] == " apple"
    assert [(p["prefix"], p["count"]) for p in payload["positions"]] == [
        ("I bought some appl", 474), ("I bought some app", 101), ("I bought some ap", 1), ("I bought some", 2),
    ]
    assert set(payload["positions"][-1]["tokens"]) == {" apple", " apples"}
    assert 0 < payload["elapsed_ms"] < payload["index_build_ms"]


def test_analyze_table_is_readable():
    result = run_cpc("analyze", "He introduced an intermediar")
    assert result.returncode == 0, result.stderr
    assert "last word ' intermediar'" in result.stdout
    assert "He introduced an -> [b' intermediary'] 1 possible tokens" in result.stdout


@pytest.mark.parametrize("model", ["default", "smollm2"])
def test_analyze_with_a_gguf_model(model):
    result = run_cpc("analyze", "userNa", "--model", model, "--json")
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    assert payload["vocab"].endswith(".gguf")
    by_prefix = {p["prefix"]: p for p in payload["positions"]}
    assert by_prefix["user"]["count"] > 0
    assert all(token.startswith("Na") for token in by_prefix["user"]["tokens"])


def test_missing_model_is_one_clear_error(tmp_path):
    missing = tmp_path / "nope.gguf"
    result = run_cpc("analyze", "x", "--model", str(missing))
    assert result.returncode == 2
    assert str(missing) in result.stderr and "not found" in result.stderr
    assert "Traceback" not in result.stderr


def test_corrupt_model_is_one_clear_error(tmp_path):
    corrupt = tmp_path / "corrupt.gguf"
    corrupt.write_bytes(b"GGUF" + b"\0" * 64)
    result = run_cpc("analyze", "x", "--model", str(corrupt))
    assert result.returncode == 2
    assert str(corrupt) in result.stderr and "corrupt" in result.stderr
    assert "Traceback" not in result.stderr
    not_gguf = tmp_path / "notes.txt"
    not_gguf.write_text("hello")
    result = run_cpc("analyze", "x", "--model", str(not_gguf))
    assert result.returncode == 2 and "not a GGUF model" in result.stderr
