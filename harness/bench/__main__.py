"""The benchmark's command line: completion quality and latency on cursors drawn from real code.

    python -m harness.bench --files GLOB --cases N --seed S [--modes naive,heal,cpc] [--gpu-layers N]
                            [--json OUT] [--plot OUT.png]
    python -m harness.bench --cross-file dev|check|GLOB --cases N --seed S
                            [--modes cpc,cpc+fusion,cpc+context,naive+fusion]
                            [--fusion-weights ngram=X,identifiers=Y] [--json OUT] [--plot OUT.png]

Without ``--cross-file`` it runs `harness.bench.quality` (does the cursor's
position inside a word still matter?); with it, `harness.bench.cross_file`
(cursors in a directory whose other files are the project around them).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from cpc.draft import DraftParameters
from cpc.engine import Engine
from cpc.fusion import FusionWeights
from cpc.generate import MODES
from cpc.model_files import ModelError, stderr_progress
from harness.bench import cross_file, quality

PROG = "python -m harness.bench"


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return _bench_cross_file(args) if args.cross_file is not None else _bench(args)
    except ModelError as error:
        print(f"{PROG}: {error}", file=sys.stderr)
        return 2
    except (OSError, ValueError) as error:
        print(f"{PROG}: {error}", file=sys.stderr)
        return 1


def _parser() -> argparse.ArgumentParser:
    bench = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    bench.add_argument("--files", help="glob of source files; ** is recursive, "
                       "<stdlib> is this interpreter's standard library (default '<stdlib>/[a-m]*.py')")
    bench.add_argument("--cross-file", metavar="dev|check|GLOB",
                       help="repository-level cases instead: cursors in files of source directories, the other "
                       "files as the project around them (dev: stdlib packages a-m + npm's libs; check: stdlib packages n-z; "
                       "or a glob of directories)")
    bench.add_argument("--cases", type=int, default=60, help="cursor positions, half of each kind (default 60)")
    bench.add_argument("--prompt", choices=("long", "short"), default="long",
                       help="long: up to the engine's prompt window before the cursor (default); short: whole lines, "
                       "at most 300 tokens (a small file)")
    bench.add_argument("--seed", type=int, default=1)
    bench.add_argument("--modes", help="comma-separated modes (default naive,heal,cpc; with --cross-file "
                       "cpc,cpc+fusion,cpc+context,naive+fusion: a mode, then +fusion and/or +context)")
    bench.add_argument("--model", default="default", help="a GGUF model: a path, or 'default' / 'smollm2'")
    bench.add_argument("--max-tokens", type=int, default=48)
    bench.add_argument("--fusion", action="store_true",
                       help="every mode fuses the case's file up to the cursor's line into its token choices, as "
                       "the server fuses an open document (its default)")
    bench.add_argument("--fusion-weights", metavar="ngram=X,identifiers=Y",
                       help="with --fusion or --cross-file: fusion weights (default: cpc.fusion.FusionWeights())")
    bench.add_argument("--gpu-layers", type=int, default=0,
                       help="model layers on the GPU (-1: all; a GPU build of llama-cpp-python, docs/gpu.md; default 0)")
    bench.add_argument("--threads", type=int, default=0,
                       help="the model's CPU threads (default 0: every core, fewer while other processes hold cores, "
                            "as the server; a fixed count gives the same texts whatever the load)")
    bench.add_argument("--drafts", choices=("auto", "on", "off"), default="auto",
                       help="speculative drafts (cpc.draft): auto as the product (off: they saved no time), "
                            "on (also on a CPU, to measure them) or off")
    bench.add_argument("--json", metavar="OUT", help="write the results as JSON")
    bench.add_argument("--plot", metavar="OUT.png", help="write a bar chart")
    return bench


def _bench(args: argparse.Namespace) -> int:
    if args.fusion_weights is not None and not args.fusion:
        raise ValueError("--fusion-weights needs --fusion or --cross-file")
    modes = _modes(args.modes or "naive,heal,cpc")
    unknown = sorted(set(modes) - set(MODES))
    if unknown:
        raise ValueError(f"unknown mode(s) {', '.join(unknown)}: choose among {', '.join(MODES)}")
    weights = FusionWeights.parse(args.fusion_weights) if args.fusion else None
    engine = Engine.load(args.model, gpu_layers=args.gpu_layers, threads=args.threads or None, fit_context=True,
                         progress=stderr_progress)
    if args.drafts == "on":
        engine.lm.checks_drafts_cheaply = True
    drafts = DraftParameters(max_tokens=0) if args.drafts == "off" else DraftParameters()
    files = args.files or "<stdlib>/[a-m]*.py"
    result = quality.run(engine, files, args.cases, args.seed, modes, args.max_tokens, progress=stderr_progress,
                         prompt=args.prompt, fusion=weights, drafts=drafts)
    quality.print_table(result)
    if args.json:
        placement = engine.placement()
        result["placement"] = placement
        result["greedy_in_graph"] = bool(placement["greedyInGraph"])
        result["drafts_checked"] = engine.lm.checks_drafts_cheaply
        Path(args.json).write_text(json.dumps(result, indent=2))
    if args.plot:
        quality.plot(result, args.plot)
    return 0


def _bench_cross_file(args: argparse.Namespace) -> int:
    if args.files is not None or args.fusion:
        raise ValueError("--cross-file excludes --files and --fusion: it draws its own cases and fuses their directory")
    modes = _modes(args.modes or ",".join(cross_file.DEFAULT_MODES))
    for mode in modes:
        cross_file.parse_mode(mode)
    fused = any(cross_file.parse_mode(mode)[1] for mode in modes)
    weights = FusionWeights.parse(args.fusion_weights) if fused or args.fusion_weights else None
    engine = Engine.load(args.model, gpu_layers=args.gpu_layers, threads=args.threads or None, fit_context=True,
                         progress=stderr_progress)
    result = cross_file.run(
        engine, args.cross_file, args.cases, args.seed, modes, args.max_tokens, weights, progress=stderr_progress
    )
    cross_file.print_table(result)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    if args.plot:
        cross_file.plot(result, args.plot)
    return 0


def _modes(text: str) -> list[str]:
    return [mode.strip() for mode in text.split(",") if mode.strip()]


if __name__ == "__main__":
    sys.exit(main())
