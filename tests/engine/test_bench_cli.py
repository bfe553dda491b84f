"""`python -m harness.bench`: its options, its JSON and its plot, on the small model."""

import json
import subprocess
import sys
from pathlib import Path

from harness.threads import MODEL_THREADS

HANG_GUARD_S = 600
"""Only a hang is a failure here: speed targets live in the benchmarks (a shared 2-core machine is noisy)."""


def run_bench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.bench", *args], capture_output=True, text=True,
                          timeout=HANG_GUARD_S)


def test_bench_json_contract_and_plot(tmp_path):
    out, png = tmp_path / "bench.json", tmp_path / "bench.png"
    result = run_bench("--model", "smollm2", "--files", "<stdlib>/json/**/*.py", "--cases", "4",
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
    result = run_bench("--model", "smollm2", "--files", "<stdlib>/json/**/*.py", "--cases", "4", "--seed", "3",
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
        result = run_bench("--model", "smollm2", "--files", "<stdlib>/json/**/*.py", "--cases", "4", "--seed", "3",
                           "--modes", "naive,cpc", "--max-tokens", "4", "--prompt", "short", "--json", str(out),
                           "--threads", str(MODEL_THREADS), *extra)  # a fixed count: the texts must not follow the load
        assert result.returncode == 0, result.stderr
        payload = json.loads(out.read_text())
        texts[name] = [(case["naive"]["text"], case["cpc"]["text"]) for case in payload["per_case"]]
    assert payload["fusion"] == {"ngram": 0.0, "identifiers": 0.0} and "fused with its file" in result.stdout
    assert texts["fused"] == texts["plain"]


def test_bench_fusion_reads_the_file_up_to_the_cursor_line_only():
    from cpc.engine import Engine
    from harness.bench import quality, sources

    engine = Engine.load("smollm2", threads=1)
    for case in quality.draw_cases(engine, sources.expand("<stdlib>/json/**/*.py"), 6, 3):
        typed_line = case.prefix.rpartition("\n")[2]
        assert case.document[-1:] in ("", "\n") and (case.document + typed_line).endswith(case.prefix)
        assert Path(case.file).read_text(encoding="utf-8").startswith(case.document + typed_line + case.word_rest)


def test_bad_options_are_refused_before_a_model_loads():
    result = run_bench("--cross-file", "dev", "--modes", "cpc+magic")
    assert result.returncode == 1 and "cpc+magic" in result.stderr and "Traceback" not in result.stderr
    result = run_bench("--cross-file", "dev", "--files", "x")
    assert result.returncode == 1 and "exclude" in result.stderr
    result = run_bench("--fusion-weights", "ngram=1")
    assert result.returncode == 1 and "--cross-file" in result.stderr
    result = run_bench("--fusion", "--fusion-weights", "ngram=fast")
    assert result.returncode == 1 and "not a number" in result.stderr
