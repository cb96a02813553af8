// Device sessions for backends (issue 26): the backend mints a short-lived session token with
// its business token and hands it to the device, which verifies with it
// (createVerifyClient({ token: session_token })); the backend then reads the results server to
// server with getSession, so it never has to trust what the device reports. Not retried: a
// mint that failed on the network may have been made, and minting is rate-limited.

import { request, type ReadOutcome } from './request.ts';
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

const isObject = (j: unknown): j is Record<string, unknown> => j !== null && typeof j === 'object';

/** POST /v1/sessions: a session for one module. `session_token` is in this answer only. */
export function createSession(o: SessionClientOptions, input: SessionRequest, options: { signal?: AbortSignal } = {}): Promise<ReadOutcome<SessionCreated>> {
  return request<SessionCreated>(o, 'POST', '/v1/sessions', 201, input, options.signal, (j) => isObject(j) && typeof j.session_token === 'string' && typeof j.session_id === 'string');
}

/** GET /v1/sessions/{id}: the session's state and each verify's results as answered. */
export function getSession(o: SessionClientOptions, sessionId: string, options: { signal?: AbortSignal } = {}): Promise<ReadOutcome<SessionStatus>> {
  return request<SessionStatus>(o, 'GET', `/v1/sessions/${encodeURIComponent(sessionId)}`, 200, undefined, options.signal, (j) => isObject(j) && typeof j.state === 'string' && Array.isArray(j.results));
}

/** DELETE /v1/sessions/{id}: the device's token stops working at once. */
export function revokeSession(o: SessionClientOptions, sessionId: string, options: { signal?: AbortSignal } = {}): Promise<ReadOutcome<null>> {
  return request<null>(o, 'DELETE', `/v1/sessions/${encodeURIComponent(sessionId)}`, 204, undefined, options.signal, () => true);
}
