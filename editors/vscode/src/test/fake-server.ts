// A minimal LSP server over stdio for the extension test: it appends its
// command-line arguments and every message it receives to the file named by
// $CPC_FAKE_SERVER_LOG (one JSON object a line), and answers initialize
// (advertising inline completions) and shutdown; after `initialized` it
// reports a model load as cpc-lsp does (`cpc/status` notifications: loading,
// then ready).
import * as fs from 'node:fs';

const log = process.env.CPC_FAKE_SERVER_LOG;
if (!log) {
    throw new Error('CPC_FAKE_SERVER_LOG is not set');
}
const record = (value: unknown) => fs.appendFileSync(log, JSON.stringify(value) + '\n');

function send(message: unknown): void {
    const body = Buffer.from(JSON.stringify(message), 'utf8');
    process.stdout.write(`Content-Length: ${body.length}\r\n\r\n`);
    process.stdout.write(body);
}

record({ argv: process.argv.slice(2) });
let buffer = Buffer.alloc(0);
process.stdin.on('data', (chunk: Buffer) => {
    buffer = Buffer.concat([buffer, chunk]);
    for (;;) {
        const end = buffer.indexOf('\r\n\r\n');
        if (end < 0) {
            return;
        }
        const length = Number(/Content-Length: (\d+)/i.exec(buffer.subarray(0, end).toString('ascii'))?.[1]);
        if (buffer.length < end + 4 + length) {
            return;
        }
        const message = JSON.parse(buffer.subarray(end + 4, end + 4 + length).toString('utf8'));
        buffer = buffer.subarray(end + 4 + length);
        record(message);
        if (message.method === 'initialize') {
            send({
                jsonrpc: '2.0',
                id: message.id,
                result: { capabilities: { textDocumentSync: 1, inlineCompletionProvider: true }, serverInfo: { name: 'fake-cpc-lsp' } },
            });
        } else if (message.method === 'initialized') {
            send({ jsonrpc: '2.0', method: 'cpc/status', params: { state: 'loading', ready: false, model: null } });
            send({ jsonrpc: '2.0', method: 'cpc/status', params: { state: 'ready', ready: true, model: 'fake-model' } });
        } else if (message.method === 'shutdown') {
            send({ jsonrpc: '2.0', id: message.id, result: null });
        } else if (message.method === 'exit') {
            process.exit(0);
        }
    }
});
