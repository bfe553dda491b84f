"""How often `cpc.syntax` reads a word's place (code or prose) otherwise than a whole-file lexer does.

    python benchmarks/syntax_agreement.py --files '/usr/src/rustc-1.63.0/library/**/*.rs' [--json OUT]

The identifier model judges a word by its place (`cpc.syntax.Place`): in
code it is a name, in a comment or a string it is prose. `Place` reads a
text as it is written, in pieces, with no parser; the benchmark's own
lexers (`harness.bench.sources`: one regular expression over a whole file)
see each string and comment from its start to its end. At each
identifier's first byte of each file, read on piece by piece from the
identifier before (as the decoder reads a suggestion), the two readings
are compared. A character literal counts as code (Rust: ``'x'``, opened
and closed within a few bytes, where a prefix cannot tell it from a
lifetime), and so do a string's prefix letters (``b"``, ``r#"``, ``f'``).
Where they differ, examples are printed with their line. Files are read
as bytes (Latin-1 to the lexers), so offsets agree.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cpc.syntax import Place, Syntax  # noqa: E402
from harness.bench.sources import LANGUAGES, RUST, Language, expand  # noqa: E402

IDENTIFIER = re.compile(rb"(?<![A-Za-z0-9_$])[A-Za-z_$][A-Za-z0-9_$]*")


def prose_spans(text: bytes, language: Language) -> bytearray:
    """One flag per byte of ``text``: 1 inside a comment or a string, by the lexer of ``language``."""
    flags = bytearray(len(text))
    for found in language.non_code.finditer(text.decode("latin-1")):
        quoted = found.group().lstrip("rRbBuUfFc")  # a string's prefix letters are code: its quote opens it
        if language is RUST and quoted.startswith("'"):
            continue  # a character literal: code, as `Place` reads it
        start = found.end() - len(quoted)
        flags[start:found.end()] = b"\x01" * (found.end() - start)
    return flags


def compare_file(path: Path, language: Language, examples: list[dict], keep: int) -> dict[str, int]:
    """Identifier starts of one file and the ones read otherwise, by kind (``code->prose``: `Place` reads code
    where the lexer sees prose)."""
    text = path.read_bytes()
    prose = prose_spans(text, language)
    place, at, counts = Place(Syntax.of(path.name)), 0, {"identifiers": 0}
    for found in IDENTIFIER.finditer(text):
        place, at = place.after(text[at:found.start()]), found.start()
        if text[at - 1:at] in (b"'", b"\\"):
            continue  # a lifetime, a character literal's letter or an escape's: a prefix cannot tell
        counts["identifiers"] += 1
        read, seen = ("prose" if place.inside is not None else "code"), ("prose" if prose[at] else "code")
        if read != seen:
            kind = f"{read}->{seen}"
            counts[kind] = counts.get(kind, 0) + 1
            if len(examples) < keep:
                line_start = text.rfind(b"\n", 0, at) + 1
                examples.append({"file": str(path), "kind": kind,
                                 "line": text[line_start:found.end()][-100:].decode("utf-8", "replace")})
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", default="<stdlib>/[a-m]*.py", help="comma-separated globs (** is recursive)")
    parser.add_argument("--examples", type=int, default=12, help="examples of a difference to print")
    parser.add_argument("--json", help="write the counts as JSON")
    args = parser.parse_args(argv)
    by_extension = {extension: language for language in LANGUAGES for extension in language.extensions}
    totals: dict[str, dict[str, int]] = {}
    examples: list[dict] = []
    for pattern in args.files.split(","):
        for path in expand(pattern):
            language = by_extension.get(path.suffix)
            if language is None:
                continue
            row = totals.setdefault(language.name, {"files": 0, "identifiers": 0})
            row["files"] += 1
            for kind, count in compare_file(path, language, examples, args.examples).items():
                row[kind] = row.get(kind, 0) + count
    for name, row in totals.items():
        other = sum(count for kind, count in row.items() if "->" in kind)
        kinds = ", ".join(f"{kind} {count}" for kind, count in row.items() if "->" in kind)
        print(f"{name}: {row['files']} files, {row['identifiers']} identifier starts, {other} read otherwise "
              f"({100 * other / max(row['identifiers'], 1):.2f} %){': ' + kinds if kinds else ''}")
    for example in examples:
        print(f"  {example['kind']}  {example['file']}: {example['line']!r}")
    if args.json:
        Path(args.json).write_text(json.dumps({"totals": totals, "examples": examples}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
