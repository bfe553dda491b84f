// When cpc-lsp cannot be started, the extension says so (output channel and
// an error message pointing at cpc.serverPath) and deactivates quietly.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { installVscodeStub } from './vscode-stub';

const missing = '/nonexistent/bin/cpc-lsp';
const { channels, commands, errors, statusItems } = installVscodeStub({ serverPath: missing });
// eslint-disable-next-line @typescript-eslint/no-require-imports
const extension = require('../extension') as typeof import('../extension');

async function waitFor(predicate: () => boolean, what: string, timeoutMs = 10000): Promise<void> {
    const start = Date.now();
    while (!predicate()) {
        if (Date.now() - start > timeoutMs) {
            assert.fail(`timed out waiting for ${what}`);
        }
        await new Promise((resolve) => setTimeout(resolve, 20));
    }
}

describe('extension with a missing server', () => {
    it('reports the path and how to fix it, and keeps the restart command', async () => {
        extension.activate({ subscriptions: [] } as never);
        const ours = () => errors.filter((m) => m.startsWith('CPC: could not start'));
        await waitFor(() => ours().length === 1, 'the start failure message');
        assert.match(ours()[0], new RegExp(missing));
        assert.match(ours()[0], /ENOENT/);
        assert.match(ours()[0], /cpc\.serverPath/);
        const lines = channels.find((c) => c.name === 'CPC')!.lines;
        assert.ok(lines.some((l) => l.startsWith('CPC: could not start')), lines.join('\n'));
        assert.ok(commands.has('cpc.restartServer'));
        const item = statusItems[0];
        assert.equal(item.text, '$(error) CPC: server not running');
        assert.match(item.tooltip, /cpc\.serverPath/);
        assert.equal(item.backgroundColor?.id, 'statusBarItem.errorBackground');
    });

    it('deactivates without trying to stop a client that never ran', async () => {
        await extension.deactivate();
        const lines = channels.find((c) => c.name === 'CPC')!.lines;
        assert.equal(
            lines.some((l) => l.startsWith('Stopping the server failed')),
            false,
            lines.join('\n'),
        );
    });
});
