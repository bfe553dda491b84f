// The thin VS Code layer (out/extension.js) driven without VS Code: a stub
// `vscode` module stands in for the editor API, and a fake LSP server
// (fake-server.js, run by this Node through cpc.serverPath/cpc.serverArgs)
// records what the real vscode-languageclient sends it.
/* eslint-disable @typescript-eslint/no-explicit-any */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { installVscodeStub } from './vscode-stub';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'cpc-vscode-test-'));
const log = path.join(tmp, 'server.log');
process.env.CPC_FAKE_SERVER_LOG = log;
const fakeServer = path.join(__dirname, 'fake-server.js');

const settings: Record<string, unknown> = {
    serverPath: process.execPath,
    serverArgs: [fakeServer, '--log-file', '${userHome}/cpc.log'],
    model: 'smollm2',
    gpuLayers: -1,
    threads: 2,
    contextSize: 100,
    mode: 'heal',
    multiline: true,
    maxTokens: 16,
    items: 0,
    debounceMs: 5,
    logDocuments: true,
    fusionWeight: -2,
    workspaceMaxFiles: 100,
};

const { commands, providers, channels, errors, statusItems, executed, changeConfiguration } = installVscodeStub(settings);
// eslint-disable-next-line @typescript-eslint/no-require-imports
const extension = require('../extension') as typeof import('../extension');

function messages(): any[] {
    if (!fs.existsSync(log)) {
        return [];
    }
    return fs
        .readFileSync(log, 'utf8')
        .split('\n')
        .filter((line) => line !== '')
        .map((line) => JSON.parse(line));
}

async function waitFor(predicate: () => boolean, what: string, timeoutMs = 10000): Promise<void> {
    const start = Date.now();
    while (!predicate()) {
        if (Date.now() - start > timeoutMs) {
            assert.fail(`timed out waiting for ${what}; server log: ${JSON.stringify(messages())}`);
        }
        await new Promise((resolve) => setTimeout(resolve, 20));
    }
}

const count = (method: string) => messages().filter((m) => m.method === method).length;
const spawns = () => messages().filter((m) => m.argv !== undefined);

describe('extension (stub vscode, fake server)', () => {
    const context = { subscriptions: [] as { dispose(): void }[] };

    before(async () => {
        extension.activate(context as any);
        await waitFor(() => count('workspace/didChangeConfiguration') >= 1, 'the first didChangeConfiguration');
    });

    after(async () => {
        await extension.deactivate();
        fs.rmSync(tmp, { recursive: true, force: true });
    });

    it('opens a log output channel named CPC and registers the restart command', () => {
        assert.deepEqual(
            channels.map((c) => [c.name, c.options]),
            [['CPC', { log: true }]],
        );
        for (const command of ['cpc.restartServer', 'cpc.showLog', 'cpc.statusMenu', 'cpc.toggleSuggestions', 'cpc.toggleLanguage']) {
            assert.ok(commands.has(command), command);
        }
    });

    it("shows the server's state from cpc/status notifications in a status bar item", async () => {
        assert.equal(statusItems.length, 1);
        const item = statusItems[0];
        await waitFor(() => item.text.includes('ready'), 'the status item to say ready');
        assert.equal(item.text, '$(check) CPC: ready');
        assert.match(item.tooltip, /fake-model/);
        assert.equal(item.command, 'cpc.statusMenu');
        assert.ok(item.visible && item.backgroundColor === undefined);
        assert.ok(channels[0].lines.some((line) => line.includes('Server state: loading')), channels[0].lines.join('\n'));
    });

    it('asks for the cursor\'s suggestion once when the model becomes ready', () => {
        assert.deepEqual(
            executed.filter((id) => id === 'editor.action.inlineSuggest.trigger'),
            ['editor.action.inlineSuggest.trigger'],
        );
    });

    it('starts serverPath with serverArgs only (expanded), over stdio', () => {
        assert.deepEqual(
            spawns().map((s) => s.argv),
            [['--log-file', `${os.homedir()}/cpc.log`]],
        );
    });

    it('sends the validated settings as initializationOptions', () => {
        const initialize = messages().find((m) => m.method === 'initialize');
        assert.deepEqual(initialize.params.initializationOptions, {
            model: 'smollm2',
            gpuLayers: -1,
            threads: 2,
            contextSize: 512,
            remoteVocab: 'default',
            remoteTopK: 512,
            remoteTimeoutMs: 10000,
            remoteApi: 'auto',
            remoteCaFile: '',
            mode: 'heal',
            multiline: true,
            maxTokens: 16,
            items: 1,
            debounceMs: 5,
            promptBudgetMs: 200,
            wordBudgetMs: 100,
            warmCache: true,
            logDocuments: true,
            fusion: true,
            fusionWeight: 0,
            workspaceIndexing: true,
            workspaceMaxBytes: 20000000,
            workspaceMaxFileBytes: 512000,
            workspaceMaxFiles: 100,
        });
        assert.deepEqual(initialize.params.capabilities.textDocument.inlineCompletion, { dynamicRegistration: true });
    });

    it('registers an inline completion provider for the server', () => {
        assert.ok(providers.some((p) => p.endsWith('registerInlineCompletionItemProvider')), providers.join(', '));
    });

    it('pushes the cpc section in workspace/didChangeConfiguration', () => {
        const change = messages().find((m) => m.method === 'workspace/didChangeConfiguration');
        assert.deepEqual(Object.keys(change.params.settings), ['cpc']);
        assert.equal(change.params.settings.cpc.mode, 'heal');
        assert.equal(change.params.settings.cpc.maxTokens, 16);
        assert.equal(change.params.settings.cpc.logDocuments, true);
    });

    it('restarts the server on cpc.restartServer', async () => {
        await commands.get('cpc.restartServer')!();
        await waitFor(() => count('initialize') === 2, 'a second initialize');
        assert.equal(count('shutdown'), 1);
        assert.equal(count('exit'), 1);
        assert.equal(spawns().length, 2);
    });

    it('restarts when serverArgs change, not when other settings do', async () => {
        changeConfiguration('cpc.maxTokens');
        changeConfiguration('cpc.contextSize', 'cpc.logDocuments');
        await new Promise((resolve) => setTimeout(resolve, 300));
        assert.equal(count('initialize'), 2);
        settings.serverArgs = [fakeServer, '--log-file', '/tmp/other.log'];
        changeConfiguration('cpc.serverArgs');
        await waitFor(() => count('initialize') === 3, 'a third initialize');
        assert.deepEqual(spawns().at(-1).argv, ['--log-file', '/tmp/other.log']);
        assert.deepEqual(errors, []);
    });

    it('stops the server on deactivate', async () => {
        await extension.deactivate();
        assert.equal(count('shutdown'), 3);
        await waitFor(() => count('exit') === 3, 'the third exit');
    });
});
