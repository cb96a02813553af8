import type { Static } from '@sinclair/typebox';
import { generateSessionToken, newSessionId, hashToken } from '../auth/index.ts';
import type { Config } from '../config/index.ts';
import { retryAfter, ServiceError } from '../errors/index.ts';
import { type DeviceSessions, type ModuleReads, type UsageReads, deviceSessionState, type DeviceSession, type DeviceSessionState, type TokenRecord } from '../store/index.ts';
import { DEFAULT_MAX_CAPTURES, DEFAULT_TTL_SECONDS, type SessionCreateSchema } from './schemas.ts';

// Device sessions (issue 26) as the /v1/sessions routes and GET /v1/me use them. The store
// keeps them (src/store/device-sessions.ts); the verify use case charges them.

/** One verify call of a session as GET /v1/sessions/{id} answers it. */
export interface SessionVerification {
  request_id: string;
  status: 'completed' | 'pending' | 'refunded' | 'settlement_failed';
  charged_units: number;
  /** the result records as the verify answer had them */
  results: unknown[] | null;
}

export type SessionLimits = Pick<Config, 'SESSION_MAX_TTL_SECONDS' | 'SESSION_MAX_CAPTURES' | 'SESSION_MINT_LIMIT' | 'SESSION_MINT_WINDOW_SECONDS'>;

/** Mints a session of `token` for one of its granted, enabled modules. */
export async function mintSession(store: ModuleReads & DeviceSessions, limits: SessionLimits, token: TokenRecord, input: Static<typeof SessionCreateSchema>, at: number) {
  if (!token.grants.some((g) => g.module_id === input.module_id)) throw new ServiceError('module_forbidden');
  if (!(await store.moduleEnabled(input.module_id))) throw new ServiceError('module_disabled');
  const ttlMs = Math.min(input.ttl_seconds ?? DEFAULT_TTL_SECONDS, limits.SESSION_MAX_TTL_SECONDS) * 1000;
  // never outliving the token that pays for it
  const expires = token.expires_at === null ? at + ttlMs : Math.min(at + ttlMs, Date.parse(token.expires_at));
  const plaintext = generateSessionToken();
  const session: DeviceSession = {
    id: newSessionId(),
    hash: hashToken(plaintext),
    token_id: token.id,
    module_id: input.module_id,
    created_at: new Date(at).toISOString(),
    expires_at: new Date(expires).toISOString(),
    max_captures: Math.min(input.max_captures ?? DEFAULT_MAX_CAPTURES, limits.SESSION_MAX_CAPTURES),
    captures_used: 0,
    revoked_at: null,
  };
  const out = await store.createDeviceSession(session, { limit: limits.SESSION_MINT_LIMIT, windowMs: limits.SESSION_MINT_WINDOW_SECONDS * 1000 }, at);
  if (out.kind === 'rate_limited') {
    throw new ServiceError('session_rate_limited', `This token minted ${limits.SESSION_MINT_LIMIT} sessions in the last ${limits.SESSION_MINT_WINDOW_SECONDS} s; retry after the indicated delay`, retryAfter(out.retryAfterSeconds));
  }
  return { session_id: session.id, session_token: plaintext, module_id: session.module_id, expires_at: session.expires_at, max_captures: session.max_captures };
}

const SESSION_ID = /^ses_[A-Za-z0-9_-]{12}$/;

/** The session `id` of `token`; another token's, or none, is 404 alike (an id says nothing of
 * whether it exists elsewhere). */
export async function ownSession(store: DeviceSessions, token: TokenRecord, id: string): Promise<DeviceSession> {
  // the shape first: an id that could never be minted (a NUL, megabytes) never reaches the store
  const s = SESSION_ID.test(id) ? await store.getDeviceSession(id) : undefined;
  if (!s || s.token_id !== token.id) throw new ServiceError('session_not_found');
  return s;
}

/** The session as its business token lets it be: a session never outlives the token's
 * expires_at (docs/sessions.md), and one minted before the token's expiry was moved earlier
 * (token patch, `cli token expire`) kept its own later expires_at, read as active after the
 * token had died (the verify path refused it all the same). */
export function withinToken(s: DeviceSession, token: Pick<TokenRecord, 'expires_at'>): DeviceSession {
  return token.expires_at !== null && Date.parse(token.expires_at) < Date.parse(s.expires_at) ? { ...s, expires_at: token.expires_at } : s;
}

/** What a backend reads to decide, server to server: the state and every call's results. */
export async function sessionStatus(store: DeviceSessions & Pick<UsageReads, 'getResults' | 'getReservation'>, s: DeviceSession, at: number) {
  const results: SessionVerification[] = [];
  for (const call of await store.listDeviceSessionCalls(s.id)) {
    if (call.refunded) {
      results.push({ request_id: call.request_id, status: 'refunded', charged_units: 0, results: null });
      continue;
    }
    const stored = await store.getResults(call.request_id);
    if (stored) {
      results.push({ request_id: call.request_id, status: 'completed', charged_units: call.units, results: stored.results as unknown[] });
      continue;
    }
    // not settled yet, held for the operator, or settled long enough ago that retention took
    // the reservation and the results (the charge stands)
    const r = await store.getReservation(call.reservation_id);
    const status = r?.state === 'pending' || r?.state === 'settlement_failed' ? r.state : r?.state === 'refunded' ? 'refunded' : 'completed';
    results.push({ request_id: call.request_id, status, charged_units: status === 'refunded' ? 0 : call.units, results: null });
  }
  return {
    session_id: s.id, module_id: s.module_id, state: deviceSessionState(s, at), created_at: s.created_at, expires_at: s.expires_at,
    revoked_at: s.revoked_at, max_captures: s.max_captures, captures_used: s.captures_used, results,
  };
}

/** GET /v1/me with a session token: the session, never the business token behind it. */
export interface SessionMe {
  session: { session_id: string; module_id: string; state: DeviceSessionState; expires_at: string; max_captures: number; captures_used: number; captures_left: number };
}

export function sessionMe(s: DeviceSession, at: number): SessionMe {
  return {
    session: {
      session_id: s.id, module_id: s.module_id, state: deviceSessionState(s, at), expires_at: s.expires_at,
      max_captures: s.max_captures, captures_used: s.captures_used, captures_left: Math.max(0, s.max_captures - s.captures_used),
    },
  };
}

/** An operator's revocation of one session (console, admin API, CLI), whichever token minted
 * it: undefined when no session has that id. Revoking twice keeps the first time. */
export async function revokeSessionById(store: DeviceSessions, id: string, at: number) {
  if (!SESSION_ID.test(id) || !(await store.getDeviceSession(id))) return undefined;
  const s = await store.revokeDeviceSession(id, at);
  return s && { session_id: s.id, token_id: s.token_id, module_id: s.module_id, state: deviceSessionState(s, at), revoked_at: s.revoked_at, max_captures: s.max_captures, captures_used: s.captures_used };
}

/** The console's list of a token's active sessions: none once the token itself is dead
 * (disabled, revoked or expired), each within the token's expiry. */
export async function activeSessions(store: DeviceSessions, token: TokenRecord, at: number) {
  if (!token.enabled || token.revoked || (token.expires_at !== null && Date.parse(token.expires_at) <= at)) return [];
  return (await store.listActiveDeviceSessions(token.id, at)).map((found) => withinToken(found, token)).map((s) => ({
    session_id: s.id, module_id: s.module_id, state: deviceSessionState(s, at), created_at: s.created_at, expires_at: s.expires_at,
    max_captures: s.max_captures, captures_used: s.captures_used,
  }));
}

export { SessionCreateSchema } from './schemas.ts';
