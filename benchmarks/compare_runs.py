"""Two versions of the server on the same cursors: `bench_server.py` runs side by side, as ratios and a plot.

Run `bench_server.py` with the same arguments from two checkouts (a git
worktree of the older commit; the cursors are drawn the same), alternating
them, then compare: per mode, the whole line's arrival (the last answer,
p50 over cursors, then the median over a side's runs), what is on screen
at each moment, and how many final texts differ.

    $ git worktree add /tmp/before REV && ln -s "$PWD/.venv" /tmp/before/.venv
    $ (cd /tmp/before && .venv/bin/python benchmarks/bench_server.py --modes cpc,naive --engine-later --json /tmp/b1.json)
    $ .venv/bin/python benchmarks/bench_server.py --modes cpc,naive --engine-later --json /tmp/a1.json
    $ .venv/bin/python benchmarks/compare_runs.py --before /tmp/b1.json --after /tmp/a1.json --plot out/compare.png
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

FIGURES = ("word_exact", "line_exact")


def load(paths: str) -> list[dict]:
    """Comma-separated JSON files of `bench_server.py` runs of one version."""
    return [json.loads(Path(path).read_text()) for path in paths.split(",")]


def arrivals(run: dict, mode: str) -> list[float]:
    """When each cursor's last answer came (ms after its key); infinity where none came."""
    return [row[mode]["answers"][-1][0] if row[mode]["answers"] else float("inf") for row in run["per_case"]]


def compare(before: list[dict], after: list[dict]) -> dict:
    """Per mode: the medians over each side's runs, and after over before.

    >>> run = lambda ms, text: {"server": {"cpc": {"last_answer_p50_ms": ms, "250ms": {"word_exact": .5,
    ...     "line_exact": .2}}}, "moments_ms": [250], "per_case": [{"word": "x", "cpc": {"answers": [[ms, text]]}}]}
    >>> compare([run(200.0, "a")], [run(150.0, "b")])["cpc"]["whole_line_p50_ms"]
    {'before': 200.0, 'after': 150.0, 'ratio': 0.75}
    """
    cursors = [[row["word"] for row in run["per_case"]] for run in before + after]
    if any(words != cursors[0] for words in cursors):
        raise SystemExit("the runs are not of the same cursors: run bench_server.py with the same arguments")
    table: dict = {}
    for mode in before[0]["server"]:
        def side(runs: list[dict], figure) -> float:
            return statistics.median(figure(run["server"][mode]) for run in runs)

        rows = {"whole_line_p50_ms": lambda s: s["last_answer_p50_ms"]}
        for ms in before[0]["moments_ms"]:
            for name in FIGURES:
                rows[f"{name}_{ms}ms"] = lambda s, ms=ms, name=name: 100 * s[f"{ms}ms"][name]
        table[mode] = {}
        for name, figure in rows.items():
            old, new = side(before, figure), side(after, figure)
            table[mode][name] = {"before": round(old, 1), "after": round(new, 1),
                                 "ratio": round(new / old, 3) if old else None}
        finals = [[row[mode]["answers"][-1][1] if row[mode]["answers"] else "" for row in run["per_case"]]
                  for run in (before[0], after[0])]
        table[mode]["texts_differ"] = sum(a != b for a, b in zip(*finals))
    return table


def plot(before: list[dict], after: list[dict], path: str, labels: tuple[str, str] = ("before", "after")) -> None:
    """Per mode, before and after: the share of cursors whose whole line is on screen against the time after the
    key (above), and line exact on screen at each moment (below)."""
    from harness.bench.report import pyplot

    plt = pyplot()
    modes = list(before[0]["server"])
    fig, axes = plt.subplots(2, len(modes), figsize=(5.5 * len(modes), 7), squeeze=False)
    for column, mode in enumerate(modes):
        arrived, exact = axes[0][column], axes[1][column]
        for runs, label, color in ((before, labels[0], "#999999"), (after, labels[1], "#4c72b0")):
            for number, run in enumerate(runs):
                times = sorted(arrivals(run, mode))
                width, name = (1.5, label) if number == 0 else (0.8, None)
                arrived.step(times, [100 * (k + 1) / len(times) for k in range(len(times))], where="post",
                             color=color, lw=width, label=name)
                moments = run["moments_ms"]
                exact.plot(moments, [100 * run["server"][mode][f"{ms}ms"]["line_exact"] for ms in moments],
                           marker="o", color=color, lw=width, label=name)
        arrived.axvline(250, color="#cccccc", ls=":", lw=1)
        arrived.set_xlim(0, 600)
        arrived.set_xlabel("ms after the key")
        arrived.set_title(f"{mode}: the whole line has arrived")
        exact.set_xscale("log")
        exact.minorticks_off()
        exact.set_xticks(before[0]["moments_ms"], [str(ms) for ms in before[0]["moments_ms"]])
        exact.set_ylim(bottom=0)
        exact.set_xlabel("ms after the key")
        exact.set_title(f"{mode}: line exact on screen")
        for axis in (arrived, exact):
            axis.legend(loc="lower right")
    axes[0][0].set_ylabel("% of cursors")
    axes[1][0].set_ylabel("% of cursors")
    files = ", ".join(Path(pattern).name for pattern in before[0]["files"].split(","))
    fig.suptitle(f"{before[0]['cases']} cursors ({before[0].get('cursors', 'identifiers')}) of {files}, through cpc-lsp",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", required=True, help="bench_server.py JSON files of the older version, comma-separated")
    parser.add_argument("--after", required=True, help="the same of the newer version")
    parser.add_argument("--json")
    parser.add_argument("--plot")
    parser.add_argument("--labels", default="before,after", help="the two versions' names in the plot")
    args = parser.parse_args()
    before, after = load(args.before), load(args.after)
    table = compare(before, after)
    print(f"{'mode':6} {'figure':22} {'before':>8} {'after':>8} {'ratio':>6}")
    for mode, rows in table.items():
        for name, row in rows.items():
            if name != "texts_differ":
                print(f"{mode:6} {name:22} {row['before']:>8} {row['after']:>8} {row['ratio'] or '':>6}")
        print(f"{mode:6} final texts that differ (first runs): {rows['texts_differ']} of {before[0]['cases']}")
    if args.json:
        Path(args.json).write_text(json.dumps(table, indent=1))
    if args.plot:
        plot(before, after, args.plot, tuple(args.labels.split(",", 1)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
