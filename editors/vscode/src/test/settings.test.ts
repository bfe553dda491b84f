// Unit tests of the pure settings module, run with Node's test runner
// (`node --test out/test/`); no VS Code needed.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, it } from 'node:test';
import {
    CHANNEL_NAME,
    CONFIG_SECTION,
    DEFAULTS,
    INITIALIZATION_KEYS,
    MODES,
    REMOTE_APIS,
    documentSelector,
    expandPath,
    initializationOptions,
    needsRestart,
    readEnable,
    readSettings,
    serverExecutable,
    suggestionsOn,
    toggled,
    API_KEY_ENV,
    startFailureMessage,
    toInteger,
} from '../settings';

// out/test/settings.test.js -> package.json
const manifest = JSON.parse(fs.readFileSync(path.join(__dirname, '..', '..', 'package.json'), 'utf8'));
const properties: Record<
    string,
    { type: string; default: unknown; minimum?: number; maximum?: number; enum?: string[]; description?: string; markdownDescription?: string }
> =
    manifest.contributes.configuration.properties;

/** A stand-in for vscode.WorkspaceConfiguration. */
function source(values: Record<string, unknown>) {
    return { get: (key: string) => values[key] };
}

describe('readSettings defaults', () => {
    it('gives every default when nothing is set', () => {
        assert.deepEqual(readSettings(source({})), {
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
            fusionWeight: 1,
            workspaceIndexing: true,
            workspaceMaxBytes: 20000000,
            workspaceMaxFileBytes: 512000,
            workspaceMaxFiles: 5000,
            serverPath: 'cpc-lsp',
            serverArgs: [],
            enable: { '*': true },
        });
    });

    it('accepts a plain object and undefined', () => {
        assert.deepEqual(readSettings({}), readSettings(source({})));
        assert.deepEqual(readSettings(undefined), readSettings(source({})));
        assert.equal(readSettings({ maxTokens: 7 }).maxTokens, 7);
    });

    it('keeps set values', () => {
        const set = {
            model: 'smollm2',
            gpuLayers: 99,
            threads: 4,
            contextSize: 4096,
            remoteVocab: '/models/served.gguf',
            remoteTopK: 4096,
            remoteTimeoutMs: 2500,
            remoteApi: 'openai',
            remoteCaFile: '',
            mode: 'heal',
            multiline: true,
            maxTokens: 128,
            items: 3,
            debounceMs: 0,
            promptBudgetMs: 0,
            wordBudgetMs: 0,
            warmCache: false,
            logDocuments: true,
            fusion: false,
            fusionWeight: 0.5,
            workspaceIndexing: false,
            workspaceMaxBytes: 1000,
            workspaceMaxFileBytes: 100,
            workspaceMaxFiles: 10,
            serverPath: '/opt/cpc/bin/cpc-lsp',
            serverArgs: ['--log-file', '/tmp/x.log'],
            enable: { '*': false, python: true },
        };
        assert.deepEqual(readSettings(source(set)), set);
    });

    it('does not share the default serverArgs array', () => {
        const s = readSettings({});
        s.serverArgs.push('--x');
        assert.deepEqual(readSettings({}).serverArgs, []);
        assert.deepEqual(DEFAULTS.serverArgs, []);
    });
});

describe('validation', () => {
    it('clamps items and maxTokens to at least 1, items to at most 5', () => {
        const s = readSettings({ items: 0, maxTokens: -5 });
        assert.equal(s.items, 1);
        assert.equal(s.maxTokens, 1);
        assert.equal(readSettings({ items: -100 }).items, 1);
        assert.equal(readSettings({ items: 500 }).items, 5);
        assert.equal(readSettings({ items: 4.9 }).items, 4);
        assert.equal(readSettings({ maxTokens: 100000 }).maxTokens, 100000);
    });

    it('clamps threads and debounceMs to at least 0, gpuLayers to at least -1', () => {
        const s = readSettings({ threads: -3, debounceMs: -1, gpuLayers: -7 });
        assert.equal(s.threads, 0);
        assert.equal(s.debounceMs, 0);
        assert.equal(s.gpuLayers, -1);
        assert.equal(readSettings({ gpuLayers: -1 }).gpuLayers, -1);
    });

    it('clamps contextSize to at least 512', () => {
        assert.equal(readSettings({ contextSize: 511 }).contextSize, 512);
        assert.equal(readSettings({ contextSize: 0 }).contextSize, 512);
        assert.equal(readSettings({ contextSize: -4096 }).contextSize, 512);
        assert.equal(readSettings({ contextSize: 512 }).contextSize, 512);
        assert.equal(readSettings({ contextSize: 8192 }).contextSize, 8192);
    });

    it('truncates non-integers and parses numeric strings', () => {
        const s = readSettings({ items: 2.9, maxTokens: '64', threads: ' 8 ', debounceMs: 12.5, contextSize: '2048.7' });
        assert.equal(s.items, 2);
        assert.equal(s.maxTokens, 64);
        assert.equal(s.threads, 8);
        assert.equal(s.debounceMs, 12);
        assert.equal(s.contextSize, 2048);
    });

    it('falls back to the default for ill-typed numbers', () => {
        const s = readSettings({ items: 'many', maxTokens: NaN, threads: null, debounceMs: Infinity, gpuLayers: {} });
        assert.equal(s.items, 1);
        assert.equal(s.maxTokens, 48);
        assert.equal(s.threads, 0);
        assert.equal(s.debounceMs, 30);
        assert.equal(s.gpuLayers, 0);
        assert.equal(readSettings({ contextSize: 'large' }).contextSize, 1536);
        assert.equal(readSettings({ contextSize: NaN }).contextSize, 1536);
        assert.equal(readSettings({ contextSize: false }).contextSize, 1536);
        assert.equal(toInteger('', 5, 0), 5);
        assert.equal(toInteger(true, 5, 0), 5);
    });

    it('keeps fractions of fusionWeight, clamps it to at least 0, falls back for non-numbers', () => {
        assert.equal(readSettings({ fusionWeight: 0.25 }).fusionWeight, 0.25);
        assert.equal(readSettings({ fusionWeight: '2.5' }).fusionWeight, 2.5);
        assert.equal(readSettings({ fusionWeight: -1 }).fusionWeight, 0);
        assert.equal(readSettings({ fusionWeight: 'much' }).fusionWeight, 1);
        assert.equal(readSettings({ fusionWeight: NaN }).fusionWeight, 1);
        assert.equal(readSettings({ workspaceMaxFiles: 12.7 }).workspaceMaxFiles, 12);
        assert.equal(readSettings({ fusion: 'false', workspaceIndexing: 'false' }).fusion, false);
    });

    it('accepts only known modes, case-insensitively', () => {
        for (const mode of MODES) {
            assert.equal(readSettings({ mode }).mode, mode);
        }
        assert.equal(readSettings({ mode: 'NAIVE' }).mode, 'naive');
        assert.equal(readSettings({ mode: 'greedy' }).mode, 'cpc');
        assert.equal(readSettings({ mode: 3 }).mode, 'cpc');
    });

    it('reads booleans, and the strings true/false', () => {
        assert.equal(readSettings({ multiline: true }).multiline, true);
        assert.equal(readSettings({ multiline: 'true' }).multiline, true);
        assert.equal(readSettings({ multiline: 'false' }).multiline, false);
        assert.equal(readSettings({ multiline: 1 }).multiline, false);
        assert.equal(readSettings({ logDocuments: true }).logDocuments, true);
        assert.equal(readSettings({ logDocuments: 'true' }).logDocuments, true);
        assert.equal(readSettings({ logDocuments: 'false' }).logDocuments, false);
        assert.equal(readSettings({ logDocuments: 'yes' }).logDocuments, false);
        assert.equal(readSettings({ logDocuments: 1 }).logDocuments, false);
    });

    it('uses the default for empty model and serverPath, trimming blanks', () => {
        assert.equal(readSettings({ model: '  ' }).model, 'default');
        assert.equal(readSettings({ model: 42 }).model, 'default');
        assert.equal(readSettings({ serverPath: '' }).serverPath, 'cpc-lsp');
        assert.equal(readSettings({ serverPath: ' /a/cpc-lsp ' }).serverPath, '/a/cpc-lsp');
    });

    it('keeps string serverArgs in order, stringifies scalars, drops the rest', () => {
        assert.deepEqual(readSettings({ serverArgs: ['--a', 1, true, null, { x: 1 }, ['y'], '--b'] }).serverArgs, [
            '--a',
            '1',
            'true',
            '--b',
        ]);
        assert.deepEqual(readSettings({ serverArgs: '--log-file x' }).serverArgs, []);
    });
});

describe('paths', () => {
    const ctx = { home: '/home/u', workspaceFolder: '/work/repo' };

    it('expands ~, ${userHome} and ${workspaceFolder}', () => {
        assert.equal(expandPath('~', ctx), '/home/u');
        assert.equal(expandPath('~/m.gguf', ctx), '/home/u/m.gguf');
        assert.equal(expandPath('${userHome}/m.gguf', ctx), '/home/u/m.gguf');
        assert.equal(expandPath('${workspaceFolder}/.venv/bin/cpc-lsp', ctx), '/work/repo/.venv/bin/cpc-lsp');
        assert.equal(expandPath('/a/~b', ctx), '/a/~b');
        assert.equal(expandPath('~other/x', ctx), '~other/x');
    });

    it('leaves variables without a value alone', () => {
        assert.equal(expandPath('${workspaceFolder}/x', { home: '/h' }), '${workspaceFolder}/x');
        assert.equal(expandPath('~/x', {}), '~/x');
    });

    it('expands the model path, serverPath and serverArgs but not model names', () => {
        const s = readSettings(
            {
                model: '~/models/a.gguf',
                serverPath: '${workspaceFolder}/.venv/bin/cpc-lsp',
                serverArgs: ['--log-file', '${workspaceFolder}/lsp.log'],
            },
            ctx,
        );
        assert.equal(s.model, '/home/u/models/a.gguf');
        assert.equal(s.serverPath, '/work/repo/.venv/bin/cpc-lsp');
        assert.deepEqual(s.serverArgs, ['--log-file', '/work/repo/lsp.log']);
        assert.equal(readSettings({ model: 'smollm2' }, ctx).model, 'smollm2');
    });
});

describe('initializationOptions', () => {
    it('has exactly the camelCase keys, in order', () => {
        const opts = initializationOptions(readSettings({}));
        assert.deepEqual(Object.keys(opts), [...INITIALIZATION_KEYS]);
        for (const key of Object.keys(opts)) {
            assert.doesNotMatch(key, /[_-]/, `${key} is camelCase`);
        }
    });

    it('carries the validated values and no server command settings', () => {
        const opts = initializationOptions(
            readSettings({
                model: '/m/x.gguf',
                contextSize: 100,
                items: 0,
                maxTokens: 0,
                mode: 'heal',
                multiline: true,
                logDocuments: 'true',
                serverPath: '/x',
                serverArgs: ['--y'],
            }),
        );
        assert.deepEqual(opts, {
            model: '/m/x.gguf',
            gpuLayers: 0,
            threads: 0,
            contextSize: 512,
            remoteVocab: 'default',
            remoteTopK: 512,
            remoteTimeoutMs: 10000,
            remoteApi: 'auto',
            remoteCaFile: '',
            mode: 'heal',
            multiline: true,
            maxTokens: 1,
            items: 1,
            debounceMs: 30,
            promptBudgetMs: 200,
            wordBudgetMs: 100,
            warmCache: true,
            logDocuments: true,
            fusion: true,
            fusionWeight: 1,
            workspaceIndexing: true,
            workspaceMaxBytes: 20000000,
            workspaceMaxFileBytes: 512000,
            workspaceMaxFiles: 5000,
        });
        assert.equal('serverPath' in opts, false);
        assert.equal('serverArgs' in opts, false);
    });

    it('is JSON-serializable as is', () => {
        const opts = initializationOptions(readSettings({ gpuLayers: -1 }));
        assert.deepEqual(JSON.parse(JSON.stringify(opts)), opts);
    });
});

describe('serverExecutable', () => {
    it('runs cpc-lsp with no arguments by default', () => {
        assert.deepEqual(serverExecutable(readSettings({})), { command: 'cpc-lsp', args: [], options: { shell: false } });
    });

    it('passes serverArgs through verbatim, in order', () => {
        const args = ['--log-file', '/tmp/cpc lsp.log', '--model', 'smollm2'];
        const exe = serverExecutable(readSettings({ serverPath: '/r/.venv/bin/cpc-lsp', serverArgs: args }));
        assert.equal(exe.command, '/r/.venv/bin/cpc-lsp');
        assert.deepEqual(exe.args, args);
    });

    it('never puts the model or generation settings on the command line', () => {
        const exe = serverExecutable(
            readSettings({
                model: '/m/x.gguf',
                gpuLayers: 20,
                threads: 3,
                contextSize: 2048,
                mode: 'naive',
                multiline: true,
                maxTokens: 9,
                items: 2,
                debounceMs: 5,
                logDocuments: true,
            }),
        );
        assert.deepEqual(exe.args, []);
        const line = [exe.command, ...exe.args].join(' ');
        for (const needle of ['--model', '/m/x.gguf', 'gpu', 'thread', 'context', '2048', 'naive', 'multiline', 'token', 'items', 'debounce', 'log']) {
            assert.equal(line.toLowerCase().includes(needle), false, `${needle} in ${line}`);
        }
    });

    it('hands the model server key to the server in its environment, never on its command line', () => {
        const exe = serverExecutable(readSettings({ serverArgs: ['--log-file', '/tmp/l'] }), 's3cret-key');
        assert.equal(exe.options.env?.[API_KEY_ENV], 's3cret-key');
        assert.equal(exe.options.env?.PATH, process.env.PATH);
        assert.equal([exe.command, ...exe.args].join(' ').includes('s3cret'), false);
        assert.equal(serverExecutable(readSettings({})).options.env, undefined);
    });

    it('copies the arguments instead of sharing the settings array', () => {
        const s = readSettings({ serverArgs: ['--a'] });
        const exe = serverExecutable(s);
        exe.args.push('--b');
        assert.deepEqual(s.serverArgs, ['--a']);
    });
});

describe('where suggestions show (cpc.enable)', () => {
    it('reads its boolean entries, and every language on without any', () => {
        assert.deepEqual(readEnable({ '*': true, markdown: false, python: 'no' }), { '*': true, markdown: false });
        for (const value of [undefined, null, true, [], 'off', {}, { python: 1 }]) {
            assert.deepEqual(readEnable(value), { '*': true });
        }
        assert.deepEqual(readSettings({}).enable, { '*': true });
    });

    it('asks a language its own entry, then *, then says yes', () => {
        const enable = { '*': false, python: true };
        assert.equal(suggestionsOn(enable, 'python'), true);
        assert.equal(suggestionsOn(enable, 'markdown'), false);
        assert.equal(suggestionsOn({ markdown: false }, 'python'), true);
    });

    it('turns a language, or every language without an entry, the other way', () => {
        assert.deepEqual(toggled({ '*': true }), { '*': false });
        assert.deepEqual(toggled({ '*': false, python: true }), { '*': true, python: true });
        assert.deepEqual(toggled({ '*': true }, 'markdown'), { '*': true, markdown: false });
        assert.deepEqual(toggled({ '*': false, markdown: false }, 'markdown'), { '*': false, markdown: true });
        assert.deepEqual(toggled(toggled({ '*': true, go: false })), { '*': true, go: false });
    });
});

describe('client wiring', () => {
    it('serves every language in file and untitled documents, and in notebooks\' cells', () => {
        assert.deepEqual(documentSelector(), [{ scheme: 'file' }, { scheme: 'untitled' }, { scheme: 'vscode-notebook-cell' }]);
        for (const filter of documentSelector()) {
            assert.equal('language' in filter, false);
        }
    });

    it('restarts only for serverPath and serverArgs', () => {
        const changed = (...sections: string[]) => (section: string) => sections.includes(section);
        assert.equal(needsRestart(changed('cpc.serverPath')), true);
        assert.equal(needsRestart(changed('cpc.serverArgs')), true);
        for (const key of INITIALIZATION_KEYS) {
            assert.equal(needsRestart(changed(`cpc.${key}`)), false, key);
        }
        assert.equal(needsRestart(changed('editor.fontSize')), false);
    });

    it('names the section and the output channel', () => {
        assert.equal(CONFIG_SECTION, 'cpc');
        assert.equal(CHANNEL_NAME, 'CPC');
    });

    it('explains a start failure with the path and the fix', () => {
        const msg = startFailureMessage(readSettings({ serverPath: '/nope/cpc-lsp' }), new Error('spawn /nope/cpc-lsp ENOENT'));
        assert.match(msg, /\/nope\/cpc-lsp/);
        assert.match(msg, /ENOENT/);
        assert.match(msg, /cpc\.serverPath/);
    });
});

describe('package.json agrees with the module', () => {
    const settingKeys = [...INITIALIZATION_KEYS, 'serverPath', 'serverArgs', 'enable'];

    it('declares every setting with a type, a description and the same default', () => {
        for (const key of settingKeys) {
            const prop = properties[`cpc.${key}`];
            assert.ok(prop, `cpc.${key} is declared`);
            assert.ok(prop.type, `cpc.${key} has a type`);
            assert.ok(prop.description || prop.markdownDescription, `cpc.${key} has a description`);
            assert.deepEqual(prop.default, (DEFAULTS as unknown as Record<string, unknown>)[key], `default of cpc.${key}`);
        }
    });

    it('uses integer types for the integer settings and the mode enum', () => {
        for (const key of ['gpuLayers', 'threads', 'contextSize', 'remoteTopK', 'remoteTimeoutMs', 'maxTokens', 'items', 'debounceMs', 'promptBudgetMs', 'wordBudgetMs',
            'workspaceMaxBytes', 'workspaceMaxFileBytes', 'workspaceMaxFiles']) {
            assert.equal(properties[`cpc.${key}`].type, 'integer', key);
        }
        assert.equal(properties['cpc.fusionWeight'].type, 'number');
        for (const key of ['fusion', 'workspaceIndexing', 'warmCache']) {
            assert.equal(properties[`cpc.${key}`].type, 'boolean', key);
        }
        assert.deepEqual(properties['cpc.mode'].enum, [...MODES]);
        assert.deepEqual(properties['cpc.remoteApi'].enum, [...REMOTE_APIS]);
        assert.equal(properties['cpc.multiline'].type, 'boolean');
        assert.equal(properties['cpc.logDocuments'].type, 'boolean');
        assert.equal(properties['cpc.serverArgs'].type, 'array');
    });

    it('declares the same minimum for each integer setting as the module clamps to', () => {
        const minimums: Record<string, number> = {
            gpuLayers: -1, threads: 0, contextSize: 512, remoteTopK: 1, remoteTimeoutMs: 1, maxTokens: 1, items: 1,
            debounceMs: 0,
            fusionWeight: 0, workspaceMaxBytes: 0, workspaceMaxFileBytes: 0, workspaceMaxFiles: 0,
        };
        for (const [key, minimum] of Object.entries(minimums)) {
            assert.equal(properties[`cpc.${key}`].minimum, minimum, `minimum of cpc.${key}`);
            const clamped = (readSettings({ [key]: -100000 }) as unknown as Record<string, unknown>)[key];
            assert.equal(clamped, minimum, `cpc.${key} clamps to ${minimum}`);
        }
        assert.equal(properties['cpc.items'].maximum, 5);
        assert.deepEqual(Object.keys(properties).filter((key) => properties[key].maximum !== undefined), ['cpc.items']);
    });

    it('declares the restart command and the compiled entry point', () => {
        assert.ok(manifest.contributes.commands.some((c: { command: string }) => c.command === 'cpc.restartServer'));
        assert.equal(manifest.main, './out/extension.js');
    });

    it('has no cpc setting outside the known ones except trace.server', () => {
        const extra = Object.keys(properties).filter((k) => !settingKeys.map((s) => `cpc.${s}`).includes(k));
        assert.deepEqual(extra, ['cpc.trace.server']);
    });
});
