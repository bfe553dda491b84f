"""``python -m harness.bench``: does the cursor position still matter? Completion quality on real code.

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

Prompts are ``long`` (up to `CONTEXT_CHARS` before the cursor: the engine's
whole prompt window) or ``short`` (whole lines, at most `SHORT_PROMPT_TOKENS`
of the model's tokens: a small file, where a shared prefill cannot hide
the extra model calls), on the same cursors.

With fusion weights (``python -m harness.bench --fusion``, the server's
default), every mode fuses the case's own file into its token choices, as
the server fuses an open document (`cpc.fusion`): the file up to the
cursor's line, so that nothing at or after the cursor is known. The time to make the fusion object
counts in the request's latency.
"""

from __future__ import annotations

import random
import re
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from cpc.draft import DraftParameters
from cpc.engine import Engine
from cpc.fusion import Fusion, FusionWeights, ProjectCorpus
from cpc.generate import Completion, Generation, Options, generate
from cpc.tokenizer import Tokenizer
from harness.bench.report import LATENCY_COLUMNS, grouped_bars, print_rows, pyplot, ratio
from harness.bench.sources import expand

KINDS = ("boundary", "inside")
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{3,}")
WORD_CHARS = re.compile(r"[A-Za-z0-9_]*")
CONTEXT_CHARS = 6000
SHORT_PROMPT_TOKENS = 300
PROMPTS = ("long", "short")


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
    document: str = field(default="", repr=False)
    """The file up to the cursor's line: what fusion may read of the open document."""
    suffix: str = ""
    """The text after the cursor in the editor: the closers its auto-closed pairs hold (`harness.bench.closers`);
    ``line_rest`` is then what the line holds after the cursor once a suggestion is accepted."""



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
        prefix, word_rest, line_rest = around_cursor(source, cursor, word.end())
        line_end = cursor + len(source[cursor:].partition("\n")[0])
        start = cursor - len(prefix)
        kind = _kind(engine, source[start:line_end], cursor - start)
        if wanted[kind]:
            wanted[kind] -= 1
            document = source[: source.rfind("\n", 0, cursor) + 1]
            cases.append(Case(str(path), prefix, word_rest, line_rest, kind, document))
    raise ValueError(f"found only {len(cases)} of {count} cases: use more files")


def in_its_line(case: Case) -> Case:
    """The same cursor with the rest of its line after the identifier still after it: a word retyped inside an
    existing line (``f(sel|, x)``), where only the rest of the word is missing.

    >>> in_its_line(Case("f.py", "f(sel", "f", "f, x)", "inside")).suffix
    ', x)'
    """
    return replace(case, suffix=case.line_rest[len(case.word_rest):])


def inside_its_word(case: Case, missing: int) -> Case:
    """The same cursor with the rest of its line after it, the word's next ``missing`` characters left out: a word
    retyped in its middle (``pr|nt(x)``, a letter missing), or whole (``missing`` 0: the last missing letter
    just typed, nothing left to add). The right suggestion writes the missing characters, or nothing.

    >>> inside_its_word(Case("f.py", "    pr", "int", "int(x)", "inside"), 1).suffix
    'nt(x)'
    """
    return replace(case, suffix=case.line_rest[missing:])


def around_cursor(source: str, cursor: int, word_end: int) -> tuple[str, str, str]:
    """What a case holds of ``source`` with the cursor at ``cursor`` inside a word ending at ``word_end``:
    the text before the cursor (at most `CONTEXT_CHARS`), the rest of the word, and the rest of the line
    without trailing blanks."""
    line_rest = source[cursor:].partition("\n")[0]
    return source[max(0, cursor - CONTEXT_CHARS) : cursor], source[cursor:word_end], line_rest.rstrip()


def shorten(tokenizer: Tokenizer, prefix: str, max_tokens: int = SHORT_PROMPT_TOKENS) -> str:
    """The last whole lines of ``prefix`` (and the cursor's line) that come to at most ``max_tokens`` tokens.

    The cursor's line is kept whole even when it alone is longer.

    >>> from cpc.tokenizer import TiktokenTokenizer
    >>> shorten(TiktokenTokenizer(), "a = 1\\nb = 2\\nc = b", max_tokens=10)
    'b = 2\\nc = b'
    """
    starts = [0] + [k + 1 for k, char in enumerate(prefix) if char == "\n"]

    def fits(start: int) -> bool:
        return len(tokenizer.encode(prefix[start:].encode("utf-8"))) <= max_tokens

    low, high = 0, len(starts) - 1  # the first line start whose text fits (the last one always counts)
    while low < high:
        middle = (low + high) // 2
        if fits(starts[middle]):
            high = middle
        else:
            low = middle + 1
    return prefix[starts[low] :]


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
    drafted: int = 0
    accepted: int = 0


def complete_case(
    engine: Engine, case: Case, mode: str, max_tokens: int, document: ProjectCorpus | None = None,
    weights: FusionWeights = FusionWeights(), drafts: DraftParameters = DraftParameters(),
) -> Outcome:
    """One cold request, scored against the file; with ``document`` (`document_corpus`), fused."""
    started = time.perf_counter()
    fusion = document.fusion(document_key(case), weights) if document is not None else None
    fusion_ms = (time.perf_counter() - started) * 1000
    generation = cold_generate(engine, case.prefix, Options(mode=mode, max_tokens=max_tokens, drafts=drafts), fusion)
    text = first_text(generation)
    return Outcome(
        kind=case.kind,
        word_exact=word_exact(text, case.word_rest),
        line_exact=line_exact(text, case.line_rest),
        ms=generation.elapsed_ms + fusion_ms,
        lm_calls=generation.lm_calls,
        text=text,
        drafted=generation.drafted,
        accepted=generation.accepted,
    )


def document_key(case: Case) -> str:
    """The key of a case's file in its `document_corpus`: its extension tells fusion the file's syntax."""
    return f"file:///case{Path(case.file).suffix}"


def document_corpus(engine: Engine, case: Case) -> ProjectCorpus:
    """A corpus that holds the case's file up to the cursor's line as its one open document."""
    corpus = ProjectCorpus(engine.tokenizer)
    corpus.update_document(document_key(case), case.document)
    return corpus


def cold_generate(engine: Engine, prefix: str, options: Options, fusion: Fusion | None = None) -> Generation:
    """One request from cold caches (KV cache, snapshots, beams) at the end of ``prefix`` (no text after it)."""
    engine.clear()
    return generate(engine, prefix, options=options, fusion=fusion)


def first_text(generation: Generation) -> str:
    """The best completion's text ("" when the model offered none)."""
    return generation.completions[0].text if generation.completions else ""


def first_past_typed(engine: Engine, completion: Completion) -> tuple[int, bytes] | None:
    """The completion's first token that goes past the typed bytes it re-reads (for cpc, the covering path's
    last token, which may reach past the cursor), and its bytes past them; None when no token does."""
    covered = 0
    for token in completion.tokens:
        piece = engine.vocab.pieces[token]
        if covered + len(piece) > len(completion.typed):
            return token, piece[len(completion.typed) - covered :]
        covered += len(piece)
    return None


def word_exact(text: str, word_rest: str, word_chars: re.Pattern = WORD_CHARS) -> bool:
    """The completion finishes the identifier exactly."""
    return word_chars.match(text).group() == word_rest


def line_exact(text: str, line_rest: str) -> bool:
    """The completion is exactly the rest of the line (trailing blanks aside)."""
    return text.rstrip() == line_rest


def summarise(outcomes: list, rates: tuple[str, ...] = ("word_exact", "line_exact")) -> dict:
    """``n``, the share of outcomes where each boolean field in ``rates`` holds, and latency
    (``p50_ms``, ``p95_ms``) and model calls per request, from objects with ``ms`` and ``lm_calls`` (and
    draft tokens checked and accepted per request, from those with ``drafted`` and ``accepted``)."""
    if not outcomes:
        return {"n": 0}
    times = sorted(o.ms for o in outcomes)
    return {
        "n": len(outcomes),
        **{name: round(sum(bool(getattr(o, name)) for o in outcomes) / len(outcomes), 4) for name in rates},
        "p50_ms": round(statistics.median(times), 1),
        "p95_ms": round(times[min(len(times) - 1, round(0.95 * (len(times) - 1)))], 1),
        "lm_calls": round(statistics.mean(o.lm_calls for o in outcomes), 2),
    } | ({
        "drafted": round(statistics.mean(o.drafted for o in outcomes), 2),
        "accepted": round(statistics.mean(o.accepted for o in outcomes), 2),
    } if hasattr(outcomes[0], "drafted") else {})


def run(
    engine: Engine,
    pattern: str,
    cases: int,
    seed: int,
    modes: list[str],
    max_tokens: int = 48,
    progress: Callable[[str, float], None] | None = None,
    prompt: str = "long",
    fusion: FusionWeights | None = None,
    drafts: DraftParameters = DraftParameters(),
) -> dict:
    """The whole benchmark: the ``--json`` object of ``python -m harness.bench``; with ``fusion``, every mode fused."""
    if prompt not in PROMPTS:
        raise ValueError(f"unknown prompt length {prompt!r}: choose one of {', '.join(PROMPTS)}")
    report = progress or (lambda message, fraction: None)
    drawn = draw_cases(engine, expand(pattern), cases, seed)
    if prompt == "short":
        drawn = [replace(case, prefix=shorten(engine.tokenizer, case.prefix)) for case in drawn]
    outcomes: dict[str, list[Outcome]] = {mode: [] for mode in modes}
    for number, case in enumerate(drawn):
        document = document_corpus(engine, case) if fusion is not None else None
        for mode in modes:
            outcomes[mode].append(complete_case(engine, case, mode, max_tokens, document, fusion or FusionWeights(), drafts))
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
        "prompt": prompt,
        "fusion": asdict(fusion) if fusion is not None else None,
        "drafts": asdict(drafts),
        "prompt_tokens_p50": statistics.median(len(engine.tokenizer.encode(c.prefix.encode("utf-8"))) for c in drawn),
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
    """The comparisons the benchmark exists for, where the modes they compare were run (latency: median over
    all cases): cpc inside a token against cpc at a boundary and against heal, cpc's latency against naive's."""
    checks = {}
    if "cpc" in results:
        cpc = results["cpc"]
        checks["cpc_inside_over_boundary"] = ratio(cpc["inside"].get("word_exact"), cpc["boundary"].get("word_exact"))
        if "naive" in results:
            naive = results["naive"]
            checks["cpc_minus_naive_boundary"] = round(
                cpc["boundary"].get("word_exact", 0) - naive["boundary"].get("word_exact", 0), 4
            )
            for quantile in ("p50", "p95"):
                checks[f"cpc_{quantile}_over_naive_{quantile}"] = ratio(
                    overall["cpc"].get(f"{quantile}_ms"), overall["naive"].get(f"{quantile}_ms")
                )
                for kind in KINDS:
                    checks[f"cpc_{quantile}_over_naive_{quantile}_{kind}"] = ratio(
                        cpc[kind].get(f"{quantile}_ms"), naive[kind].get(f"{quantile}_ms")
                    )
        if "heal" in results:
            checks["cpc_minus_heal_inside"] = round(
                cpc["inside"].get("word_exact", 0) - results["heal"]["inside"].get("word_exact", 0), 4
            )
    return checks



def plot(result: dict, path: str) -> None:
    """Word-exact per mode and kind, and median latency per mode, side by side."""
    plt = pyplot()
    modes = list(result["results"])
    fig, (quality, latency) = plt.subplots(1, 2, figsize=(11, 4.5), gridspec_kw={"width_ratios": [3, 2]})
    colors = {"boundary": "#4c72b0", "inside": "#dd8452"}
    grouped_bars(
        quality, modes, {kind: [100 * result["results"][m][kind].get("word_exact", 0) for m in modes] for kind in KINDS},
        colors=colors, label_format="%.0f%%",
    )
    quality.set_ylim(0, 105)
    quality.set_ylabel("identifier completed exactly (%)")
    quality.set_title("word-exact: cursor on a token boundary vs inside a token")
    quality.legend(title="cursor")
    grouped_bars(
        latency, modes, {kind: [result["results"][m][kind].get("p50_ms", 0) for m in modes] for kind in KINDS},
        colors=colors,
    )
    latency.set_ylabel("median ms per cold request")
    latency.set_title("latency")
    fig.suptitle(f"{result['model']}: {result['cases']} cursors in {Path(result['files']).name} (seed {result['seed']}), "
                 f"{result.get('prompt', 'long')} prompts{', fused' if result.get('fusion') else ''}")
    fig.tight_layout()
    fig.savefig(path, dpi=120)



def print_table(result: dict, stream=None) -> None:
    stream = stream or sys.stdout
    prompt = f", {result['prompt']} prompts (p50 {result['prompt_tokens_p50']:.0f} tokens)" if "prompt" in result else ""
    fused = ", every mode fused with its file" if result.get("fusion") else ""
    print(f"{result['model']}: {result['cases']} cases from {result['files']} (seed {result['seed']}){prompt}{fused}",
          file=stream)
    rows = [
        {"mode": mode, "kind": kind, **row}
        for mode, by_kind in result["results"].items()
        for kind, row in by_kind.items()
        if row["n"]
    ]
    print_rows(rows, [("mode", "mode", "{:6}"), ("kind", "kind", "{:9}"), ("n", "n", "{:3d}"),
                      ("word_exact", "word", "{:6.0%}"), ("line_exact", "line", "{:6.0%}"), *LATENCY_COLUMNS],
               stream)
    for name, value in result["acceptance"].items():
        print(f"{name}: {value}", file=stream)


