/*
 * Pure logic of the extension: reading the `cpc` settings, validating them,
 * and turning them into the server's initializationOptions and command line.
 *
 * This module must not import `vscode` (nor `vscode-languageclient`, which
 * imports it): the unit tests run it with Node alone.
 */

/** The settings section, as in `cpc.model`. */
export const CONFIG_SECTION = 'cpc';

/** Output channel name, and the client's display name. */
export const CHANNEL_NAME = 'CPC';

// The server's settings (their types, defaults, ranges and the order they are sent in) are generated from
// the server's schema, lsp_server/schema.py, into schema.ts.
import { INITIALIZATION_KEYS, InitializationOptions, SCHEMA, SERVER_DEFAULTS } from './schema';

export { INITIALIZATION_KEYS, InitializationOptions, MODES, Mode, REMOTE_APIS, RemoteApi } from './schema';

/** `cpc.enable`: whether suggestions show, by VS Code language id (`python`, `markdown`); `*` for the others. */
export type EnableMap = Record<string, boolean>;

/** Every setting of the extension, validated. */
export interface CpcSettings extends InitializationOptions {
    serverPath: string;
    serverArgs: string[];
    enable: EnableMap;
}

export const DEFAULTS: Readonly<CpcSettings> = Object.freeze({
    ...SERVER_DEFAULTS,
    serverPath: 'cpc-lsp',
    serverArgs: Object.freeze([]) as unknown as string[],
    enable: Object.freeze({ '*': true }) as EnableMap,
});

/** Settings that shape the command line: changing one restarts the server. */
export const RESTART_KEYS: readonly (keyof CpcSettings)[] = ['serverPath', 'serverArgs'];

/** Where settings come from: a `vscode.WorkspaceConfiguration` or a plain object. */
export interface SettingsSource {
    get(key: string): unknown;
}

/** What `~`, `${userHome}` and `${workspaceFolder}` expand to. */
export interface PathContext {
    home?: string;
    workspaceFolder?: string;
}

function isSource(value: unknown): value is SettingsSource {
    return typeof value === 'object' && value !== null && typeof (value as SettingsSource).get === 'function';
}

/** A number in [min, max], or the fallback when the value is not a finite number; `integer` truncates fractions. */
function toFiniteNumber(value: unknown, fallback: number, min: number, max: number, integer: boolean): number {
    const n = typeof value === 'number' ? value : typeof value === 'string' && value.trim() !== '' ? Number(value) : NaN;
    if (!Number.isFinite(n)) {
        return fallback;
    }
    return Math.min(max, Math.max(min, integer ? Math.trunc(n) : n));
}

/** An integer in [min, max], or the fallback when the value is not a finite number. */
export function toInteger(value: unknown, fallback: number, min: number, max = Infinity): number {
    return toFiniteNumber(value, fallback, min, max, true);
}

/** A number in [min, max] (fractions kept), or the fallback when the value is not a finite number. */
export function toNumber(value: unknown, fallback: number, min: number, max = Infinity): number {
    return toFiniteNumber(value, fallback, min, max, false);
}

function toBoolean(value: unknown, fallback: boolean): boolean {
    if (typeof value === 'boolean') {
        return value;
    }
    if (value === 'true') {
        return true;
    }
    if (value === 'false') {
        return false;
    }
    return fallback;
}

function toNonEmptyString(value: unknown, fallback: string): string {
    if (typeof value !== 'string') {
        return fallback;
    }
    const trimmed = value.trim();
    return trimmed === '' ? fallback : trimmed;
}

function toChoice<T extends string>(value: unknown, choices: readonly T[], fallback: T): T {
    if (typeof value === 'string') {
        const lower = value.trim().toLowerCase();
        if ((choices as readonly string[]).includes(lower)) {
            return lower as T;
        }
    }
    return fallback;
}

function toStringArray(value: unknown): string[] {
    if (!Array.isArray(value)) {
        return [];
    }
    return value
        .filter((v) => typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean')
        .map((v) => String(v));
}

/**
 * Expand a leading `~` (alone or followed by `/`), `${userHome}` and
 * `${workspaceFolder}`. A variable with no value in `ctx` is left as is.
 */
export function expandPath(path: string, ctx: PathContext = {}): string {
    let out = path;
    if (ctx.home !== undefined) {
        if (out === '~') {
            out = ctx.home;
        } else if (out.startsWith('~/') || out.startsWith('~\\')) {
            out = ctx.home + out.slice(1);
        }
        out = out.split('${userHome}').join(ctx.home);
    }
    if (ctx.workspaceFolder !== undefined) {
        out = out.split('${workspaceFolder}').join(ctx.workspaceFolder);
    }
    return out;
}

/** The model setting: a name (`default`, `smollm2`) stays as is, a path is expanded. */
export function resolveModel(model: string, ctx: PathContext = {}): string {
    return expandPath(model, ctx);
}

/**
 * One server setting, validated by its schema: a value of the wrong type falls back to the default; integers
 * are truncated, and numbers clamped to their range; a string outside a setting's values falls back. Every
 * other string setting is a model name, a path or an address: `~`, `${userHome}` and `${workspaceFolder}`
 * are expanded.
 */
function readSetting(key: keyof InitializationOptions, value: unknown, ctx: PathContext): unknown {
    const spec = SCHEMA[key];
    const fallback = SERVER_DEFAULTS[key];
    if (spec.choices !== undefined) {
        return toChoice(value, spec.choices, fallback as string);
    }
    switch (spec.type) {
        case 'integer':
            return toInteger(value, fallback as number, spec.minimum ?? -Infinity, spec.maximum ?? Infinity);
        case 'number':
            return toNumber(value, fallback as number, spec.minimum ?? -Infinity, spec.maximum ?? Infinity);
        case 'boolean':
            return toBoolean(value, fallback as boolean);
        default:
            return expandPath(toNonEmptyString(value, fallback as string), ctx);
    }
}

/** Read and validate every setting (`readSetting`); missing or ill-typed values fall back to the defaults. */
export function readSettings(source: SettingsSource | Record<string, unknown> | undefined, ctx: PathContext = {}): CpcSettings {
    const get = isSource(source)
        ? (key: string) => source.get(key)
        : (key: string) => (source === undefined ? undefined : (source as Record<string, unknown>)[key]);
    const server = Object.fromEntries(INITIALIZATION_KEYS.map((key) => [key, readSetting(key, get(key), ctx)]));
    return {
        ...(server as unknown as InitializationOptions),
        serverPath: expandPath(toNonEmptyString(get('serverPath'), DEFAULTS.serverPath), ctx),
        serverArgs: toStringArray(get('serverArgs')).map((arg) => expandPath(arg, ctx)),
        enable: readEnable(get('enable')),
    };
}

/** `cpc.enable` read: its entries whose value is a boolean (`{"*": true}` when it holds none). */
export function readEnable(value: unknown): EnableMap {
    const entries = typeof value === 'object' && value !== null && !Array.isArray(value)
        ? Object.entries(value).filter(([, on]) => typeof on === 'boolean')
        : [];
    return entries.length ? Object.fromEntries(entries) : { ...DEFAULTS.enable };
}

/** Whether suggestions show in a document of `languageId`: its own entry, else `*`'s, else yes. */
export function suggestionsOn(enable: EnableMap, languageId: string): boolean {
    return enable[languageId] ?? enable['*'] ?? true;
}

/**
 * `cpc.enable` with suggestions turned the other way in `languageId`'s documents (its own entry) or, with none,
 * in every language without an entry of its own (`*`, as GitHub Copilot's `github.copilot.enable`).
 */
export function toggled(enable: EnableMap, languageId = '*'): EnableMap {
    return { ...enable, [languageId]: !suggestionsOn(enable, languageId) };
}

/** The `initializationOptions` of the `initialize` request: every server setting, in `INITIALIZATION_KEYS`' order. */
export function initializationOptions(settings: CpcSettings): InitializationOptions {
    return Object.fromEntries(INITIALIZATION_KEYS.map((key) => [key, settings[key]])) as unknown as InitializationOptions;
}

/** The server process, in the shape of vscode-languageclient's `Executable` (transport: stdio). */
export interface ServerExecutable {
    command: string;
    args: string[];
    options: { shell: false; env?: Record<string, string | undefined> };
}

/** Where the command **CPC: Set Remote API Key** keeps the model server's key (VS Code's secret storage). */
export const API_KEY_SECRET = 'cpc.remoteApiKey';
/** The environment variable the server reads the key from (`cpc.remote.API_KEY_ENV`). */
export const API_KEY_ENV = 'CPC_REMOTE_API_KEY';

/**
 * The command that starts the server. Only `cpc.serverArgs` go on the
 * command line; the model and generation settings travel in
 * initializationOptions. No transport flag is added: the client talks to
 * the process over stdin/stdout, which is cpc-lsp's default. The model
 * server's key (from secret storage) goes in the process's environment.
 */
export function serverExecutable(settings: CpcSettings, apiKey?: string): ServerExecutable {
    const options: ServerExecutable['options'] = { shell: false };
    if (apiKey) {
        // in the process's environment, never on its command line (other users can read that)
        options.env = { ...process.env, [API_KEY_ENV]: apiKey };
    }
    return { command: settings.serverPath, args: [...settings.serverArgs], options };
}

/**
 * Documents the client serves: any language, saved files, untitled buffers and notebooks' cells. The server
 * synchronizes notebooks (`notebookDocument/*`, which takes the cells from the text documents' own sync) and
 * reads a code cell with the code cells around it.
 */
export function documentSelector(): { scheme: string }[] {
    return [{ scheme: 'file' }, { scheme: 'untitled' }, { scheme: 'vscode-notebook-cell' }];
}

/**
 * Whether a configuration change needs a server restart. `affects` is
 * `ConfigurationChangeEvent.affectsConfiguration`.
 */
export function needsRestart(affects: (section: string) => boolean): boolean {
    return RESTART_KEYS.some((key) => affects(`${CONFIG_SECTION}.${key}`));
}

/** The message shown when the server cannot be started. */
export function startFailureMessage(settings: CpcSettings, error: unknown): string {
    const reason = error instanceof Error ? error.message : String(error);
    return (
        `CPC: could not start the language server "${settings.serverPath}" (${reason}). ` +
        'Put cpc-lsp on PATH or set "cpc.serverPath" to its full path, e.g. /path/to/repo/.venv/bin/cpc-lsp.'
    );
}
