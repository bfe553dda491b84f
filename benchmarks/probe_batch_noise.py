"""llama.cpp's batch noise: how far a state's next-token distribution moves with the batch and the threads.

    python benchmarks/probe_batch_noise.py [--models default,smollm2] [--threads 1,2,4] [--json OUT]

llama.cpp does not promise that a state gives the same numbers whatever it
is evaluated with: CPU kernels split the work by batch size and thread
count, and some (AVX-512, AMX, ARM's repacked Q4_0) reorder sums. Tests
that compare answers from different batch compositions therefore compare
within a tolerance, and this probe measures the noise that tolerance must
cover. For each model it reads the same states

- alone, each in a fresh context, one decode (the reference);
- together in one call (nested prefixes and siblings: one batch of many sequences);
- one state per decode (``states_per_decode=1``);
- after the prompt was read in 16-token chunks (another split of the same tokens);

with every thread count asked, and reports the largest difference in
probability over the vocabulary, the largest difference in log-probability
over the tokens with probability above 1e-4, how far the gap between the
two likeliest tokens' log-probabilities moved (what can flip a greedy
choice), and how often the likeliest token changed. ``tests/engine/test_llama.py`` and ``tests/engine/test_remote.py``
cite its figures next to their tolerances.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import cpc  # noqa: E402,F401  (llama.cpp's libraries before numpy)
import numpy as np  # noqa: E402

from cpc.engine import Engine  # noqa: E402
from cpc.llama import LlamaLM  # noqa: E402

SOURCE = (
    b'import os\nimport sys\n\n\ndef main(argv):\n    """List the files of a folder."""\n'
    b"    for name in sorted(os.listdir(argv[1])):\n        path = os.path.join(argv[1], name)\n"
    b"        if os.path.isfile(path):\n            print(name, os.path.getsize(path))\n"
)


def _states(engine: Engine) -> list[tuple[int, ...]]:
    tokens = engine.lm.bos + tuple(engine.tokenizer.encode(SOURCE))
    return [tokens[:n] for n in (9, 20, 33, len(tokens) - 8, len(tokens))] + [
        tokens[:20] + (tokens[30],), tokens[:1] + tokens[12:18]
    ]


def _distance(rows: np.ndarray, reference: np.ndarray) -> dict[str, float]:
    probs, exact = np.exp(rows.astype(np.float64)), np.exp(reference.astype(np.float64))
    likely = exact > 1e-4
    top = np.argsort(-reference, axis=1)[:, :2]
    rows_at = np.arange(len(rows))
    gaps = reference[rows_at, top[:, 0]] - reference[rows_at, top[:, 1]]
    moved = rows[rows_at, top[:, 0]] - rows[rows_at, top[:, 1]]
    return {
        "max_dprob": float(np.abs(probs - exact).max()),
        "max_dgap": float(np.abs(moved - gaps).max()),
        "max_dlogprob_likely": float(np.abs(rows - reference)[likely].max()),
        "argmax_changed": int((rows.argmax(axis=1) != reference.argmax(axis=1)).sum()),
    }


def _worst(results: list[dict[str, float]]) -> dict[str, float]:
    return {key: max(result[key] for result in results) for key in results[0]}


def probe(name: str, thread_counts: list[int]) -> dict:
    engine = Engine.load(name)
    states = _states(engine)

    def fresh(threads: int, **options) -> LlamaLM:
        return LlamaLM(engine.gguf, engine.vocab, n_ctx=512, n_seq=len(states), threads=threads, **options)

    reference = np.stack([fresh(thread_counts[0]).next_logprobs([state])[0] for state in states])
    variants = {}
    for threads in thread_counts:
        alone = np.stack([fresh(threads).next_logprobs([state])[0] for state in states])
        together = fresh(threads).next_logprobs(states)
        one_per_decode = fresh(threads, states_per_decode=1).next_logprobs(states)
        chunked = fresh(threads)
        for state in states:
            for length in range(16, len(state), 16):
                chunked.prefill(state[:length])
        split = np.stack([chunked.next_logprobs([state])[0] for state in states])
        for label, rows in (("alone", alone), ("one call", together), ("one state per decode", one_per_decode),
                            ("read in 16-token chunks", split)):
            variants[f"{label}, {threads} threads"] = _distance(rows, reference)
    worst = _worst(list(variants.values()))
    return {"model": name, "states": len(states), "variants": variants, "worst": worst}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="default,smollm2")
    parser.add_argument("--threads", default="1,2,4", help="thread counts; the first gives the reference")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    thread_counts = [int(value) for value in args.threads.split(",")]
    report = []
    for name in args.models.split(","):
        result = probe(name, thread_counts)
        report.append(result)
        print(f"{name}: {result['states']} states against each alone with {thread_counts[0]} thread(s)")
        for label, figures in result["variants"].items():
            print(f"  {label:38s} max |dp| {figures['max_dprob']:.2e}   max |dlogp| (p>1e-4) "
                  f"{figures['max_dlogprob_likely']:.2e}   top-two gap moved {figures['max_dgap']:.2e}   "
                  f"argmax changed {figures['argmax_changed']}")
        worst = result["worst"]
        print(f"  worst: |dp| {worst['max_dprob']:.2e}, |dlogp| {worst['max_dlogprob_likely']:.2e}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
