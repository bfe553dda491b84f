"""How much of a line its first token decides: each mode beside a start that is handed the true first token.

    python benchmarks/start_oracle.py [--files GLOBS] [--cursors functions|identifiers] [--cases 200] [--seed 1]
                                      [--threads 2] [--json OUT] [--markdown OUT.md] [--plot OUT.png]

The modes (naive, heal, cpc) differ only in where generation starts; the
rest of the line is greedy decoding in all of them. To see how much a
better start could still win, each cursor is also completed from an
*oracle* start: the typed text extended to the end of the model's token
that holds the cursor in the tokenization of the whole line (``heap[0] |=
item``: the token `` =``), then continued like ``naive``. It knows one
token of the future, so no start could beat it by looking at the typed
text alone. Every request is cold, in process, with no budgets and no
fusion, on a fixed thread count (the texts do not depend on the load).

Each cursor the oracle gets right and cpc does not is put in one of two
kinds: ``first token`` (cpc's first token past the cursor spells other
characters there than the oracle's: what the model guessed of characters
not typed yet decided it) or ``after it`` (the same first token; a later
one differs: greedy decoding from a start that differs before the cursor
or only in its batches, not the start's choice).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_server import DEFAULT_FILES, development_cases  # noqa: E402
from cpc.engine import Engine  # noqa: E402
from cpc.generate import Generation, Options  # noqa: E402
from cpc.model_files import stderr_progress  # noqa: E402
from harness.bench.quality import Case, cold_generate, first_past_typed, first_text, line_exact  # noqa: E402

MODES = ("naive", "heal", "cpc")
STARTS = (*MODES, "oracle")


def true_token_rest(engine: Engine, case: Case) -> str:
    """The characters after the cursor up to the end of the model's token that holds the cursor, in the
    tokenization of the prefix and the rest of its line ("" where a token ends at the cursor).

    >>> engine = Engine.load("smollm2")
    >>> true_token_rest(engine, Case("f.py", "    ret", "", "urn x", "inside"))
    'urn'
    >>> true_token_rest(engine, Case("f.py", "    return", "", " x", "boundary"))
    ''
    """
    whole = (case.prefix + case.line_rest).encode("utf-8")
    cursor = len(case.prefix.encode("utf-8"))
    end = 0
    for token in engine.tokenizer.encode(whole):
        end += len(engine.vocab.pieces[token])
        if end >= cursor:
            break
    while end < len(whole) and whole[end] & 0xC0 == 0x80:  # a token may end inside a character
        end += 1
    return whole[cursor:end].decode("utf-8")


def first_past_cursor(engine: Engine, generation: Generation) -> str:
    """What the best completion's first token past the typed bytes it re-reads spells after the cursor
    (for cpc, the covering path's last token, which may reach past the cursor).

    >>> engine = Engine.load("smollm2")
    >>> [first_past_cursor(engine, cold_generate(engine, "import numpy as np\\nx = np.zer", Options(mode=mode)))
    ...  for mode in ("cpc", "naive")]
    ['os', '(']
    """
    found = first_past_typed(engine, generation.completions[0]) if generation.completions else None
    return found[1].decode("utf-8", "replace") if found else ""


def complete(engine: Engine, case: Case, max_tokens: int) -> dict:
    """Each mode's text and the oracle's, whether each is the rest of the line, and each first token past the cursor."""
    generations = {mode: cold_generate(engine, case.prefix, Options(mode=mode, max_tokens=max_tokens)) for mode in MODES}
    rest = true_token_rest(engine, case)
    oracle = cold_generate(engine, case.prefix + rest, Options(mode="naive", max_tokens=max_tokens))
    texts = {mode: first_text(generation) for mode, generation in generations.items()} | {
        "oracle": rest + first_text(oracle)}
    firsts = {mode: first_past_cursor(engine, generation) for mode, generation in generations.items()} | {
        "oracle": rest or first_past_cursor(engine, oracle)}
    row = {"file": case.file, "line": case.line_rest, "kind": case.kind, "texts": texts, "first_tokens": firsts,
           "exact": {start: line_exact(text, case.line_rest) for start, text in texts.items()}}
    if row["exact"]["oracle"] and not row["exact"]["cpc"]:
        row["cpc_lost"] = "after it" if firsts["cpc"] == firsts["oracle"] else "first token"
    return row


def run(engine: Engine, cases: list[Case], max_tokens: int = 48) -> dict:
    """Every cursor completed from each start; line exact per start, why cpc lost where the oracle won, and
    ``over_heal``: the cursors heal gets wrong and cpc or the oracle right (all a start could win over heal)."""
    rows = []
    started = time.perf_counter()
    for number, case in enumerate(cases):
        rows.append(complete(engine, case, max_tokens))
        if (number + 1) % 20 == 0 or number + 1 == len(cases):
            print(f"{number + 1}/{len(cases)} cursors ({time.perf_counter() - started:.0f} s)",
                  file=sys.stderr, flush=True)
    return {
        "cases": len(rows),
        "line_exact": {start: round(sum(row["exact"][start] for row in rows) / len(rows), 4) for start in STARTS},
        "cpc_lost": dict(Counter(row["cpc_lost"] for row in rows if "cpc_lost" in row)),
        "over_heal": dict(Counter(
            "cpc right" if row["exact"]["cpc"] else f"cpc lost: {row['cpc_lost']}"
            for row in rows if not row["exact"]["heal"] and (row["exact"]["cpc"] or row["exact"]["oracle"])
        )),
        "rows": rows,
    }


def markdown(result: dict) -> str:
    """The cursors where the oracle and cpc disagree on the line, or cpc and heal do."""
    lines = ["| # | token | line | exact | first token past the cursor: cpc / oracle | cpc | heal | oracle | cpc lost |",
             "|---|---|---|---|---|---|---|---|---|"]
    for number, row in enumerate(result["rows"]):
        exact = row["exact"]
        if exact["oracle"] == exact["cpc"] == exact["heal"]:
            continue
        firsts = " / ".join(repr(row["first_tokens"][start]) for start in ("cpc", "oracle"))
        cells = [f"`{_cell(row['line'])}`", " ".join(s for s in STARTS if exact[s]) or "none", _cell(firsts),
                 *(f"`{_cell(row['texts'][start])}`" for start in ("cpc", "heal", "oracle")), row.get("cpc_lost", "")]
        lines.append(f"| {number} | {row['kind']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", "\\n").replace("`", "'")


def plot(result: dict, path: str, title: str) -> None:
    """Line exact per start, the oracle's bar split into what cpc also gets and what it loses, and why."""
    from harness.bench.report import pyplot

    plt = pyplot()
    fig, axis = plt.subplots(figsize=(7, 4))
    shares = [100 * result["line_exact"][start] for start in STARTS]
    bars = axis.bar(STARTS, shares, color=["#c44e52", "#55a868", "#4c72b0", "#8172b2"])
    axis.bar_label(bars, fmt="%.1f %%", fontsize=9)
    lost = ", ".join(f"{kind}: {count}" for kind, count in sorted(result["cpc_lost"].items()))
    axis.set_ylabel("line exact, % of cursors")
    axis.set_title(f"{title}\noracle right and cpc wrong: {lost or 'none'}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="default")
    parser.add_argument("--files", default=DEFAULT_FILES)
    parser.add_argument("--cursors", choices=("identifiers", "functions"), default="functions")
    parser.add_argument("--cases", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--prompt", choices=("long", "short"), default="long")
    parser.add_argument("--threads", type=int, default=2, help="the model's threads, fixed (default 2)")
    parser.add_argument("--json")
    parser.add_argument("--markdown")
    parser.add_argument("--plot")
    args = parser.parse_args()
    engine = Engine.load(args.model, threads=args.threads, progress=stderr_progress)
    cases = development_cases(engine, args.files, args.cases, args.seed, args.prompt, args.cursors)
    result = {"model": args.model, "files": args.files, "cursors": args.cursors, "seed": args.seed,
              "threads": args.threads, **run(engine, cases)}
    print("line exact: " + ", ".join(f"{start} {100 * share:.1f} %" for start, share in result["line_exact"].items()))
    print("oracle right, cpc wrong: " + (", ".join(f"{k} {n}" for k, n in result["cpc_lost"].items()) or "none"))
    print("heal wrong, cpc or oracle right: " + (", ".join(f"{k} {n}" for k, n in result["over_heal"].items()) or "none"))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    if args.markdown:
        Path(args.markdown).write_text(markdown(result))
    if args.plot:
        plot(result, args.plot, f"{result['cases']} cursors ({args.cursors}), cold, in process, no budgets or fusion")
    return 0


if __name__ == "__main__":
    sys.exit(main())
