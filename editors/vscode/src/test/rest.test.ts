import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { CURSOR_REST_METHOD, CursorRests, SelectionChange } from '../rest';

const at = (version: number, kind: SelectionChange['kind'], character = 4, empty = true): SelectionChange =>
    ({ uri: 'file:///a.py', version, kind, empty, position: { line: 3, character } });

describe('the cursor come to rest', () => {
    it('is told for a click, a key that moves the cursor or a command, at the cursor', () => {
        const rests = new CursorRests();
        for (const kind of [1, 2, 3] as const) {
            assert.deepEqual(rests.after(at(1, kind)), { textDocument: { uri: 'file:///a.py' }, position: { line: 3, character: 4 } });
        }
        assert.equal(CURSOR_REST_METHOD, 'cpc/cursorRest');
    });

    it('is not told for the cursor an edit moved, for a selection, nor for a change of no kind', () => {
        const rests = new CursorRests();
        assert.ok(rests.after(at(1, 2)));
        assert.equal(rests.after(at(2, 1, 5)), undefined, 'a key typed');
        assert.ok(rests.after(at(2, 1, 4)), 'an arrow key after it');
        assert.equal(rests.after(at(2, 2, 4, false)), undefined);
        assert.equal(rests.after(at(3, undefined)), undefined);
    });

    it('is told again for a document closed and opened again', () => {
        const rests = new CursorRests();
        assert.ok(rests.after(at(5, 2)));
        rests.forget('file:///a.py');
        assert.ok(rests.after(at(1, 2)));
    });
});
