"""`cpc analyze` and `cpc score` as design.md's command-line contract states them."""

import json
import subprocess
import sys

import pytest

from tests.support.threads import MODEL_THREADS

HANG_GUARD_S = 600
"""Only a hang is a failure here: speed targets live in the benchmarks (a shared 2-core machine is noisy)."""


def run_cpc(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cpc.cli", *args], capture_output=True, text=True, timeout=HANG_GUARD_S)


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


def _real_source(tmp_path, name: str, size: int) -> str:
    """The first ``size`` bytes (whole lines) of a standard-library module: real code nobody here wrote."""
    import importlib

    source = open(importlib.import_module(name).__file__, "rb").read()[:size]
    path = tmp_path / f"{name}.py"
    path.write_bytes(source[: source.rindex(b"\n") + 1])
    return str(path)


@pytest.mark.parametrize(("model", "module"), [("default", "glob"), ("smollm2", "shlex")])
def test_score_json_contract_on_real_code(tmp_path, model, module):
    path = _real_source(tmp_path, module, 500)
    result = run_cpc("score", path, "--model", model, "--json")
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    assert {"bytes", "logprob_bytes", "logprob_canonical", "bits_per_byte", "elapsed_ms"} <= payload.keys()
    assert payload["bytes"] == len(open(path, "rb").read())
    # a sum over tokenizations is never below one of its terms
    assert payload["logprob_bytes"] >= payload["logprob_canonical"]
    assert 0 < payload["bits_per_byte"] < 8
    # the beam's canonical path agrees with a straight pass over the same tokens
    # (llama.cpp rounds differently with batch shape; control tokens are renormalised away)
    assert abs(payload["logprob_canonical"] - payload["logprob_canonical_direct"]) < 0.02 * payload["bytes"]


def test_score_reports_a_missing_model_or_file(tmp_path):
    path = _real_source(tmp_path, "glob", 200)
    missing = run_cpc("score", path, "--model", str(tmp_path / "nope.gguf"))
    assert missing.returncode == 2 and "model file not found" in missing.stderr
    corrupt = tmp_path / "corrupt.gguf"
    corrupt.write_bytes(b"GGUF" + b"\0" * 64)
    broken = run_cpc("score", path, "--model", str(corrupt))
    assert broken.returncode == 2 and str(corrupt) in broken.stderr
    absent = run_cpc("score", str(tmp_path / "absent.py"), "--model", "smollm2")
    assert absent.returncode == 1 and "absent.py" in absent.stderr


@pytest.mark.parametrize("mode", ["cpc", "naive"])
def test_complete_json_contract(tmp_path, mode):
    prefix = tmp_path / "prefix.py"
    suffix = tmp_path / "suffix.py"
    prefix.write_text("import os\n\n\ndef list_files(directory):\n    return os.listd")
    suffix.write_text("\n")
    result = run_cpc("complete", "--model", "smollm2", "--prefix-file", str(prefix), "--suffix-file", str(suffix),
                     "--mode", mode, "--n", "2", "--max-tokens", "6", "--json")
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    assert payload["mode"] == mode and payload["elapsed_ms"] > 0
    texts = [c["text"] for c in payload["completions"]]
    assert texts and len(set(texts)) == len(texts) <= 2
    assert all(isinstance(c["logprob"], float) and c["logprob"] <= 0 for c in payload["completions"])
    if mode == "cpc":
        assert texts[0].startswith("ir")  # os.listd|ir: the cursor is inside the token `listdir`


def test_complete_reports_a_missing_prefix_file(tmp_path):
    result = run_cpc("complete", "--model", "smollm2", "--prefix-file", str(tmp_path / "absent.py"))
    assert result.returncode == 1 and "absent.py" in result.stderr and "Traceback" not in result.stderr


def test_bench_json_contract_and_plot(tmp_path):
    out, png = tmp_path / "bench.json", tmp_path / "bench.png"
    result = run_cpc("bench", "--model", "smollm2", "--files", "<stdlib>/json/**/*.py", "--cases", "4",
                     "--seed", "3", "--modes", "naive,cpc", "--max-tokens", "6", "--gpu-layers", "0",
                     "--json", str(out), "--plot", str(png))
    assert result.returncode == 0, result.stderr
    payload = json.loads(out.read_text())
    assert payload["model"].endswith(".gguf") and set(payload["results"]) == {"naive", "cpc"}
    assert payload["placement"]["backend"] == "CPU"  # where the figures were measured: --gpu-layers 0
    assert payload["greedy_in_graph"] is False  # and the greedy step's pass ran on the host
    for by_kind in payload["results"].values():
        assert set(by_kind) == {"boundary", "inside"}
        for row in by_kind.values():
            assert row["n"] == 2
            assert {"word_exact", "line_exact", "p50_ms", "p95_ms", "lm_calls"} <= row.keys()
            assert 0 <= row["line_exact"] <= row["word_exact"] <= 1  # a whole line right has its word right
            assert row["p95_ms"] >= row["p50_ms"] > 0 and row["lm_calls"] >= 1
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "word" in result.stdout and "cpc_inside_over_boundary" in result.stdout


def test_bench_short_prompts_report_the_latency_ratios(tmp_path):
    out = tmp_path / "bench.json"
    result = run_cpc("bench", "--model", "smollm2", "--files", "<stdlib>/json/**/*.py", "--cases", "4", "--seed", "3",
                     "--modes", "naive,cpc", "--max-tokens", "4", "--prompt", "short", "--json", str(out))
    assert result.returncode == 0, result.stderr
    payload = json.loads(out.read_text())
    assert payload["prompt"] == "short" and 0 < payload["prompt_tokens_p50"] <= 300
    for quantile in ("p50", "p95"):
        for kind in ("", "_boundary", "_inside"):
            assert payload["acceptance"][f"cpc_{quantile}_over_naive_{quantile}{kind}"] > 0
    assert "short prompts" in result.stdout


def test_bench_fusion_at_zero_weight_changes_no_text(tmp_path):
    texts = {}
    for name, extra in (("plain", ()), ("fused", ("--fusion", "--fusion-weights", "ngram=0,identifiers=0"))):
        out = tmp_path / f"{name}.json"
        result = run_cpc("bench", "--model", "smollm2", "--files", "<stdlib>/json/**/*.py", "--cases", "4", "--seed", "3",
                         "--modes", "naive,cpc", "--max-tokens", "4", "--prompt", "short", "--json", str(out),
                         "--threads", str(MODEL_THREADS), *extra)  # a fixed count: the texts must not follow the load
        assert result.returncode == 0, result.stderr
        payload = json.loads(out.read_text())
        texts[name] = [(case["naive"]["text"], case["cpc"]["text"]) for case in payload["per_case"]]
    assert payload["fusion"] == {"ngram": 0.0, "identifiers": 0.0} and "fused with its file" in result.stdout
    assert texts["fused"] == texts["plain"]


def test_bench_fusion_reads_the_file_up_to_the_cursor_line_only():
    from pathlib import Path

    from cpc.bench import corpus, quality
    from cpc.engine import Engine

    engine = Engine.load("smollm2", threads=1)
    for case in quality.draw_cases(engine, corpus.expand("<stdlib>/json/**/*.py"), 6, 3):
        typed_line = case.prefix.rpartition("\n")[2]
        assert case.document[-1:] in ("", "\n") and (case.document + typed_line).endswith(case.prefix)
        assert Path(case.file).read_text(encoding="utf-8").startswith(case.document + typed_line + case.word_rest)
