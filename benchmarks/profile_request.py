"""Where a request's time goes: naive against cpc, on short and long prompts.

    python benchmarks/profile_request.py [--model default] [--cases 20] [--gpu-layers N] [--fusion] [--json OUT] [--plot OUT.png]

Cursors are drawn as `python -m harness.bench` draws them (standard library a–m, half on
a token boundary, half inside a token); each is completed cold in each mode,
with the prompt long (the engine's window) and short (at most 300 tokens,
`harness.bench.quality.shorten`). The engine's stages are timed exclusively (a stage
called inside another is taken out of the outer one's time):

- ``decode``: ``llama_decode``, the model's forward passes, to their end on the device (on a GPU
  ``llama_decode`` returns once the graph is queued, and the wait would be counted in whatever reads the
  logits first: the clock waits for the device there, `decode_to_the_end`);
- ``log-softmax``: logits to a row of log-probabilities (fused generation, scoring);
- ``greedy``: a greedy step's choice and its log-probability, from the logits;
- ``snapshot``: a state's probabilities in prefix-index order (`cpc.beam.Snapshot`);
- ``tokenize``: the tokenizer (the prompt, re-encode validations);
- ``candidates``: the covering-path search, validations aside;
- ``beam``: the byte beam, aside from what it calls;
- ``fusion``: with ``--fusion``, the fusion models' scores per step (`cpc.fusion.Fusion.advance`);
- ``fusion setup``: with ``--fusion``, making a request's fusion models (`cpc.fusion.ProjectCorpus.fusion`);
- ``python``: the rest of the request (generation, detokenizing, glue).

Also per request: model calls, decodes, tokens evaluated and states
answered, the decodes whose compute graph llama.cpp reused from the one
before (``reused``: a graph built again costs the host its construction,
and on a GPU the replay of a captured CUDA graph), and the *host ms per
state*: everything but the decode, divided by the states the model
answered (what a state costs around the forward pass). The report gives
medians per stage and mode, and the cpc − naive difference that is the
latency tax. ``--fusion`` fuses each case's file
into its requests as the server fuses an open document (its default).
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cpc import beam, candidates, fusion, llama, lm, tokenizer  # noqa: E402
from cpc.engine import Engine  # noqa: E402
from cpc.generate import Options  # noqa: E402
from cpc.model_files import stderr_progress  # noqa: E402
from harness.bench import quality  # noqa: E402
from harness.bench.report import pyplot, ratio  # noqa: E402
from harness.bench.sources import expand  # noqa: E402

STAGES = {
    "decode": (llama.LlamaLM, "_decode"),
    "log-softmax": (lm, "log_softmax"),
    "greedy": (lm, "greedy_choice"),
    "snapshot": (beam.Snapshot, "__init__"),
    "tokenize": (tokenizer.LlamaTokenizer, "encode"),
    "candidates": (candidates.CandidateFinder, "analyze"),
    "beam": (beam.ByteBeam, "read"),
    "fusion": (fusion.Fusion, "advance"),
    "fusion setup": (fusion.ProjectCorpus, "fusion"),
}
COUNTERS = ("calls", "decodes", "tokens", "states")
"""`cpc.lm.LanguageModel.stats`' counters, per request."""


def graphs_reused(engine: Engine) -> int:
    """Decodes so far whose compute graph llama.cpp took over from the decode before (its perf counters)."""
    return llama.llama_cpp.llama_perf_context(engine.lm._ctx).n_reused


def decode_to_the_end(decode):
    """`LlamaLM._decode` timed until the device has finished it (`llama_synchronize`; on a CPU it has already)."""

    @functools.wraps(decode)
    def decoded(self: llama.LlamaLM) -> None:
        decode(self)
        llama.llama_cpp.llama_synchronize(self._ctx)

    return decoded


class StageClock:
    """Exclusive time per stage: entering a stage pauses the one it was called from."""

    def __init__(self) -> None:
        self.totals: dict[str, float] = {}
        self._stack: list[list] = []  # [stage, started, spent before the pause]

    def wrap(self, stage: str, function):
        @functools.wraps(function)
        def timed(*args, **kwargs):
            now = time.perf_counter()
            if self._stack:
                outer = self._stack[-1]
                outer[2] += now - outer[1]
            self._stack.append([stage, now, 0.0])
            try:
                return function(*args, **kwargs)
            finally:
                _, started, spent = self._stack.pop()
                end = time.perf_counter()
                self.totals[stage] = self.totals.get(stage, 0.0) + spent + end - started
                if self._stack:
                    self._stack[-1][1] = end

        return timed

    def install(self) -> None:
        for stage, (owner, name) in STAGES.items():
            original = getattr(owner, name)
            timed = self.wrap(stage, decode_to_the_end(original) if stage == "decode" else original)
            setattr(owner, name, timed)
            for module in list(sys.modules.values()):  # `from cpc.lm import log_softmax` keeps a name of its own
                if getattr(module, "__name__", "").startswith("cpc.") and getattr(module, name, None) is original:
                    setattr(module, name, timed)

    def take(self) -> dict[str, float]:
        """Each stage's time since the last take, in ms: `STAGES`, then any other stage `wrap` timed."""
        totals, self.totals = self.totals, {}
        return {stage: totals.get(stage, 0.0) * 1000 for stage in (*STAGES, *totals)}


def profile(engine: Engine, cases: list[quality.Case], clock: StageClock, max_tokens: int,
            fused: bool = False) -> list[dict]:
    rows = []
    for number, case in enumerate(cases):
        corpus = quality.document_corpus(engine, case) if fused else None
        for prompt in quality.PROMPTS:
            prefix = case.prefix if prompt == "long" else quality.shorten(engine.tokenizer, case.prefix)
            for mode in ("naive", "cpc"):
                before = {name: getattr(engine.lm.stats, name) for name in COUNTERS}
                reused_before = graphs_reused(engine)
                engine.clear()
                clock.take()
                started = time.perf_counter()
                fusion_models = corpus.fusion(quality.document_key(case)) if corpus is not None else None
                quality.cold_generate(engine, prefix, Options(mode=mode, max_tokens=max_tokens), fusion_models)
                total = (time.perf_counter() - started) * 1000
                stages = clock.take()
                stages["python"] = total - sum(stages.values())
                states = engine.lm.stats.states - before["states"]
                rows.append({
                    "case": number, "kind": case.kind, "prompt": prompt, "mode": mode, "total_ms": total,
                    "prompt_tokens": len(engine.tokenizer.encode(prefix.encode("utf-8"))),
                    **{f"{stage}_ms": ms for stage, ms in stages.items()},
                    **{name: getattr(engine.lm.stats, name) - before[name] for name in COUNTERS},
                    "reused": graphs_reused(engine) - reused_before,
                    "host_ms_per_state": (total - stages["decode"]) / max(1, states),
                })
        stderr_progress(f"case {number + 1}/{len(cases)}", (number + 1) / len(cases))
    return rows


def summary(rows: list[dict]) -> dict:
    """Medians per prompt length and mode, and cpc minus naive."""
    columns = ["total_ms", *(f"{stage}_ms" for stage in (*STAGES, "python")), *COUNTERS, "reused", "prompt_tokens",
               "host_ms_per_state"]
    result: dict = {}
    for prompt in quality.PROMPTS:
        by_mode = {}
        for mode in ("naive", "cpc"):
            chosen = [row for row in rows if row["prompt"] == prompt and row["mode"] == mode]
            by_mode[mode] = {column: round(statistics.median(row[column] for row in chosen), 2) for column in columns}
        by_mode["cpc_minus_naive"] = {
            column: round(by_mode["cpc"][column] - by_mode["naive"][column], 2) for column in columns
        }
        by_mode["cpc_over_naive_total"] = ratio(by_mode["cpc"]["total_ms"], by_mode["naive"]["total_ms"])
        result[prompt] = by_mode
    return result


def print_summary(result: dict) -> None:
    stages = [*STAGES, "python"]
    header = f"{'prompt':6} {'mode':15} {'total':>7} " + " ".join(f"{s:>12}" for s in stages) + " " + " ".join(
        f"{c:>7}" for c in (*COUNTERS, "reused"))
    print(header)
    for prompt, by_mode in result.items():
        for mode in ("naive", "cpc", "cpc_minus_naive"):
            row = by_mode[mode]
            print(f"{prompt:6} {mode:15} {row['total_ms']:7.0f} " + " ".join(f"{row[s + '_ms']:12.1f}" for s in stages)
                  + " " + " ".join(f"{row[c]:7.0f}" for c in (*COUNTERS, "reused")))
        print(f"{prompt:6} cpc/naive p50 total: {by_mode['cpc_over_naive_total']}; host ms per state: naive "
              f"{by_mode['naive']['host_ms_per_state']}, cpc {by_mode['cpc']['host_ms_per_state']}")


def plot(result: dict, path: str) -> None:
    """Stacked stage medians per mode and prompt: the whole request, and beside it the host's part alone."""
    plt = pyplot()
    fig, (whole, host) = plt.subplots(1, 2, figsize=(12, 4.5))
    bars = [(prompt, mode) for prompt in result for mode in ("naive", "cpc")]
    labels = [f"{mode}\n{prompt}" for prompt, mode in bars]
    for axis, stages in ((whole, [*STAGES, "python"]), (host, [s for s in (*STAGES, "python") if s != "decode"])):
        bottom = [0.0] * len(bars)
        for number, stage in enumerate([*STAGES, "python"]):
            if stage not in stages:
                continue
            values = [result[prompt][mode][f"{stage}_ms"] for prompt, mode in bars]
            axis.bar(range(len(bars)), values, bottom=bottom, label=stage, color=f"C{number}")
            bottom = [b + max(0.0, v) for b, v in zip(bottom, values)]
        axis.set_xticks(range(len(bars)), labels)
    for number, (prompt, mode) in enumerate(bars):
        host.annotate(f"{result[prompt][mode]['host_ms_per_state']:.2f} ms/state", (number, 0), ha="center",
                      va="bottom", fontsize=8, color="white")
    whole.set_ylabel("median ms per cold request (stage medians)")
    whole.set_title("where a request's time goes")
    host.set_title("the host's part: everything but the decode")
    host.legend(fontsize=8, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="default")
    parser.add_argument("--files", default="<stdlib>/[a-m]*.py")
    parser.add_argument("--cases", type=int, default=20)
    parser.add_argument("--gpu-layers", type=int, default=0, help="model layers on the GPU (-1: all)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--fusion", action="store_true", help="fuse each case's file, as the server fuses an open document")
    parser.add_argument("--json", metavar="OUT")
    parser.add_argument("--plot", metavar="OUT.png")
    args = parser.parse_args()
    engine = Engine.load(args.model, gpu_layers=args.gpu_layers, progress=stderr_progress)
    cases = quality.draw_cases(engine, expand(args.files), args.cases, args.seed)
    clock = StageClock()
    clock.install()
    rows = profile(engine, cases, clock, args.max_tokens, args.fusion)
    result = summary(rows)
    print_summary(result)
    if args.json:
        Path(args.json).write_text(json.dumps({"model": engine.vocab.name, "fusion": args.fusion, "summary": result,
                                               "rows": rows}, indent=2))
    if args.plot:
        plot(result, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
