// Growing suggestions: which cpc/suggestionReady notifications ask again (src/grow.ts).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { declareGrowth, isForPlace, isSuggestionReady } from '../grow';

const note = { uri: 'file:///a.py', version: 7, position: { line: 3, character: 12 } };

describe('grown suggestions', () => {
    it('ask again only where the editor still is: document, version and cursor', () => {
        assert.ok(isForPlace(note, { uri: 'file:///a.py', version: 7, line: 3, character: 12 }));
        assert.equal(isForPlace(note, { uri: 'file:///a.py', version: 8, line: 3, character: 13 }), false, 'typed on');
        assert.equal(isForPlace(note, { uri: 'file:///b.py', version: 7, line: 3, character: 12 }), false);
        assert.equal(isForPlace(note, { uri: 'file:///a.py', version: 7, line: 4, character: 12 }), false);
        assert.equal(isForPlace(note, undefined), false, 'no editor, or a selection');
    });

    it('accept only well-formed params', () => {
        assert.ok(isSuggestionReady(note));
        for (const value of [null, 'x', { uri: 'a', version: '7', position: { line: 0, character: 0 } }, { uri: 'a', version: 1 }]) {
            assert.equal(isSuggestionReady(value), false, JSON.stringify(value));
        }
    });

    it('declare to the server that the client asks again, keeping other experimental capabilities', () => {
        const capabilities: { experimental?: unknown } = { experimental: { other: 1 } };
        declareGrowth(capabilities);
        assert.deepEqual(capabilities.experimental, { other: 1, cpc: { suggestionReady: true } });
        const bare: { experimental?: unknown } = {};
        declareGrowth(bare);
        assert.deepEqual(bare.experimental, { cpc: { suggestionReady: true } });
    });
});
