"""How much memory and time fusion's corpus takes for a large project.

Reads text files (default: this interpreter's standard library) up to
``--megabytes`` through `cpc.folder_files.folder_files`, counts them with
`cpc.fusion.ProjectCorpus` in the default model's token ids, commits, and
reports the bytes read, tokens, distinct names, the corpus's own memory
estimate, the process's resident-memory growth, the seconds per stage, and
the time of one `ProjectCorpus.fusion` snapshot and one ``advance``.

    python benchmarks/bench_corpus_memory.py --megabytes 50 --json out.json
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import sysconfig
import time
from pathlib import Path

from cpc.folder_files import ReadLimits, folder_files
from cpc.fusion import ProjectCorpus
from cpc.gguf import GGUFModel
from cpc.model_files import stderr_progress
from cpc.tokenizer import LlamaTokenizer


def _rss_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--folder", default=sysconfig.get_paths()["stdlib"])
    parser.add_argument("--megabytes", type=float, default=50)
    parser.add_argument("--model", default="default")
    parser.add_argument("--json", metavar="OUT")
    args = parser.parse_args()

    tokenizer = LlamaTokenizer(GGUFModel.open(args.model, vocab_only=True))
    corpus = ProjectCorpus(tokenizer)
    before = _rss_mb()
    limits = ReadLimits(max_total_bytes=int(args.megabytes * 1e6), max_files=100_000, max_entries=1_000_000)
    started = time.perf_counter()
    read = 0
    for number, file in enumerate(folder_files([Path(args.folder)], limits)):
        corpus.add_file(str(file.path), file.text)
        read += len(file.text.encode("utf-8"))
        if number % 200 == 0:
            stderr_progress(f"counted {read / 1e6:.1f} MB", min(1.0, read / limits.max_total_bytes))
    counted = time.perf_counter()
    corpus.commit()
    committed = time.perf_counter()
    fusion = corpus.fusion(None)
    snapshot = time.perf_counter()
    _, states = fusion.init_states(tuple(tokenizer.encode(b"import os\nos.path.")), b"import os\nos.path.", [((), b"")])
    fusion.advance(states)
    advanced = time.perf_counter()
    result = {
        "folder": args.folder,
        "bytes": read,
        **{f"corpus_{key}": value for key, value in corpus.stats().items()},
        "rss_growth_mb": round(_rss_mb() - before, 1),
        "count_s": round(counted - started, 1),
        "commit_s": round(committed - counted, 1),
        "fusion_snapshot_ms": round((snapshot - committed) * 1000, 1),
        "first_advance_ms": round((advanced - snapshot) * 1000, 1),
    }
    json.dump(result, sys.stdout, indent=2)
    print()
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
