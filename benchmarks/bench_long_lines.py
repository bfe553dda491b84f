"""Lines and files no one types by hand, through the real server: a minified bundle, a long literal, 3 MB of code.

    python benchmarks/bench_long_lines.py [--keys 5] [--timeout-s 120] [--json OUT] [--plot OUT.png]

Editors open such files all the time: a bundle whose code is one line, a
sequence or hash pasted as a string, a comment in Chinese (no space, and here
no punctuation either: one pre-token chunk), an ASCII-art divider, a generated
module of megabytes. Each becomes a document of its own (`DOCUMENTS`, made
here, the same on every run), opened in a headless editor (`harness.headless`)
against ``cpc-lsp`` with its shipping defaults; the cursor is at its end,
one key is typed at once and then ``--keys`` more, each waiting for its
answer (what the editor shows first: an early first word counts). Reported
per document:

- ``first_ms``: the first key's answer, the file just opened (cold);
- ``key_ms``: the p50 of the next keys' answers;
- ``status_ms``: the slowest answer to ``cpc/status`` asked every 50 ms
  meanwhile: how long the server's event loop was held (a slow one holds
  every editor request, a cancellation included);
- ``failed``: requests answered with an error, or not within ``--timeout-s``.

A normal file (the end of the standard library's ``argparse.py``) is measured beside them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.bench.sources import expand, npm_root, stdlib_dir  # noqa: E402
from harness.headless import HeadlessEditor  # noqa: E402

STATUS_EVERY_S = 0.05


def minified(size: int) -> str:
    """npm's own JavaScript with its line breaks and indentation taken out: a bundle's one line."""
    parts, total = [], 0
    for path in sorted(expand(f"{npm_root()}/npm/lib/**/*.js")):
        code = " ".join(line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip())
        parts.append(code)
        total += len(code)
        if total >= size:
            break
    return ";".join(parts)[:size]


CHINESE = ("派森语言是一种功能强大而完善的通用型计算机程序设计语言已经具有十多年的发展历史成熟且稳定这种语言具有非常简捷而"
           "清晰的语法特点适合完成各种高层任务几乎可以在所有的操作系统中运行这种语言简单而强大适合各种人士学习使用目前基于"
           "这种语言的相关技术正在飞速的发展用户数量急剧扩大相关的资源非常多")
"""Chinese prose with its punctuation taken out, one pre-token chunk however long (the standard library's
``test/cjkencodings/gb2312-utf8.txt``)."""


def modules(size: int) -> str:
    """The standard library's modules one after another, ``size`` characters: a generated module's many lines."""
    parts, total = [], 0
    for path in sorted(Path(stdlib_dir()).glob("*.py")):
        parts.append(path.read_text(encoding="utf-8", errors="replace"))
        total += len(parts[-1])
        if total >= size:
            break
    return "".join(parts)[:size]


def documents() -> dict[str, tuple[str, str]]:
    """Name: (file name, text), the cursor at the end. Random text from a fixed seed."""
    rng = random.Random(1)
    chinese = CHINESE * (3000 // len(CHINESE) + 1)
    return {
        "normal file (argparse.py)": ("argparse.py", (Path(stdlib_dir()) / "argparse.py").read_text()[:60_000]),
        "minified bundle, 300 KB": ("bundle.min.js", minified(300_000)),
        "DNA sequence literal": ("seq.py", 'SEQUENCE = "' + "".join(rng.choice("ACGT") for _ in range(20_000))),
        "Chinese comment, 120 characters": ("note.py", "def f():\n    # " + chinese[:120]),
        "Chinese comment, 3,000 characters": ("notes.py", "# " + chinese[:3000]),
        "divider of '='": ("banner.py", "# " + "=" * 3000),
        "emoji string": ("emoji.py", 's = "' + "😀" * 3000),
        "trailing spaces": ("spaces.py", "x = 1" + " " * 20_000),
        "generated module, 3 MB": ("generated.py", modules(3_000_000)),
    }


async def measure(editor: HeadlessEditor, uri: str, text: str, keys: int, timeout_s: float) -> dict:
    """Open ``text`` and type at its end: each answer's time, the slowest ``cpc/status`` meanwhile."""
    slowest_status, running = 0.0, True

    async def ask_status() -> None:
        nonlocal slowest_status
        while running:
            started = time.perf_counter()
            await editor.status()
            slowest_status = max(slowest_status, time.perf_counter() - started)
            await asyncio.sleep(STATUS_EVERY_S)

    await editor.open(uri, text)
    watcher = asyncio.ensure_future(ask_status())
    times: list[float | None] = []  # None: failed
    shown = ""
    for _ in range(keys + 1):
        editor.type(text[-1])
        started = time.perf_counter()
        try:
            # shielded: a request given up on is answered later all the same, to a future still waiting for it
            shown = await asyncio.wait_for(asyncio.shield(editor.suggest()), timeout_s)
            times.append(time.perf_counter() - started)
        except Exception:  # noqa: BLE001 - an error answer or a timeout: counted, the next key goes on
            times.append(None)
    running = False
    await watcher
    editor.close()
    later = [seconds for seconds in times[1:] if seconds is not None]
    return {
        "first_ms": round(1000 * times[0]) if times[0] is not None else None,
        "key_ms": round(1000 * statistics.median(later)) if later else None,
        "status_ms": round(1000 * slowest_status),
        "failed": times.count(None),
        "last_shown": shown[:40],
    }


async def run(keys: int, timeout_s: float, model: str, only: str = "") -> dict:
    """Each document (those whose name holds ``only``) through the server, one after another."""
    rows = {}
    async with HeadlessEditor(["--model", model]) as editor:
        await editor.wait_until_ready()
        for name, (file_name, text) in documents().items():
            if only not in name:
                continue
            rows[name] = await measure(editor, f"file:///tmp/long-lines/{file_name}", text, keys, timeout_s)
            rows[name]["characters"] = len(text)
            print(f"{name:28} {rows[name]}", flush=True)
    return {"keys": keys, "timeout_s": timeout_s, "model": model, "documents": rows}


def print_table(result: dict) -> None:
    print(f"\n{'document':28} {'chars':>8} {'first key ms':>12} {'key p50 ms':>10} {'status max ms':>13} {'failed':>6}")
    for name, row in result["documents"].items():
        cells = [row["characters"], row["first_ms"], row["key_ms"], row["status_ms"], row["failed"]]
        print(f"{name:28} " + " ".join(f"{'-' if cell is None else cell:>{width}}"
                                       for cell, width in zip(cells, (8, 12, 10, 13, 6))))


def plot(results: dict[str, dict], path: str) -> None:
    """Per document, one bar per run (log scale): the first key's answer, the next keys', the event loop's
    longest hold. A document whose requests failed is drawn at the run's timeout."""
    from harness.bench.report import grouped_bars, pyplot

    plt = pyplot()
    names = list(next(iter(results.values()))["documents"])
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.8))
    panels = (("first_ms", "the first key, the file just opened (ms)"), ("key_ms", "the next keys, p50 (ms)"),
              ("status_ms", "cpc/status meanwhile: the longest wait (ms)"))
    for axis, (field, title) in zip(axes, panels):
        series = {label: [result["documents"][name][field] or result["timeout_s"] * 1000 for name in names]
                  for label, result in results.items()}
        grouped_bars(axis, names, series, label_format="{:.0f}")
        axis.set_yscale("log")
        axis.set_title(title, fontsize=10)
        axis.set_xticks(range(len(names)), [name.replace(" (", "\n(").replace(", ", "\n") for name in names],
                        fontsize=7, rotation=30, ha="right")
    axes[2].legend(fontsize=8, title="(failed: drawn at the timeout)", title_fontsize=7, loc="upper right")
    fig.suptitle("Lines no one types by hand, through cpc-lsp with its shipping defaults", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="default")
    parser.add_argument("--keys", type=int, default=5, help="keys typed after the first")
    parser.add_argument("--timeout-s", type=float, default=120)
    parser.add_argument("--only", default="", help="the documents whose name holds this")
    parser.add_argument("--json")
    parser.add_argument("--plot")
    parser.add_argument("--compare", nargs="*", metavar="LABEL=JSON", default=[],
                        help="earlier runs drawn beside this one (or alone with --show)")
    parser.add_argument("--show", action="store_true", help="plot the --compare runs only")
    args = parser.parse_args()
    results = {label: json.loads(Path(file).read_text())
               for label, file in (item.split("=", 1) for item in args.compare)}
    if not args.show:
        result = asyncio.run(run(args.keys, args.timeout_s, args.model, args.only))
        if args.json:
            Path(args.json).write_text(json.dumps(result, indent=1))
        results["this run"] = result
    for label, result in results.items():
        print(f"\n{label}:")
        print_table(result)
    if args.plot:
        plot(results, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
