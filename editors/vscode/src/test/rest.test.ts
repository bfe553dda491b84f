import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { CURSOR_REST_METHOD, restAfter } from '../rest';

describe('the cursor come to rest', () => {
    it('is told for a click, a key that moves the cursor or a command, at the cursor', () => {
        for (const kind of [1, 2, 3] as const) {
            assert.deepEqual(restAfter(kind, true, 'file:///a.py', { line: 3, character: 4 }),
                { textDocument: { uri: 'file:///a.py' }, position: { line: 3, character: 4 } });
        }
        assert.equal(CURSOR_REST_METHOD, 'cpc/cursorRest');
    });

    it('is not told for text typed, nor for a selection', () => {
        assert.equal(restAfter(undefined, true, 'file:///a.py', { line: 3, character: 5 }), undefined);
        assert.equal(restAfter(2, false, 'file:///a.py', { line: 3, character: 5 }), undefined);
    });
});
