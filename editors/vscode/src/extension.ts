import * as os from 'os';
import * as vscode from 'vscode';
import { LanguageClient, LanguageClientOptions, ServerOptions } from 'vscode-languageclient/node';
import {
    CHANNEL_NAME,
    CONFIG_SECTION,
    CpcSettings,
    PathContext,
    documentSelector,
    initializationOptions,
    needsRestart,
    readSettings,
    serverExecutable,
    startFailureMessage,
} from './settings';

let client: LanguageClient | undefined;
/**
 * Clients being replaced by a restart. A settings change that restarts the
 * server (cpc.serverPath, cpc.serverArgs) also makes the old client push
 * workspace/didChangeConfiguration while it is being stopped; that
 * notification is dropped instead of failing with an error message.
 */
const retiring = new WeakSet<LanguageClient>();
let output: vscode.LogOutputChannel | undefined;
/** Serializes start/stop so that quick restarts do not overlap. */
let pending: Promise<void> = Promise.resolve();

function pathContext(): PathContext {
    return { home: os.homedir(), workspaceFolder: vscode.workspace.workspaceFolders?.[0]?.uri.fsPath };
}

function currentSettings(): CpcSettings {
    return readSettings(vscode.workspace.getConfiguration(CONFIG_SECTION), pathContext());
}

async function startClient(): Promise<void> {
    const settings = currentSettings();
    const serverOptions: ServerOptions = serverExecutable(settings);
    const clientOptions: LanguageClientOptions = {
        documentSelector: documentSelector(),
        // Read again on each (re)start of the server process.
        initializationOptions: () => initializationOptions(currentSettings()),
        synchronize: { configurationSection: CONFIG_SECTION },
        outputChannel: output,
        middleware: {
            workspace: {
                didChangeConfiguration: async (sections, next) => {
                    if (retiring.has(started)) {
                        return;
                    }
                    try {
                        await next(sections);
                    } catch (error) {
                        if (!retiring.has(started)) {
                            throw error;
                        }
                    }
                },
            },
        },
    };
    const started: LanguageClient = new LanguageClient(CONFIG_SECTION, CHANNEL_NAME, serverOptions, clientOptions);
    client = started;
    output?.info(`Starting ${[settings.serverPath, ...settings.serverArgs].join(' ')}`);
    try {
        await started.start();
    } catch (error) {
        const message = startFailureMessage(settings, error);
        output?.error(message);
        void vscode.window.showErrorMessage(message, 'Open Settings').then((choice) => {
            if (choice === 'Open Settings') {
                void vscode.commands.executeCommand('workbench.action.openSettings', `${CONFIG_SECTION}.serverPath`);
            }
        });
    }
}

async function stopClient(): Promise<void> {
    const old = client;
    client = undefined;
    if (old) {
        retiring.add(old);
    }
    // A client whose start failed has nothing left to stop.
    if (old?.needsStop()) {
        try {
            await old.dispose();
        } catch (error) {
            output?.error(`Stopping the server failed: ${error instanceof Error ? error.message : String(error)}`);
        }
    }
}

function restart(): Promise<void> {
    if (client) {
        retiring.add(client); // at once, before the old client's own listeners run
    }
    pending = pending.then(stopClient).then(startClient);
    return pending;
}

export function activate(context: vscode.ExtensionContext): void {
    output = vscode.window.createOutputChannel(CHANNEL_NAME, { log: true });
    context.subscriptions.push(
        output,
        vscode.commands.registerCommand('cpc.restartServer', restart),
        vscode.workspace.onDidChangeConfiguration((event) => {
            // Other cpc settings reach the running server through
            // workspace/didChangeConfiguration (synchronize.configurationSection).
            if (needsRestart((section) => event.affectsConfiguration(section))) {
                void restart();
            }
        }),
    );
    // Not awaited: activation does not wait for the server (and its model) to start.
    pending = pending.then(startClient);
}

export function deactivate(): Promise<void> {
    pending = pending.then(stopClient);
    return pending;
}
