import { randomBytes } from 'node:crypto';
import type { ResolveAction, SettleOutcome } from '../backend.ts';
import type { Reservation, UsageRecord } from '../records.ts';
import { isStorageFailure } from '../write-health.ts';
import { resolveKey } from './idempotency.ts';
import { StoreUnavailableError } from '../errors.ts';
import { isoOf, type Pg, type Repair, type Row } from './open.ts';
import { windowsOf } from './usage.ts';
import { holdForever } from '../faults.ts';

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

export async function settle(db: Pg, reservation: Reservation, at: number, render: (usage: UsageRecord[]) => string, results: unknown, fault: 'fail' | 'hold' | null = null): Promise<SettleOutcome> {
  const w = windowsOf(at);
  // The body is rendered here with a placeholder for the usage array, and the function
  // fills in the usage as of the settlement itself: one call, and the saved body is the
  // answer. The placeholder is random, so no client text can imitate it.
  const marker = `"__usage_${randomBytes(12).toString('hex')}__"`;
  const template = render(JSON.parse(marker) as unknown as UsageRecord[]);
  let cause: unknown;
  const args = settleArgs(reservation, at, template, marker, results);
  if (fault !== 'fail') {
    try {
      // the test fault: the same function inside an explicit transaction, stopped before COMMIT
      if (fault === 'hold') await db.tx(async (c) => holdForever(`postgres settlement transaction (lv_settle ${(await c.query(SETTLE_SQL, args)).rowCount} row)`));
      const out = (await db.q(SETTLE_SQL, args, 'lv_settle')).rows[0]!.r as { ok: boolean; body?: string; state?: string };
      if (out.ok) return { kind: 'settled', body: out.body! };
      // Refused: this node's lease lapsed (another node may be refunding it) or the
      // reservation is no longer pending. Never charged, and its units are back (refund is
      // idempotent).
      await refund(db, reservation.id, at).catch(() => {});
      return { kind: 'refused', cause: new Error(`settlement refused: reservation ${reservation.id} is ${out.state ?? 'missing'} or its node lease lapsed`) };
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
async function settleUnknown(db: Pg, reservation: Reservation, job: Extract<Repair, { kind: 'settle' }>, render: (usage: UsageRecord[]) => string, cause: StoreUnavailableError): Promise<SettleOutcome> {
  try {
    const r = await resolveSettlement(db, reservation.id, job);
    if (!r.charged) return { kind: 'refused', cause: new Error(`settlement of ${reservation.id} was cut off before it committed (or its node lease lapsed meanwhile): refunded`, { cause }) };
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
export async function resolveSettlement(db: Pg, id: string, job: Extract<Repair, { kind: 'settle' }>): Promise<{ charged: true; body: string | null } | { charged: false }> {
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
  const row = (await db.q('SELECT * FROM lv_refund($1, $2, $3, $4)', [id, job.at, isoOf(job.at), `led_${randomBytes(9).toString('base64url')}`])).rows[0];
  if (row?.state === 'charged') {
    db.onSettlementResolved?.({ reservation: id, outcome: 'charged', already: true });
    return { charged: true, body: null };
  }
  db.onSettlementResolved?.({ reservation: id, outcome: 'refunded', already: false });
  return { charged: false };
}

export async function refund(db: Pg, reservationId: string, at: number) {
  let rows: Row[];
  try {
    rows = (await db.q('SELECT * FROM lv_refund($1, $2, $3, $4)', [reservationId, at, isoOf(at), `led_${randomBytes(9).toString('base64url')}`])).rows;
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
      return reservationOf((await c.query('SELECT * FROM lv_refund($1, $2, $3, $4)', [id, at, isoOf(at), `led_${randomBytes(9).toString('base64url')}`])).rows[0]!);
    }
    const next = (await c.query(`UPDATE reservations SET state = 'charged', settled_at = $2, settled_ms = $3, unsaved_body = NULL WHERE id = $1 RETURNING *`, [id, isoOf(at), at])).rows[0]!;
    await resolveKey(c, r, at);
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
