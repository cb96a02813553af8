// Device sessions for backends (issue 26): the backend mints a short-lived session token with
// its business token and hands it to the device, which verifies with it
// (createVerifyClient({ token: session_token })); the backend then reads the results server to
// server with getSession, so it never has to trust what the device reports. Not retried: a
// mint that failed on the network may have been made, and minting is rate-limited.

import { parseRetryAfter, type ReadOutcome } from './verify-client.ts';
import type { ModuleId, SessionCreated, SessionStatus } from './wire.ts';

export interface SessionClientOptions {
  baseUrl: string;
  /** the backend's business token (lvk_...); never ship it to a device */
  token: string;
  fetch?: typeof globalThis.fetch;
}

export interface SessionRequest {
  module_id: ModuleId;
  /** default 300; the service shortens it to its limit and to the business token's expiry */
  ttl_seconds?: number;
  /** default 3; the service lowers it to its limit */
  max_captures?: number;
}

async function call<T>(o: SessionClientOptions, method: string, path: string, ok: number, body: unknown, signal: AbortSignal | undefined, valid: (json: unknown) => boolean): Promise<ReadOutcome<T>> {
  const doFetch = o.fetch ?? globalThis.fetch;
  const headers: Record<string, string> = { authorization: `Bearer ${o.token}`, accept: 'application/json' };
  if (body !== undefined) headers['content-type'] = 'application/json';
  let res: Response;
  try {
    res = await doFetch(`${o.baseUrl.replace(/\/+$/, '')}${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), signal });
  } catch (err) {
    if (signal?.aborted) throw err;
    return { kind: 'error', httpStatus: 0, code: 'network_error', message: (err as Error).message ?? String(err), retryAfterMs: null, requestId: null };
  }
  const requestId = res.headers.get('x-request-id');
  const text = await res.text();
  let json: unknown;
  try {
    json = text.length > 0 ? JSON.parse(text) : undefined;
  } catch {
    json = undefined;
  }
  if (res.status === ok && valid(json)) return { kind: 'ok', value: json as T, requestId };
  const error = (json as { error?: { code?: unknown; message?: unknown } } | undefined)?.error;
  return {
    kind: 'error', httpStatus: res.status,
    code: res.status === ok ? 'invalid_response' : res.status === 422 ? 'invalid_input' : typeof error?.code === 'string' ? error.code : `http_${res.status}`,
    message: typeof error?.message === 'string' ? error.message : `HTTP ${res.status}`,
    retryAfterMs: parseRetryAfter(res.headers.get('retry-after')), requestId,
  };
}

const isObject = (j: unknown): j is Record<string, unknown> => j !== null && typeof j === 'object';

/** POST /v1/sessions: a session for one module. `session_token` is in this answer only. */
export function createSession(o: SessionClientOptions, input: SessionRequest, options: { signal?: AbortSignal } = {}): Promise<ReadOutcome<SessionCreated>> {
  return call<SessionCreated>(o, 'POST', '/v1/sessions', 201, input, options.signal, (j) => isObject(j) && typeof j.session_token === 'string' && typeof j.session_id === 'string');
}

/** GET /v1/sessions/{id}: the session's state and each verify's results as answered. */
export function getSession(o: SessionClientOptions, sessionId: string, options: { signal?: AbortSignal } = {}): Promise<ReadOutcome<SessionStatus>> {
  return call<SessionStatus>(o, 'GET', `/v1/sessions/${encodeURIComponent(sessionId)}`, 200, undefined, options.signal, (j) => isObject(j) && typeof j.state === 'string' && Array.isArray(j.results));
}

/** DELETE /v1/sessions/{id}: the device's token stops working at once. */
export function revokeSession(o: SessionClientOptions, sessionId: string, options: { signal?: AbortSignal } = {}): Promise<ReadOutcome<null>> {
  return call<null>(o, 'DELETE', `/v1/sessions/${encodeURIComponent(sessionId)}`, 204, undefined, options.signal, () => true);
}
