import type { SessionRecord } from '../records.ts';
import type { Pg } from './open.ts';

export async function putSession(db: Pg, key: string, session: SessionRecord) {
  await db.q('INSERT INTO sessions (key, user_id, record) VALUES ($1, $2, $3) ON CONFLICT (key) DO UPDATE SET record = EXCLUDED.record', [key, session.user_id, session]);
}

/** The idle clock moved on only where the row is still there (an UPDATE, never an upsert): a
 * delete that commits after the caller read the session is never undone by the touch. */
export async function touchSession(db: Pg, key: string, lastSeen: number) {
  const r = await db.q(
    `UPDATE sessions SET record = jsonb_set(record, '{last_seen}', to_jsonb(GREATEST((record->>'last_seen')::numeric, $2::numeric))) WHERE key = $1`,
    [key, lastSeen],
  );
  return (r.rowCount ?? 0) > 0;
}

export async function getSession(db: Pg, key: string) {
  return (await db.q('SELECT record FROM sessions WHERE key = $1', [key])).rows[0]?.record as SessionRecord | undefined;
}

export async function deleteSession(db: Pg, key: string) {
  await db.q('DELETE FROM sessions WHERE key = $1', [key]);
}

export async function deleteUserSessions(db: Pg, userId: string, keep?: string) {
  return (await db.q('DELETE FROM sessions WHERE user_id = $1 AND key IS DISTINCT FROM $2', [userId, keep ?? null])).rowCount ?? 0;
}

export async function sweepSessions(db: Pg, alive: (s: SessionRecord) => boolean) {
  const dead = (await db.q('SELECT key, record FROM sessions')).rows.filter((r) => !alive(r.record as SessionRecord)).map((r) => r.key as string);
  if (dead.length > 0) await db.q('DELETE FROM sessions WHERE key = ANY($1)', [dead]);
}
