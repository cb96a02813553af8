import type pg from 'pg';
import { DuplicateTokenNameError } from '../errors.ts';
import type { TokenRecord } from '../records.ts';
import { tokenNameKey } from '../token-rules.ts';
import type { Pg } from './open.ts';

export async function getToken(db: Pg, id: string) {
  return (await db.q('SELECT record FROM tokens WHERE id = $1', [id])).rows[0]?.record as TokenRecord | undefined;
}

export async function getTokenByHash(db: Pg, hash: string) {
  return (await db.q('SELECT record FROM tokens WHERE hash = $1', [hash])).rows[0]?.record as TokenRecord | undefined;
}

export async function listTokens(db: Pg) {
  return (await db.q('SELECT record FROM tokens ORDER BY created_at, id')).rows.map((r) => r.record as TokenRecord);
}

export async function insertToken(db: Pg, token: TokenRecord) {
  await db.tx(async (c) => {
    await checkNewTokenName(c, undefined, token);
    await c.query('INSERT INTO tokens (id, hash, record, created_at) VALUES ($1, $2, $3, $4)', [token.id, token.hash, token, token.created_at]);
  });
}

/** The console's rule (token-names.ts): a new name may not match another token's, case and
 * Unicode composition ignored; duplicates that predate the rule stay. A transaction lock on
 * the name's key serialises two writers of one name on any node, without a unique index
 * that existing duplicates would break. */
export async function checkNewTokenName(c: pg.PoolClient, before: TokenRecord | undefined, after: TokenRecord) {
  const key = tokenNameKey(after.name);
  if (before && tokenNameKey(before.name) === key) return;
  await c.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`token-name:${key}`]);
  const taken = await c.query("SELECT 1 FROM tokens WHERE lower(normalize(record->>'name', NFC)) = $1 AND id <> $2 LIMIT 1", [key, after.id]);
  if (taken.rows.length > 0) throw new DuplicateTokenNameError(after.name);
}

export async function updateToken(db: Pg, id: string, change: (t: TokenRecord) => TokenRecord) {
  return db.tx(async (c) => {
    const t = (await c.query('SELECT record FROM tokens WHERE id = $1 FOR UPDATE', [id])).rows[0]?.record as TokenRecord | undefined;
    if (!t) return undefined;
    const next = change(t);
    await checkNewTokenName(c, t, next);
    await c.query('UPDATE tokens SET record = $2 WHERE id = $1', [id, next]);
    return next;
  });
}
