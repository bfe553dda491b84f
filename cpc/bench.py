"""``cpc bench``: does the cursor position still matter? Completion quality on real code.

Cursor positions are drawn from real source files (by default the Python
standard library of the running interpreter: code nobody here wrote),
strictly inside an identifier, and sorted by the model's canonical
tokenization of the surrounding text into ``boundary`` (a token ends at the
cursor) and ``inside`` (the cursor cuts a token). Half the cases are of
each kind. Every mode completes every case from cold caches (KV cache,
snapshots, beams), single-line and without the suffix, so the rest of the
identifier has to come from the model.

Per mode and kind: ``word_exact`` (the completion finishes the identifier
exactly), ``line_exact`` (it is exactly the rest of the line), median and
95th-percentile latency, and model calls per request.
"""

from __future__ import annotations

import glob
import random
import re
import statistics
import sys
import sysconfig
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from cpc.engine import Engine
from cpc.generate import Options, generate

KINDS = ("boundary", "inside")
STDLIB = "<stdlib>"
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{3,}")
WORD_CHARS = re.compile(r"[A-Za-z0-9_]*")
CONTEXT_CHARS = 6000


@dataclass(frozen=True)
class Case:
    file: str
    prefix: str
    """The text before the cursor (at most `CONTEXT_CHARS`)."""
    word_rest: str
    """The rest of the identifier after the cursor."""
    line_rest: str
    """The rest of the line after the cursor, without trailing blanks."""
    kind: str


def expand(pattern: str) -> list[Path]:
    """Files matching ``pattern`` (``**`` recursive; ``<stdlib>`` is this interpreter's standard library)."""
    pattern = pattern.replace(STDLIB, sysconfig.get_paths()["stdlib"])
    return sorted(Path(name) for name in glob.glob(pattern, recursive=True) if Path(name).is_file())


def draw_cases(engine: Engine, files: list[Path], count: int, seed: int) -> list[Case]:
    """``count`` cursors strictly inside identifiers, half on a token boundary and half inside a token."""
    if not files:
        raise ValueError("no source files match the pattern")
    rng = random.Random(seed)
    wanted = {"boundary": count // 2, "inside": count - count // 2}
    cases: list[Case] = []
    sources: dict[Path, tuple[str, list[re.Match]]] = {}
    for _ in range(count * 200):
        if not any(wanted.values()):
            return cases
        path = rng.choice(files)
        if path not in sources:
            text = path.read_text(encoding="utf-8", errors="replace")
            sources[path] = (text, list(IDENTIFIER.finditer(text)))
        source, words = sources[path]
        if not words:
            continue
        word = rng.choice(words)
        cursor = rng.randrange(word.start() + 1, word.end())
        start = max(0, cursor - CONTEXT_CHARS)
        line_end = source.find("\n", cursor)
        line_end = len(source) if line_end < 0 else line_end
        kind = _kind(engine, source[start:line_end], cursor - start)
        if wanted[kind]:
            wanted[kind] -= 1
            cases.append(
                Case(
                    file=str(path),
                    prefix=source[start:cursor],
                    word_rest=source[cursor : word.end()],
                    line_rest=source[cursor:line_end].rstrip(),
                    kind=kind,
                )
            )
    raise ValueError(f"found only {len(cases)} of {count} cases: use more files")


def _kind(engine: Engine, text: str, cursor: int) -> str:
    """``boundary`` when the canonical tokens of ``text`` have a boundary at character ``cursor``."""
    data = text.encode("utf-8")
    target = len(text[:cursor].encode("utf-8"))
    pieces = engine.vocab.pieces
    offset = 0
    for token in engine.tokenizer.encode(data):
        offset += len(pieces[token])
        if offset >= target:
            return "boundary" if offset == target else "inside"
    return "boundary"


@dataclass(frozen=True)
class Outcome:
    kind: str
    word_exact: bool
    line_exact: bool
    ms: float
    lm_calls: int
    text: str


def complete_case(engine: Engine, case: Case, mode: str, max_tokens: int) -> Outcome:
    """One cold request, scored against the file."""
    engine.conditioner.clear()
    generation = generate(engine, case.prefix, "", Options(mode=mode, max_tokens=max_tokens))
    text = generation.completions[0].text if generation.completions else ""
    return Outcome(
        kind=case.kind,
        word_exact=WORD_CHARS.match(text).group() == case.word_rest,
        line_exact=text.rstrip() == case.line_rest,
        ms=generation.elapsed_ms,
        lm_calls=generation.lm_calls,
        text=text,
    )


def summarise(outcomes: list[Outcome]) -> dict:
    if not outcomes:
        return {"n": 0}
    times = sorted(o.ms for o in outcomes)
    return {
        "n": len(outcomes),
        "word_exact": round(sum(o.word_exact for o in outcomes) / len(outcomes), 4),
        "line_exact": round(sum(o.line_exact for o in outcomes) / len(outcomes), 4),
        "p50_ms": round(statistics.median(times), 1),
        "p95_ms": round(times[min(len(times) - 1, round(0.95 * (len(times) - 1)))], 1),
        "lm_calls": round(statistics.mean(o.lm_calls for o in outcomes), 2),
    }


def run(
    engine: Engine,
    pattern: str,
    cases: int,
    seed: int,
    modes: list[str],
    max_tokens: int = 48,
    progress: Callable[[str, float], None] | None = None,
) -> dict:
    """The whole benchmark: the ``--json`` object of ``cpc bench``."""
    report = progress or (lambda message, fraction: None)
    drawn = draw_cases(engine, expand(pattern), cases, seed)
    outcomes: dict[str, list[Outcome]] = {mode: [] for mode in modes}
    for number, case in enumerate(drawn):
        for mode in modes:
            outcomes[mode].append(complete_case(engine, case, mode, max_tokens))
        report(f"case {number + 1}/{len(drawn)} ({case.kind})", (number + 1) / len(drawn))
    results = {
        mode: {kind: summarise([o for o in rows if o.kind == kind]) for kind in KINDS}
        for mode, rows in outcomes.items()
    }
    overall = {mode: summarise(rows) for mode, rows in outcomes.items()}
    return {
        "model": engine.vocab.name,
        "files": pattern,
        "cases": len(drawn),
        "seed": seed,
        "results": results,
        "overall": overall,
        "acceptance": acceptance(results, overall),
        "per_case": [
            {"file": case.file, "kind": case.kind, "expected": case.word_rest, "line": case.line_rest}
            | {mode: asdict(outcomes[mode][k]) for mode in modes}
            for k, case in enumerate(drawn)
        ],
    }


def acceptance(results: dict, overall: dict) -> dict:
    """Issue 4's targets, where the modes they compare were run (latency: median over all cases)."""
    checks = {}
    if "cpc" in results:
        cpc = results["cpc"]
        checks["cpc_inside_over_boundary"] = _ratio(cpc["inside"].get("word_exact"), cpc["boundary"].get("word_exact"))
        if "naive" in results:
            naive = results["naive"]
            checks["cpc_minus_naive_boundary"] = round(
                cpc["boundary"].get("word_exact", 0) - naive["boundary"].get("word_exact", 0), 4
            )
            checks["cpc_p50_over_naive_p50"] = _ratio(overall["cpc"].get("p50_ms"), overall["naive"].get("p50_ms"))
        if "heal" in results:
            checks["cpc_minus_heal_inside"] = round(
                cpc["inside"].get("word_exact", 0) - results["heal"]["inside"].get("word_exact", 0), 4
            )
    return checks


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a is not None and b else None


def plot(result: dict, path: str) -> None:
    """Word-exact per mode and kind, and median latency per mode, side by side."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    modes = list(result["results"])
    fig, (quality, latency) = plt.subplots(1, 2, figsize=(11, 4.5), gridspec_kw={"width_ratios": [3, 2]})
    width = 0.38
    colors = {"boundary": "#4c72b0", "inside": "#dd8452"}
    for offset, kind in zip((-width / 2, width / 2), KINDS):
        values = [100 * result["results"][m][kind].get("word_exact", 0) for m in modes]
        bars = quality.bar([k + offset for k in range(len(modes))], values, width, label=kind, color=colors[kind])
        quality.bar_label(bars, fmt="%.0f%%", fontsize=9)
    quality.set_xticks(range(len(modes)), modes)
    quality.set_ylim(0, 105)
    quality.set_ylabel("identifier completed exactly (%)")
    quality.set_title("word-exact: cursor on a token boundary vs inside a token")
    quality.legend(title="cursor")
    for offset, kind in zip((-width / 2, width / 2), KINDS):
        values = [result["results"][m][kind].get("p50_ms", 0) for m in modes]
        latency.bar([k + offset for k in range(len(modes))], values, width, color=colors[kind])
    latency.set_xticks(range(len(modes)), modes)
    latency.set_ylabel("median ms per cold request")
    latency.set_title("latency")
    fig.suptitle(f"{result['model']}: {result['cases']} cursors in {Path(result['files']).name} (seed {result['seed']})")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def print_table(result: dict, stream=sys.stdout) -> None:
    print(f"{result['model']}: {result['cases']} cases from {result['files']} (seed {result['seed']})", file=stream)
    print(f"{'mode':6} {'kind':9} {'n':>3} {'word':>6} {'line':>6} {'p50 ms':>8} {'p95 ms':>8} {'calls':>6}", file=stream)
    for mode, by_kind in result["results"].items():
        for kind, row in by_kind.items():
            if row["n"]:
                print(
                    f"{mode:6} {kind:9} {row['n']:3d} {row['word_exact']:6.0%} {row['line_exact']:6.0%} "
                    f"{row['p50_ms']:8.0f} {row['p95_ms']:8.0f} {row['lm_calls']:6.1f}",
                    file=stream,
                )
    for name, value in result["acceptance"].items():
        print(f"{name}: {value}", file=stream)
