/*
 * The cursor come to rest: pure logic, no `vscode` import (the unit tests run it with Node alone). When the
 * cursor is put somewhere (a click, an arrow key, a jump to a line or a definition), the extension tells the
 * server (`CURSOR_REST_METHOD`), which reads the prompt window there while the user looks, so that the first
 * key typed there does not wait for it. A cursor moved by typing is no such news: the edit said where it is.
 */

/** The notification: `{ textDocument: { uri }, position }`, the server's `cpc/cursorRest`. */
export const CURSOR_REST_METHOD = 'cpc/cursorRest';

/** What VS Code's `TextEditorSelectionChangeKind` says moved the cursor (1 keyboard, 2 mouse, 3 command). */
export type SelectionChangeKind = 1 | 2 | 3 | undefined;

export interface CursorRest {
    textDocument: { uri: string };
    position: { line: number; character: number };
}

/**
 * The notification for a selection change, or none: none for a selection that is not empty (no cursor to
 * type at) and none for a change that no key, click or command made (text typed or pasted moves the
 * cursor with no kind).
 *
 * @example
 * restAfter(2, true, 'file:///a.py', { line: 3, character: 4 }); // { textDocument: { uri: 'file:///a.py' }, position: { line: 3, character: 4 } }
 * restAfter(undefined, true, 'file:///a.py', { line: 3, character: 5 }); // undefined: a key typed
 */
export function restAfter(kind: SelectionChangeKind, empty: boolean, uri: string,
    position: { line: number; character: number }): CursorRest | undefined {
    if (kind === undefined || !empty) {
        return undefined;
    }
    return { textDocument: { uri }, position: { line: position.line, character: position.character } };
}
