"""What a keystroke's prompt costs to tokenize: llama.cpp's whole encode vs `cpc.conditioning.stable_tokens`.

    python benchmarks/bench_encode.py

The texts are the editor scenario's (benchmarks/bench_lsp.py): the middle of five
~2,000-line standard-library files, its first name typed key by key, each
text as a request reads it (`cpc.window.Window`). `stable_tokens` goes
through `cpc.tokenizer.LlamaTokenizer.encode`, which re-encodes only what
changed since the last long text.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cpc.conditioning import stable_tokens  # noqa: E402
from cpc.gguf import GGUFModel  # noqa: E402
from cpc.tokenizer import LlamaTokenizer  # noqa: E402
from cpc.window import MAX_PROMPT_TOKENS, Window  # noqa: E402
from benchmarks.bench_lsp import scenario_targets  # noqa: E402


def main() -> None:
    tokenizer = LlamaTokenizer(GGUFModel.open("default", vocab_only=True))
    whole, reused, chars = [], [], []
    for _, before, name, _ in scenario_targets():
        for typed in range(len(name) + 1):
            text = Window.at(before + name[:typed]).prefix
            chars.append(len(text))
            started = time.perf_counter()
            tokenizer.gguf.tokenize(text.encode("utf-8"))
            whole.append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            stable_tokens(tokenizer, text, MAX_PROMPT_TOKENS)
            reused.append((time.perf_counter() - started) * 1000)
    print(f"{len(chars)} keystrokes, texts of p50 {statistics.median(chars):.0f} characters: "
          f"whole encode p50 {statistics.median(whole):.1f} ms, stable_tokens p50 {statistics.median(reused):.1f} ms")


if __name__ == "__main__":
    main()
