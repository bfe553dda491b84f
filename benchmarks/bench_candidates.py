"""Benchmark of the candidate engine: index build and analysis time per case.

    python benchmarks/bench_candidates.py [--vocabs cl100k,default,smollm2] [--repeat 7]
                                     [--json OUT.json] [--plot OUT.png]

For each vocabulary: time to render the vocabulary and to build the prefix
index, then for each of the six cases of the reference implementation (the
trie and re-encode sketch of Cursor's character prefix conditioning
problem) the median time of

- ``cold``: a fresh finder (no cached context), the number the reference reports;
- ``keystroke``: the case right after the same text minus its last character
  was analysed (what typing one more character costs);
- ``warm``: the same text again.

The reference implementation takes 15-29 ms per case and 0.7 s to build
its trie for cl100k on this machine (drawn as a band on the plot).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cpc.candidates import CandidateFinder  # noqa: E402
from cpc.index import PrefixIndex  # noqa: E402
from cpc.tokenizer import load_tokenizer  # noqa: E402

CASES = [
    "I bought some apple",
    "https:",
    "userNa",
    "We found a hidden causali",
    "He introduced an intermediar",
    "indivi",
]
SEED_MS = (15.0, 29.0)
SEED_BUILD_S = 0.7


def _ms(start: float) -> float:
    return (time.perf_counter() - start) * 1000


def bench_vocabulary(name: str, repeat: int) -> dict:
    started = time.perf_counter()
    tokenizer = load_tokenizer(name)
    vocab_ms = _ms(started)
    builds = []
    for _ in range(repeat):
        started = time.perf_counter()
        index = PrefixIndex(tokenizer.vocab)
        builds.append(_ms(started))
    result = {
        "vocab_size": len(tokenizer.vocab),
        "vocab_load_ms": round(vocab_ms, 1),
        "index_build_ms": round(statistics.median(builds), 1),
        "cases": {},
    }
    for text in CASES:
        cold, keystroke, warm = [], [], []
        count = 0
        for _ in range(repeat):
            finder = CandidateFinder(tokenizer, index)
            started = time.perf_counter()
            count = finder.analyze(text).count
            cold.append(_ms(started))
            started = time.perf_counter()
            finder.analyze(text)
            warm.append(_ms(started))
            finder = CandidateFinder(tokenizer, index)
            finder.analyze(text[:-1])
            started = time.perf_counter()
            finder.analyze(text)
            keystroke.append(_ms(started))
        result["cases"][text] = {
            "candidates": count,
            "cold_ms": round(statistics.median(cold), 3),
            "keystroke_ms": round(statistics.median(keystroke), 3),
            "warm_ms": round(statistics.median(warm), 3),
        }
        print(f"  {name:8s} {text!r:32s} {result['cases'][text]}", file=sys.stderr, flush=True)
    return result


def plot(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    names = list(results)
    fig, axes = plt.subplots(1, len(names), figsize=(5.5 * len(names), 4.8), sharey=True, squeeze=False)
    for axis, name in zip(axes[0], names):
        cases = results[name]["cases"]
        x = np.arange(len(cases))
        for shift, key, label in [(-0.27, "cold_ms", "cold"), (0, "keystroke_ms", "one more keystroke"), (0.27, "warm_ms", "warm")]:
            axis.bar(x + shift, [cases[c][key] for c in cases], width=0.27, label=label)
        axis.axhspan(*SEED_MS, color="red", alpha=0.15, label="the reference implementation (15-29 ms)")
        axis.axhline(1.0, color="black", linestyle=":", linewidth=1, label="1 ms target")
        axis.set_yscale("log")
        axis.set_xticks(x, [repr(c[-12:]) for c in cases], rotation=30, ha="right", fontsize=8)
        info = results[name]
        axis.set_title(
            f"{name} ({info['vocab_size']:,} tokens)\n"
            f"vocab {info['vocab_load_ms']:.0f} ms, index build {info['index_build_ms']:.0f} ms"
        )
    axes[0][0].set_ylabel("analysis time per case, ms (median, log scale)")
    axes[0][0].legend(fontsize=8, loc="upper left")
    fig.suptitle("CPC candidate analysis: the six reference cases")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vocabs", default="cl100k,default,smollm2")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--plot", type=Path)
    args = parser.parse_args()
    results = {}
    for name in args.vocabs.split(","):
        print(f"benchmarking {name} ...", file=sys.stderr, flush=True)
        results[name] = bench_vocabulary(name, args.repeat)
    report = {"seed_ms_per_case": SEED_MS, "seed_build_s": SEED_BUILD_S, "results": results}
    text = json.dumps(report, indent=2)
    if args.json:
        args.json.write_text(text)
    print(text)
    if args.plot:
        plot(results, args.plot)
        print(f"plot written to {args.plot}", file=sys.stderr)


if __name__ == "__main__":
    main()
