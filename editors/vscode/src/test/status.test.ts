// The status bar item's views of the server states (src/status.ts).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isServerStatus, notRunningView, offView, statusReport, statusView } from '../status';

describe('status views', () => {
    it('says loading, ready (with the model) and error (with the reason)', () => {
        assert.equal(statusView({ state: 'loading' }).text, '$(sync~spin) CPC: loading model');
        const ready = statusView({ state: 'ready', model: 'gemma', modelPath: '/m/gemma.gguf' });
        assert.equal(ready.text, '$(check) CPC: ready');
        assert.match(ready.tooltip, /gemma \(\/m\/gemma\.gguf\)/);
        const onGpu = statusView({ state: 'ready', model: 'gemma', placement: { text: 'CUDA0 (NVIDIA H100), 19 of 19 layers offloaded' } });
        assert.match(onGpu.tooltip, /on CUDA0 \(NVIDIA H100\), 19 of 19 layers offloaded/);
        const error = statusView({ state: 'error', error: 'could not load the model: no such file' });
        assert.equal(error.kind, 'error');
        assert.match(error.tooltip, /no such file/);
        assert.match(error.tooltip, /cpc\.model/);
    });

    it('says when the model server does not serve, with its reason (a refused key says where to set it)', () => {
        const reason = 'llama-server at http://gpu:8080 refused this client\'s key (HTTP 401 Invalid API Key) -- set ...';
        const refused = statusView({ state: 'ready', model: 'gemma', serverError: reason });
        assert.equal(refused.text, '$(warning) CPC: model server');
        assert.equal(refused.kind, 'error');
        assert.match(refused.tooltip, /refused this client's key/);
        assert.equal(statusView({ state: 'ready', serverError: null }).text, '$(check) CPC: ready');
    });

    it('says when suggestions are off in the editor\'s language, unless the server has an error to show', () => {
        const off = offView(statusView({ state: 'ready', model: 'gemma' }), 'markdown');
        assert.equal(off.text, '$(circle-slash) CPC: off');
        assert.match(off.tooltip, /off in markdown documents \(cpc\.enable\)\. cpc-lsp is ready: model gemma/);
        const error = statusView({ state: 'error', error: 'no such file' });
        assert.deepEqual(offView(error, 'markdown'), error);
    });

    it('treats an unknown state as starting, and a stopped server as an error', () => {
        assert.equal(statusView({ state: 'starting' }).kind, 'busy');
        assert.equal(statusView({ state: 'something new' }).text, '$(sync~spin) CPC: starting');
        assert.equal(notRunningView('gone').kind, 'error');
    });

    it('reports the state, the requests and the workspace, a line each', () => {
        const report = statusReport({
            state: 'ready', model: 'gemma', requests: 12, from_model: 5, from_cache: 7, warmed: 3,
            workspace: { state: 'ready', files: 3, bytes: 2048, documents: 2, reread: 1 },
        });
        assert.deepEqual(report, [
            'cpc-lsp is ready: model gemma.',
            '12 requests: 5 from the model, 7 from the cache; 3 windows read ahead',
            'workspace: ready; 3 files (2048 bytes), 1 read again since; 2 open documents',
        ]);
        assert.deepEqual(statusReport({ state: 'loading' }), [
            'cpc-lsp is loading the model; suggestions asked for meanwhile come when it is ready.']);
    });

    it('accepts only objects with a string state as a server status', () => {
        assert.ok(isServerStatus({ state: 'ready' }));
        for (const value of [null, undefined, 'ready', { state: 1 }, {}]) {
            assert.equal(isServerStatus(value), false, JSON.stringify(value));
        }
    });
});
