"""Benchmark of the model runtime and the beam: batching and reuse on real code.

    python benchmarks/bench_beam.py [--model default] [--cases 8] [--seed 1]
                               [--json OUT.json] [--plot OUT.png]

Cursor positions are drawn from the Python standard library of the running
interpreter (code nobody here wrote), strictly inside identifiers. For each
one the conditioner answers, with the default model:

- ``cold batched``: empty caches, the model evaluating up to 8 sequences
  per ``llama_decode`` (the engine's setting);
- ``cold unbatched``: empty caches, one sequence per ``llama_decode`` (the
  same 8 sequences kept in the KV cache);
- ``tail batched`` / ``tail unbatched``: the same text again with the
  prompt still in the KV cache but no snapshot or beam cached: what is left
  is the beam's own states (the tail's covering paths), where batching
  shows without the prompt's prefill;
- ``keystroke``: right after the cold request, the same text plus the next
  character of the file (KV cache, snapshots and beam reused).

It reports medians of milliseconds and model calls per conditioned prefix,
the keystroke/cold ratio, and the resident memory of the loaded engine.
It also times the beam reading the first ``--score-bytes`` bytes of a
standard-library file (what ``cpc score`` does: several states per step),
batched and unbatched.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import sys
import sysconfig
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cpc.engine import Engine  # noqa: E402

IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{5,}")
CONTEXT_CHARS = 4000


def draw_cases(count: int, seed: int) -> list[tuple[str, str]]:
    """(text before the cursor, next character) pairs, cursor strictly inside an identifier."""
    rng = random.Random(seed)
    files = sorted(Path(sysconfig.get_paths()["stdlib"]).glob("[a-m]*.py"))
    cases = []
    while len(cases) < count:
        source = rng.choice(files).read_text(encoding="utf-8", errors="replace")
        words = list(IDENTIFIER.finditer(source))
        if not words:
            continue
        word = rng.choice(words)
        cursor = rng.randrange(word.start() + 2, word.end() - 1)
        cases.append((source[max(0, cursor - CONTEXT_CHARS) : cursor], source[cursor]))
    return cases


def resident_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def measure(engine: Engine, text: str) -> dict:
    lm = engine.lm
    calls, decodes, tokens = lm.stats.calls, lm.stats.decodes, lm.stats.tokens
    started = time.perf_counter()
    engine.conditioner.condition(text)
    return {
        "ms": (time.perf_counter() - started) * 1000,
        "calls": lm.stats.calls - calls,
        "decodes": lm.stats.decodes - decodes,
        "tokens": lm.stats.tokens - tokens,
    }


def beam_read(engine: Engine, data: bytes) -> dict:
    """Read ``data`` through the beam from cold caches, as `cpc score` does."""
    engine.clear()
    lm = engine.lm
    calls, decodes, states = lm.stats.calls, lm.stats.decodes, lm.stats.states
    started = time.perf_counter()
    beam = engine.beam.read(lm.bos, data)
    return {
        "bytes": len(data),
        "ms": round((time.perf_counter() - started) * 1000, 1),
        "calls": lm.stats.calls - calls,
        "decodes": lm.stats.decodes - decodes,
        "states": lm.stats.states - states,
        "logprob": round(beam.logprob, 4),
    }


def summarise(rows: list[dict]) -> dict:
    return {key: round(statistics.median(row[key] for row in rows), 1) for key in rows[0]}


def run(model: str, cases: int, seed: int, score_bytes: int) -> dict:
    before = resident_mb()
    started = time.perf_counter()
    batched = Engine.load(model)
    load_s = time.perf_counter() - started
    loaded = resident_mb()
    unbatched = Engine.load(model, states_per_decode=1)
    names = ["cold batched", "cold unbatched", "tail batched", "tail unbatched", "keystroke"]
    results: dict[str, list[dict]] = {name: [] for name in names}
    drawn = draw_cases(cases, seed)
    for number, (text, next_char) in enumerate(drawn, 1):
        print(f"case {number}/{len(drawn)}: ...{text[-30:]!r}", file=sys.stderr, flush=True)
        for engine, kind in ((unbatched, "unbatched"), (batched, "batched")):
            engine.clear()
            results[f"cold {kind}"].append(measure(engine, text))
            engine.beam.clear()  # the prompt stays in the KV cache
            results[f"tail {kind}"].append(measure(engine, text))
        results["keystroke"].append(measure(batched, text + next_char))
    summary = {name: summarise(rows) for name, rows in results.items()}
    source = (Path(sysconfig.get_paths()["stdlib"]) / "textwrap.py").read_bytes()[:score_bytes]
    print(f"beam over {len(source)} bytes of textwrap.py", file=sys.stderr, flush=True)
    reads = {"batched": beam_read(batched, source), "unbatched": beam_read(unbatched, source)}
    snapshots = batched.beam.snapshots
    return {
        "model": batched.vocab.name,
        "cases": len(drawn),
        "seed": seed,
        "load_s": round(load_s, 2),
        "medians": summary,
        "keystroke_over_cold": round(summary["keystroke"]["ms"] / summary["cold batched"]["ms"], 3),
        "batched_over_unbatched": {
            kind: round(summary[f"{kind} batched"]["ms"] / summary[f"{kind} unbatched"]["ms"], 3)
            for kind in ("cold", "tail")
        },
        "beam_read": reads,
        "beam_read_batched_over_unbatched": round(reads["batched"]["ms"] / reads["unbatched"]["ms"], 3),
        "memory_mb": {
            "before_load": round(before, 1),
            "engine_loaded": round(loaded, 1),
            "after_run_two_engines": round(resident_mb(), 1),
            "snapshot_mb": round((2 * len(batched.index) + 1) * 8 / 2**20, 2),
            "snapshot_cache_capacity": snapshots.capacity,
        },
        "per_case": results,
    }


def plot(result: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(result["medians"])
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    colors = ["#4c72b0", "#dd8452", "#4c72b0", "#dd8452", "#55a868"]
    left.bar(names, [result["medians"][n]["ms"] for n in names], color=colors)
    left.set_yscale("log")
    left.set_ylabel("median ms per conditioned prefix (log)")
    left.set_title("time")
    right.bar(names, [result["medians"][n]["decodes"] for n in names], color=colors)
    right.set_ylabel("median llama_decode calls per prefix")
    right.set_title("model calls")
    for axis in (left, right):
        axis.tick_params(axis="x", labelrotation=20)
    fig.suptitle(
        f"{result['model']}: {result['cases']} cursors inside identifiers of the standard library "
        f"(keystroke = {result['keystroke_over_cold']:.0%} of cold)"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="default")
    parser.add_argument("--cases", type=int, default=8)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--score-bytes", type=int, default=600)
    parser.add_argument("--json")
    parser.add_argument("--plot")
    args = parser.parse_args()
    result = run(args.model, args.cases, args.seed, args.score_bytes)
    shown = {k: v for k, v in result.items() if k != "per_case"}
    print(json.dumps(shown, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    if args.plot:
        plot(result, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
