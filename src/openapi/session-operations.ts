// Device sessions (issue 26): /v1/sessions for backends with a business token, and the
// console's list of a token's active sessions. The session token itself is accepted by
// verify and GET /v1/me (operations.ts, security `sessionToken`).

import { Type } from '@sinclair/typebox';
import { MAX_ID_CHARS } from '../admin/index.ts';
import * as ex from './examples.ts';
import { pathParam, retryAfter, type Operation } from './operation.ts';

export const sessionCreated = {
  session_id: 'ses_Qm2Lr8Tz4vX9', session_token: 'lvs_Zq3xY8k2W0vB5nM7pL4rT9sC1dF6gH2jK8aE3uI0oP5',
  module_id: 'rgb_liveness', expires_at: '2026-11-23T09:35:00.000Z', max_captures: 3,
};
export const sessionStatus = {
  session_id: sessionCreated.session_id, module_id: 'rgb_liveness', state: 'active', created_at: '2026-11-23T09:30:00.000Z',
  expires_at: sessionCreated.expires_at, revoked_at: null, max_captures: 3, captures_used: 1,
  results: [{ request_id: ex.REQUEST_ID, status: 'completed', charged_units: 1, results: ex.verifyResponse.results }],
};
export const sessionMe = {
  session: { session_id: sessionCreated.session_id, module_id: 'rgb_liveness', state: 'active', expires_at: sessionCreated.expires_at, max_captures: 3, captures_used: 1, captures_left: 2 },
};

// a session id is ses_ and 12 characters; anything else names no session (404)
const sessionId = pathParam('session_id', sessionCreated.session_id, { type: 'string', minLength: 1, maxLength: 200 }, 'session_id from POST /v1/sessions');

export const SESSION_OPERATIONS: Operation[] = [
  {
    method: 'post', path: '/v1/sessions', operationId: 'createSession', tag: 'business', auth: 'bearer',
    summary: 'Mint a device session: a short-lived token for one module, to hand to a device',
    description: 'Business token only. The module must be granted and enabled. `ttl_seconds` (default 300) is shortened to SESSION_MAX_TTL_SECONDS '
      + '(default 3600) and never runs past the business token\'s expiry; `max_captures` (default 3) is lowered to SESSION_MAX_CAPTURES (default 100). '
      + 'The session token is shown once. Minting is limited per business token (SESSION_MINT_LIMIT per SESSION_MINT_WINDOW_SECONDS, default 120 per 60 s): '
      + 'past it, 429 session_rate_limited with Retry-After.',
    body: { schema: 'SessionCreate', example: { module_id: 'rgb_liveness', ttl_seconds: 300, max_captures: 3 } },
    success: { status: '201', description: 'The session and its token (shown once)', schema: 'SessionCreated', example: sessionCreated },
    errors: ['invalid_token', 'invalid_session_token', 'session_not_allowed', 'module_forbidden', 'module_disabled', 'session_rate_limited', 'payload_too_large', 'invalid_content_length'],
    validation: { example: { detail: [{ loc: ['body', 'module_id'], msg: 'Field required', type: 'missing' }] } },
    errorHeaders: { '429': retryAfter },
  },
  {
    method: 'get', path: '/v1/sessions/{session_id}', operationId: 'getDeviceSession', tag: 'business', auth: 'bearer',
    summary: 'A session\'s state and the results of each verify made with it',
    description: 'Business token that minted it only (any other token: 404). Each verification lists its request_id, status and the result records '
      + 'with the keys and values the verify answer had (on PostgreSQL a record\'s keys may come in another order): a backend decides from this, server to server, without trusting the device.',
    parameters: [sessionId],
    success: { status: '200', description: 'The session', schema: 'SessionStatus', example: sessionStatus },
    errors: ['invalid_token', 'invalid_session_token', 'session_not_allowed', 'session_not_found'],
  },
  {
    method: 'delete', path: '/v1/sessions/{session_id}', operationId: 'revokeDeviceSession', tag: 'business', auth: 'bearer',
    summary: 'Revoke a session at once (its token answers 401 from now on)',
    parameters: [sessionId],
    success: { status: '204', description: 'Revoked (also when it already was)' },
    errors: ['invalid_token', 'invalid_session_token', 'session_not_allowed', 'session_not_found'],
  },
  {
    method: 'get', path: '/admin/api/tokens/{id}/sessions', operationId: 'adminListTokenSessions', tag: 'admin', auth: 'session',
    summary: 'The device sessions of a token still usable now (not revoked, not expired), newest first, at most 100',
    parameters: [pathParam('id', ex.token.id, { type: 'string', minLength: 1, maxLength: MAX_ID_CHARS, pattern: '^[^\\u0000]*$' }, 'token id')],
    success: {
      status: '200', description: 'Active sessions', schema: 'ActiveSessionList',
      example: { sessions: [{ session_id: sessionCreated.session_id, module_id: 'rgb_liveness', state: 'active', created_at: '2026-11-23T09:30:00.000Z', expires_at: sessionCreated.expires_at, max_captures: 3, captures_used: 1 }] },
    },
    errors: ['not_found'],
  },
  {
    method: 'delete', path: '/admin/api/sessions/{session_id}', operationId: 'adminRevokeSession', tag: 'admin', auth: 'session', csrf: true,
    summary: 'Revoke one device session, whichever token minted it (its token answers 401 invalid_session_token from now on)',
    description: 'For a lost or misbehaving device: the business token and its other sessions keep working. The CLI does the same: `session revoke <session_id>`.',
    parameters: [sessionId],
    success: { status: '204', description: 'Revoked (also when it already was, or had expired)' },
    errors: ['not_found'],
  },
];

/** GET /v1/me answers one of two shapes, by the kind of token. */
export const MeAnswer = Type.Unsafe({
  description: 'MeResponse for a business token; SessionMe for a session token',
  anyOf: [{ $ref: '#/components/schemas/MeResponse' }, { $ref: '#/components/schemas/SessionMe' }],
});
