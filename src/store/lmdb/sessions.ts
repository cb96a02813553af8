import { lmdbWrite } from './atomic.ts';
import { readLatest, type Store } from './open.ts';
import type { SessionRecord } from '../records.ts';

// Administrator sessions, keyed by the SHA-256 of the cookie value. `void` on a write inside
// a transaction: part of it, whose commit lmdbWrite reports.

export async function putSession(store: Store, key: string, session: SessionRecord): Promise<void> {
  await lmdbWrite(store, 'session', store.db.sessions.put(key, session));
}

/** The idle clock moved on only where the session is still there: checked in the write, so a
 * delete that commits after the caller read the session is never undone by the touch. */
export async function touchSession(store: Store, key: string, lastSeen: number): Promise<boolean> {
  const db = store.db.sessions;
  return lmdbWrite(store, 'session', db.transaction(() => {
    const s = db.get(key);
    if (!s) return false;
    if (lastSeen > s.last_seen) void db.put(key, { ...s, last_seen: lastSeen });
    return true;
  }));
}

export function getSession(store: Store, key: string): SessionRecord | undefined {
  readLatest(store);
  return store.db.sessions.get(key);
}

export async function deleteSession(store: Store, key: string): Promise<void> {
  await lmdbWrite(store, 'session', store.db.sessions.remove(key));
}

export async function deleteUserSessions(store: Store, userId: string, keep?: string): Promise<number> {
  const db = store.db.sessions;
  let n = 0;
  await lmdbWrite(store, 'session', db.transaction(() => {
    for (const { key, value } of db.getRange({})) {
      if (value.user_id === userId && key !== keep) {
        void db.remove(key);
        n++;
      }
    }
  }));
  return n;
}

export async function sweepSessions(store: Store, alive: (s: SessionRecord) => boolean): Promise<void> {
  const db = store.db.sessions;
  await lmdbWrite(store, 'session', db.transaction(() => {
    for (const { key, value } of db.getRange({})) if (!alive(value)) void db.remove(key);
  }));
}
