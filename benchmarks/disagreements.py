"""Where the modes disagree: per cursor, what cpc, heal and naive chose, and the beam's mass on each covering path.

    python benchmarks/disagreements.py RUN.json [--ms 1000] [--json OUT] [--markdown OUT.md]

Reads a `bench_server.py` run (its ``per_case``: what each mode showed, and
the in-process engine's text), keeps the cursors where one mode's line is
exact at ``--ms`` and another's is not, and completes each of them again in
process (cold, no budgets, no fusion) to show why:

- the cursor's kind: ``line start`` (at the indentation's end), ``in word``
  (between two identifier characters), ``word end`` (after one, before
  something else), ``after symbol``; and the token kind (``boundary``: the
  model's tokens of the line end at the cursor; ``inside``: a token spans it);
- per mode, the first token it chose after the typed text (for cpc the
  covering path's last token, which may reach past the cursor);
- cpc's covering paths (at most four): each path's tokens from the tail on
  and its share of ``P(tail)``, the mass the beam found for the typed text.

The summary counts wins and losses per pair of modes and cursor kind.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_server import development_cases, shown_at  # noqa: E402
from cpc.engine import Engine  # noqa: E402
from cpc.generate import Options, generate, prompt_frame  # noqa: E402
from harness.bench.quality import first_past_typed, line_exact  # noqa: E402

MODES = ("cpc", "heal", "naive")
PATHS_SHOWN = 4
_WORD = re.compile(r"[A-Za-z0-9_$]")


def cursor_kind(prefix: str, line_rest: str) -> str:
    """Where the cursor sits on its line, by characters.

    >>> cursor_kind("x = 1\\n    ", "return x"), cursor_kind("    ret", "urn x"), cursor_kind("    x", " = 1")
    ('line start', 'in word', 'word end')
    """
    before = prefix[prefix.rfind("\n") + 1 :]
    if not before.strip():
        return "line start"
    if _WORD.match(before[-1]):
        return "in word" if line_rest[:1] and _WORD.match(line_rest[0]) else "word end"
    return "after symbol"


def disagreements(run: dict, ms: int) -> list[dict]:
    """The run's cursors where the modes' lines are not all exact or all wrong at ``ms``."""
    rows = []
    for number, case in enumerate(run["per_case"]):
        exact = {
            mode: line_exact(shown_at([(t / 1000, text) for t, text in case[mode]["answers"]], ms), case["line"])
            for mode in MODES if mode in case
        }
        if len(set(exact.values())) > 1:
            rows.append({"number": number, "case": case, "exact": exact})
    return rows


def explain(engine: Engine, prefix: str) -> dict:
    """In process, cold, no budgets or fusion: each mode's first token and text, and cpc's covering paths."""
    chosen = {}
    for mode in MODES:
        engine.clear()
        generation = generate(engine, prefix, options=Options(mode=mode))
        completion = generation.completions[0] if generation.completions else None
        found = first_past_typed(engine, completion) if completion else None
        chosen[mode] = {"first_token": engine.vocab.pieces[found[0]].decode("utf-8", "replace") if found else None,
                        "text": completion.text if completion else ""}
    engine.clear()
    head, middle = prompt_frame(engine, "")
    conditioning = engine.conditioner.condition(prefix, head=head, middle=middle)
    start = len(conditioning.prompt)
    paths = [
        {"tokens": [engine.vocab.pieces[t].decode("utf-8", "replace") for t in path.tokens[start:]],
         "share": round(math.exp(path.logprob - conditioning.logprob), 4)}
        for path in conditioning.paths[:PATHS_SHOWN]
    ]
    return {"chosen": chosen, "tail": conditioning.tail.decode("utf-8", "replace"), "paths": paths}


def table(run: dict, ms: int, engine: Engine, prefixes: list[str]) -> list[dict]:
    """Every disagreement, explained."""
    rows = []
    found = disagreements(run, ms)
    for count, row in enumerate(found, 1):
        case = row["case"]
        prefix = prefixes[row["number"]]
        rows.append({
            "number": row["number"], "file": case["file"], "line": case["line"],
            "cursor": cursor_kind(prefix, case["line"]), "token": case["kind"], "exact": row["exact"],
            **explain(engine, prefix),
        })
        print(f"explained {count}/{len(found)}", file=sys.stderr, flush=True)
    return rows


def summary(rows: list[dict]) -> dict[str, Counter]:
    """Per pair of modes (``cpc>heal``: cpc exact where heal is not), the cursors by kind."""
    pairs: dict[str, Counter] = {}
    for row in rows:
        for first in MODES:
            for second in MODES:
                if first != second and row["exact"].get(first) and row["exact"].get(second) is False:
                    pairs.setdefault(f"{first}>{second}", Counter())[row["cursor"]] += 1
    return pairs


def markdown(rows: list[dict]) -> str:
    lines = ["| # | cursor | token | line | exact | first token cpc / heal / naive | cpc's paths (share of P(tail)) |",
             "|---|---|---|---|---|---|---|"]
    for row in rows:
        exact = " ".join(mode for mode, ok in row["exact"].items() if ok) or "none"
        firsts = _cell(" / ".join(repr(row["chosen"][mode]["first_token"]) for mode in MODES))
        paths = _cell("; ".join("·".join(map(repr, path["tokens"])) + f" {path['share']:.2f}" for path in row["paths"]))
        lines.append(f"| {row['number']} | {row['cursor']} | {row['token']} | `{_cell(row['line'])}` | {exact} | "
                     f"{firsts} | {paths} |")
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", "\\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", help="a bench_server.py --json file")
    parser.add_argument("--ms", type=int, default=1000)
    parser.add_argument("--json")
    parser.add_argument("--markdown")
    args = parser.parse_args()
    run = json.loads(Path(args.run).read_text())
    engine = Engine.load(run["model"])
    prefixes = [case.prefix for case in development_cases(
        engine, run["files"], run["cases"], run["seed"], run["prompt"], run.get("cursors", "identifiers"))]
    rows = table(run, args.ms, engine, prefixes)
    counts = summary(rows)
    for pair, kinds in sorted(counts.items()):
        print(f"{pair}: {sum(kinds.values())} ({', '.join(f'{k} {n}' for k, n in kinds.most_common())})")
    if args.json:
        Path(args.json).write_text(json.dumps({"ms": args.ms, "summary": counts, "rows": rows}, indent=1))
    if args.markdown:
        Path(args.markdown).write_text(markdown(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
