"""Every copy of the settings schema (`lsp_server.schema`) agrees with it: the server's parsing, VS Code's
package.json and schema.ts, Neovim's Lua, and the docs' tables; and a setting reloads only what depends on it.

A failure here names the command that regenerates the copies: ``.venv/bin/python tools/settings_schema.py --write``.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest

from lsp_server.schema import SCHEMA, SETTINGS, Setting
from lsp_server.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

import settings_schema  # noqa: E402

FIX = f"run `{settings_schema.REGENERATE}` (the schema is lsp_server/schema.py)"
TS_TYPES = {"string": "string", "integer": "number", "number": "number", "boolean": "boolean"}


def script_literal(text: str) -> Any:
    """A TypeScript or Lua default (``'auto'``, ``1.0``, ``true``) as Python reads JSON."""
    text = text.strip()
    if text.startswith("'"):
        return text[1:-1].replace("\\'", "'").replace("\\\\", "\\")
    return json.loads(text.replace("_", ""))


def test_the_generated_files_agree_with_the_schema():
    stale = [str(path.relative_to(ROOT)) for path in settings_schema.stale()]
    assert stale == [], f"{', '.join(stale)} differ from the settings schema: {FIX}"


def test_the_server_parses_every_setting_of_the_schema_and_nothing_else():
    settings = Settings()
    assert [(f.name, f.default) for f in fields(settings)] == [(s.name, s.default) for s in SETTINGS]
    assert settings.as_client_json() == {s.key: s.default for s in SETTINGS}


def test_package_json_declares_each_setting_as_the_schema_does():
    package = json.loads(settings_schema.PACKAGE_JSON.read_text(encoding="utf-8"))
    properties = package["contributes"]["configuration"]["properties"]
    for setting in SETTINGS:
        prop = properties.get(f"cpc.{setting.key}")
        assert prop is not None, f"package.json lacks cpc.{setting.key}: {FIX}"
        declared = (prop["type"], prop["default"], prop.get("minimum"), prop.get("maximum"), prop.get("enum"))
        expected = (setting.type, setting.default, setting.minimum, setting.maximum, setting.enum and list(setting.enum))
        assert declared == expected, (
            f"cpc.{setting.key} differs in package.json: {FIX}")


def test_the_typescript_settings_are_the_schemas():
    """schema.ts's interface and defaults, read as text; settings.ts takes them from it and writes none itself."""
    source = settings_schema.SCHEMA_TS.read_text(encoding="utf-8")
    interface = dict(re.findall(r"^    (\w+): (\w+);$", source.split("export interface InitializationOptions")[1]
                                .split("}")[0], re.MULTILINE))
    defaults_block = source.split("SERVER_DEFAULTS")[1].split("});")[0]
    defaults = {key: script_literal(value) for key, value in re.findall(r"^    (\w+): (.+),$", defaults_block, re.MULTILINE)}
    for setting in SETTINGS:
        assert setting.key in interface and setting.key in defaults, f"schema.ts lacks {setting.key}: {FIX}"
        expected_type = settings_schema.enum_names(setting)[1] if setting.enum else TS_TYPES[setting.type]
        assert (interface[setting.key], defaults[setting.key]) == (expected_type, setting.default), (
            f"{setting.key} differs in schema.ts: {FIX}")
    assert interface.keys() == defaults.keys() == SCHEMA.keys(), f"schema.ts has other settings: {FIX}"
    hand_written = (ROOT / "editors/vscode/src/settings.ts").read_text(encoding="utf-8")
    assert not re.search(r"^\s+(model|maxTokens|wordBudgetMs): ", hand_written, re.MULTILINE), (
        "settings.ts writes a server setting's default or type itself: take it from ./schema")


def test_the_lua_settings_are_the_schemas_and_no_lua_file_writes_defaults_of_its_own():
    source = settings_schema.SETTINGS_LUA.read_text(encoding="utf-8")
    rows = re.findall(r"^  (\w+) = \{ type = '(\w+)', default = ([^,]+?)(?:,| \})", source, re.MULTILINE)
    lua = {key: (kind, script_literal(default)) for key, kind, default in rows}
    expected = {s.key: (TS_TYPES[s.type], s.default) for s in SETTINGS}
    assert lua == expected, f"lua/cpc/settings.lua differs from the schema: {FIX}"
    for path in ("editors/neovim/lua/cpc.lua", "editors/neovim/lsp/cpc.lua"):
        text = (ROOT / path).read_text(encoding="utf-8")
        assert not re.search(r"^\s+(maxTokens|wordBudgetMs|remoteApi) = ", text, re.MULTILINE), (
            f"{path} writes a setting's default itself: take it from require('cpc.settings')")


def table_defaults(path: Path) -> dict[str, str]:
    """Each setting named by a row of ``path``'s generated table, and its default as the row writes it."""
    table = path.read_text(encoding="utf-8").split(settings_schema.TABLE_START)[1].split(settings_schema.TABLE_END)[0]
    rows = {}
    for line in table.splitlines():
        cells = [cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]]
        if cells and cells[0].startswith("`"):
            rows[cells[0].strip("`").removeprefix("cpc.")] = cells[-2].strip("`")  # before the meaning
    return rows


@pytest.mark.parametrize("path", [settings_schema.README, settings_schema.VSCODE_README, settings_schema.NEOVIM_README],
                         ids=lambda path: str(path.relative_to(ROOT)))
def test_each_docs_table_names_every_setting_with_its_default(path):
    rows = table_defaults(path)
    for setting in SETTINGS:
        assert setting.key in rows, f"{path.name}'s table lacks {setting.key}: {FIX}"
        assert script_literal(rows[setting.key]) == setting.default, f"{setting.key}'s default differs in {path}: {FIX}"


def another_value(setting: Setting) -> Any:
    """A value of ``setting`` other than its default, that the server accepts."""
    if setting.enum is not None:
        return next(value for value in setting.enum if value != setting.default)
    if setting.type == "string":
        return "other.gguf"
    return not setting.default if setting.type == "boolean" else setting.default + 1


@pytest.mark.parametrize("model", ["smollm2", "http://gpu-box:8080"], ids=["local", "remote"])
@pytest.mark.parametrize("setting", SETTINGS, ids=lambda setting: setting.key)
def test_a_setting_reloads_only_the_model_it_is_declared_to(setting, model):
    """`Setting.reloads` is what the engine does: a remote setting never reloads a local model, a local one
    never reconnects to a model server."""
    before, problems = Settings().updated({"model": model})
    after, more = before.updated({setting.key: another_value(setting)})
    assert problems == more == []
    kind = "remote" if model.startswith("http") else "local"
    expected = setting.reloads in ("any", kind)
    assert (not after.engine.loads_same_as(before.engine)) == expected, (
        f"changing {setting.key} with a {kind} model {'does not reload' if expected else 'reloads'} it")


@pytest.mark.parametrize("setting", [s for s in SETTINGS if s.off is not None], ids=lambda setting: setting.key)
def test_off_has_one_spelling_per_setting(setting):
    """The schema's off value is the one the server reads as off (the engine's None)."""
    off = Settings().updated({setting.key: setting.off})[0]
    assert off.unless_off(setting.key) is None
    assert Settings().unless_off(setting.key) == (None if setting.default == setting.off else setting.default)
    other = another_value(setting)
    if other != setting.off:
        assert Settings().updated({setting.key: other})[0].unless_off(setting.key) == other
    if setting.type in ("integer", "number"):
        assert f"`{setting.off}`" in setting.description, f"{setting.key}'s description does not say what `{setting.off}` does"


def test_no_secret_is_a_setting():
    """The model server's key comes from the environment (CPC_REMOTE_API_KEY), never from a setting."""
    assert not [s.key for s in SETTINGS if re.search(r"key|secret|token$|password", s.key, re.IGNORECASE)]


def test_the_check_fails_when_a_copy_differs(tmp_path, monkeypatch):
    """The generator sees a default edited in package.json (the test above would fail on it)."""
    package = json.loads(settings_schema.PACKAGE_JSON.read_text(encoding="utf-8"))
    package["contributes"]["configuration"]["properties"]["cpc.maxTokens"]["default"] = 47
    edited = tmp_path / "package.json"
    edited.write_text(json.dumps(package, indent=2) + "\n", encoding="utf-8")
    monkeypatch.setattr(settings_schema, "PACKAGE_JSON", edited)
    assert edited in settings_schema.stale()
