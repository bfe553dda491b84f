/*
 * What the status bar item says about the server: pure logic, no `vscode`
 * import (the unit tests run it with Node alone). The server pushes its
 * state in `cpc/status` notifications (the same object as the answer to the
 * `cpc/status` request) whenever a model load starts or ends.
 */

/** The `cpc/status` notification and request method. */
export const STATUS_METHOD = 'cpc/status';

/** The part of the server's `cpc/status` object the status item shows. */
export interface ServerStatus {
    /** `starting` (no load asked yet), `loading`, `ready` or `error` (the last load failed). */
    state: string;
    model?: string | null;
    modelPath?: string | null;
    /** Where the model runs: `text` is e.g. "CUDA0 (NVIDIA H100 80GB HBM3), 19 of 19 layers offloaded". */
    placement?: { text?: string } | null;
    error?: string | null;
    /** Why the model's server does not serve (unreachable, another model, a refused key); null while it does. */
    serverError?: string | null;
}

/** The status item's look: `kind` picks its colours. */
export interface StatusView {
    text: string;
    tooltip: string;
    kind: 'busy' | 'ready' | 'error';
}

const CLICK = "Click for CPC's menu: suggestions on or off, the server's status, its log.";

/** The view of a server state from a `cpc/status` notification. */
export function statusView(status: ServerStatus): StatusView {
    switch (status.state) {
        case 'loading':
            return {
                text: '$(sync~spin) CPC: loading model',
                tooltip: `cpc-lsp is loading the model; suggestions asked for meanwhile come when it is ready. ${CLICK}`,
                kind: 'busy',
            };
        case 'ready':
            if (status.serverError) {
                return { text: '$(warning) CPC: model server', tooltip: `${status.serverError}. ${CLICK}`, kind: 'error' };
            }
            return {
                text: '$(check) CPC: ready',
                tooltip: `cpc-lsp is ready: model ${status.model ?? '?'}${status.modelPath ? ` (${status.modelPath})` : ''}${
                    status.placement?.text ? `, on ${status.placement.text}` : ''
                }. ${CLICK}`,
                kind: 'ready',
            };
        case 'error':
            return {
                text: '$(error) CPC: model error',
                tooltip: `${status.error ?? 'the model could not be loaded'}. Check the cpc.model setting. ${CLICK}`,
                kind: 'error',
            };
        default:
            return { text: '$(sync~spin) CPC: starting', tooltip: `cpc-lsp is starting. ${CLICK}`, kind: 'busy' };
    }
}

/**
 * The view while suggestions are off in the editor's language (`cpc.enable`): `server`'s own view unless that
 * is an error, which still shows (the server keeps running and reading the documents meanwhile).
 */
export function offView(server: StatusView, languageId: string): StatusView {
    if (server.kind === 'error') {
        return server;
    }
    return {
        text: '$(circle-slash) CPC: off',
        tooltip: `Suggestions are off in ${languageId} documents (cpc.enable). ${server.tooltip}`,
        kind: server.kind,
    };
}

/** The view while the server process is not running (it could not start, or it stopped). */
export function notRunningView(reason: string): StatusView {
    return { text: '$(error) CPC: server not running', tooltip: `${reason} ${CLICK}`, kind: 'error' };
}

/** Whether a notification's params are a server status (anything else is ignored, not shown). */
export function isServerStatus(value: unknown): value is ServerStatus {
    return typeof value === 'object' && value !== null && typeof (value as ServerStatus).state === 'string';
}

/** The server's `cpc/status` as **CPC: Show Status** reads it: the state, the requests, what fusion has read. */
export interface ServerReport extends ServerStatus {
    requests?: number;
    from_model?: number;
    from_cache?: number;
    /** Prompt windows read ahead while the editor was quiet (a file opened, an edit, the cursor come to rest). */
    warmed?: number;
    workspace?: {
        state?: string;
        files?: number;
        bytes?: number;
        documents?: number;
        reread?: number;
    } | null;
}

/**
 * **CPC: Show Status**: what the server says of itself, a line each (Neovim's `:CpcStatus` says the same):
 * its state and model, its requests and how they were answered, and what fusion has read of the workspace.
 */
export function statusReport(status: ServerReport): string[] {
    const count = (value: number | undefined) => value ?? 0;
    const lines = [statusView(status).tooltip.replace(` ${CLICK}`, '')];
    if (status.state === 'ready') {
        lines.push(`${count(status.requests)} requests: ${count(status.from_model)} from the model, ${
            count(status.from_cache)} from the cache; ${count(status.warmed)} windows read ahead`);
    }
    const workspace = status.workspace;
    if (workspace) {
        lines.push(`workspace: ${workspace.state ?? '?'}; ${count(workspace.files)} files (${count(workspace.bytes)} bytes)${
            workspace.reread ? `, ${workspace.reread} read again since` : ''}; ${count(workspace.documents)} open documents`);
    }
    return lines;
}
