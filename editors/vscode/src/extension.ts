import * as os from 'os';
import * as vscode from 'vscode';
import { LanguageClient, LanguageClientOptions, ServerOptions, State } from 'vscode-languageclient/node';
import {
    API_KEY_SECRET,
    CHANNEL_NAME,
    CONFIG_SECTION,
    CpcSettings,
    PathContext,
    EnableMap,
    documentSelector,
    initializationOptions,
    needsRestart,
    readEnable,
    readSettings,
    serverExecutable,
    startFailureMessage,
    suggestionsOn,
    toggled,
} from './settings';
import {
    STATUS_METHOD, ServerReport, StatusView, isServerStatus, notRunningView, offView, statusReport, statusView,
} from './status';
import { EditorPlace, SHOW_GROWN_COMMAND, SUGGESTION_READY_METHOD, declareGrowth, isForPlace, isSuggestionReady } from './grow';
import { CURSOR_REST_METHOD, CursorRests } from './rest';

let client: LanguageClient | undefined;
/**
 * Clients being replaced by a restart. A settings change that restarts the
 * server (cpc.serverPath, cpc.serverArgs) also makes the old client push
 * workspace/didChangeConfiguration while it is being stopped; that
 * notification is dropped instead of failing with an error message.
 */
const retiring = new WeakSet<LanguageClient>();
let output: vscode.LogOutputChannel | undefined;
/** Shows the server's state (starting, loading the model, ready, error), or that suggestions are off; a click opens CPC's menu. */
let statusItem: vscode.StatusBarItem | undefined;
/** The server's state as the status item shows it while suggestions are on. */
let serverView: StatusView = statusView({ state: 'starting' });
/** Serializes start/stop so that quick restarts do not overlap. */
let pending: Promise<void> = Promise.resolve();
/** VS Code's secret storage: the model server's key (**CPC: Set Remote API Key**). */
let secrets: vscode.SecretStorage | undefined;
/** Which selection changes put the cursor somewhere (`tellRest`). */
const rests = new CursorRests();

function pathContext(): PathContext {
    return { home: os.homedir(), workspaceFolder: vscode.workspace.workspaceFolders?.[0]?.uri.fsPath };
}

function showStatus(view: StatusView = serverView): void {
    serverView = view;
    const language = vscode.window.activeTextEditor?.document.languageId;
    if (language !== undefined && !suggestionsOn(enabled(), language)) {
        view = offView(view, language);
    }
    if (!statusItem) {
        return;
    }
    statusItem.text = view.text;
    statusItem.tooltip = view.tooltip;
    statusItem.backgroundColor = view.kind === 'error' ? new vscode.ThemeColor('statusBarItem.errorBackground') : undefined;
    statusItem.show();
}

/** `cpc.enable`: where suggestions show. */
function enabled(): EnableMap {
    return readEnable(vscode.workspace.getConfiguration(CONFIG_SECTION).get('enable'));
}

/** Asks the server only where suggestions are on (`cpc.enable`): elsewhere VS Code gets none, and no request goes. */
function whereEnabled<T>(document: vscode.TextDocument, ask: () => T): T | null {
    return suggestionsOn(enabled(), document.languageId) ? ask() : null;
}

/**
 * **CPC: Toggle Suggestions** (`languageId` undefined: every language without an entry of its own) and
 * **CPC: Toggle Suggestions for This Language**: `cpc.enable` written where it is set (the workspace's
 * settings if they hold it, else the user's), which the status item and the next key follow.
 */
async function toggleSuggestions(languageId?: string): Promise<void> {
    const config = vscode.workspace.getConfiguration(CONFIG_SECTION);
    const enable = toggled(enabled(), languageId);
    const target = config.inspect('enable')?.workspaceValue !== undefined
        ? vscode.ConfigurationTarget.Workspace : vscode.ConfigurationTarget.Global;
    await config.update('enable', enable, target);
    const on = suggestionsOn(enable, languageId ?? '*');
    output?.info(`Suggestions turned ${on ? 'on' : 'off'} ${languageId ? `in ${languageId} documents` : 'in every language'}`);
    if (!on) {
        void vscode.commands.executeCommand('editor.action.inlineSuggest.hide');
    }
}

/** The status item's menu: suggestions on or off (everywhere, in this language), the status, the log, a restart. */
async function statusMenu(): Promise<void> {
    const enable = enabled();
    const language = vscode.window.activeTextEditor?.document.languageId;
    const turn = (on: boolean) => (on ? 'Turn Suggestions Off' : 'Turn Suggestions On');
    const items: (vscode.QuickPickItem & { run: () => Thenable<unknown> })[] = [
        { label: turn(suggestionsOn(enable, '*')), description: 'every language', run: () => toggleSuggestions() },
        ...(language === undefined ? [] : [{
            label: `${turn(suggestionsOn(enable, language))} for ${language}`, description: 'cpc.enable',
            run: () => toggleSuggestions(language),
        }]),
        { label: 'Show Status', run: () => vscode.commands.executeCommand('cpc.showStatus') },
        { label: 'Show Log', run: () => vscode.commands.executeCommand('cpc.showLog') },
        { label: 'Restart Server', run: () => vscode.commands.executeCommand('cpc.restartServer') },
    ];
    const chosen = await vscode.window.showQuickPick(items, { title: 'CPC' });
    await chosen?.run();
}

function currentSettings(): CpcSettings {
    return readSettings(vscode.workspace.getConfiguration(CONFIG_SECTION), pathContext());
}

async function startClient(): Promise<void> {
    const settings = currentSettings();
    const serverOptions: ServerOptions = serverExecutable(settings, await secrets?.get(API_KEY_SECRET));
    const clientOptions: LanguageClientOptions = {
        documentSelector: documentSelector(),
        // Read again on each (re)start of the server process.
        initializationOptions: () => initializationOptions(currentSettings()),
        synchronize: { configurationSection: CONFIG_SECTION },
        outputChannel: output,
        middleware: {
            provideInlineCompletionItems: (document, position, context, token, next) =>
                whereEnabled(document, () => next(document, position, context, token)),
            provideCompletionItem: (document, position, context, token, next) =>
                whereEnabled(document, () => next(document, position, context, token)),
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
    showStatus(statusView({ state: 'starting' }));
    let lastState = 'starting';
    started.onNotification(STATUS_METHOD, (params: unknown) => {
        if (client !== started || !isServerStatus(params)) {
            return;
        }
        if (params.state !== 'ready') {
            output?.info(`Server state: ${params.state}${params.error ? ` (${params.error})` : ''}`);
        }
        showStatus(statusView(params));
        // The server holds requests made while the model loads, but keys typed before the
        // client had started asked nobody: ask for the cursor's suggestion once, now.
        if (params.state === 'ready' && lastState !== 'ready' && vscode.window.activeTextEditor) {
            void vscode.commands.executeCommand('editor.action.inlineSuggest.trigger');
        }
        lastState = params.state;
    });
    // The server answers a slow request early only for a client that says it will ask again.
    started.registerFeature({
        fillClientCapabilities: (capabilities) => declareGrowth(capabilities),
        initialize: () => undefined,
        getState: () => ({ kind: 'static' }),
        clear: () => undefined,
    });
    // A suggestion answered early (its first word) has grown: ask again where the editor still is,
    // and the server's cache answers with the longer text, which extends the ghost text shown.
    started.onNotification(SUGGESTION_READY_METHOD, (params: unknown) => {
        const place = editorPlace(started);
        const here = client === started && isSuggestionReady(params) && isForPlace(params, place);
        output?.debug(`A suggestion grew at ${JSON.stringify(params)}; the editor is at ${JSON.stringify(place)}: ${
            here ? 'asking again' : 'elsewhere, so not asking'}`);
        if (here) {
            vscode.commands.executeCommand(SHOW_GROWN_COMMAND).then(undefined, (error: unknown) =>
                output?.debug(`Showing the grown suggestion failed: ${String(error)}`));
        }
    });
    started.onDidChangeState((event) => {
        if (event.newState === State.Stopped && client === started && !retiring.has(started)) {
            showStatus(notRunningView('The cpc-lsp process stopped; run "CPC: Restart Server" to start it again.'));
        }
    });
    output?.info(`Starting ${[settings.serverPath, ...settings.serverArgs].join(' ')}`);
    try {
        await started.start();
    } catch (error) {
        const message = startFailureMessage(settings, error);
        output?.error(message);
        showStatus(notRunningView(message));
        void vscode.window.showErrorMessage(message, 'Open Settings').then((choice) => {
            if (choice === 'Open Settings') {
                void vscode.commands.executeCommand('workbench.action.openSettings', `${CONFIG_SECTION}.serverPath`);
            }
        });
    }
}

/** The active editor's document (named as the server names it), version and cursor; none with a selection. */
function editorPlace(languageClient: LanguageClient): EditorPlace | undefined {
    const editor = vscode.window.activeTextEditor;
    if (!editor || !editor.selection.isEmpty) {
        return undefined;
    }
    const cursor = editor.selection.active;
    return {
        uri: languageClient.code2ProtocolConverter.asUri(editor.document.uri),
        version: editor.document.version,
        line: cursor.line,
        character: cursor.character,
    };
}

/** Tells the server where the cursor came to rest (`CursorRests.after`), in a document it serves where suggestions are on. */
function tellRest(event: vscode.TextEditorSelectionChangeEvent): void {
    const started = client;
    const document = event.textEditor.document;
    const selection = event.selections[0];
    if (!started?.isRunning() || !selection || vscode.languages.match(documentSelector(), document) === 0
        || !suggestionsOn(enabled(), document.languageId)) {
        return;
    }
    const rest = rests.after({
        uri: started.code2ProtocolConverter.asUri(document.uri), version: document.version,
        kind: event.kind as 1 | 2 | 3 | undefined, empty: selection.isEmpty, position: selection.active,
    });
    if (rest) {
        started.sendNotification(CURSOR_REST_METHOD, rest).then(undefined, (error: unknown) =>
            output?.debug(`Telling the server where the cursor rests failed: ${String(error)}`));
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

/** **CPC: Show Status**: the server's own account (`cpc/status`), in the CPC log, shown. */
async function showServerStatus(): Promise<void> {
    if (!client?.isRunning()) {
        output?.warn('The cpc-lsp process is not running: run "CPC: Restart Server".');
    } else {
        try {
            const status = await client.sendRequest<ServerReport>(STATUS_METHOD, {});
            for (const line of statusReport(status)) {
                output?.info(line);
            }
        } catch (error) {
            output?.error(`The server did not answer ${STATUS_METHOD}: ${error instanceof Error ? error.message : String(error)}`);
        }
    }
    output?.show(true);
}

/**
 * **CPC: Set Remote API Key**: the key of a team's model server, kept in VS Code's secret storage (never
 * in a settings file) and handed to the server in its environment; an empty entry removes it. The
 * server restarts with it.
 */
async function setRemoteApiKey(): Promise<void> {
    const key = await vscode.window.showInputBox({
        title: 'CPC: the model server\'s API key',
        prompt: 'Sent as "Authorization: Bearer" to the server named by cpc.model. Leave empty to remove it.',
        password: true,
        ignoreFocusOut: true,
    });
    if (key === undefined || !secrets) {
        return; // dismissed
    }
    if (key.trim()) {
        await secrets.store(API_KEY_SECRET, key.trim());
    } else {
        await secrets.delete(API_KEY_SECRET);
    }
    output?.info(key.trim() ? 'The model server key was set: restarting the server.' : 'The model server key was removed: restarting the server.');
    await restart();
}

export function activate(context: vscode.ExtensionContext): void {
    secrets = context.secrets;
    output = vscode.window.createOutputChannel(CHANNEL_NAME, { log: true });
    statusItem = vscode.window.createStatusBarItem('cpc.status', vscode.StatusBarAlignment.Right, 100);
    statusItem.name = 'CPC';
    statusItem.command = 'cpc.statusMenu';
    context.subscriptions.push(
        output,
        statusItem,
        vscode.commands.registerCommand('cpc.statusMenu', statusMenu),
        vscode.commands.registerCommand('cpc.toggleSuggestions', () => toggleSuggestions()),
        vscode.commands.registerCommand('cpc.toggleLanguage', () => {
            const language = vscode.window.activeTextEditor?.document.languageId;
            return language === undefined
                ? vscode.window.showInformationMessage('CPC: no editor is open, so no language to turn suggestions on or off for.')
                : toggleSuggestions(language);
        }),
        vscode.window.onDidChangeActiveTextEditor(() => showStatus()),
        vscode.window.onDidChangeTextEditorSelection(tellRest),
        vscode.workspace.onDidCloseTextDocument((document) =>
            rests.forget(client?.code2ProtocolConverter.asUri(document.uri) ?? document.uri.toString())),
        vscode.commands.registerCommand('cpc.restartServer', restart),
        vscode.commands.registerCommand('cpc.showLog', () => output?.show(true)),
        vscode.commands.registerCommand('cpc.showStatus', showServerStatus),
        vscode.commands.registerCommand('cpc.setRemoteApiKey', setRemoteApiKey),
        vscode.workspace.onDidChangeConfiguration((event) => {
            if (event.affectsConfiguration(`${CONFIG_SECTION}.enable`)) {
                showStatus();
            }
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
