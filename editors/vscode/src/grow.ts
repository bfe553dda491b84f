/*
 * Growing suggestions: pure logic, no `vscode` import (the unit tests run it
 * with Node alone). The server answers a slow request early (its first
 * word) and sends `cpc/suggestionReady` when the rest of the line is ready;
 * the extension then asks again (`SHOW_GROWN_COMMAND`) and the server's
 * suggestion cache answers with the longer text.
 */

/**
 * The command that shows a grown suggestion in place of the one on screen. VS Code keeps a shown
 * suggestion when it asks its providers again (`editor.action.inlineSuggest.trigger` refetches, puts the
 * item on screen first and the new one after it, so that nothing flickers), and it skips an automatic
 * refetch at the same position and version. `showNext` does both steps in one: an explicit refetch (the
 * server's suggestion cache answers with the longer text), then the next item, the grown one, is selected.
 * When the server has nothing longer, VS Code merges the equal item and stays on it. The server takes this
 * refetch, the first ask at the place it named, for no request of alternatives (a user's Alt+] is one).
 */
export const SHOW_GROWN_COMMAND = 'editor.action.inlineSuggest.showNext';

/** The notification the server sends when a suggestion shown at a position has grown. */
export const SUGGESTION_READY_METHOD = 'cpc/suggestionReady';

/**
 * The client capability (`capabilities.experimental`) that tells the server this client asks again on
 * `SUGGESTION_READY_METHOD`; a client without it gets each suggestion whole, however long it takes.
 */
export const GROWTH_CAPABILITY = { cpc: { suggestionReady: true } };

/**
 * Adds `GROWTH_CAPABILITY` to a client's capabilities, keeping any other experimental entry.
 *
 * @example
 * const capabilities = { experimental: { other: 1 } };
 * declareGrowth(capabilities); // capabilities.experimental: { other: 1, cpc: { suggestionReady: true } }
 */
export function declareGrowth(capabilities: { experimental?: unknown }): void {
    const experimental = capabilities.experimental;
    const others = typeof experimental === 'object' && experimental !== null && !Array.isArray(experimental) ? experimental : {};
    capabilities.experimental = { ...others, ...GROWTH_CAPABILITY };
}

/** Its params: the document, its version and the cursor position the suggestion was answered for. */
export interface SuggestionReady {
    uri: string;
    version: number;
    position: { line: number; character: number };
}

/** Where the editor is now: the active document (as the server names it), its version, and an empty selection's position. */
export interface EditorPlace {
    uri: string;
    version: number;
    line: number;
    character: number;
}

export function isSuggestionReady(value: unknown): value is SuggestionReady {
    const note = value as SuggestionReady;
    return typeof value === 'object' && value !== null && typeof note.uri === 'string'
        && typeof note.version === 'number' && typeof note.position === 'object' && note.position !== null
        && typeof note.position.line === 'number' && typeof note.position.character === 'number';
}

/** Whether the grown suggestion is for where the editor is now: the same document, version and cursor. */
export function isForPlace(note: SuggestionReady, place: EditorPlace | undefined): boolean {
    return place !== undefined && note.uri === place.uri && note.version === place.version
        && note.position.line === place.line && note.position.character === place.character;
}
