"""Many documents at once, through the real server: a session restored, a branch checked out, then a key.

    python benchmarks/bench_open_documents.py [--counts 1,10,30] [--json OUT]

An editor that restores a session opens every buffer at once, and one
whose open files change on disk (``git checkout``, a formatter run over the
project) sends each document's new text. Fusion counts every open document
on the engine's worker, where the next completion runs too. Through
``cpc-lsp`` with its shipping defaults, a headless editor (`harness.headless`)
opens ``count`` documents (the first half of the standard library's largest
``[a-m]*.py`` files), types a key at the end of the last one at once and
waits for its answer (``opened_ms``); then every one of them changes as a
checkout changes it (its second half as a whole new text, ``didChange``),
and a key is typed at the end of the last one again (``changed_ms``). Each count's documents are new to the server.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

from lsprotocol import types

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.bench.sources import expand  # noqa: E402
from harness.headless import HeadlessEditor  # noqa: E402


def texts(count: int) -> list[tuple[str, str, str]]:
    """(name, text, text checked out) of ``count`` documents: the halves of the largest standard-library files."""
    files = sorted(expand("<stdlib>/[a-m]*.py"), key=lambda path: (-path.stat().st_size, path.name))[:count]
    whole = [(path.name, path.read_text(encoding="utf-8")) for path in files]
    return [(name, text[: len(text) // 2], text[len(text) // 2 :]) for name, text in whole]


async def key_answer_ms(editor: HeadlessEditor) -> float:
    """Type the character before the cursor again and wait for the answer: its time in ms."""
    started = time.perf_counter()
    editor.type(editor.text[editor.cursor - 1])
    await editor.suggest()
    return round(1000 * (time.perf_counter() - started))


async def run(counts: list[int], model: str) -> dict:
    rows = []
    async with HeadlessEditor(["--model", model]) as editor:
        await editor.wait_until_ready()
        for round_number, count in enumerate(counts):
            documents = [(f"file:///tmp/open-documents/{round_number}/{name}", text, checked_out)
                         for name, text, checked_out in texts(count)]
            for uri, text, _ in documents:
                await editor.open(uri, text)
            opened = await key_answer_ms(editor)
            for uri, _, checked_out in documents[:-1]:  # the others change on disk: a checkout's whole new texts
                editor.client.text_document_did_change(types.DidChangeTextDocumentParams(
                    types.VersionedTextDocumentIdentifier(uri=uri, version=2),
                    [types.TextDocumentContentChangeWholeDocument(text=checked_out)]))
            editor.replace(0, len(editor.text), documents[-1][2])  # the one typed in too, the cursor at its end
            changed = await key_answer_ms(editor)
            rows.append({"documents": count, "kilobytes": sum(len(text) for _, text, _ in documents) // 1000,
                         "opened_ms": opened, "changed_ms": changed})
            print(rows[-1], flush=True)
            for uri, _, _ in documents:
                editor.client.text_document_did_close(
                    types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(uri)))
            await asyncio.sleep(1)  # the closed documents leave the corpus
    return {"model": model, "rows": rows}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="default")
    parser.add_argument("--counts", default="1,10,30", help="documents open at once, one round each")
    parser.add_argument("--json")
    args = parser.parse_args()
    result = asyncio.run(run([int(count) for count in args.counts.split(",")], args.model))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    print(f"\n{'documents':>9} {'KB':>6} {'a key after opening them (ms)':>30} {'after they all changed (ms)':>28}")
    for row in result["rows"]:
        print(f"{row['documents']:>9} {row['kilobytes']:>6} {row['opened_ms']:>30} {row['changed_ms']:>28}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
