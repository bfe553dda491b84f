/*
 * The cursor come to rest: pure logic, no `vscode` import (the unit tests run it with Node alone). When the
 * cursor is put somewhere (a click, an arrow key, a jump to a line or a definition), the extension tells the
 * server (`CURSOR_REST_METHOD`), which reads the prompt window there while the user looks, so that the first
 * key typed there does not wait for it. A cursor moved by an edit (a key typed, a paste) is no such news: the
 * edit told the server where it is.
 */

/** The notification: `{ textDocument: { uri }, position }`, the server's `cpc/cursorRest`. */
export const CURSOR_REST_METHOD = 'cpc/cursorRest';

/** What VS Code's `TextEditorSelectionChangeKind` says moved the cursor (1 keyboard, 2 mouse, 3 command). */
export type SelectionChangeKind = 1 | 2 | 3 | undefined;

export interface CursorRest {
    textDocument: { uri: string };
    position: { line: number; character: number };
}

/** A selection change as `CursorRests.after` reads it: the document, its version, what made it, the cursor. */
export interface SelectionChange {
    uri: string;
    version: number;
    kind: SelectionChangeKind;
    empty: boolean;
    position: { line: number; character: number };
}

/**
 * Which selection changes are the cursor put somewhere. Typing can carry the keyboard's kind too, so a
 * change is an edit's when the document's version moved since the last selection change in it.
 *
 * @example
 * const rests = new CursorRests();
 * rests.after({ uri: 'file:///a.py', version: 1, kind: 2, empty: true, position: { line: 3, character: 4 } }); // told
 * rests.after({ uri: 'file:///a.py', version: 2, kind: 1, empty: true, position: { line: 3, character: 5 } }); // undefined: a key typed
 */
export class CursorRests {
    private readonly versions = new Map<string, number>();

    /** The notification for ``change``, or none: none for a selection that is not empty (no cursor to type at),
     * for a change no key, click or command made, and for the cursor moved by an edit. */
    after(change: SelectionChange): CursorRest | undefined {
        const seen = this.versions.get(change.uri);
        this.versions.set(change.uri, change.version);
        if (change.kind === undefined || !change.empty || (seen !== undefined && seen !== change.version)) {
            return undefined;
        }
        return { textDocument: { uri: change.uri }, position: { line: change.position.line, character: change.position.character } };
    }

    /** A document closed: nothing of it is kept. */
    forget(uri: string): void {
        this.versions.delete(uri);
    }
}
