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

/** Conditioning modes the server understands. */
export const MODES = ['cpc', 'heal', 'naive'] as const;
export type Mode = (typeof MODES)[number];

/** The serving APIs a model server may speak (`cpc.remoteApi`). */
export const REMOTE_APIS = ['auto', 'llama-server', 'openai'] as const;
export type RemoteApi = (typeof REMOTE_APIS)[number];

/** The settings sent to the server in `initialize` (camelCase, exactly these keys). */
export interface InitializationOptions {
    model: string;
    gpuLayers: number;
    threads: number;
    contextSize: number;
    remoteVocab: string;
    remoteTopK: number;
    remoteTimeoutMs: number;
    remoteApi: RemoteApi;
    remoteCaFile: string;
    mode: Mode;
    multiline: boolean;
    maxTokens: number;
    items: number;
    debounceMs: number;
    promptBudgetMs: number;
    wordBudgetMs: number;
    warmCache: boolean;
    logDocuments: boolean;
    fusion: boolean;
    fusionWeight: number;
    workspaceIndexing: boolean;
    workspaceMaxBytes: number;
    workspaceMaxFileBytes: number;
    workspaceMaxFiles: number;
}

/** Every setting of the extension, validated. */
export interface CpcSettings extends InitializationOptions {
    serverPath: string;
    serverArgs: string[];
}

export const DEFAULTS: Readonly<CpcSettings> = Object.freeze({
    model: 'default',
    gpuLayers: 0,
    threads: 0,
    contextSize: 1536,
    remoteVocab: 'default',
    remoteTopK: 512,
    remoteTimeoutMs: 10000,
    remoteApi: 'auto',
    remoteCaFile: '',
    mode: 'cpc',
    multiline: false,
    maxTokens: 48,
    items: 1,
    debounceMs: 30,
    promptBudgetMs: 200,
    wordBudgetMs: 100,
    warmCache: true,
    logDocuments: false,
    fusion: true,
    fusionWeight: 1.0,
    workspaceIndexing: true,
    workspaceMaxBytes: 20_000_000,
    workspaceMaxFileBytes: 512_000,
    workspaceMaxFiles: 5000,
    serverPath: 'cpc-lsp',
    serverArgs: Object.freeze([]) as unknown as string[],
});

/** The keys of initializationOptions, in the order they are sent. */
export const INITIALIZATION_KEYS: readonly (keyof InitializationOptions)[] = [
    'model',
    'gpuLayers',
    'threads',
    'contextSize',
    'remoteVocab',
    'remoteTopK',
    'remoteTimeoutMs',
    'remoteApi',
    'remoteCaFile',
    'mode',
    'multiline',
    'maxTokens',
    'items',
    'debounceMs',
    'promptBudgetMs',
    'wordBudgetMs',
    'warmCache',
    'logDocuments',
    'fusion',
    'fusionWeight',
    'workspaceIndexing',
    'workspaceMaxBytes',
    'workspaceMaxFileBytes',
    'workspaceMaxFiles',
];

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

/** An integer >= min, or the fallback when the value is not a finite number. */
export function toInteger(value: unknown, fallback: number, min: number): number {
    let n: number;
    if (typeof value === 'number') {
        n = value;
    } else if (typeof value === 'string' && value.trim() !== '') {
        n = Number(value);
    } else {
        return fallback;
    }
    if (!Number.isFinite(n)) {
        return fallback;
    }
    return Math.max(min, Math.trunc(n));
}

/** A number >= min (fractions kept), or the fallback when the value is not a finite number. */
export function toNumber(value: unknown, fallback: number, min: number): number {
    let n: number;
    if (typeof value === 'number') {
        n = value;
    } else if (typeof value === 'string' && value.trim() !== '') {
        n = Number(value);
    } else {
        return fallback;
    }
    if (!Number.isFinite(n)) {
        return fallback;
    }
    return Math.max(min, n);
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
 * Read and validate every setting. Missing or ill-typed values fall back to
 * the defaults; integers are truncated and clamped (items >= 1,
 * maxTokens >= 1, threads >= 0, debounceMs >= 0, promptBudgetMs >= 0, wordBudgetMs >= 0, gpuLayers >= -1,
 * contextSize >= 512, remoteTopK >= 1, remoteTimeoutMs >= 1, the workspace caps >= 0); fusionWeight is a
 * number >= 0.
 */
export function readSettings(source: SettingsSource | Record<string, unknown> | undefined, ctx: PathContext = {}): CpcSettings {
    const get = isSource(source)
        ? (key: string) => source.get(key)
        : (key: string) => (source === undefined ? undefined : (source as Record<string, unknown>)[key]);
    return {
        model: resolveModel(toNonEmptyString(get('model'), DEFAULTS.model), ctx),
        gpuLayers: toInteger(get('gpuLayers'), DEFAULTS.gpuLayers, -1),
        threads: toInteger(get('threads'), DEFAULTS.threads, 0),
        contextSize: toInteger(get('contextSize'), DEFAULTS.contextSize, 512),
        remoteVocab: resolveModel(toNonEmptyString(get('remoteVocab'), DEFAULTS.remoteVocab), ctx),
        remoteTopK: toInteger(get('remoteTopK'), DEFAULTS.remoteTopK, 1),
        remoteTimeoutMs: toInteger(get('remoteTimeoutMs'), DEFAULTS.remoteTimeoutMs, 1),
        remoteApi: toChoice(get('remoteApi'), REMOTE_APIS, DEFAULTS.remoteApi),
        remoteCaFile: expandPath(toNonEmptyString(get('remoteCaFile'), DEFAULTS.remoteCaFile), ctx),
        mode: toChoice(get('mode'), MODES, DEFAULTS.mode),
        multiline: toBoolean(get('multiline'), DEFAULTS.multiline),
        maxTokens: toInteger(get('maxTokens'), DEFAULTS.maxTokens, 1),
        items: toInteger(get('items'), DEFAULTS.items, 1),
        debounceMs: toInteger(get('debounceMs'), DEFAULTS.debounceMs, 0),
        promptBudgetMs: toInteger(get('promptBudgetMs'), DEFAULTS.promptBudgetMs, 0),
        wordBudgetMs: toInteger(get('wordBudgetMs'), DEFAULTS.wordBudgetMs, 0),
        warmCache: toBoolean(get('warmCache'), DEFAULTS.warmCache),
        logDocuments: toBoolean(get('logDocuments'), DEFAULTS.logDocuments),
        fusion: toBoolean(get('fusion'), DEFAULTS.fusion),
        fusionWeight: toNumber(get('fusionWeight'), DEFAULTS.fusionWeight, 0),
        workspaceIndexing: toBoolean(get('workspaceIndexing'), DEFAULTS.workspaceIndexing),
        workspaceMaxBytes: toInteger(get('workspaceMaxBytes'), DEFAULTS.workspaceMaxBytes, 0),
        workspaceMaxFileBytes: toInteger(get('workspaceMaxFileBytes'), DEFAULTS.workspaceMaxFileBytes, 0),
        workspaceMaxFiles: toInteger(get('workspaceMaxFiles'), DEFAULTS.workspaceMaxFiles, 0),
        serverPath: expandPath(toNonEmptyString(get('serverPath'), DEFAULTS.serverPath), ctx),
        serverArgs: toStringArray(get('serverArgs')).map((arg) => expandPath(arg, ctx)),
    };
}

/** The `initializationOptions` of the `initialize` request. */
export function initializationOptions(settings: CpcSettings): InitializationOptions {
    return {
        model: settings.model,
        gpuLayers: settings.gpuLayers,
        threads: settings.threads,
        contextSize: settings.contextSize,
        remoteVocab: settings.remoteVocab,
        remoteTopK: settings.remoteTopK,
        remoteTimeoutMs: settings.remoteTimeoutMs,
        remoteApi: settings.remoteApi,
        remoteCaFile: settings.remoteCaFile,
        mode: settings.mode,
        multiline: settings.multiline,
        maxTokens: settings.maxTokens,
        items: settings.items,
        debounceMs: settings.debounceMs,
        promptBudgetMs: settings.promptBudgetMs,
        wordBudgetMs: settings.wordBudgetMs,
        warmCache: settings.warmCache,
        logDocuments: settings.logDocuments,
        fusion: settings.fusion,
        fusionWeight: settings.fusionWeight,
        workspaceIndexing: settings.workspaceIndexing,
        workspaceMaxBytes: settings.workspaceMaxBytes,
        workspaceMaxFileBytes: settings.workspaceMaxFileBytes,
        workspaceMaxFiles: settings.workspaceMaxFiles,
    };
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

/** Documents the client serves: any language, saved files and untitled buffers. */
export function documentSelector(): { scheme: string }[] {
    return [{ scheme: 'file' }, { scheme: 'untitled' }];
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
