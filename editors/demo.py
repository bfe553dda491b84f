"""`make demo`: a real completion through the real server, naive and CPC side by side.

A headless editor starts `cpc-lsp` on the default model, opens real code
(standard-library modules), types a word key by key so that the cursor ends
inside one of the model's tokens, and shows what the server suggests in
``naive`` mode (tokenize the typed text and continue) and in ``cpc`` mode
(character prefix conditioning), with the server's shipping settings: the
whole suggestion, once it has grown to the end of the line.
"""

from __future__ import annotations

import asyncio
import importlib
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cpc.tokenizer import load_tokenizer  # noqa: E402
from harness.headless import HeadlessEditor  # noqa: E402
from harness.token_view import token_view  # noqa: E402

# (module, the line to type, how much of it to type)
EXAMPLES = [
    ("textwrap", "        self.width = width", "        self.width = wid"),
    ("argparse", "    def print_usage(self, file=None):", "    def print_usage(se"),
    ("modulefinder", "    suffix = os.path.splitext(file_path)[-1]", "    suffix = os.path.splitex"),
]


def progress(message: str, percentage: int | None) -> None:
    if message:
        shown = f" ({percentage}%)" if percentage is not None else ""
        print(f"  [server] {message}{shown}", file=sys.stderr, flush=True)


async def main() -> int:
    tokenizer = load_tokenizer("default")
    print("Starting cpc-lsp on the default model (Gemma 3 270M)...", file=sys.stderr)
    async with HeadlessEditor(["--model", "default"], on_progress=progress) as editor:
        for module, line, typed in EXAMPLES:
            source = Path(importlib.import_module(module).__file__).read_text(encoding="utf-8")
            start = source.index(line + "\n")
            word_start = len(typed) - len(re.search(r"\w*$", typed).group())
            await editor.open(f"file:///demo/{module}.py", source[: start + word_start] + "\n" + source[start + len(line) :],
                              cursor=start + word_start)
            answers = {}
            for mode in ("naive", "cpc"):
                editor.configure(mode=mode)
                if mode == "naive":
                    for char in typed[word_start:]:  # typed key by key, a request after each, as an editor does
                        editor.type(char)
                        await editor.suggest()
                # as the editors do: a first answer that ends after its word grows (cpc/suggestionReady)
                shown = await editor.suggest_over_time(horizon_s=5.0)
                answers[mode] = shown[-1][1] if shown else ""
            rest = re.match(r"\w*", line[len(typed) :]).group()
            print(f"\n{module}.py, cursor after {typed.strip()!r} (the file has {line.strip()!r})")
            print(f"  the model's tokens of the line: {token_view(tokenizer, line, typed)}")
            for mode, title in (("naive", "tokenize and continue"), ("cpc", "character prefix conditioning")):
                text = answers[mode]
                verdict = "finishes the word" if re.match(r"\w*", text).group() == rest else "does not finish the word"
                print(f"  {mode:5} {title:31} {typed.strip()}|{text!r:28} {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
