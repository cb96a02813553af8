import type { UserPatch } from '../backend.ts';
import type { UserRecord } from '../records.ts';
import type { Pg } from './open.ts';

export async function getUser(db: Pg, id: string) {
  return (await db.q('SELECT record FROM users WHERE id = $1', [id])).rows[0]?.record as UserRecord | undefined;
}

export async function getUserByName(db: Pg, username: string) {
  return (await db.q('SELECT record FROM users WHERE username = $1', [username])).rows[0]?.record as UserRecord | undefined;
}

export async function listUsers(db: Pg) {
  return (await db.q('SELECT record FROM users ORDER BY created_at, id')).rows.map((r) => r.record as UserRecord);
}

export async function createUser(db: Pg, user: UserRecord) {
  const r = await db.q('INSERT INTO users (id, username, record, created_at) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING', [user.id, user.username, user, user.created_at]);
  return r.rowCount === 1;
}

export async function updateUser(db: Pg, id: string, patch: UserPatch, check?: (before: UserRecord, after: UserRecord, others: UserRecord[]) => void) {
  return db.tx(async (c) => {
    // the check may look at every user ("an admin remains"): lock them all, so two
    // concurrent changes cannot both pass it
    const all = (await c.query(check ? 'SELECT id, record FROM users ORDER BY id FOR UPDATE' : 'SELECT id, record FROM users WHERE id = $1 FOR UPDATE', check ? [] : [id])).rows;
    const user = all.find((r) => r.id === id)?.record as UserRecord | undefined;
    if (!user) return undefined;
    const next = { ...user, ...patch };
    check?.(user, next, all.filter((r) => r.id !== id).map((r) => r.record as UserRecord));
    await c.query('UPDATE users SET record = $2 WHERE id = $1', [id, next]);
    return next;
  });
}
