import type { ReserveOutcome } from '../backend.ts';
import type { Pg } from './open.ts';
import { ACTIVE_SESSIONS_LISTED, mintRefusal, type DeviceSession, type DeviceSessionCall, type MintLimit, type MintOutcome } from '../device-sessions.ts';

// Device sessions on PostgreSQL: the tables are migration 5 (migrations.ts); the rules are the
// stored functions and the trigger below, written here beside their jobs as
// lmdb/device-sessions.ts holds LMDB's, and installed where the database's differ (rules.ts:
// checked at every start, under the migration lock). Each operation is one statement.
//
// lv_reserve itself (reserve.ts) knows nothing of sessions: a call made with a session goes
// through lv_reserve_session, which locks the session's row (so its calls queue and cannot pass
// max_captures together), refuses a dead session (revoked, expired) before anything else, runs
// lv_reserve, and when that admits the call checks the session's captures in the same
// transaction; a refusal raises, which rolls back lv_reserve's writes, so nothing is charged.
// Idempotent replays come from lv_reserve before any admission, so a device retrying with its
// key replays even when the session is used up (never once it is dead). A reservation that becomes refunded,
// whoever refunds it (lv_refund, the lease sweep), gives its captures back to the session
// through the trigger.

// The rate check and the insert under a per-token transaction lock, so concurrent mints on
// any node queue instead of both taking the last place; answers the window's creation times
// when refused (the caller works out Retry-After from them).
const LV_MINT_SESSION = `CREATE OR REPLACE FUNCTION lv_mint_session(
  p_id text, p_hash text, p_token text, p_module text, p_created text, p_created_ms bigint,
  p_expires text, p_expires_ms bigint, p_max integer, p_limit integer, p_window_ms bigint
) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  recent bigint[];
BEGIN
  PERFORM pg_advisory_xact_lock(hashtext('lv_mint_session:' || p_token));
  SELECT coalesce(array_agg(created_ms ORDER BY created_ms), '{}') INTO recent
    FROM device_sessions WHERE token_id = p_token AND created_ms > p_created_ms - p_window_ms AND created_ms <= p_created_ms + p_window_ms;
  IF cardinality(recent) >= p_limit THEN
    RETURN jsonb_build_object('created', false, 'recent', to_jsonb(recent));
  END IF;
  INSERT INTO device_sessions (id, hash, token_id, module_id, created_at, created_ms, expires_at, expires_ms, max_captures)
    VALUES (p_id, p_hash, p_token, p_module, p_created, p_created_ms, p_expires, p_expires_ms, p_max);
  RETURN jsonb_build_object('created', true);
END $$`;

const LV_RESERVE_SESSION = `CREATE OR REPLACE FUNCTION lv_reserve_session(
  p_session text,
  p_token text, p_module text, p_units integer, p_request text, p_key text, p_fp text,
  p_at_ms bigint, p_created text, p_day text, p_month text,
  p_rsv text, p_led text, p_node text
) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  s device_sessions%ROWTYPE;
  r jsonb;
BEGIN
  SELECT * INTO s FROM device_sessions WHERE id = p_session FOR UPDATE;
  -- a dead session hears 401 before its key is looked up: a replay included
  IF s.id IS NULL OR s.token_id <> p_token OR s.revoked_at IS NOT NULL OR s.expires_ms <= p_at_ms THEN
    RETURN jsonb_build_object('kind', 'error', 'code', 'invalid_session_token');
  END IF;
  BEGIN
    r := lv_reserve(p_token, p_module, p_units, p_request, p_key, p_fp, p_at_ms, p_created, p_day, p_month, p_rsv, p_led, p_node);
    IF r->>'kind' = 'reserved' THEN
      IF s.captures_used + p_units > s.max_captures THEN
        RAISE EXCEPTION 'session captures exceeded' USING ERRCODE = 'LV002';
      END IF;
      UPDATE device_sessions SET captures_used = captures_used + p_units WHERE id = p_session;
      INSERT INTO device_session_calls (reservation_id, session_id, request_id, units, at, at_ms)
        VALUES (p_rsv, p_session, p_request, p_units, p_created, p_at_ms);
    END IF;
    RETURN r;
  EXCEPTION
    WHEN SQLSTATE 'LV002' THEN
      RETURN jsonb_build_object('kind', 'error', 'code', 'session_captures_exceeded', 'used', s.captures_used, 'max', s.max_captures);
  END;
END $$`;

// A refunded reservation's captures go back to its session, once (the call's refunded flag).
const LV_SESSION_REFUND = `CREATE OR REPLACE FUNCTION lv_session_refund() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  c device_session_calls%ROWTYPE;
BEGIN
  UPDATE device_session_calls SET refunded = true WHERE reservation_id = NEW.id AND NOT refunded RETURNING * INTO c;
  IF FOUND THEN
    UPDATE device_sessions SET captures_used = greatest(0, captures_used - c.units) WHERE id = c.session_id;
  END IF;
  RETURN NULL;
END $$`;

/** installed by rules.ts, in this order, before the trigger */
export const SESSION_RULES: readonly string[] = [LV_MINT_SESSION, LV_RESERVE_SESSION, LV_SESSION_REFUND];

/** A trigger is DDL on its table: rules.ts replaces it (CREATE OR REPLACE TRIGGER, PostgreSQL
 * 14 and later) only when its text differs from the one installed, so a start never waits for
 * the transactions writing reservations at that moment. */
export const SESSION_REFUND_TRIGGER = {
  name: 'reservations_session_refund',
  table: 'reservations',
  sql: `CREATE OR REPLACE TRIGGER reservations_session_refund AFTER UPDATE OF state ON reservations
  FOR EACH ROW WHEN (NEW.state = 'refunded' AND OLD.state IS DISTINCT FROM 'refunded')
  EXECUTE FUNCTION lv_session_refund()`,
} as const;

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
