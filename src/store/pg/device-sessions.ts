import type { ReserveOutcome } from '../backend.ts';
import type { Pg } from './open.ts';
import { ACTIVE_SESSIONS_LISTED, mintRefusal, type DeviceSession, type DeviceSessionCall, type MintLimit, type MintOutcome } from '../device-sessions.ts';

// Device sessions on PostgreSQL: tables, lv_mint_session and lv_reserve_session are in
// migrations.ts (V_DEVICE_SESSIONS). Each operation is one statement.

type Row = Record<string, any>;

const COLUMNS = 'id, hash, token_id, module_id, created_at, expires_at, max_captures, captures_used, revoked_at';

function sessionOf(r: Row): DeviceSession {
  return {
    id: r.id, hash: r.hash, token_id: r.token_id, module_id: r.module_id, created_at: r.created_at, expires_at: r.expires_at,
    max_captures: r.max_captures, captures_used: r.captures_used, revoked_at: r.revoked_at ?? null,
  };
}

export async function createDeviceSession(db: Pg, s: DeviceSession, limit: MintLimit, at: number): Promise<MintOutcome> {
  const out = (await db.q('SELECT lv_mint_session($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) AS r', [
    s.id, s.hash, s.token_id, s.module_id, s.created_at, Date.parse(s.created_at), s.expires_at, Date.parse(s.expires_at), s.max_captures, limit.limit, limit.windowMs,
  ])).rows[0]!.r as { created: boolean; recent?: number[] };
  if (out.created) return { kind: 'created', session: s };
  return mintRefusal(out.recent!.map(Number), limit, at) ?? { kind: 'rate_limited', retryAfterSeconds: 1 };
}

export async function getDeviceSession(db: Pg, id: string): Promise<DeviceSession | undefined> {
  const r = (await db.q(`SELECT ${COLUMNS} FROM device_sessions WHERE id = $1`, [id])).rows[0];
  return r ? sessionOf(r) : undefined;
}

export async function getDeviceSessionByHash(db: Pg, hash: string): Promise<DeviceSession | undefined> {
  const r = (await db.q(`SELECT ${COLUMNS} FROM device_sessions WHERE hash = $1`, [hash], 'lv_session_by_hash')).rows[0];
  return r ? sessionOf(r) : undefined;
}

export async function revokeDeviceSession(db: Pg, id: string, at: number): Promise<DeviceSession | undefined> {
  // COALESCE: a second revocation keeps the first one's time
  const r = (await db.q(`UPDATE device_sessions SET revoked_at = COALESCE(revoked_at, $2) WHERE id = $1 RETURNING ${COLUMNS}`, [id, new Date(at).toISOString()])).rows[0];
  return r ? sessionOf(r) : undefined;
}

export async function listDeviceSessionCalls(db: Pg, id: string): Promise<DeviceSessionCall[]> {
  const rows = (await db.q('SELECT request_id, reservation_id, units, at, refunded FROM device_session_calls WHERE session_id = $1 ORDER BY seq', [id])).rows;
  return rows.map((r) => ({ request_id: r.request_id, reservation_id: r.reservation_id, units: r.units, at: r.at, refunded: r.refunded }));
}

export async function listActiveDeviceSessions(db: Pg, tokenId: string, at: number): Promise<DeviceSession[]> {
  const rows = (await db.q(
    `SELECT ${COLUMNS} FROM device_sessions WHERE token_id = $1 AND revoked_at IS NULL AND expires_ms > $2 ORDER BY created_ms DESC, id DESC LIMIT ${ACTIVE_SESSIONS_LISTED}`,
    [tokenId, at],
  )).rows;
  return rows.map(sessionOf);
}

/** Sessions expired before `cutoff` with their calls, in batches (SKIP LOCKED: nodes pruning
 * at once take different rows). */
export async function pruneDeviceSessionsBefore(db: Pg, cutoff: number): Promise<number> {
  let removed = 0;
  for (;;) {
    const n = (await db.q(`
      WITH doomed AS (
        DELETE FROM device_sessions WHERE id IN (
          SELECT id FROM device_sessions WHERE expires_ms < $1 ORDER BY expires_ms LIMIT 1000 FOR UPDATE SKIP LOCKED)
        RETURNING id),
      calls AS (DELETE FROM device_session_calls WHERE session_id IN (SELECT id FROM doomed))
      SELECT count(*)::int AS n FROM doomed`, [cutoff])).rows[0]!.n as number;
    removed += n;
    if (n === 0) return removed;
  }
}

/** The reservation statement for a call made with a session (lv_reserve's arguments after the
 * session's id); lv_reserve for any other. Either sets synchronous_commit off for its own
 * transaction: the durability rule (docs/metering.md "Durability") lets a reservation go
 * unsynced, as the settlement's flush covers its earlier WAL; set in the same statement, the
 * setting never leaks to the pooled connection's next transaction. */
export function reserveStatement(sessionId: string | null | undefined, args: unknown[]): { text: string; values: unknown[]; name: string } {
  const unsynced = "set_config('synchronous_commit', 'off', true)";
  if (!sessionId) return { text: `SELECT lv_reserve($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) AS r, ${unsynced}`, values: args, name: 'lv_reserve' };
  return { text: `SELECT lv_reserve_session($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14) AS r, ${unsynced}`, values: [sessionId, ...args], name: 'lv_reserve_session' };
}

/** The refusals lv_reserve_session adds, worded as the LMDB store words them; null for any
 * other code. */
export function sessionRefusal(out: { code?: string; used?: number; max?: number }, units: number): Extract<ReserveOutcome, { kind: 'invalid_session_token' | 'session_captures_exceeded' }> | null {
  if (out.code === 'invalid_session_token') return { kind: 'invalid_session_token' };
  if (out.code === 'session_captures_exceeded') {
    return { kind: 'session_captures_exceeded', message: `The request has ${units} captures and the session has ${out.max! - out.used!} of ${out.max!} left; nothing was charged` };
  }
  return null;
}
