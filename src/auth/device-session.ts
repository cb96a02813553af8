import { randomBytes } from 'node:crypto';
import { ServiceError } from '../errors/index.ts';
import { type CallerReads, deviceSessionUsable, type DeviceSession, type TokenRecord, isTokenLive } from '../store/index.ts';
import { authenticateBearer, hashToken } from './business-token.ts';

// lvs_ + base64url of 32 random bytes, like a business token (lvk_) but told apart by its
// prefix, so a secret scanner, a log reader and this code know which kind leaked.
export const SESSION_TOKEN_PREFIX = 'lvs_';
const SESSION_TOKEN_RE = /^lvs_[A-Za-z0-9_-]{43}$/;

export function generateSessionToken(): string {
  return SESSION_TOKEN_PREFIX + randomBytes(32).toString('base64url');
}

export function newSessionId(): string {
  return `ses_${randomBytes(9).toString('base64url')}`;
}

function bearerOf(authorization: string | undefined): string | null {
  const m = authorization === undefined ? null : /^Bearer ([^\s]+)$/i.exec(authorization.trim());
  return m ? m[1]! : null;
}

/** Whether the call presents a device session token (lvs_...), valid or not: what
 * lv_session_calls_total counts, by status, so that a dead session's device still calling is
 * seen (it counted only the calls that authenticated). */
export function sentSessionToken(authorization: string | undefined): boolean {
  return bearerOf(authorization)?.startsWith(SESSION_TOKEN_PREFIX) ?? false;
}

/** Who calls: a business token, or a session with the business token it charges. */
export interface Caller {
  token: TokenRecord;
  session: DeviceSession | null;
}

/** A session authenticates while it is neither revoked nor expired and its parent token is
 * live (an operator revoking, disabling or expiring the parent ends its sessions at once).
 * A string that names no session is refused as any unknown bearer token was before sessions
 * existed (401 invalid_token); invalid_session_token speaks of a session that did exist. */
async function authenticateSession(lookup: SessionLookup, plaintext: string, at: number): Promise<Caller> {
  const found = await lookup(hashToken(plaintext));
  if (!found) throw new ServiceError('invalid_token');
  const { session, token } = found;
  if (!deviceSessionUsable(session, at)) throw new ServiceError('invalid_session_token');
  if (!token || !isTokenLive(token, at)) throw new ServiceError('invalid_session_token');
  return { token, session };
}

/** A device session and its parent token, read together so that a cache (ReadCache) may keep
 * both; the verify path's reservation re-checks both. */
export interface SessionWithParent {
  session: DeviceSession;
  token: TokenRecord | undefined;
}
export type SessionLookup = (hash: string) => Promise<SessionWithParent | undefined>;

/** The store's session read and parent-token read, uncached. */
export function sessionReader(store: CallerReads): SessionLookup {
  return async (hash) => {
    const session = await store.getDeviceSessionByHash(hash);
    return session ? { session, token: await store.getToken(session.token_id) } : undefined;
  };
}

/** For the calls a session may make (verify, GET /v1/me): either kind of bearer token. */
export async function authenticateCaller(
  store: CallerReads,
  authorization: string | undefined,
  at: number,
  lookup?: (hash: string) => Promise<TokenRecord | undefined>,
  sessions?: SessionLookup,
): Promise<Caller> {
  const bearer = bearerOf(authorization);
  // the uncached reader is made only for a session token: a business token's call makes none
  if (bearer !== null && SESSION_TOKEN_RE.test(bearer)) return authenticateSession(sessions ?? sessionReader(store), bearer, at);
  return { token: await authenticateBearer(store, authorization, at, lookup), session: null };
}

/** For every other /v1 call: a business token, exactly as before sessions existed; a live
 * session token is refused 403 (it is a credential, just not for this), a dead one 401. */
export async function requireBusinessToken(store: CallerReads, authorization: string | undefined, at: number): Promise<TokenRecord> {
  const bearer = bearerOf(authorization);
  if (bearer !== null && SESSION_TOKEN_RE.test(bearer)) {
    await authenticateSession(sessionReader(store), bearer, at);
    throw new ServiceError('session_not_allowed');
  }
  return authenticateBearer(store, authorization, at);
}
