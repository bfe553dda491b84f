"""The ``cpc`` command line: each engine stage, usable alone.

    cpc analyze TEXT [--vocab cl100k | --model PATH] [--json]
    cpc score FILE [--model PATH] [--json]
    cpc complete --prefix-file F [--suffix-file F] [--mode cpc|heal|naive] [--n N] [--max-tokens N]
                 [--gpu-layers N] [--json]

``analyze`` prints the candidate table: for each split point of the unstable
tail, the text before it, how many validated tokens start there and the
first few. ``score`` reads a file through the byte beam and prints its
byte-level log-probability next to its canonical tokenization's.
``complete`` completes the text between a prefix and a suffix. The
benchmark of completion quality and latency is no part of the product:
``python -m harness.bench``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from collections.abc import Sequence

from cpc.candidates import Analysis, CandidateFinder
from cpc.generate import MODES
from cpc.model_files import ModelError, stderr_progress
from cpc.tokenizer import load_tokenizer

_SHOWN_TOKENS = 10
GPU_LAYERS_HELP = "model layers on the GPU (-1: all; a GPU build of llama-cpp-python, docs/gpu.md; default 0)"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="cpc", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    _add_engine_commands(commands)
    args = parser.parse_args(argv)
    try:
        return args.run(args)
    except ModelError as error:
        print(f"cpc: {error}", file=sys.stderr)
        return 2
    except (OSError, ValueError) as error:
        print(f"cpc: {error}", file=sys.stderr)
        return 1


def _add_engine_commands(commands: argparse._SubParsersAction) -> None:
    """``analyze``, ``score`` and ``complete``: one stage of the engine each."""
    analyze = commands.add_parser("analyze", help="candidate tokens for the unstable tail of TEXT")
    analyze.add_argument("text", metavar="TEXT", help="the text before the cursor")
    source = analyze.add_mutually_exclusive_group()
    source.add_argument("--vocab", choices=["cl100k"], help="use tiktoken's cl100k (the default)")
    source.add_argument("--model", help="a GGUF model: a path, or 'default' / 'smollm2'")
    analyze.add_argument("--json", action="store_true", help="print one JSON object")
    analyze.set_defaults(run=_analyze)

    score = commands.add_parser("score", help="byte-level log-probability of FILE under the beam")
    score.add_argument("file", metavar="FILE", help="a text file (read as UTF-8 bytes, scored as a prefix)")
    score.add_argument("--model", default="default", help="a GGUF model: a path, or 'default' / 'smollm2'")
    score.add_argument("--width", type=int, default=8, help="beam width K (default 8)")
    score.add_argument("--threshold", type=float, default=1e-3, help="relative pruning threshold (default 1e-3)")
    score.add_argument("--json", action="store_true", help="print one JSON object")
    score.set_defaults(run=_score)

    complete = commands.add_parser("complete", help="complete the text between a prefix and a suffix")
    complete.add_argument("--model", default="default", help="a GGUF model: a path, or 'default' / 'smollm2'")
    complete.add_argument("--prefix-file", required=True, help="the text before the cursor")
    complete.add_argument("--suffix-file", help="the text after the cursor")
    complete.add_argument("--mode", choices=MODES, default="cpc", help="how to start generating (default cpc)")
    complete.add_argument("--n", type=int, default=1, help="distinct completions wanted (default 1)")
    complete.add_argument("--max-tokens", type=int, default=48, help="generated tokens at most (default 48)")
    complete.add_argument("--multiline", action="store_true", help="go on past the end of the line")
    complete.add_argument("--gpu-layers", type=int, default=0, help=GPU_LAYERS_HELP)
    complete.add_argument("--json", action="store_true", help="print one JSON object")
    complete.set_defaults(run=_complete)


def build_finder(model: str | None) -> CandidateFinder:
    """A candidate finder over the tokenizer `cpc.tokenizer.load_tokenizer` picks."""
    return CandidateFinder(load_tokenizer(model))


def _analyze(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    finder = build_finder(args.model)
    build_ms = (time.perf_counter() - started) * 1000
    started = time.perf_counter()
    analysis = finder.analyze(args.text)
    elapsed_ms = (time.perf_counter() - started) * 1000
    pieces = finder.index.vocab.pieces
    if args.json:
        print(json.dumps(analysis_json(analysis, pieces, elapsed_ms, build_ms, finder.index.vocab.name)))
    else:
        _print_table(analysis, pieces, elapsed_ms, build_ms, finder.index.vocab.name)
    return 0


def _score(args: argparse.Namespace) -> int:
    from cpc.engine import Engine

    data = Path(args.file).read_bytes()
    # Every sequence must hold the whole file: about one token per two bytes at worst.
    engine = Engine.load(
        args.model, n_ctx=len(data) // 2 + 256, width=args.width, threshold=args.threshold, progress=stderr_progress
    )
    score = engine.score(data, progress=lambda done: stderr_progress("scoring", done / max(1, len(data))))
    stderr_progress("scoring", 1.0)
    result = {
        "bytes": score.bytes,
        "logprob_bytes": score.logprob_bytes,
        "logprob_canonical": score.logprob_canonical,
        "bits_per_byte": score.bits_per_byte,
        "elapsed_ms": round(score.elapsed_ms, 1),
        "difference": score.logprob_bytes - score.logprob_canonical,
        "logprob_canonical_direct": score.logprob_canonical_direct,
        "tokens": score.tokens,
        "lm_calls": score.lm_calls,
        "model": engine.vocab.name,
    }
    if args.json:
        print(json.dumps(result))
    else:
        print(f"{args.file}: {score.bytes} bytes, {score.tokens} canonical tokens ({engine.vocab.name})")
        print(f"  log P(bytes)              {score.logprob_bytes:12.4f}  ({score.bits_per_byte:.4f} bits/byte)")
        print(f"  log P(canonical tokens)   {score.logprob_canonical:12.4f}")
        print(f"  difference                {result['difference']:12.4f}  (never negative)")
        print(f"  {score.elapsed_ms / 1000:.1f} s, {score.lm_calls} model calls")
    return 0


def _complete(args: argparse.Namespace) -> int:
    from cpc.engine import Engine
    from cpc.generate import Options, generate

    prefix = Path(args.prefix_file).read_text(encoding="utf-8")
    suffix = Path(args.suffix_file).read_text(encoding="utf-8") if args.suffix_file else ""
    options = Options(mode=args.mode, n=args.n, max_tokens=args.max_tokens, multiline=args.multiline)
    engine = Engine.load(args.model, gpu_layers=args.gpu_layers, progress=stderr_progress)
    generation = generate(engine, prefix + suffix, len(prefix), options)
    if args.json:
        result = {
            "completions": [{"text": c.text, "logprob": round(c.logprob, 4)} for c in generation.completions],
            "elapsed_ms": round(generation.elapsed_ms, 1),
            "mode": generation.mode,
            "lm_calls": generation.lm_calls,
            "model": engine.vocab.name,
        }
        print(json.dumps(result))
    else:
        for completion in generation.completions:
            print(f"{completion.logprob:9.3f}  {completion.text!r}")
        print(f"{generation.mode}: {generation.elapsed_ms:.0f} ms, {generation.lm_calls} model calls", file=sys.stderr)
    return 0


def analysis_json(analysis: Analysis, pieces: list[bytes], elapsed_ms: float, build_ms: float, vocab: str) -> dict:
    """The ``cpc analyze --json`` object (design.md's contract, plus a few extras)."""
    return {
        "last_word": analysis.split.last_word,
        "tail": analysis.split.tail,
        "vocab": vocab,
        "positions": [
            {
                "prefix": point.prefix,
                "offset": point.offset,
                "count": point.count,
                "tokens": [_show(pieces[t]) for t in point.token_ids[:_SHOWN_TOKENS]],
                "tail_tokens": [_show(pieces[t]) for t in point.tail_tokens],
            }
            for point in analysis.positions
        ],
        "elapsed_ms": round(elapsed_ms, 3),
        "index_build_ms": round(build_ms, 1),
    }


def _print_table(analysis: Analysis, pieces: list[bytes], elapsed_ms: float, build_ms: float, vocab: str) -> None:
    split = analysis.split
    print(f"Testing: {split.text}")
    print(f"last word {split.last_word!r}  (unstable tail {split.tail!r}, vocabulary {vocab})")
    print(f"Analysis completed in {elapsed_ms:.2f} ms (vocabulary + index built in {build_ms:.0f} ms)")
    print("Combinations:")
    for point in analysis.positions:
        shown = [pieces[t] for t in point.token_ids[:3]]
        more = "..." if point.count > 3 else ""
        print(f"Pos {point.offset}: {point.prefix} -> {shown}{more} {point.count} possible tokens")


def _show(piece: bytes) -> str:
    return piece.decode("utf-8", "backslashreplace")


if __name__ == "__main__":
    sys.exit(main())
