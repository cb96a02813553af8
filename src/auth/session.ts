import { createHash, randomBytes } from 'node:crypto';
import type { Config } from '../config/index.ts';
import type { AdminSessions, Role, SessionRecord } from '../store/index.ts';
import { newCsrfToken } from './csrf.ts';

export type { SessionRecord };

// Administrator sessions, server-side in the store so that every API worker (and every node
// on a shared store) sees the same ones and logout is immediate everywhere. The key is the SHA-256 of the cookie value: a copy of
// the store does not hand out live sessions.

/** last_seen is written at most this often: a write per admin GET buys nothing. */
const TOUCH_MS = 15_000;

export function sessionKey(id: string): string {
  return createHash('sha256').update(id).digest('hex');
}

const idleMs = (config: Config) => config.SESSION_IDLE_MINUTES * 60_000;

export function sessionAlive(config: Config, s: SessionRecord, at: number): boolean {
  return at < s.expires_at && at - s.last_seen < idleMs(config);
}

/** A new session with a fresh 256-bit id (a new id at every login: no fixation). */
export async function createSession(store: AdminSessions, config: Config, user: { id: string; username: string; role: Role }, at: number): Promise<{ id: string; session: SessionRecord }> {
  const id = randomBytes(32).toString('base64url');
  const session: SessionRecord = {
    user_id: user.id,
    username: user.username,
    role: user.role,
    csrf_token: newCsrfToken(),
    created_at: at,
    last_seen: at,
    expires_at: at + config.SESSION_ABSOLUTE_HOURS * 3_600_000,
  };
  await store.putSession(sessionKey(id), session);
  return { id, session };
}

/** The live session behind a cookie value, its idle clock moved on; dead ones are deleted. */
export async function findSession(store: AdminSessions, config: Config, id: string | undefined, at: number): Promise<{ key: string; session: SessionRecord } | undefined> {
  if (id === undefined || id.length > 128) return undefined;
  const key = sessionKey(id);
  const session = await store.getSession(key);
  if (!session) return undefined;
  if (!sessionAlive(config, session, at)) {
    store.deleteSession(key).catch(() => {});
    return undefined;
  }
  if (at - session.last_seen >= TOUCH_MS) {
    // Awaited (at most once per TOUCH_MS per session, admin traffic only): a write still in
    // flight when the next call of the session reaches another API worker or node would
    // have it judge idleness by the old time. Only the idle clock is written, and only where
    // the session still exists: writing back the record read above recreated a session that
    // a logout, a password change or a disabled account had deleted in between.
    if (!(await store.touchSession(key, at))) return undefined;
    session.last_seen = at;
  }
  return { key, session };
}

export async function destroySession(store: AdminSessions, key: string): Promise<void> {
  await store.deleteSession(key);
}

/** Ends a user's sessions (password changed, account disabled or demoted), except `keep`. */
export function destroyUserSessions(store: AdminSessions, userId: string, keep?: string): Promise<number> {
  return store.deleteUserSessions(userId, keep);
}

/** Drops dead sessions; run at login, where a scan of the (few) admin sessions is cheap. */
export function sweepSessions(store: AdminSessions, config: Config, at: number): Promise<void> {
  return store.sweepSessions((s) => sessionAlive(config, s, at));
}
