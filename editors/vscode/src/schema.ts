// Generated from lsp_server/schema.py by tools/settings_schema.py: do not edit; run `.venv/bin/python tools/settings_schema.py --write`.

/** The values of `cpc.remoteApi`. */
export const REMOTE_APIS = ['auto', 'llama-server', 'openai'] as const;
export type RemoteApi = (typeof REMOTE_APIS)[number];

/** The values of `cpc.mode`. */
export const MODES = ['naive', 'heal', 'cpc'] as const;
export type Mode = (typeof MODES)[number];

/** The server's settings, sent in `initialize` (camelCase, exactly these keys). */
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

/** How a value is read: its JSON type, and its range or its values. */
export interface SettingSpec {
    type: 'string' | 'integer' | 'number' | 'boolean';
    minimum?: number;
    maximum?: number;
    choices?: readonly string[];
}

/** The server's defaults. */
export const SERVER_DEFAULTS: Readonly<InitializationOptions> = Object.freeze({
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
    workspaceMaxBytes: 20000000,
    workspaceMaxFileBytes: 512000,
    workspaceMaxFiles: 5000,
});

/** Each setting's type and range. */
export const SCHEMA: Readonly<Record<keyof InitializationOptions, SettingSpec>> = Object.freeze({
    model: { type: 'string' },
    gpuLayers: { type: 'integer', minimum: -1 },
    threads: { type: 'integer', minimum: 0 },
    contextSize: { type: 'integer', minimum: 512 },
    remoteVocab: { type: 'string' },
    remoteTopK: { type: 'integer', minimum: 1 },
    remoteTimeoutMs: { type: 'integer', minimum: 1 },
    remoteApi: { type: 'string', choices: REMOTE_APIS },
    remoteCaFile: { type: 'string' },
    mode: { type: 'string', choices: MODES },
    multiline: { type: 'boolean' },
    maxTokens: { type: 'integer', minimum: 1 },
    items: { type: 'integer', minimum: 1, maximum: 5 },
    debounceMs: { type: 'integer', minimum: 0 },
    promptBudgetMs: { type: 'integer', minimum: 0 },
    wordBudgetMs: { type: 'integer', minimum: 0 },
    warmCache: { type: 'boolean' },
    logDocuments: { type: 'boolean' },
    fusion: { type: 'boolean' },
    fusionWeight: { type: 'number', minimum: 0 },
    workspaceIndexing: { type: 'boolean' },
    workspaceMaxBytes: { type: 'integer', minimum: 0 },
    workspaceMaxFileBytes: { type: 'integer', minimum: 0 },
    workspaceMaxFiles: { type: 'integer', minimum: 0 },
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
