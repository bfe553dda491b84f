"""The editors' and the docs' copies of the settings schema, generated from `lsp_server.schema`.

    .venv/bin/python tools/settings_schema.py --write   # regenerate them (also: make settings)
    .venv/bin/python tools/settings_schema.py           # list the files that differ from the schema

Generated: VS Code's ``contributes.configuration`` (the server's settings; the
extension's own, ``serverPath`` and the like, are kept and ordered after them)
and ``src/schema.ts``, Neovim's ``lua/cpc/settings.lua``, and the settings
tables between the markers of README.md and the editors' READMEs.
tests/codebase/test_settings_schema.py fails while one differs.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lsp_server.schema import SETTINGS, Setting  # noqa: E402

PACKAGE_JSON = ROOT / "editors/vscode/package.json"
SCHEMA_TS = ROOT / "editors/vscode/src/schema.ts"
SETTINGS_LUA = ROOT / "editors/neovim/lua/cpc/settings.lua"
README = ROOT / "README.md"
VSCODE_README = ROOT / "editors/vscode/README.md"
NEOVIM_README = ROOT / "editors/neovim/README.md"

REGENERATE = ".venv/bin/python tools/settings_schema.py --write"
HEADER = f"Generated from lsp_server/schema.py by tools/settings_schema.py: do not edit; run `{REGENERATE}`."
TABLE_START = f"<!-- settings table: {HEADER} -->"
TABLE_END = "<!-- end of the settings table -->"
SECTION = "cpc."


def qualified(setting: Setting) -> str:
    """The description as VS Code shows it: other settings named by their full name (`` `cpc.model` ``)."""
    keys = "|".join(re.escape(other.key) for other in SETTINGS)
    return re.sub(rf"`({keys})`", rf"`{SECTION}\1`", setting.description)


def vscode_property(setting: Setting, order: int) -> dict[str, Any]:
    """One entry of ``contributes.configuration.properties``."""
    prop: dict[str, Any] = {"type": setting.type, "default": setting.default}
    if setting.minimum is not None:
        prop["minimum"] = setting.minimum
    if setting.maximum is not None:
        prop["maximum"] = setting.maximum
    if setting.enum is not None:
        prop["enum"] = list(setting.enum)
    if setting.enum_descriptions is not None:
        prop["enumDescriptions"] = list(setting.enum_descriptions)
    prop["markdownDescription"] = qualified(setting)
    prop["order"] = order
    return prop


def package_json(text: str) -> str:
    """package.json with the server's settings from the schema, the extension's own after them."""
    package = json.loads(text)
    properties = package["contributes"]["configuration"]["properties"]
    server = {f"{SECTION}{s.key}": vscode_property(s, order) for order, s in enumerate(SETTINGS)}
    own = {key: prop for key, prop in properties.items() if key not in server}
    for order, prop in enumerate(own.values(), start=len(server)):
        prop["order"] = order
    package["contributes"]["configuration"]["properties"] = {**server, **own}
    return json.dumps(package, indent=2, ensure_ascii=False) + "\n"


def script_value(value: Any) -> str:
    """A default as TypeScript and Lua both write it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return repr(value)


def enum_names(setting: Setting) -> tuple[str, str]:
    """The TypeScript names of a setting's values and of their type: ``remoteApi``: REMOTE_APIS, RemoteApi."""
    return setting.name.upper() + "S", setting.key[0].upper() + setting.key[1:]


def schema_ts() -> str:
    """editors/vscode/src/schema.ts."""
    lines = [f"// {HEADER}", ""]
    for setting in (s for s in SETTINGS if s.enum is not None):
        values, kind = enum_names(setting)
        lines += [f"/** The values of `{SECTION}{setting.key}`. */",
                  f"export const {values} = [{', '.join(map(script_value, setting.enum))}] as const;",
                  f"export type {kind} = (typeof {values})[number];", ""]
    ts_types = {"string": "string", "integer": "number", "number": "number", "boolean": "boolean"}
    lines.append("/** The server's settings, sent in `initialize` (camelCase, exactly these keys). */")
    lines.append("export interface InitializationOptions {")
    lines += [f"    {s.key}: {enum_names(s)[1] if s.enum else ts_types[s.type]};" for s in SETTINGS]
    lines += ["}", "", "/** How a value is read: its JSON type, and its range or its values. */",
              "export interface SettingSpec {",
              "    type: 'string' | 'integer' | 'number' | 'boolean';",
              "    minimum?: number;",
              "    maximum?: number;",
              "    choices?: readonly string[];",
              "}", "", "/** The server's defaults. */",
              "export const SERVER_DEFAULTS: Readonly<InitializationOptions> = Object.freeze({"]
    lines += [f"    {s.key}: {script_value(s.default)}," for s in SETTINGS]
    lines += ["});", "", "/** Each setting's type and range. */",
              "export const SCHEMA: Readonly<Record<keyof InitializationOptions, SettingSpec>> = Object.freeze({"]
    for setting in SETTINGS:
        spec = [f"type: '{setting.type}'", *bounds(setting, ": ")]
        if setting.enum is not None:
            spec.append(f"choices: {enum_names(setting)[0]}")
        lines.append(f"    {setting.key}: {{ {', '.join(spec)} }},")
    lines += ["});", "", "/** The keys of initializationOptions, in the order they are sent. */",
              "export const INITIALIZATION_KEYS: readonly (keyof InitializationOptions)[] = ["]
    lines += [f"    '{s.key}'," for s in SETTINGS]
    return "\n".join(lines + ["];", ""])


def bounds(setting: Setting, assign: str) -> list[str]:
    """The setting's minimum and maximum, where it has them, as a script's fields (``minimum: 1`` in TypeScript,
    ``minimum = 1`` in Lua, with ``assign`` between the name and the value)."""
    limits = (("minimum", setting.minimum), ("maximum", setting.maximum))
    return [f"{name}{assign}{value:g}" for name, value in limits if value is not None]


def settings_lua() -> str:
    """editors/neovim/lua/cpc/settings.lua."""
    lua_types = {"string": "string", "integer": "number", "number": "number", "boolean": "boolean"}
    lines = [f"-- {HEADER}", "--",
             "-- The server's settings: each one's Lua type, the server's default (applied by the server: the",
             "-- plugin sends only what the user set), and its range or the values it may take.",
             "return {"]
    for setting in SETTINGS:
        fields = [f"type = '{lua_types[setting.type]}'", f"default = {script_value(setting.default)}",
                  *bounds(setting, " = ")]
        if setting.enum is not None:
            fields.append(f"enum = {{ {', '.join(map(script_value, setting.enum))} }}")
        lines.append(f"  {setting.key} = {{ {', '.join(fields)} }},")
    return "\n".join(lines + ["}", ""])


def cell(text: str) -> str:
    return text.replace("|", "\\|")


def reloads_sentence() -> str:
    """What a change loads again, from each setting's `Setting.reloads`."""
    def named(kind: str) -> str:
        keys = [f"`{s.key}`" for s in SETTINGS if s.reloads == kind]
        return ", ".join(keys[:-1]) + " or " + keys[-1] if len(keys) > 1 else keys[0]
    return (f"Changing {named('any')} loads the model again; {named('local')} only a model run in the "
            f"server's process (never a model server's connection), {named('remote')} only the connection to "
            "a model server (never a model in the process). The old model serves until the new one is ready.")


def readme_table(package: dict[str, Any]) -> str:
    """README.md's table: every setting, the VS Code extension's own last."""
    rows = ["| setting | default | what it does |", "|---|---|---|"]
    rows += [f"| `{s.key}` | `{json.dumps(s.default)}` | {cell(s.description)} |" for s in SETTINGS]
    keys = {s.key for s in SETTINGS}
    for key, prop in package["contributes"]["configuration"]["properties"].items():
        name = key.removeprefix(SECTION)
        if name not in keys:
            rows.append(f"| `{name}` | `{json.dumps(prop['default'])}` | VS Code only: {cell(prop['markdownDescription'])} |")
    return "\n".join(rows) + "\n\n" + reloads_sentence()


def vscode_readme_table(package: dict[str, Any]) -> str:
    """The VS Code README's table: every property of package.json, with its type."""
    rows = ["| Setting | Type | Default | Meaning |", "| --- | --- | --- | --- |"]
    for key, prop in package["contributes"]["configuration"]["properties"].items():
        if "enum" in prop:
            kind = " \\| ".join(f"`{json.dumps(value)}`" for value in prop["enum"])
        else:
            kind = "string array" if prop["type"] == "array" else prop["type"]
        rows.append(f"| `{key}` | {kind} | `{json.dumps(prop['default'])}` | {cell(prop['markdownDescription'])} |")
    return "\n".join(rows)


def neovim_readme_table(package: dict[str, Any]) -> str:
    """The Neovim README's table: the server's settings, with their defaults as Lua writes them."""
    rows = ["| key | default | meaning |", "| --- | --- | --- |"]
    rows += [f"| `{s.key}` | `{script_value(s.default)}` | {cell(s.description)} |" for s in SETTINGS]
    return "\n".join(rows)


def with_table(text: str, table: str, path: Path) -> str:
    """``text`` with what lies between the table markers replaced by ``table``."""
    start, end = text.find(TABLE_START), text.find(TABLE_END)
    if start < 0 or end < start:
        raise SystemExit(f"{path}: the markers of the settings table are missing ({TABLE_START} ... {TABLE_END})")
    return text[:start] + f"{TABLE_START}\n{table}\n" + text[end:]


def generated() -> dict[Path, str]:
    """Each generated file's path and the text it should have."""
    package_text = package_json(PACKAGE_JSON.read_text(encoding="utf-8"))
    package = json.loads(package_text)
    tables: dict[Path, Callable[[dict[str, Any]], str]] = {
        README: readme_table, VSCODE_README: vscode_readme_table, NEOVIM_README: neovim_readme_table,
    }
    files = {PACKAGE_JSON: package_text, SCHEMA_TS: schema_ts(), SETTINGS_LUA: settings_lua()}
    for path, table in tables.items():
        files[path] = with_table(path.read_text(encoding="utf-8"), table(package), path)
    return files


def stale() -> list[Path]:
    """The generated files that differ from the schema."""
    return [path for path, text in generated().items()
            if not path.exists() or path.read_text(encoding="utf-8") != text]


def main(argv: list[str]) -> int:
    if "--write" in argv:
        for path, text in generated().items():
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text, encoding="utf-8")
                print(f"wrote {path.relative_to(ROOT)}")
        return 0
    differ = stale()
    for path in differ:
        print(f"{path.relative_to(ROOT)} differs from lsp_server/schema.py: run `{REGENERATE}`")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
