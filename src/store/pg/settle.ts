import { randomBytes } from 'node:crypto';
import type { ResolveAction, SettleOutcome } from '../backend.ts';
import type { RenderAnswer, Reservation, UsageRecord, UsagePlaceholder } from '../records.ts';
import { isStorageFailure } from '../write-health.ts';
import { resolveKey } from './idempotency.ts';
import { StoreUnavailableError } from '../errors.ts';
import { isoOf, leaseHeld, type Pg, type Repair, type Row } from './open.ts';
import { windowsOf } from './usage.ts';
import { holdForever } from '../faults.ts';
import { keptResults } from '../kept-answer.ts';

// PostgreSQL's settlement and refund rules: stored functions (each one round trip under the
// reservation's row lock), written here beside the jobs that call them as lmdb/settle.ts holds
// LMDB's, and installed where the database's differ (rules.ts: checked at every start, under
// the migration lock). A change of a rule is an edit of its text here (and RULES_VERSION in rules.ts).

// The usage array of a token as JSON text, byte for byte what JSON.stringify makes of the
// service's usage records (the body is replayed byte for byte, so its form is fixed).
const LV_USAGE_JSON = `CREATE OR REPLACE FUNCTION lv_usage_json(p_token text, p_day text, p_month text, p_reset_day text, p_reset_month text)
RETURNS text LANGUAGE sql STABLE AS $$
  SELECT '[' || coalesce(string_agg(
    '{"module_id":' || to_json(g->>'module_id')::text
    || ',"limit":' || CASE WHEN g->'limit' = 'null'::jsonb THEN 'null' ELSE (g->>'limit') END
    || ',"period":' || to_json(g->>'period')::text
    || ',"used":' || u.used::text
    || ',"remaining":' || CASE WHEN g->'limit' = 'null'::jsonb THEN 'null' ELSE greatest(0, (g->>'limit')::bigint - u.used)::text END
    || ',"reset_at":' || CASE g->>'period' WHEN 'day' THEN to_json(p_reset_day)::text WHEN 'month' THEN to_json(p_reset_month)::text ELSE 'null' END
    || '}', ',' ORDER BY n), '') || ']'
  FROM tokens t,
       jsonb_array_elements(t.record->'grants') WITH ORDINALITY AS e(g, n),
       LATERAL (SELECT coalesce((SELECT c.used FROM counters c
                  WHERE c.token_id = t.id AND c.module_id = g->>'module_id' AND c.period = g->>'period'
                    AND c.win = CASE g->>'period' WHEN 'day' THEN p_day WHEN 'month' THEN p_month ELSE 'all' END), 0) AS used) u
  WHERE t.id = p_token
$$`;

// The settlement in one call: pending -> charged (refused when the holder's lease lapsed:
// another node may already be refunding it), the key completed with the body whose usage
// placeholder is replaced by the usage as of this moment, and the result stored.
const LV_SETTLE = `CREATE OR REPLACE FUNCTION lv_settle(
  p_rsv text, p_at_ms bigint, p_iso text, p_body text, p_marker text, p_result jsonb,
  p_day text, p_month text, p_reset_day text, p_reset_month text
) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  r reservations%ROWTYPE;
  text_body text;
BEGIN
  UPDATE reservations SET state = 'charged', settled_at = p_iso, settled_ms = p_at_ms
    WHERE id = p_rsv AND state = 'pending'
      AND EXISTS (SELECT 1 FROM nodes n WHERE n.id = reservations.node_id AND n.lease_until > now())
    RETURNING * INTO r;
  IF NOT FOUND THEN
    RETURN jsonb_build_object('ok', false, 'state', (SELECT state FROM reservations WHERE id = p_rsv));
  END IF;
  text_body := replace(p_body, p_marker, lv_usage_json(r.token_id, p_day, p_month, p_reset_day, p_reset_month));
  IF r.idempotency_key IS NOT NULL THEN
    UPDATE idempotency SET state = 'completed', completed_at = p_iso, completed_ms = p_at_ms, status = 200, body = text_body
      WHERE token_id = r.token_id AND key = r.idempotency_key;
  END IF;
  INSERT INTO results (request_id, record) VALUES (r.request_id, p_result) ON CONFLICT (request_id) DO NOTHING;
  RETURN jsonb_build_object('ok', true, 'body', text_body);
END $$`;

// Gives held units back: the ledger's UNIQUE (reservation, kind) makes a second refund of
// the same reservation impossible, whoever tries it.
const LV_REFUND_HELD = `CREATE OR REPLACE FUNCTION lv_refund_held(r reservations, p_at_ms bigint, p_iso text, p_led text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO ledger (id, at_ms, request_id, token_id, module_id, units, kind, day, month, reservation_id)
    VALUES (p_led, p_at_ms, r.request_id, r.token_id, r.module_id, r.units, 'refund', r.day, r.month, r.id);
  -- the token's counter rows locked in lv_reserve's order (day, month, never: its upsert's
  -- VALUES), before the UPDATE, whose plan locks them in whatever order they lie on disk: in
  -- that order a refund and a reservation of one token deadlocked
  PERFORM 1 FROM counters
    WHERE token_id = r.token_id AND module_id = r.module_id
      AND (period, win) IN (('day', r.day), ('month', r.month), ('never', 'all'))
    ORDER BY CASE period WHEN 'day' THEN 0 WHEN 'month' THEN 1 ELSE 2 END
    FOR UPDATE;
  UPDATE counters SET used = used - r.units
    WHERE token_id = r.token_id AND module_id = r.module_id
      AND (period, win) IN (('day', r.day), ('month', r.month), ('never', 'all'));
  IF r.idempotency_key IS NOT NULL THEN
    DELETE FROM idempotency WHERE token_id = r.token_id AND key = r.idempotency_key AND reservation_id = r.id AND state = 'pending';
  END IF;
END $$`;

// The refund of one reservation (inference failure, a settlement refused or not written, an
// unknown settlement that did not commit, an operator's "refund", a write owed after an outage,
// a lost commit nobody remembers): a pending or settlement_failed reservation becomes refunded
// under its row lock, once; any other state is answered as it is, so the caller sees whether
// the call ended charged.
const LV_REFUND = `CREATE OR REPLACE FUNCTION lv_refund(p_rsv text, p_at_ms bigint, p_iso text, p_led text) RETURNS SETOF reservations LANGUAGE plpgsql AS $$
DECLARE
  r reservations%ROWTYPE;
BEGIN
  UPDATE reservations SET state = 'refunded', settled_at = p_iso, settled_ms = p_at_ms, unsaved_body = NULL
    WHERE id = p_rsv AND state IN ('pending', 'settlement_failed')
    RETURNING * INTO r;
  IF FOUND THEN
    PERFORM lv_refund_held(r, p_at_ms, p_iso, p_led);
    RETURN NEXT r;
  ELSE
    RETURN QUERY SELECT * FROM reservations WHERE id = p_rsv;
  END IF;
END $$`;

/** installed by rules.ts, in this order */
export const SETTLE_RULES: readonly string[] = [LV_USAGE_JSON, LV_SETTLE, LV_REFUND_HELD, LV_REFUND];

export function reservationOf(r: Row): Reservation {
  return {
    id: r.id,
    request_id: r.request_id,
    token_id: r.token_id,
    module_id: r.module_id,
    units: r.units,
    state: r.state,
    windows: { day: r.day, month: r.month },
    created_at: r.created_at,
    settled_at: r.settled_at,
    pid: 0,
    node: r.node_id,
    idempotency_key: r.idempotency_key,
    unsaved_body: r.unsaved_body,
  };
}

/** `renew`: lease.ts's renewal, given by the caller (lease.ts imports this file) */
export async function settle(db: Pg, reservation: Reservation, at: number, render: RenderAnswer, results: unknown, fault: 'fail' | 'hold' | null, renew: (db: Pg) => Promise<boolean>): Promise<SettleOutcome> {
  const w = windowsOf(at);
  // The body is rendered here with a placeholder for the usage array, and the function
  // fills in the usage as of the settlement itself: one call, and the saved body is the
  // answer. The placeholder is random, so no client text can imitate it.
  const marker = `"__usage_${randomBytes(12).toString('hex')}__"`;
  const template = render(JSON.parse(marker) as UsagePlaceholder);
  let cause: unknown;
  const args = settleArgs(reservation, at, template, marker, results);
  if (fault !== 'fail') {
    try {
      // the test fault: the same function inside an explicit transaction, stopped before COMMIT
      if (fault === 'hold') await db.tx(async (c) => holdForever(`postgres settlement transaction (lv_settle ${(await c.query(SETTLE_SQL, args)).rowCount} row)`));
      let out = (await db.q(SETTLE_SQL, args, 'lv_settle')).rows[0]!.r as { ok: boolean; body?: string; state?: string };
      // Refused while still pending: the lease lapsed in the database. If this node's own
      // (monotonic) clock says it renewed in time, the database's clock stepped forward past it (no sweep takes a
      // lease renewed since: recovery.ts): the renewal extends it, and the settlement is made.
      if (!out.ok && out.state === 'pending' && leaseHeld(db) && (await renew(db))) {
        out = (await db.q(SETTLE_SQL, args, 'lv_settle')).rows[0]!.r as { ok: boolean; body?: string; state?: string };
      }
      if (out.ok) return { kind: 'settled', body: out.body! };
      // Refused: this node's lease lapsed (another node may be refunding it) or the
      // reservation is no longer pending. Never charged, and its units are back (refund is
      // idempotent): by this refund, or by the sweep that got there first.
      const refunded = await refundHere(db, reservation.id, at).catch(() => false);
      return { kind: 'refused', refunded, cause: new Error(`settlement refused: reservation ${reservation.id} is ${out.state ?? 'missing'} or its node lease lapsed`) };
    } catch (err) {
      cause = err;
    }
  } else cause = new Error('injected settlement failure (TEST_SETTLEMENT_FAIL_PREFIX)');
  if (isStorageFailure(cause)) {
    // the database could not write the settlement (a full disk): nothing was charged, so the
    // units go back now, or once it can write (repairs), and the answer says which
    const refunded = await refund(db, reservation.id, at).then(() => true, () => {
      db.repairs.set(reservation.id, { kind: 'refund', at });
      return false;
    });
    return { kind: 'not_recorded', refund: refunded ? 'refunded' : 'refund_deferred', cause };
  }
  if (cause instanceof StoreUnavailableError) return settleUnknown(db, reservation, { kind: 'settle', at, args, keyed: reservation.idempotency_key !== null }, render, cause);
  // The units stay reserved and the key pending for an operator; the answer that could not
  // be saved is kept on the reservation, so a "charge" resolution can complete the key.
  let marked: unknown = null;
  try {
    const usage = JSON.parse((await db.q('SELECT lv_usage_json($1, $2, $3, $4, $5) AS u', [reservation.token_id, w.day, w.month, w.resetDay, w.resetMonth])).rows[0]!.u as string) as UsageRecord[];
    await db.q(`UPDATE reservations SET state = 'settlement_failed', unsaved_body = $2 WHERE id = $1 AND state = 'pending'`, [reservation.id, render(usage)]);
  } catch (err) {
    marked = err;
    // owed: marked for the operator once the database answers again (unless it did commit);
    // without the usage as of settlement no answer is kept, so "charge" releases the key
    if (err instanceof StoreUnavailableError) db.repairs.set(reservation.id, { kind: 'mark', body: null });
  }
  return { kind: 'settlement_failed', cause: marked === null ? cause : new AggregateError([cause, marked], 'settlement failed, and marking it settlement_failed failed too') };
}

/** prepared as 'lv_settle': every caller must send this very text under that name */
export const SETTLE_SQL = 'SELECT lv_settle($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) AS r';

/** lv_settle's arguments: `body` with `marker` where the usage goes (a marker absent from the
 * body saves it as it is) */
export function settleArgs(r: Pick<Reservation, 'id' | 'token_id' | 'module_id'>, at: number, body: string, marker: string, results: unknown): unknown[] {
  const w = windowsOf(at);
  return [r.id, at, isoOf(at), body, marker, { at: isoOf(at), token_id: r.token_id, module_id: r.module_id, results }, w.day, w.month, w.resetDay, w.resetMonth];
}

/** The connection broke during the settlement (the primary died, a failover): the commit may
 * have happened (even reached the standby now promoted) with its acknowledgement lost, so the
 * outcome is unknown, and neither "charged" nor "refunded" may be assumed. It is resolved
 * against whichever host accepts writes: at once if one answers, else by the node as soon as
 * one does (Pg.repairs, after the lease renewal that ends the outage). Never marked
 * settlement_failed: that would hold the key for an operator, though the service can tell. */
async function settleUnknown(db: Pg, reservation: Reservation, job: Extract<Repair, { kind: 'settle' }>, render: RenderAnswer, cause: StoreUnavailableError): Promise<SettleOutcome> {
  try {
    const r = await resolveSettlement(db, reservation.id, job);
    if (!r.charged) return { kind: 'refused', refunded: r.refundedHere, cause: new Error(`settlement of ${reservation.id} was cut off before it committed (or its node lease lapsed meanwhile): refunded`, { cause }) };
    if (r.body !== null) return { kind: 'settled', body: r.body };
    // charged, without a key to hold the answer: this call's answer with the usage as of now
    const w = windowsOf(job.at);
    const usage = JSON.parse((await db.q('SELECT lv_usage_json($1, $2, $3, $4, $5) AS u', [reservation.token_id, w.day, w.month, w.resetDay, w.resetMonth])).rows[0]!.u as string) as UsageRecord[];
    return { kind: 'settled', body: render(usage) };
  } catch (err) {
    if (!(err instanceof StoreUnavailableError)) throw err;
    db.repairs.set(reservation.id, job);
    return { kind: 'outcome_unknown', keyed: job.keyed, cause };
  }
}

/** Settles a settlement whose outcome was unknown, exactly once whatever happened before,
 * since lv_settle and lv_refund both change only a pending reservation, under its row lock:
 * with an Idempotency-Key, settled now (the key completed with the answer, which the client's
 * retry replays) or found settled already (its saved answer read back); without a key the
 * client's retry is a new call, so one that did not commit is refunded rather than charged. A
 * reservation whose node lease lapsed meanwhile is refunded (a sweep may have done it). */
export async function resolveSettlement(db: Pg, id: string, job: Extract<Repair, { kind: 'settle' }>): Promise<{ charged: true; body: string | null } | { charged: false; refundedHere: boolean }> {
  if (job.keyed) {
    const out = (await db.q(SETTLE_SQL, job.args, 'lv_settle')).rows[0]!.r as { ok: boolean; body?: string; state?: string };
    if (out.ok) {
      db.onSettlementResolved?.({ reservation: id, outcome: 'charged', already: false });
      return { charged: true, body: out.body! };
    }
    if (out.state === 'charged') {
      const saved = (await db.q(`SELECT i.body FROM reservations r JOIN idempotency i ON i.token_id = r.token_id AND i.key = r.idempotency_key AND i.reservation_id = r.id WHERE r.id = $1 AND i.state = 'completed'`, [id])).rows[0];
      db.onSettlementResolved?.({ reservation: id, outcome: 'charged', already: true });
      return { charged: true, body: (saved?.body as string | undefined) ?? null };
    }
  }
  // lv_refund changes only a pending reservation, under its row lock: a settlement that was
  // still committing when the connection broke is waited for, and the row it returns says
  // whether the call ended charged (a state read first could be stale by the refund)
  const args = refundArgs(id, job.at);
  const row = (await db.q(REFUND_SQL, args)).rows[0];
  if (row?.state === 'charged') {
    db.onSettlementResolved?.({ reservation: id, outcome: 'charged', already: true });
    return { charged: true, body: null };
  }
  db.onSettlementResolved?.({ reservation: id, outcome: 'refunded', already: false });
  return { charged: false, refundedHere: await wroteRefund(db, args).catch(() => false) };
}

/** lv_refund's statement: every refund of one reservation, on whichever path, sends it with
 * refundArgs; it answers the reservation's row after the call (refunded now, or as it was) */
export const REFUND_SQL = 'SELECT * FROM lv_refund($1, $2, $3, $4)';

/** lv_refund's arguments: a fresh ledger id for the refund entry it may write */
export function refundArgs(id: string, at: number): unknown[] {
  return [id, at, isoOf(at), `led_${randomBytes(9).toString('base64url')}`];
}

/** Whether the lv_refund call made with `args` wrote the refund: its ledger entry is there
 * (lv_refund answers a reservation refunded before, by the sweep of another node, as it
 * answers one it refunds, and that node counts the units in its metrics). */
async function wroteRefund(db: Pg, args: unknown[]): Promise<boolean> {
  return (await db.q('SELECT 1 FROM ledger WHERE id = $1', [args[3]])).rowCount === 1;
}

/** refund(), answering whether this call gave the units back (see wroteRefund) */
async function refundHere(db: Pg, reservationId: string, at: number): Promise<boolean> {
  const args = refundArgs(reservationId, at);
  await refund(db, reservationId, at, args);
  return wroteRefund(db, args);
}

export async function refund(db: Pg, reservationId: string, at: number, args = refundArgs(reservationId, at)) {
  let rows: Row[];
  try {
    rows = (await db.q(REFUND_SQL, args)).rows;
  } catch (err) {
    // the units are owed back: refunded once the database answers again
    if (err instanceof StoreUnavailableError) db.repairs.set(reservationId, { kind: 'refund', at });
    throw err;
  }
  return rows[0] ? reservationOf(rows[0]) : undefined;
}

export async function resolveReservation(db: Pg, id: string, action: ResolveAction, at: number): Promise<Reservation | undefined | 'not_pending'> {
  return db.tx(async (c) => {
    const r = (await c.query('SELECT * FROM reservations WHERE id = $1 FOR UPDATE', [id])).rows[0];
    if (!r) return undefined;
    if (r.state !== 'settlement_failed') return 'not_pending' as const;
    if (action === 'refund') {
      return reservationOf((await c.query(REFUND_SQL, refundArgs(id, at))).rows[0]!);
    }
    const next = (await c.query(`UPDATE reservations SET state = 'charged', settled_at = $2, settled_ms = $3, unsaved_body = NULL WHERE id = $1 RETURNING *`, [id, isoOf(at), at])).rows[0]!;
    await resolveKey(c, r, at);
    // the results the failed settlement could not store, as lv_settle would have stored them
    const results = keptResults(r.unsaved_body);
    if (results !== undefined) {
      await c.query('INSERT INTO results (request_id, record) VALUES ($1, $2) ON CONFLICT (request_id) DO NOTHING',
        [r.request_id, { at: isoOf(at), token_id: r.token_id, module_id: r.module_id, results }]);
    }
    return reservationOf(next);
  });
}

export async function getReservation(db: Pg, id: string) {
  const r = (await db.q('SELECT * FROM reservations WHERE id = $1', [id])).rows[0];
  return r ? reservationOf(r) : undefined;
}

export async function listSettlementFailed(db: Pg) {
  return (await db.q(`SELECT * FROM reservations WHERE state = 'settlement_failed' ORDER BY created_at, id`)).rows.map(reservationOf);
}
