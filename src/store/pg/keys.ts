import type { JWK } from 'jose';
import type { KeyFile, KeyRevocation } from '../records.ts';
import type { Pg, Row } from './open.ts';

export async function listSigningKeys(db: Pg): Promise<KeyFile[]> {
  return (await db.q('SELECT kid, created_at, retired_at, revoked_at, revoked_by, jwk FROM signing_keys ORDER BY seq')).rows.map(keyOf);
}

export async function createFirstSigningKey(db: Pg, candidate: KeyFile): Promise<KeyFile> {
  // the partial unique index admits one unretired row: a racing insert waits for the
  // winner's commit and then does nothing, so the SELECT below sees the winner
  await db.q(`INSERT INTO signing_keys (kid, created_at, jwk) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`, [candidate.kid, candidate.created_at, JSON.stringify(candidate.jwk)]);
  const row = (await db.q('SELECT kid, created_at, retired_at, jwk FROM signing_keys WHERE retired_at IS NULL')).rows[0];
  if (!row) throw new Error('no current signing key after insert');
  return keyOf(row);
}

export async function rotateSigningKey(db: Pg, next: KeyFile, at: number, deleteRetiredBefore: number) {
  return db.tx(async (c) => {
    // rotations from two CLIs queue here instead of both retiring the same key
    await c.query(`SELECT pg_advisory_xact_lock(hashtext('lv_signing_keys'))`);
    const old = (await c.query(`UPDATE signing_keys SET retired_at = $1, retired_ms = $2 WHERE retired_at IS NULL RETURNING kid`, [new Date(at).toISOString(), at])).rows[0];
    await c.query(`INSERT INTO signing_keys (kid, created_at, jwk) VALUES ($1, $2, $3)`, [next.kid, next.created_at, JSON.stringify(next.jwk)]);
    const deleted = (await c.query(`DELETE FROM signing_keys WHERE retired_ms <= $1 RETURNING kid`, [deleteRetiredBefore])).rows.map((r) => r.kid as string);
    return { kid: next.kid, retired: (old?.kid as string | undefined) ?? null, deleted };
  });
}

export async function deleteRetiredSigningKeys(db: Pg, retiredBefore: number): Promise<string[]> {
  // revoked rows have retired_ms NULL (revokeSigningKey): kept
  return (await db.q(`DELETE FROM signing_keys WHERE retired_ms <= $1 RETURNING kid`, [retiredBefore])).rows.map((r) => r.kid as string);
}

export async function revokeSigningKey(db: Pg, kid: string, next: KeyFile, at: number, by: string): Promise<KeyRevocation | null> {
  return db.tx(async (c) => {
    // queued behind (or ahead of) a rotation, so the two never both replace the current key
    await c.query(`SELECT pg_advisory_xact_lock(hashtext('lv_signing_keys'))`);
    const row = (await c.query('SELECT retired_at, revoked_at, revoked_by FROM signing_keys WHERE kid = $1', [kid])).rows[0];
    if (!row) return null;
    const currentKid = async () => ((await c.query('SELECT kid FROM signing_keys WHERE retired_at IS NULL')).rows[0]?.kid as string | undefined) ?? null;
    if (row.revoked_at !== null) return { kid, revoked_at: row.revoked_at as string, revoked_by: (row.revoked_by as string | null) ?? null, current: await currentKid(), already_revoked: true };
    const iso = new Date(at).toISOString();
    // `jwk - 'd'` drops the private part; retired_ms NULL keeps the row (the record of the
    // revocation) out of the 30-day deletion of retired keys
    await c.query(`UPDATE signing_keys SET retired_at = COALESCE(retired_at, $2), retired_ms = NULL, revoked_at = $2, revoked_by = $3, jwk = jwk - 'd' WHERE kid = $1`, [kid, iso, by]);
    if (row.retired_at === null) await c.query(`INSERT INTO signing_keys (kid, created_at, jwk) VALUES ($1, $2, $3)`, [next.kid, next.created_at, JSON.stringify(next.jwk)]);
    return { kid, revoked_at: iso, revoked_by: by, current: await currentKid(), already_revoked: false };
  });
}

function keyOf(r: Row): KeyFile {
  const revoked = r.revoked_at ? { revoked_at: r.revoked_at as string, revoked_by: (r.revoked_by as string | null) ?? null } : {};
  return { kid: r.kid as string, created_at: r.created_at as string, retired_at: (r.retired_at as string | null) ?? null, ...revoked, jwk: (typeof r.jwk === 'string' ? JSON.parse(r.jwk) : r.jwk) as JWK };
}
