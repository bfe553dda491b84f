// A stand-in for the `vscode` module, enough for vscode-languageclient and
// out/extension.js to run under plain Node. installVscodeStub() makes
// `require('vscode')` return it and gives access to what the code did with it.
/* eslint-disable @typescript-eslint/no-explicit-any */
import Module from 'node:module';

export interface VscodeStub {
    /** Registered commands by id. */
    commands: Map<string, (...args: any[]) => any>;
    /** Names of the register* calls made on APIs the stub does not model (e.g. languages.registerInlineCompletionItemProvider). */
    providers: string[];
    /** Output channels created: name, creation options and lines written. */
    channels: { name: string; options: unknown; lines: string[] }[];
    /** Messages passed to window.showErrorMessage. */
    errors: string[];
    /** Commands run with commands.executeCommand, in order. */
    executed: string[];
    /** Status bar items created: id, and what the code set on them. */
    statusItems: StatusItem[];
    /** Fire workspace.onDidChangeConfiguration for these settings (e.g. 'cpc.serverArgs'). */
    changeConfiguration(...changed: string[]): void;
}

/** A status bar item as the code leaves it. */
export interface StatusItem {
    id: string;
    text: string;
    tooltip: string;
    command?: string;
    backgroundColor?: { id: string };
    visible: boolean;
}

/** `settings` is the live `cpc` section: change it, then call changeConfiguration. */
export function installVscodeStub(settings: Record<string, unknown>): VscodeStub {
    const commands = new Map<string, (...args: any[]) => any>();
    const providers: string[] = [];
    const channels: { name: string; options: unknown; lines: string[] }[] = [];
    const errors: string[] = [];
    const statusItems: StatusItem[] = [];
    const executed: string[] = [];
    const configurationListeners: ((event: any) => void)[] = [];
    /** What VS Code does when settings change: tell every listener (the client's and the extension's). */
    function changeConfiguration(...changed: string[]): void {
        const event = { affectsConfiguration: (section: string) => changed.some((c) => c === section || c.startsWith(`${section}.`)) };
        configurationListeners.forEach((listener) => listener(event));
    }

    /** Any API the test does not care about: every property and call gives another stub. */
    function anything(name: string): any {
        return new Proxy(function () {}, {
            get(_target, property) {
                if (property === 'then') {
                    return undefined; // not a thenable
                }
                if (property === 'dispose') {
                    return () => {};
                }
                return anything(`${name}.${String(property)}`);
            },
            apply() {
                if (/^register/.test(name.split('.').pop() ?? '')) {
                    providers.push(name);
                }
                return anything(`${name}()`);
            },
            construct() {
                return anything(`new ${name}`);
            },
        });
    }

    function withFallback<T extends object>(name: string, known: T): T {
        return new Proxy(known, { get: (target: any, p) => (p in target ? target[p] : anything(`${name}.${String(p)}`)) });
    }

    class EventEmitter {
        private listeners: ((e: unknown) => void)[] = [];
        event = (listener: (e: unknown) => void) => {
            this.listeners.push(listener);
            return { dispose() {} };
        };
        fire(e: unknown) {
            this.listeners.forEach((l) => l(e));
        }
        dispose() {}
    }

    class Disposable {
        constructor(private readonly callback?: () => void) {}
        dispose() {
            this.callback?.();
        }
        static from(...items: { dispose(): void }[]) {
            return new Disposable(() => items.forEach((d) => d.dispose()));
        }
    }

    function logChannel(name: string, options: unknown) {
        const channel = { name, options, lines: [] as string[] };
        channels.push(channel);
        const write = (m: string) => channel.lines.push(m);
        return {
            name,
            logLevel: 0,
            onDidChangeLogLevel: () => ({ dispose() {} }),
            info: write,
            warn: write,
            error: write,
            debug: write,
            trace: write,
            append: write,
            appendLine: write,
            replace() {},
            clear() {},
            show() {},
            hide() {},
            dispose() {},
        };
    }

    function createStatusBarItem(id: string) {
        const item: StatusItem & { show(): void; hide(): void; dispose(): void } = {
            id,
            text: '',
            tooltip: '',
            visible: false,
            show() {
                item.visible = true;
            },
            hide() {
                item.visible = false;
            },
            dispose() {},
        };
        statusItems.push(item);
        return item;
    }

    class ThemeColor {
        constructor(readonly id: string) {}
    }

    const vscodeStub = withFallback('vscode', {
        version: '1.91.0',
        EventEmitter,
        Disposable,
        ThemeColor,
        StatusBarAlignment: { Left: 1, Right: 2 },
        env: withFallback('env', { language: 'en', appName: 'stub', machineId: 'test' }),
        workspace: withFallback('workspace', {
            workspaceFolders: undefined,
            textDocuments: [],
            notebookDocuments: [],
            getConfiguration: (section?: string) => ({
                get: (key: string, fallback?: unknown) =>
                    section === 'cpc' ? (settings[key] ?? fallback) : key === 'cpc' && section === undefined ? settings : fallback,
                has: () => false,
            }),
            onDidChangeConfiguration: (listener: (event: any) => void) => {
                configurationListeners.push(listener);
                return { dispose() {} };
            },
        }),
        window: withFallback('window', {
            activeTextEditor: { document: { uri: 'file:///stub.py' } },
            createOutputChannel: logChannel,
            createStatusBarItem,
            showErrorMessage: (message: string) => {
                errors.push(message);
                return Promise.resolve(undefined);
            },
        }),
        commands: withFallback('commands', {
            registerCommand: (id: string, callback: (...args: any[]) => any) => {
                commands.set(id, callback);
                return { dispose() {} };
            },
            executeCommand: (id: string) => {
                executed.push(id);
                return Promise.resolve(undefined);
            },
        }),
    });

    const moduleApi = Module as any;
    const resolveFilename = moduleApi._resolveFilename;
    moduleApi._resolveFilename = function (request: string, ...rest: unknown[]) {
        return request === 'vscode' ? 'vscode' : resolveFilename.call(this, request, ...rest);
    };
    require.cache.vscode = { id: 'vscode', filename: 'vscode', loaded: true, exports: vscodeStub } as any;

    return { commands, providers, channels, errors, statusItems, executed, changeConfiguration };
}
