// The surface of src/auth/: what the other folders of src/ may import from it.

export { generateToken, hashToken } from './business-token.ts';
export { csrfMatches } from './csrf.ts';
export { authenticateCaller, generateSessionToken, newSessionId, requireBusinessToken, sentSessionToken, sessionReader, type SessionLookup, type SessionWithParent } from './device-session.ts';
export { checkPasswordThrottled, login, parseLogin, sessionBody } from './login.ts';
export { configurePasswordChecks, hashPassword } from './password.ts';
export { LoginSchema, SessionSchema } from './schemas.ts';
export { clearedCookie, readSessionCookie, sessionCookie } from './session-cookie.ts';
export { destroySession, destroyUserSessions, findSession, sessionKey } from './session.ts';
export type { SessionRecord } from './session.ts';
export { ReadCache } from './read-cache.ts';
