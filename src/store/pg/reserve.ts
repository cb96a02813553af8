import { randomBytes } from 'node:crypto';
import type { ReserveInput, ReserveOutcome } from '../backend.ts';
import { quotaRefusal } from '../quota.ts';
import type { Grant } from '../records.ts';
import { StoreUnavailableError } from '../errors.ts';
import { isoOf, type Pg } from './open.ts';
import { windowsOf } from './usage.ts';
import { reserveStatement, sessionRefusal } from './device-sessions.ts';
import { leaseForReservation } from './lease.ts';

// PostgreSQL's reservation rule: a stored function, written here beside its job as
// lmdb/reserve.ts holds LMDB's, installed where the database's differs (rules.ts: checked at
// every start, under the migration lock). A call made with a device session goes through lv_reserve_session
// (device-sessions.ts), which runs this one.

// The reservation: idempotency lookup, token re-check, quota check and the charge in one
// call, so a hot token's counter rows are locked for one round trip only. READ COMMITTED
// with row locks is enough: the three counter rows are locked in a fixed order by the
// upsert before the check; the key claim is an INSERT ... ON CONFLICT DO NOTHING on the
// primary key. Nothing is written unless the request is admitted (bar empty counter rows).
const LV_RESERVE = `CREATE OR REPLACE FUNCTION lv_reserve(
  p_token text, p_module text, p_units integer, p_request text, p_key text, p_fp text,
  p_at_ms bigint, p_created text, p_day text, p_month text,
  p_rsv text, p_led text, p_node text
) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  rec idempotency%ROWTYPE;
  held text;
  tok jsonb;
  g jsonb;
  used_now bigint;
BEGIN
  -- the token is read again here, before the key: it may have been revoked or re-granted
  -- during the upload, and a dead token hears 401 on every call, a replay included
  SELECT record INTO tok FROM tokens WHERE id = p_token;
  IF NOT FOUND THEN RETURN jsonb_build_object('kind', 'error', 'code', 'invalid_token'); END IF;
  IF NOT (tok->>'enabled')::boolean OR (tok->>'revoked')::boolean
     OR (tok->>'expires_at' IS NOT NULL AND (extract(epoch FROM (tok->>'expires_at')::timestamptz) * 1000) <= p_at_ms) THEN
    RETURN jsonb_build_object('kind', 'error', 'code', 'invalid_token');
  END IF;
  SELECT x INTO g FROM jsonb_array_elements(tok->'grants') x WHERE x->>'module_id' = p_module;
  IF NOT FOUND THEN RETURN jsonb_build_object('kind', 'error', 'code', 'module_forbidden'); END IF;
  IF p_key IS NOT NULL THEN
    SELECT * INTO rec FROM idempotency WHERE token_id = p_token AND key = p_key;
    IF FOUND THEN
      IF rec.fingerprint <> p_fp THEN RETURN jsonb_build_object('kind', 'error', 'code', 'idempotency_conflict'); END IF;
      IF rec.state = 'pending' THEN
        SELECT state INTO held FROM reservations WHERE id = rec.reservation_id;
        IF held = 'settlement_failed' THEN RETURN jsonb_build_object('kind', 'error', 'code', 'settlement_failed'); END IF;
        RETURN jsonb_build_object('kind', 'error', 'code', 'request_in_progress');
      END IF;
      RETURN jsonb_build_object('kind', 'replay', 'status', rec.status, 'body', rec.body);
    END IF;
  END IF;
  INSERT INTO counters AS c (token_id, module_id, period, win, used)
    VALUES (p_token, p_module, 'day', p_day, 0), (p_token, p_module, 'month', p_month, 0), (p_token, p_module, 'never', 'all', 0)
    ON CONFLICT (token_id, module_id, period, win) DO UPDATE SET used = c.used;
  -- The key again, now that the counters are locked: a call with the same key on another node
  -- may have been admitted while this one waited for those locks, and its units are in the
  -- counters read below. Judged on them alone, this call was refused 429 quota_exceeded where
  -- it is the same call in progress (409, or its replay): answered as if seen above.
  IF p_key IS NOT NULL AND EXISTS (SELECT 1 FROM idempotency WHERE token_id = p_token AND key = p_key) THEN
    RETURN jsonb_build_object('kind', 'retry');
  END IF;
  SELECT used INTO used_now FROM counters
    WHERE token_id = p_token AND module_id = p_module AND period = g->>'period'
      AND win = CASE g->>'period' WHEN 'day' THEN p_day WHEN 'month' THEN p_month ELSE 'all' END;
  IF g->'limit' <> 'null'::jsonb AND used_now + p_units > (g->>'limit')::bigint THEN
    RETURN jsonb_build_object('kind', 'error', 'code', 'quota_exceeded', 'used', used_now, 'grant', g);
  END IF;
  IF p_key IS NOT NULL THEN
    INSERT INTO idempotency (token_id, key, state, fingerprint, request_id, reservation_id, created_at)
      VALUES (p_token, p_key, 'pending', p_fp, p_request, p_rsv, p_created)
      ON CONFLICT DO NOTHING;
    IF NOT FOUND THEN
      -- a request with the same key was admitted since the lookup above: answer as if it
      -- had been seen there (nothing written by this call)
      RETURN jsonb_build_object('kind', 'retry');
    END IF;
  END IF;
  UPDATE counters SET used = used + p_units
    WHERE token_id = p_token AND module_id = p_module
      AND (period, win) IN (('day', p_day), ('month', p_month), ('never', 'all'));
  INSERT INTO ledger (id, at_ms, request_id, token_id, module_id, units, kind, day, month, reservation_id)
    VALUES (p_led, p_at_ms, p_request, p_token, p_module, p_units, 'charge', p_day, p_month, p_rsv);
  INSERT INTO reservations (id, request_id, token_id, module_id, units, state, day, month, created_at, node_id, idempotency_key)
    VALUES (p_rsv, p_request, p_token, p_module, p_units, 'pending', p_day, p_month, p_created, p_node, p_key);
  RETURN jsonb_build_object('kind', 'reserved');
END $$`;

/** installed by rules.ts */
export const RESERVE_RULES: readonly string[] = [LV_RESERVE];

export async function reserve(db: Pg, input: ReserveInput): Promise<ReserveOutcome> {
  const { token, moduleId, units, requestId, idempotencyKey: key, fingerprint, at } = input;
  const w = windowsOf(at);
  const created = isoOf(at);
  // the reservation names this node: its lease must be held (lease.ts says why)
  await leaseForReservation(db);
  // a same-key request admitted between the function's lookup and its claim answers
  // 'retry': the second call then sees it (a handful of rounds is plenty)
  for (let round = 0; ; round++) {
    const id = `rsv_${randomBytes(9).toString('base64url')}`;
    // the reservation commits unsynced (reserveStatement says why)
    const sql = reserveStatement(input.sessionId, [
      token.id, moduleId, units, requestId, key, fingerprint, at, created, w.day, w.month, id, `led_${randomBytes(9).toString('base64url')}`, db.node,
    ]);
    const call = db.q(sql.text, sql.values, sql.name).catch((err: unknown) => {
      // the caller answers 503 and runs nothing: if the reservation did commit, give it back
      if (err instanceof StoreUnavailableError) db.repairs.set(id, { kind: 'refund', at });
      throw err;
    });
    const out = (await call).rows[0]!.r as { kind: string; code?: string; status?: number; body?: string; used?: number; max?: number; grant?: Grant };
    if (out.kind === 'reserved') {
      return {
        kind: 'reserved',
        reservation: {
          id, request_id: requestId, token_id: token.id, module_id: moduleId, units, state: 'pending', windows: { day: w.day, month: w.month },
          created_at: created, settled_at: null, pid: process.pid, node: db.node, idempotency_key: key, unsaved_body: null,
        },
      };
    }
    if (out.kind === 'replay') return { kind: 'replay', status: out.status ?? 200, body: out.body ?? '' };
    if (out.kind === 'retry' && round < 5) continue;
    // the function refused under the same rule lmdb/reserve.ts applies; the message and the
    // reset come from the one rule both share (quota.ts)
    if (out.code === 'quota_exceeded') return quotaRefusal(moduleId, out.grant!, out.used!, units, at)!;
    const sessionRefused = sessionRefusal(out, units);
    if (sessionRefused) return sessionRefused;
    if (out.code === 'request_in_progress' || out.kind === 'retry') return { kind: 'request_in_progress' };
    return { kind: out.code as 'invalid_token' | 'module_forbidden' | 'idempotency_conflict' | 'settlement_failed' };
  }
}
