"""Speculative drafts measured: what checking k rows costs, how often drafts are kept, and what they save.

    python benchmarks/bench_drafts.py [--model default] [--cases 60] [--only cost|lines] [--threads N] [--beside core|model]
                                      [--variants off,cost-aware,...] [--json OUT] [--plot OUT.png]

**Cost** (``--only cost``): one model call with k rows of logits against
one greedy step, k = 1..16.

A draft of k - 1 tokens is checked in one ``llama_decode`` of k tokens, each
with its row of logits (`cpc.llama.LlamaLM.check_drafts`); a greedy step is
k = 1. Every row costs the model's output layer (262,144 logits for Gemma 3),
so on a CPU k rows cost nearly k steps, and a draft pays only where most of
it is kept. The figures: the median time of the call per k, its ratio to k
single steps (below 1: a fully kept draft saves time), and the break-even
acceptance (the tokens a draft must have kept for its call to cost no more
than the steps it replaces). `cpc.draft.DraftParameters` is chosen from them.

Each call here stops at the first row (the host reads one row), so the
figure is the model's time; the host's part per row read is measured apart
(`cpc.lm.greedy_choice`, one exponential pass).

**Lines** (``--only lines``): cursors drawn as `python -m harness.bench` draws them
(standard library a–m, short prompts, with fusion of the file as the
server does); each prompt is read first into an emptied cache (warm, as
after a pause, and the same for every run), then the rest of the line is
generated in each mode with drafts off (twice: two plain runs agree), with
the cost-aware drafts (`cpc.draft.DraftParameters`; the product leaves
them off), and with every draft checked whole
(``cost_aware=False``, the acceptance measurement). Reported: texts
identical to no drafts, model calls, draft tokens checked and kept,
generation time p50/p95, and how often a draft's first and next tokens
were kept by match length (`cpc.draft.PRIOR_KEPT` comes from there).

``--beside core`` keeps one core busy in another process while measuring
(``--beside model``: another llama.cpp process decodes beside it,
`harness.beside`), and
``--threads N`` fixes the model's threads (0: `cpc.threads` chooses, as
the product does): the latency under load, against the idle figure.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import cpc  # noqa: E402,F401  (llama.cpp's libraries before numpy)
import numpy as np  # noqa: E402

from dataclasses import replace  # noqa: E402

from cpc.draft import PRIOR_KEPT, DraftParameters, kept  # noqa: E402
from cpc.engine import Engine  # noqa: E402
from cpc.generate import MODES, Options, generate, warm  # noqa: E402
from cpc.lm import greedy_choice  # noqa: E402
from cpc.model_files import stderr_progress  # noqa: E402
from harness.beside import LOADS, beside  # noqa: E402
from harness.bench import quality  # noqa: E402
from harness.bench.report import pyplot  # noqa: E402
from harness.bench.sources import expand  # noqa: E402

SOURCE = Path(__import__("argparse").__file__)


def measure(engine: Engine, prompt_tokens: int, repeat: int, largest: int) -> dict:
    lm = engine.lm
    tokens = lm.bos + tuple(engine.tokenizer.encode(SOURCE.read_bytes()))
    state, following = tokens[:prompt_tokens], tokens[prompt_tokens : prompt_tokens + largest]
    lm.prefill(state)
    reject = lambda number, position, scores: -1  # noqa: E731 - the walk stops at the first row
    costs = {}
    for k in range(1, largest + 1):
        times = []
        for _ in range(repeat):
            began = time.perf_counter()
            lm.check_drafts([state], [following[: k - 1]], reject)
            times.append((time.perf_counter() - began) * 1000)
        costs[k] = statistics.median(times)
        print(f"k = {k:2d}: {costs[k]:6.1f} ms  ({costs[k] / (k * costs[1]):.2f} of {k} steps)", file=sys.stderr)
    banned = engine.vocab.special.copy()
    row = lm.next_scores([state])[0]
    scratch = np.empty_like(row)
    began = time.perf_counter()
    for _ in range(50):
        greedy_choice(row, banned, scratch)
    host_ms = (time.perf_counter() - began) * 1000 / 50
    step = costs[1]
    return {
        "prompt_tokens": prompt_tokens,
        "repeat": repeat,
        "host_ms_per_row": round(host_ms, 3),
        "rows": [
            {
                "k": k,
                "ms": round(ms, 2),
                "over_k_steps": round(ms / (k * step), 3),
                # a call that keeps a tokens of its k - 1 gives a + 1 tokens: it pays when (a + 1) steps cost more
                "break_even_kept": round(max(0.0, (ms + k * host_ms) / (step + host_ms) - 1), 2),
            }
            for k, ms in costs.items()
        ],
    }


VARIANTS = {
    "off": DraftParameters(max_tokens=0),
    "off again": DraftParameters(max_tokens=0),
    "cost-aware": DraftParameters(),
    "whole": DraftParameters(cost_aware=False),
}


def lines(engine: Engine, cases: int, seed: int, modes: list[str], variants: list[str]) -> dict:
    """Warm whole-line generations per mode and draft variant (`VARIANTS`)."""
    import cpc.generate as generation_module

    engine.lm.checks_drafts_cheaply = True  # measured here even on a CPU, where the product leaves them off
    drawn = quality.draw_cases(engine, expand("<stdlib>/[a-m]*.py"), cases, seed)
    drawn = [replace(case, prefix=quality.shorten(engine.tokenizer, case.prefix)) for case in drawn]
    kept_by_match: dict[int, list[int]] = {}
    original = generation_module._choose_along

    def spy(engine_, live, drafts, banned, fusion, margin):  # acceptance by match length, for the table
        steps = original(engine_, live, drafts, banned, fusion, margin)
        for stream, draft, step in zip(live, drafts, steps):
            taken = kept(draft, [token for token, _, _ in step])
            kept_by_match.setdefault(min(stream.match, max(PRIOR_KEPT)), []).append((len(draft), taken))
        return steps

    rows = {mode: {variant: [] for variant in variants} for mode in modes}
    for number, case in enumerate(drawn):
        document = quality.document_corpus(engine, case)
        for mode in modes:
            for variant in variants:
                drafts = VARIANTS[variant]
                fusion = document.fusion(quality.document_key(case))
                options = Options(mode=mode, drafts=drafts)
                engine.clear()  # every variant from the same cache: the prompt read, nothing else
                warm(engine, case.prefix, options=options)
                generation_module._choose_along = spy if variant == "whole" else original
                generation = generate(engine, case.prefix, options=options, fusion=fusion)
                generation_module._choose_along = original
                rows[mode][variant].append({
                    "ms": generation.elapsed_ms, "calls": generation.lm_calls, "drafted": generation.drafted,
                    "accepted": generation.accepted, "text": quality.first_text(generation),
                })
        print(f"case {number + 1}/{len(drawn)}", file=sys.stderr, end="\r")
    return {"cases": len(drawn), "modes": {mode: _summary(variants) for mode, variants in rows.items()},
            "kept_by_match": _kept_rates(kept_by_match),
            "texts": [{mode: {variant: rows[mode][variant][k]["text"] for variant in variants} for mode in modes}
                      for k in range(len(drawn))]}


def _summary(variants: dict[str, list[dict]]) -> dict:
    off = next(iter(variants.values()))
    summary = {}
    for variant, runs in variants.items():
        times = sorted(run["ms"] for run in runs)
        summary[variant] = {
            "identical": sum(run["text"] == plain["text"] for run, plain in zip(runs, off)),
            "calls": round(statistics.mean(run["calls"] for run in runs), 2),
            "drafted": round(statistics.mean(run["drafted"] for run in runs), 2),
            "accepted": round(statistics.mean(run["accepted"] for run in runs), 2),
            "p50_ms": round(statistics.median(times), 1),
            "p95_ms": round(times[round(0.95 * (len(times) - 1))], 1),
        }
    return summary


def _kept_rates(kept_by_match: dict[int, list[tuple[int, int]]]) -> dict:
    """Per match length: checks, and how often the first token and each next one (after a kept one) were kept."""
    rates = {}
    for match, checks in sorted(kept_by_match.items()):
        first = sum(kept >= 1 for _, kept in checks)
        reached = sum(max(0, min(kept + 1, length) - 1) for length, kept in checks)
        following = sum(max(0, kept - 1) for _, kept in checks)
        rates[match] = {"checks": len(checks), "first": round(first / len(checks), 2),
                        "next": round(following / reached, 2) if reached else None}
    return rates


def plot(result: dict, path: str) -> None:
    plt = pyplot()
    rows = result["rows"]
    ks = [row["k"] for row in rows]
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    left.plot(ks, [row["ms"] for row in rows], "o-", label="one call, k rows of logits")
    left.plot(ks, [k * rows[0]["ms"] for k in ks], "--", color="grey", label="k greedy steps")
    left.set_xlabel("k (draft of k - 1 tokens)")
    left.set_ylabel("ms")
    left.legend()
    left.set_title(f"{result['model']}: checking k rows after {result['prompt_tokens']} tokens")
    right.plot(ks, [row["break_even_kept"] for row in rows], "o-", label="kept tokens to break even")
    right.plot(ks, [k - 1 for k in ks], "--", color="grey", label="the whole draft")
    right.set_xlabel("k")
    right.set_ylabel("draft tokens")
    right.legend()
    right.set_title("a draft pays when more of it is kept")
    figure.tight_layout()
    figure.savefig(path, dpi=100)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="default")
    parser.add_argument("--only", choices=("cost", "lines"))
    parser.add_argument("--cases", type=int, default=60)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--variants", default=",".join(VARIANTS), help="of " + ", ".join(VARIANTS))
    parser.add_argument("--beside", choices=LOADS, default="none",
                        help="what runs in another process while measuring: a busy core (a build), a model (a test run)")
    parser.add_argument("--prompt-tokens", type=int, default=400)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--largest", type=int, default=16)
    parser.add_argument("--threads", type=int, default=0, help="the model's threads (0: chosen by load, as the product)")
    parser.add_argument("--gpu-layers", type=int, default=0, help="model layers on the GPU (-1: all; docs/gpu.md)")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--plot")
    args = parser.parse_args()
    engine = Engine.load(args.model, threads=args.threads or None, gpu_layers=args.gpu_layers, progress=stderr_progress)
    result: dict = {"model": engine.vocab.name, "threads": args.threads or "auto", "beside": args.beside}
    with beside(args.beside):
        _run(engine, args, result)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    if args.plot and "rows" in result:
        plot(result, args.plot)


def _run(engine: Engine, args: argparse.Namespace, result: dict) -> None:
    if args.only in (None, "cost"):
        result |= measure(engine, args.prompt_tokens, args.repeat, args.largest)
    if args.only in (None, "lines"):
        result["lines"] = lines(engine, args.cases, args.seed, args.modes.split(","), args.variants.split(","))
        for mode, variants in result["lines"]["modes"].items():
            for variant, figures in variants.items():
                print(f"{mode:6s} {variant:9s} " + "  ".join(f"{key} {value}" for key, value in figures.items()))
        for match, rates in result["lines"]["kept_by_match"].items():
            print(f"match {match}: {rates}")


if __name__ == "__main__":
    main()
